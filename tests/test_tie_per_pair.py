"""A random tie's label never depends on the batch its pair came in (issue 38, part 5): it is
seeded per pair, from the blend's seed and the pair's ids, so any split of the pairs (requests
of any size, `--window`, label files cut apart) gives every pair the label the whole set gives.
Once, one generator served a whole blend run, and a served panel gave 6 of 12 tied pairs
another label when each pair was asked alone."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai_server import OpenAITestServer
from serve_helpers import API_KEY, Served, answer_of, dl19_frame
from typer.testing import CliRunner

import judgeblender as jb
from judgeblender.blend import BallotTable, Blender, Vote
from judgeblender.cli import app

def _vote(label: int | None, spread: int) -> Vote | None:
    if label is None:
        return None
    probs = [0.1] * 4
    probs[label] = 0.7 - 0.1 * (spread % 2)  # two judges with the same label may still tie on probs
    probs[(label + 1) % 4] += 0.1 * (spread % 2)
    return Vote(label, tuple(probs))


@st.composite
def ballots_and_split(draw):
    """Pairs whose judges often tie, and a split of them: parts in any order, each shuffled."""
    n = draw(st.integers(1, 40))
    judges = ["a", "b", "c", "d"][:draw(st.integers(2, 4))]
    label = st.one_of(st.none(), st.integers(0, 3))
    rows = [((f"q{draw(st.integers(0, 3))}", f"d{i}"),
             {j: _vote(draw(label), i) for j in judges}) for i in range(n)]
    order = draw(st.permutations(range(n)))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, n - 1)), max_size=n)) if n > 1 else [])
    bounds = [0, *cuts, n]
    parts = [[rows[k] for k in order[a:b]] for a, b in zip(bounds, bounds[1:]) if b > a]
    return rows, parts


@settings(max_examples=150, deadline=None)
@given(data=ballots_and_split(), method=st.sampled_from(["mv", "median", "prob-argmax", "weighted"]),
       seed=st.integers(0, 2**31))
def test_any_split_of_the_pairs_gives_the_same_random_ties(data, method, seed):
    rows, parts = data
    weights = {"weights": {"a": 1, "b": 1, "c": 2, "d": 1}} if method == "weighted" else {}

    def labels(chunk):
        table = BallotTable.from_votes(chunk)
        if method == "weighted":
            weights["weights"] = {j: w for j, w in {"a": 1, "b": 1, "c": 2, "d": 1}.items() if j in table.judges}
        return Blender(method, tie="random", seed=seed, **weights).blend(table).by_pair()

    whole = labels(rows)
    pieces: dict = {}
    for part in parts:
        pieces.update(labels(part))
    assert pieces == whole
    # one pair blended on its own, with its ids, picks what the table picks
    blender = Blender(method, tie="random", seed=seed, **weights)
    for pair, votes in rows:
        if method != "weighted" or set(votes) == set(weights["weights"]):
            assert blender.vote(votes, pair=pair).label == whole[pair]


def test_the_pick_follows_the_seed_and_the_pair_and_spreads_over_the_tied_labels():
    votes = {"a": 0, "b": 1, "c": 2, "d": 3}
    pairs = [("q", f"d{i}") for i in range(400)]
    by_seed = {seed: [Blender("mv", tie="random", seed=seed).vote(votes, pair=p).label for p in pairs]
               for seed in (0, 1)}
    assert by_seed[0] != by_seed[1]
    for labels in by_seed.values():
        assert all(70 <= labels.count(lab) <= 130 for lab in range(4)), [labels.count(lab) for lab in range(4)]
    # a two-way tie picks each of its labels too, and never another
    two = [Blender("mv", tie="random", seed=0).vote({"a": 1, "b": 3}, pair=p).label for p in pairs]
    assert set(two) == {1, 3} and 150 <= two.count(1) <= 250
    # ("q1", "0d") and ("q10", "d") are two pairs, not one string
    picks = {Blender("mv", tie="random", seed=s).vote(votes, pair=("q1", "0d")).label
             == Blender("mv", tie="random", seed=s).vote(votes, pair=("q10", "d")).label for s in range(40)}
    assert picks == {True, False}


def by_pair(blended: pd.DataFrame) -> dict:
    """A blend's DataFrame (qid, docno, label) as {pair: label}, None where it is <NA>."""
    return {(q, d): None if pd.isna(lab) else int(lab) for q, d, lab in blended[["qid", "docno", "label"]].itertuples(index=False)}


