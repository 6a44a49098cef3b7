"""Every reader refuses labels off the scale (issue 29, part 2).

`experiment` scored labels of 7 and -1 as gains while `fill` refused the same file: each reader
chose whether to check the 0-3 scale, and some forgot. Now the converters (convert.triples,
qrels, frame) and the qrels readers take the scale as a required keyword, and a
structural test fails on any call inside judgeblender that does not say which scale it reads.
The cases: the experiment command's --qrels, --llm and --seed, jb.experiment and fill_qrels with
labels in every shape (files, frames of three column conventions, dicts, tuples), a PyTerrier
Judge's output fed back as labels, every other command that reads labels, and the documented way
through for labels on another scale. An off-scale label is one error naming the file and line
(or the row), exit 2, before any model call: a real HTTP server counts the calls.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import pandas as pd
import pytest

from openai_server import OpenAITestServer

import judgeblender as jb
from judgeblender import convert
from judgeblender.errors import ArgumentError, InputError, JudgeblenderError
from judgeblender.pairs import irds
from judgeblender.pairs.qrels import read_prediction, read_qrels_abstaining

PACKAGE_ROOT = Path(jb.__file__).resolve().parent

# -- the structural rule -------------------------------------------------------------------------

# Every function that reads labels, and the keyword that says on which scale. `qrels`, `frame` and
# `triples` are convert's (called as convert.X, or by their bare names inside convert.py): other
# objects have methods of those names (Filled.frame, MergedLabels.qrels) that read nothing.
SCALE_KEYWORD = {"read_qrels": "allowed", "read_qrels_abstaining": "allowed", "read_prediction": "allowed",
                 "triples": "scale", "qrels": "scale", "frame": "scale",
                 "_label": "scale"}
CONVERTERS = {"triples", "qrels", "frame", "_label"}
# positional index of the scale, for the private helper that takes it positionally
SCALE_POSITION = {"_label": 2}


def _reader_calls(tree: ast.AST, in_convert: bool) -> list[tuple[int, str, bool]]:
    """(line, reader, says its scale) for every call of a label reader in `tree`. Imports under
    another name (`from .qrels import read_qrels as rq`) are followed."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.name in SCALE_KEYWORD and a.asname:
                    aliases[a.asname] = a.name
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name):
            name = aliases.get(func.id, func.id)
            if name in CONVERTERS and not in_convert and name not in ("triples", "_label"):
                continue  # a bare qrels(...) / frame(...) outside convert.py is not convert's
        elif isinstance(func, ast.Attribute):
            name = func.attr
            if name in CONVERTERS and not (isinstance(func.value, ast.Name) and func.value.id == "convert"):
                continue
        else:
            continue
        if name not in SCALE_KEYWORD:
            continue
        says = any(k.arg == SCALE_KEYWORD[name] for k in node.keywords) or (
            name in SCALE_POSITION and len(node.args) > SCALE_POSITION[name])
        found.append((node.lineno, name, says))
    return found


def test_the_scanner_finds_a_call_that_forgets_the_scale():
    planted = ast.parse(
        "from .pairs.qrels import read_qrels as rq\n"
        "convert.qrels(x, 'gold')\n"                     # forgets
        "convert.qrels(x, 'gold', scale=SCALE)\n"        # says
        "rq(path)\n"                                     # forgets, under another name
        "read_qrels(path, allowed=PAIRS_ONLY)\n"         # says: pairs only
        "irds.read_qrels(src)\n"                         # forgets
        "filled.frame()\n"                               # not a reader
        "read_prediction(p, 'error', allowed=LEVELS)\n")
    assert [(line, name) for line, name, says in _reader_calls(planted, False) if not says] == [
        (2, "qrels"), (4, "read_qrels"), (6, "read_qrels")]
    assert len(_reader_calls(planted, False)) == 6


def test_every_call_of_a_label_reader_in_judgeblender_says_which_scale():
    offenders, seen = [], 0
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        calls = _reader_calls(ast.parse(path.read_text(encoding="utf-8")), path.name == "convert.py")
        seen += len(calls)
        offenders += [f"{path.relative_to(PACKAGE_ROOT)}:{line}: {name}(...) without {SCALE_KEYWORD[name]}="
                      for line, name, says in calls if not says]
    assert offenders == []
    assert seen >= 30  # the scan does find the readers (api, holes, cli, report, blend, ...)


@pytest.mark.parametrize("function,keyword", [
    (convert.triples, "scale"), (convert.qrels, "scale"), (convert.frame, "scale"),
    (irds.read_qrels, "allowed"), (read_qrels_abstaining, "allowed"), (read_prediction, "allowed"),
])
def test_the_internal_readers_take_the_scale_as_a_required_keyword(function, keyword):
    parameter = inspect.signature(function).parameters[keyword]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is inspect.Parameter.empty


