"""`irds:ID` wherever queries, passages, qrels and runs are read (ir_datasets, offline).

Tests cannot download: the dataset is registered from local files through ir_datasets' own
API (Dataset, TsvQueries, TsvDocs, TrecQrels, TrecScoredDocs over LocalDownload), and the
missing-data errors are checked on a real id with an empty ir_datasets home.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ir_datasets = pytest.importorskip("ir_datasets")

from ir_datasets.datasets.base import Dataset  # noqa: E402
from ir_datasets.formats import TrecQrels, TrecScoredDocs, TsvDocs, TsvQueries  # noqa: E402
from ir_datasets.util import LocalDownload  # noqa: E402
from ir_datasets.util.download import Download, RequestsDownload  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from judgeblender.cli import app  # noqa: E402
from judgeblender.pairs import Pair, read_corpus, read_pairs, read_qrels, read_queries, read_run, read_runs_dir  # noqa: E402
from judgeblender.pairs.irds import DatasetError, LazyCorpus  # noqa: E402

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture(scope="module")
def local_id(tmp_path_factory) -> str:
    """A dataset registered in ir_datasets' registry from local files."""
    d = tmp_path_factory.mktemp("irds")
    (d / "queries.tsv").write_text("q1\twhat is a cat\nq2\tboiling point of water\n")
    (d / "docs.tsv").write_text("d1\tCats are small felines.\nd2\tWater boils at 100 C.\nd3\tUnrelated text.\n")
    (d / "qrels.txt").write_text("q1 0 d1 3\nq1 0 d3 0\nq2 0 d2 2\n")
    (d / "run.txt").write_text("q1 Q0 d3 1 0.5 bm25\nq1 Q0 d1 2 0.9 bm25\nq2 Q0 d2 1 1.0 bm25\nq2 Q0 d3 2 0.1 bm25\n")
    ident = f"judgeblender-test-{uuid.uuid4().hex[:8]}"
    ir_datasets.registry.register(ident, Dataset(
        TsvQueries(LocalDownload(d / "queries.tsv")),
        TsvDocs(LocalDownload(d / "docs.tsv")),
        TrecQrels(LocalDownload(d / "qrels.txt"), {0: "not", 2: "relevant", 3: "perfect"}),
        TrecScoredDocs(LocalDownload(d / "run.txt")),
    ))
    return ident


def test_queries_qrels_pairs_run(local_id):
    src = f"irds:{local_id}"
    assert read_queries(src) == {"q1": "what is a cat", "q2": "boiling point of water"}
    assert read_qrels(src, allowed=range(4)) == {"q1": {"d1": 3, "d3": 0}, "q2": {"d2": 2}}
    assert read_pairs(src) == [Pair("q1", "d1"), Pair("q1", "d3"), Pair("q2", "d2")]  # auto: the qrels
    assert read_pairs(src, "run", depth=1) == [Pair("q1", "d1"), Pair("q2", "d2")]  # ranked by score
    run = read_run(src)
    assert run.ranking == {"q1": [("d1", 0.9), ("d3", 0.5)], "q2": [("d2", 1.0), ("d3", 0.1)]}
    assert [r.name for r in read_runs_dir(src)] == [src]
    with pytest.raises(DatasetError, match="qrels label 3 .* expected a label in"):
        read_qrels(src, allowed=range(3))
    with pytest.raises(Exception, match="auto, qrels or run"):
        read_pairs(src, "tsv")


def test_passages_by_id_from_the_docs_store(local_id):
    src = f"irds:{local_id}"
    assert read_corpus(src, wanted={"d2", "nope"}) == {"d2": "Water boils at 100 C."}
    lazy = read_corpus(src)
    assert isinstance(lazy, LazyCorpus) and len(lazy) == 0  # nothing read until asked
    assert lazy["d1"] == "Cats are small felines." and "d3" in lazy and "zz" not in lazy
    assert sorted(lazy) == ["d1", "d3"]  # only the ids looked up are held
    with pytest.raises(KeyError):
        lazy["zz"]


def test_judge_cli_reads_an_irds_id(local_id, tmp_path):
    src = f"irds:{local_id}"
    out = tmp_path / "out.qrels"
    model = tmp_path / "model.json"
    model.write_text('{"rules": [{"contains": "felines", "output": "3"}], "default": "1"}')
    res = CliRunner().invoke(app, ["judge", "-q", src, "-c", src, "-p", src, "-o", str(out),
                                   "-j", f"scripted:{model}", "--mode", "generate", "--store", str(tmp_path / "s.sqlite"),
                                   "--no-progress"])
    assert res.exit_code == 0, res.output
    assert out.read_text().split("\n")[:3] == ["q1 0 d1 3", "q1 0 d3 1", "q2 0 d2 1"]


def test_unknown_id_and_missing_entity(local_id):
    with pytest.raises(DatasetError, match="irds:no/such-id: ir_datasets knows no dataset"):
        read_queries("irds:no/such-id")
    with pytest.raises(DatasetError, match="expected irds:ID"):
        read_queries("irds:")
    ir_datasets.registry.register(local_id + "-q", Dataset(TsvQueries(LocalDownload(Path("/nonexistent/q.tsv")))))
    with pytest.raises(DatasetError, match=f"irds:{local_id}-q: the dataset has no qrels .it has: queries"):
        read_qrels(f"irds:{local_id}-q")
    with pytest.raises(DatasetError, match="must be obtained by hand"):
        read_queries(f"irds:{local_id}-q")


