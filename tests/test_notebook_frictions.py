"""The researcher's notebook (issue 39): tables that cannot be misread, one vocabulary, quiet loops,
families said to be guessed.

On the DL19 slice (tests/data/dl19_slice: 15 queries, 3 official runs cut to their top 10, NIST's
labels with 30% hidden as the holes, the published LLM labels), each friction the issue's user met
is asked again in the shape they met it, and the answer must leave no room to misread it.
"""

from __future__ import annotations

import logging
import random
import shutil
from pathlib import Path

import pandas as pd
import pytest

import judgeblender as jb
from judgeblender.pairs import read_qrels

ROOT = Path(__file__).resolve().parents[1]
SLICE = ROOT / "tests" / "data" / "dl19_slice"
RUN_FILES = sorted((SLICE / "runs").glob("*.run"))


def write_qrels(path: Path, rows) -> None:
    path.write_text("".join(f"{q} 0 {d} {label}\n" for q, d, label in rows))


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    """The slice's files, the human labels with 30% hidden, and a seed of 6 queries labelled by NIST."""
    for name in ("queries.tsv", "j1.qrels"):
        shutil.copy(SLICE / name, tmp_path / name)
    nist = read_qrels(SLICE / "qrels.txt")
    rng = random.Random(7)
    write_qrels(tmp_path / "human.qrels", [(q, d, lab) for q, docs in nist.items() for d, lab in docs.items()
                                           if rng.random() >= 0.3])
    write_qrels(tmp_path / "nist.qrels", [(q, d, lab) for q, docs in nist.items() for d, lab in docs.items()])
    monkeypatch.chdir(tmp_path)
    seed = jb.sample_seed(RUN_FILES, topics(tmp_path), queries=6, random_seed=2, out="seed.tsv")
    write_qrels(tmp_path / "seed.qrels", [(q, d, nist[q][d]) for q, d in zip(seed["qid"], seed["docno"])
                                          if d in nist.get(q, {})])
    return tmp_path


def topics(folder: Path) -> pd.DataFrame:
    return pd.read_csv(folder / "queries.tsv", sep="\t", names=["qid", "query"], dtype=str)


# -- part 4: quiet by default in loops ----------------------------------------------------------

def test_a_note_is_shown_once_per_process_and_every_call_still_returns_it(work, caplog):
    """The issue's 25-seed loop printed the same two notes 25 times: the second call's notes are
    in its attrs, not on the log again (a repeat goes to DEBUG)."""
    with caplog.at_level(logging.WARNING, logger="judgeblender"):
        tables = [jb.estimate(RUN_FILES, llm_labels="j1.qrels", seed="seed.qrels") for _ in range(3)]
    notes = tables[0].attrs["notes"]
    assert any("only 6 seed queries" in n for n in notes)
    assert all(t.attrs["notes"] == notes for t in tables)
    shown = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "note:" in r.getMessage()]
    assert len(shown) == len(notes) and len(set(shown)) == len(shown), shown


def test_notes_are_silenced_by_the_documented_line(work, caplog):
    logger = logging.getLogger("judgeblender")
    before = logger.level
    logger.setLevel(logging.ERROR)  # docs/api.md's line
    try:
        with caplog.at_level(logging.WARNING):
            jb.estimate(RUN_FILES, llm_labels="j1.qrels", seed="seed.qrels")
    finally:
        logger.setLevel(before)
    assert not [r for r in caplog.records if r.name.startswith("judgeblender")]
    assert "logging.getLogger(\"judgeblender\").setLevel(logging.ERROR)" in (ROOT / "docs" / "api.md").read_text()
