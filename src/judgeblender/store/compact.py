"""How a call and a judgment are laid out in the store (schema 5): each repeated text once.

A judging run asks one model, with one prompt and one set of decoding settings, about many
pairs, so nearly every byte of a call's request repeats the call before it: the model's
identity, the settings and the prompt template around the query and the passage. Schema 4
stored all of it with every call, 2.7-4.4 KB per call on 60-word passages (docs/scale-out.md).
Here:

- identities, settings and judge ids are stored once each in `texts`, under an id derived from
  their content (the first 8 bytes of their sha256), so two stores give one text one id and
  `store merge` copies rows as they are;
- the messages are zlib-compressed against a dictionary: the messages of the first call of the
  same shape (same settings and roles, same first characters of each message). What a call adds
  to the dictionary is, nearly always, its query and passage, so that is about all it costs.
  The dictionary is itself a text in `texts`, so every row decompresses with what the store holds,
  and `store export` gives back the exact prompt;
- a served answer's metadata (`extra`: finish reason, served model, fingerprint, top tokens) is
  compressed the same way against the model's first one;
- a judgment's details (its steps, raw answers and cuts) are zlib-compressed against a fixed
  dictionary of the record's key names; label, probabilities, expected value and invalid reason
  stay columns, for SQL and for `store merge`'s conflict checks;
- times are Unix seconds (REAL), shown as ISO 8601 in exports;
- every text a row holds (messages, answer, parsed label, probabilities, metadata, a judgment's
  record) is masked first (judgeblender.masking: the API keys this process holds, in every form
  a server may echo them), in whichever process makes the row: the driver, or the writer process,
  which the driver tells the secrets (store/writer.py). Text that holds none is stored as it is;
- under Ray, the worker that got an answer makes its row's costly parts (`row_parts`: the
  messages and metadata compressed against the dictionaries this store chose, sent to it by the
  driver; the probabilities' JSON), and the store uses each part only where its dictionary is
  the one it chooses for the row (`Texts.encode_result`), so the row is the same byte for byte.

Blobs start with a format byte, so a later layout can be added without reading old ones wrong.
Nothing here is lossy: `decode_*` gives back what `encode_*` was given (tests check this on
every kind of call the engine makes).
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections.abc import Callable
from functools import lru_cache
from datetime import datetime, timezone
from typing import Any, NamedTuple

from .. import masking
from ..calls import CallRequest, CallResult, canonical_json
from ..hashing import sha256_text

# blob format bytes
_RAW = b"\x00"  # zlib, no dictionary
_SHAPED = b"\x01"  # zlib against the row's shape dictionary (messages)
_DETAILS_V1 = b"\x02"  # zlib against DETAILS_DICT_V1 (judgment details)
_DETAILS_V2 = b"\x03"  # zlib against DETAILS_DICT_V1 + the row's own probabilities (their steps repeat them)

# The names a judgment record (judges.judgment.Judgment.record) is made of, most common last
# (zlib finds the end of a dictionary cheapest). Never change this text: stored details were
# compressed against it. A new dictionary needs a new format byte.
DETAILS_DICT_V1 = (
    '"workers":{"node":"","pid":}"min_choice_mass":0.01"reasoning":null"reason":null"score":null'
    '"stopped_at":null"truncated":null"fallback":null"invalid_reason":null"expected":"label":'
    '"probs":{"0":"1":"2":"3":}"raw_output":"##final score: "'
    '"steps":[{"attempt":0,"invalid_reason":null,"key":"probs":{"0":"1":"2":"3":},"raw":"'
    '","reason":null,"step":"final","value":}]'
).encode()

MAX_SHAPES_PER_SETTINGS = 64  # more prompt shapes than this under one setting share its first dictionary
_SHAPE_CHARS = 32


def text_id(text: str) -> int:
    """The id of a text in `texts`: its sha256's first 8 bytes as a signed 64-bit integer."""
    return int.from_bytes(bytes.fromhex(sha256_text(text)[:16]), "big", signed=True)


