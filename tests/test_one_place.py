"""One place for each rule (issue 30, part 5): the confidence level, the judge id, two judges
sharing an id, and the library's errors about its arguments, told in the CLI's flags by the CLI.

Each rule used to be written out where it applied, in words that drifted apart; blend, kappa and
binary raised bare ValueErrors, which the command line reports as a bug (exit 1, a traceback).
The judge id was built in six places, two ways: a prompt file's judge was named after its
template by `judge`, `grade` and juries, after the file by panels, `jb.judge`'s lists and
cascades. The template's name wins; files written with the other form still find their judges
(tests/data/ids_before, written by the code before this change).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import judgeblender as jb
from judgeblender.blend import Blender
from judgeblender.blend.calibrate import fit_blend
from judgeblender.blend.probability import check_thresholds
from judgeblender.blend.votes import BallotTable, Vote, merge_tables
from judgeblender.errors import ArgumentError, InputError, JudgeblenderError
from judgeblender.evaluate.agreement import agreement
from judgeblender.evaluate.binary import alpha, binary_report
from judgeblender.evaluate.estimate import estimate, estimate_pair_design, query_ppi
from judgeblender.evaluate.experiment import experiment_table
from judgeblender.evaluate.leaderboard import correlate
from judgeblender.evaluate.pair_design import poisson_estimate
from judgeblender.judges import Judge, JudgeSpec, build_judge
from judgeblender.jury import Jury, pool
from judgeblender.kappa import cohen_kappa
from judgeblender.pairs.runs import Run
from judgeblender.panels.panel import get_panel, load_panel
from judgeblender.panels.panel_file import load_blend_panel, read_tiebreaker_table, specs_for

HERE = Path(__file__).parent
TINY = HERE / "data" / "tiny"
BEFORE = HERE / "data" / "ids_before"
SRC = str(Path(jb.__file__).resolve().parents[1])  # the judgeblender under test, for the subprocesses

GOLD = {"q1": {"d1": 3, "d2": 0}, "q2": {"d3": 1}}
ONE_RUN = [Run(name="r", path="r", ranking={"q1": [("d1", 2.0), ("d2", 1.0)], "q2": [("d3", 1.0)]})]
NO_RESULT = np.zeros((1, 3))


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def one_error(done: subprocess.CompletedProcess) -> str:
    """The run's one error line (exit 2, no traceback)."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    return errors[0]


# -- the confidence level ------------------------------------------------------------------------

CONFIDENCE_CALLS = {
    "agreement": lambda c: agreement(GOLD, GOLD, "p", confidence=c),
    "correlate": lambda c: correlate(GOLD, {"p": GOLD}, ONE_RUN, confidence=c),
    "query_ppi": lambda c: query_ppi(NO_RESULT, NO_RESULT, NO_RESULT > 0, confidence=c),
    "estimate": lambda c: estimate(GOLD, GOLD, [], ["P@1"], confidence=c),
    "estimate_pair_design": lambda c: estimate_pair_design(GOLD, GOLD, [], ["P@1"], None, confidence=c),
    "experiment_table": lambda c: experiment_table(None, ["P@1"], confidence=c),
    "poisson_estimate": lambda c: poisson_estimate(NO_RESULT, NO_RESULT[0], NO_RESULT[0], NO_RESULT > 0,
                                                   NO_RESULT[0] + 1, confidence=c),
    "jb.agreement": lambda c: jb.agreement(GOLD, GOLD, confidence=c),
}


@pytest.mark.parametrize("name", list(CONFIDENCE_CALLS))
@pytest.mark.parametrize("level", [0, 1.0, 1.5, -0.1, float("nan"), "0.9", True])
def test_every_interval_refuses_a_confidence_level_off_0_1_with_one_message(name, level):
    with pytest.raises(ArgumentError) as caught:
        CONFIDENCE_CALLS[name](level)
    assert caught.value.argument == "confidence"
    assert str(caught.value).startswith("confidence: expected a number between 0 and 1 (exclusive), got ")


# -- the library's own errors: blend, kappa, binary ------------------------------------------------

