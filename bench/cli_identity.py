"""`judgeblender judge`'s outputs, byte for byte: one source tree's against another's, or against frozen ones.

    PYTHONPATH=/work/main/src python bench/cli_identity.py freeze             # the outputs of the code on PYTHONPATH
    PYTHONPATH=src python bench/cli_identity.py compare /work/main/src src --dl19 2000

Three runs of the CLI (a fresh process each, a fresh store each) on tests/data/cli_identity (tiny's
passages, every injection wording of tests/data/injection appended to one, a stuffed passage,
synthetic ones, a pair whose passage is missing): one scripted judge (--skip-missing); a panel of
two that streams (majority vote); the same panel with a tie-breaker (judged at once). What is
compared: the qrels and details files' bytes, the --json summary, every row of every table of
the store but `calls`, and the calls as `judgeblender store export` of the same tree gives them
(sorted by key), all but the timing fields (`seconds` in the summary; `latency_s`, `created_at`,
`updated_at` in the store). The calls are compared as exported, not as stored, since issue 40
changed how their rows are laid out and compressed (the order of the rows, the zlib level of a
prompt, a repeated metadata blob reused) and not what they hold. `freeze` writes them to tests/data/cli_identity/expected.json (the
details and each table's rows as SHA-256 digests, to keep the file small), which
tests/test_cli_identity.py compares with the code under test; `compare` runs two source trees
side by side, on those inputs and (with --dl19 N) on DL19's first N judged pairs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ROOT / "tests" / "data" / "cli_identity"
EXPECTED = INPUTS / "expected.json"
DL19 = ROOT.parent / "shared" / "data" / "trec-dl-2019"
TIMING = {"seconds", "latency_s", "created_at", "updated_at"}


def panels(work: Path, model: Path) -> dict[str, Path]:
    """Two panel files: two members that stream (majority vote), and the same with a tie-breaker.
    Model files are named relative to `work`, the runs' folder: judge ids hold them."""
    other = work / "other.json"
    other.write_text(json.dumps({**json.loads(model.read_text()), "name": "other", "default": "##final score: 2"}))
    members = (f'[[judges]]\nmodel = "scripted:{model.name}"\nprompt = "umbrela"\n'
               f'[[judges]]\nmodel = "scripted:{other.name}"\nprompt = "umbrela-guarded"\n')
    files = {"streamed": work / "streamed.toml", "tiebreak": work / "tiebreak.toml"}
    files["streamed"].write_text('[aggregator]\nmethod = "mv"\ntie = "avg"\n' + members)
    files["tiebreak"].write_text('[aggregator]\nmethod = "mv"\ntie = "avg"\n' + members
                                 + f'[tiebreaker]\nmodel = "scripted:{model.name}"\nprompt = "umbrela"\nid = "big"\n'
                                 + 'spread = 1\n')
    return files


