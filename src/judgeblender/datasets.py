"""Example data a user can get: `load_dataset("dl19")` returns the paths of a bundle (queries,
qrels, judged passages, runs, published LLM labels) that the docs and docs/examples/dl19.ipynb
read, built from its public sources.

Where the files come from, and what each must hash to, is data/manifest.toml: one manifest, so a
source that moves or changes is one line to fix and never a silent change of the numbers the
notebook prints. Every source file is checked against its sha256 before it is used, converted to
the layout of the project's shared data folder (the conversions below reproduce those files byte
for byte) and written atomically (fileio), so an interrupted download leaves no half a file.

JUDGEBLENDER_DATA names a folder that already holds the bundle (laid out as the cache is): it is
used as it is and never written to. Otherwise the bundle is built once under the cache
(paths.data_cache_dir). JUDGEBLENDER_DATA_URL replaces the manifest's base URL (a mirror, or the
tests' local server). Without either and without a network, one error names the variable and the
sources, before anything is written.
"""

from __future__ import annotations

import gzip
import http.client
import io
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .arguments import one_of
from .errors import JudgeblenderError
from .fileio import atomic_writer
from .hashing import sha256_bytes
from .paths import data_cache_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MANIFEST = Path(__file__).resolve().parent / "data" / "manifest.toml"
DATA_ENV = "JUDGEBLENDER_DATA"
URL_ENV = "JUDGEBLENDER_DATA_URL"
TIMEOUT_S = 60


class DataUnavailableError(JudgeblenderError):
    """A bundle is neither in JUDGEBLENDER_DATA, nor in the cache, nor downloadable, or a source
    file is not the one the manifest names."""


@dataclass(frozen=True)
class Bundle:
    """The paths of an example data bundle: files (`queries`, `qrels`, `passages`) and folders
    (`runs`: one TREC run a file; `llm_labels`: one qrels file of LLM labels a file)."""

    name: str
    root: Path
    queries: Path
    qrels: Path
    passages: Path
    runs: Path
    llm_labels: Path


def manifest(path: str | Path = MANIFEST) -> dict[str, Any]:
    """The bundles the manifest describes, by name."""
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def load_dataset(name: str = "dl19", *, data: str | Path | None = None, base_url: str | None = None,
                 manifest_path: str | Path = MANIFEST) -> Bundle:
    """The bundle `name` ("dl19"): from `data` (else JUDGEBLENDER_DATA) when given, else from the
    cache, built there from its sources on first use (from `base_url`, else JUDGEBLENDER_DATA_URL,
    else the manifest's)."""
    bundles = manifest(manifest_path)
    one_of("name", name, sorted(bundles))  # a wrong name is the caller's argument, not missing data
    spec = bundles[name]
    given = data if data is not None else os.environ.get(DATA_ENV) or None
    if given is not None:
        root = Path(given).expanduser()
        missing = [f["to"] for f in spec["files"] if not (root / f["to"]).is_file()]
        if missing:
            raise DataUnavailableError(
                f"{DATA_ENV}={root}: the {name} bundle is incomplete there: {len(missing)} of "
                f"{len(spec['files'])} files missing (first: {root / missing[0]}); unset {DATA_ENV} to "
                f"download it from {spec['repository']} into {data_cache_dir()}")
        return _bundle(name, root, spec)
    root = data_cache_dir()
    todo = [f for f in spec["files"] if not (root / f["to"]).is_file()]
    if todo:
        _build(name, spec, root, todo, base_url or os.environ.get(URL_ENV) or spec["base_url"])
    return _bundle(name, root, spec)


def _bundle(name: str, root: Path, spec: dict[str, Any]) -> Bundle:
    return Bundle(name=name, root=root, **{key: root / rel for key, rel in spec["layout"].items()})