ARGUMENT_ERRORS = [
    ("blend method", lambda: Blender("mode"), "method", "unknown blend method 'mode'"),
    ("tie rule", lambda: Blender("mv", tie="coin"), "tie", "unknown tie rule 'coin'"),
    ("weights of no method", lambda: Blender("mv", weights={"a": 1}), "weights", "does not use weights"),
    ("a weight missing", lambda: Blender("weighted", weights={"a": 1}).vote({"a": 1, "b": 2}), "weights",
     "no weight given for judges: b"),
    ("a negative weight", lambda: Blender("weighted", weights={"a": 1, "b": -1}).vote({"a": 1, "b": 2}),
     "weights['b']", "a finite number >= 0"),
    ("thresholds", lambda: check_thresholds((0.5, 1.5)), "thresholds", "3 thresholds"),
    ("a vote off the scale", lambda: Vote(4), "label", "got 4"),
    ("a distribution of zeros", lambda: Vote(1, (0, 0, 0, 0)), "probs", "some mass"),
    ("a table's judges", lambda: BallotTable.from_votes([(("q", "d"), {"a": 1})]).only_judges(["b"]), "judges",
     "unknown judges ['b']"),
    ("two tables, one judge", lambda: merge_tables([BallotTable.from_votes([(("q", "d"), {"a": 1})])] * 2), "tables",
     "judges with distinct ids, got two that share the id 'a'"),
    ("a learner", lambda: fit_blend(BallotTable.from_votes([(("q", "d"), {"a": 1})]), GOLD, "forest"), "learner",
     "unknown learner 'forest'"),
    ("kappa weights", lambda: cohen_kappa([1, 2], [1, 2], weights="cubic"), "weights", "unknown kappa weights"),
    ("binary threshold", lambda: binary_report(np.array([1]), np.array([1]), threshold=4), "threshold", "got 4"),
    ("alpha level", lambda: alpha(np.array([1]), np.array([1]), level="fancy"), "level", "unknown level 'fancy'"),
    ("jury pooling", lambda: pool([0.5], "average"), "pooling", "unknown pooling 'average'"),
    ("jury tie", lambda: pool([0.5], "hard-vote", tie="coin"), "tie", "unknown tie rule 'coin'"),
]


@pytest.mark.parametrize("what,call,argument,words", ARGUMENT_ERRORS, ids=[c[0] for c in ARGUMENT_ERRORS])
def test_blend_kappa_and_binary_raise_argument_errors_that_name_the_argument(what, call, argument, words):
    """judgeblender's own error, a ValueError still (code that caught one keeps working), naming
    the Python argument, never a CLI flag, with the words the old message had."""
    with pytest.raises(ArgumentError) as caught:
        call()
    exc = caught.value
    assert isinstance(exc, ValueError) and exc.argument == argument
    assert str(exc).startswith(f"{argument}: expected ") and words in str(exc), str(exc)
    assert "--" not in str(exc)


def test_a_seed_of_one_query_is_one_line_naming_the_gold_file(tmp_path):
    """calibrate --select with a seed of one query: blend/select.py's error used to escape as a
    bare ValueError (exit 1 and a traceback); the command now checks the seed first and names
    the file (the library's own error, for the Python caller, is checked below)."""
    shutil.copy(BEFORE / "panel.qrels.details.jsonl", tmp_path / "d.jsonl")
    (tmp_path / "gold.qrels").write_text("q1 0 d1 3\nq1 0 d2 1\n")
    line = one_error(cli(tmp_path, "calibrate", "--gold", "gold.qrels", "--details", "d.jsonl", "--select",
                         "-o", "p.toml"))
    assert line.startswith("error: gold.qrels: expected human labels on pairs of at least 2 queries") and \
        "got '1 such query'" in line, line
    assert not (tmp_path / "p.toml").exists()
    from judgeblender.blend import BallotTable
    from judgeblender.blend.select import select
    from judgeblender.pairs import Pair

    table = BallotTable.from_votes([(Pair("q1", "d1"), {"a": 3, "b": 2}), (Pair("q1", "d2"), {"a": 1, "b": 1})])
    with pytest.raises(ValueError, match=r"^gold: expected labels of at least 2 queries .*got labels of 1"):
        select(table, {"q1": {"d1": 3, "d2": 1}})


def test_the_cli_maps_an_argument_to_its_own_flag_in_one_place():
    from judgeblender.cli import judge as judge_cli
    from judgeblender.cli.usage import as_option, flags_of
    import typer

    app = typer.Typer()
    judge_cli.register(app)
    flags = flags_of(app.registered_commands[0].callback)
    assert flags["invalid_policy"] == "--invalid" and flags["store_path"] == "--store"
    assert flags["ray_address"] == "--ray" and flags["progress"] == "--progress"
    told = as_option(ArgumentError("invalid_policy", "one of retry-once, no-retry", "twice"), flags)
    assert str(told) == "--invalid: expected one of retry-once, no-retry, got 'twice'" and told.argument == "--invalid"
    assert str(as_option(ArgumentError("ray", "an address", ""), flags)).startswith("--ray: ")  # by its flag
    assert str(as_option(ArgumentError("weights['b']", "a number", -1), {"weights": "--weights"})).startswith(
        "--weights['b']: ")
    kept = ArgumentError("labels['a']", "labels", 7)
    assert as_option(kept, flags) is kept  # not the command's: as the library said it


def test_a_bad_mode_is_told_of_mode_in_python_and_of_its_flag_on_the_command_line(tmp_path):
    with pytest.raises(ArgumentError, match=r"^mode: expected generate or logprobs, got unknown scoring mode 'fancy'$"):
        Judge(JudgeSpec("scripted:x", mode="fancy"))
    line = one_error(cli(tmp_path, "judge", "-q", TINY / "queries.tsv", "-c", TINY / "corpus.jsonl", "-p",
                         TINY / "qrels.txt", "-o", "o.qrels", "--mode", "fancy", "--store", "s.sqlite"))
    assert line == "error: --mode: expected generate or logprobs, got unknown scoring mode 'fancy'"
    assert not (tmp_path / "s.sqlite").exists()


# -- one judge id ----------------------------------------------------------------------------------

