"""Example data a user can get (issue 39, part 1): `jb.load_dataset("dl19")` builds the DL19
bundle from its public sources, and what it writes equals the shared data folder's files.

The sources cannot be reached from here, so a real HTTP server on 127.0.0.1 serves files in the
sources' own formats (TREC qrels with "Q0", queries with CRLF and unjudged queries, passages as
{"docid", "doc"} with unjudged ones, gzipped runs with unjudged queries), made in the test from the
shared data by the inverse of each conversion. The real manifest's paths and formats are served;
only their sha256 are the fixtures' (the real manifest is tested against them: it refuses them).
"""

from __future__ import annotations

import gzip
import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import judgeblender as jb
from judgeblender import datasets
from judgeblender.datasets import DataUnavailableError

from conftest import SHARED_DATA

pytestmark = pytest.mark.shared_data
ROOT = Path(__file__).resolve().parents[1]
SPEC = datasets.manifest()["dl19"]
CLOSED = "http://127.0.0.1:9/"  # the discard port: nothing listens, the connection is refused


def _source(entry: dict, shared: Path) -> bytes:
    """A source file in its own format, made from the shared data file it converts to."""
    out = (shared / entry["to"]).read_bytes()
    fmt = entry["format"]
    if fmt == "qrels-q0":
        return b"".join(line.replace(b" 0 ", b" Q0 ", 1) + b"\n" for line in out.splitlines())
    if fmt == "queries-tsv":  # CRLF, and queries nobody judged between the judged ones
        return b"".join(line + b"\r\n" + b"999%d\tan unjudged query\r\n" % i for i, line in enumerate(out.splitlines()))
    if fmt == "passages-jsonl":
        rows = [json.loads(line) for line in out.decode("utf-8").splitlines()]
        lines = []
        for i, row in enumerate(rows):
            lines.append(json.dumps({"docid": row["docid"], "doc": row["text"]}))  # ASCII-escaped, as the source
            if i % 1000 == 0:
                lines.append(json.dumps({"docid": f"unjudged{i}", "doc": "a passage no qrels line names"}))
        return ("\n".join(lines) + "\n").encode("utf-8")
    if fmt == "run-gz":
        text = gzip.decompress(out)
        extra = b"".join(b"999%d\tQ0\t%d\t%d\t1.0\tx\n" % (i, i, i + 1) for i in range(3))
        return gzip.compress(extra + text + extra, compresslevel=1)
    assert fmt == "qrels"
    return out


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """A folder of source files at the manifest's paths, a manifest with their sha256, and a
    local server serving the folder (its base URL); a path in `cut` is sent half and dropped."""
    folder = tmp_path_factory.mktemp("sources")
    lines = datasets.MANIFEST.read_text(encoding="utf-8")
    for entry in SPEC["files"]:
        raw = _source(entry, SHARED_DATA)
        path = folder / entry["source"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
        lines = lines.replace(entry["sha256"], hashlib.sha256(raw).hexdigest())
    manifest = folder / "manifest.toml"
    manifest.write_text(lines, encoding="utf-8")
    short = folder / "short.toml"  # the qrels, queries, passages and one run (ICT-BERT2)
    short.write_text("[[dl19.files]]".join(lines.split("[[dl19.files]]")[:5]), encoding="utf-8")
    cut: set[str] = set()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(folder), **kwargs)

        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path in cut:  # a transfer cut halfway: the length promised, half the bytes sent
                body = (folder / self.path.lstrip("/")).read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2])
                self.close_connection = True
                return
            super().do_GET()

    server = _Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield {"manifest": manifest, "short": short, "url": f"http://127.0.0.1:{server.server_address[1]}/", "cut": cut}
    server.shutdown()
    server.server_close()


