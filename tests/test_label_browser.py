"""`judgeblender label`: the labeling page, driven by key presses in a real headless Chromium.

The server runs as its own process, as a user would start it, so that killing it is a real
crash. Needs Debian's chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver)
and the selenium package; nothing is downloaded.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from judgeblender.errors import InputError
from judgeblender.label.journal import Journal

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SRC = Path(__file__).resolve().parents[1] / "src"

QUERIES = {"q1": "what do goldfish eat", "q2": "how tall is the eiffel tower"}
MARKUP = '<img src="x" onerror="document.title=\'hacked\'"><b>bold</b> & "quoted"'
PASSAGES = {
    "d1": "Goldfish eat flakes, pellets and fresh vegetables such as peas.",
    "d2": "The goldfish is a freshwater fish in the family Cyprinidae.",
    "d3": "The Eiffel Tower is 330 metres tall. " + MARKUP,
    "d4": "Paris is the capital of France.",
}
PAIRS = [("q1", "d1"), ("q1", "d2"), ("q2", "d3"), ("q2", "d4")]

# The real command, registered on a Typer app as the CLI does; a process of its own.
SERVER_MAIN = (
    "import sys, typer\n"
    "from judgeblender.cli import label\n"
    "app = typer.Typer()\n"
    "app.callback()(lambda: None)\n"
    "label.register(app)\n"
    "app(sys.argv[1:])\n"
)


@pytest.fixture
def inputs(tmp_path):
    (tmp_path / "queries.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()))
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"docid": d, "text": t}) + "\n" for d, t in PASSAGES.items()))
    (tmp_path / "pairs.tsv").write_text("".join(f"{q}\t{d}\n" for q, d in PAIRS))
    return tmp_path


class Server:
    """`judgeblender label` in a subprocess on a free port; the URL comes from its first line."""

    def __init__(self, d: Path, *extra: str):
        args = ["--queries", d / "queries.tsv", "--corpus", d / "corpus.jsonl", "--pairs", d / "pairs.tsv",
                "--out", d / "human.qrels", "--port", "0", "--no-open", *extra]
        env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER_MAIN, "label", *map(str, args)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else ""
        if "http://" not in line:
            self.proc.kill()
            raise AssertionError(f"server did not start: {line!r} {self.proc.stderr.read()}")
        self.url = line[line.index("http://"):].strip()
        self.port = int(self.url.rstrip("/").rsplit(":", 1)[1])

    def crash(self) -> None:
        self.proc.kill()  # SIGKILL: no shutdown code runs, as in a power cut or a killed terminal
        self.proc.wait(timeout=10)

    def request(self, method: str, path: str, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        data = json.dumps(body) if isinstance(body, dict) else body
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")


@pytest.fixture
def servers():
    started: list[Server] = []
    yield lambda d, *extra: started.append(Server(d, *extra)) or started[-1]
    for s in started:
        if s.proc.poll() is None:
            s.crash()


@pytest.fixture
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="needs the selenium package ([dev] extra)")
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.skip("needs Debian's chromium and chromium-driver: apt-get install -y chromium chromium-driver")
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="jb-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                "--window-size=1280,820"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def text(driver, element_id: str) -> str:
    return driver.find_element("id", element_id).text


def wait_for(driver, element_id: str, wanted: str, timeout: float = 10) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout).until(lambda d: wanted in d.find_element("id", element_id).text,
                                         f"#{element_id} never showed {wanted!r}")


def press(driver, *keys: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    for key in keys:
        ActionChains(driver).send_keys(key).perform()


def qrels_lines(d: Path) -> list[str]:
    return (d / "human.qrels").read_text().splitlines()


# --- in the browser -----------------------------------------------------------------------------

def test_keys_label_go_back_skip_and_survive_a_crash(inputs, servers, browser, tmp_path):
    from selenium.webdriver.common.keys import Keys

    server = servers(inputs)
    browser.get(server.url)
    wait_for(browser, "position", "pair 1 of 4")
    assert text(browser, "query") == QUERIES["q1"] and text(browser, "passage") == PASSAGES["d1"]
    assert "0 of 4 labelled" in text(browser, "progress-text")
    assert "Perfectly relevant" in text(browser, "item") and "Guidelines" in browser.page_source

    press(browser, "2")
    wait_for(browser, "position", "pair 2 of 4")
    assert qrels_lines(inputs) == ["q1 0 d1 2"]  # saved the moment the key was pressed
    press(browser, "0")
    wait_for(browser, "position", "pair 3 of 4")
    press(browser, Keys.ARROW_LEFT)  # back: pair 2 shows its label
    wait_for(browser, "position", "pair 2 of 4")
    assert browser.find_element("css selector", "button.current").get_attribute("data-label") == "0"
    press(browser, "1")  # relabel pair 2
    wait_for(browser, "position", "pair 3 of 4")

    # Passage text is shown as text: the markup inside it neither renders nor runs.
    assert text(browser, "passage").endswith(MARKUP)
    assert browser.find_elements("css selector", "#passage img, #passage b") == []
    assert browser.title == "judgeblender: relevance labeling"

    press(browser, "s")  # skip pair 3
    wait_for(browser, "position", "pair 4 of 4")
    wait_for(browser, "progress-text", "2 of 4 labelled, 1 skipped")
    assert qrels_lines(inputs) == ["q1 0 d1 2", "q1 0 d2 1"]
    browser.save_screenshot(str(tmp_path / "label-page.png"))
    assert (tmp_path / "label-page.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    server.crash()
    assert qrels_lines(inputs) == ["q1 0 d1 2", "q1 0 d2 1"]  # nothing confirmed was lost
    restarted = servers(inputs)
    browser.get(restarted.url)
    # resumes at the first pair neither labelled nor skipped
    wait_for(browser, "position", "pair 4 of 4")
    wait_for(browser, "progress-text", "2 of 4 labelled, 1 skipped")
    press(browser, "3")
    wait_for(browser, "done-text", "3 of 4 pairs labelled, 1 skipped")
    browser.find_element("id", "first-open").click()  # back to the skipped pair
    wait_for(browser, "position", "pair 3 of 4 (skipped before)")
    press(browser, "2")
    wait_for(browser, "done-text", "4 of 4 pairs labelled, 0 skipped")
    assert qrels_lines(inputs) == ["q1 0 d1 2", "q1 0 d2 1", "q2 0 d3 2", "q2 0 d4 3"]
    journal = [json.loads(line) for line in (inputs / "human.qrels.journal.jsonl").read_text().splitlines()]
    assert [(e["docid"], e["label"]) for e in journal] == [("d1", 2), ("d2", 0), ("d2", 1), ("d3", None),
                                                           ("d4", 3), ("d3", 2)]


# --- the server's contract, over plain HTTP --------------------------------------------------

def test_the_server_accepts_only_well_formed_labels_for_the_pair_on_screen(inputs, servers):
    server = servers(inputs)
    assert server.request("POST", "/api/label", {"i": 0, "qid": "q1", "docid": "d1", "label": 4})[0] == 400
    assert server.request("POST", "/api/label", {"i": 0, "qid": "q1", "docid": "d1", "label": True})[0] == 400
    assert server.request("POST", "/api/label", {"i": 9, "qid": "q1", "docid": "d1", "label": 1})[0] == 400
    status, body = server.request("POST", "/api/label", {"i": 0, "qid": "q1", "docid": "d2", "label": 1})
    assert status == 409 and "reload the page" in body["error"]  # a stale page cannot label the wrong pair
    status, _ = server.request("POST", "/api/label", "i=0&label=1", {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 415  # a cross-site form post cannot write labels
    assert server.request("GET", "/api/state", headers={"Host": f"evil.example:{server.port}"})[0] == 421
    assert not (inputs / "human.qrels").read_text()
    status, body = server.request("POST", "/api/label", {"i": 0, "qid": "q1", "docid": "d1", "label": 3})
    assert status == 200 and body["labelled"] == 1 and body["next"] == 1
    assert qrels_lines(inputs) == ["q1 0 d1 3"]


def test_an_existing_qrels_without_its_journal_is_not_overwritten(inputs):
    import typer
    from typer.testing import CliRunner

    from judgeblender.cli import label
    from judgeblender.errors import JudgeblenderError

    app = typer.Typer()
    app.callback()(lambda: None)
    label.register(app)
    (inputs / "human.qrels").write_text("q1 0 d1 3\n")
    res = CliRunner().invoke(app, ["label", "-q", str(inputs / "queries.tsv"), "-c", str(inputs / "corpus.jsonl"),
                                   "-p", str(inputs / "pairs.tsv"), "-o", str(inputs / "human.qrels"), "--no-open"])
    assert isinstance(res.exception, JudgeblenderError) and "refusing to overwrite" in str(res.exception)
    assert qrels_lines(inputs) == ["q1 0 d1 3"]


def test_a_torn_last_journal_line_is_cut_and_a_bad_one_is_an_error(tmp_path):
    path = tmp_path / "j.jsonl"
    path.write_text('{"qid": "q1", "docid": "d1", "label": 2}\n{"qid": "q1", "docid": "d2", "la')
    journal = Journal(path)
    assert [(e.docid, e.label) for e in journal.entries] == [("d1", 2)]
    assert journal.torn_line.startswith('{"qid": "q1", "docid": "d2"')
    journal.append("q1", "d2", 0)
    journal.close()
    assert [json.loads(line)["docid"] for line in path.read_text().splitlines()] == ["d1", "d2"]

    path.write_text('{"qid": "q1", "docid": "d1", "label": 2}\n{"qid": "q1", "docid": "d2", "label": 5}\n')
    with pytest.raises(InputError, match=r"j\.jsonl:2: expected a label 0-3"):
        Journal(path)


# --- labels are integers of the scale; a failed write is never a saved label -------------------

def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """`python -m judgeblender ...` to its end: the real command's exit code and error line."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=timeout)


