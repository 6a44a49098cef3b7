"""The vectorised run reader and rank-matrix measures give exactly what the slow paths give."""

from __future__ import annotations

import gzip
import os
import random

import ir_measures
import numpy as np
import pytest

from judgeblender.errors import InputError
from judgeblender.evaluate import RunSet, evaluate_runs, parse_measures
from judgeblender.evaluate.fast_measures import supports
from judgeblender.pairs import read_run
from judgeblender.pairs import runs as runs_module
from judgeblender.pairs.runs import Run, _read_lines, parse_run_bytes

MEASURES = ["nDCG@10", "nDCG@3", "AP", "AP(rel=2)", "P@5", "P(rel=2)@10", "Judged@10", "Judged@3"]


def _run_text(rng: random.Random, queries: list[str], docs_per_query: int, ids: list[str], ties: bool) -> str:
    lines = []
    for q in queries:
        docs = rng.sample(ids, docs_per_query)
        for rank, d in enumerate(docs, start=1):
            if ties:
                score = float(rng.randint(0, 6))
            else:
                # scores that differ only beyond float32 precision: trec_eval ties them
                score = 1.0 + rng.randint(0, 3) * 1e-9 + rng.random() * 1e-3 * rng.randint(0, 1)
            lines.append(f"{q} Q0 {d} {rank} {score!r} tag")
    rng.shuffle(lines)  # not grouped by query, not in rank order
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("seed", range(6))
def test_rank_matrix_values_equal_ir_measures_bit_for_bit(tmp_path, seed):
    rng = random.Random(seed)
    long_ids = seed % 3 == 0  # docids longer than 8 characters take the text path
    ids = [f"{'document-' if long_ids else 'd'}{i}" + ("é" if seed == 4 and i % 7 == 0 else "") for i in range(60)]
    queries = [f"q{i}" for i in range(5)]
    runs = []
    for r in range(4):
        path = tmp_path / f"r{r}.run"
        path.write_text(_run_text(rng, queries[: 4 + r % 2], rng.randint(3, 30), ids, ties=bool((seed + r) % 2)),
                        encoding="utf-8")
        runs.append(read_run(path))
    qrels = {q: {d: rng.choice([0, 0, 1, 2, 3]) for d in rng.sample(ids, 25)} for q in queries[1:]}
    qrels["q4"] = {ids[0]: 0}  # a query with nothing relevant
    measures = parse_measures(MEASURES)
    assert all(supports(m) for m in measures)
    runset = RunSet(runs, queries)
    got = evaluate_runs(runset, qrels, measures)
    trec_eval_measures = [m for m in measures if m.NAME != "Judged"]
    for r, run in enumerate(runs):
        scored = {q: dict(docs) for q, docs in run.ranking.items()}
        want = {str(m): np.zeros(len(queries)) for m in measures}
        for metric in ir_measures.iter_calc(trec_eval_measures, qrels, scored):
            want[str(metric.measure)][queries.index(metric.query_id)] = metric.value
        # Judged@k: the share of trec_eval's top k that is judged (not ir_measures' Judged provider,
        # which breaks ties by docid ascending: tests/test_trust_ties.py)
        for k in (3, 10):
            for q, docs in scored.items():
                if q in qrels and qrels[q]:
                    top = sorted(docs.items(), key=lambda e: e[0], reverse=True)
                    top.sort(key=lambda e: float(np.float32(e[1])), reverse=True)
                    top = top[:k]
                    want[f"Judged@{k}"][queries.index(q)] = sum(d in qrels[q] for d, _ in top) / len(top)
        for name in want:
            assert got[name][r].tolist() == want[name].tolist(), (name, run.name)


def test_measures_outside_the_fast_set_still_go_through_ir_measures(tmp_path):
    path = tmp_path / "a.run"
    path.write_text("q Q0 a 1 3 t\nq Q0 b 2 2 t\nq Q0 c 3 1 t\n")
    run = read_run(path)
    qrels = {"q": {"a": 1, "c": 2}}
    measures = parse_measures(["RR", "R@2", "nDCG(judged_only=True)@2", "AP@2"])
    assert not any(supports(m) for m in measures)
    got = evaluate_runs(RunSet([run], ["q"]), qrels, measures)
    want = ir_measures.calc_aggregate(measures, qrels, run.scores())
    for m in measures:
        assert got[str(m)][0, 0] == pytest.approx(want[m])


TRICKY = [
    "1 Q0 a 1 1.0 t\n1 Q0 b 2 3.0 t\n\n2 Q0 a 1 2 t\n1 Q0 c 3 2.0 t\n",  # a query comes back later
    "1 Q0 b 1 1.0 t\r\n1 Q0 a 2 1.0 t\r\n1 Q0 c 3 1.0 t\r\n",  # CRLF, all tied
    "1\tQ0\tx\t1\t5e-1\trun\n1 Q0 y 2 -0.0 run\n   \n1 Q0 z 3 0.0 run",  # tabs, no final newline
    "1 Q0 a 1 1.0 t\x0c\n",  # form feed is whitespace to str.split()
    "1\tQ0\ta\t1\t2.5\tt\n1\tQ0\tb\t2\t2.5\tt\n1\tQ0\tc\t3\t2.5\tt",  # one tab apart, ties by docid ascending
    "1 Q0 a 1 3 t\n1 Q0 b 2 3 t\n1 Q0 c 3 1 t\n2 Q0 z 1 9 t\n2 Q0 y 2 9 t\n",  # ties only, some in order
    "1 Q0 doc-long-id-1 1 1.0 t\n1 Q0 doc-long-id-2 2 1.0 t\n",  # docids too long to pack in 8 bytes
    "1 Q0 a 1 0.0065739506881072884 t\n1 Q0 b 2 1e-3 t\n",  # more than 19 digits, an exponent
    "1 Q0 a 1 1.0 t\n\n",  # ends in a blank line (the general tokenizer takes it)
]


