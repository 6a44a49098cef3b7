"""The researcher's whole path in Python (workflow.py) gives what the commands give, on real DL19 data.

Each Python call is run beside the command it stands for, on the same files, and must give the
same pairs, files, figures and page: `jb.pool` / `jb.find_holes` and `pool` (with --exclude,
--queries-from, --drop-duplicates), `jb.sample_seed` and `pool --sample-queries` / `--sample-pairs`
(byte for byte, the design included), `jb.fill` and `fill`, `jb.estimate` and `estimate --json`,
`jb.write_report` and `report`. Systems come as run files, result frames, dicts and a PyTerrier
transformer. `jb.experiment(perquery=True)` is checked against its own table and against
pt.Experiment(perquery=True) on the filled qrels. The slice (tests/data/dl19_slice: 15 queries,
3 official runs cut to their top 10, NIST's labels, 3 published LLM label files) keeps the
commands fast; the per-query check runs on the whole of DL19.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import judgeblender as jb
from judgeblender.errors import ArgumentError, JudgeblenderError
from judgeblender.pairs import read_pairs, read_qrels, read_run

ROOT = Path(__file__).resolve().parents[1]
SLICE = ROOT / "tests" / "data" / "dl19_slice"
RUN_FILES = sorted((SLICE / "runs").glob("*.run"))
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DL19 = SHARED / "trec-dl-2019"
LLAMA70B = SHARED / "llm-labels" / "trec-dl-2019" / "fourprompts-llama3-70b.qrels"


def write_qrels(path: Path, rows) -> None:
    path.write_text("".join(f"{q} 0 {d} {label}\n" for q, d, label in rows))


def cli(*args, cwd: Path) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], capture_output=True, text=True,
                       cwd=cwd, env={**os.environ, "COLUMNS": "200"}, timeout=600)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    """A folder with the slice's files under the names the commands are given."""
    shutil.copytree(SLICE / "runs", tmp_path / "runs")
    for name in ("queries.tsv", "passages.jsonl", "judged.qrels", "j1.qrels", "j2.qrels"):
        shutil.copy(SLICE / name, tmp_path / name)
    nist = read_qrels(SLICE / "qrels.txt")
    rng = random.Random(7)
    write_qrels(tmp_path / "human.qrels", [(q, d, lab) for q, docs in nist.items() for d, lab in docs.items()
                                           if rng.random() >= 0.3])  # 30% hidden: the holes
    write_qrels(tmp_path / "nist.qrels", [(q, d, lab) for q, docs in nist.items() for d, lab in docs.items()])
    monkeypatch.chdir(tmp_path)
    return tmp_path


def frames() -> dict[str, pd.DataFrame]:
    """The slice's runs as PyTerrier result frames (qid, docno, score, rank)."""
    out = {}
    for path in RUN_FILES:
        run = read_run(path)
        out[run.name] = pd.DataFrame([(q, d, s, r) for q, docs in run.ranking.items()
                                      for r, (d, s) in enumerate(docs)], columns=["qid", "docno", "score", "rank"])
    return out


def pairs_of(df: pd.DataFrame) -> list[tuple[str, str]]:
    return list(zip(df["qid"], df["docno"]))


# -- pooling ----------------------------------------------------------------------------------