def label_args(d: Path, out: Path, *extra) -> list:
    return ["label", "-q", d / "queries.tsv", "-c", d / "corpus.jsonl", "-p", d / "pairs.tsv", "-o", out,
            "--port", "0", "--no-open", *extra]


@pytest.mark.parametrize("raw", ["2.5", "2.0", "1e0", '"2"', "true", "-1", "4", "NaN", "Infinity", "[2]", "{}"])
def test_a_label_that_is_not_an_integer_of_the_scale_is_refused_and_never_stored(inputs, servers, raw):
    server = servers(inputs)
    body = '{"i": 0, "qid": "q1", "docid": "d1", "label": %s}' % raw
    status, answer = server.request("POST", "/api/label", body)
    assert status == 400
    assert "label must be one of 0, 1, 2, 3" in answer["error"] and raw in answer["error"]
    assert server.request("GET", "/api/state")[1]["labelled"] == 0
    assert (inputs / "human.qrels").read_text() == ""
    assert (inputs / "human.qrels.journal.jsonl").read_text() == ""


def test_a_pair_index_that_is_not_an_integer_is_refused(inputs, servers):
    server = servers(inputs)
    for raw in ("0.0", "true", '"0"'):
        status, answer = server.request("POST", "/api/label", '{"i": %s, "qid": "q1", "docid": "d1", "label": 1}' % raw)
        assert status == 400 and "i must be an integer" in answer["error"]
    assert (inputs / "human.qrels").read_text() == ""


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs, to fill for real (root writes through file permissions, not through a full disk)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root to mount a tmpfs")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(disk: Path) -> Path:
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as fh:
        with pytest.raises(OSError, match="No space left"):
            while True:
                fh.write(b"x" * 1024)
    return filler


