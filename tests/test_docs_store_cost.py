"""docs/benchmarks.md's issue 40 table is bench/store_cost.py's rendering of the results file it
names, so the figures on the page are the ones the run recorded."""

from __future__ import annotations

import json
from pathlib import Path

from bench_scripts import bench_script, generated_block

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
RESULTS = ROOT / "bench" / "results" / "store_cost.json"
START = "<!-- bench/store_cost.py markdown: generated, checked by tests/test_docs_store_cost.py -->\n"
END = "<!-- end of bench/store_cost.py markdown -->"


def test_the_issue40_table_is_the_benchmarks_output():
    results = json.loads(RESULTS.read_text())
    assert generated_block(DOC, START, END) == bench_script("store_cost").markdown(results).strip()
    # the run compared the same bytes out of both trees, over every run of each
    assert results["cli"]["same_bytes"] == {"qrels": True, "details": True, "export": True}
    assert len(results["cli"]["runs"]) >= 4 and {r["tree"] for r in results["cli"]["runs"]} == {"base", "head"}
