"""A damaged store ends a command with one error line, never a traceback, and is left as it was.

A real store is made by a real `judge` run against a local OpenAI-compatible server, then
damaged the ways disks and people damage files: pages overwritten after the first (the store
opens, and the damage is found on the first read), pages overwritten in the middle (found by a
scan), the file cut short, the file replaced by random bytes or by text, a garbage write-ahead
log beside it. Every command that opens a store is run on it as a user would (a subprocess of
`python -m judgeblender`); each must exit 2 with one `error:` line naming the file, SQLite's
words and the way to recover, and leave the file's bytes and mtime unchanged. `store check`
reads every page: 0 and `ok` on a sound store, 2 on a damaged one.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from openai_server import OpenAITestServer

PAGE = 4096
N_PAIRS = 120


def run_cli(*args, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Inputs, a served model, and a sound store of N_PAIRS real calls and their judgments."""
    root = tmp_path_factory.mktemp("damage")
    rng = random.Random(7)
    words = "goldfish eat flakes peas tower metres tall river bank loan water steel bridge".split()
    (root / "queries.tsv").write_text("q1\twhat do goldfish eat\nq2\thow tall is the eiffel tower\n")
    with open(root / "corpus.jsonl", "w") as fh:
        for i in range(N_PAIRS):  # ~1.5 KB passages: the calls table spans dozens of pages
            fh.write(json.dumps({"docid": f"d{i}", "text": " ".join(rng.choice(words) for _ in range(250))}) + "\n")
    (root / "pairs.tsv").write_text("".join(f"q{i % 2 + 1}\td{i}\n" for i in range(N_PAIRS)))
    (root / "gold.qrels").write_text("".join(f"q{i % 2 + 1} 0 d{i} {i % 4}\n" for i in range(40)))
    (root / "pred.qrels").write_text("".join(f"q{i % 2 + 1} 0 d{i} {(i + 1) % 4}\n" for i in range(40)))
    (root / "runs").mkdir()
    for r in range(3):
        (root / "runs" / f"run{r}").write_text("".join(
            f"q{i % 2 + 1} Q0 d{i} {i // 2 + 1} {100 - i} run{r}\n" for i in range((r * 7) % 40, 40)))
    (root / "items.jsonl").write_text(json.dumps({"id": "i1", "input": "q", "output": "a", "reference": "r"}) + "\n")
    with OpenAITestServer("##final score: 2") as server:
        sound = root / "sound.sqlite"
        done = run_cli("judge", "-q", root / "queries.tsv", "-c", root / "corpus.jsonl", "-p", root / "pairs.tsv",
                       "-j", "openai:test-model", "--base-url", server.base_url, "--no-progress",
                       "-o", root / "made.qrels", "--store", sound)
        assert done.returncode == 0, done.stderr
        assert sound.stat().st_size > 30 * PAGE
        yield {"root": root, "sound": sound, "url": server.base_url, "server": server}


def _copy(world, name: str) -> Path:
    path = world["root"] / name
    if path.exists():
        path.unlink()
    shutil.copyfile(world["sound"], path)
    return path


def _overwrite_pages(path: Path, first: int, last: int) -> None:
    """Random bytes over pages first..last-1 (0-based): the header page (0) stays readable."""
    rng = random.Random(first * 1000 + last)
    with open(path, "r+b") as fh:
        fh.seek(first * PAGE)
        fh.write(bytes(rng.randrange(256) for _ in range((last - first) * PAGE)))


