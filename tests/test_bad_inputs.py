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
import typing
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
    # a count-only backend no longer counts a passage far past any cut whole (issue 38 part 9): not counted, null
    assert j.truncated["passage_tokens"] is None and j.truncated["kept_tokens"] < 512
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


# --- every command's paths and options: one `error:` line, exit 2, no call, no file touched ---
# Each case is a command line (placeholders: files of FILES, {tmp}, {url} of a counting test
# server, {ro}/{full}: a read-only and a full tmpfs mount) and a fragment of the error line.
# Judging commands use `openai:test-model` at {url}: the server must receive no request at all.
FOREIGN_DB = "foreign.sqlite"  # another program's SQLite database (built by the fixture)
OPT_FILES: dict[str, str | bytes] = {
    "queries.tsv": QUERIES, "corpus.jsonl": CORPUS, "pairs.tsv": PAIRS, "gold.qrels": "q1 0 d1 2\nq2 0 d2 1\n",
    "pred.qrels": "q1 0 d1 2\nq2 0 d2 1\n", "items.jsonl": '{"question": "q", "answer": "a"}\n',
    "notes.txt": "not a store, not a model\n", "fake.gguf": b"PK\x03\x04 not a gguf file",
    "runs/r1.run": "q1 Q0 d1 1 2.0 r1\nq2 Q0 d2 1 2.0 r1\n", "adir/keep": "",
    "bad-mode.toml": PANEL.replace("{prompt}", "umbrela") + "mode = 5\n",
    "bad-options.toml": PANEL.replace("{prompt}", "umbrela") + "options = 3\n",
    "bad-weight.toml": PANEL.replace("{prompt}", "umbrela") + "weight = -1\n",
    "bad-seed.toml": PANEL.replace("{prompt}", "umbrela") + '[aggregator]\nseed = "one"\n',
    "prompt-dir.toml": PANEL.replace("{prompt}", "{tmp}/adir"),
}
JUDGE = ["judge", "-q", "{queries.tsv}", "-c", "{corpus.jsonl}", "-p", "{pairs.tsv}", "-j", "openai:test-model",
         "--base-url", "{url}", "--no-progress"]
J = [*JUDGE, "-o", "{tmp}/o.qrels", "--store", "{tmp}/s.sqlite"]
JP = [*JUDGE, "-o", "{tmp}/o.qrels", "--store", "{tmp}/s.sqlite", "--panel"]
GRADE = ["grade", "-i", "{items.jsonl}", "-j", "openai:test-model", "--base-url", "{url}", "--no-progress"]
G = [*GRADE, "-o", "{tmp}/g.jsonl", "--store", "{tmp}/s.sqlite"]
CASC = ["cascade", "-q", "{queries.tsv}", "-c", "{corpus.jsonl}", "-p", "{pairs.tsv}", "-j", "openai:test-model",
        "--base-url", "{url}", "--no-progress", "--store", "{tmp}/s.sqlite"]
C = [*CASC, "-o", "{tmp}/o.qrels"]
CORR = ["correlate", "{pred.qrels}", "--gold", "{gold.qrels}", "--runs", "{tmp}/runs"]
POOL = ["pool", "--runs", "{tmp}/runs"]
LABEL = ["label", "-q", "{queries.tsv}", "-c", "{corpus.jsonl}", "-p", "{pairs.tsv}"]
CAL = ["calibrate", "--gold", "{gold.qrels}", "--labels", "{pred.qrels}", "--labels", "{gold.qrels}"]
FILL = ["fill", "--gold", "{gold.qrels}", "--llm", "{pred.qrels}"]
REPORT = ["report", "--gold", "{gold.qrels}", "--pred", "{pred.qrels}", "--runs", "{tmp}/runs"]
COMPARE = ["compare", "--qrels", "{gold.qrels}", "--runs", "{tmp}/runs"]
DEMO = ["demo", "--no-progress"]
PROXY = ["proxy", "--upstream", "{url}"]
EST = ["estimate", "--llm", "{pred.qrels}", "--human", "{gold.qrels}", "--runs", "{tmp}/runs"]

