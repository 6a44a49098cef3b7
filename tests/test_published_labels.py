"""Published labels just work (issue 31, part 4): a label file that covers more than the pool a seed was
drawn from is read on that pool, with one line saying so, and no message's own words are cut.

The case: `pool --sample-queries` draws a seed of whole queries from the pool of three DL19 runs, NIST
labels it, and the published Llama-3-70B file (all 9,260 NIST pairs, far more than the 629 pooled ones)
is the --pred. `report --seed-qrels` and `estimate` used to refuse it with a message cut off in the
middle of the file's name, before the advice.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from judgeblender.errors import InputError
from judgeblender.pairs import read_qrels, write_qrels
from judgeblender.report.data import ReportInputs, collect

from conftest import SHARED_DATA

pytestmark = pytest.mark.shared_data

DL19 = SHARED_DATA / "trec-dl-2019"
LLAMA = SHARED_DATA / "llm-labels" / "trec-dl-2019" / "fourprompts-llama3-70b.qrels"


def run(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    if not (DL19.is_dir() and LLAMA.is_file()):
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    d = tmp_path_factory.mktemp("published")
    (d / "runs").mkdir()
    for name in ("bm25base_p", "bm25tuned_p", "UNH_bm25"):
        (d / "runs" / f"{name}.run.gz").write_bytes((DL19 / "runs" / f"{name}.run.gz").read_bytes())
    done = run("pool", "--runs", d / "runs", "--depth", 10, "--sample-queries", 10, "--sample-out", d / "est.tsv",
               "--out", d / "pool.tsv", cwd=d)
    assert done.returncode == 0, done.stderr
    nist = read_qrels(DL19 / "qrels.txt")
    pairs = [line.split()[:2] for line in (d / "est.tsv").read_text().splitlines()]
    seed: dict = {}
    for q, doc in pairs:
        if doc in nist.get(q, {}):
            seed.setdefault(q, {})[doc] = nist[q][doc]
    write_qrels(d / "est.qrels", seed)
    pool = [line.split()[:2] for line in (d / "pool.tsv").read_text().splitlines()]
    llama = read_qrels(LLAMA)
    pooled: dict = {}
    for q, doc in pool:
        if doc in llama.get(q, {}):
            pooled.setdefault(q, {})[doc] = llama[q][doc]
    write_qrels(d / "llm-pool.qrels", pooled)
    return d


def test_report_reads_a_published_file_on_the_seeds_pool_and_says_so_in_one_line(seeded):
    d = seeded
    done = run("report", "--gold", DL19 / "qrels.txt", "--pred", LLAMA, "--runs", d / "runs", "--seed-qrels",
               d / "est.qrels", "--out", d / "r.html", "--bootstrap", 0, cwd=d)
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: {LLAMA}: its labels cover 9,260 pairs, more than the pool the seed was drawn from; "
                     "the seed estimates use its 629 pooled pairs (the runs' top 10)"]
    assert "seed of 10 queries" in done.stdout
    # the same estimates as from the LLM labels of the pool alone, which the report accepted before
    data = collect(ReportInputs(gold=DL19 / "qrels.txt", preds=[LLAMA], runs_dir=d / "runs", bootstrap=0,
                                seed_qrels=d / "est.qrels"))
    alone = collect(ReportInputs(gold=DL19 / "qrels.txt", preds=[d / "llm-pool.qrels"], runs_dir=d / "runs",
                                 bootstrap=0, seed_qrels=d / "est.qrels"))
    ours, theirs = data.estimates[LLAMA.stem], alone.estimates["llm-pool"]
    assert [(r.run, r.estimate, r.ci_low, r.ci_high, r.llm_only) for r in ours.runs] == \
        [(r.run, r.estimate, r.ci_low, r.ci_high, r.llm_only) for r in theirs.runs]
    assert ours.method["restricted"] and not theirs.method["restricted"]
    assert ours.notes[0] == notes[0].removeprefix("note: ")
    assert "629 pooled pairs" in (d / "r.html").read_text()


def test_estimate_reads_it_the_same_way_and_its_json_says_so(seeded):
    d = seeded
    done = run("estimate", "--llm", LLAMA, "--human", d / "est.qrels", "--runs", d / "runs", "--json", cwd=d)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    method = lines[-1]
    assert method["kind"] == "method" and method["scope"] == "labels" and "629 pooled pairs" in method["restricted"]
    assert method["notes"][0] == method["restricted"]
    plain = run("estimate", "--llm", d / "llm-pool.qrels", "--human", d / "est.qrels", "--runs", d / "runs", "--json",
                cwd=d)
    assert [x for x in lines if x["kind"] == "run"] == [json.loads(x) for x in plain.stdout.splitlines()
                                                         if json.loads(x)["kind"] == "run"]


def test_a_seed_the_pool_cannot_make_whole_is_refused_with_its_advice_in_full(seeded, tmp_path):
    """Half of each seed query's pooled pairs: no restriction makes the seed whole, so the error stays; its
    words and its advice print in full however long the file names are."""
    deep = tmp_path / ("a-folder-with-a-long-name-" * 4) / ("and-another-one-" * 4)
    deep.mkdir(parents=True)
    llm = deep / "llm.qrels"
    llm.write_bytes(LLAMA.read_bytes())
    seed = read_qrels(seeded / "est.qrels")
    half = {q: dict(list(docs.items())[::2]) for q, docs in seed.items()}
    write_qrels(deep / "half.qrels", half)
    (deep / "half.design.json").write_bytes((seeded / "est.design.json").read_bytes())
    done = run("estimate", "--llm", llm, "--human", deep / "half.qrels", "--runs", seeded / "runs", cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].endswith(f"; label the rest of the pairs {llm} labels there, or draw the seed with "
                             "`pool --sample-queries`"), lines[0]
    assert "has human labels for" in lines[0] and "..." not in lines[0]


def test_a_long_quoted_value_is_cut_visibly_and_the_advice_after_it_is_not():
    error = InputError("labels.qrels", 7, "a label 0-3", "x" * 500, hint="fix the line and run again")
    text = str(error)
    assert text.startswith("labels.qrels:7: expected a label 0-3, got 'xxx") and "[502 characters]" in text
    assert text.endswith("; fix the line and run again") and len(text) < 200
    assert error.got == "x" * 500 and error.hint == "fix the line and run again"


def test_a_damaged_store_names_what_sqlite_said_and_how_to_recover_in_full(tmp_path):
    store = tmp_path / "judgments.sqlite"
    db = sqlite3.connect(store)
    db.execute("CREATE TABLE calls (key TEXT)")
    db.commit()
    db.close()
    data = bytearray(store.read_bytes())
    data[100:] = b"\xff" * (len(data) - 100)  # the header stays SQLite's, the pages are garbage
    store.write_bytes(bytes(data))
    done = run("store", "stats", "--store", store, cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: {store}: expected a judgeblender store (a readable SQLite file), got '")
    assert lines[0].endswith("'; if it is a damaged store, `judgeblender store check` and docs/reliability.md "
                             "(section 8, part 7) say how to recover"), lines[0]
