"""What `judgeblender serve` does with a request, apart from HTTP: read the body's pairs, judge
them through the engine with the server's one store, and answer each pair as `judge` would.

Kept apart from the ASGI app (app.py), which only adds HTTP (auth, limits, metrics) around it,
so this module imports no web framework and its rules can be read, and tested, on their own.

A request's pairs are judged by `judges.engine.judge_pairs_async` in the server's event loop, the
judges built once at start; their answers go through the store, so an answer already in it is
served from it, and a model's answer counts (and is returned) only once its row is committed
(judges/commit.py). Each pair's `details` is the record `judge` writes to its details file for
the same inputs and store (judges/outputs.py `detail_record`), and the panel's blend is the one
`judge --panel` streams: a per-pair rule, applied to the request's pairs in their order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from ..errors import ArgumentError, JudgeblenderError
from ..flight import SingleFlight
from ..judges.commit import writes_later
from ..judges.engine import JudgeRun, judge_pairs_async, window_texts
from ..judges.factory import build_judge
from ..judges.injection import InjectionScan
from ..judges.judge import Judge, JudgeSpec
from ..judges.outputs import detail_record, final_labels
from ..pairs import Pair
from ..pairs.texts import text_problem
from ..panels.panel import Panel, ballots_from_run
from ..panels.run_panel import blend_info, streams
from ..store import CallStore

PAIR_FIELDS = ("qid", "docid", "query", "passage")
T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    """What one request may ask, and how many may wait: past them the answer is an error that
    says which limit (408, 413, 429), never a slow or dropped request. A request is admitted to
    the queue only once its body is read, and bodies being read are bounded apart, with a time
    to arrive: a client that stalls mid-body holds a reading place for `read_timeout_s` at most,
    and never a place in the queue."""

    max_body: int = 8 * 1024 * 1024  # bytes of a request body
    max_pairs: int = 1000  # pairs in one POST /v1/judge
    max_queue: int = 256  # requests admitted at once (being judged or waiting to be), bodies read
    max_reading: int = 64  # request bodies being received at once (a slow client holds one)
    read_timeout_s: float = 30.0  # seconds a request's whole body may take to arrive (then 408)


class TooLarge(JudgeblenderError):
    """A request past a size limit (the body, or its pairs): HTTP 413."""


@dataclass
class Requested:
    """A request's pairs, in its order, with the texts they are judged on."""

    pairs: list[Pair]
    queries: dict[str, str]
    passages: dict[str, str]


def _id(value: Any, where: str) -> str:
    """A qid or docid: a non-empty string, or an integer (TREC's ids often are), read as its text."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise ArgumentError(where, "a non-empty string (or an integer)", value)
    return value


def _text(value: Any, where: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise ArgumentError(where, "a non-blank string", value, hint=f"it is {problem}")
    return value


def read_pairs(body: Any, limits: Limits, queries: Mapping[str, str] | None,
               corpus: Mapping[str, str] | None) -> Requested:
    """The pairs of a POST /v1/judge body ({"pairs": [{"qid", "docid", "query", "passage"}, ...]}),
    each field checked and named as `pairs[3].passage` when wrong. A pair may leave out its query
    or passage when the server was started with --queries or --corpus: the text is looked up by
    id. A pair given twice, or an id given two different texts, is an error: the answer is one
    label per pair, in the request's order."""
    if not isinstance(body, dict):
        raise ArgumentError("body", "a JSON object {\"pairs\": [...]}", described=f"a JSON {_json_type(body)}")
    unknown = sorted(set(body) - {"pairs"})
    if unknown:
        raise ArgumentError(unknown[0], "only the field 'pairs' in the body", described="an unknown field")
    items = body.get("pairs")
    if not isinstance(items, list):
        raise ArgumentError("pairs", "a list of pairs {qid, docid, query, passage}",
                            described="nothing" if items is None else f"a JSON {_json_type(items)}")
    if not items:
        raise ArgumentError("pairs", "at least one pair", described="an empty list")
    if len(items) > limits.max_pairs:
        raise TooLarge(f"pairs: expected at most {limits.max_pairs} pairs in one request, got {len(items)}; "
                       "send them in several requests")
    pairs: list[Pair] = []
    texts: dict[str, dict[str, str]] = {"query": {}, "passage": {}}
    where_first: dict[Any, str] = {}
    missing: dict[str, list[tuple[int, str]]] = {"query": [], "passage": []}
    for i, item in enumerate(items):
        at = f"pairs[{i}]"
        if not isinstance(item, dict):
            raise ArgumentError(at, "an object {qid, docid, query, passage}", described=f"a JSON {_json_type(item)}")
        extra = sorted(set(item) - set(PAIR_FIELDS))
        if extra:
            raise ArgumentError(f"{at}.{extra[0]}", "only the fields qid, docid, query, passage",
                                described="an unknown field")
        pair = Pair(_id(item.get("qid"), f"{at}.qid"), _id(item.get("docid"), f"{at}.docid"))
        if pair in where_first:
            raise ArgumentError(at, "each (qid, docid) pair once in a request",
                                described=f"({pair.qid}, {pair.docid}) again, first given as {where_first[pair]}")
        where_first[pair] = at
        pairs.append(pair)
        for kind, key in (("query", pair.qid), ("passage", pair.docid)):
            if kind not in item:
                missing[kind].append((i, key))
                continue
            text = _text(item[kind], f"{at}.{kind}")
            known = texts[kind].setdefault(key, text)
            if known != text:
                raise ArgumentError(f"{at}.{kind}", f"the same {kind} text as {where_first[kind, key]} gave for "
                                    f"{'qid' if kind == 'query' else 'docid'} {key!r}", described="another text")
            where_first.setdefault((kind, key), f"{at}.{kind}")
    _look_up(missing["query"], texts["query"], queries, "query", "qid", "--queries")
    _look_up(missing["passage"], texts["passage"], corpus, "passage", "docid", "--corpus")
    return Requested(pairs, texts["query"], texts["passage"])