OPTION_CASES: list[tuple[str, list[str], str]] = [
    # judge: outputs
    ("judge-out-is-a-directory", [*JUDGE, "-o", "{tmp}/adir"], "adir: expected an output file path, got 'a directory'"),
    ("judge-out-under-a-file", [*JUDGE, "-o", "{notes.txt}/o.qrels"], "o.qrels: expected an output file path, got 'a path under a file'"),
    ("judge-out-is-an-input", [*JUDGE, "-o", "{pairs.tsv}", "--store", "{tmp}/s.sqlite"], "pairs.tsv: expected an output file that is not also an input"),
    ("judge-out-read-only-disk", [*JUDGE, "-o", "{ro}/o.qrels", "--store", "{tmp}/s.sqlite"], "o.qrels: expected an output file in a writable folder"),
    ("judge-out-full-disk", [*JUDGE, "-o", "{full}/o.qrels", "--store", "{tmp}/s.sqlite"], "o.qrels: expected an output file on a disk with free space"),
    ("judge-details-is-a-directory", [*J, "--details", "{tmp}/adir"], "adir: expected an output file path, got 'a directory'"),
    ("judge-details-is-the-store", [*J, "--details", "{tmp}/s.sqlite"], "s.sqlite: expected an output file that is not also an input"),
    ("judge-batch-write-is-a-directory", [*J, "--batch-write", "{tmp}/adir"], "adir: expected an output file path"),
    ("judge-batch-read-missing", [*J, "--batch-read", "{tmp}/none.jsonl"], "none.jsonl: expected an existing file, got 'no such file'"),
    # judge: the store
    ("judge-store-not-sqlite", [*JUDGE, "-o", "{tmp}/o.qrels", "--store", "{notes.txt}"], "notes.txt: expected a judgeblender store (an SQLite file), got 'a file that is not SQLite'"),
    ("judge-store-foreign-sqlite", [*JUDGE, "-o", "{tmp}/o.qrels", "--store", "{tmp}/" + FOREIGN_DB], "expected a judgeblender store, got 'another SQLite database (tables: songs)'"),
    ("judge-store-is-a-directory", [*JUDGE, "-o", "{tmp}/o.qrels", "--store", "{tmp}/adir"], "adir: expected a store file, got 'a directory'"),
    ("judge-store-read-only-disk", [*JUDGE, "-o", "{tmp}/o.qrels", "--store", "{ro}/s.sqlite"], "s.sqlite: expected a store in a writable folder"),
    ("judge-store-full-disk", [*JUDGE, "-o", "{tmp}/o.qrels", "--store", "{full}/s.sqlite"], "s.sqlite: expected a store on a disk with free space"),
    # judge: inputs that are not what they claim
    ("judge-queries-is-a-directory", ["judge", "-q", "{tmp}/adir", "-c", "{corpus.jsonl}", "-p", "{pairs.tsv}", "-o", "{tmp}/o.qrels", "--store", "{tmp}/s.sqlite"], "adir: expected an existing file, got 'a directory'"),
    ("judge-corpus-is-a-directory", ["judge", "-q", "{queries.tsv}", "-c", "{tmp}/adir", "-p", "{pairs.tsv}", "-o", "{tmp}/o.qrels", "--store", "{tmp}/s.sqlite"], "adir: expected an existing file, got 'a directory'"),
    ("judge-prompt-is-a-folder", [*J, "--prompt", "{tmp}/adir"], "adir: expected an existing prompt template file (.toml), got 'a directory'"),
    ("judge-model-not-gguf", [*J[:7], "-j", "llamacpp:{fake.gguf}", "-o", "{tmp}/o.qrels", "--store", "{tmp}/s.sqlite"], "fake.gguf: expected a GGUF model file (starting with 'GGUF')"),
    ("judge-model-gguf-missing", [*J[:7], "-j", "llamacpp:{tmp}/none.gguf", "-o", "{tmp}/o.qrels", "--store", "{tmp}/s.sqlite"], "none.gguf: expected an existing GGUF model file, got 'no such file'"),
    ("judge-panel-file-is-a-directory", [*JP, "{tmp}/adir.toml"], "adir.toml: expected an existing panel file (.toml), got 'no such file'"),
    ("judge-panel-mode-wrong", [*JP, "{bad-mode.toml}"], "bad-mode.toml:4: expected judge 1: mode 'generate' or 'logprobs', got '5'"),
    ("judge-panel-options-not-a-table", [*JP, "{bad-options.toml}"], "bad-options.toml:4: expected judge 1: options as a table"),
    ("judge-panel-weight-negative", [*JP, "{bad-weight.toml}"], "bad-weight.toml:4: expected judge 1: a finite number >= 0 for weight, got '-1'"),
    ("judge-panel-seed-not-an-integer", [*JP, "{bad-seed.toml}"], "bad-seed.toml:5: expected [aggregator]: seed, an integer >= 0"),
    ("judge-panel-prompt-is-a-folder", [*JP, "{prompt-dir.toml}"], "adir: expected an existing prompt template file (.toml), got 'a directory'"),
    # judge: numbers
    ("judge-timeout-nan", [*J, "--timeout", "nan"], "--timeout: expected a finite number, got 'nan'"),
    ("judge-timeout-inf", [*J, "--timeout", "inf"], "--timeout: expected a finite number, got 'inf'"),
    ("judge-timeout-zero", [*J, "--timeout", "0"], "--timeout: expected a number > 0, got '0'"),
    ("judge-concurrency-zero", [*J, "--concurrency", "0"], "--concurrency: expected a number >= 1, got '0'"),
    ("judge-threads-negative", [*J, "--threads", "-2"], "--threads: expected a number >= 1, got '-2'"),
    ("judge-depth-zero", [*J, "--depth", "0"], "--depth: expected a number >= 1, got '0'"),
    ("judge-limit-negative", [*J, "--limit", "-1"], "--limit: expected a number >= 1, got '-1'"),
    ("judge-context-tokens-zero", [*J, "--context-tokens", "0"], "--context-tokens: expected a number >= 1, got '0'"),
    ("judge-ray-workers-zero", [*J, "--ray", "local", "--ray-workers", "0"], "--ray-workers: expected a number >= 1, got '0'"),
    # grade
    ("grade-items-missing", [*GRADE[:1], *GRADE[3:], "-i", "{tmp}/none.jsonl", "-o", "{tmp}/g.jsonl", "--store", "{tmp}/s.sqlite"], "none.jsonl: expected an existing file, got 'no such file'"),
    ("grade-out-is-a-directory", [*GRADE, "-o", "{tmp}/adir", "--store", "{tmp}/s.sqlite"], "adir: expected an output file path, got 'a directory'"),
    ("grade-out-is-the-items", [*GRADE, "-o", "{items.jsonl}", "--store", "{tmp}/s.sqlite"], "items.jsonl: expected an output file that is not also an input"),
    ("grade-store-foreign-sqlite", [*GRADE, "-o", "{tmp}/g.jsonl", "--store", "{tmp}/" + FOREIGN_DB], "expected a judgeblender store, got 'another SQLite database"),
    ("grade-threshold-nan", [*G, "--threshold", "nan"], "--threshold: expected a finite number, got 'nan'"),
    ("grade-trim-too-large", [*G, "--trim", "0.7"], "--trim: expected a number in [0, 0.5), got '0.7'"),
    ("grade-min-votes-zero", [*G, "--min-votes", "0"], "--min-votes: expected a number >= 1, got '0'"),
    ("grade-timeout-nan", [*G, "--timeout", "nan"], "--timeout: expected a finite number, got 'nan'"),
    ("grade-prompt-is-a-folder", [*G, "--prompt", "{tmp}/adir"], "adir: expected an existing prompt template file (.toml)"),
    # cascade
    ("cascade-out-is-a-directory", [*CASC, "-o", "{tmp}/adir"], "adir: expected an output file path, got 'a directory'"),
    ("cascade-seed-qrels-missing", [*C, "--seed-qrels", "{tmp}/none.qrels"], "none.qrels: expected an existing file"),
    ("cascade-threshold-inf", [*C, "--threshold", "inf"], "--threshold: expected a finite number, got 'inf'"),
    ("cascade-budget-negative", [*C, "--budget", "-5"], "--budget: expected a number >= 0, got '-5'"),
    ("cascade-store-not-sqlite", [*CASC[:-2], "-o", "{tmp}/o.qrels", "--store", "{notes.txt}"], "notes.txt: expected a judgeblender store (an SQLite file)"),
    # demo
    ("demo-store-foreign-sqlite", [*DEMO, "--store", "{tmp}/" + FOREIGN_DB], "expected a judgeblender store, got 'another SQLite database"),
    ("demo-threads-zero", [*DEMO, "--threads", "0"], "--threads: expected a number >= 1, got '0'"),
    ("proxy-store-foreign-sqlite", [*PROXY, "--store", "{tmp}/" + FOREIGN_DB], "expected a judgeblender store, got 'another SQLite database"),
    ("proxy-token-file-missing", [*PROXY, "--store", "{tmp}/s.sqlite", "--token-file", "{tmp}/none.txt"], "none.txt: expected an existing file, got 'no such file'"),
    ("proxy-port-out-of-range", [*PROXY, "--store", "{tmp}/s.sqlite", "--port", "70000"], "--port: expected a number in [0, 65535], got '70000'"),
    ("proxy-timeout-zero", [*PROXY, "--store", "{tmp}/s.sqlite", "--timeout", "0"], "--timeout: expected a number > 0, got '0'"),
    ("proxy-upstream-not-a-url", [*PROXY[:1], "--upstream", "127.0.0.1:8000", "--store", "{tmp}/s.sqlite"], "--upstream: expected the upstream's base URL"),
    ("serve-max-pairs-zero", ["serve", "-j", "openai:m", "--store", "{tmp}/s.sqlite", "--max-pairs", "0"], "--max-pairs: expected a number >= 1, got '0'"),
    ("serve-max-queue-negative", ["serve", "-j", "openai:m", "--store", "{tmp}/s.sqlite", "--max-queue", "-1"], "--max-queue: expected a number >= 1, got '-1'"),
    ("serve-max-body-zero", ["serve", "-j", "openai:m", "--store", "{tmp}/s.sqlite", "--max-body", "0"], "--max-body: expected a number >= 1, got '0'"),
    ("serve-store-foreign-sqlite", ["serve", "-j", "openai:m", "--store", "{tmp}/" + FOREIGN_DB], "expected a judgeblender store, got 'another SQLite database"),
    ("serve-token-file-missing", ["serve", "-j", "openai:m", "--store", "{tmp}/s.sqlite", "--token-file", "{tmp}/none.txt"], "none.txt: expected an existing file, got 'no such file'"),
    # blend
    ("blend-judge-file-is-a-directory", ["blend", "a={tmp}/adir", "b={pred.qrels}", "-o", "{tmp}/b.qrels"], "adir: expected an existing file, got 'a directory'"),
    ("blend-out-is-an-input", ["blend", "{pred.qrels}", "{gold.qrels}", "-o", "{pred.qrels}"], "pred.qrels: expected an output file that is not also an input"),
    ("blend-details-is-a-directory", ["blend", "--details", "{tmp}/adir", "-o", "{tmp}/b.qrels"], "adir: expected an existing file, got 'a directory'"),
    ("blend-pairs-is-missing", ["blend", "{pred.qrels}", "{gold.qrels}", "--pairs", "{tmp}/nope.tsv", "-o", "{tmp}/b.qrels"], "nope.tsv: expected an existing file, got 'no such file'"),
    ("blend-spread-out-of-range", ["blend", "{pred.qrels}", "{gold.qrels}", "--spread", "9"], "--spread: expected a number in [0, 4], got '9'"),
    ("blend-margin-out-of-range", ["blend", "{pred.qrels}", "{gold.qrels}", "--margin", "1.5"], "--margin: expected a number in [0, 1], got '1.5'"),
    ("blend-tiebreaker-is-a-directory", ["blend", "{pred.qrels}", "{gold.qrels}", "--tiebreaker", "big={tmp}/adir", "-o", "{tmp}/b.qrels"], "adir: expected an existing file, got 'a directory'"),
    # agree, correlate, compare
    ("agree-prediction-is-a-directory", ["agree", "{tmp}/adir", "--gold", "{gold.qrels}"], "adir: expected an existing file, got 'a directory'"),
    ("agree-gold-is-a-directory", ["agree", "{pred.qrels}", "--gold", "{tmp}/adir"], "adir: expected an existing file, got 'a directory'"),
    ("agree-bootstrap-negative", ["agree", "{pred.qrels}", "--gold", "{gold.qrels}", "--bootstrap", "-1"], "--bootstrap: expected a number >= 0, got '-1'"),
    ("agree-confidence-one", ["agree", "{pred.qrels}", "--gold", "{gold.qrels}", "--confidence", "1"], "--confidence: expected a number in (0, 1), got '1'"),
    ("correlate-runs-not-a-directory", ["correlate", "{pred.qrels}", "--gold", "{gold.qrels}", "--runs", "{notes.txt}"], "notes.txt: expected a directory of run files, got 'a file'"),
    ("correlate-confidence-nan", [*CORR, "--confidence", "nan"], "--confidence: expected a finite number, got 'nan'"),
    ("correlate-bootstrap-negative", [*CORR, "--bootstrap", "-1"], "--bootstrap: expected a number >= 0, got '-1'"),
    ("correlate-plot-is-a-directory", [*CORR, "--plot", "{tmp}/adir"], "adir: expected an output file path, got 'a directory'"),
    ("correlate-groups-is-a-directory", [*CORR, "--groups", "{tmp}/adir"], "adir: expected an existing file, got 'a directory'"),
    ("estimate-llm-missing", ["estimate", "--llm", "{tmp}/none.qrels", "--human", "{gold.qrels}", "--runs", "{tmp}/runs"],
     "none.qrels: expected an existing file, got 'no such file'"),
    ("estimate-runs-is-a-file", ["estimate", "--llm", "{pred.qrels}", "--human", "{gold.qrels}", "--runs", "{gold.qrels}"],
     "gold.qrels: expected a directory of run files, got 'a file'"),
    ("estimate-design-is-a-directory", [*EST, "--design", "{tmp}/adir"], "adir: expected an existing file, got 'a directory'"),
    ("estimate-confidence-nan", [*EST, "--confidence", "nan"], "--confidence: expected a finite number, got 'nan'"),
    ("estimate-target-width-zero", [*EST, "--plan", "--target-width", "0"], "--target-width: expected a number > 0, got '0'"),
    ("experiment-topics-missing", ["experiment", "--runs", "{tmp}/runs", "--topics", "{tmp}/none.tsv", "--llm", "{pred.qrels}"],
     "none.tsv: expected an existing file, got 'no such file'"),
    ("experiment-depth-zero", ["experiment", "--runs", "{tmp}/runs", "--topics", "{queries.tsv}", "--llm", "{pred.qrels}", "--depth", "0"],
     "--depth: expected a number >= 1, got '0'"),
    ("compare-runs-missing", ["compare", "--qrels", "{gold.qrels}", "--runs", "{tmp}/none"], "none: expected a directory of run files, got 'no such file'"),
    ("compare-min-judged-out-of-range", [*COMPARE, "--min-judged", "1.5"], "--min-judged: expected a number in [0, 1], got '1.5'"),
    # pool, label, fill, report
    ("pool-depth-zero", [*POOL, "-o", "{tmp}/p.tsv", "--depth", "0"], "--depth: expected a number >= 1, got '0'"),
    ("pool-out-is-a-directory", [*POOL, "-o", "{tmp}/adir"], "adir: expected an output file path, got 'a directory'"),
    ("pool-exclude-is-a-directory", [*POOL, "-o", "{tmp}/p.tsv", "--exclude", "{tmp}/adir"], "adir: expected an existing file, got 'a directory'"),
    ("pool-sample-out-read-only-disk", [*POOL, "-o", "{tmp}/p.tsv", "--sample", "2", "--sample-out", "{ro}/s.tsv"], "s.tsv: expected an output file in a writable folder"),
    ("label-port-out-of-range", [*LABEL, "-o", "{tmp}/l.qrels", "--port", "70000"], "--port: expected a number in [0, 65535], got '70000'"),
    ("label-out-is-an-input", [*LABEL, "-o", "{queries.tsv}"], "queries.tsv: expected an output file that is not also an input"),
    ("label-journal-is-a-directory", [*LABEL, "-o", "{tmp}/l.qrels", "--journal", "{tmp}/adir"], "adir: expected an output file path, got 'a directory'"),
    ("fill-out-is-the-gold", [*FILL, "-o", "{gold.qrels}"], "gold.qrels: expected an output file that is not also an input"),
    ("fill-provenance-full-disk", [*FILL, "-o", "{tmp}/f.qrels", "--provenance", "{full}/p.tsv"], "p.tsv: expected an output file on a disk with free space"),
    ("fill-pairs-is-a-directory", [*FILL, "-o", "{tmp}/f.qrels", "--pairs", "{tmp}/adir"], "adir: expected an existing file, got 'a directory'"),
    ("report-out-is-a-directory", [*REPORT, "-o", "{tmp}/adir"], "adir: expected an output file path, got 'a directory'"),
    ("report-store-missing", [*REPORT, "-o", "{tmp}/r.html", "--store", "{tmp}/none.sqlite"], "none.sqlite: expected an existing store, got 'no such file'"),
    ("report-min-judged-nan", [*REPORT, "-o", "{tmp}/r.html", "--min-judged", "nan"], "--min-judged: expected a finite number, got 'nan'"),
    ("report-seed-qrels-missing", [*REPORT, "-o", "{tmp}/r.html", "--seed-qrels", "{tmp}/none.qrels"], "none.qrels: expected an existing file, got 'no such file'"),
    ("report-design-is-a-directory", [*REPORT, "-o", "{tmp}/r.html", "--seed-qrels", "{gold.qrels}", "--design", "{tmp}/adir"], "adir: expected an existing file, got 'a directory'"),
    ("report-confidence-zero", [*REPORT, "-o", "{tmp}/r.html", "--confidence", "0"], "--confidence: expected a number in (0, 1), got '0'"),
    # calibrate
    ("calibrate-out-is-a-directory", [*CAL, "-o", "{tmp}/adir"], "adir: expected an output file path, got 'a directory'"),
    ("calibrate-folds-one", [*CAL, "-o", "{tmp}/p.toml", "--folds", "1"], "--folds: expected a number >= 2, got '1'"),
    ("calibrate-time-limit-nan", [*CAL, "-o", "{tmp}/p.toml", "--time-limit", "nan"], "--time-limit: expected a finite number, got 'nan'"),
    ("calibrate-labels-is-a-directory", ["calibrate", "--gold", "{gold.qrels}", "--labels", "{tmp}/adir", "-o", "{tmp}/p.toml"], "adir: expected an existing file, got 'a directory'"),
    # prompts, store
    ("prompts-show-a-folder", ["prompts", "show", "{tmp}/adir"], "adir: expected an existing prompt template file (.toml), got 'a directory'"),
    ("prompts-render-a-folder", ["prompts", "render", "{tmp}/adir", "--query", "q", "--passage", "p"], "adir: expected an existing prompt template file (.toml)"),
    ("store-merge-input-missing", ["store", "merge", "--out", "{tmp}/m.sqlite", "{tmp}/none.sqlite"],
     "none.sqlite: expected an existing store, got 'no such file'"),
    ("store-stats-missing", ["store", "stats", "--store", "{tmp}/none.sqlite"], "none.sqlite: expected an existing store, got 'no such file'"),
    ("store-stats-foreign-sqlite", ["store", "stats", "--store", "{tmp}/" + FOREIGN_DB], "expected a judgeblender store, got 'another SQLite database"),
    ("store-export-not-sqlite", ["store", "export", "--store", "{notes.txt}", "-o", "{tmp}/e.jsonl"], "notes.txt: expected a judgeblender store (an SQLite file)"),
    ("store-export-out-is-the-store", ["store", "export", "--store", "{tmp}/good.sqlite", "-o", "{tmp}/good.sqlite"], "good.sqlite: expected an output file that is not also an input"),
    ("store-judgments-out-is-a-directory", ["store", "judgments", "--store", "{tmp}/good.sqlite", "-o", "{tmp}/adir"], "adir: expected an output file path, got 'a directory'"),
    ("store-check-foreign-sqlite", ["store", "check", "--store", "{tmp}/" + FOREIGN_DB], "expected a judgeblender store, got 'another SQLite database"),
]


