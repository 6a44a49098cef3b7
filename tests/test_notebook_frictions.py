"""The researcher's notebook (issue 39): tables that cannot be misread, one vocabulary, quiet loops,
families said to be guessed.

On the DL19 slice (tests/data/dl19_slice: 15 queries, 3 official runs cut to their top 10, NIST's
labels with 30% hidden as the holes, the published LLM labels), each friction the issue's user met
is asked again in the shape they met it, and the answer must leave no room to misread it.
"""

from __future__ import annotations

import logging
import random
import shutil
from pathlib import Path

import pandas as pd
import pytest

import judgeblender as jb
from judgeblender.pairs import read_qrels

ROOT = Path(__file__).resolve().parents[1]
SLICE = ROOT / "tests" / "data" / "dl19_slice"
RUN_FILES = sorted((SLICE / "runs").glob("*.run"))


def write_qrels(path: Path, rows) -> None:
    path.write_text("".join(f"{q} 0 {d} {label}\n" for q, d, label in rows))


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    """The slice's files, the human labels with 30% hidden, and a seed of 6 queries labelled by NIST."""
    for name in ("queries.tsv", "j1.qrels"):
        shutil.copy(SLICE / name, tmp_path / name)
    nist = read_qrels(SLICE / "qrels.txt")
    rng = random.Random(7)
    write_qrels(tmp_path / "human.qrels", [(q, d, lab) for q, docs in nist.items() for d, lab in docs.items()
                                           if rng.random() >= 0.3])
    write_qrels(tmp_path / "nist.qrels", [(q, d, lab) for q, docs in nist.items() for d, lab in docs.items()])
    monkeypatch.chdir(tmp_path)
    seed = jb.sample_seed(RUN_FILES, topics(tmp_path), queries=6, random_seed=2, out="seed.tsv")
    write_qrels(tmp_path / "seed.qrels", [(q, d, nist[q][d]) for q, d in zip(seed["qid"], seed["docno"])
                                          if d in nist.get(q, {})])
    return tmp_path


def topics(folder: Path) -> pd.DataFrame:
    return pd.read_csv(folder / "queries.tsv", sep="\t", names=["qid", "query"], dtype=str)


# -- part 4: quiet by default in loops ----------------------------------------------------------

def test_a_note_is_shown_once_per_process_and_every_call_still_returns_it(work, caplog):
    """The issue's 25-seed loop printed the same two notes 25 times: the second call's notes are
    in its attrs, not on the log again (a repeat goes to DEBUG)."""
    with caplog.at_level(logging.WARNING, logger="judgeblender"):
        tables = [jb.estimate(RUN_FILES, llm_labels="j1.qrels", seed="seed.qrels") for _ in range(3)]
    notes = tables[0].attrs["notes"]
    assert any("only 6 seed queries" in n for n in notes)
    assert all(t.attrs["notes"] == notes for t in tables)
    shown = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "note:" in r.getMessage()]
    assert len(shown) == len(notes) and len(set(shown)) == len(shown), shown


def test_notes_are_silenced_by_the_documented_line(work, caplog):
    logger = logging.getLogger("judgeblender")
    before = logger.level
    logger.setLevel(logging.ERROR)  # docs/api.md's line
    try:
        with caplog.at_level(logging.WARNING):
            jb.estimate(RUN_FILES, llm_labels="j1.qrels", seed="seed.qrels")
    finally:
        logger.setLevel(before)
    assert not [r for r in caplog.records if r.name.startswith("judgeblender")]
    assert "logging.getLogger(\"judgeblender\").setLevel(logging.ERROR)" in (ROOT / "docs" / "api.md").read_text()


# -- part 3: a report speaks its reader's language; part 5: families said to be guessed ----------

def page_text(path: Path) -> str:
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text()))


