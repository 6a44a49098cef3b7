"""Re-parse every recorded generate-mode answer with main's parsers and this tree's, and list
every label or verdict that changed, with its text and the reason (issue 20, "done when").

    PYTHONPATH=src python bench/reparse.py                 # the project's recorded answers
    PYTHONPATH=src python bench/reparse.py STORE.sqlite ANSWERS.jsonl ...   # these too
    PYTHONPATH=src python bench/reparse.py --base main --json bench/out/reparse.json

Answers come from
  * SQLite stores (the `calls` table, generate-mode requests) and JSON/JSONL files holding
    "raw_output" fields (judge details, jury outputs, bench/out/generated-answers.jsonl),
    found under bench/, tests/data, docs and src/judgeblender/data, plus the paths given;
  * the model answers written into the base's tests: the string literals its tests hand to a
    scripted server or backend (`OpenAITestServer(answers, default_answer=...)`,
    `ScriptedBackend(default=..., rules=[{"output": ...}], queue=[...])`), module-level
    *_CASES and ANSWERS tables, and the "text" column of the parametrize tables of tests that
    call a parser or a scripted model (answers built by a helper call are not seen).
A stored answer is read on its step's scale: the request's prompt is matched against the
built-in templates' steps (sun-two-step's grade step is 1-3); an answer of an unknown prompt
or from the tests is read on 0-3, a JSON-looking one from the tests also as a verdict of the
built-in rubrics' schema on [0, 1]. Yes/no answers are compared with the base's yes/no parser;
free-text steps are counted but not compared. The old parsers are the base's
src/judgeblender/parse/{labels,verdict,yesno}.py, with what they import from the base
(`git archive BASE`), loaded as a temporary package beside this tree's.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import io
import json
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judgeblender.judges.engine import step_examples
from judgeblender.parse.labels import parse_grade
from judgeblender.parse.verdict import parse_verdict
from judgeblender.parse.yesno import parse_yesno
from judgeblender.prompts import PromptTemplate, Step, list_templates

ROOT = Path(__file__).resolve().parent.parent
SEARCHED = ["bench", "tests/data", "docs", "src/judgeblender/data"]
RUBRIC = {"type": "object", "properties": {"reason": {"type": "string"}, "score": {"type": "number"}},
          "required": ["reason", "score"]}


@dataclass
class Answer:
    source: str
    text: str
    kind: str  # "label", "yesno" or "json"
    scale: tuple[int, ...] = (0, 1, 2, 3)
    step: Step | None = None
    template: PromptTemplate | None = None


def load_base(base: str, tmp: Path) -> tuple[Any, Any]:
    """The base's label and verdict parsers (its parse.labels and parse.verdict modules).

    The base's whole src/judgeblender is unpacked under tmp as a package of another name
    (old_judgeblender), so the parsers' relative imports (verdict.py's `.labels`, a screen's
    `..errors`) resolve to the base's own modules, never this tree's; its top-level __init__ is
    left empty, so only what the parsers import is loaded."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", base, "src/judgeblender"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tmp, filter="data")
    package = tmp / "old_judgeblender"
    (tmp / "src" / "judgeblender").rename(package)
    (package / "__init__.py").write_text("", encoding="utf-8")
    sys.path.insert(0, str(tmp))
    try:
        return (importlib.import_module("old_judgeblender.parse.labels"),
                importlib.import_module("old_judgeblender.parse.verdict"))
    finally:
        sys.path.remove(str(tmp))


# --------------------------------------------------------------------------------------------
# which step asked: the request's prompt against the built-in templates
# --------------------------------------------------------------------------------------------
def _step_texts() -> list[tuple[list[str], PromptTemplate, Step]]:
    """Each built-in step's user text, cut at its placeholders into the literal pieces."""
    found = []
    for template in list_templates():
        blanks = {name: "\0" for name in [*template.inputs, *(s.id for s in template.steps)]}
        for step in template.steps:
            _, user = template.render_step(step, blanks)
            found.append(([piece for piece in user.split("\0") if piece.strip()], template, step))
    return sorted(found, key=lambda f: -sum(map(len, f[0])))  # the most specific match decides


STEPS: list[tuple[list[str], PromptTemplate, Step]] = []


def _matches(pieces: list[str], text: str) -> bool:
    at = 0
    for piece in pieces:
        at = text.find(piece, at)
        if at < 0:
            return False
        at += len(piece)
    return True


def _answer_for(source: str, text: str, request: dict[str, Any]) -> Answer:
    if not STEPS:
        STEPS.extend(_step_texts())
    users = [m[1] for m in request.get("messages", []) if m and m[0] == "user"]
    for pieces, template, step in STEPS:
        if users and pieces and _matches(pieces, users[-1]):
            kind = {"label": "label", "yesno": "yesno", "json": "json"}.get(step.output, "text")
            file, _, key = source.partition(":")
            return Answer(f"{file} {template.name}/{step.id}:{key}", text, kind, tuple(step.labels or template.scale),
                          step, template)
    kind = "json" if request.get("json_schema") else "label"
    return Answer(source, text, kind)


