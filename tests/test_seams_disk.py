"""Full disks and read-only media (issue 29, part 5), on real small and read-only file systems.

Every case runs `python -m judgeblender` as a user would, inside a private mount namespace
(`unshare --mount --propagation private`) where this file, run as a script, mounts what the case
needs: a tmpfs of a few hundred KB filled to a few KB of free space, or a read-only bind mount of
a folder. The mounts vanish with the namespace; what a case needs afterwards is copied out.

- An output that the disk has no room for (qrels, details, batch requests, grade verdicts, the
  report, exports, the merged store, the labeling qrels, provenance, pools) is one `error:`
  line naming it, exit 2, and leaves nothing on the disk: no partial file, no temporary file.
- A store that fills its disk while a run commits answers fails the run naming the store; every
  answer committed before stays, and a re-run asks only the rest.
- A store whose commits are still in its write-ahead log (the disk filled before the checkpoint,
  or a process was killed) is read whole, never called damaged.
- A store on a read-only medium serves every command that only reads, with the same results as
  on a writable disk; a command that writes says so in one line; a store whose log holds commits
  and whose -shm file cannot be made there is refused in one line, never read in part.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

if __name__ != "__main__":  # the driver (below) runs inside the namespace without pytest
    import pytest
    from openai_server import OpenAITestServer

N_PAIRS = 400
ROOM = 4096  # free bytes left on a "full" disk: the pre-flight probe of an output (4 KiB) still passes
THIS = Path(__file__).resolve()


# --- the driver: runs inside the private mount namespace ----------------------------------------------------------

def _fill(folder: str, free: int) -> None:
    """Fill the file system at `folder`, then give back `free` bytes."""
    filler = os.path.join(folder, "filler")
    with open(filler, "wb", buffering=0) as fh:
        for block in (1 << 16, 1 << 12):
            try:
                while True:
                    fh.write(b"\0" * block)
            except OSError:
                pass
    os.truncate(filler, max(0, os.path.getsize(filler) - free))


def drive(steps: list) -> dict:
    """Run the steps in order; what each `run` did and what each `list` found, as JSON."""
    done: dict = {"runs": {}, "lists": {}}
    env = {**os.environ, "COLUMNS": "200"}
    for step in steps:
        kind, *args = step
        if kind == "tmpfs":
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={args[1]}", "tmpfs", args[0]], check=True)
        elif kind == "ro":  # a read-only bind mount of a folder: a read-only medium for everything under it
            subprocess.run(["mount", "--bind", args[0], args[1]], check=True)
            subprocess.run(["mount", "-o", "remount,ro,bind", args[1]], check=True)
        elif kind == "fill":
            _fill(*args)
        elif kind == "unfill":
            os.unlink(os.path.join(args[0], "filler"))
        elif kind == "copy":  # everything in a folder, to a folder
            for name in os.listdir(args[0]):
                shutil.copyfile(os.path.join(args[0], name), os.path.join(args[1], name))
        elif kind == "list":
            done["lists"][args[0]] = sorted(os.listdir(args[1]))
        elif kind in ("run", "py"):  # the CLI, or a Python script of the test's (the library's side)
            argv = ["-m", "judgeblender", *args[1]] if kind == "run" else args[1]
            proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=300,
                                  env={**env, **(args[2] if len(args) > 2 else {})})
            done["runs"][args[0]] = {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}
        else:
            raise ValueError(kind)
    return done


if __name__ == "__main__":
    print(json.dumps(drive(json.loads(Path(sys.argv[1]).read_text()))))
    sys.exit(0)


# --- the tests ------------------------------------------------------------------------------------------------------

# CI runs as root, where `unshare` gives every case its own mounts; only a machine without the
# tool skips (a namespace that cannot mount fails the case, saying why, rather than hide it).
pytestmark = pytest.mark.skipif(shutil.which("unshare") is None,
                                reason="needs `unshare` (util-linux) for a private mount namespace")


def in_namespace(tmp: Path, steps: list) -> dict:
    """Run `steps` (see drive) in a private mount namespace of their own."""
    spec = tmp / f"steps-{random.randrange(1 << 30)}.json"
    spec.write_text(json.dumps([[str(a) if isinstance(a, Path) else a for a in step] if step[0] not in ("run", "py")
                                else [step[0], step[1], [str(a) for a in step[2]], *step[3:]] for step in steps]))
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, str(THIS), str(spec)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def run_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "COLUMNS": "200"})


def one_error_line(done: dict, names: str) -> str:
    """The one `error:` line of a failed run (exit 2, no traceback), which names `names`."""
    assert "Traceback" not in done["stderr"], done["stderr"][-3000:]
    assert done["rc"] == 2, (done["rc"], done["stderr"][-3000:])
    errors = [line for line in done["stderr"].splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, done["stderr"]
    assert names in errors[0], errors[0]
    return errors[0]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Inputs, a served model and a sound store of N_PAIRS real calls and their judgments."""
    root = tmp_path_factory.mktemp("disk")
    rng = random.Random(11)
    words = "goldfish eat flakes peas tower metres tall river bank loan water steel bridge".split()
    (root / "queries.tsv").write_text("".join(f"q{q}\tquestion {q} about goldfish and towers\n" for q in range(1, 9)))
    with open(root / "corpus.jsonl", "w") as fh:
        for i in range(N_PAIRS):  # ~1.5 KB passages: the store of every call is over a megabyte
            fh.write(json.dumps({"docid": f"d{i}", "text": " ".join(rng.choice(words) for _ in range(250))}) + "\n")
    (root / "pairs.tsv").write_text("".join(f"q{i % 8 + 1}\td{i}\n" for i in range(N_PAIRS)))
    (root / "gold.qrels").write_text("".join(f"q{i % 8 + 1} 0 d{i} {i % 4}\n" for i in range(0, N_PAIRS, 2)))
    (root / "pred.qrels").write_text("".join(f"q{i % 8 + 1} 0 d{i} {(i // 3) % 4}\n" for i in range(N_PAIRS)))
    (root / "runs").mkdir()
    for r in range(3):  # the pool of these runs is a few times larger than ROOM
        docs = [f"d{i}" for i in range((r * 7) % 40, N_PAIRS)] + [f"x{r}-{i}" for i in range(300)]
        (root / "runs" / f"run{r}").write_text("".join(
            f"q{q} Q0 {d} {rank + 1} {2000 - rank} run{r}\n" for q in range(1, 9) for rank, d in enumerate(docs)
            if not d.startswith("d") or int(d[1:]) % 8 + 1 == q))
    (root / "items.jsonl").write_text("".join(
        json.dumps({"id": f"item{i}", "input": f"question {i} " * 5, "output": f"answer {i} " * 5,
                    "reference": f"reference {i}"}) + "\n" for i in range(60)))
    (root / "journal.jsonl").write_text("".join(
        json.dumps({"qid": f"q{i % 8 + 1}", "docid": f"d{i}", "label": i % 4, "at": ""}) + "\n"
        for i in range(N_PAIRS)))
    with OpenAITestServer("##final score: 2", max_requests=1_000_000, max_lifetime_s=3600) as server:
        sound = root / "sound.sqlite"
        done = run_cli("judge", "-q", root / "queries.tsv", "-c", root / "corpus.jsonl", "-p", root / "pairs.tsv",
                       "-j", "openai:test-model", "--base-url", server.base_url, "--no-progress",
                       "-o", root / "sound.qrels", "--store", sound)
        assert done.returncode == 0, done.stderr
        assert not Path(f"{sound}-wal").exists() and sound.stat().st_size > 256 * 1024
        yield {"root": root, "sound": sound, "url": server.base_url, "server": server}