def test_a_converter_called_without_a_scale_fails_at_once():
    with pytest.raises(TypeError, match="scale"):
        convert.qrels({"q": {"d": 7}})


# -- the experiment command ------------------------------------------------------------------

TOPICS = {"q1": "what do goldfish eat", "q2": "how tall is the eiffel tower"}
PASSAGES = {"d1": "Goldfish eat flakes.", "d2": "Goldfish are fish.", "d3": "The tower is 330 metres tall.",
            "d4": "Kettles boil water."}
RUN_A = {"q1": {"d1": 3.0, "d2": 2.0, "d4": 1.0}, "q2": {"d3": 2.0, "d4": 1.0}}
RUN_B = {"q1": {"d2": 3.0, "d1": 2.0}, "q2": {"d4": 2.0, "d3": 1.0}}
HUMAN = [("q1", "d1", 3), ("q1", "d2", 1), ("q2", "d3", 3)]
LLM = [("q1", "d1", 2), ("q1", "d2", 1), ("q1", "d4", 0), ("q2", "d3", 3), ("q2", "d4", 0)]


def qrels_text(rows) -> str:
    return "".join(f"{q} 0 {d} {lab}\n" for q, d, lab in rows)


@pytest.fixture
def files(tmp_path) -> dict[str, Path]:
    runs = tmp_path / "runs"
    runs.mkdir()
    for name, run in (("a", RUN_A), ("b", RUN_B)):
        (runs / name).write_text("".join(f"{q} Q0 {d} {r} {s} {name}\n" for q, docs in run.items()
                                         for r, (d, s) in enumerate(docs.items(), start=1)))
    (tmp_path / "topics.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in TOPICS.items()))
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"docid": d, "text": t}) + "\n"
                                                   for d, t in PASSAGES.items()))
    (tmp_path / "human.qrels").write_text(qrels_text(HUMAN))
    (tmp_path / "llm.qrels").write_text(qrels_text(LLM))
    return {"runs": runs, "topics": tmp_path / "topics.tsv", "corpus": tmp_path / "corpus.jsonl",
            "human": tmp_path / "human.qrels", "llm": tmp_path / "llm.qrels", "dir": tmp_path}


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def one_error_line(proc, expected: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0] == f"error: {expected}", proc.stderr


def off_scale(path: Path, rows, label) -> Path:
    """`rows` with a fourth line q2 d9 `label` (a pair of its own, so only the label is wrong)."""
    path.write_text(qrels_text(rows) + f"q2 0 d9 {label}\n")
    return path


@pytest.mark.parametrize("label", ["7", "-1", "4"])
@pytest.mark.parametrize("option", ["--qrels", "--llm"])
def test_experiment_refuses_a_label_off_the_scale_naming_file_and_line(files, option, label):
    bad = off_scale(files["dir"] / "bad.qrels", HUMAN if option == "--qrels" else LLM, label)
    line = (len(HUMAN) if option == "--qrels" else len(LLM)) + 1
    given = {"--qrels": files["human"], "--llm": files["llm"], option: bad}
    proc = cli("experiment", "--runs", files["runs"], "--topics", files["topics"], "--qrels", given["--qrels"],
               "--llm", given["--llm"])
    one_error_line(proc, f"{bad}:{line}: expected a label in [0, 1, 2, 3], got '{label}'")


def test_experiment_refuses_an_off_scale_seed(files):
    bad = off_scale(files["dir"] / "seed.qrels", HUMAN, "7")
    proc = cli("experiment", "--runs", files["runs"], "--topics", files["topics"], "--qrels", files["human"],
               "--llm", files["llm"], "--seed", bad)
    one_error_line(proc, f"{bad}:4: expected a label in [0, 1, 2, 3], got '7'")


def test_experiment_with_a_jury_refuses_off_scale_qrels_before_any_model_call(files):
    bad = off_scale(files["dir"] / "bad.qrels", HUMAN, "7")
    store = files["dir"] / "j.sqlite"
    with OpenAITestServer(answers="##final score: 2") as server:
        proc = cli("experiment", "--runs", files["runs"], "--topics", files["topics"], "--qrels", bad,
                   "--judge", "openai:m", "--corpus", files["corpus"], "--store", store,
                   env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test"})
        assert server.request_count == 0
    one_error_line(proc, f"{bad}:4: expected a label in [0, 1, 2, 3], got '7'")
    assert not store.exists()


def test_experiment_on_scale_labels_still_runs(files):
    proc = cli("experiment", "--runs", files["runs"], "--topics", files["topics"], "--qrels", files["human"],
               "--llm", files["llm"], "--json")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["system"] for r in rows if r["kind"] == "system"] == ["a", "b"]