def damaged_after_the_first_page(world, name: str) -> Path:
    path = _copy(world, name)
    _overwrite_pages(path, 1, path.stat().st_size // PAGE)
    return path


def damaged_in_the_middle(world, name: str) -> Path:
    path = _copy(world, name)
    pages = path.stat().st_size // PAGE
    _overwrite_pages(path, pages // 4, 3 * pages // 4)
    return path


def truncated(world, name: str) -> Path:
    path = _copy(world, name)
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size // 2)
    return path


def random_bytes(world, name: str) -> Path:
    path = world["root"] / name
    path.write_bytes(random.Random(3).randbytes(20 * PAGE))
    return path


def text_file(world, name: str) -> Path:
    path = world["root"] / name
    path.write_text("q1 0 d1 2\nq1 0 d2 3\n")
    return path


DAMAGE = {"after-first-page": damaged_after_the_first_page, "middle-pages": damaged_in_the_middle,
          "truncated": truncated, "random-bytes": random_bytes, "text": text_file}


def commands(world, store: Path) -> dict[str, list]:
    root, url = world["root"], world["url"]
    served = ["-j", "openai:test-model", "--base-url", url, "--no-progress"]
    inputs = ["-q", root / "queries.tsv", "-c", root / "corpus.jsonl", "-p", root / "pairs.tsv"]
    return {
        "store stats": ["store", "stats", "--store", store],
        "store export": ["store", "export", "--store", store, "-o", root / f"{store.name}.export.jsonl"],
        "store judgments": ["store", "judgments", "--store", store, "-o", root / f"{store.name}.judgments.jsonl"],
        "store merge": ["store", "merge", store, "-o", root / f"{store.name}.merged.sqlite"],
        "store check": ["store", "check", "--store", store],
        "report": ["report", "--gold", root / "gold.qrels", "--pred", root / "pred.qrels", "--runs", root / "runs",
                   "--bootstrap", "0", "--store", store, "-o", root / f"{store.name}.html"],
        "judge": ["judge", *inputs, *served, "-o", root / f"{store.name}.qrels", "--store", store],
        "cascade": ["cascade", *inputs, *served, "--budget", "10", "-o", root / f"{store.name}.cascade.qrels",
                    "--store", store],
        "grade": ["grade", "-i", root / "items.jsonl", *served, "-o", root / f"{store.name}.grade.jsonl",
                  "--store", store],
        "calibrate": ["calibrate", "--gold", root / "gold.qrels", "--labels", root / "pred.qrels", "--labels",
                      root / "gold.qrels", "--select", "--cost-from-store", "--fast-only", "--store", store,
                      "-o", root / f"{store.name}.toml"],
    }


COMMANDS = ["store stats", "store export", "store judgments", "store merge", "store check", "report", "judge",
            "cascade", "grade", "calibrate"]


def _state(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def _one_error_line(done: subprocess.CompletedProcess, store: Path) -> str:
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, done.stderr
    assert str(store) in errors[0]
    return errors[0]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_store_damaged_after_its_first_page_is_one_error_line_and_left_as_it_was(world, command):
    store = damaged_after_the_first_page(world, f"first-{command.replace(' ', '-')}.sqlite")
    before = _state(store)
    line = _one_error_line(run_cli(*commands(world, store)[command]), store)
    assert "the store is damaged (SQLite: " in line and ".recover" in line and "store check" in line
    assert _state(store) == before


@pytest.mark.parametrize("command", ["store stats", "store export", "store merge", "store check", "judge"])
def test_a_store_cut_short_is_one_error_line_and_left_as_it_was(world, command):
    store = truncated(world, f"cut-{command.replace(' ', '-')}.sqlite")
    before = _state(store)
    line = _one_error_line(run_cli(*commands(world, store)[command]), store)
    assert "damaged" in line or "SQLite" in line
    assert _state(store) == before


@pytest.mark.parametrize("command", ["store stats", "store export", "store check"])
def test_damage_in_the_middle_pages_is_found_by_a_scan(world, command):
    store = damaged_in_the_middle(world, f"mid-{command.replace(' ', '-')}.sqlite")
    before = _state(store)
    line = _one_error_line(run_cli(*commands(world, store)[command]), store)
    assert "the store is damaged" in line
    assert _state(store) == before


@pytest.mark.parametrize("kind", ["random-bytes", "text"])
@pytest.mark.parametrize("command", ["store stats", "store check", "judge", "report", "calibrate"])
def test_a_file_that_is_not_sqlite_is_refused_untouched(world, command, kind):
    store = DAMAGE[kind](world, f"{kind}-{command.replace(' ', '-')}.sqlite")
    before = _state(store)
    line = _one_error_line(run_cli(*commands(world, store)[command]), store)
    assert "expected a judgeblender store" in line
    assert _state(store) == before


def test_a_sound_store_passes_the_check_and_is_left_as_it_was(world):
    store = _copy(world, "sound-check.sqlite")
    before = _state(store)
    done = run_cli("store", "check", "--store", store)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"ok: {store} passed SQLite's integrity check"
    quick = run_cli("store", "check", "--store", store, "--quick")
    assert quick.returncode == 0 and "quick check" in quick.stdout
    assert _state(store) == before
    assert not Path(f"{store}-wal").exists() and not Path(f"{store}-shm").exists()


@pytest.mark.model
def test_demo_on_a_damaged_store_is_one_error_line_and_left_as_it_was(world):
    store = damaged_after_the_first_page(world, "demo.sqlite")
    before = _state(store)
    line = _one_error_line(run_cli("demo", "--store", store, "--no-progress"), store)
    assert "the store is damaged" in line
    assert _state(store) == before


def test_the_check_names_what_sqlite_found(world):
    store = damaged_in_the_middle(world, "named.sqlite")
    line = _one_error_line(run_cli("store", "check", "--store", store), store)
    # integrity_check's own words, e.g. "Tree 2 page 14 cell 0: ..." or "database disk image is malformed"
    assert any(w in line for w in ("page", "malformed", "Tree", "btree")), line


def test_a_garbage_write_ahead_log_is_ignored_as_sqlite_does(world):
    """Expected to hold: SQLite discards a WAL whose header checksum fails, so the store reads whole."""
    store = _copy(world, "wal.sqlite")
    Path(f"{store}-wal").write_bytes(random.Random(5).randbytes(3 * PAGE))
    before = store.read_bytes()
    done = run_cli("store", "stats", "--store", store)
    assert done.returncode == 0, done.stderr
    assert f"openai:test-model" in done.stdout and str(N_PAIRS) in done.stdout
    assert store.read_bytes() == before


def test_an_empty_file_is_not_read_as_a_store(world):
    store = world["root"] / "empty.sqlite"
    store.write_bytes(b"")
    before = _state(store)
    line = _one_error_line(run_cli("store", "stats", "--store", store), store)
    assert "expected a judgeblender store, got 'an empty file'" in line
    assert _state(store) == before


def test_a_damaged_store_made_no_model_call(world):
    store = damaged_after_the_first_page(world, "no-call.sqlite")
    served = len(world["server"].requests)
    _one_error_line(run_cli(*commands(world, store)["judge"]), store)
    assert len(world["server"].requests) == served


def test_the_library_raises_the_same_error(world):
    from judgeblender.store import CallStore, StoreError

    store = damaged_after_the_first_page(world, "library.sqlite")
    with pytest.raises(StoreError, match="the store is damaged"):
        with CallStore(store) as opened:
            opened.call_stats()
    with sqlite3.connect(world["sound"]) as db:  # the sound store is still sound
        assert db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