def test_jb_pool_is_the_pool_command_in_every_system_shape(work):
    summary = json.loads(cli("pool", "--runs", "runs", "--depth", "10", "--out", "pool.tsv", "--json", cwd=work).stdout)
    written = [(p.qid, p.docid) for p in read_pairs(work / "pool.tsv")]
    topics = pd.read_csv(work / "queries.tsv", sep="\t", names=["qid", "query"], dtype=str)
    dicts = {name: {q: dict(docs) for q, docs in read_run(p).ranking.items()} for name, p in
             zip(frames(), RUN_FILES)}
    for systems in (RUN_FILES, frames(), dicts):
        pool = jb.pool(systems, k=10)
        assert pairs_of(pool) == written
        assert {k: pool.attrs[k] for k in ("pooled", "duplicates", "judged", "holes")} == \
            {k: summary[k] for k in ("pooled", "duplicates", "judged", "holes")}
    pool = jb.pool(RUN_FILES)
    assert list(pool.columns) == ["qid", "docno", "best_rank", "systems"]
    first = pool.iloc[0]
    assert first.best_rank == 1 and set(first.systems) <= {r.stem for r in RUN_FILES}
    # the topics restrict the pool as --queries-from does
    cli("pool", "--runs", "runs", "--depth", "5", "--queries-from", "queries.tsv", "--out", "five.tsv", cwd=work)
    assert pairs_of(jb.pool(RUN_FILES, topics, k=5)) == [(p.qid, p.docid) for p in read_pairs(work / "five.tsv")]


def test_jb_pool_excludes_and_drops_duplicates_as_the_command_does(work):
    cli("pool", "--runs", "runs", "--depth", "10", "--exclude", "judged.qrels", "--out", "holes.tsv", cwd=work)
    python = jb.pool(RUN_FILES, exclude="judged.qrels")
    assert pairs_of(python) == [(p.qid, p.docid) for p in read_pairs(work / "holes.tsv")]
    assert python.attrs["judged"] > 0
    summary = json.loads(cli("pool", "--runs", "runs", "--depth", "10", "--corpus", "passages.jsonl",
                             "--drop-duplicates", "--out", "dedup.tsv", "--json", cwd=work).stdout)
    dedup = jb.pool(RUN_FILES, corpus="passages.jsonl", drop_duplicates=True)
    assert pairs_of(dedup) == [(p.qid, p.docid) for p in read_pairs(work / "dedup.tsv")]
    assert dedup.attrs["duplicate_pairs"] == summary["duplicate_pairs"]


def test_jb_pool_runs_a_pyterrier_transformer_on_the_topics(work):
    pt = pytest.importorskip("pyterrier")
    topics = pd.read_csv(work / "queries.tsv", sep="\t", names=["qid", "query"], dtype=str)
    runs = frames()
    bm25 = runs.pop("bm25base_p")
    seen = []

    def retrieve(topics_in: pd.DataFrame) -> pd.DataFrame:
        seen.append(sorted(topics_in["qid"]))
        return topics_in[["qid", "query"]].merge(bm25, on="qid")

    transformer = pt.apply.generic(retrieve)
    python = jb.pool({"bm25base_p": transformer, **runs}, topics)
    assert seen == [sorted(topics["qid"])]  # run once, on the topics
    assert pairs_of(python) == pairs_of(jb.pool(RUN_FILES))


def test_find_holes_are_the_holes_fill_and_experiment_fill(work):
    topics = pd.read_csv(work / "queries.tsv", sep="\t", names=["qid", "query"], dtype=str)
    holes = jb.find_holes(RUN_FILES, topics, qrels="human.qrels")
    human = read_qrels(work / "human.qrels")
    pooled = set(pairs_of(jb.pool(RUN_FILES, topics)))
    assert set(pairs_of(holes)) == {(q, d) for q, d in pooled if d not in human.get(q, {})}
    assert len(holes) == holes.attrs["holes"] > 30
    table = jb.experiment(RUN_FILES, topics, qrels="human.qrels", llm_labels="j1.qrels")
    assert table.attrs["holes"] == len(holes)
    filled = jb.fill(RUN_FILES, topics, qrels="human.qrels", llm_labels="j1.qrels")
    from_llm = filled[filled.provenance != "human"]
    assert set(pairs_of(from_llm)) <= set(pairs_of(holes))
    assert len(from_llm) + table.attrs["invalid"] >= len(holes)