def judge_args(world, store: Path, out: Path, *extra) -> list:
    root = world["root"]
    return ["judge", "-q", root / "queries.tsv", "-c", root / "corpus.jsonl", "-p", root / "pairs.tsv",
            "-j", "openai:test-model", "--base-url", world["url"], "--no-progress", "-o", out, "--store", store, *extra]


def copy_store(world, folder: Path, name: str = "s.sqlite") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(world["sound"], folder / name)
    return folder / name


def wal_only_store(world, folder: Path, shm: bool = True, name: str = "s.sqlite", then: int = 0) -> Path:
    """The sound store's content with every commit still in its write-ahead log: copied into a WAL
    store whose checkpoints are off (one transaction), `then` small transactions more (a file hash
    each), by a process then killed (SIGKILL), so no close writes the log back."""
    folder.mkdir(parents=True, exist_ok=True)
    store = folder / name
    script = (
        "import os, signal, sqlite3, sys\n"
        "src = sqlite3.connect(sys.argv[1])\n"
        "dst = sqlite3.connect(sys.argv[2], isolation_level=None)\n"
        "assert dst.execute('PRAGMA journal_mode=WAL').fetchone()[0] == 'wal'\n"
        "dst.execute('PRAGMA wal_autocheckpoint=0')\n"
        "src.backup(dst)\n"
        "for k in range(int(sys.argv[3])):\n"
        "    dst.execute('INSERT INTO file_hashes VALUES (?, ?, ?, ?)', (f'/more/{k}', k, k, '0' * 64))\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    done = subprocess.run([sys.executable, "-c", script, str(world["sound"]), str(store), str(then)],
                          capture_output=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert Path(f"{store}-wal").stat().st_size > world["sound"].stat().st_size  # every page is in the log
    assert store.stat().st_size < 8192  # and the store file alone is a header
    if not shm:
        Path(f"{store}-shm").unlink()
    return store


def checkpoint_stopped(store: Path) -> Path:
    """What a checkpoint that ran out of room leaves: it copies the log's pages into the store file
    in page order, so page 1 (the header, with the new page count and schema) got there and the
    pages the file had no room for did not. The store file alone is then malformed; with its log
    it is whole."""
    log = Path(f"{store}-wal").read_bytes()
    page_size = int.from_bytes(log[8:12], "big")
    first = None
    for offset in range(32, len(log) - page_size - 24 + 1, page_size + 24):
        if int.from_bytes(log[offset:offset + 4], "big") == 1:
            first = log[offset + 24:offset + 24 + page_size]  # the newest copy of page 1
    assert first is not None
    with open(store, "r+b") as fh:
        fh.write(first)
    with pytest.raises(sqlite3.DatabaseError, match="malformed"):
        with sqlite3.connect(f"{store.as_uri()}?mode=ro&immutable=1", uri=True) as db:
            db.execute("SELECT COUNT(*) FROM calls").fetchone()
    return store


def read_commands(world, store: Path, outs: Path) -> dict[str, list]:
    """Every command that only reads a store, writing its outputs into `outs`."""
    root = world["root"]
    return {
        "store stats": ["store", "stats", "--store", store],
        "store check": ["store", "check", "--store", store],
        "store export": ["store", "export", "--store", store, "-o", outs / "export.jsonl"],
        "store judgments": ["store", "judgments", "--store", store, "-o", outs / "judgments.jsonl"],
        "store merge": ["store", "merge", store, "-o", outs / "merged.sqlite"],
        "report": ["report", "--gold", root / "gold.qrels", "--pred", root / "pred.qrels", "--runs", root / "runs",
                   "--bootstrap", "0", "--store", store, "-o", outs / "report.html"],
        "calibrate": ["calibrate", "--gold", root / "gold.qrels", "--labels", root / "pred.qrels", "--labels",
                      root / "gold.qrels", "--select", "--cost-from-store", "--fast-only", "--store", store,
                      "-o", outs / "panel.toml"],
    }


def results(done: dict, outs: Path, store: Path) -> dict[str, object]:
    """What each read command gave: its stdout and its output file, with the store's path replaced."""
    seen: dict[str, object] = {}
    for name, run in done.items():
        assert run["rc"] == 0 and "Traceback" not in run["stderr"], (name, run["stderr"][-3000:])
        seen[name] = run["stdout"].replace(str(store), "STORE")
    for path in sorted(outs.iterdir()):
        if path.suffix == ".sqlite":
            with sqlite3.connect(f"{path.as_uri()}?mode=ro&immutable=1", uri=True) as db:
                seen[path.name] = [db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                                   for t in ("calls", "judgments", "texts")]
        else:
            seen[path.name] = path.read_text().replace(str(store), "STORE")
    return seen


@pytest.fixture(scope="module")
def baseline(world, tmp_path_factory):
    """The read commands' results on the sound store, on a writable disk."""
    tmp = tmp_path_factory.mktemp("baseline")
    store, outs = copy_store(world, tmp / "store"), tmp / "outs"
    outs.mkdir()
    done = {name: vars(run_cli(*argv)) for name, argv in read_commands(world, store, outs).items()}
    done = {name: {"rc": d["returncode"], "stdout": d["stdout"], "stderr": d["stderr"]} for name, d in done.items()}
    seen = results(done, outs, store)
    assert f"{N_PAIRS} judged" in seen["store stats"] and len(seen["export.jsonl"].splitlines()) == N_PAIRS
    return seen


# --- a store that fills its disk ------------------------------------------------------------------------------------

def test_a_store_that_fills_its_disk_keeps_every_commit_is_read_whole_and_resumes(world, tmp_path):
    """The reproduction: a run whose store fills a 256 KB disk fails naming the store; the store,
    its commits still in its write-ahead log (the checkpoint had no room), is read whole on that
    full disk and elsewhere, never called damaged, and a re-run asks only the calls not committed."""
    disk, out, kept = tmp_path / "disk", tmp_path / "out", tmp_path / "kept"
    for folder in (disk, out, kept):
        folder.mkdir()
    store = disk / "s.sqlite"
    done = in_namespace(tmp_path, [
        ["tmpfs", disk, "256k"],
        ["run", "judge", judge_args(world, store, out / "o.qrels")],
        ["list", "after judge", disk],
        ["run", "stats", ["store", "stats", "--store", store]],
        ["run", "check", ["store", "check", "--store", store]],
        ["run", "export", ["store", "export", "--store", store, "-o", out / "export.jsonl"]],
        ["copy", disk, kept],
    ])
    line = one_error_line(done["runs"]["judge"], str(store))
    assert "cannot write to the store" in line and "database or disk is full" in line
    assert "every answer committed before is kept" in line
    assert done["lists"]["after judge"] == ["s.sqlite", "s.sqlite-shm", "s.sqlite-wal"]
    assert sorted(p.name for p in out.iterdir()) == ["export.jsonl"]  # no qrels, no details, no temporary file
    assert (kept / "s.sqlite").stat().st_size < (kept / "s.sqlite-wal").stat().st_size  # left short

    with sqlite3.connect(kept / "s.sqlite") as db:  # SQLite reads it whole
        committed = db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert 0 < committed < N_PAIRS
    for name in ("stats", "check", "export"):  # and so does every command, on the full disk itself
        assert done["runs"][name]["rc"] == 0 and "damaged" not in done["runs"][name]["stderr"], done["runs"][name]
    assert re.search(rf"openai:test-model\s+│\s+{committed}\s+│", done["runs"]["stats"]["stdout"])
    assert done["runs"]["check"]["stdout"].startswith(f"ok: {store}")
    assert len((out / "export.jsonl").read_text().splitlines()) == committed

    asked = len(world["server"].requests)
    resumed = run_cli(*judge_args(world, kept / "s.sqlite", out / "o.qrels"))
    assert resumed.returncode == 0, resumed.stderr
    assert len(world["server"].requests) - asked == N_PAIRS - committed  # what was committed is never asked again
    assert (out / "o.qrels").read_text() == (world["root"] / "sound.qrels").read_text()


def test_the_library_fails_the_write_naming_the_store_and_keeps_what_it_committed(world, tmp_path):
    """CallStore.put_many on a full disk: the StoreError of the CLI, the earlier transactions kept."""
    disk = tmp_path / "disk"
    disk.mkdir()
    script = tmp_path / "fill_store.py"
    script.write_text(
        "import json, os, sys\n"
        "from judgeblender.calls import CallRequest, CallResult, Message\n"
        "from judgeblender.store import CallStore, StoreError\n"
        "store = CallStore(sys.argv[1])\n"
        "n = 0\n"
        "try:\n"
        "    while True:\n"
        "        request = CallRequest(messages=(Message('user', os.urandom(1500).hex()),))\n"
        "        store.put(f'key{n}', 'openai', {'model': 'm'}, request, CallResult(text=str(n)), {'label': 1})\n"
        "        n += 1\n"
        "except StoreError as exc:\n"
        "    print(json.dumps({'committed': n, 'error': str(exc), 'full': exc.full,\n"
        "                      'count': store.count_calls()}))\n"
        "store.close()\n")
    done = in_namespace(tmp_path, [["tmpfs", disk, "192k"], ["py", "fill store", [script, disk / "s.sqlite"]]])
    assert done["runs"]["fill store"]["rc"] == 0, done["runs"]["fill store"]["stderr"]
    seen = json.loads(done["runs"]["fill store"]["stdout"])
    assert seen["committed"] > 0 and seen["count"] == seen["committed"] and seen["full"]
    assert seen["error"].startswith(f"{disk}/s.sqlite: cannot write to the store") and "disk is full" in seen["error"]


# --- outputs on a full disk -----------------------------------------------------------------------------------------

def output_cases(world, tmp: Path, disk: Path) -> dict[str, tuple[list, str, list[str]]]:
    """Per output kind: the command, the file its error must name, and what the disk may hold after
    (besides the filler)."""
    root, store = world["root"], copy_store(world, tmp / "store")
    served = ["-j", "openai:test-model", "--base-url", world["url"], "--no-progress"]
    return {
        "judge qrels": (judge_args(world, store, disk / "o.qrels", "--details", tmp / "d.jsonl"), "o.qrels", []),
        "judge details": (judge_args(world, store, tmp / "o.qrels", "--details", disk / "d.jsonl"), "d.jsonl", []),
        "judge batch requests": (judge_args(world, tmp / "empty.sqlite", tmp / "b.qrels", "--batch-write",
                                            disk / "requests.jsonl"), "requests.jsonl", []),
        "grade verdicts": (["grade", "-i", root / "items.jsonl", *served, "-o", disk / "g.jsonl",
                            "--store", tmp / "grade.sqlite"], "g.jsonl", []),
        "report": (["report", "--gold", root / "gold.qrels", "--pred", root / "pred.qrels", "--runs", root / "runs",
                    "--bootstrap", "0", "--store", store, "-o", disk / "r.html"], "r.html", []),
        "store export": (["store", "export", "--store", store, "-o", disk / "e.jsonl"], "e.jsonl", []),
        "store judgments": (["store", "judgments", "--store", store, "-o", disk / "j.jsonl"], "j.jsonl", []),
        "store merge": (["store", "merge", store, "-o", disk / "m.sqlite"], "m.sqlite", []),
        "label qrels": (["label", "-q", root / "queries.tsv", "-c", root / "corpus.jsonl", "-p", root / "pairs.tsv",
                         "--journal", root / "journal.jsonl", "-o", disk / "h.qrels", "--port", "0", "--no-open"],
                        "h.qrels", ["h.qrels.lock"]),
        "fill provenance": (["fill", "--gold", root / "gold.qrels", "--llm", root / "pred.qrels", "-o", tmp / "f.qrels",
                             "--provenance", disk / "p.tsv"], "p.tsv", []),
        "pool pairs": (["pool", "--runs", root / "runs", "--depth", "1000", "-o", disk / "pool.tsv"], "pool.tsv", []),
    }


OUTPUTS = ["judge qrels", "judge details", "judge batch requests", "grade verdicts", "report", "store export",
           "store judgments", "store merge", "label qrels", "fill provenance", "pool pairs"]


@pytest.mark.parametrize("kind", OUTPUTS)
def test_an_output_the_disk_has_no_room_for_is_one_error_line_and_leaves_nothing(world, tmp_path, kind):
    disk = tmp_path / "disk"
    disk.mkdir()
    argv, named, allowed = output_cases(world, tmp_path, disk)[kind]
    done = in_namespace(tmp_path, [["tmpfs", disk, "256k"], ["fill", disk, ROOM], ["run", kind, argv],
                                   ["list", "disk", disk]])
    line = one_error_line(done["runs"][kind], str(disk / named))
    assert "No space left on device" in line and "no partial or temporary file is left" in line
    assert done["lists"]["disk"] == sorted(["filler", *allowed])  # no partial output, no temporary file
    for written in ("o.qrels", "d.jsonl", "f.qrels"):  # a failed run replaces no output, on any disk
        assert not (tmp_path / written).exists()


def test_an_output_that_existed_keeps_its_content_when_the_disk_is_full(world, tmp_path):
    """--force over an existing merged store, and an export over an existing file: both as they were."""
    disk = tmp_path / "disk"
    disk.mkdir()
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / "e.jsonl").write_text("the earlier export\n")
    small = copy_store(world, tmp_path / "small", "small.sqlite")
    with sqlite3.connect(small) as db:  # an earlier, smaller merged store, to be replaced with --force
        db.execute("DELETE FROM calls WHERE key NOT IN (SELECT key FROM calls ORDER BY key LIMIT 5)")
        db.execute("DELETE FROM judgments")
    db.close()
    with sqlite3.connect(small) as db:
        db.execute("VACUUM")
    db.close()
    shutil.copyfile(small, staged / "m.sqlite")
    store = copy_store(world, tmp_path / "store")
    done = in_namespace(tmp_path, [
        ["tmpfs", disk, "256k"], ["copy", staged, disk], ["fill", disk, ROOM],
        ["run", "export", ["store", "export", "--store", store, "-o", disk / "e.jsonl"]],
        ["run", "merge", ["store", "merge", store, "-o", disk / "m.sqlite", "--force"]],
        ["list", "disk", disk], ["unfill", disk], ["copy", disk, staged]])
    for name, file in (("export", "e.jsonl"), ("merge", "m.sqlite")):
        assert "its earlier content is kept" in one_error_line(done["runs"][name], str(disk / file))
    assert done["lists"]["disk"] == ["e.jsonl", "filler", "m.sqlite"]
    assert (staged / "e.jsonl").read_text() == "the earlier export\n"
    assert (staged / "m.sqlite").read_bytes() == small.read_bytes()