# --------------------------------------------------------------------------------------------
# recorded answers: stores and files
# --------------------------------------------------------------------------------------------
def from_store(path: Path) -> list[Answer]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT key, request, raw_output FROM calls").fetchall()
    except sqlite3.DatabaseError:
        return []
    finally:
        db.close()
    answers = []
    for key, request, raw in rows:
        req = json.loads(request)
        if req.get("mode", "generate") == "generate":
            answers.append(_answer_for(f"{path.name}:{key[:10]}", raw, req))
    return answers


def from_json_file(path: Path) -> list[Answer]:
    text = path.read_text(encoding="utf-8", errors="replace")
    if "raw_output" not in text:
        return []
    records = []
    try:
        records = [json.loads(text)]
    except json.JSONDecodeError:
        records = [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]
    answers: list[Answer] = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            raw = node.get("raw_output")
            if isinstance(raw, str):
                request = node.get("request") or {}
                if node.get("prompt_user"):
                    request = {"messages": [["user", node["prompt_user"]]]}
                answers.append(_answer_for(where, raw, request))
            elif isinstance(raw, dict):  # one raw output per step
                for step_id, text in raw.items():
                    if isinstance(text, str):
                        answers.append(Answer(f"{where}/{step_id}", text, "label"))
            for k, v in node.items():
                if k != "raw_output":
                    walk(v, where)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]")

    for i, record in enumerate(records):
        walk(record, f"{path.name}:{i + 1}")
    return answers


def recorded(paths: list[Path]) -> tuple[list[Answer], list[str]]:
    answers, searched = [], []
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            searched.append(str(f.relative_to(ROOT) if f.is_relative_to(ROOT) else f))
            head = f.read_bytes()[:16]
            if head.startswith(b"SQLite format 3"):
                answers += from_store(f)
            elif f.suffix in (".json", ".jsonl"):
                answers += from_json_file(f)
    return answers, searched


# --------------------------------------------------------------------------------------------
# answers written into the tests
# --------------------------------------------------------------------------------------------
_ANSWER_CALLS = {"OpenAITestServer", "ScriptedBackend", "openai_test_server"}
_ANSWER_KEYWORDS = {"answers", "default_answer", "default", "rules", "queue", "message"}


def _strings(node: ast.AST, names: dict[str, ast.AST], seen: set[int] | None = None) -> list[str]:
    """The answer strings in an expression: dict values (keys are prompt substrings), rule
    outputs, list items; module-level names are followed."""
    seen = seen if seen is not None else set()
    if id(node) in seen:
        return []
    seen.add(id(node))
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and node.id in names:
        return _strings(names[node.id], names, seen)
    if isinstance(node, ast.Dict):
        out = []
        for k, v in zip(node.keys, node.values):
            if isinstance(k, ast.Constant) and k.value in ("contains", "prompt"):
                continue
            out += _strings(v, names, seen)
        return out
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [s for elt in node.elts for s in _strings(elt, names, seen)]
    if isinstance(node, ast.JoinedStr):  # an f-string: its literal parts joined (formatted parts as {})
        return ["".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)]
    return []


def _parametrized_texts(deco: ast.AST, names: dict[str, ast.AST]) -> list[str]:
    """The answer texts of a @pytest.mark.parametrize table: its "text" (or answer/output) column."""
    if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute) and deco.func.attr == "parametrize"
            and len(deco.args) >= 2 and isinstance(deco.args[0], ast.Constant)):
        return []
    columns = [c.strip() for c in str(deco.args[0].value).split(",")]
    wanted = [i for i, c in enumerate(columns) if c in ("text", "answer", "output", "raw")]
    rows = deco.args[1]
    if isinstance(rows, ast.Name):
        rows = names.get(rows.id, rows)
    if not wanted or not isinstance(rows, (ast.List, ast.Tuple)):
        return []
    texts = []
    for row in rows.elts:
        cells = row.elts if isinstance(row, ast.Tuple) and len(columns) > 1 else [row]
        for i in wanted:
            if i < len(cells):
                texts += _strings(cells[i], names)
    return texts


def from_tests(base: str) -> list[Answer]:
    listing = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", f"{base}:tests"],
                             check=True, capture_output=True, text=True).stdout.split()
    answers: list[Answer] = []
    for name in sorted(n for n in listing if n.endswith(".py")):
        source = subprocess.run(["git", "-C", str(ROOT), "show", f"{base}:tests/{name}"],
                                check=True, capture_output=True, text=True).stdout
        tree = ast.parse(source)
        names = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                 for t in node.targets if isinstance(t, ast.Name)}
        texts: list[str] = []
        for var, value in names.items():
            if var == "ANSWERS" or var.endswith("_CASES"):
                if isinstance(value, (ast.List, ast.Tuple)):
                    for elt in value.elts:  # (text, label) rows: the text
                        first = elt.elts[0] if isinstance(elt, ast.Tuple) and elt.elts else elt
                        texts += _strings(first, names)
                else:
                    texts += _strings(value, names)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    word in ast.unparse(node) for word in ("parse_grade", "parse_verdict", *_ANSWER_CALLS)):
                for deco in node.decorator_list:  # a table of answers to a parser or scripted model
                    texts += _parametrized_texts(deco, names)
            if isinstance(node, ast.Call):
                func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if func in _ANSWER_CALLS:
                    for arg in node.args[:1]:
                        texts += _strings(arg, names)
                    for kw in node.keywords:
                        if kw.arg in _ANSWER_KEYWORDS:
                            texts += _strings(kw.value, names)
        for text in dict.fromkeys(t for t in texts if t.strip()):
            source_name = f"tests/{name}"
            answers.append(Answer(source_name, text, "label"))
            if text.lstrip().startswith("{") or '"score"' in text:
                answers.append(Answer(source_name, text, "json"))
    return answers