def unix_now() -> float:
    return datetime.now(timezone.utc).timestamp()


def iso(seconds: float | str | None) -> str | None:
    """Unix seconds as the ISO 8601 text schema 4 stored (milliseconds, UTC)."""
    if seconds is None or isinstance(seconds, str):
        return seconds
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds")


def unix(text: str | float | None) -> float | None:
    if text is None or isinstance(text, (int, float)):
        return text
    return datetime.fromisoformat(text).timestamp()


# An 8 KiB window and memLevel 6: a prompt's dictionary (1-3 KB) fits in the window, and the
# compressor's state stays under glibc's mmap threshold. The default 32 KiB window and memLevel 9
# made each call's compressor an mmap/munmap pair: 309 us of the driver's time per stored call
# against 54 us now (a microbenchmark of Texts.encode_call on UMBRELA prompts), for the same
# bytes on 60-word passages. Inflating takes any window up to 32 KiB, so every blob reads back.
_WBITS, _MEMLEVEL = 13, 6


# Compressors already primed with a dictionary, copied for each blob: setting a 1-3 KB
# dictionary indexes all of it, and a copy of the primed state costs a third less (same bytes:
# the copy is the state compressobj would have made). A store uses a handful of dictionaries
# (one per prompt shape, the details' own); the cache is emptied when it holds _PRIMED_MAX.
_PRIMED: dict[tuple[bytes | None, int], Any] = {}
_PRIMED_MAX = 64

# The messages and metadata are compressed at level 3: a prompt is nearly all its dictionary,
# whose long matches level 3 finds as well as level 6, at 19.5 us a UMBRELA prompt against 31 us
# (5,000 prompts of the S workload; 160 bytes a blob against 156). A judgment's details, short
# and matched piecewise, keep level 6 (95 bytes against 86 at level 3, for 0.7 us). Inflating
# does not depend on the level: every blob written at either reads back.
MESSAGES_LEVEL, DETAILS_LEVEL = 3, 6


def _compressor(zdict: bytes | None, level: int) -> Any:
    return zlib.compressobj(level, zlib.DEFLATED, _WBITS, _MEMLEVEL, zlib.Z_DEFAULT_STRATEGY,
                            *((zdict,) if zdict else ()))


def _deflate(data: bytes, zdict: bytes | None) -> bytes:
    """A call's messages or metadata compressed against `zdict` (at MESSAGES_LEVEL)."""
    return _compress(data, zdict, MESSAGES_LEVEL)


def _compress(data: bytes, zdict: bytes | None, level: int, reuse: bool = True) -> bytes:
    """`data` compressed against `zdict` at `level`; `reuse` False for a dictionary made for this
    blob alone (a judgment's probabilities join it), which a cache would only churn."""
    if not reuse:
        packer = _compressor(zdict, level)
    else:
        primed = _PRIMED.get((zdict, level))
        if primed is None:
            if len(_PRIMED) >= _PRIMED_MAX:
                _PRIMED.clear()
            primed = _PRIMED[zdict, level] = _compressor(zdict, level)
        packer = primed.copy()
    return packer.compress(data) + packer.flush()


def _inflate(data: bytes, zdict: bytes | None) -> bytes:
    unpacker = zlib.decompressobj(15, zdict) if zdict else zlib.decompressobj()
    return unpacker.decompress(data) + unpacker.flush()


# The details blobs of the latest distinct details without probabilities, by their JSON: a
# judge whose answers repeat (a generate-mode judge answering "##final score: 2", an instant
# one) gives many pairs the same details, and compressing them again cost 9-10 us a judgment
# (pack_details on a UMBRELA generate record: 6-8 us against 15-18). The same bytes, as compressing is
# deterministic; the latest 256 kept (a few hundred bytes each).
@lru_cache(maxsize=256)
def _packed_details(text: str) -> bytes:
    return _DETAILS_V1 + _compress(text.encode(), DETAILS_DICT_V1, DETAILS_LEVEL)