def test_the_library_raises_the_output_error_which_is_an_oserror_too(tmp_path):
    """write_qrels from Python on a full disk: the CLI's error, still catchable as the OSError it was."""
    disk = tmp_path / "disk"
    disk.mkdir()
    script = tmp_path / "write.py"
    script.write_text(
        "import json, sys\n"
        "from judgeblender.errors import OutputError\n"
        "from judgeblender.pairs.qrels import write_qrels\n"
        "qrels = {f'q{i}': {f'd{j}': j % 4 for j in range(50)} for i in range(40)}\n"
        "try:\n"
        "    write_qrels(sys.argv[1], qrels)\n"
        "except OSError as exc:\n"
        "    print(json.dumps({'kind': type(exc).__name__, 'output': isinstance(exc, OutputError),\n"
        "                      'errno': exc.errno, 'strerror': exc.strerror, 'message': str(exc)}))\n")
    done = in_namespace(tmp_path, [["tmpfs", disk, "128k"], ["fill", disk, 8192],
                                   ["py", "write", [script, disk / "q.qrels"]], ["list", "disk", disk]])
    assert done["runs"]["write"]["rc"] == 0, done["runs"]["write"]["stderr"]
    seen, listing = json.loads(done["runs"]["write"]["stdout"]), done["lists"]["disk"]
    assert seen["kind"] == "OutputError" and seen["output"] and seen["errno"] == 28
    assert seen["strerror"] == "No space left on device"
    assert seen["message"].startswith(f"{disk}/q.qrels: cannot write this output (No space left on device)")
    assert listing == ["filler"]