def test_jb_fill_is_the_fill_command_on_the_pools_llm_labels(work):
    """`fill` merges two label files; jb.fill asks the LLM labels about the pool: given the LLM
    labels of the pooled pairs, both give the same qrels, human labels first."""
    topics = pd.read_csv(work / "queries.tsv", sep="\t", names=["qid", "query"], dtype=str)
    pooled = set(pairs_of(jb.pool(RUN_FILES, topics)))
    llm = read_qrels(work / "j1.qrels")
    write_qrels(work / "pool-llm.qrels", [(q, d, lab) for q, docs in llm.items() for d, lab in docs.items()
                                          if (q, d) in pooled])
    cli("fill", "--gold", "human.qrels", "--llm", "pool-llm.qrels", "--out", "merged.qrels", cwd=work)
    merged = read_qrels(work / "merged.qrels")
    filled = jb.fill(RUN_FILES, topics, qrels="human.qrels", llm_labels="j1.qrels")
    human = read_qrels(work / "human.qrels")
    assert jb.qrels(filled) == {q: docs for q, docs in merged.items() if q in set(topics.qid)}
    assert {(q, d) for q, d, p in zip(filled.qid, filled.docno, filled.provenance) if p == "human"} == \
        {(q, d) for q, docs in human.items() for d in docs}
    assert list(filled.columns) == ["qid", "docno", "label", "provenance"]


# -- the seed ---------------------------------------------------------------------------------

@pytest.mark.parametrize("draw, python", [
    (["--sample-queries", "5", "--seed", "3"], {"queries": 5, "random_seed": 3}),
    (["--sample-pairs", "40", "--pair-weights", "uniform", "--seed", "1"],
     {"pairs": 40.0, "weights": "uniform", "random_seed": 1}),
])
def test_jb_sample_seed_writes_what_pool_samples_byte_for_byte(work, monkeypatch, draw, python):
    (work / "cli").mkdir()
    (work / "py").mkdir()
    shutil.copytree(work / "runs", work / "cli" / "runs")
    cli("pool", "--runs", "runs", "--depth", "10", *draw, "--sample-out", "seed.tsv", "--out", "pool.tsv",
        cwd=work / "cli")
    monkeypatch.chdir(work / "py")
    seed = jb.sample_seed(RUN_FILES, k=10, out="seed.tsv", **python)
    for name in ("seed.tsv", "seed.design.json"):
        assert (work / "py" / name).read_bytes() == (work / "cli" / name).read_bytes(), name
    assert pairs_of(seed) == [(p.qid, p.docid) for p in read_pairs(work / "cli" / "seed.tsv")]
    assert seed.attrs["design"] == json.loads((work / "cli" / "seed.design.json").read_text())
    assert seed.attrs["design_file"] == "seed.design.json"


def test_a_seed_drawn_in_python_serves_the_experiment_and_estimate(work):
    """Drawn, labelled (NIST's labels stand in for people), then used: jb.estimate gives what
    `estimate --json` prints, number for number, and jb.experiment's PPI++ column the same."""
    topics = pd.read_csv(work / "queries.tsv", sep="\t", names=["qid", "query"], dtype=str)
    seed = jb.sample_seed(RUN_FILES, topics, queries=6, random_seed=2, out="seed.tsv")
    nist = read_qrels(work / "nist.qrels")
    write_qrels(work / "seed.qrels", [(q, d, nist[q][d]) for q, d in pairs_of(seed) if d in nist.get(q, {})])
    lines = [json.loads(line) for line in cli("estimate", "--llm", "j1.qrels", "--human", "seed.qrels", "--runs",
                                                "runs", "--json", cwd=work).stdout.splitlines()]
    table = jb.estimate(RUN_FILES, llm_labels="j1.qrels", seed="seed.qrels")
    runs = [{"name": line["run"], **{k: v for k, v in line.items() if k not in ("kind", "run")}} for line in lines
            if line["kind"] == "run"]
    assert table.to_dict("records") == runs
    assert table.attrs["differences"] == [{k: v for k, v in line.items() if k != "kind"} for line in lines
                                          if line["kind"] == "pair"]
    method = next(line for line in lines if line["kind"] == "method")
    assert table.attrs["method"] == {k: v for k, v in method.items() if k not in ("kind", "notes")}
    # the same seed as labels, with its design named, gives the same rows
    as_frame = jb.labels_frame("seed.qrels")
    again = jb.estimate(RUN_FILES, llm_labels=jb.labels_frame("j1.qrels"), seed=as_frame, design="seed.design.json")
    assert again[["name", "estimate", "ci_low", "ci_high"]].equals(table[["name", "estimate", "ci_low", "ci_high"]])
    with_seed = jb.experiment(RUN_FILES, topics, qrels="human.qrels", llm_labels="j1.qrels", seed="seed.qrels")
    by_name = table.set_index("name")
    for row in with_seed.itertuples():
        assert (row.ppi, row.ppi_low, row.ppi_high) == tuple(by_name.loc[row.system, ["estimate", "ci_low", "ci_high"]])