def test_irds_qrels_follow_the_qrels_files_rule_for_a_pair_labelled_twice(tmp_path, caplog):
    """A pair repeated with the same label is kept once (a note says so); with another label it
    is an error naming the row, as in a qrels file, never the last label read."""
    def dataset(lines: str) -> str:
        path = tmp_path / f"qrels{len(lines)}.txt"
        path.write_text(lines)
        ident = f"judgeblender-test-{uuid.uuid4().hex[:8]}"
        ir_datasets.registry.register(ident, Dataset(TrecQrels(LocalDownload(path), {0: "not", 3: "perfect"})))
        return f"irds:{ident}"

    same = dataset("q1 0 d1 3\nq1 0 d2 0\nq1 0 d1 3\n")
    with caplog.at_level("WARNING"):
        assert read_qrels(same, allowed=range(4)) == {"q1": {"d1": 3, "d2": 0}}
    assert f"{same}: repeated identical qrels rows kept once (row 3)" in caplog.text
    differ = dataset("q1 0 d1 3\nq1 0 d2 0\nq1 0 d1 0\n")
    with pytest.raises(DatasetError, match=r"qrels row 3: expected one label per pair \(q1 d1 was labelled 3 before\), got 0"):
        read_qrels(differ, allowed=range(4))
    with open(tmp_path / "f.qrels", "w") as f:  # the file with the same lines: the same rule
        f.write("q1 0 d1 3\nq1 0 d2 0\nq1 0 d1 0\n")
    from judgeblender.errors import InputError

    with pytest.raises(InputError, match="f.qrels:3: expected one label per pair"):
        read_qrels(tmp_path / "f.qrels", allowed=range(4))


def test_not_downloaded_is_an_error_without_a_download_attempt(tmp_path, monkeypatch):
    monkeypatch.delenv("JUDGEBLENDER_IRDS_DOWNLOAD", raising=False)
    ident = f"judgeblender-remote-{uuid.uuid4().hex[:8]}"
    # an address that never answers: a download attempt would hang on its timeout and retries
    never = RequestsDownload("http://10.255.255.1/queries.tsv")
    ir_datasets.registry.register(ident, Dataset(TsvQueries(Download([never], cache_path=tmp_path / "q.tsv"))))
    start = time.monotonic()
    with pytest.raises(DatasetError) as err:
        read_queries(f"irds:{ident}")
    assert time.monotonic() - start < 2
    msg = str(err.value)
    assert f"irds:{ident}" in msg and str(tmp_path / "q.tsv") in msg and "http://10.255.255.1/queries.tsv" in msg
    assert f"python -m ir_datasets export {ident} queries" in msg and "JUDGEBLENDER_IRDS_DOWNLOAD=1" in msg


def test_real_id_not_downloaded_names_it_fast(tmp_path):
    """A real id with an empty ir_datasets home (its own process: the home is read on import)."""
    code = ("from judgeblender.pairs import read_queries, read_corpus\n"
            "for f, a in ((read_queries, ()), (read_corpus, ({'0'},))):\n"
            "    try:\n        f('irds:msmarco-passage/trec-dl-2019/judged', *a)\n"
            "    except Exception as e:\n        print(type(e).__name__, e)\n")
    env = {**os.environ, "IR_DATASETS_HOME": str(tmp_path / "home"), "PYTHONPATH": str(SRC)}
    env.pop("JUDGEBLENDER_IRDS_DOWNLOAD", None)
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60).stdout
    assert time.monotonic() - start < 30
    lines = out.strip().splitlines()
    assert len(lines) == 2, out
    assert lines[0].startswith("DatasetError irds:msmarco-passage/trec-dl-2019/judged: reading its queries")
    assert "https://trec.nist.gov/data/deep/2019qrels-pass.txt" in lines[0]
    assert lines[1].startswith("DatasetError irds:msmarco-passage/trec-dl-2019/judged: reading its passages")
    assert "collectionandqueries.tar.gz" in lines[1]


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ir_datasets", None)
    with pytest.raises(Exception, match=r"judgeblender\[irds\]"):
        read_queries("irds:anything")


def test_agree_takes_gold_from_an_irds_id(local_id, tmp_path):
    pred = tmp_path / "pred.qrels"
    pred.write_text("q1 0 d1 3\nq1 0 d3 1\nq2 0 d2 2\n")
    res = CliRunner().invoke(app, ["agree", str(pred), "--gold", f"irds:{local_id}", "--json"])
    assert res.exit_code == 0, res.output
    assert '"n": 3' in res.output or '"n":3' in res.output


def test_a_lazy_corpus_holds_a_bounded_number_of_passages(local_id, monkeypatch):
    """A streamed run asks for each window's passages once: past HELD, what was held is dropped,
    and every asked passage still comes back (looked up again)."""
    monkeypatch.setattr(LazyCorpus, "HELD", 2)
    lazy = read_corpus(f"irds:{local_id}")
    for ids in (["d1", "d2"], ["d3", "d1", "zz"], ["d2", "d3"], ["d1"]):
        got = lazy.get_many(ids)
        assert sorted(got) == sorted(set(ids) - {"zz"}) and len(lazy) <= 3
    assert lazy["d2"] == "Water boils at 100 C."