def _mount_tmpfs(folder: Path, read_only: bool = False, fill: bool = False) -> bool:
    """A 64 KiB tmpfs at `folder` (root only: CI writes through file permissions, so no chmod)."""
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True).returncode:
        return False
    if fill:
        try:
            with open(folder / "filler", "wb") as fh:
                fh.write(b"\0" * 200_000)
        except OSError:
            pass
    if read_only:
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    return True


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def option_results(tmp_path_factory):
    """Every option case's CLI run against one counting server; the folders' files before and after."""
    import sqlite3

    from judgeblender.store import CallStore

    root = tmp_path_factory.mktemp("options")
    mounts = {"ro": root / "ro", "full": root / "full"}
    mounted = {"ro": _mount_tmpfs(mounts["ro"], read_only=True), "full": _mount_tmpfs(mounts["full"], fill=True)}
    runs, snapshots = {}, {}
    with OpenAITestServer("##final score: 2") as server:
        for cid, command, _ in OPTION_CASES:
            tmp = root / cid
            tmp.mkdir()
            for name, content in OPT_FILES.items():
                path = tmp / name
                path.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(content, bytes):
                    path.write_bytes(content)
                else:
                    path.write_text(content.replace("{tmp}", str(tmp)), encoding="utf-8")
            db = sqlite3.connect(tmp / FOREIGN_DB)
            db.execute("CREATE TABLE songs (title TEXT)")
            db.commit()
            db.close()
            CallStore(tmp / "good.sqlite").close()
            values = {"tmp": str(tmp), "url": server.base_url, "ro": str(mounts["ro"]), "full": str(mounts["full"]),
                      **{name: str(tmp / name) for name in OPT_FILES}}
            runs[cid] = [re.sub(r"\{([^{}]+)\}", lambda m: values[m.group(1)], arg) for arg in command]
            snapshots[cid] = _snapshot(tmp)
        try:
            with ThreadPoolExecutor(4) as pool:
                done = dict(zip(runs, pool.map(run_cli, runs.values())))
            requests = len(server.requests)
            mount_files = {k: sorted(p.name for p in m.iterdir()) for k, m in mounts.items() if mounted[k]}
        finally:
            for key, folder in mounts.items():
                if mounted[key]:
                    subprocess.run(["umount", str(folder)], capture_output=True)
    after = {cid: _snapshot(root / cid) for cid in runs}
    return {"procs": done, "requests": requests, "before": snapshots, "after": after, "mounted": mounted,
            "mount_files": mount_files}