# --------------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------------
def _verdict_args(answer: Answer) -> tuple[dict[str, Any], dict[str, Any]]:
    if answer.step is not None and answer.template is not None:
        step, template = answer.step, answer.template
        kw = {"score_field": step.score_field, "reason_field": step.reason_field,
              "levels": list(answer.scale), "score_range": template.score_range}
        return step.json_schema or {}, kw
    return RUBRIC, {"score_range": [0.0, 1.0]}


def compare(answer: Answer, old_labels: Any, old_verdict: Any) -> tuple[Any, Any, str | None, str | None]:
    """(old value, new value, old reason, new reason)."""
    if answer.kind == "label":
        old, new = old_labels.parse_grade(answer.text, answer.scale), parse_grade(answer.text, answer.scale)
        return old.label, new.label, old.invalid_reason, new.invalid_reason
    if answer.kind == "yesno":  # the base's yes/no parser sits beside its label parser
        old_yesno = importlib.import_module(f"{old_labels.__package__}.yesno")
        old, new = old_yesno.parse_yesno(answer.text), parse_yesno(answer.text)
        return old.label, new.label, old.invalid_reason, new.invalid_reason
    schema, kw = _verdict_args(answer)
    examples = step_examples(answer.template, answer.step) if answer.step is not None else []
    old = old_verdict.parse_verdict(answer.text, schema, **kw)
    new = parse_verdict(answer.text, schema, examples=examples, **kw)
    return old.score, new.score, old.invalid_reason, new.invalid_reason


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", type=Path, help="more stores or answer files to re-parse")
    ap.add_argument("--base", default="main", help="git revision holding the old parsers [main]")
    ap.add_argument("--json", type=Path, help="also write the counts and every change here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old_labels, old_verdict = load_base(args.base, Path(tmp))
        stored, searched = recorded([ROOT / d for d in SEARCHED] + args.paths)
        answers = stored + from_tests(args.base)
        counts: dict[str, Counter] = {}
        changes = []
        for answer in answers:
            group = answer.source.split(":")[0]
            c = counts.setdefault(f"{group} ({answer.kind})", Counter())
            c["answers"] += 1
            if answer.kind not in ("label", "json", "yesno"):
                c["not compared"] += 1
                continue
            old, new, old_reason, new_reason = compare(answer, old_labels, old_verdict)
            if old == new:
                c["same value"] += 1
                c["same, valid" if new is not None else "same, invalid"] += 1
                continue
            c["changed"] += 1
            c["valid -> invalid" if new is None else "invalid -> valid" if old is None else "value changed"] += 1
            changes.append({"source": answer.source, "kind": answer.kind, "scale": list(answer.scale),
                            "old": old, "new": new, "old_reason": old_reason, "new_reason": new_reason,
                            "text": answer.text})
    files_with_answers = sorted({a.source.split(":")[0] for a in stored})
    print(f"searched {len(searched)} files under {', '.join(SEARCHED + [str(p) for p in args.paths])}; "
          f"generate-mode answers found in: {', '.join(files_with_answers) or 'none'}")
    print(f"{'source (parser)':56} {'answers':>8} {'same':>6} {'changed':>8}  detail")
    for group, c in sorted(counts.items()):
        detail = ", ".join(f"{k} {v}" for k, v in c.items()
                           if k not in ("answers", "same value", "changed") and v)
        print(f"{group:56} {c['answers']:>8} {c['same value']:>6} {c['changed']:>8}  {detail}")
    total = sum((c for c in counts.values()), Counter())
    print(f"{'all':56} {total['answers']:>8} {total['same value']:>6} {total['changed']:>8}")
    for ch in changes:
        excerpt = ch["text"] if len(ch["text"]) <= 160 else ch["text"][:80] + " ... " + ch["text"][-70:]
        print(f"\n{ch['source']} [{ch['kind']}, scale {ch['scale'][0]}-{ch['scale'][-1]}]: "
              f"{ch['old']} -> {ch['new']}\n  text: {excerpt!r}\n  now:  {ch['new_reason'] or 'valid'}"
              f"\n  was:  {ch['old_reason'] or 'valid'}")
    if args.json:
        args.json.write_text(json.dumps({"searched": searched, "counts": {k: dict(v) for k, v in counts.items()},
                                         "changes": changes}, indent=1, ensure_ascii=False) + "\n",
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
