"""`judgeblender report` and `judgeblender compare`: the trust report and the method table.

Three queries, each with documents r (human label 3), h (2), m (1), n (0) and u (0).
Two LLM label files: "llm-good" agrees with people but never labels u; "llm-flip" swaps
r and n (3 <-> 0). Five runs rank four documents per query:

    bm25-a: r h m n    bm25-b: h r n m    bert-1: m n r h    bert_2: n m h r    x: u n m h

so under llm-good run x has 3 of its 4 top documents judged (Judged@10 = 75%): a hole.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from judgeblender.cli import compare as compare_cli
from judgeblender.cli import judge as judge_cli
from judgeblender.cli import report as report_cli
from judgeblender.evaluate import agreement, correlate
from judgeblender.pairs import read_qrels, read_runs_dir
from judgeblender.report.families import derive_families, family_of

QUERIES = ("q1", "q2", "q3")
HUMAN = {"r": 3, "h": 2, "m": 1, "n": 0, "u": 0}
LLM_GOOD = {"r": 3, "h": 2, "m": 1, "n": 0}
LLM_FLIP = {"r": 0, "h": 2, "m": 1, "n": 3, "u": 0}
RUNS = {"bm25-a": "rhmn", "bm25-b": "hrnm", "bert-1": "mnrh", "bert_2": "nmhr", "x": "unmh"}
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def write_qrels(path: Path, labels: dict[str, int]) -> Path:
    path.write_text("".join(f"{q} 0 {q}{d} {lab}\n" for q in QUERIES for d, lab in labels.items()))
    return path


@pytest.fixture
def data(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    for name, order in RUNS.items():
        (runs / f"{name}.run").write_text("".join(
            f"{q} Q0 {q}{d} {k} {10 - k} {name}\n" for q in QUERIES for k, d in enumerate(order, start=1)))
    return {"dir": tmp_path, "runs": runs, "gold": write_qrels(tmp_path / "human.qrels", HUMAN),
            "good": write_qrels(tmp_path / "llm-good.qrels", LLM_GOOD),
            "flip": write_qrels(tmp_path / "llm-flip.qrels", LLM_FLIP)}


def make_app(*modules):
    app = typer.Typer()
    app.callback()(lambda: None)
    for m in modules:
        m.register(app)
    return app


def invoke(app, *args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=True)


class Page(HTMLParser):
    """The parts of the report a reader sees: section ids, table rows, SVGs, outside references."""

    def __init__(self, html: str):
        super().__init__()
        self.sections, self.tables, self.svgs, self.external, self.scripts = [], [], 0, [], 0
        self._cell, self._row = None, None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "h2":
            self.sections.append(attrs.get("id"))
        elif tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "svg":
            self.svgs += 1
        elif tag in ("script", "link", "img", "iframe"):
            self.scripts += 1
        for key in ("src", "href"):
            if re.match(r"(https?:)?//", attrs.get(key) or ""):
                self.external.append(attrs[key])

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._row is not None:
            self._row.append(self._cell.strip())
            self._cell = None
        elif tag == "tr" and self.tables:
            self.tables[-1].append(self._row)
            self._row = None

    def handle_data(self, text):
        if self._cell is not None:
            self._cell += text

    def rows_with(self, first_cell: str) -> list[list[str]]:
        return [r for t in self.tables for r in t if r and r[0] == first_cell]

    def table_headed(self, *columns: str) -> list[list[str]]:
        """The body rows of the first table whose header row holds these columns."""
        return next(t[1:] for t in self.tables if t and set(columns) <= set(t[0]))


@pytest.fixture
def report(data):
    out = data["dir"] / "report.html"
    res = invoke(make_app(report_cli), "report", "--gold", data["gold"], "--pred", data["good"], "--pred", data["flip"],
                 "--runs", data["runs"], "--out", out, "--bootstrap", 200)
    assert res.exit_code == 0, res.output
    return out, res


# --- the report ---------------------------------------------------------------------------------

def test_report_is_one_self_contained_html_file_with_every_section(report):
    out, _ = report
    page = Page(out.read_text())
    assert page.sections == ["agreement", "confusion", "correlation", "leaderboard", "scatter", "methods", "judges"]
    assert page.external == [] and page.scripts == 0  # opens offline: no scripts, images or links to fetch
    assert page.svgs == 2 + 1  # a confusion heatmap per prediction, one grid of scatter plots


def test_agreement_rows_show_each_prediction_against_the_human_labels(report, data):
    page = Page(report[0].read_text())
    gold = read_qrels(data["gold"])
    for name in ("llm-good", "llm-flip"):
        a = agreement(gold, read_qrels(data[name.split("-")[1]]), name)
        row = page.rows_with(name)[0]  # the first table is the agreement table
        assert row[1:4] == [str(a.n), f"{a.coverage:.1%}", f"{a.accuracy:.3f}"]
    assert page.rows_with("llm-good")[0][1:4] == ["12", "80.0%", "1.000"]  # u is never labelled
    # per-level accuracy: llm-flip gets every 3 wrong, every 2 and 1 right, and 3 of 6 zeros
    assert page.rows_with("llm-flip")[1] == ["llm-flip", "50.0%", "100.0%", "100.0%", "0.0%", "60.0%"]


def test_leaderboard_lists_every_run_under_both_labels_with_tau(report, data):
    html = report[0].read_text()
    page = Page(html)
    reports = correlate(read_qrels(data["gold"]), {"llm-flip": read_qrels(data["flip"])},
                        read_runs_dir(data["runs"]), ("nDCG@10",), bootstrap=0)
    flip = reports[0]
    for run, g, p in zip(flip.runs, flip.gold_scores, flip.pred_scores):
        rows = page.rows_with(run)
        assert any(r[2:4] == [f"{g:.3f}", f"{p:.3f}"] for r in rows), run
    assert f"nDCG@10: tau {flip.kendall_tau:.3f}" in html
    x_rows = page.rows_with("x")
    # Judged@10 of run x: every top document labelled by people, 3 of 4 by llm-good
    assert any(r[8:10] == ["100.0%", "75.0%"] for r in x_rows)


def test_families_are_derived_from_run_names_and_the_report_says_so(report):
    html = unescape(report[0].read_text())
    assert "No --groups was given, so each run's family is guessed from its name" in html
    assert family_of("bert-1") == family_of("bert_2") == "bert" and family_of("runid3") == "runid"
    families, folded = derive_families([f"team{k}-run" for k in "abcdefghij"], max_groups=4)
    assert folded == ["teamd", "teame", "teamf", "teamg", "teamh", "teami", "teamj"]
    assert sorted(set(families.values())) == ["other", "teama", "teamb", "teamc"]


def test_a_groups_file_names_the_families(data):
    groups = data["dir"] / "groups.tsv"
    groups.write_text("bm25-a\tlexical\nbm25-b\tlexical\nbert-1\tneural\nbert_2\tneural\nx\tneural\n")
    out = data["dir"] / "r.html"
    res = invoke(make_app(report_cli), "report", "--gold", data["gold"], "--pred", data["flip"], "--runs", data["runs"],
                 "--groups", groups, "--out", out, "--bootstrap", 0)
    assert res.exit_code == 0, res.output
    page = Page(out.read_text())
    assert {r[1] for r in page.table_headed("family", "score diff")} == {"lexical", "neural"}
    assert f"System families from {groups}" in out.read_text()


def test_method_comparison_flags_runs_whose_top_10_has_holes(report):
    html = report[0].read_text()
    assert "1 run(s) have Judged@10 below 90% under llm-good: x." in html
    assert "Every run has Judged@10 of at least 90% under llm-flip." in html


def test_names_from_files_are_escaped(data):
    odd = data["dir"] / "a<b>&c.qrels"
    shutil.copy(data["flip"], odd)
    out = data["dir"] / "r.html"
    res = invoke(make_app(report_cli), "report", "--gold", data["gold"], "--pred", odd, "--runs", data["runs"],
                 "--out", out, "--bootstrap", 0)
    assert res.exit_code == 0, res.output
    html = out.read_text()
    assert "a&lt;b&gt;&amp;c" in html and "a<b>" not in html


def test_without_a_store_the_judges_section_says_what_is_missing(report):
    assert "No call store was given (<code>--store</code>)" in report[0].read_text()


def test_store_adds_invalid_rates_and_cost_per_judge(data, tiny):
    model = data["dir"] / "model.json"
    model.write_text(json.dumps({"name": "tiny-judge", "rules": [
        {"contains": "flakes", "output": "##final score: 3"}, {"contains": "freshwater", "output": "##final score: 1"},
        {"contains": "330 metres", "output": "##final score: 2"}, {"contains": "capital", "output": "no idea"}]}))
    store, llm = data["dir"] / "s.sqlite", data["dir"] / "llm.qrels"
    res = invoke(make_app(judge_cli), "judge", "-q", tiny / "queries.tsv", "-c", tiny / "corpus.jsonl",
                 "-p", tiny / "qrels.txt", "-j", f"scripted:{model}", "-o", llm, "--store", store, "--no-progress")
    assert res.exit_code == 0, res.output
    runs = data["dir"] / "tiny-runs"
    runs.mkdir()
    (runs / "one.run").write_text("q1 Q0 d1 1 2 one\nq1 Q0 d2 2 1 one\nq2 Q0 d3 1 2 one\nq2 Q0 d4 2 1 one\n")
    out = data["dir"] / "r.html"
    res = invoke(make_app(report_cli), "report", "--gold", tiny / "qrels.txt", "--pred", llm, "--runs", runs,
                 "--store", store, "--out", out, "--bootstrap", 0)
    assert res.exit_code == 0, res.output
    page = Page(out.read_text())
    judge_row = next(r for t in page.tables for r in t if r and r[0].startswith("scripted:"))
    # 4 pairs; "no idea" on d4 gives no label even after the retry
    assert judge_row[1:4] == ["4", "1", "25.0%"] and "no label" in judge_row[4]
    model_row = next(r for t in page.tables for r in t if r and r[0].startswith("scripted:tiny-judge"))
    assert model_row[1] == "5"  # 4 calls plus the retry


def test_report_renders_in_headless_chromium(report, tmp_path):
    webdriver = pytest.importorskip("selenium.webdriver", reason="needs the selenium package ([dev] extra)")
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.skip("needs Debian's chromium and chromium-driver: apt-get install -y chromium chromium-driver")
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="jb-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.get(report[0].as_uri())
        assert driver.title == "How far can the LLM labels be trusted?"
        sizes = driver.execute_script(
            "return [...document.querySelectorAll('svg')].map(s => s.getBoundingClientRect().width)")
        assert len(sizes) == 3 and min(sizes) > 200  # the plots are laid out, not collapsed
        assert driver.execute_script("return document.querySelectorAll('circle').length") >= 2 * 5
        driver.save_screenshot(str(tmp_path / "report.png"))
        assert (tmp_path / "report.png").stat().st_size > 10_000
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


# --- compare ------------------------------------------------------------------------------------

def test_compare_prints_each_method_with_its_judged_share(data):
    res = invoke(make_app(compare_cli), "compare", "--qrels", data["good"], "--runs", data["runs"], "--json")
    assert res.exit_code == 0, res.output
    rows = {r["run"]: r for r in map(json.loads, res.stdout.splitlines())}
    assert list(rows)[0] == "bm25-a"  # best nDCG@10 first: r, h, m, n is the ideal order
    assert rows["bm25-a"]["nDCG@10"] == pytest.approx(1.0) and rows["bm25-a"]["Judged@10"] == 1.0
    assert rows["x"]["Judged@10"] == 0.75 and rows["x"]["holes"] is True
    assert set(rows["bm25-a"]) == {"run", "nDCG@10", "Judged@10", "R@10", "holes"}


def test_compare_table_marks_holes(data):
    res = invoke(make_app(compare_cli), "compare", "--qrels", data["good"], "--runs", data["runs"])
    assert res.exit_code == 0, res.output
    assert re.search(r"│ x\s+│.*75\.0% │.*│ ! │", res.stdout)
    assert "1 of 5 methods have Judged@10 below 90%" in res.stdout


def test_min_judged_is_a_share(data):
    from judgeblender.cli.checks import checked

    res = invoke(checked(make_app(compare_cli)), "compare", "--qrels", data["good"], "--runs", data["runs"],
                 "--min-judged", 90)
    assert str(res.exception).startswith("--min-judged: expected a number in [0, 1], got "), res.exception


# --- with a human seed: the leaderboard with PPI++ intervals and the significant orderings --------

@pytest.fixture
def seeded(tmp_path):
    """20 queries of 8 documents with random human labels; the LLM is lenient (a label one level
    higher 30% of the time); a seed of 10 whole queries. Runs: best (by human label), worst
    (reversed), and two shuffles."""
    import numpy as np

    rng = np.random.default_rng(5)
    queries = [f"q{i:02d}" for i in range(20)]
    human = {q: {f"{q}d{k}": int(x) for k, x in enumerate(rng.integers(0, 4, 8))} for q in queries}
    llm = {q: {d: min(3, x + int(rng.random() < 0.3)) for d, x in docs.items()} for q, docs in human.items()}
    orders = {"best": lambda docs: sorted(docs, key=lambda d: (-docs[d], d)),
              "worst": lambda docs: sorted(docs, key=lambda d: (docs[d], d)),
              "shuffle-a": lambda docs: list(rng.permutation(sorted(docs))),
              "shuffle-b": lambda docs: list(rng.permutation(sorted(docs)))}
    runs = tmp_path / "runs"
    runs.mkdir()
    for name, order in orders.items():
        (runs / f"{name}.run").write_text("".join(f"{q} Q0 {d} {k} {20 - k} {name}\n" for q in queries
                                                  for k, d in enumerate(order(human[q]), start=1)))

    def write(path, qrels, keep=queries):
        path.write_text("".join(f"{q} 0 {d} {x}\n" for q in keep for d, x in qrels[q].items()))
        return path

    return {"dir": tmp_path, "runs": runs, "gold": write(tmp_path / "human.qrels", human),
            "llm": write(tmp_path / "lenient.qrels", llm), "seed": write(tmp_path / "seed.qrels", human, queries[:10])}


def seeded_report(s, *more):
    out = s["dir"] / "report.html"
    res = invoke(make_app(report_cli), "report", "--gold", s["gold"], "--pred", s["llm"], "--runs", s["runs"],
                 "--out", out, "--bootstrap", 50, *more)
    return out, res


def test_a_seed_adds_the_leaderboard_with_ppi_intervals_and_the_orderings(seeded):
    from judgeblender.evaluate.estimate import estimate

    out, res = seeded_report(seeded, "--seed-qrels", seeded["seed"], "--confidence", 0.9)
    assert res.exit_code == 0, res.output
    html = out.read_text()
    page = Page(html)
    assert "estimate" in page.sections and page.sections.index("estimate") == page.sections.index("leaderboard") + 1
    rows = {r[0].removesuffix(" *"): r for r in page.table_headed("PPI++ nDCG@10 [90% CI]", "human-only [90% CI]",
                                                                   "LLM-only")}
    assert set(rows) == {"best", "worst", "shuffle-a", "shuffle-b"}
    # the numbers are evaluate/estimate.py's, at the report's --confidence
    expected = estimate(read_qrels(seeded["llm"]), read_qrels(seeded["seed"]), read_runs_dir(seeded["runs"]),
                        ["nDCG@10"], confidence=0.9)
    for r in expected.runs:
        assert rows[r.run][2] == f"{r.estimate:.3f} [{r.ci_low:.2f}, {r.ci_high:.2f}]"
    assert "90% intervals" in html and "10 human seed queries of 20" in html
    ordered = sum(p.significant for p in expected.pairs)
    assert ordered >= 1 and f"<b>{ordered} of 6</b> pairs of runs significantly ordered" in html
    # the orderings are a runs x runs matrix: best's row has an up-triangle in worst's column
    assert re.search(r'<td class="up" title="best - worst: \+[0-9.]+, 90% Bonferroni interval', html)
    assert f"{ordered} of 6 pairs of runs significantly ordered" in res.output


def test_without_a_seed_the_report_is_as_before(seeded):
    out, res = seeded_report(seeded)
    assert res.exit_code == 0, res.output
    html = out.read_text()
    assert "estimate" not in Page(html).sections and "PPI++" not in html and "significantly ordered" not in html
    assert "significantly ordered" not in res.output


def test_a_seed_that_is_not_whole_queries_is_refused_naming_the_file(seeded):
    seed = seeded["seed"]
    seed.write_text("".join(seed.read_text().splitlines(keepends=True)[1:]))  # one pair of a seed query missing
    out, res = seeded_report(seeded, "--seed-qrels", seed)
    assert res.exit_code != 0
    assert "seed.qrels" in str(res.exception) + res.output and "whole queries" in str(res.exception) + res.output


def test_design_needs_a_seed(seeded):
    """The library names seed_qrels=; the command, whose checks wrap it (cli/checks.py), its flag."""
    from judgeblender.cli.checks import checked

    res = invoke(checked(make_app(report_cli)), "report", "--gold", seeded["gold"], "--pred", seeded["llm"], "--runs",
                 seeded["runs"], "--out", seeded["dir"] / "report.html", "--design", seeded["gold"])
    assert res.exit_code != 0 and "--seed-qrels" in str(res.exception) + res.output