def test_every_command_option_case_names_a_command_of_the_cli():
    from judgeblender.cli.checks import ROLES

    commands = {" ".join(cmd[:2]) if cmd[0] in ("store", "prompts") else cmd[0] for _, cmd, _ in OPTION_CASES}
    assert commands >= set(ROLES)  # a case for every command that reads user input
    assert len({cid for cid, _, _ in OPTION_CASES}) == len(OPTION_CASES)


@pytest.mark.parametrize("case", OPTION_CASES, ids=[c[0] for c in OPTION_CASES])
def test_bad_option_is_one_error_line_before_any_call(case, option_results):
    cid, command, expected = case
    if ("{ro}" in " ".join(command) and not option_results["mounted"]["ro"]) or (
            "{full}" in " ".join(command) and not option_results["mounted"]["full"]):
        pytest.skip("needs root to mount a tmpfs")
    proc = option_results["procs"][cid]
    assert "Traceback" not in proc.stderr and "Usage:" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and expected in errors[0], proc.stderr
    assert option_results["after"][cid] == option_results["before"][cid]  # no input changed, no file made


def test_bad_options_made_no_model_call_and_left_the_mounts_empty(option_results):
    assert option_results["requests"] == 0
    assert option_results["mount_files"].get("ro", []) == []
    assert option_results["mount_files"].get("full", ["filler"]) == ["filler"]  # the probes were removed