def without_timing(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def store_rows(path: Path) -> dict[str, list]:
    """Every row of every table, as stored, all but the timing columns (blobs as hex)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        rows = {}
        for table in tables:
            cur = db.execute(f'SELECT * FROM "{table}"')
            keep = [i for i, d in enumerate(cur.description) if d[0] not in TIMING]
            rows[table] = [[row[i].hex() if isinstance(row[i], bytes) else row[i] for i in keep] for row in cur]
    return rows


def exported_calls(store: Path, env: dict[str, str], work: Path) -> list[dict[str, Any]]:
    """The store's calls as `judgeblender store export` of the tree in `env` gives them: sorted by
    key, timing fields aside."""
    out = work / f"{store.stem}.export.jsonl"
    subprocess.run([sys.executable, "-m", "judgeblender", "store", "export", "--store", str(store), "-o", str(out)],
                   capture_output=True, text=True, env=env, timeout=600, cwd=work, check=True)
    records = [without_timing(json.loads(line)) for line in out.read_text(encoding="utf-8").splitlines()]
    return sorted(records, key=lambda r: r["key"])


def outputs(src: Path, inputs: Path, work: Path) -> dict[str, Any]:
    """The three runs' outputs with the code of `src`, in `work` (created)."""
    work.mkdir(parents=True, exist_ok=True)
    model = work / "model.json"
    model.write_text((inputs / "model.json").read_text())
    env = {**os.environ, "PYTHONPATH": str(src), "COLUMNS": "200"}
    base = ["-q", str(inputs / "queries.tsv"), "-c", str(inputs / "corpus.jsonl"), "-p", str(inputs / "pairs.tsv"),
            "--skip-missing", "--no-progress", "--json"]
    runs = {"single": ["-j", f"scripted:{model.name}"],
            **{name: ["--panel", str(path)] for name, path in panels(work, model).items()}}
    found: dict[str, Any] = {}
    for name, args in runs.items():
        out, store = work / f"{name}.qrels", work / f"{name}.sqlite"
        proc = subprocess.run([sys.executable, "-m", "judgeblender", "judge", *base, *args, "-o", str(out),
                               "--store", str(store)], capture_output=True, text=True, env=env, timeout=600,
                              cwd=work)
        found[name] = {"exit": proc.returncode, "summary": without_timing(json.loads(proc.stdout or "null")),
                       "qrels": out.read_text(encoding="utf-8") if out.exists() else None,
                       "details": (work / f"{name}.qrels.details.jsonl").read_text(encoding="utf-8")
                       if out.exists() else None,
                       "store": store_rows(store) if store.exists() else None}
        if store.exists():
            found[name]["store"]["calls"] = exported_calls(store, env, work)
        # paths differ between working folders: the summary names the files it wrote
        for key in ("qrels", "details"):
            if isinstance(found[name]["summary"], dict) and key in found[name]["summary"]:
                found[name]["summary"][key] = Path(found[name]["summary"][key]).name
    return found


def dl19_inputs(folder: Path, n: int) -> Path:
    """DL19's first n judged pairs (qrels order), their queries and passages, and the identity model."""
    folder.mkdir(parents=True, exist_ok=True)
    pairs = [line.split()[::2][:2] for line in (DL19 / "qrels.txt").read_text().splitlines()[:n]]
    wanted = {d for _, d in pairs}
    with open(DL19 / "passages.jsonl", encoding="utf-8") as src, open(folder / "corpus.jsonl", "w") as dst:
        dst.writelines(line for line in src if json.loads(line)["docid"] in wanted)
    (folder / "queries.tsv").write_text((DL19 / "queries.tsv").read_text())
    (folder / "pairs.tsv").write_text("".join(f"{q}\t{d}\n" for q, d in pairs))
    (folder / "model.json").write_text((INPUTS / "model.json").read_text())
    return folder


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def frozen(found: dict[str, Any]) -> dict[str, Any]:
    """The outputs with the details and the store's rows as digests (and counts)."""
    return {run: {**parts, "details": {"lines": (parts["details"] or "").count("\n"), "sha256": digest(parts["details"])},
                  "store": {table: {"rows": len(rows), "sha256": digest(rows)}
                            for table, rows in (parts["store"] or {}).items()}}
            for run, parts in found.items()}


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return [f"{run}: {part}" for run in a for part in a[run] if a[run][part] != b.get(run, {}).get(part)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    fr = sub.add_parser("freeze", help="write the outputs of the code on PYTHONPATH")
    fr.add_argument("--out", type=Path, default=EXPECTED)
    co = sub.add_parser("compare", help="two source trees, side by side")
    co.add_argument("a", type=Path)
    co.add_argument("b", type=Path)
    co.add_argument("--dl19", type=int, default=0, help="also on DL19's first N judged pairs")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="jb-identity-") as tmp:
        work = Path(tmp)
        if args.cmd == "freeze":
            src = Path(os.environ["PYTHONPATH"].split(os.pathsep)[0]).resolve()
            found = frozen(outputs(src, INPUTS, work / "run"))
            args.out.write_text(json.dumps(found, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            print(f"wrote the outputs of {src} to {args.out}")
            return
        sets = {"tests/data/cli_identity": INPUTS}
        if args.dl19:
            sets[f"DL19's first {args.dl19} pairs"] = dl19_inputs(work / "dl19", args.dl19)
        failed = False
        for label, inputs in sets.items():
            a = outputs(args.a.resolve(), inputs, work / "a" / label.replace("/", "_").replace(" ", "_"))
            b = outputs(args.b.resolve(), inputs, work / "b" / label.replace("/", "_").replace(" ", "_"))
            diff = differences(a, b)
            failed |= bool(diff)
            lines = {run: (a[run]["qrels"] or "").count("\n") for run in a}
            print(f"{label}: {'identical' if not diff else 'DIFFERENT: ' + ', '.join(diff)} "
                  f"(qrels lines {lines}; exits {[a[r]['exit'] for r in a]})")
        sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
