"""Bad input through the real CLI: a clear error naming file, line and expectation, or a reported repair.

Every case runs `python -m judgeblender ...` in a subprocess. An error case must exit with
code 2 and print `error: FILE:LINE: expected ...` (FILE alone when no line can be named: an
empty file, a directory), never a traceback. A repair case is a documented, harmless fix
(see judgeblender.pairs.textfile): the job succeeds and stderr carries a `note: FILE: ...` line.
Separators: qrels, runs and pair lists are split on any run of spaces and tabs (as trec_eval
reads them), so mixing them is valid input, not a repair; a query line needs a tab, since
the query text itself has spaces.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from openai_server import OpenAITestServer

from judgeblender.backends.scripted import ScriptedBackend
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.pairs import Pair

QUERIES = "q1\twhat do goldfish eat\nq2\thow tall is the eiffel tower\n"
CORPUS = ('{"docid": "d1", "text": "Goldfish eat flakes and peas."}\n'
          '{"docid": "d2", "text": "The Eiffel Tower is 330 metres tall."}\n')
PAIRS = "q1\td1\nq2\td2\n"
MODEL = {"name": "steady", "default": "##final score: 2"}
NUMBERED_CORPUS = "".join(json.dumps({"docid": f"d{i}", "text": f"passage {i * 7919 % 10007}"}) + "\n" for i in range(3000))
NUMBERED_PAIRS = "".join(f"q{i % 2 + 1}\td{i}\n" for i in range(3000))


def gz(text: str) -> bytes:
    return gzip.compress(text.encode())


def truncated_gz(text: str) -> bytes:
    data = gz(text)
    return data[: len(data) - 40]


@dataclass
class Case:
    id: str
    files: dict[str, str | bytes]  # replaces or adds input files
    line: int | None  # the line the error must name (None: the file alone)
    expected: str  # the "expected ..." part of the message, or the repair note
    bad: str = ""  # the file the message must name (default: the only file in `files`)
    command: list[str] = field(default_factory=list)  # default: judge with the files
    repair: bool = False

    @property
    def culprit(self) -> str:
        return self.bad or next(iter(self.files))


ANY_LINE = -1  # a truncated gzip stream breaks where the compressed data ends: some line, named
PANEL = '[[judges]]\nmodel = "scripted:{model}"\nprompt = "{prompt}"\n'

CASES = [
    # --- queries -----------------------------------------------------------------------
    Case("queries-no-tab", {"queries.tsv": "q1 what do goldfish eat\n"}, 1, "'query_id<TAB>text'"),
    Case("queries-whitespace-only-text", {"queries.tsv": "q1\twhat\nq2\t  \t \n"}, 2, "non-blank text for query q2"),
    Case("queries-empty-file", {"queries.tsv": ""}, None, "at least one query"),
    Case("queries-contradictory-duplicate", {"queries.tsv": QUERIES + "q1\tsomething else\n"}, 3,
         "one text per query id (q1 appeared at line 1 with other text)"),
    Case("queries-invalid-utf8", {"queries.tsv": b"q1\tgoldfish \xff food\nq2\teiffel\n"}, 1, "UTF-8 text"),
    Case("queries-control-char-in-id", {"queries.tsv": "q\x001\tgoldfish\n"}, 1,
         "a query id without control characters (found U+0000)"),
    Case("queries-missing-file", {}, None, "an existing file", bad="nowhere.tsv",
         command=["judge", "-q", "{tmp}/nowhere.tsv", "-c", "{corpus.jsonl}", "-p", "{pairs.tsv}", "-o", "{tmp}/o.qrels",
                  "-j", "scripted:{model}", "--store", "{tmp}/s.sqlite"]),
    # --- corpus ------------------------------------------------------------------------
    Case("corpus-bad-json-line", {"corpus.jsonl": CORPUS + '{"docid": "d3", "text": \n'}, 3, "one JSON object per line"),
    Case("corpus-missing-docid-field", {"corpus.jsonl": '{"text": "no id"}\n'}, 1, "an id field"),
    Case("corpus-docid-is-an-object", {"corpus.jsonl": '{"docid": {"a": 1}, "text": "x"}\n'}, 1,
         "a string or integer id"),
    Case("corpus-text-not-a-string", {"corpus.jsonl": '{"docid": "d1", "text": 5}\n'}, 1, "a text field"),
    Case("corpus-blank-passage", {"corpus.jsonl": CORPUS + '{"docid": "d1", "text": "   "}\n'}, 3,
         "non-blank text for passage d1"),
    Case("corpus-contradictory-duplicate", {"corpus.jsonl": CORPUS + '{"docid": "d2", "text": "Other."}\n'}, 3,
         "one text per doc id (d2 appeared at line 2 with other text)"),
    Case("corpus-empty-file", {"corpus.jsonl": ""}, None, "at least one passage"),
    Case("corpus-invalid-utf8", {"corpus.jsonl": CORPUS.encode() + b'{"docid": "d3", "text": "\xc3("}\n'}, 3,
         "UTF-8 text"),
    Case("corpus-gzip-truncated", {"corpus.jsonl.gz": truncated_gz(NUMBERED_CORPUS)}, ANY_LINE, "a complete gzip stream",
         command=["judge", "-q", "{queries.tsv}", "-c", "{corpus.jsonl.gz}", "-p", "{pairs.tsv}", "-o", "{tmp}/o.qrels",
                  "-j", "scripted:{model}", "--store", "{tmp}/s.sqlite"]),
    # --- pairs: plain lists, qrels and runs --------------------------------------------
    Case("pairs-three-columns", {"pairs.tsv": "q1 d1 extra\n"}, 1, "2 columns (qid docid), 4 (qrels) or 6 (TREC run)"),
    Case("pairs-wrong-columns-later", {"pairs.tsv": "q1\td1\nq2\td2\tx\n"}, 2, "2 columns 'query_id doc_id'"),
    Case("pairs-empty-file", {"pairs.tsv": ""}, None, "at least one pair"),
    Case("pairs-control-char-in-docid", {"pairs.tsv": "q1\td\x071\n"}, 1, "a doc id without control characters"),
    Case("qrels-non-integer-label", {"pairs.tsv": "q1 0 d1 2\nq2 0 d2 two\n"}, 2, "an integer label in column 4"),
    Case("qrels-contradictory-duplicate", {"pairs.tsv": "q1 0 d1 2\nq1 0 d1 3\n"}, 2,
         "one label per pair (q1 d1 was labelled 2 before)"),
    Case("run-negative-rank", {"pairs.tsv": "q1 Q0 d1 -1 3.5 bm25\n"}, 1, "a rank >= 0 in column 4"),
    Case("run-score-not-a-number", {"pairs.tsv": "q1 Q0 d1 1 3.5 bm25\nq2 Q0 d2 1 high bm25\n"}, 2,
         "a number score in column 5"),
    Case("run-document-twice-for-a-query", {"pairs.tsv": "q1 Q0 d1 1 3 t\nq1 Q0 d1 2 2 t\n"}, 2,
         "each document once per query (d1 is ranked for query q1 at line 1 already)"),
    # --- gold and predicted labels, where labels matter ----------------------------------
    Case("gold-label-out-of-range", {"gold.qrels": "q1 0 d1 2\nq2 0 d2 7\n"}, 2, "a label in [0, 1, 2, 3]",
         command=["agree", "{pred.qrels}", "--gold", "{gold.qrels}"]),
    Case("prediction-non-integer-label", {"pred.qrels": "q1 0 d1 1.\n"}, 1, "an integer label in column 4",
         command=["agree", "{pred.qrels}", "--gold", "{gold.qrels}"]),
    # --- panel files (TOML: the judge and the line of the key at fault) ----------------------
    Case("panel-unknown-prompt", {"panel.toml": PANEL.replace("{prompt}", "no-such-prompt")}, 3,
         "judge 1: a known prompt", command=["judge", "-q", "{queries.tsv}", "-c", "{corpus.jsonl}", "-p", "{pairs.tsv}",
                                             "-o", "{tmp}/o.qrels", "--panel", "{panel.toml}", "--store", "{tmp}/s.sqlite"]),
    Case("panel-unknown-model-prefix", {"panel.toml": PANEL.replace("scripted:{model}", "nosuch:model")
                                        .replace("{prompt}", "umbrela")}, 2, "judge 1: a model string PREFIX:MODEL",
         command=["judge", "-q", "{queries.tsv}", "-c", "{corpus.jsonl}", "-p", "{pairs.tsv}", "-o", "{tmp}/o.qrels",
                  "--panel", "{panel.toml}", "--store", "{tmp}/s.sqlite"]),
    Case("panel-not-toml", {"panel.toml": "[[judges]]\nmodel = \n"}, 2, "valid TOML",
         command=["judge", "-q", "{queries.tsv}", "-c", "{corpus.jsonl}", "-p", "{pairs.tsv}", "-o", "{tmp}/o.qrels",
                  "--panel", "{panel.toml}", "--store", "{tmp}/s.sqlite"]),
    # --- documented repairs: the job runs, and says what it fixed ------------------------
    Case("repair-bom", {"queries.tsv": "\ufeff" + QUERIES}, None,
         "UTF-8 byte-order mark at the start of the file ignored (line 1)", repair=True),
    Case("repair-control-chars-in-query-text", {"queries.tsv": "q1\twhat do \x1b[31mgoldfish\x07 eat\nq2\teiffel\n"}, None,
         "control characters in query text replaced by spaces (line 1)", repair=True),
    Case("repair-identical-duplicate-passage", {"corpus.jsonl": CORPUS + CORPUS}, None,
         "repeated identical passages kept once (line 3, 1 more)", repair=True),
    Case("repair-control-chars-in-passage", {"corpus.jsonl": CORPUS + '{"docid": "d3", "text": "nul\\u0000 here"}\n',
                                             "pairs.tsv": PAIRS + "q1\td3\n"},
         None, "control characters in passage text replaced by spaces (line 3)", repair=True),
    Case("repair-duplicate-pair", {"pairs.tsv": PAIRS + "q1\td1\n"}, None, "repeated pairs kept once (line 3)",
         repair=True),
    Case("repair-identical-duplicate-qrels-line", {"pairs.tsv": "q1 0 d1 2\nq2 0 d2 1\nq1 0 d1 2\n"}, None,
         "repeated identical qrels lines kept once (line 3)", repair=True),
]

DEFAULT_COMMAND = ["judge", "-q", "{queries.tsv}", "-c", "{corpus.jsonl}", "-p", "{pairs.tsv}", "-o", "{tmp}/o.qrels",
                   "-j", "scripted:{model}", "--store", "{tmp}/s.sqlite"]


def materialise(case: Case, tmp: Path) -> list[str]:
    tmp.mkdir(parents=True)
    files: dict[str, str | bytes] = {"queries.tsv": QUERIES, "corpus.jsonl": CORPUS, "pairs.tsv": PAIRS,
                                     "pred.qrels": "q1 0 d1 2\nq2 0 d2 1\n", "gold.qrels": "q1 0 d1 2\nq2 0 d2 1\n",
                                     **case.files}
    paths = {"tmp": str(tmp), "model": str(tmp / "model.json")}
    (tmp / "model.json").write_text(json.dumps(MODEL))
    for name, content in files.items():
        path = tmp / name
        if content == "DIR":
            path.mkdir()
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content.replace("{model}", paths["model"]), encoding="utf-8")
        paths[name] = str(path)
    return [re.sub(r"\{([^{}]+)\}", lambda m: paths[m.group(1)], arg) for arg in (case.command or DEFAULT_COMMAND)]


def run_cli(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "judgeblender", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, tuple[Path, subprocess.CompletedProcess]]:
    """Every case's CLI run, started a few at a time (each is a fresh interpreter)."""
    root = tmp_path_factory.mktemp("bad")
    commands = {c.id: (root / c.id, materialise(c, root / c.id)) for c in CASES}
    with ThreadPoolExecutor(4) as pool:
        done = dict(zip(commands, pool.map(run_cli, (args for _, args in commands.values()))))
    return {cid: (commands[cid][0], proc) for cid, proc in done.items()}