def test_one_declaration_gets_one_id_from_every_builder(tmp_path):
    """The judge, a panel file (judged or blended), jb.judge's list, a tie-breaker table and
    calibrate's mapping all name a prompt file's judge after its template."""
    for name in ("house.toml", "judge.json"):
        shutil.copy(BEFORE / name, tmp_path / name)
    prompt, model = str(tmp_path / "house.toml"), f"scripted:{tmp_path / 'judge.json'}"
    want = f"{model}/house-umbrela/generate"
    (tmp_path / "p.toml").write_text(f'[[judges]]\nmodel = "{model}"\nprompt = "{prompt}"\n\n'
                                     f'[tiebreaker]\nmodel = "{model}"\nprompt = "{prompt}"\n')
    ids = {
        "Judge": build_judge(JudgeSpec(model, prompt=prompt)).id,
        "jb.panel": jb.panel([{"model": model, "prompt": prompt}]).judges[0].id,
        "jb.panel prompt=": jb.panel([model], prompt=prompt).judges[0].id,
        "load_panel": load_panel(tmp_path / "p.toml", "generate", {}).judges[0].id,
        "load_blend_panel": load_blend_panel(tmp_path / "p.toml").judges[0],
        "tiebreaker": read_tiebreaker_table(tmp_path / "p.toml").id,
        "Jury": Jury([JudgeSpec(model, prompt=prompt)]).judges[0].id,
    }
    assert ids == dict.fromkeys(ids, want)


def test_two_judges_sharing_an_id_is_one_error_wherever_they_meet(tmp_path):
    shutil.copy(BEFORE / "judge.json", tmp_path / "judge.json")
    model = f"scripted:{tmp_path / 'judge.json'}"
    spec = {"model": model, "id": "same"}
    with pytest.raises(ArgumentError, match=r"^judges: expected judges with distinct ids, got two that share the id "
                                            r"'same'; give each its own id$"):
        jb.panel([spec, spec])
    with pytest.raises(ArgumentError, match="share the id 'same'"):
        Jury([JudgeSpec(model, prompt="factual-accuracy", id="same")] * 2)
    (tmp_path / "p.toml").write_text('[[judges]]\nmodel = "scripted:x"\nid = "same"\n\n'
                                     '[[judges]]\nmodel = "scripted:y"\nid = "same"\n')
    with pytest.raises(ArgumentError, match="share the id 'same'"):
        get_panel(str(tmp_path / "p.toml"), None, "generate", {})


@pytest.fixture
def before(tmp_path) -> Path:
    """tests/data/ids_before copied, its store rebuilt from SQL: files the code before wrote."""
    folder = tmp_path / "before"
    shutil.copytree(BEFORE, folder)
    db = sqlite3.connect(folder / "store.sqlite")
    db.executescript((folder / "store.sql").read_text())
    db.close()
    return folder


def judge_args(*extra: str) -> list[str]:
    return ["judge", "-q", TINY / "queries.tsv", "-c", TINY / "corpus.jsonl", "-p", TINY / "qrels.txt",
            "--store", "store.sqlite", "--no-progress", "--judge", "scripted:judge.json", "--json", *extra]


def test_files_written_before_one_id_builder_still_find_their_judges(before, monkeypatch):
    monkeypatch.chdir(before)  # the panel file's prompt is a path relative to where it runs, as on the CLI
    old_panel_ids = set(json.loads((before / "panel.qrels.details.jsonl").read_text().splitlines()[0])["judges"])
    assert old_panel_ids == {"scripted:judge.json/house.toml/generate", "scripted:judge.json/umbrela/generate"}

    # the panel file, read now, names its prompt-file member as the single judge always was named
    blend_panel = load_blend_panel(before / "panel.toml")
    assert blend_panel.judges[0] == "scripted:judge.json/house-umbrela/generate"
    # ... and a details file the panel wrote before is still its labels
    done = cli(before, "blend", "--panel", "panel.toml", "--details", "panel.qrels.details.jsonl", "-o", "again.qrels")
    assert done.returncode == 0, done.stderr
    assert (before / "again.qrels").read_text() == (before / "panel.qrels").read_text()

    # calibrate maps the details' old ids to the panel's members, models and prompts included
    specs = specs_for(sorted(old_panel_ids), get_panel(str(before / "panel.toml"), None, "generate", {}).judges)
    assert {s.prompt for s in specs.values()} == {"house.toml", "umbrela"}

    # the store: the single judge's judgments keep their id, and a run now makes no call
    for args in (("--prompt", "house.toml", "-o", "single2.qrels"), ("--panel", "panel.toml", "-o", "panel2.qrels")):
        done = cli(before, *judge_args(*args))
        assert done.returncode == 0, done.stderr
        assert all(row["calls_made"] == 0 for row in json.loads(done.stdout)["judges"]), done.stdout
    assert (before / "single2.qrels").read_text() == (before / "single.qrels").read_text()
    assert (before / "panel2.qrels").read_text() == (before / "panel.qrels").read_text()
    with jb.CallStore(before / "store.sqlite") as store:
        held = store.judge_ids()
    # the panel's member is now the single judge's own judge: no third id for one judge
    assert held == sorted({"scripted:judge.json/house-umbrela/generate", "scripted:judge.json/house.toml/generate",
                           "scripted:judge.json/umbrela/generate"})
    new_ids = set(json.loads((before / "panel2.qrels.details.jsonl").read_text().splitlines()[0])["judges"])
    assert new_ids == {"scripted:judge.json/house-umbrela/generate", "scripted:judge.json/umbrela/generate"}