def test_a_report_written_from_python_names_arguments_and_the_command_its_flags(work):
    """The issue's report, written from Python, said "--seed-qrels" and "No call store was given
    (`--store`)": from Python it names jb.write_report's arguments, from the command its flags,
    both through arguments.CLI_FLAGS."""
    import subprocess
    import sys

    seed = jb.labels_frame("seed.qrels")
    py = page_text(jb.write_report("human.qrels", {"j1": "j1.qrels"}, RUN_FILES, "py.html", seed_qrels=seed,
                                   design="seed.design.json", bootstrap=20))
    assert "--" not in py.replace("judgeblender estimate --json", "").replace("judgeblender pool --exclude", "")
    assert "(store=)" in py and "seed_qrels=" in py and "No groups= was given" in py
    (work / "runs").mkdir()
    for path in RUN_FILES:
        shutil.copy(path, work / "runs" / path.name)
    done = subprocess.run([sys.executable, "-m", "judgeblender", "report", "--gold", "human.qrels", "--pred",
                           "j1.qrels", "--runs", "runs", "--seed-qrels", "seed.qrels", "--design", "seed.design.json",
                           "--bootstrap", "20", "--out", "cli.html"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    cli = page_text(work / "cli.html")
    assert "(--store)" in cli and "(--seed-qrels)" in cli and "No --groups was given" in cli
    assert "store=" not in cli and "seed_qrels=" not in cli


def test_every_flag_of_the_one_map_is_the_commands_own():
    """arguments.CLI_FLAGS is the one map from a library argument to the command line's flag: each
    entry is the flag the command standing for the function declares (read from its typer options)."""
    import inspect

    from judgeblender import arguments
    from judgeblender.cli import app
    from judgeblender.cli.usage import flags_of

    commands = {c.name or c.callback.__name__: c.callback for c in app.registered_commands}
    twins = {"report": jb.write_report, "experiment": jb.experiment, "fill": jb.fill}
    # the commands' parameters that stand for a library argument of another name
    library_name = {"preds": "predictions", "runs_dir": "systems", "store_path": "store", "judge_models": "judges",
                    "llm": "llm_labels"}
    checked = 0
    for command, function in twins.items():
        arguments_of = inspect.signature(function).parameters
        for parameter, flag in flags_of(commands[command]).items():
            argument = library_name.get(parameter, "k" if parameter == "depth" and "k" in arguments_of else parameter)
            if argument in arguments_of and argument in arguments.CLI_FLAGS:
                assert arguments.CLI_FLAGS[argument] == flag, (command, argument, flag)
                checked += 1
    assert checked >= 25, checked
    assert arguments.spoken("seed_qrels", cli=True) == "--seed-qrels"
    assert arguments.spoken("seed_qrels", cli=False) == "seed_qrels="


def test_guessed_families_are_labelled_and_their_table_left_out_when_no_family_has_two_runs(work):
    """The slice's runs (bm25base_p, bm25tuned_p, idst_bert_p1) guess three families of one run:
    the family column says guessed and the bias table gives way to one line saying why; with
    groups that put two runs together, the table is back and the families are not called guessed."""
    page = page_text(jb.write_report("human.qrels", {"j1": "j1.qrels"}, RUN_FILES, "g.html", bootstrap=20,
                                     min_judged=0.0))
    assert "family (guessed from the name)" in page
    assert "No table of bias by family: no family has two runs (3 families, guessed from the run names)" in page
    assert "rank shift" not in page
    grouped = page_text(jb.write_report("human.qrels", {"j1": "j1.qrels"}, RUN_FILES, "h.html", bootstrap=20, min_judged=0.0,
                                        groups={"bm25base_p": "bm25", "bm25tuned_p": "bm25",
                                                "idst_bert_p1": "bert"}))
    assert "rank shift" in grouped and "guessed" not in grouped and "No table of bias" not in grouped


def test_the_report_banner_counts_queries_as_its_sections_do(work):
    """The issue's banner said "0 queries count; 40 do not" where the sections said "only 3 of the
    43": with the seed standing in, the banner counts the queries judged enough, as the sections."""
    import re

    nist = read_qrels("nist.qrels")
    judged = list(nist)[:2]  # two queries labelled in full, the others with 30% hidden
    human = read_qrels("human.qrels")
    write_qrels(work / "mixed.qrels", [(q, d, lab) for q, docs in (nist | {q: human[q] for q in human
                                                                           if q not in judged}).items()
                                       for d, lab in docs.items()])
    page = page_text(jb.write_report("mixed.qrels", {"j1": "j1.qrels"}, RUN_FILES, "b.html", bootstrap=20,
                                     seed_qrels="seed.qrels"))
    section = re.search(r"since only (\d+) of the (\d+) queries", page)
    banner = re.search(r"human leaderboards: (\d+) quer(?:y counts|ies count); (\d+) quer", page)
    assert section and banner, page[:3000]
    assert int(banner[1]) == int(section[1]) and int(banner[1]) + int(banner[2]) == int(section[2])


# -- part 3: one vocabulary, docno in every frame -------------------------------------------------

def test_every_frame_the_api_returns_names_the_document_docno_and_docid_still_goes_in(mock_model, work):
    """`jb.pool`, `jb.find_holes` and `jb.fill` said docno, `jb.labels_frame`, `run.labels` and
    `run.blend` docid, so the issue's notebook renamed one to the other; now every frame says docno
    (PyTerrier's name) and a frame with docid (or doc_id) is still read."""
    mock_model.default = "##final score: 2"
    given = pd.DataFrame({"qid": ["q1", "q1"], "docid": ["d1", "d2"], "query": ["goldfish food"] * 2,
                          "passage": ["Goldfish eat flakes.", "Kettles boil water."]})
    run = jb.judge(given, ["mock:m"])
    gold = pd.DataFrame({"qid": ["q1", "q1"], "docid": ["d1", "d2"], "label": [2, 0]})
    frames = {"run.labels": run.labels, "run.blend": run.blend(), "labels_frame": jb.labels_frame(gold),
              "blend_labels": jb.blend_labels(run.labels),
              "pool": jb.pool(RUN_FILES, k=2), "find_holes": jb.find_holes(RUN_FILES, qrels="human.qrels", k=2),
              "fill": jb.fill(RUN_FILES, topics(work), qrels="human.qrels", llm_labels="j1.qrels", k=2)}
    for name, frame in frames.items():
        assert "docno" in frame.columns and "docid" not in frame.columns, (name, list(frame.columns))
    assert jb.agreement(run.blend(), gold).n == 2  # a frame that came out goes back in
    assert jb.labels_frame(gold.rename(columns={"docid": "doc_id"})).equals(jb.labels_frame(gold))


# -- part 2: tables that cannot be misread --------------------------------------------------------

def synthetic(folder: Path):
    """Twenty topics, a lenient judge, a seed of 8 whole queries, and three systems: `tweak` is
    `base` except on two topics, so its differences from base on the seed are too skewed for
    Cochran's rule; `good` uses the truth."""
    rng = random.Random(3)
    docs = [f"p{i}" for i in range(8)]
    qids = [f"t{i}" for i in range(20)]
    topic_frame = pd.DataFrame({"qid": qids, "query": [f"topic {q}" for q in qids]})
    truth = {q: {d: rng.choice([0, 0, 1, 2, 3]) for d in docs} for q in qids}
    llm = {q: {d: min(3, label + (rng.random() < 0.4)) for d, label in labels.items()} for q, labels in truth.items()}
    base = {q: {d: rng.random() for d in docs} for q in qids}
    tweak = {q: dict(scores) for q, scores in base.items()}
    for q in ("t0", "t5"):
        tweak[q][max(docs, key=lambda d: truth[q][d])] = 10.0
    good = {q: {d: rng.random() + 0.3 * truth[q][d] for d in docs} for q in qids}
    systems = {"base": base, "tweak": tweak, "good": good}
    seed = jb.sample_seed(systems, topic_frame, queries=8, k=5, random_seed=1, out=folder / "seed.tsv")
    seed_labels = {q: {d: truth[q][d] for d in seed.docno[seed.qid == q]} for q in seed.qid.unique()}
    return systems, topic_frame, truth, llm, seed_labels, folder / "seed.design.json"


def test_a_ppi_flag_never_contradicts_its_p_value_without_saying_why(tmp_path, caplog):
    """The issue's runid4: ppi_p_holm 0.0305 and ppi_significant False, with no word why (Cochran's
    rule). ppi_verdict says it, attrs["notes"] too, and every flag agrees with its verdict."""
    from judgeblender.evaluate.experiment import NOT_TESTED

    systems, topic_frame, truth, llm, seed, design = synthetic(tmp_path)
    with caplog.at_level(logging.WARNING, logger="judgeblender"):
        table = jb.experiment(systems, topic_frame, qrels=truth, llm_labels=llm, k=5, seed=seed, design=design,
                              baseline="base").set_index("system")
    assert table.loc["tweak", "ppi_verdict"] == NOT_TESTED and table.loc["good", "ppi_verdict"] == "significant"
    for name, row in table.drop(index="base").iterrows():
        assert row.ppi_significant == (row.ppi_verdict == "significant"), name
        if row.ppi_p_holm < 0.05 and not row.ppi_significant:
            assert row.ppi_verdict == NOT_TESTED, name
    note = next(n for n in table.attrs["notes"] if "not tested against base" in n)
    assert "Cochran's rule" in note and note.endswith(": tweak") and "8 seed queries" in note
    assert f"note: {note}" in caplog.text  # and on the log, once
    whole = {q: truth[q] for q in seed}  # the report reads the seed on every pair the LLM labels
    page = page_text(jb.write_report(truth, {"lenient": llm}, systems, tmp_path / "r.html", seed_qrels=whole,
                                     design=design, bootstrap=0))
    import re

    assert re.search(rf"pairs of runs significantly ordered; [1-9]\d* {NOT_TESTED}", page)
    assert 'class="untested"' in (tmp_path / "r.html").read_text()


def test_every_estimate_is_shown_beside_what_it_estimates_and_every_column_says_its_scope(tmp_path):
    """The seed's interval targets the human score over the pooled pairs, not over all labels: that
    figure (human_pool) stands beside ppi, and attrs["columns"] says each column's pairs."""
    systems, topic_frame, truth, llm, seed, design = synthetic(tmp_path)
    table = jb.experiment(systems, topic_frame, qrels=truth, llm_labels=llm, k=5, seed=seed, design=design,
                          baseline="base")
    columns = list(table.columns)
    assert columns.index("human_pool") == columns.index("ppi") - 1
    pooled = jb.experiment(systems, topic_frame, qrels=truth, llm_labels=llm, k=5, scope="pool")
    assert table.human_pool.tolist() == pooled.human.tolist() != table.human.tolist()
    described = table.attrs["columns"]
    assert set(described) == set(columns) - {"system", "measure"}
    assert "every pair the human or LLM labels cover" in described["human"]
    assert "pooled pairs of the systems' top 5" in described["ppi"] and "human_pool" in described["ppi"]


def test_fill_shows_holes_and_filled_and_names_the_default(work, caplog):
    """The issue's notebook printed 262 holes and then 2,717 pairs filled, under text that said
    fill "fills the holes": the frame counts both, and a note says the default fills every pair
    the LLM labels cover; scope='pool' fills the holes alone."""
    with caplog.at_level(logging.WARNING, logger="judgeblender"):
        filled = jb.fill(RUN_FILES, topics(work), qrels="human.qrels", llm_labels="j1.qrels", k=3)
    a = filled.attrs
    assert a["filled"] == (filled.provenance != "human").sum() > a["filled_holes"] == a["holes"] > 0
    assert a["pooled"] > a["holes"]
    note = next(n for n in a["notes"] if "pairs filled by the LLM labels" in n)
    assert f"{a['filled']} pairs filled by the LLM labels, {a['filled_holes']} of them among the {a['holes']} holes" in note
    assert "the scope 'labels' fills every pair the LLM labels cover" in note and note in caplog.text
    table = jb.experiment(RUN_FILES, topics(work), qrels="human.qrels", llm_labels="j1.qrels", k=3)
    assert {c: table.attrs[c] for c in a if c in ("pooled", "holes", "filled", "filled_holes")} == \
        {c: a[c] for c in ("pooled", "holes", "filled", "filled_holes")} and note in table.attrs["notes"]
    pool = jb.fill(RUN_FILES, topics(work), qrels="human.qrels", llm_labels="j1.qrels", k=3, scope="pool").attrs
    assert pool["filled"] == pool["filled_holes"] == pool["holes"] == a["holes"]
    assert not [n for n in pool["notes"] if "pairs filled by the LLM labels" in n]


def test_judged_at_10_breaks_ties_as_trec_eval_does_and_the_docs_say_so():
    """A run with two documents tied at rank 10: trec_eval (and judgeblender) takes the larger docno,
    ir_measures' `judged` the smaller; the issue's user found the one number of 133 that differed
    here, with nothing saying why."""
    import ir_measures

    scores = {f"d{i}": 10.0 - i for i in range(9)} | {"a": 1.0, "z": 1.0}
    human = {"q1": {**{f"d{i}": 1 for i in range(9)}, "a": 2}}
    table = jb.experiment({"tied": {"q1": scores}}, {"q1": "x"}, qrels=human, llm_labels=human, k=10)
    theirs = ir_measures.calc_aggregate([ir_measures.parse_measure("Judged@10")],
                                        [ir_measures.Qrel("q1", d, v) for d, v in human["q1"].items()],
                                        [ir_measures.ScoredDoc("q1", d, s) for d, s in scores.items()])
    assert table["judged@10"].tolist() == [0.9]  # z, unlabelled, is trec_eval's 10th
    assert list(theirs.values()) == [1.0]  # a, labelled, is ir_measures' 10th
    for doc in ("api.md", "pyterrier.md"):
        text = " ".join((ROOT / "docs" / doc).read_text().split())
        assert "ties at rank k as trec_eval does" in text and "ir_measures' `judged`" in text, doc


def test_the_experiment_command_sorts_by_score_and_shows_pythons_columns(work):
    """The command's table was sorted by name and showed PPI++ as ± only: it is sorted by the
    first measure's filled score, and shows the difference and verdict against the baseline as
    jb.experiment returns them (each interval in its estimate's cell)."""
    import json
    import os
    import subprocess
    import sys

    (work / "runs").mkdir()
    for path in RUN_FILES:
        shutil.copy(path, work / "runs" / path.name)
    args = [sys.executable, "-m", "judgeblender", "experiment", "--runs", "runs", "--topics", "queries.tsv",
            "--qrels", "human.qrels", "--llm", "j1.qrels", "--seed", "seed.qrels", "--baseline", "bm25base_p",
            "-m", "P@10", "-m", "nDCG@10"]
    env = {**os.environ, "COLUMNS": "250"}
    text = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    data = subprocess.run([*args, "--json"], capture_output=True, text=True, env=env, timeout=600)
    assert text.returncode == data.returncode == 0, text.stderr + data.stderr
    rows = [json.loads(line) for line in data.stdout.splitlines()]
    by_score = [r["system"] for r in sorted((r for r in rows if r.get("measure") == "P@10"),
                                            key=lambda r: -r["filled"])]
    assert by_score != sorted(by_score)  # the check can tell score order from name order
    body = [line for line in text.stdout.splitlines() if line.startswith("│")]
    shown = [line.split("│")[1].strip() for line in body]
    assert shown == by_score * 2  # both measures' tables, in the first measure's order
    heads = next(line for line in text.stdout.splitlines() if line.startswith("┃"))
    for heading in ("delta", "p", "sig", "human (pool)", "PPI++ [CI]", "PPI++ delta [CI]", "PPI++ p",
                    "PPI++ verdict", "no label"):
        assert f" {heading} ┃" in heads, heading
    tuned = next(line for line in body if "bm25tuned_p" in line)
    assert any(v in tuned for v in ("not significant", "significant", "not tested: Cochran's rule"))
    python = jb.experiment(RUN_FILES, topics(work), qrels="human.qrels", llm_labels="j1.qrels", seed="seed.qrels",
                           baseline="bm25base_p", measures=["P@10", "nDCG@10"])
    folded = {"system", "measure", "p", "ppi_low", "ppi_high", "ppi_delta_low", "ppi_delta_high", "ppi_significant"}
    assert set(python.columns) - folded <= {c for c in python.attrs["columns"]}
    for column in set(python.columns) - folded:  # every other column is shown, its words printed
        assert any(line.endswith(python.attrs["columns"][column][:60]) or python.attrs["columns"][column][:60]
                   in line for line in text.stdout.splitlines()), column
