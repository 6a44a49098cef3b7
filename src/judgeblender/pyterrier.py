"""judgeblender inside PyTerrier: a jury as a transformer, and qrels with their holes filled.

    import pyterrier as pt
    from judgeblender.pyterrier import Judge, fill_qrels
    pipe = bm25 % 10 >> Judge(["llamacpp:default"], corpus="passages.jsonl", store="j.sqlite")
    qrels = fill_qrels([bm25, other], topics, qrels=human, corpus="passages.jsonl", judges=[...])
    pt.Experiment([bm25, other], topics, qrels, eval_metrics=["nDCG@10"])

This module needs the [pyterrier] extra (it subclasses pt.Transformer); `import judgeblender`
never imports it. The judging is jb.judge's (api.py), the pooling and filling holes.py's: this
module only speaks PyTerrier's frames (qid, query, docno, text, score, rank; qrels qid, docno,
label). `label` is PyTerrier's qrels column and `score`/`rank` the retriever's, so a jury writes
its own jb_* columns and leaves them alone unless asked to rerank.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import arguments, convert
from .errors import JudgeblenderError, require
from .evaluate.scope import DEFAULT_SCOPE

pt = require("pyterrier", "pyterrier", "judgeblender.pyterrier")

__all__ = ["Judge", "fill_qrels"]


class Judge(pt.Transformer):
    """A jury as a PyTerrier transformer: judges every (query, document) row of a result frame.

    The frame needs qid, query, docno and either text or a `corpus` (a passages file, a {docno:
    text} dict or an `irds:` id) to look the texts up. Adds jb_label (the blended label, nullable
    Int64: <NA> where no judge gave a valid answer), jb_expected (the mean of the valid members'
    expected labels; a generated answer's expected label is the label itself), jb_valid and jb_reason (the members' reasons, "judge: reason"), and with
    `members=True` a jb_label.<judge> column per member. With `rerank=True` the score becomes
    jb_expected and the ranks follow it (a row without a valid label ranks last). Calls go through
    `store` (a path or CallStore): a re-run makes no model call."""

    def __init__(self, judges: Any = ("llamacpp:default",), *, prompt: str = "umbrela", mode: str = "generate",
                 store: Any = None, blend: str = "mv", corpus: Any = None, members: bool = False,
                 rerank: bool = False, options: Mapping[str, Any] | None = None):
        from .api import panel
        from .blend import METHODS

        arguments.one_of("blend", blend, METHODS)
        arguments.flag("members", members)
        arguments.flag("rerank", rerank)
        self.panel = panel(judges, prompt=prompt, mode=mode, options=options)  # a bad jury fails here
        self.prompt, self.mode, self.store, self.blend = prompt, mode, store, blend
        self.corpus, self.members, self.rerank, self.options = corpus, members, rerank, options

    def __repr__(self) -> str:
        return f"Judge({', '.join(j.id for j in self.panel.judges)})"

    def transform(self, inp):
        import pandas as pd

        from .api import judge

        df = convert.project_columns(inp, ("qid", "docid"), "Judge")
        if "query" not in df.columns:
            raise JudgeblenderError(f"Judge: a result frame needs a query column (it has {list(inp.columns)})")
        out = inp.copy()
        if not len(df):
            for col in ("jb_label", "jb_expected", "jb_valid", "jb_reason"):
                out[col] = pd.Series(dtype={"jb_label": "Int64", "jb_expected": float, "jb_valid": bool}.get(col, object))
            return out
        corpus = self.corpus
        if "passage" in df.columns:
            frame = df[["qid", "docid", "query", "passage"]]
        elif corpus is not None:
            frame = df[["qid", "docid", "query"]]
        else:
            raise JudgeblenderError("Judge needs the passage texts: a text column (pt.text.get_text) or corpus=")
        run = judge(frame, self.panel, corpus=None if "passage" in df.columns else corpus, store=self.store)
        keys = list(zip(df["qid"].astype(str), df["docid"].astype(str)))
        blended = run.blend(self.blend).set_index(["qid", convert.DOCNO])["label"]
        labels = run.labels
        valid = labels[labels["valid"]]
        # a generated answer is one label: its expected value is that label (logprobs give a distribution)
        expected = valid["expected"].fillna(valid["label"].astype(float)).groupby([valid["qid"], valid[convert.DOCNO]]).mean()
        reasons = labels.dropna(subset=["reason"]).assign(r=lambda t: t["judge"] + ": " + t["reason"].astype(str))
        reason = reasons.groupby(["qid", convert.DOCNO])["r"].agg("; ".join)
        out["jb_label"] = pd.array([blended.get(k, pd.NA) for k in keys], dtype="Int64")
        out["jb_expected"] = [float(expected.get(k, float("nan"))) for k in keys]
        out["jb_valid"] = out["jb_label"].notna().to_numpy()
        out["jb_reason"] = [reason.get(k) for k in keys]
        if self.members:
            for jid, mine in labels.groupby("judge", sort=False):
                per = mine.set_index(["qid", convert.DOCNO])["label"]
                out[f"jb_label.{jid}"] = pd.array([per.get(k, pd.NA) for k in keys], dtype="Int64")
        if self.rerank:
            out["score"] = out["jb_expected"]
            out = out.sort_values(["qid", "score"], ascending=[True, False], na_position="last", kind="stable")
            out["rank"] = out.groupby("qid").cumcount()
        return out


def fill_qrels(systems: Any, topics: Any, *, qrels: Any, corpus: Any = None, judges: Any = None,
               llm_labels: Any = None, prompt: str = "umbrela", mode: str = "generate", store: Any = None,
               k: int = 10, blend: str = "mv", names: Sequence[str] | None = None,
               options: Mapping[str, Any] | None = None, scope: str = DEFAULT_SCOPE):
    """PyTerrier qrels (qid, docno, label as int, provenance) with the holes of `qrels` filled: the
    "filled" labels of jb.experiment, built by the same code (holes.fill, evaluate/scope.py). The
    documents in the systems' top k that the human labels lack are judged by `judges` (through
    `store`), or `llm_labels` (label files or frames) are taken. `scope`: 'labels' (default) fills
    every pair the LLM labels and keeps every human label; 'pool' keeps the pooled pairs only (the
    systems' top k), so its numbers depend on the systems given. provenance is "human" or the judge.
    Pairs left without a valid label are left out, counted in a note (logged, and in the frame's
    attrs["notes"]); attrs also say the scope and which topics did not count (no human label).
    `pt.Experiment(systems, topics, filled, eval_metrics=[...])` runs on it and gives the filled
    column of jb.experiment with the same systems, topics and scope. It is `jb.fill`
    (workflow.py), which needs no PyTerrier, under PyTerrier's name for it."""
    from .workflow import fill

    return fill(systems, topics, qrels=qrels, corpus=corpus, judges=judges, llm_labels=llm_labels, prompt=prompt,
                mode=mode, store=store, k=k, blend=blend, names=names, options=options, scope=scope)