def test_a_tiebreaker_labelled_under_its_former_id_is_found_by_blend(before, monkeypatch):
    """A panel file's [tiebreaker] without an id (a prompt file, logprobs mode): `blend --panel`
    takes its labels from a file named after the id it had before as readily as after today's."""
    (before / "tb.toml").write_text((before / "panel.toml").read_text()
                                    + '\n[tiebreaker]\nmodel = "scripted:judge.json"\nprompt = "house.toml"\n'
                                      'mode = "logprobs"\nspread = 1\n')
    monkeypatch.chdir(before)
    members = [f"{j}=single.qrels" for j in load_blend_panel("panel.toml").judges]
    for tiebreaker in ("scripted:judge.json/house.toml/logprobs", "scripted:judge.json/house-umbrela/logprobs"):
        done = cli(before, "blend", "--panel", "tb.toml", *members, f"{tiebreaker}=panel.qrels", "-o", "b.qrels")
        assert done.returncode == 0, done.stderr
        assert ("tie-breaker of panel tb.toml: scripted:judge.json/house-umbrela/logprobs, labels from panel.qrels"
                in done.stderr), done.stderr


# -- issue 40, part 3: each rule once, and a test that fails on a second copy ----------------------
# Each structural check below reads the source with `ast` and returns what it found outside the one
# place; each is run on the project (nothing found) and on a planted copy (found), so a check that
# could not see a second copy fails its own test.

import ast  # noqa: E402
import re  # noqa: E402
from collections.abc import Collection  # noqa: E402

PACKAGE = Path(jb.__file__).resolve().parent


def sources() -> dict[str, str]:
    """The package's modules by path relative to the package (`judges/judge.py`)."""
    return {p.relative_to(PACKAGE).as_posix(): p.read_text(encoding="utf-8") for p in sorted(PACKAGE.rglob("*.py"))}


def strings_in(node: ast.AST) -> list[ast.Constant]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def raises(tree: ast.AST) -> list[ast.Raise]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Raise) and n.exc is not None]


# -- one duplicate-id check ------------------------------------------------------------------------

ID_CHECK_HOME = "arguments.py"
ID_CHECK_WORDS = re.compile(r"share[sd]? the id|distinct ids?\b|same judge id", re.I)


def repeated_id_checks(modules: dict[str, str]) -> list[str]:
    """Checks that two judges do not share an id outside arguments.distinct_ids: an error raised
    with words of that rule, or `len(set(ids)) != len(ids)` over ids or judges."""
    found = []
    for path, text in modules.items():
        if path == ID_CHECK_HOME:
            continue
        tree = ast.parse(text)
        for node in raises(tree):
            found += [f"{path}:{s.lineno}: {s.value!r}" for s in strings_in(node) if ID_CHECK_WORDS.search(s.value)]
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and len(node.comparators) == 1:
                sides = [ast.unparse(node.left), ast.unparse(node.comparators[0])]
                if any(s.startswith("len(set(") for s in sides) and re.search(r"\bid|judge", " ".join(sides)):
                    found.append(f"{path}:{node.lineno}: {' vs '.join(sides)}")
    return found


def test_one_duplicate_id_check_and_a_second_copy_is_found():
    assert repeated_id_checks(sources()) == []
    planted = {"judges/run.py": 'def check_ids(judges):\n    ids = [j.id for j in judges]\n'
                                '    if len(set(ids)) != len(ids):\n'
                                '        raise JudgeblenderError("two judges share the id: give each a distinct id")\n'}
    found = repeated_id_checks(planted)
    assert found == ["judges/run.py:4: 'two judges share the id: give each a distinct id'",
                     "judges/run.py:3: len(set(ids)) vs len(ids)"], found


def test_two_judges_sharing_an_id_are_one_argument_error_in_a_run_and_in_merged_tables(tiny):
    """The engine raised a bare JudgeblenderError of its own words (judges/run.py check_ids) where
    panels and juries raised this ArgumentError; now every meeting point raises the one."""
    from judgeblender.backends.scripted import ScriptedBackend
    from judgeblender.judges import judge_pairs
    from judgeblender.judges.engine import judge_stream
    from judgeblender.pairs import Pair, read_corpus, read_queries

    data = read_queries(tiny / "queries.tsv"), read_corpus(tiny / "corpus.jsonl")
    judge = Judge(JudgeSpec(model="scripted:x"), backend=ScriptedBackend(default="1"))
    want = r"^judges: expected judges with distinct ids, got two that share the id 'scripted:x/umbrela/generate'"
    with pytest.raises(ArgumentError, match=want):
        judge_pairs([judge, judge], [Pair("1", "a")], *data)
    with pytest.raises(ArgumentError, match=want):
        judge_stream([judge, judge], [Pair("1", "a")], *data, on_window=lambda run, texts: None)
    table = BallotTable.from_votes([(("q", "d"), {"a": 1})])
    with pytest.raises(ArgumentError, match=r"^tables: expected judges with distinct ids, got two that share the id 'a'"):
        merge_tables([table, table])