def test_a_gzip_corpus_unpacked_into_a_full_temporary_folder_is_not_called_corrupt(world, tmp_path):
    """The passage index unpacks a gzip corpus into TMPDIR: no room there is that folder's
    failure, named as such, not a truncated corpus."""
    import gzip

    disk = tmp_path / "disk"
    disk.mkdir()
    corpus = tmp_path / "corpus.jsonl.gz"
    corpus.write_bytes(gzip.compress((world["root"] / "corpus.jsonl").read_bytes()))
    script = tmp_path / "index.py"
    script.write_text(
        "import sys\n"
        "from judgeblender.errors import InputError, OutputError\n"
        "from judgeblender.pairs.passage_index import PassageIndex\n"
        "try:\n"
        "    PassageIndex(sys.argv[1])\n"
        "except (InputError, OutputError) as exc:\n"
        "    print(type(exc).__name__, exc)\n")
    done = in_namespace(tmp_path, [["tmpfs", disk, "128k"], ["py", "index", [script, corpus], {"TMPDIR": str(disk)}],
                                   ["list", "disk", disk]])
    assert done["runs"]["index"]["rc"] == 0, done["runs"]["index"]["stderr"]
    line, listing = done["runs"]["index"]["stdout"].strip(), done["lists"]["disk"]
    assert line.startswith(f"OutputError {disk}/jb-corpus-") and "No space left on device" in line, line
    assert f"unpacking {corpus}" in line and "TMPDIR" in line
    assert listing == []  # the temporary file went with the error


