"""Property-based tests of the input readers (queries TSV, corpus JSONL, qrels, TREC runs, pairs).

Valid files, generated with ids and texts from all of Unicode, read back exactly what was
written; a valid file with one line made malformed is one InputError naming the file and that
line: never another exception, never a value read some other way. Derandomised under CI
(tests/conftest.py).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="needs the hypothesis package ([dev] extra)")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from judgeblender.errors import InputError  # noqa: E402
from judgeblender.pairs import Pair, read_corpus, read_pairs, read_qrels, read_queries, read_run  # noqa: E402

EXAMPLES = settings(max_examples=60)

# Identifiers: any non-empty text without whitespace, control characters or lone surrogates.
# (U+FEFF is left out: at the start of a file it is a byte-order mark, dropped as documented.)
ids = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zs", "Zl", "Zp"), blacklist_characters="\ufeff"),
              min_size=1, max_size=6).filter(
    lambda s: not any(c.isspace() for c in s))
ascii_ids = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=6)
# In the malformed-line tests the bad line's ids never equal a valid line's (which would be
# another error, a repeat, at another line).
bad_ids = ids.map(lambda s: "bad" + s)
bad_ascii_ids = ascii_ids.map(lambda s: "bad" + s)
# Texts: anything printable (control characters are a documented repair, not a round trip).
texts = st.text(st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\ufeff"), min_size=1,
                max_size=30).filter(str.strip)
seps = st.sampled_from([" ", "\t", "  ", " \t"])
line_ends = st.sampled_from(["\n", "\r\n"])


def write(text: str | bytes, name: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="jb-prop-"))
    path = folder / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def assert_names_line(read, path: Path, lineno: int) -> InputError:
    with pytest.raises(InputError) as err:
        read(path)
    assert err.value.path == str(path) and err.value.line == lineno, str(err.value)
    assert f"{path}:{lineno}: expected" in str(err.value)
    return err.value


def replace_line(lines: list[str], data, bad: str) -> tuple[list[str], int]:
    k = data.draw(st.integers(0, len(lines)), label="line")
    return lines[:k] + [bad] + lines[k:], k + 1


# --- queries ------------------------------------------------------------------------------------

queries_maps = st.dictionaries(ids, texts, min_size=1, max_size=6)


@EXAMPLES
@given(queries_maps, line_ends)
def test_a_valid_queries_file_reads_back_exactly(queries, end):
    path = write("".join(f"{q}\t{t}{end}" for q, t in queries.items()), "q.tsv")
    assert list(read_queries(path).items()) == list(queries.items())


bad_query_lines = st.one_of(
    bad_ids,  # no tab
    st.builds(lambda q, s: f"{q}\t{s}", bad_ids, st.sampled_from(["", " ", "\t "])),  # blank text
    st.builds(lambda q, c, t: f"{q}{c}\t{t}", bad_ids, st.sampled_from(["\x00", "\x07", "\x1b", "\x85"]), texts),
    st.builds(lambda q, a, b: f"{q}\t{a}\r{b}", bad_ids, texts, texts),  # a lone CR: two lines read as one
)


@EXAMPLES
@given(queries_maps, bad_query_lines, st.data())
def test_a_malformed_queries_line_is_one_error_naming_file_and_line(queries, bad, data):
    lines, lineno = replace_line([f"{q}\t{t}" for q, t in queries.items()], data, bad)
    path = write("\n".join(lines) + "\n", "q.tsv")
    assert_names_line(read_queries, path, lineno)


# --- corpus -------------------------------------------------------------------------------------

@EXAMPLES
@given(st.dictionaries(ids, st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1).filter(str.strip),
                       min_size=1, max_size=6),
       st.sampled_from(["docid", "doc_id", "id"]), st.sampled_from(["text", "contents"]), st.booleans(), line_ends)
def test_a_valid_corpus_reads_back_exactly(corpus, id_key, text_key, ascii_only, end):
    path = write("".join(json.dumps({id_key: d, text_key: t}, ensure_ascii=ascii_only) + end
                         for d, t in corpus.items()), "c.jsonl")
    assert list(read_corpus(path).items()) == list(corpus.items())


bad_corpus_lines = st.one_of(
    st.just('{"docid": "x", "text": '),  # not JSON
    st.sampled_from(["[1, 2]", '"text"', "3", "null"]),  # not an object
    st.builds(lambda t: json.dumps({"text": t}), texts),  # no id
    st.builds(lambda v: json.dumps({"docid": v, "text": "t"}), st.sampled_from([1.5, True, None, [1], {"a": 1}])),
    st.builds(lambda v: json.dumps({"docid": "badx", "text": v}), st.sampled_from([1, None, ["a"], True])),
    st.builds(lambda s: json.dumps({"docid": "badx", "text": f"a{s}b"}), st.sampled_from(["\ud800", "\udfff"])),
    st.builds(lambda s: json.dumps({"docid": f"badx{s}", "text": "t"}), st.sampled_from(["\ud83d", "\x00", " y"])),
)


@EXAMPLES
@given(st.dictionaries(ids, texts, min_size=1, max_size=5), bad_corpus_lines, st.data())
def test_a_malformed_corpus_line_is_one_error_naming_file_and_line(corpus, bad, data):
    lines, lineno = replace_line([json.dumps({"docid": d, "text": t}) for d, t in corpus.items()], data, bad)
    path = write("\n".join(lines) + "\n", "c.jsonl")
    assert_names_line(read_corpus, path, lineno)


# --- qrels --------------------------------------------------------------------------------------

qrels_rows = st.lists(st.tuples(ids, ids, st.integers(-1, 4)), min_size=1, max_size=10,
                      unique_by=lambda r: (r[0], r[1]))


@EXAMPLES
@given(qrels_rows, seps, line_ends)
def test_valid_qrels_read_back_exactly(rows, sep, end):
    path = write("".join(sep.join([q, "0", d, str(label)]) + end for q, d, label in rows), "x.qrels")
    expected: dict = {}
    for q, d, label in rows:
        expected.setdefault(q, {})[d] = label
    assert read_qrels(path) == expected


bad_labels = st.one_of(
    st.sampled_from(["1.5", "2.0", "1e0", "x", "1_0", "0x1", "３", "١", "²", "NaN", "--1"]),
    st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zs", "Zl", "Zp")), min_size=1, max_size=3).filter(
        lambda s: not s.lstrip("+-").isascii() or not s.lstrip("+-").isdigit()).filter(
        lambda s: not any(c.isspace() for c in s)),
)
bad_qrels_lines = st.one_of(
    st.builds(lambda q, d, lab: f"{q} 0 {d} {lab}", bad_ids, bad_ids, bad_labels),
    st.builds(lambda q, d: f"{q} 0 {d}", bad_ids, bad_ids),  # 3 columns
    st.builds(lambda q, d: f"{q} 0 {d} 1 extra", bad_ids, bad_ids),
    st.builds(lambda q, c: f"{q}{c} 0 d 1", bad_ids, st.sampled_from(["\x00", "\x01", "\x7f", "\x9b"])),
)


@EXAMPLES
@given(qrels_rows, bad_qrels_lines, st.data())
def test_a_malformed_qrels_line_is_one_error_naming_file_and_line(rows, bad, data):
    lines, lineno = replace_line([f"{q} 0 {d} {label}" for q, d, label in rows], data, bad)
    path = write("\n".join(lines) + "\n", "x.qrels")
    assert_names_line(read_qrels, path, lineno)


# --- TREC runs ----------------------------------------------------------------------------------

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
score_text = st.one_of(finite.map(repr), finite.map(lambda x: f"{x:.6f}"), st.integers(-10**6, 10**6).map(str),
                       st.sampled_from(["1e-3", "-0.0", "+2.5", ".5", "5.", "1E2"]))


def run_rows(id_strategy):
    return st.lists(st.tuples(id_strategy, id_strategy, score_text), min_size=1, max_size=12,
                    unique_by=lambda r: (r[0], r[1]))


def ranked(rows) -> dict:
    """What trec_eval ranks: queries in order of first appearance, score descending, ties by docid descending."""
    out: dict = {}
    for q, d, s in rows:
        out.setdefault(q, []).append((d, float(s)))
    return {q: sorted(sorted(docs, key=lambda e: e[0], reverse=True), key=lambda e: e[1], reverse=True)
            for q, docs in out.items()}


@EXAMPLES
@given(st.one_of(run_rows(ascii_ids), run_rows(ids)), seps, line_ends)
def test_a_valid_run_reads_back_exactly_in_trec_eval_order(rows, sep, end):
    path = write("".join(sep.join([q, "Q0", d, str(k), s, "tag"]) + end for k, (q, d, s) in enumerate(rows)), "r.run")
    assert read_run(path).ranking == ranked(rows)


bad_scores = st.sampled_from(["nan", "inf", "-Infinity", "1_0", "0x1p3", "１", "1.5.2", "score", "1e999", "--1"])
bad_run_lines = st.one_of(
    st.builds(lambda q, d, s: f"{q} Q0 {d} 1 {s} tag", bad_ascii_ids, bad_ascii_ids, bad_scores),
    st.builds(lambda q, d, s: f"{q} Q0 {d} 1 {s} tag", bad_ids, bad_ids, bad_scores),
    st.builds(lambda q, d: f"{q} Q0 {d} 1 0.5", bad_ids, bad_ids),  # 5 columns
    st.builds(lambda q, d, r: f"{q} Q0 {d} {r} 0.5 tag", bad_ids, bad_ids, st.sampled_from(["-1", "x", "1.5"])),
    st.builds(lambda q, c: f"{q}{c} Q0 d 1 0.5 tag", bad_ascii_ids, st.sampled_from(["\x01", "\x07", "\x7f"])),
)


@EXAMPLES
@given(run_rows(ascii_ids), bad_run_lines, st.data())
def test_a_malformed_run_line_is_one_error_naming_file_and_line(rows, bad, data):
    lines, lineno = replace_line([f"{q} Q0 {d} {k} {s} tag" for k, (q, d, s) in enumerate(rows)], data, bad)
    path = write("\n".join(lines) + "\n", "r.run")
    assert_names_line(read_run, path, lineno)


# --- pairs files --------------------------------------------------------------------------------

@EXAMPLES
@given(st.lists(st.tuples(ids, ids), min_size=1, max_size=10), seps, line_ends)
def test_a_valid_pairs_file_reads_back_in_first_seen_order(pairs, sep, end):
    path = write("".join(f"{q}{sep}{d}{end}" for q, d in pairs), "p.tsv")
    assert read_pairs(path) == list(dict.fromkeys(Pair(q, d) for q, d in pairs))


bad_pair_lines = st.one_of(
    st.builds(lambda q, d: f"{q} {d} extra", bad_ids, bad_ids),
    bad_ids,
    st.builds(lambda q, c: f"{q}{c} d", bad_ids, st.sampled_from(["\x00", "\x08", "\x7f"])),
)


@EXAMPLES
@given(st.lists(st.tuples(ids, ids), min_size=1, max_size=6), bad_pair_lines, st.data())
def test_a_malformed_pairs_line_is_one_error_naming_file_and_line(pairs, bad, data):
    lines, lineno = replace_line([f"{q}\t{d}" for q, d in pairs], data, bad)
    path = write("\n".join(lines) + "\n", "p.tsv")
    assert_names_line(lambda p: read_pairs(p, fmt="tsv"), path, lineno)


# --- any bytes at all ---------------------------------------------------------------------------

@settings(max_examples=80)
@given(st.binary(max_size=200), st.sampled_from(["queries", "corpus", "qrels", "run", "pairs"]))
def test_arbitrary_bytes_are_read_or_refused_with_an_input_error(blob, kind):
    readers = {"queries": read_queries, "corpus": read_corpus, "qrels": read_qrels, "run": read_run,
               "pairs": read_pairs}
    path = write(blob, f"{kind}.txt")
    try:
        readers[kind](path)
    except InputError as exc:
        assert str(path) in str(exc)