def pack_details(record: dict[str, Any], probs: str | None = None) -> bytes:
    """A judgment's details, compressed; `probs` (the row's probs column) joins the dictionary."""
    text = canonical_json(record)
    if probs:
        return _DETAILS_V2 + _compress(text.encode(), DETAILS_DICT_V1 + probs.encode(), DETAILS_LEVEL, reuse=False)
    return _packed_details(text)


def unpack_details(blob: bytes, probs: str | None = None) -> dict[str, Any]:
    fmt, body = blob[:1], blob[1:]
    if fmt == _DETAILS_V2:
        return json.loads(_inflate(body, DETAILS_DICT_V1 + (probs or "").encode()))
    if fmt == _DETAILS_V1:
        return json.loads(_inflate(body, DETAILS_DICT_V1))
    if fmt == _RAW:
        return json.loads(_inflate(body, None))
    raise ValueError(f"unknown details format byte {fmt!r}")


JUDGMENT_COLUMNS = ("label", "probs", "expected", "invalid_reason")
CALLS_INSERT = "INSERT OR REPLACE INTO calls VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
JUDGMENTS_INSERT = "INSERT OR REPLACE INTO judgments VALUES (?,?,?,?,?,?,?,?,?)"


def _pack(text: str, zdict: bytes) -> bytes:
    return _SHAPED + _deflate(text.encode(), zdict)


def shape_of(messages: list) -> str:
    """What makes two calls' messages one shape: their roles and each message's first characters.
    `messages`: [role, content] pairs."""
    if len(messages) == 1:  # the common case, without the joins (a tenth of the cost)
        (role, content), = messages
        return f"{role}|{content[:_SHAPE_CHARS]}"
    return ",".join([role for role, _ in messages]) + "|" + "|".join([c[:_SHAPE_CHARS] for _, c in messages])


# The JSON of flat dicts that repeat from call to call, by their items: the engine's readings
# ({"value": 2, "invalid_reason": None}) and an in-process model's metadata ({"finish_reason": "stop"}).
_EXACT = (type(None), str, int)


@lru_cache(maxsize=4096)
def _flat_json(items: tuple) -> str:
    return canonical_json(dict(items))


def flat_json(obj: dict[str, Any] | None) -> str | None:
    """canonical_json of a row's `parsed` reading or an answer's metadata, made once per distinct
    dict whose values are all None, str or int (a run's answers repeat a handful of them); other
    values are encoded each time: floats (0.0 and -0.0 are equal keys but different JSON), bools
    (equal to 0 and 1), lists and dicts."""
    if obj is None:
        return None
    items = tuple(obj.items())
    if not all(type(v) in _EXACT for _, v in items):
        return canonical_json(obj)
    return _flat_json(items)


class RowParts(NamedTuple):
    """The costly parts of an answer's `calls` row, made by the Ray worker that got the answer
    (`row_parts`) so the driver does not: the messages compressed against `dictionary`, the
    metadata (`extra`) as JSON and compressed against `extra_dict`, the probabilities as JSON.
    A part is None where the worker did not have its dictionary; the store checks each against
    the dictionary it chooses and makes any that differ itself (Texts.encode_result)."""

    dictionary: int | None
    messages: bytes | None
    extra_dict: int | None
    extra_blob: bytes | None
    extra_json: str | None
    probs: str | None


def row_parts(request: CallRequest, result: CallResult, dictionary: int | None, extra_dict: int | None,
              zdicts: dict[int, bytes]) -> RowParts:
    """A worker's RowParts for one answer: `dictionary` and `extra_dict` are the store's choices
    (Texts.row_hint), `zdicts` the dictionaries' bytes the worker has been sent."""
    zdict = zdicts.get(dictionary) if dictionary is not None else None
    messages = None
    if zdict is not None:
        messages = _pack(request.messages_json(), zdict)
    extra_json = canonical_json(result.extra) if result.extra else None
    extra_zdict = zdicts.get(extra_dict) if extra_dict is not None and extra_json is not None else None
    extra_blob = _pack(extra_json, extra_zdict) if extra_zdict is not None else None  # type: ignore[arg-type]
    probs = canonical_json(result.probs) if result.probs is not None else None
    return RowParts(dictionary if messages is not None else None, messages, extra_dict if extra_blob else None,
                    extra_blob, extra_json, probs)


