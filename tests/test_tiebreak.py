"""The LLM tie-breaker: consulted only on panel ties or member spread >= threshold; an invalid
answer leaves the panel's own tie rule in place, recorded; never an invalid answer as a label."""

import subprocess

import numpy as np
import sys
import os
from pathlib import Path

from judgeblender.blend import BallotTable, Blender, Vote
from judgeblender.blend.tiebreak import DECIDED, INVALID, KEPT, apply_tiebreaker, spreads, to_consult

SRC = str(Path(__file__).resolve().parents[1] / "src")
ROWS = [
    (("q1", "agree"), {"a": 1, "b": 1, "c": 1}),       # spread 0: kept
    (("q1", "tie"), {"a": 0, "b": 1, "c": None}),      # mv tie {0,1}: consulted
    (("q1", "wide"), {"a": 0, "b": 2, "c": 2}),        # no tie, spread 2: consulted
    (("q1", "narrow"), {"a": 2, "b": 3, "c": 3}),      # spread 1: kept
    (("q2", "nobody"), {"a": None, "b": None, "c": None}),  # no vote: stays unjudged
]


def table():
    return BallotTable.from_votes(ROWS, ["a", "b", "c"])


def test_spread_is_highest_minus_lowest_valid_label():
    assert spreads(table()).tolist() == [0, 1, 2, 1, -1]


def test_only_ties_and_wide_disagreements_are_consulted():
    result = Blender("mv", tie="avg").blend(table())
    assert to_consult(result, spread=2) == [("q1", "tie"), ("q1", "wide")]
    assert to_consult(result, spread=4) == [("q1", "tie")]
    assert to_consult(result, spread=1) == [("q1", "tie"), ("q1", "wide"), ("q1", "narrow")]


def test_a_valid_answer_decides_and_an_invalid_one_leaves_the_panels_tie_rule_recorded():
    result = Blender("mv", tie="min").blend(table())
    answers = {("q1", "tie"): None, ("q1", "wide"): 3, ("q1", "agree"): 0}  # "agree" not consulted
    tb = apply_tiebreaker(result, answers, "big", spread=2)
    assert tb.labels == (1, 0, 3, 3, None)  # tie {0,1} -> min rule 0 kept; wide 2 -> 3
    assert tb.outcomes == (KEPT, INVALID, DECIDED, KEPT, KEPT)
    assert tb.changed == 1
    assert tb.summary_lines()[1] == "  decided by the tie-breaker: 1 (1 changed the panel's label)"
    assert tb.summary_lines()[2] == "  tie-breaker answer invalid, panel's own decision (tie rule min) kept: 1"


def test_a_pair_missing_from_the_tiebreakers_file_counts_as_invalid():
    result = Blender("mv", tie="max").blend(table())
    tb = apply_tiebreaker(result, {}, "big")
    assert tb.counts() == {KEPT: 3, INVALID: 2}
    assert tb.labels == (1, 1, 2, 3, None)


def _label_files(tmp_path):
    files = []
    for j in "abc":
        f = tmp_path / f"{j}.qrels"
        f.write_text("".join(f"{q} 0 {d} {v[j]}\n" for (q, d), v in ROWS if v[j] is not None))
        files.append(f)
    big = tmp_path / "big.qrels"
    big.write_text("".join(f"{q} 0 {d} 3\n" for (q, d), _ in ROWS))  # the tie-breaker says 3 everywhere
    return files, big


