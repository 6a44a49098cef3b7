"""`jb.Client` against a real `judgeblender serve`: the same labels, blend and agreement as
`jb.judge` on the same inputs (TREC DL 2019 passages) and the same canned model."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from openai_server import OpenAITestServer
from pandas.testing import assert_frame_equal
from serve_helpers import API_KEY, Served, answer_of, dl19_frame

import judgeblender as jb
from judgeblender.errors import ArgumentError, JudgeblenderError

DL19 = Path(__file__).parent / "data" / "dl19_slice"


@pytest.fixture
def frame() -> pd.DataFrame:
    return dl19_frame(45)


def gold() -> Path:
    return DL19 / "qrels.txt"


def same(a, b) -> None:
    assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))


def test_client_judge_equals_jb_judge_one_judge(frame, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    with OpenAITestServer(answer_of, max_requests=5000) as upstream:
        local = jb.judge(frame, ["openai:test-model"], options={"base_url": upstream.base_url},
                         store=tmp_path / "local.sqlite", progress=False)
        with Served(["-j", "openai:test-model", "--base-url", upstream.base_url, "--store",
                     str(tmp_path / "served.sqlite"), "--max-pairs", "20"]) as served:
            client = jb.Client(served.url)
            remote = client.judge(frame)  # 45 pairs: three requests of at most 20
            assert list(remote.labels.columns[:2]) == ["qid", "docno"]  # the API's one vocabulary (issue 39)
            assert isinstance(remote, jb.Judged)
            same(remote.labels, local.labels)
            assert remote.labels["label"].isna().any()  # invalid answers stay <NA>, never 0
            same(remote.blend(), local.blend())
            same(remote.agreement(gold(), bootstrap=50), local.agreement(gold(), bootstrap=50))
            assert remote.judges == local.judges
            assert remote.summary()["judged"].tolist() == local.summary()["judged"].tolist()
            # ids and texts given apart, as jb.judge takes them: the same run, from the store
            queries = dict(zip(frame["qid"], frame["query"]))
            corpus = dict(zip(frame["docid"], frame["passage"]))
            again = client.judge(list(zip(frame["qid"], frame["docid"])), queries=queries, corpus=corpus)
            same(again.labels, local.labels)
            assert again.summary()["calls_made"].tolist() == [0]
            assert served.stop() == 0


def test_client_judge_equals_jb_judge_for_a_panel(frame, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    panel = tmp_path / "panel.toml"
    panel.write_text('name = "pair"\n[aggregator]\nmethod = "mv"\ntie = "avg"\n'
                     '[[judges]]\nmodel = "openai:test-model"\nprompt = "umbrela"\n'
                     '[[judges]]\nmodel = "openai:test-model"\nprompt = "thomas"\n')
    with OpenAITestServer(answer_of, max_requests=5000) as upstream:
        local = jb.judge(frame, str(panel), options={"base_url": upstream.base_url}, store=tmp_path / "l.sqlite",
                         progress=False)
        with Served(["--panel", str(panel), "--base-url", upstream.base_url, "--store",
                     str(tmp_path / "s.sqlite")]) as served:
            remote = jb.Client(served.url).judge(frame)
            same(remote.labels, local.labels)
            same(remote.blend(), local.blend())
            same(remote.blend("median", tie="min"), local.blend("median", tie="min"))
            same(remote.agreement(gold(), bootstrap=50), local.agreement(gold(), bootstrap=50))
            assert remote.panel.name == "pair" and [s.id for s in remote.panel.judges] == local.judges


def test_client_tokens_and_errors(frame, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("tok-client-5e1\n")
    with OpenAITestServer(answer_of) as upstream, Served(["-j", "openai:test-model", "--base-url", upstream.base_url,
                                                          "--store", str(tmp_path / "s.sqlite"), "--token-file",
                                                          str(tokens)]) as served:
        with pytest.raises(JudgeblenderError, match="401"):
            jb.Client(served.url).judge(frame.head(2))
        with pytest.raises(JudgeblenderError, match="401"):
            jb.Client(served.url, token="tok-wrong").judge(frame.head(2))
        client = jb.Client(served.url, token="tok-client-5e1")
        assert "tok-client" not in repr(client)
        assert client.judge(frame.head(2)).labels.shape[0] == 2
    with pytest.raises(ArgumentError, match="url"):
        jb.Client("127.0.0.1:8000")
    with pytest.raises(JudgeblenderError, match="cannot reach"):
        jb.Client("http://127.0.0.1:9").health()
    with pytest.raises(ArgumentError, match="pairs"):
        jb.Client("http://127.0.0.1:9").judge([], queries={}, corpus={})
