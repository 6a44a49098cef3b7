"""`judgeblender judge` writes the bytes it wrote before its glue was made faster (issue 30, part 8).

bench/cli_identity.py ran the CLI of the code before the change on tests/data/cli_identity (one
judge, a streamed panel, a panel with a tie-breaker; injection flags, an invalid answer, a
retry, a skipped pair) and froze its outputs in expected.json: the qrels, the details (digest),
the --json summary and every row of the store (digests), timing fields aside. The same runs
with the code under test must give the same.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import judgeblender

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("cli_identity", ROOT / "bench" / "cli_identity.py")
identity = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(identity)


def test_judge_writes_the_qrels_details_summary_and_store_it_wrote_before(tmp_path):
    src = Path(judgeblender.__file__).resolve().parents[1]  # the code under test, in the subprocesses too
    found = identity.frozen(identity.outputs(src, identity.INPUTS, tmp_path))
    expected = json.loads(identity.EXPECTED.read_text(encoding="utf-8"))
    for run in expected:
        for part in expected[run]:
            assert found[run][part] == expected[run][part], f"{run}: {part}"
    assert found == expected
    assert all(found[run]["summary"]["injection_flagged"] == 59 for run in found)  # the flags were compared too