def test_a_panel_file_naming_one_id_twice_names_its_line(tmp_path):
    (tmp_path / "p.toml").write_text('[[judges]]\nid = "a"\n\n[[judges]]\nid = "b"\n\n[[judges]]\nid = "a"\n')
    with pytest.raises(InputError) as caught:
        load_blend_panel(tmp_path / "p.toml")
    assert str(caught.value) == f"{tmp_path / 'p.toml'}:8: expected judge 3: a distinct id, got 'a'"


# -- one judge-id builder, scorers included ----------------------------------------------------------

ID_HOME = "judges/judge.py"


def _is_model(node: ast.AST) -> bool:
    return any(isinstance(n, (ast.Name, ast.Attribute, ast.Constant)) and
               (getattr(n, "id", None) == "model" or getattr(n, "attr", None) == "model" or n == "model"
                or (isinstance(n, ast.Constant) and n.value == "model"))
               for n in ast.walk(node))


def second_id_builders(modules: dict[str, str]) -> list[str]:
    """Judge ids built outside judges/judge.py: a string of three parts joined by slashes
    (MODEL/PROMPT/MODE), or an id given a judge's model (`spec.id or spec.model`, `id=model`,
    `setdefault("id", model)`), as scorers were named before."""
    found = []
    for path, text in modules.items():
        if path == ID_HOME:
            continue
        for node in ast.walk(ast.parse(text)):
            where = f"{path}:{getattr(node, 'lineno', 0)}: "
            if isinstance(node, ast.JoinedStr):
                parts = ["{}" if isinstance(v, ast.FormattedValue) else v.value for v in node.values]
                if re.search(r"\{\}/\{\}/\{\}", "".join(parts)):
                    found.append(where + ast.unparse(node))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join" \
                    and isinstance(node.func.value, ast.Constant) and node.func.value.value == "/" \
                    and re.search(r"prompt|mode", ast.unparse(node)):
                found.append(where + ast.unparse(node))
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "id"
                                                      for t in node.targets) and _is_model(node.value):
                found.append(where + ast.unparse(node))
            elif isinstance(node, ast.keyword) and node.arg == "id" and _is_model(node.value):
                found.append(where + ast.unparse(node))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setdefault" \
                    and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "id":
                found.append(where + ast.unparse(node))
    return found


def test_one_judge_id_builder_and_a_second_copy_is_found():
    assert second_id_builders(sources()) == []
    planted = {"judges/embedding.py": "class S:\n    def __init__(self, spec):\n        self.id = spec.id or spec.model\n",
               "api.py": 'def _spec(fields):\n    fields.setdefault("id", fields["model"])\n',
               "panels/panel.py": 'def name(m, p, mode):\n    return f"{m}/{p}/{mode}"\n',
               "cli/cascade.py": 'def name(spec):\n    return "/".join([spec.model, spec.prompt, spec.mode])\n'}
    assert second_id_builders(planted) == [
        "judges/embedding.py:3: self.id = spec.id or spec.model",
        "api.py:2: fields.setdefault('id', fields['model'])",
        "panels/panel.py:2: f'{m}/{p}/{mode}'",
        "cli/cascade.py:2: '/'.join([spec.model, spec.prompt, spec.mode])"]


SCORER_PANEL = '[[judges]]\nmodel = "embed:default"\n\n[[judges]]\nid = "other"\nmodel = "scripted:x"\n'


def test_a_scorer_has_one_id_from_every_builder(tmp_path):
    """A scorer was `embed:default` to the judge and `jb.panel([...])` but
    `embed:default/umbrela/generate` to a panel file. Its model string is the id: the prompt and
    mode a panel file gave it are not its own (a scorer reads neither)."""
    (tmp_path / "p.toml").write_text(SCORER_PANEL)
    ids = {
        "build_judge": build_judge(JudgeSpec("embed:default")).id,
        "jb.panel": jb.panel(["embed:default"]).judges[0].id,
        "jb.panel dict": jb.panel([{"model": "embed:default", "prompt": "thomas"}]).judges[0].id,
        "jb.panel file": jb.panel(str(tmp_path / "p.toml")).judges[0].id,
        "load_panel": load_panel(tmp_path / "p.toml", "logprobs", {}).judges[0].id,
        "load_blend_panel": load_blend_panel(tmp_path / "p.toml").judges[0],
        "the panel file's judge": build_judge(load_panel(tmp_path / "p.toml", "generate", {}).judges[0]).id,
    }
    assert ids == dict.fromkeys(ids, "embed:default")