# -- jb.experiment and fill_qrels, labels in every shape --------------------------------------

Qrel = namedtuple("Qrel", "query_id doc_id relevance")  # ir_measures' shape


def shapes(rows):
    """The same labels as each reader takes them."""
    return {
        "frame": pd.DataFrame(rows, columns=["qid", "docid", "label"]),
        "ir_measures frame": pd.DataFrame(rows, columns=["query_id", "doc_id", "relevance"]),
        "pyterrier frame": pd.DataFrame(rows, columns=["qid", "docno", "label"]),
        "Int64 frame": pd.DataFrame({"qid": [r[0] for r in rows], "docid": [r[1] for r in rows],
                                     "label": pd.array([r[2] for r in rows], dtype="Int64")}),
        "dict": {q: {d: lab for qq, d, lab in rows if qq == q} for q in dict.fromkeys(r[0] for r in rows)},
        "tuples": list(rows),
        "Qrel tuples": [Qrel(*r) for r in rows],
    }


SHAPES = list(shapes(HUMAN))


@pytest.mark.parametrize("label", [7, -1, 4])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("argument", ["qrels", "llm_labels"])
def test_jb_experiment_refuses_off_scale_labels_in_every_shape(argument, shape, label):
    rows = (HUMAN if argument == "qrels" else LLM) + [("q2", "d9", label)]
    given = {"qrels": HUMAN, "llm_labels": LLM, argument: shapes(rows)[shape]}
    with pytest.raises(JudgeblenderError, match=rf"{argument}: .*q2 d9\): a label must be an integer in "
                                                rf"\[0, 1, 2, 3\], got {label}"):
        jb.experiment({"a": RUN_A, "b": RUN_B}, TOPICS, **given)


def test_jb_experiment_refuses_an_off_scale_seed_given_as_labels():
    with pytest.raises(JudgeblenderError, match=r"seed: .*a label must be an integer in \[0, 1, 2, 3\], got 7"):
        jb.experiment({"a": RUN_A, "b": RUN_B}, TOPICS, qrels=HUMAN, llm_labels=LLM,
                      seed=[("q1", "d1", 3), ("q2", "d3", 7)], design="seed.design.json")


def test_jb_experiment_refuses_off_scale_qrels_before_judging(tmp_path):
    with OpenAITestServer(answers="##final score: 2") as server:
        with pytest.raises(JudgeblenderError, match="got 7"):
            jb.experiment({"a": RUN_A}, TOPICS, qrels={"q1": {"d1": 7}}, judges=["openai:m"], corpus=PASSAGES,
                          options={"base_url": server.base_url}, store=tmp_path / "s.sqlite")
        assert server.request_count == 0
    assert not (tmp_path / "s.sqlite").exists()


@pytest.mark.parametrize("shape", SHAPES)
def test_jb_experiment_reads_the_same_on_scale_labels_in_every_shape(shape):
    table = jb.experiment({"a": RUN_A, "b": RUN_B}, TOPICS, qrels=shapes(HUMAN)[shape], llm_labels=shapes(LLM)[shape])
    expected = jb.experiment({"a": RUN_A, "b": RUN_B}, TOPICS, qrels=HUMAN, llm_labels=LLM)
    pd.testing.assert_frame_equal(table, expected)


def test_a_float_column_of_whole_labels_reads_and_a_fraction_is_refused():
    frame = pd.DataFrame({"qid": ["q1", "q2"], "docid": ["d1", "d3"], "label": [3.0, 2.0]})
    assert jb.qrels(frame) == {"q1": {"d1": 3}, "q2": {"d3": 2}}
    with pytest.raises(JudgeblenderError, match=r"got 2\.5"):
        jb.qrels(frame.assign(label=[3.0, 2.5]))


pyterrier = pytest.importorskip("judgeblender.pyterrier", reason="needs the [pyterrier] extra")


@pytest.mark.parametrize("argument", ["qrels", "llm_labels"])
@pytest.mark.parametrize("label", [7, -1])
def test_fill_qrels_refuses_off_scale_labels_in_pyterrier_frames(argument, label):
    rows = (HUMAN if argument == "qrels" else LLM) + [("q1", "d4", label)]
    given = {"qrels": shapes(HUMAN)["pyterrier frame"], "llm_labels": shapes(LLM)["pyterrier frame"],
             argument: shapes(rows)["pyterrier frame"]}
    with pytest.raises(JudgeblenderError, match=rf"{argument}: row {len(rows) - 1} \(q1 d4\): .* got {label}$"):
        pyterrier.fill_qrels({"a": RUN_A, "b": RUN_B}, TOPICS, **given)