def _look_up(wanted: list[tuple[int, str]], found: dict[str, str], source: Mapping[str, str] | None,
             kind: str, id_name: str, flag: str) -> None:
    """The texts of the pairs that gave only an id, from the server's --queries or --corpus."""
    wanted = [(i, key) for i, key in wanted if key not in found]  # another pair of the request gave it
    if not wanted:
        return
    if source is None:
        i, _ = wanted[0]
        raise ArgumentError(f"pairs[{i}].{kind}", "a non-blank string",
                            described=f"none, and this server has no {flag} to look the {id_name} up in")
    looked = window_texts(source, (key for _, key in wanted))
    for i, key in wanted:
        if key not in looked:
            raise ArgumentError(f"pairs[{i}].{id_name}", f"a {id_name} of the server's {flag} (or the pair's {kind})",
                                key)
        found[key] = _text(looked[key], f"pairs[{i}].{kind}")


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null",
            int: "number", float: "number"}.get(type(value), type(value).__name__)


class Service:
    """The judges (one, or a panel's members) built once, the server's store, and the panel's
    blend: what every request is judged with. `close` (in the server's event loop) closes the
    judges' connections, then the store, so everything answered is committed."""

    def __init__(self, judging: JudgeSpec | Panel, store: CallStore, queries: Mapping[str, str] | None = None,
                 corpus: Mapping[str, str] | None = None, limits: Limits = Limits()):
        if isinstance(judging, Panel) and not streams(judging, None):
            raise ArgumentError("panel", "a panel whose blend is a per-pair rule (each pair's label its own)",
                                judging.method, hint="a blend fitted across pairs (Dawid-Skene, GLAD) would "
                                "give a pair a label that depends on the other pairs of its request")
        self.panel = judging if isinstance(judging, Panel) else None
        self.specs = list(judging.judges) if isinstance(judging, Panel) else [judging]
        self.store, self.queries, self.corpus, self.limits = store, queries, corpus, limits
        self.judges: list[Any] = []
        try:
            for spec in self.specs:
                self.judges.append(build_judge(spec))
        except BaseException:
            self._close_built()
            raise
        self.blend = blend_info(self.panel) if self.panel is not None else None
        self.scan = InjectionScan(self.judges)  # remembers a bounded number of texts (injection.REMEMBERED)
        self.worker = ThreadPoolExecutor(1, thread_name_prefix="judgeblender-serve")  # off_loop
        # the model calls being made for any request, by store key: a pair asked by concurrent
        # requests is asked of the model once, the others wait for its answer (judges/callpool.py)
        self.flight = SingleFlight()

    def _close_built(self) -> None:
        for judge in self.judges:
            getattr(judge, "close", lambda: None)()

    async def prepare(self) -> None:
        """Everything the judges load before their first call (an SDK, its clients, the store's
        writer process), loaded now, in the server's loop before it says it is ready: the first
        request then blocks the loop on none of it (GET /v1/health stays fast from the start)."""
        for judge in self.judges:
            if isinstance(judge, Judge):
                await judge.backend.aprepare()
                if writes_later(judge.backend):
                    self.store.write_in_child()

    async def close(self) -> None:
        """Close the judges' connections on this loop, then the store (its last commits waited for)."""
        try:
            for judge in self.judges:
                if isinstance(judge, Judge):
                    await judge.backend.aclose()
            self._close_built()
        finally:
            self.worker.shutdown()
            self.store.close()

    def read(self, body: Any) -> Requested:
        return read_pairs(body, self.limits, self.queries, self.corpus)

    async def off_loop(self, work: Callable[..., T], *args: Any) -> T:
        """`work(*args)` in the service's worker thread, the event loop free meanwhile: reading a
        body's JSON and texts, scanning passages, blending and writing the answer cost up to
        half a second for a request of 8 MB, which every other request (GET /v1/health too)
        would wait on. One thread: the corpus's file and the scan's memory are used by one
        thread at a time, as before, and requests' work is done in the order it comes."""
        return await asyncio.get_running_loop().run_in_executor(self.worker, work, *args)

    async def judge(self, asked: Requested) -> tuple[JudgeRun, list[dict[str, Any]]]:
        """The request's pairs judged: the run, and one result per pair in the request's order."""
        run = await judge_pairs_async(self.judges, asked.pairs, asked.queries, asked.passages, self.store,
                                      flight=self.flight)
        return run, await self.off_loop(self.answers, run, asked)

    def answers(self, run: JudgeRun, asked: Requested) -> list[dict[str, Any]]:
        """One result per judged pair, in the request's order: the blend, the injection scan's
        findings and each pair's details record."""
        extra: dict[Pair, dict[str, Any]] = {}
        if self.panel is not None:
            result = self.panel.blender().blend(ballots_from_run(run))  # a fresh blender: as `judge` on these pairs
            labels = result.by_pair()
            extra = {pair: {"blend_reason": dec.reason, "tied": list(dec.tied) if dec.tied else None}
                     for pair, dec in zip(result.table.pairs, result.decisions)}
        else:
            labels = final_labels(run)
        for pair, found in self.scan.flag_run(run, asked.queries, asked.passages).items():
            extra.setdefault(pair, {})["injection"] = [str(f) for f in found]  # reported: labels stay as judged
        return [self.result(run, pair, labels, extra) for pair in run.pairs]

    def result(self, run: JudgeRun, pair: Pair, labels: dict[Pair, int | None],
               extra: dict[Pair, dict[str, Any]]) -> dict[str, Any]:
        """One pair's answer: its label (null, with the reason, where there is none: never a
        made-up label), the expected score of a single judge in logprobs mode, each member's
        label, validity and reason, and the record `judge` writes to its details file."""
        details = detail_record(run, pair, labels, self.blend, extra)
        members = {jid: {"label": rec["label"], "valid": rec["label"] is not None or rec["score"] is not None,
                         "reason": rec["invalid_reason"] or rec["reason"], "expected": rec["expected"]}
                   for jid, rec in details["judges"].items()}
        label = labels.get(pair)
        reason = None
        if label is None:
            if self.panel is not None:
                reason = details.get("blend_reason") or "no member gave a valid label"
            else:
                reason = details.get("invalid_reason") or "no valid label"
        expected = details.get("expected") if self.panel is None else None
        return {"qid": pair.qid, "docid": pair.docid, "label": label, "valid": label is not None, "reason": reason,
                "expected": expected, "judges": members, "details": details}

    def describe(self) -> dict[str, Any]:
        """What is serving (GET /v1/panel): its members, how they are blended, and the
        calibration figures a calibrated panel file carries."""
        members = []
        for spec, judge in zip(self.specs, self.judges):
            members.append({"id": judge.id, "model": spec.model, "prompt": spec.prompt, "mode": spec.mode,
                            "weight": spec.weight, "seed": spec.seed, "invalid_policy": spec.invalid_policy})
        panel = self.panel
        info: dict[str, Any] = {"judges": members}
        if panel is not None:
            info.update(panel=panel.name, source=str(panel.source), method=panel.method, tie=panel.tie,
                        seed=panel.seed, thresholds=panel.thresholds, weights=panel.weights(),
                        calibration=_calibration(panel), warning=panel.warning)
        else:
            info.update(panel=None, method=None)
        info["limits"] = asdict(self.limits)
        info["ids_only"] = {"queries": self.queries is not None, "corpus": self.corpus is not None}
        return info


def _calibration(panel: Panel) -> dict[str, Any] | None:
    """The calibration figures of a panel file written by `calibrate`: its header (the seed set,
    every candidate's held-out kappa) and its [selection] table where it has one; None for a
    preset or a list of judges."""
    source = str(panel.source)
    if not source.endswith(".toml"):
        return None
    import tomllib

    try:
        with open(source, "rb") as fh:
            text = fh.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    header = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        header.append(line.lstrip("#").strip())
    try:
        selection = tomllib.loads(text).get("selection")
    except tomllib.TOMLDecodeError:
        selection = None
    if not header and selection is None:
        return None
    return {"notes": header, "selection": selection}