@pytest.fixture
def frame() -> pd.DataFrame:
    return dl19_frame(30)


def test_a_served_panel_gives_a_tied_pair_the_same_label_in_any_request(frame, tmp_path, monkeypatch):
    """One request of every pair, one pair a request, jb.Client, jb.judge,
    `judge --window 4` and `blend` of the members' label files cut in two: one label per pair."""
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    panel = tmp_path / "panel.toml"
    panel.write_text('name = "pair"\n[aggregator]\nmethod = "mv"\ntie = "random"\nseed = 3\n'
                     '[[judges]]\nmodel = "openai:test-model"\nprompt = "umbrela"\nid = "u"\n'
                     '[[judges]]\nmodel = "openai:test-model"\nprompt = "thomas"\nid = "t"\n')
    pairs = [dict(zip(("qid", "docid", "query", "passage"), row)) for row in frame.itertuples(index=False)]
    with OpenAITestServer(answer_of, max_requests=5000) as upstream:
        with Served(["--panel", str(panel), "--base-url", upstream.base_url, "--store", str(tmp_path / "s.sqlite")]) as served:
            whole = served.judge(pairs)
            assert whole.status == 200, whole
            results = whole.json()["results"]
            labels = {(r["qid"], r["docid"]): r["label"] for r in results}
            tied = [(r["qid"], r["docid"]) for r in results if r["details"].get("tied")]
            assert len(tied) >= 8  # the two prompts disagree often: enough ties to tell
            for pair in pairs:  # each pair alone
                alone = served.judge([pair])
                assert alone.status == 200, alone
                (r,) = alone.json()["results"]
                assert r["label"] == labels[(r["qid"], r["docid"])], (r["qid"], r["docid"])
            client = jb.Client(served.url).judge(frame)
            assert by_pair(client.blend("mv", tie="random", seed=3)) == labels
        local = jb.judge(frame, str(panel), options={"base_url": upstream.base_url},
                         store=tmp_path / "s.sqlite", progress=False)
        assert by_pair(local.blend("mv", tie="random", seed=3)) == labels
        q, c, p = tmp_path / "q.tsv", tmp_path / "c.jsonl", tmp_path / "p.tsv"
        q.write_text("".join(f"{a}\t{b}\n" for a, b in dict(zip(frame["qid"], frame["query"])).items()))
        c.write_text("".join(json.dumps({"docid": d, "text": t}) + "\n" for d, t in zip(frame["docid"], frame["passage"])))
        p.write_text("".join(f"{a}\t{b}\n" for a, b in zip(frame["qid"], frame["docid"])))
        out = tmp_path / "w.qrels"
        res = CliRunner().invoke(app, ["judge", "-q", str(q), "-c", str(c), "-p", str(p), "-o", str(out), "--panel",
                                       str(panel), "--base-url", upstream.base_url, "--store", str(tmp_path / "s.sqlite"),
                                       "--no-progress", "--window", "4"])
        assert res.exit_code == 0, res.output
    windowed = {(a, d): int(lab) for a, _, d, lab in (line.split() for line in out.read_text().splitlines())}
    assert windowed == {k: v for k, v in labels.items() if v is not None}
    # `blend` of the members' labels, the pairs cut in two files: each half gets the whole's labels
    members = {m: {(r["qid"], r["docid"]): r["judges"][m]["label"] for r in results} for m in ("u", "t")}
    halves = [list(labels)[::2], list(labels)[1::2]]
    blended: dict = {}
    for k, half in enumerate(halves):
        paths = []
        for m, got in members.items():
            path = tmp_path / f"{m}{k}.qrels"
            path.write_text("".join(f"{a} 0 {d} {got[(a, d)]}\n" for a, d in half if got[(a, d)] is not None))
            paths.append(f"{m}={path}")
        out = tmp_path / f"b{k}.qrels"
        res = CliRunner().invoke(app, ["blend", *paths, "--tie", "random", "--seed", "3", "-o", str(out)])
        assert res.exit_code == 0, res.output
        blended.update({(a, d): int(lab) for a, _, d, lab in (line.split() for line in out.read_text().splitlines())})
    assert blended == {k: v for k, v in labels.items() if v is not None}