@pytest.mark.parametrize("written_as", ["embed:default", "embed:default/umbrela/generate"])
def test_a_scorers_labels_under_either_id_are_the_same_judges(tmp_path, written_as):
    """The canonical id is the model string; the panel file's former MODEL/PROMPT/MODE is an
    accepted alias (judges/judge.py `former_ids`): labels and details filed under either are the
    panel member's, for `blend --panel` and for calibrate's mapping of ids to judges."""
    (tmp_path / "p.toml").write_text(SCORER_PANEL)
    (tmp_path / "scorer.qrels").write_text("q1 0 d1 3\nq1 0 d2 0\nq2 0 d3 1\n")
    (tmp_path / "other.qrels").write_text("q1 0 d1 3\nq1 0 d2 1\nq2 0 d3 1\n")
    done = cli(tmp_path, "blend", "--panel", "p.toml", f"{written_as}=scorer.qrels", "other=other.qrels",
               "-o", "b.qrels")
    assert done.returncode == 0, done.stderr
    assert "members embed:default, other" in done.stderr, done.stderr
    assert (tmp_path / "b.qrels").read_text().split("\n")[0].split()[-1] == "3"
    panel = get_panel(str(tmp_path / "p.toml"), None, "generate", {})
    specs = specs_for([written_as, "other"], panel.judges)
    assert specs[written_as] is panel.judges[0] and specs[written_as].model == "embed:default"


# -- one confidence check, used by every entry point ------------------------------------------------

ENTRY_MODULES = ("api.py", "workflow.py", "holes.py", "pyterrier.py")


def _calls(node: ast.AST) -> list[str]:
    return [ast.unparse(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)]


