"""docs/serve.md's examples run, as a user runs them, against a local OpenAI-compatible test server.

The commands are read from the page at test time (its ```sh/```bash blocks, its ```python block),
so an example that stops working fails the suite. Only these substitutions are made, and only
because a test cannot use the page's fixed ports or a real model: MODEL/my-model and URL become
the test server's model and address; a fixed port (8000, 8080) becomes a free one (`--port 0`,
read back from `--port-file` or the proxy's first line) and the URLs that name it follow; `...`
at the end of the `judge` line becomes this test's inputs; `$TOKEN` is a token of the token file
the page's second command names; the client's `df` and `gold` are a DL19 slice's pairs and labels.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from openai_server import OpenAITestServer

from judgeblender.pairs import read_corpus, read_qrels, read_queries

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "serve.md"
SLICE = ROOT / "tests" / "data" / "dl19_slice"
pytest.importorskip("uvicorn", reason="needs the [serve] extra")


def blocks(kind: str) -> list[str]:
    """The page's code blocks of one kind, continuations joined, comment lines dropped."""
    found = re.findall(r"```(\w+)\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    out = []
    for lang, body in found:
        if lang in kind.split("|"):
            joined = re.sub(r"\\\n\s*", " ", body)
            out.append("\n".join(line for line in joined.splitlines() if not line.lstrip().startswith("#")))
    return out


class Background:
    """A documented server command, started with a free port instead of its fixed one."""

    def __init__(self, command: str, cwd: Path, env: dict[str, str]):
        self.port_file = cwd / f"port-{time.monotonic_ns()}.txt"
        fixed = re.search(r"--port (\d+)", command)
        self.fixed = fixed.group(1) if fixed else None
        command = re.sub(r"--port \d+", "--port 0", command)
        if command.startswith("judgeblender serve"):
            command += f" --port-file {self.port_file}"
        self.proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=cwd, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        if command.startswith("judgeblender serve"):
            deadline = time.monotonic() + 120
            while not (self.port_file.exists() and self.port_file.read_text().strip()):
                assert self.proc.poll() is None, self.proc.stderr.read()
                assert time.monotonic() < deadline, "serve did not start"
                time.sleep(0.1)
            self.port = self.port_file.read_text().strip()
        else:  # the proxy's first line: "proxy for UPSTREAM at URL (store STORE)"
            line = self.proc.stdout.readline()
            assert " at http://" in line, (line, self.proc.stderr.read())
            self.port = line.split(" at ")[1].split()[0].split(":")[2].split("/")[0]

    def moved(self, text: str) -> str:
        """`text` with the documented fixed port replaced by the one listened on."""
        return text.replace(f"127.0.0.1:{self.fixed}", f"127.0.0.1:{self.port}") if self.fixed else text

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return code


def answer_from_dl19():
    human = read_qrels(SLICE / "qrels.txt")
    queries, passages = read_queries(SLICE / "queries.tsv"), read_corpus(SLICE / "passages.jsonl")
    by_text = {(queries[q], passages[d]): label for q, docs in human.items() for d, label in docs.items()}

    def answer(body):
        text = body["messages"][-1]["content"]
        for (query, passage), label in by_text.items():
            if query in text and passage in text:
                return f"##final score: {label}"
        return "##final score: 0"

    return answer


def test_the_page_starts_with_an_offline_judge_that_answers(tmp_path):
    """The first example needs no model server, key or download (a scripted judge), and comes
    before any `openai:MODEL`: every example of the page used to need both."""
    text = DOC.read_text(encoding="utf-8")
    offline = blocks("sh|bash")[0]
    assert "scripted:" in offline and "openai:" not in offline
    assert text.index(offline.splitlines()[0]) < text.index("openai:") and "llamacpp:default" in text[:text.index("openai:")]
    write, start, curl = [line for line in offline.splitlines() if line.strip()]
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
           "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    subprocess.run(["bash", "-c", write], cwd=tmp_path, env=env, check=True, timeout=60)
    server = Background(start, tmp_path, env)
    try:
        asked = subprocess.run(["bash", "-c", server.moved(curl)], cwd=tmp_path, capture_output=True, text=True,
                               env=env, timeout=120)
        results = json.loads(asked.stdout)["results"]
        assert [(r["qid"], r["label"], r["valid"]) for r in results] == [("q1", 2, True)], asked
    finally:
        assert server.stop() == 0


def test_every_example_of_docs_serve_md_runs(tmp_path):
    shell, python = blocks("sh|bash"), blocks("python")
    serve_lines = [line for block in shell for line in block.splitlines() if line.strip()]
    assert any(line.startswith("judgeblender serve -j") for line in serve_lines)
    assert any(line.startswith("judgeblender proxy") for line in serve_lines) and len(python) == 1
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
           "OPENAI_API_KEY": "sk-test-docs", "PYTHONPATH": str(ROOT / "src") + os.pathsep +
           os.environ.get("PYTHONPATH", "")}
    for name, source in (("Q.tsv", "queries.tsv"), ("P.jsonl", "passages.jsonl")):
        (tmp_path / name).write_bytes((SLICE / source).read_bytes())
    human = read_qrels(SLICE / "qrels.txt")
    pairs = [(q, d) for q, docs in sorted(human.items())[:2] for d in sorted(docs)[:3]]
    (tmp_path / "pairs.tsv").write_text("".join(f"{q}\t{d}\n" for q, d in pairs))
    (tmp_path / "tokens.txt").write_text("docs-token-0123456789abcdef\n")
    (tmp_path / "tokens.txt").chmod(0o600)
    (tmp_path / "panel.toml").write_text('name = "two"\n\n[aggregator]\nmethod = "mv"\ntie = "max"\n\n'
                                         '[[judges]]\nmodel = "openai:test-model"\nprompt = "umbrela"\n\n'
                                         '[[judges]]\nmodel = "openai:test-model"\nprompt = "thomas"\n')
    queries, passages = read_queries(SLICE / "queries.tsv"), read_corpus(SLICE / "passages.jsonl")

    with OpenAITestServer(answer_from_dl19(), max_requests=10**6) as upstream:
        def substituted(line: str) -> str:
            line = re.sub(r"\bopenai:(MODEL|my-model)\b", "openai:test-model", line)
            return re.sub(r"(--base-url )URL\b", rf"\g<1>{upstream.base_url}", line)

        # the serve block: both commands start and answer; the curl line asks the first one
        served = next(b for b in shell if b.lstrip().startswith("judgeblender serve -j openai:"))
        first, second, curl = [substituted(line) for line in served.splitlines() if line.strip()]
        one = Background(first, tmp_path, env)
        two = Background(second, tmp_path, env)
        try:
            asked = subprocess.run(["bash", "-c", one.moved(curl)], cwd=tmp_path, capture_output=True, text=True,
                                   env={**env, "TOKEN": "docs-token-0123456789abcdef"}, timeout=120)
            answer = json.loads(asked.stdout)
            assert asked.returncode == 0 and [r["qid"] for r in answer["results"]] == ["47923"], asked
            assert answer["results"][0]["label"] in (0, 1, 2, 3)
            # the panel behind a token: the same request with the token is judged, without it refused
            with_token = subprocess.run(["bash", "-c", curl.replace("127.0.0.1:8000", f"127.0.0.1:{two.port}")],
                                        cwd=tmp_path, capture_output=True, text=True,
                                        env={**env, "TOKEN": "docs-token-0123456789abcdef"}, timeout=120)
            assert json.loads(with_token.stdout)["results"][0]["label"] in (0, 1, 2, 3), with_token
            without = subprocess.run(["bash", "-c", curl.replace("127.0.0.1:8000", f"127.0.0.1:{two.port}")],
                                     cwd=tmp_path, capture_output=True, text=True, env={**env, "TOKEN": "wrong"},
                                     timeout=120)
            assert "error" in json.loads(without.stdout)

            # the client block, against the first server
            df = pd.DataFrame([(q, d, queries[q], passages[d]) for q, d in pairs],
                              columns=["qid", "docid", "query", "passage"])
            gold = {q: {d: human[q][d] for _, d in (p for p in pairs if p[0] == q)} for q, _ in pairs}
            namespace = {"df": df, "gold": gold}
            exec(compile(one.moved(python[0]), str(DOC), "exec"), namespace)
            run = namespace["run"]
            assert len(run.labels) == len(pairs) and run.labels.label.notna().all()
        finally:
            assert one.stop() == 0 and two.stop() == 0

        # the proxy block: the proxy starts, judge and the openai SDK are answered through it
        lines = [line for line in next(b for b in shell if b.lstrip().startswith("judgeblender proxy")).splitlines()
                 if line.strip()]
        proxy = Background(substituted(lines[0]).replace("http://127.0.0.1:8000/v1", upstream.base_url), tmp_path,
                           env)
        try:
            judge = proxy.moved(substituted(lines[1])).replace(
                " ...", " -q Q.tsv -c P.jsonl -p pairs.tsv -o via-proxy.qrels --store via-proxy.sqlite")
            done = subprocess.run(["bash", "-c", judge], cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=300)
            assert done.returncode == 0, done.stderr
            assert sum(len(v) for v in read_qrels(tmp_path / "via-proxy.qrels").values()) == len(pairs)
            listed = subprocess.run(["bash", "-c", proxy.moved(lines[2])], cwd=tmp_path, env=env,
                                    capture_output=True, text=True, timeout=120)
            assert listed.returncode == 0 and "test-model" in listed.stdout, listed.stderr
        finally:
            assert proxy.stop() == 0
