"""`judgeblender pool`: depth-k pooling, holes only, duplicate texts, a stratified seed sample.

The runs below rank documents for two queries. Run C ties d8 and d9 on score; trec_eval
breaks ties by docid descending, so d9 comes first.

    run  q1 (best first)     q2
    A    d1 d2 d3            d5 d6
    B    d2 d4 d1            d6 d7
    C    d9 d8 (tied) d1     -
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from judgeblender.cli import pool as pool_cli
from judgeblender.errors import ArgumentError, InputError, JudgeblenderError
from judgeblender.pairs import read_pairs, read_runs_dir
from judgeblender.pairs.pool import (
    PoolPair, default_bands, drop_duplicate_texts, exclude_judged, parse_bands, pool_runs, read_query_ids,
    run_contributions, spread, stratified_sample,
)

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

RUNS = {
    "A": [("q1", "d1", 3.0), ("q1", "d2", 2.0), ("q1", "d3", 1.0), ("q2", "d5", 2.0), ("q2", "d6", 1.0)],
    "B": [("q1", "d2", 9.0), ("q1", "d4", 8.0), ("q1", "d1", 7.0), ("q2", "d6", 5.0), ("q2", "d7", 4.0)],
    "C": [("q1", "d8", 5.0), ("q1", "d9", 5.0), ("q1", "d1", 1.0)],
}


def write_runs(directory: Path, runs=RUNS) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, rows in runs.items():
        lines = [f"{q} Q0 {d} {k} {s} {name}\n" for k, (q, d, s) in enumerate(rows, start=1)]
        (directory / f"{name}.run").write_text("".join(lines))
    return directory


@pytest.fixture
def runs_dir(tmp_path):
    return write_runs(tmp_path / "runs")


def keys(pairs):
    return [(p.qid, p.docid) for p in pairs]


# --- the pool -------------------------------------------------------------------------------------

def test_pool_is_the_deduplicated_union_of_each_runs_top_k(runs_dir):
    pooled = pool_runs(read_runs_dir(runs_dir), depth=2)
    # ordered by query, then best rank over runs, then docid
    assert keys(pooled) == [("q1", "d1"), ("q1", "d2"), ("q1", "d9"), ("q1", "d4"), ("q1", "d8"),
                            ("q2", "d5"), ("q2", "d6"), ("q2", "d7")]
    by_key = {(p.qid, p.docid): p for p in pooled}
    assert by_key["q1", "d2"].best_rank == 1 and sorted(by_key["q1", "d2"].runs) == ["A", "B"]
    assert by_key["q1", "d1"].runs == ["A"]  # B ranks d1 third: outside its top 2


def test_ties_are_broken_as_trec_eval_does(runs_dir):
    pooled = pool_runs(read_runs_dir(runs_dir), depth=1)
    # C scores d8 and d9 equally: docid descending puts d9 on top
    assert ("q1", "d9") in keys(pooled) and ("q1", "d8") not in keys(pooled)


def test_depth_must_be_positive(runs_dir):
    with pytest.raises(ArgumentError, match=r"^depth: expected an integer of at least 1, got 0$"):  # the argument
        pool_runs(read_runs_dir(runs_dir), depth=0)


def test_each_run_reports_its_top_k_unique_pairs_and_holes(runs_dir):
    runs = read_runs_dir(runs_dir)
    pooled = pool_runs(runs, depth=2)
    holes = exclude_judged(pooled, {"q1": {"d1": 0, "d2": 2}})
    contrib = {c.run: vars(c) for c in run_contributions(runs, pooled, holes)}
    assert contrib["A"] == {"run": "A", "top_k": 4, "unique": 2, "holes": 2}  # d1 and d5 only A pools
    assert contrib["B"] == {"run": "B", "top_k": 4, "unique": 2, "holes": 3}  # d4 and d7 only B pools
    assert contrib["C"] == {"run": "C", "top_k": 2, "unique": 2, "holes": 2}


def test_exclude_keeps_only_the_holes(runs_dir):
    pooled = pool_runs(read_runs_dir(runs_dir), depth=2)
    holes = exclude_judged(pooled, {"q1": {"d1": 0, "d2": 2}, "q2": {"d5": 1}})
    assert keys(holes) == [("q1", "d9"), ("q1", "d4"), ("q1", "d8"), ("q2", "d6"), ("q2", "d7")]


# --- duplicate texts ------------------------------------------------------------------------------

TEXTS = {"d1": "Goldfish eat flakes.", "d2": "goldfish   EAT flakes.", "d4": "Other text.", "d8": "Goldfish eat flakes.",
         "d9": "Tall tower.", "d5": "x", "d6": "y", "d7": "Y"}


def test_duplicate_texts_keep_the_best_ranked_copy_and_say_so(runs_dir):
    pooled = pool_runs(read_runs_dir(runs_dir), depth=2)
    kept, dupes, missing = drop_duplicate_texts(pooled, TEXTS, "corpus.jsonl")
    # d1, d2 and d8 hold one text after case and whitespace folding; d1 and d2 both reach
    # rank 1 (in A and in B), so the smaller docid, d1, stays
    assert [(d.qid, d.dropped, d.kept) for d in dupes] == [("q1", "d2", "d1"), ("q1", "d8", "d1"),
                                                          ("q2", "d7", "d6")]
    assert ("q1", "d1") in keys(kept) and ("q1", "d2") not in keys(kept) and missing == []


def test_a_judged_copy_is_kept_over_a_better_ranked_one(runs_dir):
    pooled = pool_runs(read_runs_dir(runs_dir), depth=2)
    _, dupes, _ = drop_duplicate_texts(pooled, TEXTS, "corpus.jsonl", judged={"q1": {"d8": 1}})
    assert {(d.dropped, d.kept) for d in dupes if d.qid == "q1"} == {("d1", "d8"), ("d2", "d8")}


def test_a_pooled_document_without_text_is_an_error_unless_skipped(runs_dir):
    pooled = pool_runs(read_runs_dir(runs_dir), depth=2)
    texts = {k: v for k, v in TEXTS.items() if k != "d9"}
    with pytest.raises(JudgeblenderError, match="1 pooled document.*corpus.jsonl.*d9"):
        drop_duplicate_texts(pooled, texts, "corpus.jsonl")
    kept, _, missing = drop_duplicate_texts(pooled, texts, "corpus.jsonl", skip_missing=True)
    assert missing == ["d9"] and ("q1", "d9") in keys(kept)


# --- sampling -------------------------------------------------------------------------------------

def test_spread_shares_evenly_within_capacities():
    rng = random.Random(0)
    assert spread(10, [5, 5], rng) == [5, 5]
    assert spread(9, [2, 100, 100], rng) in ([2, 4, 3], [2, 3, 4])  # the small one gives its share away
    assert sum(spread(7, [3, 3, 3], rng)) == 7
    with pytest.raises(JudgeblenderError):
        spread(11, [5, 5], rng)


def many_pairs():
    # 3 queries x 10 ranks; query q3 has only ranks 1-4
    pairs = [PoolPair(q, f"{q}d{r}", r, ["A"]) for q in ("q1", "q2") for r in range(1, 11)]
    return pairs + [PoolPair("q3", f"q3d{r}", r, ["A"]) for r in range(1, 5)]


def test_sample_is_stratified_by_query_and_rank_band():
    pairs = many_pairs()
    bands = parse_bands("1-3,4-10", 10)
    drawn = stratified_sample(pairs, 12, seed=7, bands=bands)
    per_query = {q: [p.best_rank for p in drawn if p.qid == q] for q in ("q1", "q2", "q3")}
    assert [len(v) for v in per_query.values()] == [4, 4, 4]
    for q in ("q1", "q2"):  # within a query, each band gets half of its 4
        assert sum(r <= 3 for r in per_query[q]) == 2 and sum(r >= 4 for r in per_query[q]) == 2
    assert sorted(per_query["q3"]) == [1, 2, 3, 4]  # q3's band 4-10 holds one pair: band 1-3 gives the rest


def test_sample_is_repeatable_with_its_seed_and_varies_without():
    pairs = many_pairs()
    bands = default_bands(10)
    first = keys(stratified_sample(pairs, 9, seed=1, bands=bands))
    assert keys(stratified_sample(pairs, 9, seed=1, bands=bands)) == first
    assert any(keys(stratified_sample(pairs, 9, seed=s, bands=bands)) != first for s in range(2, 6))


def test_sample_larger_than_the_pool_is_an_error():
    with pytest.raises(JudgeblenderError, match="larger than the pool"):
        stratified_sample(many_pairs(), 25, seed=0, bands=default_bands(10))


def test_bands_cover_ranks_one_to_depth():
    assert default_bands(10) == [(1, 3), (4, 10)]
    assert default_bands(1000) == [(1, 3), (4, 10), (11, 100), (101, 1000)]
    assert parse_bands("1,2-5", 5) == [(1, 1), (2, 5)]
    for bad in ("2-10", "1-3,5-10", "1-3,x"):
        with pytest.raises(ArgumentError, match="^bands: expected "):  # the argument, never the CLI's flag
            parse_bands(bad, 10)
    with pytest.raises(ArgumentError, match=r"^bands: expected bands down to rank depth=10, got '1-3,4-8'; "
                                            r"these stop at rank 8$"):
        parse_bands("1-3,4-8", 10)


# --- restricting queries ----------------------------------------------------------------------

def test_queries_from_restricts_the_pool_and_names_queries_no_run_ranks(app, runs_dir, tmp_path):
    wanted = tmp_path / "queries.tsv"
    wanted.write_text("q2\tsecond query\nq9\ta query no run ranks\n")
    out = tmp_path / "pool.tsv"
    res = invoke(app, "pool", "--runs", runs_dir, "--depth", 2, "--queries-from", wanted, "--out", out)
    assert res.exit_code == 0, res.output
    assert {p.qid for p in read_pairs(out)} == {"q2"}
    assert "warning: no run ranks anything for 1 of the --queries-from queries: q9" in res.stdout


def test_queries_from_reads_qrels_or_a_queries_file(tmp_path):
    qrels, queries = tmp_path / "a.qrels", tmp_path / "q.tsv"
    qrels.write_text("q1 0 d1 2\nq1 0 d2 0\n")
    queries.write_text("q2\twhat is 1 2 3\n")  # four words ending in a number, but tab separated text
    assert read_query_ids(qrels) == {"q1"}
    assert read_query_ids(queries) == {"q2"}


# --- the command ------------------------------------------------------------------------------

@pytest.fixture
def app():
    app = typer.Typer()
    app.callback()(lambda: None)  # a group, so the command is called by name as in the real CLI
    pool_cli.register(app)
    return app


def invoke(app, *args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=True)


def test_pool_command_writes_pairs_a_sample_and_a_summary(app, runs_dir, tmp_path):
    judged = tmp_path / "judged.qrels"
    judged.write_text("q2 0 d5 1\n")
    out, sample = tmp_path / "pool.tsv", tmp_path / "sample.tsv"
    res = invoke(app, "pool", "--runs", runs_dir, "--depth", 2, "--exclude", judged, "--out", out,
                 "--sample", 3, "--sample-out", sample, "--seed", 3, "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert out.read_text().splitlines()[0] == "q1\td1"
    assert len(read_pairs(out)) == summary["holes"] == 7 and summary["pooled"] == 8 and summary["judged"] == 1
    assert summary["per_query"]["q2"] == {"pooled": 3, "holes": 2, "sampled": summary["per_query"]["q2"]["sampled"],
                                          "duplicates": 0, "judged": 1}
    assert set(read_pairs(sample)) <= set(read_pairs(out)) and len(read_pairs(sample)) == 3


def test_pool_command_prints_tables_and_names_dropped_duplicates(app, runs_dir, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"docid": k, "text": v}) + "\n" for k, v in TEXTS.items()))
    dupes = tmp_path / "dupes.tsv"
    res = invoke(app, "pool", "--runs", runs_dir, "--depth", 2, "--corpus", corpus, "--drop-duplicates",
                 "--duplicates-out", dupes, "--out", tmp_path / "pool.tsv")
    assert res.exit_code == 0, res.output
    assert "Contribution of each run (top 2)" in res.stdout and "Pool per query" in res.stdout
    assert "duplicate: query q1: dropped d2, kept d1 (same text)" in res.stdout
    assert dupes.read_text().splitlines() == ["qid\tdropped\tkept", "q1\td2\td1", "q1\td8\td1", "q2\td7\td6"]


def test_pool_command_refuses_duplicates_without_a_corpus(app, runs_dir, tmp_path):
    res = invoke(app, "pool", "--runs", runs_dir, "--drop-duplicates", "--out", tmp_path / "p.tsv")
    assert isinstance(res.exception, JudgeblenderError) and "--corpus" in str(res.exception)


def test_a_malformed_run_names_its_file_and_line(app, tmp_path):
    runs = write_runs(tmp_path / "runs")
    (runs / "bad.run").write_text("q1 Q0 d1 1 2.0 bad\nq1 Q0 d2 two 1.0 bad\n")
    res = invoke(app, "pool", "--runs", runs, "--out", tmp_path / "p.tsv")
    assert isinstance(res.exception, InputError)
    assert str(res.exception).startswith(f"{runs / 'bad.run'}:2:")


@pytest.mark.skipif(not SHARED_DATA.exists(), reason=f"shared data not found at {SHARED_DATA}")
def test_dl19_depth_10_pool_of_the_37_runs_has_2495_pairs(app, tmp_path):
    dl19 = SHARED_DATA / "trec-dl-2019"
    out = tmp_path / "pool.tsv"
    res = invoke(app, "pool", "--runs", dl19 / "runs", "--depth", 10, "--queries-from", dl19 / "qrels.txt",
                 "--exclude", dl19 / "qrels.txt", "--out", out, "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["runs"] == 37 and summary["queries"] == 43
    assert summary["pooled"] == 2495  # the figure the data README gives
    assert summary["holes"] == 1 and out.read_text() == "87181\t8732212\n"  # the one unjudged top-10 pair
