"""`judgeblender judge` end to end through the real CLI, on a tiny dataset and a scripted model."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = {
    "name": "tiny-judge",
    "rules": [
        {"contains": "flakes", "output": "##final score: 3"},
        {"contains": "freshwater", "output": "##final score: 1"},
        {"contains": "330 metres", "output": "##final score: 2"},
        {"contains": "capital", "output": "no idea"},
    ],
}


def cli(*args, cwd=None, env=None, check=True):
    proc = subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, **(env or {})}, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "model.json"
    path.write_text(json.dumps(SCRIPT))
    return path


def test_judge_writes_qrels_details_and_reuses_the_store(tmp_path, tiny, model_file):
    out = tmp_path / "llm.qrels"
    args = ["judge", "--queries", tiny / "queries.tsv", "--corpus", tiny / "corpus.jsonl",
            "--pairs", tiny / "qrels.txt", "--judge", f"scripted:{model_file}", "--out", out,
            "--store", tmp_path / "s.sqlite", "--no-progress", "--json"]
    first = json.loads(cli(*args).stdout)
    # the pair answered "no idea" twice (first try and one retry) stays unjudged
    assert out.read_text() == "q1 0 d1 3\nq1 0 d2 1\nq2 0 d3 2\n"
    details = [json.loads(l) for l in Path(str(out) + ".details.jsonl").read_text().splitlines()]
    assert [d["label"] for d in details] == [3, 1, 2, None]
    assert "no label found" in details[3]["invalid_reason"]
    judge = details[0]["judges"]["scripted:" + str(model_file) + "/umbrela/generate"]
    assert judge["raw_output"] == "##final score: 3"
    assert first["judges"][0]["calls_made"] == 5 and first["judges"][0]["unjudged"] == 1
    second = json.loads(cli(*args).stdout)
    assert second["judges"][0]["calls_made"] == 0 and second["judges"][0]["cache_hits"] == 5
    assert out.read_text() == "q1 0 d1 3\nq1 0 d2 1\nq2 0 d3 2\n"


def test_missing_passage_is_an_error_listing_ids(tmp_path, tiny, model_file):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("q1\td1\nq1\tghost\n")
    proc = cli("judge", "-q", tiny / "queries.tsv", "-c", tiny / "corpus.jsonl", "-p", pairs,
               "-j", f"scripted:{model_file}", "-o", tmp_path / "o.qrels", "--store", tmp_path / "s.sqlite",
               check=False)
    assert proc.returncode == 2
    assert "1 of 2 pairs reference a passage missing from the corpus (first: ghost)" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_malformed_input_names_file_and_line(tmp_path, tiny, model_file):
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tok\nq2 no tab\n")
    proc = cli("judge", "-q", queries, "-c", tiny / "corpus.jsonl", "-p", tiny / "qrels.txt",
               "-j", f"scripted:{model_file}", "-o", tmp_path / "o.qrels", check=False)
    assert proc.returncode == 2
    assert f"{queries}:2: expected 'query_id<TAB>text'" in proc.stderr


def test_prompts_commands():
    listing = cli("prompts", "list").stdout
    assert "umbrela" in listing and "multicriteria" in listing
    rendered = cli("prompts", "render", "umbrela", "--query", "QQQ", "--passage", "PPP").stdout
    assert "Query: QQQ\nPassage: PPP" in rendered
    assert "Apache License" in cli("prompts", "show", "umbrela", "--license").stdout


def test_a_command_imports_only_what_it_needs():
    # Start-up time is import time: `prompts list` must not pay for scipy, torch or the judging engine.
    code = ("import sys\nfrom judgeblender.cli import main\nsys.argv = ['judgeblender', 'prompts', 'list']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('MODULES', *sorted(m for m in sys.modules if m.split('.')[0] in ('judgeblender', 'scipy', 'torch')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    modules = proc.stdout.split("MODULES", 1)[1].split()
    assert "judgeblender.cli.prompts" in modules
    assert not [m for m in modules if m.startswith(("scipy", "torch", "judgeblender.judges", "judgeblender.cli.judge"))]


def test_help_lists_every_command():
    listing = cli("--help").stdout
    for command in ("judge", "blend", "agree", "correlate", "pool", "label", "calibrate", "fill", "report",
                    "compare", "grade", "cascade", "prompts", "store", "demo"):
        assert f" {command} " in listing


def _dataset(tmp_path, n):
    (tmp_path / "q.tsv").write_text("".join(f"q{i}\tquery number {i}\n" for i in range(6)))
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"docid": f"d{i}", "text": f"passage {i}"}) + "\n"
                                              for i in range(n)))
    (tmp_path / "p.tsv").write_text("".join(f"q{i % 6}\td{i}\n" for i in range(n)))
    model = tmp_path / "slow.json"
    model.write_text(json.dumps({"name": "slow", "delay_s": 0.05,
                                 "rules": [{"contains": f"passage {i}\n", "output": f"##final score: {i % 4}"}
                                           for i in range(n)]}))
    return model


def test_killed_run_resumes_without_repeating_calls(tmp_path):
    n = 60
    model = _dataset(tmp_path, n)

    def args(store, out):
        return ["judge", "-q", tmp_path / "q.tsv", "-c", tmp_path / "c.jsonl", "-p", tmp_path / "p.tsv",
                "-j", f"scripted:{model}", "--store", store, "-o", out, "--no-progress", "--json"]

    store = tmp_path / "killed.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "judgeblender", *map(str, args(store, tmp_path / "k.qrels"))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    done_before_kill = 0
    while time.time() < deadline:
        time.sleep(0.1)
        if store.exists():
            try:
                done_before_kill = sqlite3.connect(store).execute("SELECT COUNT(*) FROM calls").fetchone()[0]
            except sqlite3.OperationalError:
                continue
            if done_before_kill >= 15:
                break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    survived = sqlite3.connect(store).execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    assert 15 <= survived < n
    resumed = json.loads(cli(*args(store, tmp_path / "k.qrels")).stdout)
    assert resumed["judges"][0]["calls_made"] == n - survived
    assert resumed["judges"][0]["cache_hits"] == survived
    clean = cli(*args(tmp_path / "clean.sqlite", tmp_path / "c.qrels"))
    assert json.loads(clean.stdout)["judges"][0]["calls_made"] == n
    assert (tmp_path / "k.qrels").read_text() == (tmp_path / "c.qrels").read_text()
    assert sqlite3.connect(store).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