class Texts:
    """The `texts` table and the shape dictionaries, with what this connection has seen cached."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db
        self._known: set[int] = set()
        self._values: dict[int, str] = {}
        # What this connection has seen, by content, so a repeated text (an identity, settings, a
        # dictionary) costs a dict lookup, not a sha256: every stored call repeats several.
        self._ids: dict[str, int] = {}
        self._shapes: dict[str, int] = {}  # "group|shape text" -> dictionary id
        self._dict_bytes: dict[int, bytes] = {}
        self._shapes_per_settings: dict[int, int] = {}
        self._first_dict: dict[int, int] = {}
        self._settings: dict[tuple, int] = {}  # CallRequest.settings_key() -> settings id
        # The last metadata packed, with its dictionary and blob: an in-process or scripted model's
        # metadata is the same for nearly every answer, and compressing it again cost 10-15 us a
        # call (the same bytes: zlib is deterministic); a served one's differs by its response id.
        self._last_extra: tuple[int | None, str | None, bytes] = (None, None, b"")
        # inserts kept for another connection to run in its transaction (store.writer), or None: run here
        self.deferred: list[tuple[str, tuple]] | None = None

    def _insert(self, statement: str, row: tuple) -> None:
        if self.deferred is None:
            self.db.execute(statement, row)
        else:
            self.deferred.append((statement, row))

    def put(self, text: str) -> int:
        tid = self._ids.get(text)
        if tid is not None:
            return tid
        tid = text_id(text)
        if tid not in self._known:
            self._insert("INSERT OR IGNORE INTO texts VALUES (?, ?)", (tid, text))
            self._known.add(tid)
            self._values[tid] = text
        self._ids[text] = tid
        return tid

    def get(self, tid: int) -> str:
        text = self._values.get(tid)
        if text is None:
            row = self.db.execute("SELECT text FROM texts WHERE id = ?", (tid,)).fetchone()
            if row is None:
                raise sqlite3.DatabaseError(f"the store has no text {tid} (a damaged or partly copied store)")
            text = self._values[tid] = row[0]
            self._known.add(tid)
        return text

    def _dictionary(self, group: int, shape_text: str, sample: Callable[[], str]) -> int:
        """The dictionary of a shape (`shape_text` hashed) within `group` (a settings or identity
        id): the first `sample()` of that shape, stored as a text; past MAX_SHAPES_PER_SETTINGS
        shapes in one group, the group's first dictionary."""
        name = f"{group}|{shape_text}"
        found = self._shapes.get(name)
        if found is not None:
            return found
        shape = text_id(name)
        row = self.db.execute("SELECT dict FROM shapes WHERE shape = ?", (shape,)).fetchone()
        if row is None:
            if group not in self._shapes_per_settings:
                n, first = self.db.execute(
                    "SELECT COUNT(*), MIN(dict) FROM shapes WHERE settings = ?", (group,)).fetchone()
                self._shapes_per_settings[group] = n
                if first is not None:
                    self._first_dict[group] = first
            if self._shapes_per_settings[group] >= MAX_SHAPES_PER_SETTINGS:
                row = (self._first_dict[group],)  # a group's count only grows: this shape keeps it
            else:
                dictionary = self.put(sample())
                self._insert("INSERT OR IGNORE INTO shapes VALUES (?, ?, ?)", (shape, group, dictionary))
                self._shapes_per_settings[group] += 1
                self._first_dict.setdefault(group, dictionary)
                row = (dictionary,)
        self._shapes[name] = row[0]
        return row[0]

    def _zdict(self, dictionary: int) -> bytes:
        zdict = self._dict_bytes.get(dictionary)
        if zdict is None:
            zdict = self._dict_bytes[dictionary] = self.get(dictionary).encode()
        return zdict

    def _pack(self, text: str, dictionary: int) -> bytes:
        return _pack(text, self._zdict(dictionary))

    def _unpack(self, blob: bytes, dictionary: int | None) -> str:
        fmt, body = blob[:1], blob[1:]
        if fmt == _SHAPED:
            return _inflate(body, self.get(dictionary).encode()).decode()  # type: ignore[arg-type]
        if fmt == _RAW:
            return _inflate(body, None).decode()
        raise ValueError(f"unknown blob format byte {fmt!r}")

    # -- calls -------------------------------------------------------------------------------------
    def encode_call(self, key: str, backend: str, identity: dict[str, Any], request: dict[str, Any],
                    raw_output: str, parsed: str | None, probs: str | None, choice_mass: float | None,
                    tokens_in: int | None, tokens_out: int | None, latency_s: float | None,
                    created_at: float, extra: str | None) -> tuple:
        """One `calls` row from a schema 4 row: `request` is CallRequest.key_fields()."""
        messages = request["messages"]
        settings = self.put(canonical_json({k: v for k, v in request.items() if k != "messages"}))
        return self._call_row(key, backend, self.put(canonical_json(identity)), settings, messages, raw_output,
                              parsed, probs, choice_mass, tokens_in, tokens_out, latency_s, created_at, extra)

    def encode_result(self, key: str, backend: str, identity_json: str, request: CallRequest,
                      result: CallResult, parsed: str | None, created_at: float, redact: bool = False) -> tuple:
        """One `calls` row for an answer. `identity_json` is canonical_json of the model's identity;
        `redact` stores "[redacted]" for each message's text. The parts a Ray worker made
        (`result.row`, RowParts) are used where they are what this store makes itself: made
        against the dictionary it chooses for the row, so the row is the same byte for byte."""
        parts: RowParts | None = None if redact else result.row
        messages = [[m.role, "[redacted]" if redact else m.content] for m in request.messages]
        if parts is not None:
            probs, extra = parts.probs, parts.extra_json
        else:
            probs = canonical_json(result.probs) if result.probs is not None else None
            extra = flat_json(result.extra) if result.extra else None
        return self._call_row(key, backend, self.put(identity_json), self._settings_id(request), messages,
                              result.text, parsed, probs, result.choice_mass, result.tokens_in, result.tokens_out,
                              result.latency_s, created_at, extra, parts, None if redact else request.messages_json)

    def _settings_id(self, request: CallRequest) -> int:
        """The id of a request's decoding settings (its key fields but the messages), each distinct
        settings' JSON made once: the calls of a wave share them."""
        key = request.settings_key()
        found = self._settings.get(key) if key is not None else None
        if found is None:
            found = self.put(canonical_json({k: v for k, v in request.key_fields().items() if k != "messages"}))
            if key is not None:
                self._settings[key] = found
        return found

    def _call_row(self, key: str, backend: str, identity_id: int, settings: int, messages: list,
                  raw_output: str, parsed: str | None, probs: str | None, choice_mass: float | None,
                  tokens_in: int | None, tokens_out: int | None, latency_s: float | None, created_at: float,
                  extra: str | None, parts: RowParts | None = None,
                  messages_text: Callable[[], str] | None = None) -> tuple:
        """The row; `messages_text` gives canonical_json(messages) where the caller has it made
        (CallRequest.messages_json), used unless masking changed the messages."""
        given = messages
        mask = masking.current()
        if mask:  # every row is made here (encode_call, encode_result): its texts are masked here
            masked = (mask.value(messages), mask.text(raw_output), _masked_json(mask, parsed),
                      _masked_json(mask, probs), _masked_json(mask, extra))
            if any(m is not v for m, v in zip(masked, (messages, raw_output, parsed, probs, extra))):
                messages, raw_output, parsed, probs, extra = masked
                parts = None  # a worker's parts hold what was masked: the row is made here
        made: list[str] = []

        def messages_json() -> str:  # made only where needed: a new shape, or no part made for it
            if not made:
                made.append(messages_text() if messages_text is not None and messages is given
                            else canonical_json(messages))
            return made[0]

        dictionary = self._dictionary(settings, shape_of(messages), messages_json)
        if parts is not None and parts.messages is not None and parts.dictionary == dictionary:
            packed = parts.messages
        else:
            packed = self._pack(messages_json(), dictionary)
        extra_blob = extra_dict = None
        if extra is not None:  # a served answer's metadata repeats but for its response id
            extra_dict = self._dictionary(identity_id, "extra", lambda: extra)  # type: ignore[arg-type, return-value]
            if parts is not None and parts.extra_blob is not None and parts.extra_dict == extra_dict:
                extra_blob = parts.extra_blob
            elif self._last_extra[:2] == (extra_dict, extra):  # an in-process model's {"finish_reason": "stop"}
                extra_blob = self._last_extra[2]
            else:
                extra_blob = self._pack(extra, extra_dict)
                self._last_extra = (extra_dict, extra, extra_blob)
        return (key, backend, identity_id, settings, dictionary, packed, raw_output, parsed, probs, choice_mass,
                tokens_in, tokens_out, latency_s, created_at, extra_blob, extra_dict)

    def encode_extra(self, identity_id: int, extra_json: str) -> tuple[bytes, int]:
        """An answer's metadata (its JSON) as a row's `extra` blob and dictionary id, compressed
        against the model's first metadata, as _call_row makes them: for a migration that
        rewrites one row's metadata."""
        extra_dict = self._dictionary(identity_id, "extra", lambda: extra_json)
        return self._pack(extra_json, extra_dict), extra_dict

    def row_hint(self, request: CallRequest, identity_id: int) -> tuple[int | None, int | None]:
        """The dictionaries this store will compress a call's messages and its answer's metadata
        against, where it knows them already (None where it does not: the first calls of a
        shape, or of a model): what a Ray worker needs to make the row's parts (`row_parts`).
        Reads only what this connection has seen: it writes nothing, outside any transaction."""
        settings = self._settings.get(request.settings_key())  # type: ignore[arg-type]
        dictionary = None
        if settings is not None:
            dictionary = self._shapes.get(f"{settings}|{shape_of([(m.role, m.content) for m in request.messages])}")
        return dictionary, self._shapes.get(f"{identity_id}|extra")

    def dictionary_bytes(self, dictionary: int) -> bytes:
        return self._zdict(dictionary)

    def decode_request(self, settings: int, dictionary: int | None, blob: bytes) -> dict[str, Any]:
        return {"messages": json.loads(self._unpack(blob, dictionary)), **json.loads(self.get(settings))}

    def decode_extra(self, blob: bytes | None, dictionary: int | None) -> dict[str, Any] | None:
        return None if blob is None else json.loads(self._unpack(blob, dictionary))

    # -- judgments ---------------------------------------------------------------------------------
    def encode_judgment(self, judge_id: str, qid: str, docid: str, record: dict[str, Any], updated_at: float) -> tuple:
        record = masking.value(record)  # its answers and reasons, as a call's row is (_call_row)
        rest = {k: v for k, v in record.items() if k not in JUDGMENT_COLUMNS}
        probs = record.get("probs")
        probs_json = canonical_json(probs) if probs is not None else None
        return (self.put(judge_id), qid, docid, record.get("label"), probs_json, record.get("expected"),
                record.get("invalid_reason"), pack_details(rest, probs_json), updated_at)

    def decode_judgment(self, label: int | None, probs: str | None, expected: float | None,
                        invalid_reason: str | None, details: bytes) -> dict[str, Any]:
        record = unpack_details(details, probs)
        record.update(label=label, probs=json.loads(probs) if probs else None, expected=expected,
                      invalid_reason=invalid_reason)
        return dict(sorted(record.items()))


