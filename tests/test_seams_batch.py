"""Issue 29 part 8: Batch API requests files never collide and never overwrite what they may not.

A run of several served models writes one requests file per model (`REQ.MODEL.jsonl`), the
model's name kept to letters, digits, `.`, `_` and `-`. Two models whose names map to one file
(`team/m1` and `team_m1`; `Judge-A` and `judge-a`, one file where case is ignored) must be
refused before any model call and before any byte is written: one `error:` line naming both
models and the file, exit 2, every file as it was (bytes and mtime). A model's requests file is
checked as every output is (tests/test_trust_outputs.py): not an input (the Batch API output
file being read, the pairs), not another output (`--out`, the details), not a store, not a
directory. Each case runs the real command against a real server on 127.0.0.1, which must see
no request when the run is refused; the same checks hold from Python (`use_batch_files`, which
every panel run calls, and `BatchRequests.write`).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from openai_server import OpenAITestServer
from test_trust_outputs import refused, run_cli, snapshot

from judgeblender.backends.batch import BatchRequests, use_batch_files
from judgeblender.errors import JudgeblenderError
from judgeblender.judges import JudgeSpec, build_judge

QUERIES = "q1\twhat do goldfish eat\nq2\thow tall is the eiffel tower\n"
CORPUS = "".join(json.dumps({"docid": f"d{i}", "text": f"passage number {i} about goldfish"}) + "\n" for i in range(6))
PAIRS = "".join(f"q{i % 2 + 1}\td{i}\n" for i in range(6))


@pytest.fixture(scope="module")
def server():
    with OpenAITestServer("##final score: 2") as srv:
        yield srv


@pytest.fixture
def folder(tmp_path, server):
    for name, text in {"queries.tsv": QUERIES, "corpus.jsonl": CORPUS, "pairs.tsv": PAIRS}.items():
        (tmp_path / name).write_text(text)
    server.reset_counters()
    return tmp_path


def panel_file(folder: Path, server, *models: str) -> str:
    text = "".join(f'[[judges]]\nmodel = "openai:{m}"\nid = "j{i}"\noptions = {{ base_url = "{server.base_url}" }}\n\n'
                   for i, m in enumerate(models))
    (folder / "panel.toml").write_text(text)
    return "panel.toml"


def batch_judge(folder: Path, server, *models: str, extra: tuple = ()) -> list:
    return ["judge", "-q", "queries.tsv", "-c", "corpus.jsonl", "-p", "pairs.tsv", "--no-progress",
            "--store", "s.sqlite", "-o", "out.qrels", "--panel", panel_file(folder, server, *models),
            "--batch-write", "req.jsonl", *extra]


def requests_in(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("models, file", [
    (("team/m1", "team_m1"), "req.team_m1.jsonl"),  # `/` becomes `_`: one file name
    (("a b", "a?b"), "req.a_b.jsonl"),  # any run of other characters becomes one `_`
    (("Judge-A", "judge-a"), "req.judge-a.jsonl"),  # names that differ only in case: one file on macOS or Windows
], ids=["slash-and-underscore", "space-and-question-mark", "case-only"])
def test_two_models_that_map_to_one_file_are_refused_before_any_call(folder, server, models, file):
    line = refused(folder, *batch_judge(folder, server, *models))
    assert file in line and all(repr(m) in line for m in models), line
    assert "separate runs" in line
    assert server.request_count == 0
    assert not list(folder.glob("req*"))


def test_distinct_models_each_get_their_own_file_with_every_request(folder, server):
    """Expected to hold: no collision, one file per model, every pair's request in its model's file."""
    done = run_cli(folder, *batch_judge(folder, server, "team/m1", "team/m2", "m3"))
    assert done.returncode == 0, done.stderr[-3000:]
    files = {p.name: requests_in(p) for p in folder.glob("req*")}
    assert set(files) == {"req.team_m1.jsonl", "req.team_m2.jsonl", "req.m3.jsonl"}
    for name, lines in files.items():
        assert len(lines) == 6 and len({r["custom_id"] for r in lines}) == 6
        assert {r["body"]["model"] for r in lines} == {{"req.team_m1.jsonl": "team/m1", "req.team_m2.jsonl": "team/m2",
                                                        "req.m3.jsonl": "m3"}[name]}
    assert server.request_count == 0  # queued, not called


@pytest.mark.parametrize("taken, expected", [
    ("--details", "is the same file as --details"),
    ("--out", "is the same file as --out"),
], ids=["details", "out"])
def test_a_models_file_may_not_be_another_output(folder, server, taken, expected):
    args = batch_judge(folder, server, "m1", "m2")
    if taken == "--details":
        args += ["--details", "req.m1.jsonl"]
    else:
        args[args.index("out.qrels")] = "req.m2.jsonl"
    line = refused(folder, *args)
    assert expected in line and "Batch API requests file of model" in line, line
    assert server.request_count == 0


def test_a_models_file_may_not_be_the_batch_output_being_read(folder, server):
    """The provider's output file, downloaded as req.m1.jsonl, would be replaced by m1's next requests."""
    (folder / "req.m1.jsonl").write_text(json.dumps({"custom_id": "x", "response": {"status_code": 200, "body": {}}})
                                         + "\n")
    line = refused(folder, *batch_judge(folder, server, "m1", "m2", extra=("--batch-read", "req.m1.jsonl")))
    assert "req.m1.jsonl: expected the Batch API requests file of model 'm1' that is not also an input" in line, line
    assert server.request_count == 0


def test_a_models_file_may_not_be_a_store_or_a_directory(folder, server):
    db = sqlite3.connect(folder / "req.m1.jsonl")
    db.execute("CREATE TABLE calls (key TEXT, raw_output TEXT)")
    db.commit()
    db.close()
    line = refused(folder, *batch_judge(folder, server, "m1", "m2"))
    assert "req.m1.jsonl: expected the Batch API requests file of model 'm1' that is not an SQLite database" in line
    (folder / "req.m1.jsonl").unlink()
    (folder / "req.m2.jsonl").mkdir()
    line = refused(folder, *batch_judge(folder, server, "m1", "m2"))
    assert "req.m2.jsonl: expected the Batch API requests file of model 'm2' path, got 'a directory'" in line
    assert server.request_count == 0


def test_an_earlier_requests_file_is_replaced_as_an_output_is(folder, server):
    """Expected to hold: a plain file from an earlier exchange passes the checks and is replaced."""
    (folder / "req.m1.jsonl").write_text('{"custom_id": "old"}\n')
    done = run_cli(folder, *batch_judge(folder, server, "m1", "m2"))
    assert done.returncode == 0, done.stderr[-3000:]
    lines = requests_in(folder / "req.m1.jsonl")
    assert len(lines) == 6 and "old" not in {r["custom_id"] for r in lines}


def test_one_model_writes_the_file_given(folder, server):
    """Expected to hold: with one model the requests go to --batch-write itself, as before."""
    done = run_cli(folder, *batch_judge(folder, server, "team/m1"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert [p.name for p in folder.glob("req*")] == ["req.jsonl"] and len(requests_in(folder / "req.jsonl")) == 6


def test_the_library_refuses_colliding_models_before_any_call_and_any_byte(folder, server):
    judges = [build_judge(JudgeSpec(model=f"openai:{m}", options={"base_url": server.base_url}, id=f"j{i}"))
              for i, m in enumerate(("team/m1", "team_m1"))]
    before = snapshot(folder)
    with pytest.raises(JudgeblenderError, match=r"req.team_m1.jsonl: the Batch API requests of models 'team/m1' "
                                                r"and 'team_m1' would both go to this file"):
        use_batch_files(judges, None, folder / "req.jsonl")  # what run_panel and stream_panel call first
    assert server.request_count == 0 and snapshot(folder) == before
    assert all(type(j.backend).__name__ == "OpenAICompatBackend" for j in judges)  # none left half routed

    queue = BatchRequests(folder / "req.jsonl")  # filled by hand: write() checks before its first byte
    queue.add("Judge-A", {"custom_id": "a"})
    queue.add("judge-a", {"custom_id": "b"})
    with pytest.raises(JudgeblenderError, match="'Judge-A' and 'judge-a' would both go to this file"):
        queue.write()
    assert snapshot(folder) == before