# -- the report -------------------------------------------------------------------------------

def test_jb_write_report_writes_the_page_the_command_writes(work):
    nist = read_qrels(work / "nist.qrels")
    seed = jb.sample_seed(RUN_FILES, queries=6, random_seed=4, out="seed.tsv")
    write_qrels(work / "seed.qrels", [(q, d, nist[q][d]) for q, d in pairs_of(seed) if d in nist.get(q, {})])
    cli("report", "--gold", "human.qrels", "--pred", "j1.qrels", "--pred", "j2.qrels", "--runs", "runs",
        "--seed-qrels", "seed.qrels", "--bootstrap", "200", "--out", "cli.html", cwd=work)
    path = jb.write_report(jb.labels_frame("human.qrels"), {"j1": "j1.qrels", "j2": read_qrels(work / "j2.qrels")},
                           frames(), "python.html", seed_qrels="seed.qrels", bootstrap=200)
    assert path == Path("python.html") and path.is_file()
    page = (work / "cli.html").read_text()
    # the pages differ only where they name their inputs: files and flags for the command, arguments
    # for Python (arguments.CLI_FLAGS)
    spoken = page
    for flag, argument in (("--seed-qrels", "seed_qrels="), ("--store", "store="), ("--groups", "groups="),
                           ("pool --sample-queries", "jb.sample_seed(queries=...)")):
        spoken = spoken.replace(flag, argument)
    named = spoken.replace("<code>human.qrels</code>", "<code>gold=</code>").replace("<code>runs</code>",
                                                                                     "<code>systems=</code>")
    assert named != spoken != page
    assert path.read_text() == named
    # files named by their stems, as --pred names them
    again = jb.write_report("human.qrels", ["j1.qrels", "j2.qrels"], RUN_FILES, "again.html", seed_qrels="seed.qrels",
                            bootstrap=200)
    assert again.read_text() == spoken.replace("<code>runs</code>", "<code>systems=</code>")


# -- per-query rows ---------------------------------------------------------------------------

def dl19_with_holes(seed: int):
    """DL19's topics (a qid, query frame) and NIST's labels with 30% hidden at random (`seed`)."""
    if not DL19.is_dir():
        pytest.skip("shared data not found")
    topics = pd.read_csv(DL19 / "queries.tsv", sep="\t", names=["qid", "query"], dtype=str)
    nist = pd.read_csv(DL19 / "qrels.txt", sep=" ", names=["qid", "iter", "docno", "label"],
                       dtype={"qid": str, "docno": str})[["qid", "docno", "label"]]
    rng = random.Random(seed)
    return topics, nist[[rng.random() >= 0.3 for _ in range(len(nist))]].reset_index(drop=True)


