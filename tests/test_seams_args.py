"""Degenerate API arguments are errors that say what was expected (issue 29, part 4).

No systems, no topics, `k=10.0`, `k="10"`, `depth=-1`, `folds=1`, an unknown method: each used
to reach the code under the API and come back as an empty table, a raw TypeError, KeyError or
AttributeError, or a message naming a CLI flag the notebook user never typed. Now every public
function checks its arguments first (judgeblender/arguments.py) and raises ArgumentError: a
ValueError and a JudgeblenderError that names the argument, what was expected and what was
given, before any file is written or model called. Every function exported by `judgeblender`
is covered below (a test fails when a new one is not), with the values that must keep working.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from openai_server import OpenAITestServer

import judgeblender as jb
from judgeblender.errors import ArgumentError, JudgeblenderError

GOLD = {"q1": {"d1": 3, "d2": 0, "d4": 1}, "q2": {"d3": 2, "d4": 0}}
PRED = {"q1": {"d1": 2, "d2": 0, "d4": 1}, "q2": {"d3": 2, "d4": 1}}
JURY = {"a": PRED, "b": GOLD}
RUN_A = {"q1": {"d1": 3.0, "d2": 2.0, "d4": 1.0}, "q2": {"d3": 2.0, "d4": 1.0}}
RUN_B = {"q1": {"d2": 3.0, "d1": 2.0}, "q2": {"d4": 2.0, "d3": 1.0}}
SYSTEMS = {"a": RUN_A, "b": RUN_B}
TOPICS = {"q1": "what do goldfish eat", "q2": "how tall is the eiffel tower"}
PASSAGES = {"d1": "Goldfish eat flakes.", "d2": "Goldfish are fish.", "d3": "The tower is 330 metres tall.",
            "d4": "Kettles boil water."}
PAIRS = pd.DataFrame([(q, d, TOPICS[q], PASSAGES[d]) for q, docs in GOLD.items() for d in docs],
                     columns=["qid", "docid", "query", "passage"])


@pytest.fixture(scope="module")
def ctx(tmp_path_factory) -> SimpleNamespace:
    """A scripted judge (a JSON file of canned answers) and a small run file, made once."""
    folder = tmp_path_factory.mktemp("args")
    (folder / "judge.json").write_text(json.dumps({"name": "judge", "rules": [{"contains": "",
                                                                               "output": "##final score: 2"}]}))
    (folder / "r.run").write_text("q1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 2.0 r\nq2 Q0 d3 1 1.0 r\n")
    return SimpleNamespace(scripted=f"scripted:{folder / 'judge.json'}", run=folder / "r.run")


@pytest.fixture(scope="module")
def judged(ctx):
    return jb.judge(PAIRS, [ctx.scripted])


def experiment(**changes):
    given = {"systems": SYSTEMS, "topics": TOPICS, "qrels": GOLD, "llm_labels": PRED, **changes}
    return jb.experiment(given.pop("systems"), given.pop("topics"), **given)


def fill_qrels(**changes):
    from judgeblender.pyterrier import fill_qrels as fill

    given = {"systems": SYSTEMS, "topics": TOPICS, "qrels": GOLD, "llm_labels": PRED, **changes}
    return fill(given.pop("systems"), given.pop("topics"), **given)


def pt_judge(**changes):
    from judgeblender.pyterrier import Judge

    return Judge(**{"judges": ["llamacpp:default"], **changes})


def agree(**changes):
    return jb.agreement(GOLD, PRED, **changes)


def correlate(**changes):
    given = {"gold": GOLD, "predictions": PRED, "runs": SYSTEMS, "bootstrap": 0, **changes}
    return jb.correlate(given.pop("gold"), given.pop("predictions"), given.pop("runs"), **given)


def calibrate(**changes):
    return jb.calibrate(JURY, GOLD, **{"folds": 2, **changes})


# (function exported by judgeblender, the call, the argument it names)
CASES = [
    # experiment: systems, topics, the pool's depth, measures, the blend, the tests
    ("experiment", lambda _: experiment(systems={}), "systems"),
    ("experiment", lambda _: experiment(systems=[]), "systems"),
    ("experiment", lambda _: experiment(systems=5), "systems"),
    ("experiment", lambda _: experiment(topics={}), "topics"),
    ("experiment", lambda _: experiment(topics=pd.DataFrame({"qid": [], "query": []})), "topics"),
    ("experiment", lambda _: experiment(topics=5), "topics"),
    ("experiment", lambda _: experiment(k=10.0), "k"),
    ("experiment", lambda _: experiment(k="10"), "k"),
    ("experiment", lambda _: experiment(k=0), "k"),
    ("experiment", lambda _: experiment(k=-1), "k"),
    ("experiment", lambda _: experiment(k=True), "k"),
    ("experiment", lambda _: experiment(measures=[]), "measures"),
    ("experiment", lambda _: experiment(measures="nDCG@10"), "measures"),
    ("experiment", lambda _: experiment(blend="majority"), "blend"),
    ("experiment", lambda _: experiment(correction=5), "correction"),
    ("experiment", lambda _: experiment(confidence=95), "confidence"),
    ("experiment", lambda _: experiment(confidence=float("nan")), "confidence"),
    ("experiment", lambda _: experiment(baseline=""), "baseline"),
    ("experiment", lambda _: experiment(judge_pool="yes"), "judge_pool"),
    ("experiment", lambda _: experiment(systems=[RUN_A, RUN_B], names=[]), "names"),
    ("experiment", lambda _: experiment(systems=[RUN_A, RUN_B], names=["only one"]), "names"),
    ("experiment", lambda _: experiment(systems=[RUN_A, RUN_B], names="ab"), "names"),
    ("experiment", lambda _: experiment(llm_labels=None), "judges"),
    ("experiment", lambda _: experiment(perquery="yes"), "perquery"),
    ("experiment", lambda _: experiment(perquery=True, baseline="a"), "baseline"),
    # the rest of the evaluation path (workflow.py)
    ("pool", lambda _: jb.pool(SYSTEMS, k=0), "k"),
    ("pool", lambda _: jb.pool(SYSTEMS, k=2.5), "k"),
    ("pool", lambda _: jb.pool({}), "systems"),
    ("pool", lambda _: jb.pool(SYSTEMS, exclude={}), "exclude"),
    ("pool", lambda _: jb.pool(SYSTEMS, drop_duplicates="yes", corpus=PASSAGES), "drop_duplicates"),
    ("pool", lambda _: jb.pool(SYSTEMS, drop_duplicates=True), "corpus"),
    ("find_holes", lambda _: jb.find_holes(SYSTEMS, qrels={}), "qrels"),
    ("find_holes", lambda _: jb.find_holes(SYSTEMS, qrels=GOLD, k="10"), "k"),
    ("sample_seed", lambda _: jb.sample_seed(SYSTEMS, queries=0), "queries"),
    ("sample_seed", lambda _: jb.sample_seed(SYSTEMS, queries=3), "queries"),
    ("sample_seed", lambda _: jb.sample_seed(SYSTEMS, pairs=-1.0), "pairs"),
    ("sample_seed", lambda _: jb.sample_seed(SYSTEMS), "queries"),
    ("sample_seed", lambda _: jb.sample_seed(SYSTEMS, queries=1, pairs=2.0), "pairs"),
    ("sample_seed", lambda _: jb.sample_seed(SYSTEMS, pairs=2.0, weights="even"), "weights"),
    ("sample_seed", lambda _: jb.sample_seed(SYSTEMS, queries=1, random_seed=-1), "random_seed"),
    ("sample_seed", lambda _: jb.sample_seed(SYSTEMS, queries=1, out=5), "out"),
    ("fill", lambda _: jb.fill(SYSTEMS, TOPICS, qrels=GOLD, llm_labels=PRED, k=0), "k"),
    ("fill", lambda _: jb.fill(SYSTEMS, TOPICS, qrels=GOLD), "judges"),
    ("fill", lambda _: jb.fill(SYSTEMS, {}, qrels=GOLD, llm_labels=PRED), "topics"),
    ("estimate", lambda _: jb.estimate(SYSTEMS, llm_labels=PRED, seed=GOLD, design="d.json", confidence=2), "confidence"),
    ("estimate", lambda _: jb.estimate(SYSTEMS, llm_labels=PRED, seed=GOLD, design="d.json", target="world"), "target"),
    ("estimate", lambda _: jb.estimate(SYSTEMS, llm_labels=PRED, seed=GOLD), "design"),
    ("estimate", lambda _: jb.estimate(SYSTEMS, llm_labels=PRED, seed=GOLD, design=5), "design"),
    ("estimate", lambda _: jb.estimate(SYSTEMS, llm_labels={}, seed=GOLD, design="d.json"), "llm_labels"),
    ("estimate", lambda _: jb.estimate(SYSTEMS, llm_labels=PRED, seed=GOLD, design="d.json", measures="P@10"),
     "measures"),
    ("estimate", lambda _: jb.estimate(SYSTEMS, llm_labels=PRED, seed=GOLD, design="d.json", differences=1),
     "differences"),
    ("write_report", lambda _: jb.write_report(GOLD, PRED, SYSTEMS, 5), "out"),
    ("write_report", lambda _: jb.write_report(GOLD, PRED, SYSTEMS, "r.html", min_judged=2), "min_judged"),
    ("write_report", lambda _: jb.write_report(GOLD, PRED, SYSTEMS, "r.html", bootstrap=-1), "bootstrap"),
    ("write_report", lambda _: jb.write_report(GOLD, {}, SYSTEMS, "r.html"), "predictions"),
    ("write_report", lambda _: jb.write_report(GOLD, PRED, SYSTEMS, "r.html", design="d.json"), "design"),
    ("write_report", lambda _: jb.write_report(GOLD, PRED, SYSTEMS, "r.html", groups=5), "groups"),
    ("write_report", lambda _: jb.write_report(GOLD, {"human": PRED}, SYSTEMS, "r.html"), "predictions"),
    ("load_dataset", lambda _: jb.load_dataset("dl99"), "name"),
    ("load_dataset", lambda _: jb.load_dataset(3), "name"),
    # the notebook API
    ("agreement", lambda _: agree(bootstrap=10.0), "bootstrap"),
    ("agreement", lambda _: agree(bootstrap="1000"), "bootstrap"),
    ("agreement", lambda _: agree(bootstrap=-1), "bootstrap"),
    ("agreement", lambda _: agree(seed=-1), "seed"),
    ("agreement", lambda _: agree(seed=1.5), "seed"),
    ("agreement", lambda _: agree(confidence=1.0), "confidence"),
    ("agreement", lambda _: agree(confidence="0.95"), "confidence"),
    ("agreement", lambda _: agree(invalid=-3), "invalid"),
    ("agreement", lambda _: agree(name=""), "name"),
    ("correlate", lambda _: correlate(runs={}), "runs"),
    ("correlate", lambda _: correlate(runs=[]), "runs"),
    ("correlate", lambda _: correlate(predictions={}), "predictions"),
    ("correlate", lambda _: correlate(measures=[]), "measures"),
    ("correlate", lambda _: correlate(measures="nDCG@10"), "measures"),
    ("correlate", lambda _: correlate(bootstrap=2.5), "bootstrap"),
    ("correlate", lambda _: correlate(confidence=0), "confidence"),
    ("calibrate", lambda _: calibrate(folds=1), "folds"),
    ("calibrate", lambda _: calibrate(folds=2.0), "folds"),
    ("calibrate", lambda _: calibrate(folds="5"), "folds"),
    ("calibrate", lambda _: calibrate(learner="forest"), "learner"),
    ("calibrate", lambda _: calibrate(tie="coin"), "tie"),
    ("calibrate", lambda _: calibrate(seed=-2), "seed"),
    ("blend_labels", lambda _: jb.blend_labels(JURY, "majority"), "method"),
    ("blend_labels", lambda _: jb.blend_labels(JURY, tie="coin"), "tie"),
    ("blend_labels", lambda _: jb.blend_labels(JURY, tie="random", seed=0.5), "seed"),
    ("blend_labels", lambda _: jb.blend_labels({}), "labels"),
    ("blend_labels", lambda _: jb.blend_labels(pd.DataFrame(columns=["qid", "docid", "judge", "label"])), "labels"),
    ("ballots", lambda _: jb.ballots({}), "labels"),
    ("ballots", lambda _: jb.ballots(5), "labels"),
    ("panel", lambda _: jb.panel([]), "judges"),
    ("panel", lambda _: jb.panel(5), "judges"),
    ("panel", lambda _: jb.panel([5]), "judges"),
    ("panel", lambda _: jb.panel(["llamacpp:default"], mode="logprob"), "mode"),
    ("panel", lambda _: jb.panel(["llamacpp:default"], prompt=""), "prompt"),
    ("panel", lambda _: jb.panel(["llamacpp:default"], options=["temperature=0"]), "options"),
    ("judge", lambda c: jb.judge(PAIRS.iloc[:0], [c.scripted]), "pairs"),
    ("judge", lambda c: jb.judge([], [c.scripted], queries=TOPICS, corpus=PASSAGES), "pairs"),
    ("judge", lambda c: jb.judge(PAIRS, []), "judges"),
    ("judge", lambda c: jb.judge(PAIRS, [c.scripted], mode="greedy"), "mode"),
    ("judge", lambda c: jb.judge(PAIRS, [c.scripted], skip_missing="no"), "skip_missing"),
    ("judge", lambda c: jb.judge(PAIRS, [c.scripted], progress=1), "progress"),
    ("labels_frame", lambda _: jb.labels_frame(GOLD, scale=[]), "scale"),
    ("qrels", lambda _: jb.qrels(GOLD, scale="0123"), "scale"),
    # the rest of the exports
    ("read_pairs", lambda c: jb.read_pairs(c.run, depth=-1), "depth"),
    ("read_pairs", lambda c: jb.read_pairs(c.run, depth=2.5), "depth"),
    ("read_pairs", lambda c: jb.read_pairs(c.run, depth=0), "depth"),
    ("read_qrels", lambda _: jb.read_qrels(QRELS_FILE, allowed=[]), "allowed"),
    ("read_qrels", lambda _: jb.read_qrels(QRELS_FILE, allowed="0123"), "allowed"),
    ("judge_pairs", lambda _: jb.judge_pairs([], [("q1", "d1")], TOPICS, PASSAGES), "judges"),
    ("create_backend", lambda _: jb.create_backend(5), "model"),
    ("register", lambda _: jb.register("", lambda rest, **o: None), "prefix"),
    ("register", lambda _: jb.register("my:model", lambda rest, **o: None), "prefix"),
    ("register", lambda _: jb.register("mine", "not callable"), "factory"),
    ("get_template", lambda _: jb.get_template(5), "name_or_path"),
    ("get_template", lambda _: jb.get_template(""), "name_or_path"),
    ("Jury", lambda _: jb.Jury([]), "judges"),
    ("Jury", lambda c: jb.Jury([jb.JudgeSpec(c.scripted, prompt="factual-accuracy")], min_votes=0), "min_votes"),
    ("Client", lambda _: jb.Client(5), "url"),
    ("Client", lambda _: jb.Client("ftp://127.0.0.1:8000"), "url"),
    ("Client", lambda _: jb.Client("http://127.0.0.1:8000", token=5), "token"),
]
# methods of the objects the API hands back
METHOD_CASES = [
    ("Judged.blend", lambda run: run.blend("majority"), "method"),
    ("Judged.blend", lambda run: run.blend(tie="coin"), "tie"),
    ("Judged.agreement", lambda run: run.agreement(GOLD, bootstrap=1.5), "bootstrap"),
    ("Judged.agreement", lambda run: run.agreement(GOLD, confidence=2), "confidence"),
]
PYTERRIER_CASES = [
    ("fill_qrels", lambda: fill_qrels(k=10.0), "k"),
    ("fill_qrels", lambda: fill_qrels(k=0), "k"),
    ("fill_qrels", lambda: fill_qrels(systems={}), "systems"),
    ("fill_qrels", lambda: fill_qrels(topics={}), "topics"),
    ("fill_qrels", lambda: fill_qrels(blend="majority"), "blend"),
    ("Judge", lambda: pt_judge(blend="majority"), "blend"),
    ("Judge", lambda: pt_judge(members="yes"), "members"),
    ("Judge", lambda: pt_judge(rerank=1), "rerank"),
    ("Judge", lambda: pt_judge(judges=[]), "judges"),
]
# exported names with no argument to get wrong, or only data (classes of results)
EXEMPT = {
    "list_templates": "takes no argument",
    "AgreementReport": "a result, built by agreement", "BallotTable": "a table, built by ballots",
    "Calibrated": "a result, built by calibrate (its apply reads labels as ballots does)",
    "JudgeRun": "a result, built by judge_pairs", "Panel": "built by panel", "Pair": "a (qid, docid) tuple",
    "CallRequest": "a record of one call", "CallResult": "a record of one call", "Message": "a chat message",
    "JudgeSpec": "a declaration, checked by panel/judge_pairs", "CallStore": "opens a file (its own errors)",
    "JudgeblenderError": "the error itself",
    "Judge": "judgeblender.Judge is the engine's judge, built by build_judge; pyterrier.Judge is above",
    "Blender": "keeps its own ValueError text (tests/test_blend_rules.py); the API checks before it",
    "read_corpus": "a path (InputError names it)", "read_queries": "a path (InputError names it)",
    "read_run": "a path (InputError names it)",
}

QRELS_FILE = Path(__file__).parent / "data" / "tiny" / "qrels.txt"


def check(exc: ArgumentError, argument: str) -> None:
    assert isinstance(exc, ValueError) and isinstance(exc, JudgeblenderError)
    assert exc.argument == argument
    assert str(exc).startswith(f"{argument}: expected ") and ", got " in str(exc), str(exc)
    assert "--" not in str(exc).split(", got ")[0]  # a Python argument, not a CLI flag


@pytest.mark.parametrize("name,call,argument", CASES, ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_a_degenerate_argument_is_an_argument_error_naming_it(name, call, argument, ctx):
    with pytest.raises(ArgumentError) as caught:
        call(ctx)
    check(caught.value, argument)


@pytest.mark.parametrize("name,call,argument", METHOD_CASES, ids=[f"{c[0]}-{c[2]}" for c in METHOD_CASES])
def test_a_degenerate_argument_to_a_method_of_a_result(name, call, argument, judged):
    with pytest.raises(ArgumentError) as caught:
        call(judged)
    check(caught.value, argument)


@pytest.mark.parametrize("name,call,argument", PYTERRIER_CASES, ids=[f"{c[0]}-{c[2]}" for c in PYTERRIER_CASES])
def test_a_degenerate_argument_to_the_pyterrier_api(name, call, argument):
    pytest.importorskip("judgeblender.pyterrier", reason="needs the [pyterrier] extra")
    with pytest.raises(ArgumentError) as caught:
        call()
    check(caught.value, argument)


def test_every_exported_function_is_covered_or_exempt_with_a_reason():
    covered = {c[0] for c in CASES} | {c[0].split(".")[0] for c in METHOD_CASES}
    callables = {n for n in jb.__all__ if callable(getattr(jb, n))}
    assert callables - covered - set(EXEMPT) == set()
    assert set(EXEMPT) & covered == set()


def test_a_jury_is_not_called_and_no_store_made_when_an_argument_is_wrong(tmp_path):
    store = tmp_path / "s.sqlite"
    with OpenAITestServer(answers="##final score: 2") as server:
        options = {"base_url": server.base_url}
        for call in (lambda: jb.experiment(SYSTEMS, TOPICS, qrels=GOLD, judges=["openai:m"], corpus=PASSAGES,
                                           options=options, store=store, k=2.5),
                     lambda: jb.experiment(SYSTEMS, TOPICS, qrels=GOLD, judges=["openai:m"], corpus=PASSAGES,
                                           options=options, store=store, blend="majority"),
                     lambda: jb.judge(PAIRS, ["openai:m"], options=options, store=store, mode="logprob")):
            with pytest.raises(ArgumentError):
                call()
        assert server.request_count == 0
    assert not store.exists()


class Retriever:
    """A PyTerrier transformer as seen from outside: it must not run when k is wrong."""

    ran = 0

    def transform(self, topics):
        Retriever.ran += 1
        raise AssertionError("a system ran before its arguments were checked")


def test_a_transformer_does_not_run_when_k_is_wrong():
    pytest.importorskip("judgeblender.pyterrier", reason="needs the [pyterrier] extra")
    with pytest.raises(ArgumentError, match="k: expected an integer of at least 1, got 10.0"):
        fill_qrels(systems={"bm25": Retriever()}, k=10.0)
    with pytest.raises(ArgumentError, match="k: expected"):
        experiment(systems={"bm25": Retriever()}, k="10")
    assert Retriever.ran == 0


# -- values that keep working ------------------------------------------------------------------

def test_the_boundaries_that_are_meant_stay_accepted(judged, ctx):
    assert np.isnan(agree(bootstrap=0).kappa_ci[0])  # 0 samples: no intervals, as documented
    assert agree(bootstrap=np.int64(20), seed=np.int64(3)).bootstrap == 20  # numpy ints from a frame
    assert len(experiment(k=np.int64(1), measures=("nDCG@10", "P@1"), correction=None, confidence=0.9)) == 4
    assert calibrate(folds=2).report.folds
    assert jb.blend_labels(JURY, "mv", tie="random", seed=None).label.notna().all()
    assert judged.blend("median").label.notna().all()
    assert jb.read_pairs(ctx.run, depth=1) == [jb.Pair("q1", "d1"), jb.Pair("q2", "d3")]
    assert len(jb.read_pairs(ctx.run, depth=None)) == 3


def test_experiment_with_every_pooled_pair_labelled_by_people_calls_no_model(tmp_path):
    """No holes: nothing for the jury to judge, so no model call; the jury is still checked."""
    full = {q: {d: 1 for d in set(RUN_A.get(q, {})) | set(RUN_B.get(q, {}))} for q in TOPICS}
    with OpenAITestServer(answers="##final score: 2") as server:
        table = jb.experiment(SYSTEMS, TOPICS, qrels=full, judges=["openai:m"], corpus=PASSAGES,
                              options={"base_url": server.base_url}, store=tmp_path / "s.sqlite")
        assert server.request_count == 0
    assert table.attrs["holes"] == 0 and (table.human == table.filled).all()
    with pytest.raises(ArgumentError, match="judges: expected at least one judge"):
        jb.experiment(SYSTEMS, TOPICS, qrels=full, judges=[], corpus=PASSAGES)


@pytest.mark.parametrize("helper,given,message", [
    ("positive_int", ("k", 3.0), "k: expected an integer of at least 1, got 3.0"),
    ("positive_int", ("k", np.float64(3)), "k: expected an integer of at least 1, got"),
    ("non_negative_int", ("bootstrap", False), "bootstrap: expected an integer of at least 0, got False"),
    ("number_between", ("confidence", True, 0, 1), "confidence: expected a number between 0 and 1 (exclusive), got True"),
    ("one_of", ("method", ["mv"], ["mv"]), "method: expected one of 'mv', got ['mv']"),
    ("sequence", ("measures", {"nDCG@10": 1}, "measures"), "measures: expected a list of measures, got {'nDCG@10': 1}"),
    ("text", ("name", "  "), "name: expected a non-blank string, got '  '"),
])
def test_the_helper_refuses_what_python_would_quietly_accept(helper, given, message):
    from judgeblender import arguments

    with pytest.raises(ArgumentError) as caught:
        getattr(arguments, helper)(*given)
    assert str(caught.value).startswith(message) and caught.value.argument == given[0]


def test_a_long_value_is_cut_visibly_in_the_message():
    from judgeblender import arguments

    with pytest.raises(ArgumentError) as caught:
        arguments.positive_int("k", "1" * 500)
    assert "[502 characters]" in str(caught.value) and len(str(caught.value)) < 200


def test_the_helpers_are_the_api_modules_one_way_to_check():
    """api.py, holes.py and pyterrier.py raise no bare ValueError or TypeError of their own."""
    import ast

    for module in ("api", "holes", "pyterrier"):
        source = (Path(jb.__file__).parent / f"{module}.py").read_text(encoding="utf-8")
        raised = [node.exc.func.id for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
                  and isinstance(node.exc.func, ast.Name)]
        assert not {"ValueError", "TypeError", "KeyError"} & set(raised), module
        assert "arguments." in source, module


def test_signatures_of_the_covered_functions_are_real():
    """Each case names a parameter the function really has (a typo would pass as a TypeError)."""
    functions = {"experiment": jb.experiment, "agreement": jb.agreement, "correlate": jb.correlate,
                 "calibrate": jb.calibrate, "blend_labels": jb.blend_labels, "ballots": jb.ballots,
                 "panel": jb.panel, "judge": jb.judge, "labels_frame": jb.labels_frame, "qrels": jb.qrels,
                 "read_pairs": jb.read_pairs, "read_qrels": jb.read_qrels, "judge_pairs": jb.judge_pairs,
                 "create_backend": jb.create_backend, "register": jb.register, "get_template": jb.get_template,
                 "Jury": jb.Jury, "pool": jb.pool, "find_holes": jb.find_holes, "sample_seed": jb.sample_seed,
                 "fill": jb.fill, "estimate": jb.estimate, "write_report": jb.write_report, "Client": jb.Client,
                 "load_dataset": jb.load_dataset}
    for name, _, argument in CASES:
        assert argument in inspect.signature(functions[name]).parameters, (name, argument)
