"""Writes the files of tests/data/ids_before as judgeblender wrote them before one builder named
every judge (issue 30, part 5; main at 7b08517), for tests/test_one_place.py:

    cd tests/data/ids_before && PYTHONPATH=/path/to/main/src python make_ids_before.py

A prompt file whose template is named otherwise than the file (house.toml holds "house-umbrela")
is where the ids differed: `judge --prompt house.toml` named its judge after the template
(scripted:judge.json/house-umbrela/generate), `judge --panel panel.toml` named the same member
after the file (scripted:judge.json/house.toml/generate). Both runs share one store, dumped as
SQL (no binary in the repository); every path is relative, so the ids hold wherever the folder
is copied.
"""

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.chdir(HERE)


def cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "judgeblender", *args], check=True)


store = Path(tempfile.mkdtemp()) / "store.sqlite"
common = ["-q", "../tiny/queries.tsv", "-c", "../tiny/corpus.jsonl", "-p", "../tiny/qrels.txt", "--store", str(store),
          "--no-progress", "--judge", "scripted:judge.json"]
cli("judge", *common, "--prompt", "house.toml", "-o", "single.qrels")
cli("judge", *common, "--panel", "panel.toml", "-o", "panel.qrels")
db = sqlite3.connect(store)
version = db.execute("PRAGMA user_version").fetchone()[0]
dump = "\n".join(line for line in db.iterdump() if not line.startswith(("BEGIN", "COMMIT")))
Path("store.sql").write_text("-- the store of both runs (tests/data/ids_before/make_ids_before.py)\nBEGIN;\n" + dump
                             + f"\nPRAGMA user_version={version};\nCOMMIT;\n")
print(json.dumps(sorted(r[0] for r in db.execute("SELECT DISTINCT judge FROM judgments"))))