def test_a_label_the_full_disk_refused_is_reported_unsaved_and_never_replayed_as_saved(inputs, servers, small_disk):
    journal = small_disk / "labels.journal.jsonl"
    server = servers(inputs, "--journal", journal)
    filler = fill(small_disk)

    status, answer = server.request("POST", "/api/label", {"i": 0, "qid": "q1", "docid": "d1", "label": 3})
    assert status == 507
    assert "NOT saved" in answer["error"] and "No space left on device" in answer["error"]
    assert server.request("GET", "/api/state")[1]["labelled"] == 0
    assert journal.read_bytes() == b""

    filler.unlink()  # space again: the next label is saved, and only it
    status, answer = server.request("POST", "/api/label", {"i": 1, "qid": "q1", "docid": "d2", "label": 1})
    assert status == 200 and answer["labelled"] == 1
    server.crash()
    assert [json.loads(line)["docid"] for line in journal.read_text().splitlines()] == ["d2"]
    assert qrels_lines(inputs) == ["q1 0 d2 1"]
    restarted = servers(inputs, "--journal", journal)
    assert restarted.request("GET", "/api/state")[1] == {"total": 4, "labelled": 1, "skipped": 0, "resume": 0,
                                                         "out": str(inputs / "human.qrels")}


def test_a_qrels_export_the_full_disk_refused_is_reported_and_repaired_on_the_next_save(inputs, servers, small_disk):
    out = small_disk / "human.qrels"
    server = servers(inputs, "--journal", inputs / "labels.journal.jsonl", "--out", out)
    filler = fill(small_disk)
    status, answer = server.request("POST", "/api/label", {"i": 0, "qid": "q1", "docid": "d1", "label": 2})
    assert status == 200 and answer["labelled"] == 1  # saved: the journal is the record
    assert f"{out} could not be rewritten" in answer["warning"] and "No space left on device" in answer["warning"]
    assert out.read_text() == ""
    filler.unlink()
    status, answer = server.request("POST", "/api/label", {"i": 1, "qid": "q1", "docid": "d2", "label": 0})
    assert status == 200 and "warning" not in answer
    assert out.read_text() == "q1 0 d1 2\nq1 0 d2 0\n"