def test_perquery_rows_average_to_the_table_and_match_pt_experiment_on_dl19():
    topics, human = dl19_with_holes(seed=0)
    systems = {name: DL19 / "runs" / f"{name}.run.gz" for name in ("bm25base_p", "p_bert", "ICT-BERT2")}
    measures = ["nDCG@10", "AP(rel=2)", "P@10"]
    table = jb.experiment(systems, topics, qrels=human, llm_labels=LLAMA70B, measures=measures)
    rows = jb.experiment(systems, topics, qrels=human, llm_labels=LLAMA70B, measures=measures, perquery=True)
    assert list(rows.columns) == ["name", "qid", "measure", "value", "human", "llm"]
    assert len(rows) == 3 * 43 * 3 and rows.attrs["queries"] == table.attrs["queries"] == 43
    means = rows.groupby(["name", "measure"])[["value", "human", "llm"]].mean()
    for row in table.itertuples():
        mean = means.loc[(row.system, row.measure)]
        assert np.isclose([mean.value, mean.human, mean.llm], [row.filled, row.human, row.llm], rtol=0, atol=1e-12).all()
    pt = pytest.importorskip("pyterrier")
    from ir_measures import P, nDCG

    filled = jb.fill(systems, topics, qrels=human, llm_labels=LLAMA70B)
    results = [pt.io.read_results(str(path)) for path in systems.values()]
    theirs = pt.Experiment(results, topics, filled, eval_metrics=[nDCG @ 10, P @ 10], names=list(systems),
                           perquery=True)
    assert list(theirs.columns) == ["name", "qid", "measure", "value"]
    ours = rows.set_index(["name", "qid", "measure"])["value"]
    joined = theirs.join(ours.rename("ours"), on=["name", "qid", "measure"])
    assert len(joined) == 3 * 43 * 2 and joined["ours"].notna().all()
    assert np.allclose(joined["value"], joined["ours"], rtol=0, atol=1e-9)


def test_perquery_without_human_labels_scores_the_llm_labels_alone(work):
    topics = pd.read_csv(work / "queries.tsv", sep="\t", names=["qid", "query"], dtype=str)
    rows = jb.experiment(RUN_FILES, topics, llm_labels="j1.qrels", perquery=True)
    assert rows["human"].isna().all()
    assert np.allclose(rows["value"], rows["llm"])  # nothing human to fill: filled is the LLM labels
    table = jb.experiment(RUN_FILES, topics, llm_labels="j1.qrels")
    assert np.allclose(rows.groupby("name", sort=False)["value"].mean().loc[table.system], table.filled)


# -- arguments --------------------------------------------------------------------------------

def test_bad_arguments_are_named_as_python_names_them_before_any_work(work):
    topics = pd.read_csv(work / "queries.tsv", sep="\t", names=["qid", "query"], dtype=str)
    cases = [
        (lambda: jb.pool(RUN_FILES, k=0), "k: expected an integer of at least 1, got 0"),
        (lambda: jb.pool(RUN_FILES, drop_duplicates=True), "corpus: expected the passage texts"),
        (lambda: jb.sample_seed(RUN_FILES, out="s.tsv"), "queries: expected a number of whole queries to draw (or "
                                                          "pairs=, pairs with known probabilities), got none"),
        (lambda: jb.sample_seed(RUN_FILES, queries=16, out="s.tsv"),
         "queries: expected a number of queries between 1 and the 15 pooled queries, got 16"),
        (lambda: jb.sample_seed(RUN_FILES, pairs=10.0, weights="even", out="s.tsv"), "weights: expected 'runs' or"),
        (lambda: jb.sample_seed(RUN_FILES, queries=2, design_out="d.json"), "design_out: expected None unless out="),
        (lambda: jb.estimate(RUN_FILES, llm_labels="j1.qrels", seed=jb.labels_frame("nist.qrels")),
         "design: expected the seed's design file when the seed is not a file"),
        (lambda: jb.write_report("human.qrels", {"human": "j1.qrels"}, RUN_FILES, "r.html"),
         "predictions: expected names other than 'human'"),
        (lambda: jb.write_report("human.qrels", "j1.qrels", RUN_FILES, "r.html", min_judged=1.5),
         "min_judged: expected a share between 0 and 1, got 1.5"),
        (lambda: jb.experiment(RUN_FILES, topics, llm_labels="j1.qrels", baseline="bm25base_p", perquery=True),
         "baseline: expected None with perquery=True"),
        (lambda: jb.experiment(RUN_FILES, topics, llm_labels="j1.qrels", perquery="yes"),
         "perquery: expected True or False, got 'yes'"),
        (lambda: jb.pool(RUN_FILES, pd.DataFrame({"qid": ["nope"], "query": ["x"]})), "topics: expected query ids"),
    ]
    for call, message in cases:
        with pytest.raises(JudgeblenderError) as caught:
            call()
        assert str(caught.value).startswith(message), (message, str(caught.value))
        assert "--" not in str(caught.value).split(":")[0]  # a Python argument, never a CLI flag
    assert isinstance(pytest.raises(ArgumentError, lambda: jb.pool(RUN_FILES, k="10")).value, ValueError)
    assert not list(work.glob("s.*")) and not (work / "d.json").exists() and not (work / "r.html").exists()
    with pytest.raises(TypeError, match="unexpected keyword argument 'sed'"):
        jb.experiment(RUN_FILES, topics, llm_labels="j1.qrels", perquery=True, sed=1)