# --- stores whose commits are still in their write-ahead log, on a writable disk --------------------------------------

@pytest.mark.parametrize("stopped", [True, False], ids=["checkpoint-stopped", "killed-then-copied-without-shm"])
def test_a_store_whose_commits_are_in_its_log_is_read_whole_by_every_read_command(world, baseline, tmp_path, stopped):
    """Every page in the -wal file, the store file a header: left so by a checkpoint that ran out
    of room after page 1 (with the -shm file), or by a kill, then copied without the -shm file.
    SQLite reads it whole, and so does every command; none calls it damaged."""
    seen: dict = {}
    folder, outs = tmp_path / "store", tmp_path / "outs"
    outs.mkdir()
    for name, argv in read_commands(world, folder / "s.sqlite", outs).items():
        shutil.rmtree(folder, ignore_errors=True)  # each command gets the store as the kill left it
        store = wal_only_store(world, folder, shm=stopped)
        if stopped:
            checkpoint_stopped(store)
        done = run_cli(*argv)
        seen[name] = {"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
    assert results(seen, outs, folder / "s.sqlite") == baseline


# --- read-only media ------------------------------------------------------------------------------------------------

def _read_only_run(world, tmp_path: Path, store: Path, outs: Path, only: tuple[str, ...] = ()) -> dict:
    """Every read command (or those named) on `store`'s folder mounted read-only; the folder's
    files before and after."""
    ro = tmp_path / "ro"
    ro.mkdir()
    mounted = ro / store.name
    steps = [["ro", store.parent, ro], ["list", "before", ro]]
    steps += [["run", name, argv] for name, argv in read_commands(world, mounted, outs).items()
              if not only or name in only]
    steps += [["list", "after", ro]]
    return in_namespace(tmp_path, steps)


STORES = {
    "sound": lambda world, folder: copy_store(world, folder),
    "checkpoint-stopped-with-shm": lambda world, folder: checkpoint_stopped(wal_only_store(world, folder, shm=True)),
}


@pytest.mark.parametrize("kind", list(STORES))
def test_a_store_on_a_read_only_medium_serves_every_read_command_with_the_same_results(world, baseline, tmp_path, kind):
    store = STORES[kind](world, tmp_path / "store")
    outs = tmp_path / "outs"
    outs.mkdir()
    done = _read_only_run(world, tmp_path, store, outs)
    assert done["lists"]["after"] == done["lists"]["before"]  # nothing could be, or was, made there
    assert results(done["runs"], outs, tmp_path / "ro" / store.name) == baseline


def test_a_garbage_log_on_a_read_only_medium_is_ignored_as_sqlite_ignores_it(world, baseline, tmp_path):
    """No -shm file and none can be made, but the log holds no valid commit: SQLite would read the
    store file alone, and so does judgeblender."""
    store = copy_store(world, tmp_path / "store")
    Path(f"{store}-wal").write_bytes(random.Random(5).randbytes(3 * 4096))
    outs = tmp_path / "outs"
    outs.mkdir()
    done = _read_only_run(world, tmp_path, store, outs, ("store stats", "store check", "store export"))
    seen = results(done["runs"], outs, tmp_path / "ro" / store.name)
    assert seen == {name: baseline[name] for name in seen}


def test_a_log_with_commits_and_no_room_for_its_shm_file_is_refused_never_read_in_part(world, tmp_path):
    store = checkpoint_stopped(wal_only_store(world, tmp_path / "store", shm=False))
    outs = tmp_path / "outs"
    outs.mkdir()
    done = _read_only_run(world, tmp_path, store, outs)
    mounted = tmp_path / "ro" / store.name
    for name in read_commands(world, mounted, outs):
        line = one_error_line(done["runs"][name], str(mounted))
        assert "has commits not yet written back from its write-ahead log" in line, (name, line)
        assert "copy the store with its -wal file to writable storage" in line
    assert list(outs.iterdir()) == []
    assert done["lists"]["after"] == ["s.sqlite", "s.sqlite-wal"]


def test_a_torn_log_on_a_read_only_medium_is_refused_only_if_a_commit_survives(world, tmp_path):
    """A log cut inside its first frame holds no commit (SQLite reads the file alone); one whose last
    transaction is torn still holds the ones before it (refused: SQLite would read more than the file)."""
    store = copy_store(world, tmp_path / "store")
    log = wal_only_store(world, tmp_path / "donor", shm=False, then=3)
    data = Path(f"{log}-wal").read_bytes()
    Path(f"{store}-wal").write_bytes(data[:32 + 24 + 100])
    ro = tmp_path / "ro"
    ro.mkdir()
    cut = in_namespace(tmp_path, [["ro", store.parent, ro], ["run", "stats", ["store", "stats", "--store", ro / "s.sqlite"]]])
    assert cut["runs"]["stats"]["rc"] == 0 and f"{N_PAIRS} judged" in cut["runs"]["stats"]["stdout"]
    Path(f"{store}-wal").write_bytes(data[:len(data) - 100])  # the last frame torn, the commits before it whole
    whole = in_namespace(tmp_path, [["ro", store.parent, ro], ["run", "stats", ["store", "stats", "--store", ro / "s.sqlite"]]])
    assert "commits not yet written back" in one_error_line(whole["runs"]["stats"], str(ro / "s.sqlite"))


def test_commands_that_write_to_a_read_only_store_say_so_in_one_line_and_call_no_model(world, tmp_path):
    store = copy_store(world, tmp_path / "store")
    ro, outs = tmp_path / "ro", tmp_path / "outs"
    ro.mkdir()
    outs.mkdir()
    mounted = ro / store.name
    root, served = world["root"], ["-j", "openai:test-model", "--base-url", world["url"], "--no-progress"]
    writers = {
        "judge": judge_args(world, mounted, outs / "o.qrels"),
        "cascade": ["cascade", "-q", root / "queries.tsv", "-c", root / "corpus.jsonl", "-p", root / "pairs.tsv",
                    *served, "--budget", "10", "-o", outs / "c.qrels", "--store", mounted],
        "grade": ["grade", "-i", root / "items.jsonl", *served, "-o", outs / "g.jsonl", "--store", mounted],
    }
    asked = len(world["server"].requests)
    done = in_namespace(tmp_path, [["ro", store.parent, ro], *[["run", n, argv] for n, argv in writers.items()]])
    for name in writers:
        line = one_error_line(done["runs"][name], str(mounted))
        assert "writable" in line and "Read-only file system" in line, (name, line)
    assert len(world["server"].requests) == asked
    assert list(outs.iterdir()) == []


def test_the_library_opens_a_read_only_store_for_reading_and_refuses_to_write_to_it(world, tmp_path):
    store = copy_store(world, tmp_path / "store")
    old = tmp_path / "old"
    old.mkdir()
    with sqlite3.connect(old / "v4.sqlite") as db:  # a store of schema 4: reading it would upgrade it
        db.executescript((THIS.parent / "data" / "store-v4.sql").read_text())
    db.close()
    ro, ro_old = tmp_path / "ro", tmp_path / "ro-old"
    ro.mkdir()
    ro_old.mkdir()
    script = tmp_path / "library.py"
    script.write_text(
        "import json, sys\n"
        "from judgeblender.store import CallStore, StoreError\n"
        "seen = {}\n"
        "with CallStore(sys.argv[1], read_only=True) as store:\n"
        "    seen['calls'] = store.count_calls()\n"
        "    seen['judged'] = len(store.judgments())\n"
        "for path, kwargs in ((sys.argv[1], {}), (sys.argv[2], {'read_only': True})):\n"
        "    try:\n"
        "        CallStore(path, **kwargs)\n"
        "    except StoreError as exc:\n"
        "        seen[path] = str(exc)\n"
        "print(json.dumps(seen))\n")
    done = in_namespace(tmp_path, [["ro", store.parent, ro], ["ro", old, ro_old],
                                   ["py", "library", [script, ro / "s.sqlite", ro_old / "v4.sqlite"]]])
    assert done["runs"]["library"]["rc"] == 0, done["runs"]["library"]["stderr"]
    seen = json.loads(done["runs"]["library"]["stdout"])
    assert seen["calls"] == N_PAIRS and seen["judged"] == N_PAIRS
    assert seen[f"{ro}/s.sqlite"].startswith(f"{ro}/s.sqlite: cannot write to the store: it is on a read-only medium")
    assert "must be upgraded to" in seen[f"{ro_old}/v4.sqlite"] and "copy it to writable storage" in seen[
        f"{ro_old}/v4.sqlite"]


# --- the log reader agrees with SQLite ------------------------------------------------------------------------------

def test_holds_commits_agrees_with_what_sqlite_reads_at_every_cut_of_a_log(tmp_path):
    """A log of several transactions, cut at every frame boundary and inside frames, damaged in a
    byte, or replaced by noise: holds_commits is true exactly when SQLite reads more than the
    store file alone holds."""
    from judgeblender.store.wal import holds_commits

    source = tmp_path / "source.sqlite"
    db = sqlite3.connect(source, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (x)")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the table is in the file; the rows go to the log
    db.execute("PRAGMA wal_autocheckpoint=0")
    for i in range(6):
        db.execute("BEGIN")
        db.executemany("INSERT INTO t VALUES (?)", [(random.Random(i * 10 + j).randbytes(1500),) for j in range(4)])
        db.execute("COMMIT")
    base, log = source.read_bytes(), Path(f"{source}-wal").read_bytes()
    db.close()  # the close writes the log back; `base` and `log` were read before it

    page = 4096 + 24
    cuts = sorted({*range(0, len(log) + 1, page), *(32 + k * page for k in range(len(log) // page + 1)),
                   *(32 + k * page + 700 for k in range(len(log) // page)), 31, 32, len(log)})
    variants = {f"cut at {n}": log[:n] for n in cuts if n <= len(log)}
    flipped = bytearray(log)
    flipped[32 + 24 + 10] ^= 1  # the first frame's page: its checksum fails, and with it the whole log
    variants["first frame damaged"] = bytes(flipped)
    variants["noise"] = random.Random(3).randbytes(len(log))
    assert sum(holds_commits_of(tmp_path, base, data, holds_commits) for data in variants.values()) > 3
    for name, data in variants.items():
        expected, claimed = sqlite_reads_more(tmp_path, base, data), holds_commits_of(tmp_path, base, data,
                                                                                     holds_commits)
        assert claimed == expected, name


def holds_commits_of(tmp: Path, base: bytes, log: bytes, holds_commits) -> bool:
    path = tmp / "probe.sqlite-wal"
    path.write_bytes(log)
    return holds_commits(path)


def sqlite_reads_more(tmp: Path, base: bytes, log: bytes) -> bool:
    folder = tmp / f"case-{random.randrange(1 << 30)}"
    folder.mkdir()
    (folder / "s.sqlite").write_bytes(base)
    Path(f"{folder}/s.sqlite-wal").write_bytes(log)
    with sqlite3.connect(f"{(folder / 's.sqlite').as_uri()}?mode=ro", uri=True) as db:
        with_log = db.execute("SELECT COUNT(*) FROM t").fetchone()[0]
    db.close()
    with sqlite3.connect(f"{(folder / 's.sqlite').as_uri()}?mode=ro&immutable=1", uri=True) as db:
        alone = db.execute("SELECT COUNT(*) FROM t").fetchone()[0]
    db.close()
    return with_log > alone