def test_the_corpus_has_at_least_thirty_cases():
    assert len(CASES) >= 30 and len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_named_or_repaired_never_a_traceback(case, results):
    folder, proc = results[case.id]
    assert "Traceback" not in proc.stderr
    path = folder / case.culprit
    if case.repair:
        assert proc.returncode == 0, proc.stderr
        assert f"note: {path}: {case.expected}" in proc.stderr
        return
    assert proc.returncode == 2, proc.stdout + proc.stderr
    if case.line == ANY_LINE:
        assert re.search(rf"error: {re.escape(str(path))}:\d+: expected {re.escape(case.expected)}", proc.stderr)
        return
    where = f"{path}:{case.line}" if case.line else f"{path}"
    assert f"error: {where}: expected {case.expected}" in proc.stderr


def test_pairs_missing_from_the_corpus_are_named(tmp_path):
    case = Case("missing-docid", {"pairs.tsv": "q1\td1\nq2\td9\n"}, None, "")
    proc = run_cli(materialise(case, tmp_path / "m"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "1 of 2 pairs reference a passage missing from the corpus (first: d9)" in proc.stderr
    assert "--skip-missing" in proc.stderr


def test_mixed_tabs_and_spaces_in_pair_lists_are_valid(tmp_path):
    case = Case("mixed", {"pairs.tsv": "q1\td1\nq2  \t d2\n"}, None, "")
    args = materialise(case, tmp_path / "m")
    proc = run_cli(args + ["--json"])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["judges"][0]["judged"] == 2 and "note:" not in proc.stderr


def test_input_that_looks_like_console_markup_is_shown_as_is(tmp_path):
    case = Case("markup", {"queries.tsv": "[/] no tab here\n"}, 1, "")
    proc = run_cli(materialise(case, tmp_path / "m"))
    assert "Traceback" not in proc.stderr and proc.returncode == 2
    assert "expected 'query_id<TAB>text', got '[/] no tab here'" in proc.stderr


# --- a 5 MB passage ----------------------------------------------------------------------
class WordTokens(ScriptedBackend):
    """A scripted model with a context window, counting words as tokens."""

    def context_tokens(self) -> int | None:
        return 512

    def count_tokens(self, text: str) -> int | None:
        return len(text.split())


def test_a_5_mb_passage_is_cut_to_the_context_and_the_cut_recorded():
    huge = "goldfish eat flakes " * 262_144  # 5 MiB, 786k words
    model = WordTokens(default="##final score: 2")
    judge = Judge(JudgeSpec(model="scripted:inline"), backend=model)
    run = judge_pairs([judge], [Pair("q1", "d1")], {"q1": "what do goldfish eat"}, {"d1": huge})
    j = run.judgments[judge.id][Pair("q1", "d1")]
    assert j.label == 2
    assert j.truncated["passage_chars"] == len(huge) == 5 * 2**20
    assert j.truncated["passage_tokens"] == 786_432 and j.truncated["kept_tokens"] < 512
    prompt = "\n".join(m.content for m in model.calls[0].messages)
    assert model.count_tokens(prompt) + 100 <= 512  # the prompt and the answer's 100 tokens fit
    assert run.stats[judge.id].truncated == 1


def test_cli_cuts_a_5_mb_passage_for_a_served_model_with_a_context_size(tmp_path):
    folder = tmp_path / "big"
    corpus = CORPUS + json.dumps({"docid": "d3", "text": "goldfish eat flakes " * 262_144}) + "\n"
    case = Case("big", {"corpus.jsonl": corpus, "pairs.tsv": PAIRS + "q1\td3\n"}, None, "")
    args = materialise(case, folder)
    args = args[: args.index("-j")] + ["--store", str(folder / "s.sqlite"), "--json"]
    with OpenAITestServer("##final score: 1", max_requests=20) as server:
        proc = run_cli(args + ["-j", "openai:m", "--base-url", server.base_url, "--context-tokens", "4096"])
        sizes = [len(json.dumps(r.body)) for r in server.requests]
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["judges"][0]["truncated"] == 1
    assert max(sizes) < 4096 * 3 + 2000  # at most ~3 bytes per token of the context, never the 5 MB
    details = {json.loads(line)["docid"]: json.loads(line) for line in (folder / "o.qrels.details.jsonl").open()}
    assert details["d3"]["label"] == 1 and details["d3"]["judges"]["openai:m/umbrela/generate"]["truncated"][
        "passage_chars"] == 5 * 2**20