def judged_frame(tmp_path, answer: str):
    """A PyTerrier Judge's output over RUN_A's rows: qid, query, docno, text, score, rank, jb_*."""
    rows = [(q, TOPICS[q], d, PASSAGES[d], s, r) for q, docs in RUN_A.items() for r, (d, s) in enumerate(docs.items())]
    res = pd.DataFrame(rows, columns=["qid", "query", "docno", "text", "score", "rank"])
    return pyterrier.Judge([f"scripted:{_scripted(tmp_path, answer)}"], members=True,
                           store=tmp_path / "j.sqlite").transform(res)


def _scripted(tmp_path: Path, answer: str) -> Path:
    path = tmp_path / "judge.json"
    path.write_text(json.dumps({"name": "judge", "rules": [{"contains": "", "output": answer}]}))
    return path


def test_a_judge_output_fed_back_as_labels_is_read_on_the_scale(tmp_path):
    out = judged_frame(tmp_path, "##final score: 2")
    fed = out[["qid", "docno", "jb_label"]].rename(columns={"jb_label": "label"})
    filled = pyterrier.fill_qrels({"a": RUN_A, "b": RUN_B}, TOPICS, qrels=shapes(HUMAN)["pyterrier frame"],
                                  llm_labels=fed)
    assert dict(zip(zip(filled.qid, filled.docno), filled.label)) == {
        ("q1", "d1"): 3, ("q1", "d2"): 1, ("q2", "d3"): 3, ("q1", "d4"): 2, ("q2", "d4"): 2}
    assert jb.agreement(HUMAN, fed, bootstrap=0).n == 3
    # the same frame edited off the scale, in the blended column and in a member's column
    for column in ("jb_label", [c for c in out.columns if c.startswith("jb_label.")][0]):
        edited = out[["qid", "docno", column]].rename(columns={column: "label"})
        edited.loc[2, "label"] = 7
        for reader in (lambda f: pyterrier.fill_qrels({"a": RUN_A}, TOPICS, qrels=HUMAN, llm_labels=f),
                       lambda f: jb.agreement(HUMAN, f, bootstrap=0),
                       lambda f: jb.experiment({"a": RUN_A}, TOPICS, qrels=HUMAN, llm_labels=f)):
            with pytest.raises(JudgeblenderError, match=r"row 2 \(q1 d4\): a label must be an integer in .*got 7"):
                reader(edited)


def test_a_judge_output_with_invalid_answers_feeds_back_as_unlabelled_pairs(tmp_path):
    out = judged_frame(tmp_path, "I cannot tell.")
    assert out.jb_label.isna().all()
    fed = out[["qid", "docno", "jb_label"]].rename(columns={"jb_label": "label"})
    filled = pyterrier.fill_qrels({"a": RUN_A}, TOPICS, qrels=HUMAN, llm_labels=fed)
    assert set(zip(filled.qid, filled.docno)) == {(q, d) for q, d, _ in HUMAN}  # NA is no label, never 0
    assert "have no valid label" in filled.attrs["notes"][0]


# -- every other reader ----------------------------------------------------------------------

def bad_files(files) -> dict[str, Path]:
    return {"human": off_scale(files["dir"] / "bad-human.qrels", HUMAN, "7"),
            "llm": off_scale(files["dir"] / "bad-llm.qrels", LLM, "-1")}


