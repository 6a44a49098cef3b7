"""The LLM tie-breaker: consulted only on panel ties or member spread >= threshold; an invalid
answer leaves the panel's own tie rule in place, recorded; never an invalid answer as a label."""

import subprocess
import sys
import os
from pathlib import Path

from judgeblender.blend import BallotTable, Blender
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


def test_blend_cli_takes_the_tiebreakers_labels_from_a_file_and_reports_pairs_decided(tmp_path):
    files = []
    for j in "abc":
        p = tmp_path / f"{j}.qrels"
        p.write_text("".join(f"{q} 0 {d} {v[j]}\n" for (q, d), v in ROWS if v[j] is not None))
        files.append(p)
    big = tmp_path / "big.qrels"
    big.write_text("q1 0 tie 1.\nq1 0 wide 3\nq1 0 agree 0\n")  # "1." is unreadable: invalid
    out = tmp_path / "o.qrels"
    r = subprocess.run([sys.executable, "-m", "judgeblender", "blend", *map(str, files), "--tiebreaker", str(big),
                        "--tie", "min", "-o", str(out)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": SRC}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "tie-breaker big: consulted on 2 pairs (panel ties or member spread >= 2; 1 of them ties)" in r.stderr
    assert out.read_text() == "q1 0 agree 1\nq1 0 tie 0\nq1 0 wide 3\nq1 0 narrow 3\n"


def test_when_judging_the_tiebreaker_is_called_on_the_consulted_pairs_only(tiny):
    from judgeblender.backends.scripted import ScriptedBackend
    from judgeblender.judges import Judge, JudgeSpec
    from judgeblender.judges.tiebreak_run import run_tiebreaker
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