def _masked_json(mask: masking.Mask, text: str | None) -> str | None:
    """JSON text with every secret masked in its values (decoded, masked, encoded again as
    canonical_json, as the store writes it), so it stays valid JSON; the same object when it
    holds none."""
    if text is None or mask.text(text) is text:
        return text
    return canonical_json(mask.value(json.loads(text)))


# The columns of a `calls` row (CALLS_INSERT's order), in every layout since schema 5.
CALLS_COLUMNS = """
    key TEXT NOT NULL PRIMARY KEY,
    backend TEXT NOT NULL,
    identity INTEGER NOT NULL,
    settings INTEGER NOT NULL,
    dict INTEGER,
    messages BLOB NOT NULL,
    raw_output TEXT NOT NULL,
    parsed TEXT,
    probs TEXT,
    choice_mass REAL,
    tokens_in INTEGER,
    tokens_out INTEGER,
    latency_s REAL,
    created_at REAL NOT NULL,
    extra BLOB,
    extra_dict INTEGER
"""

SCHEMA_5 = """
CREATE TABLE texts (
    id INTEGER PRIMARY KEY,
    text TEXT NOT NULL
);
CREATE TABLE shapes (
    shape INTEGER PRIMARY KEY,
    settings INTEGER NOT NULL,
    dict INTEGER NOT NULL
);
CREATE INDEX shapes_by_settings ON shapes (settings);
CREATE TABLE calls5 ({calls}) WITHOUT ROWID;
CREATE TABLE judgments5 (
    judge INTEGER NOT NULL,
    qid TEXT NOT NULL,
    docid TEXT NOT NULL,
    label INTEGER,
    probs TEXT,
    expected REAL,
    invalid_reason TEXT,
    details BLOB NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (judge, qid, docid)
) WITHOUT ROWID
""".replace("{calls}", CALLS_COLUMNS)