def test_every_path_and_number_option_of_every_command_has_a_check():
    """A new option that reads a file or takes a number must be listed in cli/checks.py."""
    import typer.main

    from judgeblender.cli import build_app
    from judgeblender.cli.checks import NUMBERS, ROLES

    def walk(cmd, prefix):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                yield from walk(sub, f"{prefix}{name} " if prefix or hasattr(sub, "commands") else f"{name} ")
        else:
            yield prefix.strip(), cmd

    def kinds(param) -> set:
        """The Python types an option's annotation names (Path, int, float ...), through Optional and lists."""
        descriptor = getattr(param, "type_descriptor", None)
        annotation = getattr(descriptor, "annotation", None) if descriptor is not None else None
        if annotation is None:  # typer on click: the click type's name
            kind = getattr(getattr(param, "type", None), "name", "")
            return {"path" if "path" in kind.lower() else kind}
        found, todo = set(), [annotation]
        while todo:
            t = todo.pop()
            args = typing.get_args(t)
            todo.extend(args) if args else found.add(t)
        return {"path" if t is Path else "integer" if t is int else "float" if t is float else str(t) for t in found}

    unchecked, seen = [], 0
    for name, cmd in walk(typer.main.get_command(build_app()), ""):
        for param in cmd.params:
            kind = kinds(param)
            seen += bool(kind & {"path", "integer", "float"})
            is_path = "path" in kind or param.name in ROLES.get(name, {})
            if is_path and param.name not in ROLES.get(name, {}):
                unchecked.append(f"{name} --{param.name}")
            if kind & {"integer", "float"} and param.name not in NUMBERS and param.name not in ("seed", "binary_threshold"):
                unchecked.append(f"{name} --{param.name} ({kind})")
    assert seen > 50  # the types were really read: the CLI has dozens of path and number options
    assert not unchecked
