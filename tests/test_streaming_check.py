"""The validation pass of a streamed run over a JSONL corpus reads no passage line: the index
recorded, as it was built, what a prompt could not show, and finds ids by two hashes. Its
verdicts and errors are the ones a pass that read every passage gives (an in-memory corpus)."""

from __future__ import annotations

import json

import pytest

from judgeblender.errors import InputError, JudgeblenderError
from judgeblender.judges.engine import check_stream
from judgeblender.pairs import Pair, read_corpus
from judgeblender.pairs import passage_index
from judgeblender.pairs.passage_index import PassageIndex


def corpus_file(tmp_path, texts: dict[str, str], extra_lines: tuple[str, ...] = ()):
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"docid": d, "text": t}) + "\n" for d, t in texts.items())
                    + "".join(extra_lines))
    return path


def counted_reads(monkeypatch) -> list[int]:
    reads: list[int] = []
    real = PassageIndex._read

    def read(self, k):
        reads.append(k)
        return real(self, k)

    monkeypatch.setattr(PassageIndex, "_read", read)
    return reads


def test_the_validation_pass_reads_no_passage_and_judging_reads_each_once(tmp_path, monkeypatch):
    texts = {f"d{i}": f"text {i}" for i in range(40)}
    path = corpus_file(tmp_path, texts)
    queries = {f"q{i}": f"question {i}" for i in range(4)}
    pairs = [Pair(f"q{i % 4}", f"d{i}") for i in range(40)]
    with PassageIndex(path) as index:
        reads = counted_reads(monkeypatch)
        assert check_stream(pairs, queries, index, window=7) == (40, [])
        assert reads == []
        assert index.get_many([f"d{i}" for i in range(40)]) == texts
        assert len(reads) == 40


def test_skips_and_errors_are_those_of_a_pass_that_reads_every_passage(tmp_path):
    texts = {**{f"d{i}": f"text {i}" for i in range(20)}, "d5": " \u200b\u2060 ", "d9": "x\u00a0"}
    path = corpus_file(tmp_path, texts)
    queries = {f"q{i}": f"question {i}" for i in range(4)}
    pairs = [Pair(f"q{i % 4}", f"d{i}") for i in range(20)] + [Pair("q1", "nope"), Pair("q9", "d3")]
    in_memory = read_corpus(path)
    with PassageIndex(path) as index:
        assert index.problems_many(["d5", "d9", "d1", "nope"]) == {"d5": "blank", "d9": None, "d1": None}
        skipped = check_stream(pairs, queries, index, skip_missing=True, window=6)
        assert skipped == check_stream(pairs, queries, in_memory, skip_missing=True, window=6)
        assert ("d5" in str(skipped)) and ("nope" in str(skipped))
        with pytest.raises(JudgeblenderError) as streamed:
            check_stream(pairs, queries, index, window=6)
    with pytest.raises(JudgeblenderError) as read:
        check_stream(pairs, queries, in_memory, window=6)
    assert str(streamed.value) == str(read.value)


def test_a_refused_passage_is_refused_by_the_check_as_get_many_refuses_it(tmp_path):
    lines = (json.dumps({"docid": "d7", "text": "another text"}) + "\n",
             json.dumps({"docid": "blank", "text": "   "}) + "\n")
    path = corpus_file(tmp_path, {f"d{i}": f"text {i}" for i in range(10)}, lines)
    with PassageIndex(path) as index:
        for asked in (["d1", "d7", "blank"], ["blank", "d1"], ["blank", "d7"]):
            with pytest.raises(InputError) as by_read:
                index.get_many(asked)
            with pytest.raises(InputError) as by_check:
                index.problems_many(asked)
            assert str(by_check.value) == str(by_read.value)


def test_ids_sharing_a_hash_are_told_apart_without_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(passage_index, "id_hash", lambda docid: 7)  # every id collides
    path = corpus_file(tmp_path, {f"d{i}": f"text {i}" for i in range(30)})
    with PassageIndex(path) as index:
        reads = counted_reads(monkeypatch)
        assert index.problems_many(["d29", "d3", "nope"]) == {"d29": None, "d3": None}
        assert reads == []
