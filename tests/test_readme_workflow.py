"""The README's workflow section runs, line by line, on a slice of TREC DL 2019.

The lines are read from README.md at test time (every ```bash block of "## The workflow"),
so a README line that stops working fails the suite. The placeholders are files made here
from tests/data/dl19_slice (15 queries, 3 official runs cut to their top 10, their passages
and human labels, 3 published LLM label files): Q.tsv, P.jsonl, runs/, judged.qrels,
j1/j2/j3.qrels, and shard-*.sqlite (copies of the store the lines before wrote). Every line
runs verbatim in a real subprocess except for these substitutions, and only these:

- `judgeblender label ...` runs as written plus `--port 0 --no-open`, and a headless Chromium
  (the driver of tests/test_label_browser.py) presses each pair's DL19 label on the page;
- `--ray auto` becomes `--ray local`;
- MODEL and URL (after `--base-url` or `--upstream`) become the model and address of a local OpenAI-compatible test server
  (tests/openai_server.py) that answers every prompt with the pair's DL19 label (Yes/No for a
  yes/no step).
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from openai_server import OpenAITestServer

from judgeblender.pairs import read_corpus, read_pairs, read_qrels

ROOT = Path(__file__).resolve().parents[1]
SLICE = ROOT / "tests" / "data" / "dl19_slice"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.timeout(1200)]


def workflow_lines(readme: str) -> list[str]:
    """The commands of the workflow section: bash blocks only, continuations joined, comments cut."""
    section = readme[readme.index("## The workflow"):]
    section = section[:section.index("\n## ", 1)]
    lines: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def substitute(line: str, model: str, url: str) -> str:
    """The only changes a README line gets (see the module docstring)."""
    line = line.replace("--ray auto", "--ray local")
    line = re.sub(r"\bopenai:MODEL\b", f"openai:{model}", line)
    return re.sub(r"(--base-url |--upstream )URL\b", rf"\g<1>{url}", line)


def make_inputs(d: Path) -> None:
    shutil.copy(SLICE / "queries.tsv", d / "Q.tsv")
    shutil.copy(SLICE / "passages.jsonl", d / "P.jsonl")
    shutil.copytree(SLICE / "runs", d / "runs")
    for name in ("judged.qrels", "j1.qrels", "j2.qrels", "j3.qrels"):
        shutil.copy(SLICE / name, d / name)


def answer_from_dl19():
    """The test server's answer to a prompt: the DL19 label of the pair in it."""
    human = read_qrels(SLICE / "qrels.txt")
    by_text = {}
    passages = read_corpus(SLICE / "passages.jsonl")
    queries = dict(line.split("\t", 1) for line in (SLICE / "queries.tsv").read_text().splitlines())
    for q, docs in human.items():
        for d, label in docs.items():
            by_text[(queries[q], passages[d])] = label

    def answer(body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        label = next((lab for (q, p), lab in by_text.items() if p in prompt and q in prompt), 0)
        if '"Yes" or "No"' in prompt:
            return "Yes" if label >= 1 else "No"
        if "Grade:" in prompt:
            return f"Grade: {max(label, 1)}"
        return str(label)

    return answer


class Labeler:
    """`judgeblender label` as the README writes it, with the page driven by key presses."""

    def __init__(self):
        webdriver = pytest.importorskip("selenium.webdriver", reason="needs the selenium package ([dev] extra)")
        if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
            pytest.skip("needs Debian's chromium and chromium-driver (make browser)")
        from selenium.webdriver.chrome.service import Service

        self.profile = tempfile.mkdtemp(prefix="jb-readme-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={self.profile}"):
            options.add_argument(arg)
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        self.human = read_qrels(SLICE / "qrels.txt")

    def label(self, line: str, cwd: Path, env: dict) -> None:
        args = line.split()
        pairs_file = cwd / args[args.index("-p") + 1]
        proc = subprocess.Popen(["bash", "-c", f"exec {line} --port 0 --no-open"], cwd=cwd, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            first = proc.stdout.readline() if ready else ""
            assert "http://" in first, f"label did not start: {first!r} {proc.stderr.read() if not ready else ''}"
            self.driver.get(first[first.index("http://"):].strip())
            pairs = read_pairs(pairs_file)
            from selenium.webdriver.common.action_chains import ActionChains
            from selenium.webdriver.support.ui import WebDriverWait

            for n, pair in enumerate(pairs, start=1):
                WebDriverWait(self.driver, 20).until(
                    lambda d: f"pair {n} of {len(pairs)}" in d.find_element("id", "position").text)
                ActionChains(self.driver).send_keys(str(self.human[pair.qid][pair.docid])).perform()
            WebDriverWait(self.driver, 20).until(
                lambda d: f"{len(pairs)} of {len(pairs)} pairs labelled" in d.find_element("id", "done-text").text)
        finally:
            proc.send_signal(signal.SIGINT)  # Ctrl+C, as the page's user stops it
            proc.wait(timeout=30)
        assert proc.returncode == 0, proc.stderr.read()

    def close(self) -> None:
        self.driver.quit()
        shutil.rmtree(self.profile, ignore_errors=True)


def test_the_workflow_lines_parse_into_commands():
    lines = workflow_lines((ROOT / "README.md").read_text(encoding="utf-8"))
    assert all(line.startswith("judgeblender ") for line in lines), lines
    assert any(" label " in line for line in lines) and any("--ray auto" in line for line in lines)
    assert any("calibrate" in line and "--labels" in line for line in lines)
    assert any(line.startswith("judgeblender blend") and "--pairs" in line for line in lines)
    assert any(line.startswith("judgeblender serve") for line in lines)
    assert any(line.startswith("judgeblender proxy") for line in lines)


def test_every_line_of_the_readme_workflow_runs_on_a_dl19_slice(tmp_path):
    lines = workflow_lines((ROOT / "README.md").read_text(encoding="utf-8"))
    make_inputs(tmp_path)
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "COLUMNS": "200",
           "OPENAI_API_KEY": "sk-test-readme", "PYTHONPATH": str(ROOT / "src") + os.pathsep +
           os.environ.get("PYTHONPATH", "")}
    env.pop("RAY_ADDRESS", None)
    labeler = None
    with OpenAITestServer(answers=answer_from_dl19(), max_requests=10**6, max_lifetime_s=1100) as srv:
        try:
            for line in lines:
                command = line.split()[1]
                if command == "label":
                    labeler = labeler or Labeler()
                    labeler.label(line, tmp_path, env)
                    continue
                if "shard-*.sqlite" in line:  # per-shard stores: copies of the store the lines above wrote
                    for n in (1, 2):
                        shutil.copy(tmp_path / "judgments.sqlite", tmp_path / f"shard-{n}.sqlite")
                run = substitute(line, "test-model", srv.base_url)
                r = subprocess.run(["bash", "-c", run], cwd=tmp_path, env=env, capture_output=True, text=True,
                                   timeout=600)
                assert r.returncode == 0, f"README line failed (exit {r.returncode}): {line}\n{r.stdout}\n{r.stderr}"
        finally:
            if labeler is not None:
                labeler.close()
    assert len(read_qrels(tmp_path / "human.qrels")) >= 4 and (tmp_path / "report.html").exists()
    assert json.loads((tmp_path / "est.design.json").read_text())
    # the service lines: judge through the proxy wrote its labels, and the proxy's store kept the calls
    assert read_qrels(tmp_path / "via-proxy.qrels")
    import sqlite3

    with sqlite3.connect(tmp_path / "cache.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM calls").fetchone()[0] > 0