@pytest.mark.parametrize("text", TRICKY)
def test_vectorised_parse_equals_the_line_reader(tmp_path, text):
    path = tmp_path / "x.run"
    path.write_bytes(text.encode())
    columns = parse_run_bytes(text.encode())
    assert columns is not None
    assert columns.ranking() == _read_lines(path)


def _score_text(rng: random.Random) -> str:
    """Scores as run files write them: Python reprs, fixed decimals, integers, exponents."""
    x = rng.uniform(-50, 50) * 10 ** rng.randint(-6, 3)
    form = rng.randint(0, 5)
    if form == 0:
        return repr(x)
    if form == 1:
        return f"{x:.{rng.randint(0, 20)}f}"
    if form == 2:
        return str(rng.randint(-10**rng.randint(1, 19), 10**rng.randint(1, 19)))
    if form == 3:
        return f"{x:.{rng.randint(1, 17)}e}"
    if form == 4:
        return rng.choice(["1.0", "1", "1.00", "+1", "-0.0", "0"])  # ties written differently
    return f"{rng.choice(['', '+', '-'])}{rng.randint(0, 99)}.{rng.randint(0, 10**19):019d}"


@pytest.mark.parametrize("seed", range(12))
def test_random_run_files_parse_exactly_as_the_line_reader(tmp_path, seed):
    rng = random.Random(seed)
    ids = [rng.choice(["", "D", "doc-"]) + str(rng.randint(0, 10**rng.randint(1, 10))) for _ in range(300)]
    sep = rng.choice([" ", "\t", "mixed"])
    lines = []
    for q in rng.sample(["1", "2", "q3", "1040", "7"], 3):
        for rank, d in enumerate(dict.fromkeys(rng.sample(ids, 60)), start=1):
            cols = [q, "Q0", d, str(rank), _score_text(rng), "run"]
            lines.append(("\t".join(cols) if sep == "\t" else " ".join(cols)) if sep != "mixed"
                         else "".join(c + rng.choice([" ", "\t"]) for c in cols).rstrip())
    if rng.random() < 0.5:
        rng.shuffle(lines)
    text = "\n".join(lines) + rng.choice(["\n", ""])
    path = tmp_path / "r.run"
    path.write_text(text)
    columns = parse_run_bytes(text.encode())
    assert columns is not None
    assert columns.ranking() == _read_lines(path)


@pytest.mark.parametrize("text", [
    "1 Q0 a 1 1.0\n",  # 5 columns
    "1 Q0 a 1 1.0 t x\n1 Q0 b 2 1.0\n",  # 7 then 5: the right token count, wrong lines
    "1 Q0 a one 1.0 t\n",
    "1 Q0 a 1 nan t\n",
    "1 Q0 a 1 1.0 t\n1 Q0 a 2 0.5 t\n",  # a document twice
    "1 Q0 a 1 1.0 t x\n1 Q0 b 2 1.0 t\n1 Q0 c 3 1.0\n",  # 7, 6 and 5 tokens, single spaces
    "\ufeff1 Q0 a 1 1.0 t\n",  # byte-order mark: the line reader reports the repair
    "1 Q0 \u00e9 1 1.0 t\n",  # non-ASCII
    "",
])
def test_unusual_files_are_left_to_the_line_reader(text):
    assert parse_run_bytes(text.encode()) is None


def test_errors_still_name_file_and_line(tmp_path):
    path = tmp_path / "bad.run"
    path.write_text("1 Q0 a 1 1.0 t\n1 Q0 b 2 1.0\n")
    with pytest.raises(InputError, match=r"bad.run:2: expected 6 columns"):
        read_run(path)


def test_parse_cache_is_used_and_invalidated(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGEBLENDER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(runs_module, "CACHE_MIN_BYTES", 0)
    path = tmp_path / "big.run.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("1 Q0 a 1 2.0 t\n1 Q0 b 2 1.0 t\n")
    first = read_run(path)
    assert list((tmp_path / "cache" / "runs").glob("*.npz"))
    calls = []
    monkeypatch.setattr(runs_module, "parse_run_bytes", lambda data: calls.append(1))
    assert read_run(path).ranking == first.ranking == {"1": [("a", 2.0), ("b", 1.0)]}
    assert not calls  # served from the cache
    with gzip.open(path, "wt") as fh:
        fh.write("1 Q0 a 1 1.0 t\n1 Q0 b 2 2.0 t\n")
    os.utime(path, ns=(1, 1))
    monkeypatch.undo()
    monkeypatch.setenv("JUDGEBLENDER_CACHE", str(tmp_path / "cache"))
    assert read_run(path).ranking == {"1": [("b", 2.0), ("a", 1.0)]}  # changed file: parsed again


def test_run_built_from_a_ranking_has_columns():
    run = Run("r", "r.run", {"q": [("b", 2.0), ("a", 1.0)]})
    cols = run.columns()
    assert cols.qids == ["q"] and cols.docs.tolist() == ["b", "a"] and cols.offsets.tolist() == [0, 2]
    assert run.queries() == ["q"]


def test_every_declared_fast_measure_is_supported_and_nothing_beyond_its_parameters():
    from judgeblender.evaluate.fast_measures import SUPPORTED_MEASURES

    declared = [s.replace("@k", "@5").replace("rel=r", "rel=2") for s in SUPPORTED_MEASURES]
    assert all(supports(m) for m in parse_measures(declared))
    beyond = ["nDCG", "nDCG(dcg='exp-log2')@5", "P(rel=2)", "Judged", "AP(rel=0)"]
    assert not any(supports(m) for m in parse_measures(beyond))