# -- the README's first lines -------------------------------------------------------------------

def test_the_readmes_first_40_lines_serve_a_newcomer_and_their_example_runs(work):
    """One sentence, the two set-up commands, installing into an existing environment, the Python
    example and the labels-you-already-have path, in the first 40 lines; build internals live in
    docs/setup.md. The labels-you-already-have example runs on the slice's files under its names."""
    head = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:40])
    for needed in ("make demo", "make test", 'pip install -e ".[', "jb.judge(", "Labels you already have",
                   "jb.experiment("):
        assert needed in head, needed
    for internal in ("AVX", "AMX", "CPU-s", "sources"):
        assert internal not in head, internal
    setup = (ROOT / "docs" / "setup.md").read_text(encoding="utf-8")
    assert "AMX" in setup and "2 min 51 s" in setup
    block = next(b for b in re.findall(r"```python\n(.*?)```", head, flags=re.S) if "jb.experiment(" in b)
    shutil.copy(SLICE / "runs" / "bm25base_p.run", work / "bm25.run")
    shutil.copy(SLICE / "runs" / "idst_bert_p1.run", work / "bert.run")
    shutil.copy(SLICE / "j1.qrels", work / "llm.qrels")
    namespace = {"jb": jb}
    exec(compile(block, "README.md", "exec"), namespace)
    table = namespace["table"]
    assert list(table.system) == ["bm25", "bert"] and table.attrs["filled"] > 0
    assert (table.filled >= table.human).all()  # holes scored 0 before, filled after


@pytest.mark.parametrize("scope", ["labels", "pool"])
def test_perquery_rows_follow_the_scope_of_the_table(scope):
    # the rows are computed from the same label sets as the table (evaluate/scope.py), in either scope
    topics, human = dl19_with_holes(seed=1)
    systems = {name: DL19 / "runs" / f"{name}.run.gz" for name in ("bm25base_p", "p_bert")}
    table = jb.experiment(systems, topics, qrels=human, llm_labels=LLAMA70B, k=5, scope=scope)
    rows = jb.experiment(systems, topics, qrels=human, llm_labels=LLAMA70B, k=5, scope=scope, perquery=True)
    assert rows.attrs["scope"] == table.attrs["scope"] == scope
    assert rows.attrs["scope_pairs"] == table.attrs["scope_pairs"]
    means = rows.groupby(["name", "measure"])[["value", "human", "llm"]].mean()
    for row in table.itertuples():
        mean = means.loc[(row.system, row.measure)]
        assert np.allclose([mean.value, mean.human], [row.filled, row.human], rtol=0, atol=1e-12)
        assert np.isnan(row.llm) == np.isnan(mean.llm) and (np.isnan(row.llm) or np.isclose(mean.llm, row.llm))
    filled = jb.fill(systems, topics, qrels=human, llm_labels=LLAMA70B, k=5, scope=scope)
    assert filled.attrs["scope"] == scope and filled.attrs["scope_pairs"] == table.attrs["scope_pairs"]
    assert 0 < len(filled) <= table.attrs["scope_pairs"]  # a pair with no label in either set is left out