# --- one server per output and journal ----------------------------------------------------------

def test_a_second_server_on_the_same_output_is_refused_and_no_confirmed_label_is_lost(inputs, servers):
    first = servers(inputs)
    assert first.request("POST", "/api/label", {"i": 0, "qid": "q1", "docid": "d1", "label": 3})[0] == 200
    for extra in ([], ["--journal", inputs / "other.journal.jsonl"]):
        second = run_cli(*label_args(inputs, inputs / "human.qrels", *extra))
        assert second.returncode == 2, second.stderr
        assert second.stderr.startswith("error: ") and "another labeling server" in second.stderr
        assert "http://" not in second.stdout
    assert first.request("POST", "/api/label", {"i": 1, "qid": "q1", "docid": "d2", "label": 1})[0] == 200
    assert qrels_lines(inputs) == ["q1 0 d1 3", "q1 0 d2 1"]
    first.crash()
    assert servers(inputs).request("GET", "/api/state")[1]["labelled"] == 2  # the lock died with its server


def test_a_second_server_on_the_same_journal_is_refused(inputs, servers):
    servers(inputs)
    second = run_cli(*label_args(inputs, inputs / "other.qrels", "--journal", inputs / "human.qrels.journal.jsonl"))
    assert second.returncode == 2 and "another labeling server" in second.stderr
    assert not (inputs / "other.qrels").exists()


@pytest.mark.parametrize("journal", ["human.qrels", "./human.qrels", "link.qrels"])
def test_the_journal_and_the_output_cannot_be_one_file(inputs, journal):
    (inputs / "link.qrels").symlink_to(inputs / "human.qrels")
    done = run_cli(*label_args(inputs, inputs / "human.qrels", "--journal", f"{inputs}/{journal}"))
    assert done.returncode == 2
    # the check every command shares (cli/checks.py): the files a command writes are distinct files
    assert done.stderr.startswith("error: ") and "is the same file as --out" in done.stderr
    assert not (inputs / "human.qrels").exists() and "http://" not in done.stdout


def test_the_output_cannot_be_an_input_file(inputs):
    before = (inputs / "pairs.tsv").read_bytes()
    done = run_cli(*label_args(inputs, inputs / "pairs.tsv", "--journal", inputs / "j.jsonl"))
    # refused by the up-front checks every command shares (cli/checks.py), before the page starts
    assert done.returncode == 2 and "expected an output file that is not also an input" in done.stderr
    assert (inputs / "pairs.tsv").read_bytes() == before
