"""Reading queries, passages, qrels, runs and pairs; bad input names file, line and expectation."""

import gzip

import pytest

from judgeblender.errors import InputError
from judgeblender.pairs import Pair, read_corpus, read_pairs, read_qrels, read_queries, read_run


def write(tmp_path, name, text, gz=False):
    path = tmp_path / name
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_queries_tsv(tmp_path):
    path = write(tmp_path, "q.tsv", "1\tfirst query\n2\tsecond\tquery with tab\n\n")
    assert read_queries(path) == {"1": "first query", "2": "second\tquery with tab"}


@pytest.mark.parametrize("text,line,expected", [
    ("1 no tab here\n", 1, "'query_id<TAB>text'"),
    ("1\tok\n2\t   \n", 2, "non-blank text"),
    ("1\tok\n1\tother\n", 2, "one text per query id"),
    ("", None, "at least one query"),
])
def test_bad_queries_name_the_line(tmp_path, text, line, expected):
    path = write(tmp_path, "q.tsv", text)
    with pytest.raises(InputError) as err:
        read_queries(path)
    assert err.value.line == line
    assert expected in str(err.value)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("record", [
    '{"docid": "a", "text": "alpha"}',
    '{"id": "a", "contents": "alpha"}',
    '{"doc_id": "a", "text": "alpha"}',
])
def test_corpus_shapes(tmp_path, record):
    path = write(tmp_path, "c.jsonl", record + "\n")
    assert read_corpus(path) == {"a": "alpha"}


def test_corpus_gzip_and_wanted_subset(tmp_path):
    path = write(tmp_path, "c.jsonl.gz", '{"docid": "a", "text": "x"}\n{"docid": "b", "text": "y"}\n', gz=True)
    assert read_corpus(path, wanted={"b"}) == {"b": "y"}


def test_corpus_bad_json_line(tmp_path):
    path = write(tmp_path, "c.jsonl", '{"docid": "a", "text": "x"}\n{"docid": "b", "text": \n')
    with pytest.raises(InputError, match=r"c.jsonl:2: expected one JSON object per line"):
        read_corpus(path)


def test_corpus_missing_text_field(tmp_path):
    path = write(tmp_path, "c.jsonl", '{"docid": "a", "body2": "x"}\n')
    with pytest.raises(InputError, match=r":1: expected a text field"):
        read_corpus(path)


def test_invalid_utf8_names_line(tmp_path):
    path = tmp_path / "q.tsv"
    path.write_bytes(b"1\tok\n2\tbad \xff byte\n")
    with pytest.raises(InputError, match=r"q.tsv:2: expected UTF-8 text"):
        read_queries(path)


def test_bom_is_dropped(tmp_path):
    path = tmp_path / "q.tsv"
    path.write_bytes("\ufeff1\tquery\n".encode("utf-8"))
    assert read_queries(path) == {"1": "query"}


def test_truncated_gzip(tmp_path):
    full = tmp_path / "full.gz"
    with gzip.open(full, "wt") as fh:
        fh.write("".join(f"q{i} 0 d{i} 1\n" for i in range(2000)))
    cut = tmp_path / "cut.gz"
    cut.write_bytes(full.read_bytes()[:-200])
    with pytest.raises(InputError, match="complete gzip stream"):
        read_qrels(cut)


def test_qrels_contradictory_duplicate_is_an_error(tmp_path):
    path = write(tmp_path, "r.qrels", "1 0 a 2\n1 0 a 2\n1 0 a 3\n")
    with pytest.raises(InputError, match=r"r.qrels:3: expected one label per pair"):
        read_qrels(path)


@pytest.mark.parametrize("text,expected", [
    ("1 0 a\n", "4 columns"),
    ("1 0 a two\n", "an integer label"),
])
def test_bad_qrels(tmp_path, text, expected):
    with pytest.raises(InputError, match=expected):
        read_qrels(write(tmp_path, "r.qrels", text))


@pytest.mark.parametrize("text", [
    "1 0 a 2\n1\t0\tb 0\r\n\n2 0 c 3\n",  # the plain case: read as one block
    "\ufeff1 0 a 2\n1 0 b 0\n2 0 c 3\n",  # a byte-order mark: read line by line
    "1 0 a 2\n1 0 b 0\n2 0 c\x0c 3\n",  # a control character: read line by line
])
def test_qrels_read_the_same_by_either_reader(tmp_path, text):
    assert read_qrels(write(tmp_path, "r.qrels", text)) == {"1": {"a": 2, "b": 0}, "2": {"c": 3}}


@pytest.mark.parametrize("text,line", [
    ("1 0 a 2\n\n1 0 b\n", 3),  # plain file: the block reader names the line
    ("1 0 a 2\n1 0 b\x01 1\n", 2),  # a control character in an id: the line reader names it
])
def test_qrels_errors_name_the_line_on_both_readers(tmp_path, text, line):
    with pytest.raises(InputError, match=rf"r.qrels:{line}: expected"):
        read_qrels(write(tmp_path, "r.qrels", text))


def test_qrels_label_range(tmp_path):
    with pytest.raises(InputError, match=r"a label in \[0, 1, 2, 3\]"):
        read_qrels(write(tmp_path, "r.qrels", "1 0 a 7\n"), allowed=range(4))


def test_run_orders_by_score_and_validates(tmp_path):
    path = write(tmp_path, "x.run", "1 Q0 a 1 1.0 t\n1 Q0 b 2 3.0 t\n1 Q0 c 3 2.0 t\n")
    assert read_run(path).top("1", 2) == ["b", "c"]
    with pytest.raises(InputError, match="rank >= 0"):
        read_run(write(tmp_path, "neg.run", "1 Q0 a -1 1.0 t\n"))
    with pytest.raises(InputError, match="6 columns"):
        read_run(write(tmp_path, "short.run", "1 Q0 a 1 1.0\n"))


def test_pairs_from_each_format_deduplicated(tmp_path):
    assert read_pairs(write(tmp_path, "p.tsv", "1\ta\n1\ta\n2 b\n")) == [Pair("1", "a"), Pair("2", "b")]
    assert read_pairs(write(tmp_path, "p.qrels", "1 0 a 0\n2 0 b 3\n")) == [Pair("1", "a"), Pair("2", "b")]
    run = write(tmp_path, "p.run", "1 Q0 a 1 3 t\n1 Q0 b 2 2 t\n1 Q0 c 3 1 t\n")
    assert read_pairs(run, depth=2) == [Pair("1", "a"), Pair("1", "b")]


def test_pairs_unknown_shape(tmp_path):
    with pytest.raises(InputError, match=r"p.txt:1: expected 2 columns"):
        read_pairs(write(tmp_path, "p.txt", "1 2 3\n"))