def unchecked_confidence(modules: dict[str, str]) -> list[str]:
    """Entry points (the public functions and methods of api, workflow, holes and pyterrier) that
    take a `confidence` without calling arguments.confidence, themselves or through a helper of
    their module; and anywhere, a confidence level checked by other means (its own bounds)."""
    found = []
    for path, text in modules.items():
        if path == "arguments.py":
            continue
        tree = ast.parse(text)
        funcs = {f.name: f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        checks = {name for name, f in funcs.items() if "arguments.confidence" in _calls(f)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                    and node.args[0].value == "confidence" and ast.unparse(node.func) != "arguments.confidence":
                found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
            if isinstance(node, ast.Compare) and "confidence" in {getattr(n, "id", getattr(n, "attr", None))
                                                                   for n in [node.left, *node.comparators]} \
                    and any(isinstance(n, ast.Constant) and isinstance(n.value, (int, float))
                            for n in [node.left, *node.comparators]):
                found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
        if path not in ENTRY_MODULES:
            continue
        for name, f in funcs.items():
            params = [a.arg for a in (*f.args.args, *f.args.kwonlyargs)]
            if name.startswith("_") or "confidence" not in params:
                continue
            if not ({name} | set(_calls(f))) & checks:
                found.append(f"{path}:{f.lineno}: {name} takes a confidence and does not check it")
    return found


def test_every_entry_point_checks_the_confidence_level_in_one_place():
    assert unchecked_confidence(sources()) == []
    planted = {"workflow.py": 'def report(out, *, confidence=0.95):\n'
                              '    arguments.number_between("confidence", confidence, 0, 1)\n',
               "holes.py": 'def fill(gold, *, confidence=0.95):\n    return gold\n',
               "report/data.py": 'def check(inputs):\n    if not 0 < inputs.confidence < 1:\n        raise ValueError\n'}
    assert unchecked_confidence(planted) == [
        "workflow.py:2: arguments.number_between('confidence', confidence, 0, 1)",
        "workflow.py:1: report takes a confidence and does not check it",
        "holes.py:1: fill takes a confidence and does not check it",
        "report/data.py:2: 0 < inputs.confidence < 1"]


def test_the_entry_points_that_skipped_it_refuse_a_level_in_its_words(tmp_path):
    """api's measuring functions, workflow's estimate and report, and holes' fill restated the
    check (number_between with its own 0 and 1); they now call arguments.confidence, so a change
    of the one check reaches them. The message is the one check's."""
    from judgeblender import arguments

    calls = {
        "jb.correlate": lambda c: jb.correlate(GOLD, {"p": GOLD}, ONE_RUN, confidence=c),
        "jb.estimate": lambda c: jb.estimate(ONE_RUN, llm_labels=GOLD, seed=GOLD, design="d.json", confidence=c),
        "jb.write_report": lambda c: jb.write_report(ONE_RUN, GOLD, {"p": GOLD}, out=tmp_path / "r.html",
                                                     confidence=c),
    }
    original = arguments.confidence
    seen = []

    def spy(value, name="confidence"):
        seen.append(name)
        return original(value, name)

    for name, call in calls.items():
        with pytest.raises(ArgumentError, match=r"^confidence: expected a number between 0 and 1 \(exclusive\)"):
            call(1.5)
        arguments.confidence = spy
        try:
            with pytest.raises(ArgumentError):
                call(1.5)
        finally:
            arguments.confidence = original
    assert len(seen) == len(calls), seen


# -- one declaration of each bound -------------------------------------------------------------------

RESTATING_CHECKS = {"number_between", "number_from_to", "integer", "positive_int", "non_negative_int", "share"}


def restated_bounds(modules: dict[str, str], bounded: Collection[str]) -> list[str]:
    """Bounds of `bounded` arguments (arguments.BOUNDS) written outside arguments.py: a comparison of
    such an argument with a number, a check that takes its own numbers for it, a table entry of
    numbers under its name (as cli/checks.py NUMBERS had), or an option's own min or max."""
    found = []
    for path, text in modules.items():
        if path == "arguments.py":
            continue
        for node in ast.walk(ast.parse(text)):
            where = f"{path}:{getattr(node, 'lineno', 0)}: "
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                names = {getattr(n, "id", getattr(n, "attr", None)) for n in sides}
                if names & set(bounded) and any(isinstance(n, ast.Constant) and type(n.value) in (int, float)
                                                for n in sides):
                    found.append(where + ast.unparse(node))
            elif isinstance(node, ast.Call):
                func = ast.unparse(node.func).rpartition(".")[2]
                first = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
                if func in RESTATING_CHECKS and first in bounded:
                    found.append(where + ast.unparse(node))
                flags = {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
                if {f"--{b.replace('_', '-')}" for b in bounded} & flags and any(
                        k.arg in ("min", "max") and isinstance(k.value, ast.Constant) for k in node.keywords):
                    found.append(where + ast.unparse(node))
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if isinstance(key, ast.Constant) and key.value in bounded and isinstance(value, ast.Tuple) \
                            and any(isinstance(e, ast.Constant) and type(e.value) in (int, float) for e in value.elts):
                        found.append(where + f"{key.value!r}: {ast.unparse(value)}")
    return found


def test_each_bound_is_declared_once_and_a_second_declaration_is_found():
    from judgeblender import arguments
    from judgeblender.cli.checks import NUMBERS

    assert restated_bounds(sources(), arguments.BOUNDS) == []
    assert all(NUMBERS[name] == bound[:4] for name, bound in arguments.BOUNDS.items())  # the CLI's are these
    planted = {
        "cli/checks.py": 'NUMBERS = {"min_choice_mass": (0, 1, False, False), "timeout": (0, None, True, False)}\n',
        "cli/options.py": 'M = typer.Option("--min-choice-mass", min=0.0, max=1.0)\n',
        "judges/judge.py": 'def check(mass):\n    return arguments.number_from_to("min_choice_mass", mass, 0.0, 1.0)\n',
        "report/data.py": 'def check(inputs):\n    if not 0 <= inputs.min_judged <= 1:\n        raise ValueError\n',
    }
    assert restated_bounds(planted, arguments.BOUNDS) == [
        "cli/checks.py:1: 'min_choice_mass': (0, 1, False, False)",
        "cli/options.py:1: typer.Option('--min-choice-mass', min=0.0, max=1.0)",
        "judges/judge.py:2: arguments.number_from_to('min_choice_mass', mass, 0.0, 1.0)",
        "report/data.py:2: 0 <= inputs.min_judged <= 1"]


# -- library errors name arguments; the command line tells them as its flags ------------------------

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
QUOTED_COMMAND = re.compile(r"`[^`]*`")  # a command to run (`pool --sample-queries`) is not this call's flag


def _error_strings(tree: ast.AST) -> list[ast.Constant]:
    """The strings of what the library raises: a raise, an error built (`...Error(...)`, an error's
    own `__init__`), and a hint kept for one."""
    found: list[ast.Constant] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            found += strings_in(node.exc)
        elif isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name.endswith(("Error", "Exception", "__init__")):
                found += [s for arg in [*node.args, *(k.value for k in node.keywords)] for s in strings_in(arg)]
        elif isinstance(node, ast.Assign) and any("hint" in ast.unparse(t) for t in node.targets):
            found += strings_in(node.value)
    return found


def flags_in_library_errors(modules: dict[str, str]) -> list[str]:
    """Library errors (every module but cli/ and __main__) that name a command-line flag."""
    found = []
    for path, text in modules.items():
        if path.startswith("cli/") or path == "__main__.py":
            continue
        for s in _error_strings(ast.parse(text)):
            if FLAG.search(QUOTED_COMMAND.sub("", s.value)):
                found.append(f"{path}:{s.lineno}: {s.value!r}")
    return sorted(set(found))


def test_library_errors_name_no_flag_and_a_flag_planted_in_one_is_found():
    assert flags_in_library_errors(sources()) == []
    planted = {"pairs/pool.py": 'def pool_runs(runs, depth):\n    if depth < 1:\n'
                                '        raise JudgeblenderError(f"--depth must be 1 or more, got {depth}")\n',
               "judges/inputs.py": 'def text_error(problem):\n    hint = "; pass --skip-missing to judge the rest"\n'
                                   '    return JudgeblenderError(problem + hint)\n',
               "errors.py": 'class MissingItemsError(JudgeblenderError):\n    def __init__(self, n):\n'
                            '        super().__init__(f"{n} missing; pass --skip-missing")\n',
               "evaluate/estimate.py": 'def f():\n    raise JudgeblenderError("draw one with `pool --sample-queries`")\n',
               "cli/pool.py": 'def f():\n    raise JudgeblenderError("--depth is the pool depth")\n'}
    assert flags_in_library_errors(planted) == [
        "errors.py:3: ' missing; pass --skip-missing'",
        "judges/inputs.py:2: '; pass --skip-missing to judge the rest'",
        "pairs/pool.py:3: '--depth must be 1 or more, got '"]


LIBRARY_ERRORS = [  # (call, the Python argument's words), each once named a CLI flag
    (lambda: __import__("judgeblender.pairs.pool", fromlist=["x"]).pool_runs([], depth=0),
     r"^depth: expected an integer of at least 1, got 0$"),
    (lambda: __import__("judgeblender.pairs.pool", fromlist=["x"]).parse_bands("1-3,x", 10),
     r"^bands: expected ranges such as 1-3,4-10, got 'x'$"),
    (lambda: __import__("judgeblender.pairs.pool", fromlist=["x"]).stratified_sample([], 0, 0, [(1, 10)]),
     r"^sample: expected an integer of at least 1, got 0$"),
    (lambda: estimate(GOLD, GOLD, ONE_RUN, ["P@1"], target="everything"),
     r"^target: expected one of 'collection', 'superpopulation', got 'everything'$"),
    (lambda: __import__("judgeblender.evaluate.estimate", fromlist=["x"]).plan(
        GOLD, GOLD, ONE_RUN, ["P@1"], target_width=0), r"^target_width: expected a number greater than 0, got 0$"),
    (lambda: __import__("judgeblender.pairs.design", fromlist=["x"]).draw_pair_design([], 1, 10, "all", 0),
     r"^weights: expected 'runs' or 'uniform', got 'all'$"),
    (lambda: __import__("judgeblender.serve.server", fromlist=["x"]).check_exposure("0.0.0.0", False),
     r"^host: expected a loopback address .* unless token_file= is given, got '0.0.0.0'; .* pass token_file=FILE"),
    (lambda: __import__("judgeblender.backends.ray_executor", fromlist=["x"])._host_port("h:x", 1),
     r"^ray: expected local, auto, HOST:PORT or ray://HOST:PORT, got 'h:x'$"),
    (lambda: __import__("judgeblender.errors", fromlist=["x"]).MissingItemsError("query", ["q9"], 3, "q.tsv"),
     r"pass skip_missing=True to judge the rest"),
]


@pytest.mark.parametrize("call,words", LIBRARY_ERRORS, ids=[w[:30] for _, w in LIBRARY_ERRORS])
def test_library_errors_name_the_python_argument(call, words):
    try:
        error = call()
    except JudgeblenderError as exc:
        error = exc
    assert isinstance(error, JudgeblenderError) and re.search(words, str(error)), error
    assert not FLAG.search(str(error)), str(error)


def test_the_cli_tells_every_argument_an_error_names_as_its_flag_through_the_one_map():
    """cli/usage.py `told`: the argument an error is about and every other it names, in the flags
    of the command (its own parameters, else arguments.CLI_FLAGS through `spoken`)."""
    from judgeblender.cli.usage import told
    from judgeblender.errors import MissingItemsError

    flags = {"depth": "--depth", "skip_missing": "--skip-missing", "bands": "--bands", "seed_qrels": "--seed-qrels",
             "out": "--out", "force": "--force"}
    said = told(ArgumentError("bands", "bands down to rank depth=10", "1-3"), flags)
    assert str(said) == "--bands: expected bands down to rank --depth 10, got '1-3'" and said.argument == "--bands"
    assert str(told(MissingItemsError("query", ["q9"], 3, "q.tsv"), flags)).endswith(
        "pass --skip-missing to judge the rest and report them")
    assert str(told(ArgumentError("design", "its seed (seed_qrels=)", "d"), flags)) == \
        "design: expected its seed (--seed-qrels), got 'd'"  # the command has no design: as said
    # `overwrite` is `--force` on `store merge`: the one map (arguments.CLI_FLAGS) says so
    assert str(told(ArgumentError("out", "a new file", "m.sqlite", hint="pass overwrite=True"), flags)) == \
        "--out: expected a new file, got 'm.sqlite'; pass --force"
    plain = JudgeblenderError("nothing to tell: k is 3")
    assert told(plain, flags) is plain


@pytest.mark.parametrize("args,line", [
    (["pool", "--runs", "runs", "--depth", "10", "--bands", "1-3,4-8", "--sample", "2", "-o", "p.tsv",
      "--sample-out", "s.tsv"],
     "error: --bands: expected bands down to rank --depth 10, got '1-3,4-8'; these stop at rank 8"),
    (["judge", "-q", TINY / "queries.tsv", "-c", TINY / "corpus.jsonl", "-p", "pairs.tsv", "-o", "o.qrels",
      "-j", "scripted:judge.json", "--no-progress"],
     "error: 1 of 3 pairs reference a query missing from the queries (first: q9); pass --skip-missing to judge the rest "
     "and report them"),
])
def test_the_command_line_still_names_its_flags(tmp_path, args, line):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "a.run").write_text("q1 Q0 d1 1 2.0 a\nq1 Q0 d2 2 1.0 a\n")
    (tmp_path / "pairs.tsv").write_text("q1\td1\nq1\td2\nq9\td1\n")
    shutil.copy(BEFORE / "judge.json", tmp_path / "judge.json")
    assert one_error(cli(tmp_path, *args)) == line