CHUNK = 2000


def compact_schema(db: sqlite3.Connection) -> None:
    """Migration 5: schema 4's calls and judgments rewritten in the compact layout, in the
    migration's one transaction (a killed migration leaves schema 4 as it was, and the next
    open starts it again). Every row is carried over; what it decodes to is what schema 4 held."""
    for statement in filter(str.strip, SCHEMA_5.split(";")):
        db.execute(statement)
    texts = Texts(db)
    last = None
    while True:  # chunks in key order, so memory stays bounded on a large store
        rows = db.execute(
            "SELECT key, backend, model_identity, request, raw_output, parsed, probs, choice_mass, tokens_in, "
            "tokens_out, latency_s, created_at, extra FROM calls " + ("WHERE key > ? " if last else "")
            + f"ORDER BY key LIMIT {CHUNK}", (last,) if last else ()).fetchall()
        if not rows:
            break
        db.executemany("INSERT INTO calls5 VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", [
            texts.encode_call(key, backend, json.loads(ident), json.loads(req), raw, parsed, probs, mass, tin, tout,
                              lat, unix(created), extra)
            for key, backend, ident, req, raw, parsed, probs, mass, tin, tout, lat, created, extra in rows])
        last = rows[-1][0]
    rows = db.execute("SELECT judge_id, qid, docid, details, updated_at FROM judgments")
    while batch := rows.fetchmany(CHUNK):
        db.executemany("INSERT INTO judgments5 VALUES (?,?,?,?,?,?,?,?,?)", [
            texts.encode_judgment(judge_id, qid, docid, json.loads(details), unix(updated))
            for judge_id, qid, docid, details, updated in batch])
    db.execute("DROP TABLE calls")
    db.execute("DROP TABLE judgments")
    db.execute("ALTER TABLE calls5 RENAME TO calls")
    db.execute("ALTER TABLE judgments5 RENAME TO judgments")
