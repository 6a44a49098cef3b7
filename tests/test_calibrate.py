"""`calibrate`: held-out scoring by query folds, the one-standard-error choice, and the panel file."""

import random

import pytest
from typer.testing import CliRunner

from judgeblender.blend import BallotTable
from judgeblender.cli import app
from judgeblender.panels.calibrate import calibrate
from judgeblender.panels.panel import load_panel

JUDGES = ["llamacpp:default/thomas/logprobs", "llamacpp:default/umbrela/logprobs", "llamacpp:gemma-270m/faggioli/generate"]


def seed_set(n_queries=8, per_query=10, seed=1):
    """Judge 0 copies the gold label; judge 1 is right 60% of the time; judge 2 always says 2."""
    rng = random.Random(seed)
    gold, rows = {}, []
    for q in range(n_queries):
        for d in range(per_query):
            label = rng.randrange(4)
            gold.setdefault(f"q{q}", {})[f"d{d}"] = label
            noisy = label if rng.random() < 0.6 else rng.randrange(4)
            rows.append(((f"q{q}", f"d{d}"), {JUDGES[0]: label, JUDGES[1]: noisy, JUDGES[2]: 2}))
    return BallotTable.from_votes(rows, JUDGES), gold


def test_a_perfect_member_is_chosen_over_any_blend():
    table, gold = seed_set()
    cal = calibrate(table, gold, folds=4)
    assert cal.chosen.name == f"member {JUDGES[0]}"
    assert cal.chosen.mean == pytest.approx(1.0)
    names = {c.name for c in cal.candidates}
    assert {"mv(avg)", "av", "learned weights", "learned thresholds"} <= names


def test_folds_never_split_a_query():
    table, gold = seed_set()
    cal = calibrate(table, gold, folds=3)
    assert cal.folds == 3 and all(len(c.fold_kappas) == 3 for c in cal.candidates)


def test_too_small_a_seed_set_is_reported_and_nothing_is_chosen():
    table, gold = seed_set(n_queries=2, per_query=5)
    cal = calibrate(table, gold)
    assert cal.chosen is None
    assert "too small to choose: 2 queries and 10 labelled pairs" in cal.warnings[-1]


def test_cli_writes_a_panel_file_that_loads(tmp_path):
    table, gold = seed_set()
    qrels = tmp_path / "human.qrels"
    qrels.write_text("".join(f"{q} 0 {d} {l}\n" for q, docs in gold.items() for d, l in docs.items()))
    details = tmp_path / "d.jsonl"
    import json

    with details.open("w") as fh:
        for (q, d), votes in zip(table.pairs, (table.votes(i) for i in range(table.n_pairs))):
            fh.write(json.dumps({"qid": q, "docid": d, "judges": {j: {"label": v.label} for j, v in votes.items()}}) + "\n")
    out = tmp_path / "calibrated.toml"
    result = CliRunner().invoke(app, ["calibrate", "--gold", str(qrels), "--details", str(details), "-o", str(out),
                                      "--folds", "4"])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "<- chosen" in text and "Held-out Cohen's kappa" in text
    panel = load_panel(out, "generate", {})
    assert [s.id for s in panel.judges] == [JUDGES[0]]
    assert panel.judges[0].model == "llamacpp:default" and panel.judges[0].prompt == "thomas"


def test_cli_refuses_to_write_on_a_tiny_seed_set(tmp_path):
    qrels = tmp_path / "h.qrels"
    qrels.write_text("q1 0 a 1\nq1 0 b 0\n")
    labels = tmp_path / "j.qrels"
    labels.write_text("q1 0 a 1\nq1 0 b 1\n")
    result = CliRunner().invoke(app, ["calibrate", "--gold", str(qrels), "--labels", str(labels), "-o",
                                      str(tmp_path / "x.toml")])
    assert result.exit_code != 0
    assert not (tmp_path / "x.toml").exists()