def _blend(*args):
    return subprocess.run([sys.executable, "-m", "judgeblender", "blend", *map(str, args)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=120)


def test_blend_cli_takes_the_tiebreakers_labels_from_a_file_and_reports_pairs_decided(tmp_path):
    files, big = _label_files(tmp_path)
    big.write_text("q1 0 tie 1.\nq1 0 wide 3\nq1 0 agree 0\n")  # "1." is unreadable: invalid
    out = tmp_path / "o.qrels"
    r = _blend(*files, "--tiebreaker", big, "--tie", "min", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "tie-breaker big: consulted on 2 pairs (panel ties or member spread >= 2; 1 of them ties)" in r.stderr
    assert out.read_text() == "q1 0 agree 1\nq1 0 tie 0\nq1 0 wide 3\nq1 0 narrow 3\n"


def test_when_judging_the_tiebreaker_is_called_on_the_consulted_pairs_only(tiny):
    from judgeblender.backends.scripted import ScriptedBackend
    from judgeblender.judges import Judge, JudgeSpec
    from judgeblender.panels.run_panel import run_tiebreaker
    from judgeblender.pairs import read_corpus, read_queries

    rows = [(("q1", "d1"), {"a": 3, "b": 3}),   # agree: not asked
            (("q1", "d2"), {"a": 0, "b": 2}),   # tie and spread 2: asked, answers 1
            (("q2", "d3"), {"a": 1, "b": 2}),   # tie: asked, answers nonsense -> invalid
            (("q2", "d4"), {"a": 0, "b": 0})]   # agree: not asked
    result = Blender("mv", tie="max").blend(BallotTable.from_votes(rows, ["a", "b"]))
    backend = ScriptedBackend(rules=[{"contains": "goldfish is a freshwater", "output": "##final score: 1"},
                                     {"contains": "Eiffel", "output": "I cannot say"}])
    judge = Judge(JudgeSpec(model="scripted:tb", prompt="umbrela", invalid_policy="no-retry", id="big"),
                  backend=backend)
    tb, run = run_tiebreaker(result, judge, read_queries(tiny / "queries.tsv"), read_corpus(tiny / "corpus.jsonl"))
    assert len(backend.calls) == 2
    assert [(p.qid, p.docid) for p in run.pairs] == [("q1", "d2"), ("q2", "d3")]
    assert tb.labels == (3, 1, 2, 0)  # d3: tie {1,2} -> max rule 2 kept, recorded invalid
    assert tb.outcomes == (KEPT, DECIDED, INVALID, KEPT)


def test_judge_panel_calls_the_panel_files_tiebreaker_on_ties_only_and_records_the_outcome(mock_model, tiny, tmp_path):
    import json

    from typer.testing import CliRunner

    from judgeblender.cli import app

    # thomas 3, multicriteria 1, sun-two-step 2 on every pair: a three-way tie everywhere; umbrela (the
    # tie-breaker's prompt) answers 0. Rules are tried in order, umbrela's marker first.
    mock_model.rules = [{"contains": "Measure how well the content matches a likely intent", "output": "##final score: 0"},
                        {"contains": "A person typed this query", "output": "Final score: 3"},
                        {"contains": "Exactness: 1\nTopicality: 1", "output": "1"},
                        {"contains": "criterion", "output": "1"},
                        {"contains": "The passage below was found to be relevant", "output": "Grade: 2"},
                        {"contains": "Does the passage contain an answer", "output": "Yes"}]
    panel = tmp_path / "p.toml"
    panel.write_text('[aggregator]\nmethod = "mv"\ntie = "avg"\n'
                     + "".join(f'[[judges]]\nmodel = "mock:m"\nprompt = "{p}"\n'
                               for p in ("thomas", "multicriteria", "sun-two-step"))
                     + '[tiebreaker]\nmodel = "mock:big"\nprompt = "umbrela"\nid = "big"\nspread = 4\n')
    out = tmp_path / "o.qrels"
    result = CliRunner().invoke(app, [
        "judge", "-q", str(tiny / "queries.tsv"), "-c", str(tiny / "corpus.jsonl"), "-p", str(tiny / "qrels.txt"),
        "--panel", str(panel), "-o", str(out), "--store", str(tmp_path / "s.sqlite"), "--no-progress"])
    assert result.exit_code == 0, result.output
    n_pairs = len((tiny / "qrels.txt").read_text().splitlines())
    assert {line.split()[3] for line in out.read_text().splitlines()} == {"0"}  # the tie-breaker decided each tie
    details = [json.loads(line) for line in (tmp_path / "o.qrels.details.jsonl").read_text().splitlines()]
    assert [d["tiebreaker"] for d in details] == ["tiebreaker"] * n_pairs
    assert details[0]["blend"]["tiebreaker"] == {"judge": "big", "spread": 4, "tiebreaker": n_pairs, "failed_calls": 0}
    assert f"tie-breaker big: consulted on {n_pairs} pairs" in result.output


def test_judge_panel_a_failed_tiebreaker_call_keeps_the_panels_tie_rule_and_exits_3(tmp_path):
    """The tie-breaker's own failed calls count towards exit status 3, like the members'."""
    import json

    sys.path.insert(0, str(Path(__file__).parent))
    from openai_server import OpenAITestServer

    q, c, p = tmp_path / "q.tsv", tmp_path / "c.jsonl", tmp_path / "p.tsv"
    q.write_text("q1\tquestion one\nq2\tquestion two\n")
    c.write_text("".join(json.dumps({"docid": f"d{i}", "text": f"passage {i}"}) + "\n" for i in range(4)))
    p.write_text("".join(f"q{1 + i % 2}\td{i}\n" for i in range(4)))
    # members: thomas answers 3, umbrela 0: an mv tie {0,3} on every pair (tie rule min -> 0)
    answers = {"A person typed this query": "Final score: 3",
               "Measure how well the content matches a likely intent": "##final score: 0"}
    with OpenAITestServer(answers=answers) as members, OpenAITestServer(fault_rates={"400": 1.0}) as big:
        panel = tmp_path / "p.toml"
        panel.write_text('[aggregator]\nmethod = "mv"\ntie = "min"\n'
                         + "".join(f'[[judges]]\nmodel = "openai:test-model"\nprompt = "{pr}"\n'
                                   for pr in ("thomas", "umbrela"))
                         + f'[tiebreaker]\nmodel = "openai:big"\nid = "big"\nspread = 4\n'
                           f'options = {{ base_url = "{big.base_url}" }}\n')
        out = tmp_path / "o.qrels"
        done = subprocess.run(
            [sys.executable, "-m", "judgeblender", "judge", "-q", str(q), "-c", str(c), "-p", str(p), "--panel",
             str(panel), "--base-url", members.base_url, "--timeout", "5", "-o", str(out), "--store",
             str(tmp_path / "s.sqlite"), "--no-progress"],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONPATH": SRC, "OPENAI_API_KEY": "sk-test"})
        assert members.request_count == 8 and big.request_count >= 4
    assert done.returncode == 3, done.stderr
    assert "4 of 12 judgments (judge x pair) not judged because their model calls failed" in done.stderr
    assert "tie-breaker calls failed after all retries: 4" in done.stderr
    assert {line.split()[3] for line in out.read_text().splitlines()} == {"0"}  # the panel's tie rule (min)
    details = [json.loads(line) for line in (tmp_path / "o.qrels.details.jsonl").read_text().splitlines()]
    assert [d["tiebreaker"] for d in details] == ["invalid"] * 4
    assert details[0]["blend"]["tiebreaker"] == {"judge": "big", "spread": 4, "invalid": 4, "failed_calls": 4}


def test_margin_is_the_vote_margin_over_voters_or_the_pooled_probability_margin():
    from judgeblender.blend.tiebreak import margins

    result = Blender("mv", tie="avg").blend(table())
    m = margins(result)
    assert m[:4].tolist() == [1.0, 0.0, 1 / 3, 1 / 3] and np.isnan(m[4])
    assert to_consult(result, margin=0) == [("q1", "tie")]
    assert to_consult(result, margin=0.34) == [("q1", "tie"), ("q1", "wide"), ("q1", "narrow")]
    rows = [(("q", "d"), {"a": Vote(1, (0.0, 0.6, 0.4, 0.0)), "b": Vote(2, (0.0, 0.2, 0.8, 0.0))})]
    probs = Blender("prob-argmax", tie="avg").blend(BallotTable.from_votes(rows, ["a", "b"]))
    assert margins(probs).round(6).tolist() == [0.2]  # pooled (0, .4, .6, 0): .6 - .4
    tb = apply_tiebreaker(probs, {("q", "d"): 3}, "big", margin=0.2)
    assert tb.labels == (3,) and tb.measure() == {"margin": 0.2} and "blend margin <= 0.2" in tb.summary_lines()[0]


def test_blend_panel_applies_the_panel_files_tiebreaker_and_its_spread(tmp_path):
    files, big = _label_files(tmp_path)
    panel = tmp_path / "p.toml"
    panel.write_text('[aggregator]\nmethod = "mv"\ntie = "min"\n[[judges]]\nid = "a"\n[[judges]]\nid = "b"\n'
                     '[[judges]]\nid = "c"\n[tiebreaker]\nid = "big"\nspread = 1\n')
    out = tmp_path / "o.qrels"
    # no labels for the tie-breaker: a clear error naming the judge and the option
    r = _blend(*files, "--panel", panel, "-o", out)
    assert r.returncode != 0 and "tie-breaker big" in r.stderr and "--tiebreaker big=PATH" in r.stderr
    # its labels as a label file named after it: it sits out of the blend and decides where the
    # members tie or spread >= 1 (the table's spread): tie, wide, narrow; agree keeps 1
    r = _blend(*files, f"big={big}", "--panel", panel, "-o", out)
    assert r.returncode == 0, r.stderr
    assert "consulted on 3 pairs (panel ties or member spread >= 1; 1 of them ties)" in r.stderr
    assert out.read_text() == "q1 0 agree 1\nq1 0 tie 3\nq1 0 wide 3\nq1 0 narrow 3\n"
    # --tiebreaker gives the same; --spread overrides the table's spread
    r = _blend(*files, "--panel", panel, "--tiebreaker", f"big={big}", "--spread", "2", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "member spread >= 2" in r.stderr
    assert out.read_text() == "q1 0 agree 1\nq1 0 tie 3\nq1 0 wide 3\nq1 0 narrow 3\n"  # narrow: spread 1 < 2, mv 3 kept
    # --margin instead: ties only at margin 0; both measures at once is an error
    r = _blend(*files, "--panel", panel, "--tiebreaker", f"big={big}", "--margin", "0", "-o", out)
    assert r.returncode == 0 and "blend margin <= 0" in r.stderr, r.stderr
    assert out.read_text() == "q1 0 agree 1\nq1 0 tie 3\nq1 0 wide 2\nq1 0 narrow 3\n"
    r = _blend(*files, "--tiebreaker", big, "--spread", "2", "--margin", "0.5", "-o", out)
    assert r.returncode != 0 and "one disagreement measure at a time" in r.stderr


def test_calibrated_panel_with_a_tiebreaker_table_round_trips_through_blend_panel(tmp_path):
    """A panel file with [tiebreaker] (margin) -> blend --panel: the tie-breaker decided exactly the
    pairs where the members tie or the margin is at most the table's."""
    files, big = _label_files(tmp_path)
    panel = tmp_path / "p.toml"
    panel.write_text('[aggregator]\nmethod = "mv"\ntie = "max"\n[[judges]]\nid = "a"\n[[judges]]\nid = "b"\n'
                     '[[judges]]\nid = "c"\n[tiebreaker]\nmodel = "openai:big"\nid = "big"\nmargin = 0.34\n')
    out = tmp_path / "o.qrels"
    zero = tmp_path / "zero.qrels"  # the tie-breaker says 0 everywhere: no member-only pair is 0
    zero.write_text("".join(f"{q} 0 {d} 0\n" for (q, d), _ in ROWS))
    r = _blend(*files, "--panel", panel, "--tiebreaker", f"big={zero}", "-o", out)
    assert r.returncode == 0, r.stderr
    result = Blender("mv", tie="max").blend(table())
    expected = set(to_consult(result, margin=0.34))
    assert expected == {("q1", "tie"), ("q1", "wide"), ("q1", "narrow")}
    assert all(result.by_pair()[p] != 0 for p in result.table.pairs if result.by_pair()[p] is not None)
    got = {(line.split()[0], line.split()[2]): int(line.split()[3]) for line in out.read_text().splitlines()}
    assert {p for p, lab in got.items() if lab == 0} == expected  # decided exactly the consulted pairs
    assert "consulted on 3 pairs (panel ties or blend margin <= 0.34; 1 of them ties)" in r.stderr