def _content(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def test_the_manifest_names_every_file_of_the_shared_dl19_bundle():
    shared = {str(p.relative_to(SHARED_DATA)) for folder in ("trec-dl-2019", "llm-labels/trec-dl-2019")
              for p in (SHARED_DATA / folder).rglob("*") if p.is_file()}
    assert {entry["to"] for entry in SPEC["files"]} == shared and len(shared) == 47
    assert all(len(entry["sha256"]) == 64 and entry["format"] in datasets.CONVERSIONS for entry in SPEC["files"])
    assert SPEC["commit"] in SPEC["base_url"]  # pinned: the bytes behind a URL cannot change
    # the qrels and the LLM labels go back to their sources byte for byte: the manifest's sha256
    # are those of the real files (the other sources hold more than the bundle keeps)
    exact = [e for e in SPEC["files"] if e["format"] in ("qrels-q0", "qrels")]
    assert len(exact) == 8
    assert all(hashlib.sha256(_source(e, SHARED_DATA)).hexdigest() == e["sha256"] for e in exact)


def test_downloaded_and_converted_files_equal_the_shared_data(sources, tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGEBLENDER_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("JUDGEBLENDER_DATA", raising=False)
    bundle = jb.load_dataset("dl19", base_url=sources["url"], manifest_path=sources["manifest"])
    assert bundle.root == tmp_path / "cache" / "data"
    for entry in SPEC["files"]:
        written = bundle.root / entry["to"]
        assert _content(written) == _content(SHARED_DATA / entry["to"]), entry["to"]
    assert gzip.open(bundle.runs / "p_bert.run.gz").read(2)  # a gzip file pandas, PyTerrier read
    assert len(bundle.queries.read_text().splitlines()) == 43
    assert not [p for p in bundle.root.rglob(".*")]  # no temporary file left
    # the cache is used from then on: no server needed
    again = jb.load_dataset("dl19", base_url=CLOSED, manifest_path=sources["manifest"])
    assert again == bundle


def test_a_source_that_is_not_the_manifests_is_refused_and_nothing_is_written(sources, tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGEBLENDER_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("JUDGEBLENDER_DATA", raising=False)
    with pytest.raises(DataUnavailableError) as caught:  # the real manifest: the fixtures are not the sources
        jb.load_dataset("dl19", base_url=sources["url"])
    message = str(caught.value)  # the queries: the fixtures' have unjudged queries and CRLF, the source's not
    assert "/data/dl2019/msmarco-test2019-queries.tsv: expected a file with sha256 fabc43e4" in message, message
    assert "nothing was written" in message
    assert not (tmp_path / "cache" / "data" / "trec-dl-2019" / "queries.tsv").exists()


def test_a_transfer_cut_halfway_leaves_no_file_and_the_next_run_completes(sources, tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGEBLENDER_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("JUDGEBLENDER_DATA", raising=False)
    sources["cut"].add("/trec-dl-2019/runs-compressed/deep/input.ICT-BERT2.gz")
    try:
        with pytest.raises(DataUnavailableError, match="input.ICT-BERT2.gz: IncompleteRead"):
            jb.load_dataset("dl19", base_url=sources["url"], manifest_path=sources["short"])
    finally:
        sources["cut"].clear()
    root = tmp_path / "cache" / "data"
    assert (root / "trec-dl-2019" / "qrels.txt").is_file()  # what came before the cut is kept
    assert not (root / "trec-dl-2019" / "runs" / "ICT-BERT2.run.gz").exists()
    assert not [p for p in root.rglob(".*")]
    bundle = jb.load_dataset("dl19", base_url=sources["url"], manifest_path=sources["short"])
    assert _content(bundle.runs / "ICT-BERT2.run.gz") == _content(SHARED_DATA / "trec-dl-2019/runs/ICT-BERT2.run.gz")


def test_judgeblender_data_is_used_as_it_is_without_a_network(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGEBLENDER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("JUDGEBLENDER_DATA", str(SHARED_DATA))
    bundle = jb.load_dataset("dl19", base_url=CLOSED)
    assert bundle.qrels == SHARED_DATA / "trec-dl-2019" / "qrels.txt"
    assert bundle.llm_labels / "fourprompts-llama3-70b.qrels" == SHARED_DATA / "llm-labels/trec-dl-2019/fourprompts-llama3-70b.qrels"
    assert not (tmp_path / "cache").exists()
    monkeypatch.setenv("JUDGEBLENDER_DATA", str(tmp_path))  # a folder without the bundle: said, not downloaded
    with pytest.raises(DataUnavailableError, match=r"JUDGEBLENDER_DATA=.*47 of 47 files missing"):
        jb.load_dataset("dl19")


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("JUDGEBLENDER_DATA", "JUDGEBLENDER_DATA_URL")}
    environ["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "judgeblender", *args], capture_output=True, text=True,
                          env={**environ, **env}, timeout=120)


def test_offline_without_a_copy_one_error_names_the_variable_and_the_sources(tmp_path):
    r = _cli("data", "fetch", "dl19", JUDGEBLENDER_CACHE=str(tmp_path), JUDGEBLENDER_DATA_URL=CLOSED)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the dl19 example data is not in"), r.stderr
    assert "set JUDGEBLENDER_DATA to a folder" in lines[0] and "https://github.com/naghmefarzi/llmjudge" in lines[0]
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_the_cli_prints_where_each_file_is(tmp_path):
    r = _cli("data", "fetch", "dl19", JUDGEBLENDER_CACHE=str(tmp_path), JUDGEBLENDER_DATA=str(SHARED_DATA))
    assert r.returncode == 0, r.stderr
    paths = dict(line.split("\t") for line in r.stdout.splitlines())
    assert paths["runs"] == str(SHARED_DATA / "trec-dl-2019" / "runs") and Path(paths["passages"]).is_file()