COMMANDS = {  # command line, the file it names in the error, that file's bad line
    "agree gold": (lambda f, b: ["agree", f["llm"], "--gold", b["human"]], "human", 4),
    "agree prediction": (lambda f, b: ["agree", b["llm"], "--gold", f["human"]], "llm", 6),
    "correlate prediction": (lambda f, b: ["correlate", b["llm"], "--gold", f["human"], "--runs", f["runs"]], "llm", 6),
    "correlate gold": (lambda f, b: ["correlate", f["llm"], "--gold", b["human"], "--runs", f["runs"]], "human", 4),
    "blend": (lambda f, b: ["blend", f["llm"], b["llm"], "-o", f["dir"] / "out.qrels"], "llm", 6),
    "fill gold": (lambda f, b: ["fill", "--gold", b["human"], "--llm", f["llm"], "-o", f["dir"] / "o.qrels"], "human", 4),
    "fill llm": (lambda f, b: ["fill", "--gold", f["human"], "--llm", b["llm"], "-o", f["dir"] / "o.qrels"], "llm", 6),
    "estimate": (lambda f, b: ["estimate", "--llm", b["llm"], "--human", f["human"], "--runs", f["runs"]], "llm", 6),
    "calibrate labels": (lambda f, b: ["calibrate", "--gold", f["human"], "--labels", b["llm"], "--labels", f["llm"],
                                       "-o", f["dir"] / "p.toml"], "llm", 6),
    "calibrate gold": (lambda f, b: ["calibrate", "--gold", b["human"], "--labels", f["llm"], "-o", f["dir"] / "p.toml"],
                       "human", 4),
    "report gold": (lambda f, b: ["report", "--gold", b["human"], "--pred", f["llm"], "--runs", f["runs"],
                                  "-o", f["dir"] / "r.html"], "human", 4),
    "report pred": (lambda f, b: ["report", "--gold", f["human"], "--pred", b["llm"], "--runs", f["runs"],
                                  "-o", f["dir"] / "r.html"], "llm", 6),
    "compare": (lambda f, b: ["compare", "--runs", f["runs"], "--qrels", b["human"]], "human", 4),
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_that_reads_labels_refuses_one_off_the_scale(files, command):
    make, which, line = COMMANDS[command]
    bad = bad_files(files)
    proc = cli(*make(files, bad))
    assert proc.returncode == 2, proc.stderr
    assert f"{bad[which]}:{line}: expected a label in [0, 1, 2, 3], got '{'7' if which == 'human' else '-1'}'" \
        in proc.stderr
    assert "Traceback" not in proc.stderr


def test_agree_with_invalid_labels_abstain_counts_off_scale_labels_as_invalid(files):
    bad = files["dir"] / "two-bad.qrels"
    bad.write_text(qrels_text(LLM) + "q2 0 d8 7\nq2 0 d9 -1\n")
    proc = cli("agree", bad, "--gold", files["human"], "--invalid-labels", "abstain", "--json", "--bootstrap", "0")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.splitlines()[0])
    assert report["invalid"] == 2 and report["n"] == 3  # 7 and -1 are no label, never a gain


def test_blend_with_invalid_labels_abstain_leaves_an_off_scale_vote_out(files):
    bad = off_scale(files["dir"] / "judge-b.qrels", LLM, "7")
    out = files["dir"] / "blend.qrels"
    proc = cli("blend", files["llm"], bad, "--invalid-labels", "abstain", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "q2 0 d9" not in out.read_text()  # its only vote was 7: no label


# -- the way through for another scale --------------------------------------------------------

def test_labels_on_another_scale_are_read_with_scale_and_mapped_onto_0_3():
    five = pd.DataFrame({"qid": ["q1", "q1", "q2"], "docid": ["d1", "d2", "d3"], "label": [4, 0, -2]})
    with pytest.raises(JudgeblenderError, match=r"row 0 \(q1 d1\): a label must be an integer in \[0, 1, 2, 3\], got 4"):
        jb.qrels(five)
    with pytest.raises(JudgeblenderError, match=r"row 2 \(q2 d3\).*in \[0, 1, 2, 3, 4\], got -2"):
        jb.qrels(five, scale=range(5))
    read = jb.labels_frame(five, scale=range(-2, 5))
    assert read.label.tolist() == [4, 0, -2]
    mapped = read.assign(label=read.label.map({4: 3, 3: 3, 2: 2, 1: 1, 0: 0, -1: 0, -2: 0}))
    assert jb.qrels(mapped) == {"q1": {"d1": 3, "d2": 0}, "q2": {"d3": 0}}
    assert jb.qrels({"q": {"d": -2}}, scale=None) == {"q": {"d": -2}}


@pytest.mark.parametrize("scale", [[], "0123", 5, [0, 1.5]])
def test_a_degenerate_scale_is_an_argument_error(scale):
    with pytest.raises(ArgumentError, match="scale: expected"):
        jb.qrels({"q": {"d": 1}}, scale=scale)


def test_read_qrels_reads_any_integer_unless_given_a_scale(tmp_path):
    path = off_scale(tmp_path / "web.qrels", HUMAN, "-2")
    assert jb.read_qrels(path)["q2"]["d9"] == -2  # as trec_eval reads it
    with pytest.raises(InputError, match=r"web.qrels:4: expected a label in \[0, 1, 2, 3\], got '-2'"):
        jb.read_qrels(path, allowed=range(4))
    with pytest.raises(ArgumentError, match=r"allowed: expected a non-empty collection"):
        jb.read_qrels(path, allowed=[])