def _build(name: str, spec: dict[str, Any], root: Path, todo: list[dict[str, Any]], base_url: str) -> None:
    """Download, check and convert the files in `todo`. The judged queries and passages are those
    of the bundle's qrels, converted first (the manifest lists it first) or already cached."""
    judged: tuple[set[str], set[str]] | None = None
    for entry in spec["files"]:
        out = root / entry["to"]
        if entry not in todo:
            if entry["format"] == "qrels-q0":
                judged = _judged(out.read_bytes())
            continue
        raw = _fetch(name, spec, base_url, entry)
        convert = CONVERSIONS[entry["format"]]
        if judged is None and entry["format"] in _FILTERED:
            raise DataUnavailableError(f"{MANIFEST}: {entry['to']} is filtered by the bundle's qrels, "
                                       f"which the manifest lists after it")
        content = convert(raw, judged)
        if entry["format"] == "qrels-q0":
            judged = _judged(content)
        with atomic_writer(out, "wb") as fh:
            if out.suffix == ".gz":  # no name and time in the header: one source, one file
                with gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0, compresslevel=6) as gz:
                    gz.write(content)
            else:
                fh.write(content)


def _fetch(name: str, spec: dict[str, Any], base_url: str, entry: dict[str, Any]) -> bytes:
    url = base_url.rstrip("/") + "/" + urllib.parse.quote(entry["source"])
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            raw = response.read()
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:  # a cut transfer: IncompleteRead
        reason = getattr(exc, "reason", None) or repr(exc)
        raise DataUnavailableError(
            f"the {name} example data is not in {data_cache_dir()} and could not be downloaded "
            f"({url}: {reason}); set {DATA_ENV} to a folder that holds it (laid out as "
            f"{', '.join(spec['layout'].values())}), or download it from its sources: "
            f"{spec['repository']} at commit {spec['commit']} (data/manifest.toml lists each file)") from None
    got = sha256_bytes(raw)
    if got != entry["sha256"]:
        raise DataUnavailableError(
            f"{url}: expected a file with sha256 {entry['sha256']} (data/manifest.toml), got {got} "
            f"({len(raw):,} bytes); nothing was written: the source changed or the download was cut")
    return raw


def _judged(qrels: bytes) -> tuple[set[str], set[str]]:
    """The query ids and passage ids of a qrels file."""
    rows = [line.split() for line in qrels.decode("utf-8").splitlines() if line.strip()]
    return {row[0] for row in rows}, {row[2] for row in rows}


def _qrels_q0(raw: bytes, judged: Any) -> bytes:
    lines = raw.decode("utf-8").splitlines()
    return "".join(" ".join([row[0], "0" if row[1] == "Q0" else row[1], *row[2:]]) + "\n"
                   for row in (line.split() for line in lines) if row).encode("utf-8")


def _queries_tsv(raw: bytes, judged: tuple[set[str], set[str]]) -> bytes:
    lines = raw.decode("utf-8").splitlines()  # the source ends its lines with CRLF
    return "".join(line + "\n" for line in lines if line.split("\t", 1)[0] in judged[0]).encode("utf-8")


def _passages_jsonl(raw: bytes, judged: tuple[set[str], set[str]]) -> bytes:
    out = io.StringIO()
    for line in raw.decode("utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if row["docid"] in judged[1]:
                out.write(json.dumps({"docid": row["docid"], "text": row["doc"]}, ensure_ascii=False) + "\n")
    return out.getvalue().encode("utf-8")


def _run_gz(raw: bytes, judged: tuple[set[str], set[str]]) -> bytes:
    lines = gzip.decompress(raw).splitlines(keepends=True)
    return b"".join(line for line in lines if line.split(None, 1)[0].decode() in judged[0])


def _copy(raw: bytes, judged: Any) -> bytes:
    return raw


CONVERSIONS: dict[str, Callable[[bytes, Any], bytes]] = {
    "qrels-q0": _qrels_q0, "queries-tsv": _queries_tsv, "passages-jsonl": _passages_jsonl,
    "run-gz": _run_gz, "qrels": _copy,
}
_FILTERED = {"queries-tsv", "passages-jsonl", "run-gz"}  # keep what the bundle's qrels judge
