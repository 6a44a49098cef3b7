"""Secrets kept out of everything judgeblender writes, in every form a server may echo them.

A served model's server is sent the API key (the Authorization header) and may send it back,
in an answer, an error body or a response header. Echoed, it seldom comes back as it went:
JSON may escape any character (`\\/` for `/`, `\\u0073` for `s`, and once more for JSON text
inside a JSON string), URLs percent-encode (`%2F` or `%2f`, `+` for a space), HTML error pages
use character references (`&#47;`), and `Authorization: Basic` carries it base64-encoded inside
`user:key`, where its characters depend on where it starts within the encoded bytes. Masking
only the raw key (as judgeblender once did, on response bytes only) let every other form
through to the store, the details and the logs.

`Mask` knows all these forms of the secrets it is given, in any mix (a key half escaped is
still found), and replaces each with `***`:

- it looks for the secret in a view of the text with every escape undone (JSON's, with any
  number of backslashes; percent-encoded UTF-8, %25 repeated; HTML references), and replaces
  the text that spells what it found, escapes and all, so JSON stays JSON; a form-encoded space
  (`+`) and a plus sign read as one (a space) are forms of their own;
- base64 forms are the characters fully decided by the key's bytes at each of the three offsets
  it may start at within a 3-byte group (standard and URL-safe alphabets; padding lies outside
  them, so with and without it), which any longer base64 text holding the key contains; the
  one or two characters its bytes decide only in part stay;
- a fast path: text with none of the escapes that could spell a secret's character (JSON's
  `\\n` and `\\"` cannot) and none of the plain forms is returned as it is (the same object)
  after a few substring searches in C: a store row or an output line that holds no secret
  costs microseconds and keeps its bytes. (An alternation of every escaped form, tried at
  every character, cost 0.8 ms on a 3 KB prompt.)

The process keeps one registry of the secrets it holds (`register`, called where a served
backend takes its key), because text leaves the process far from the backend: every point
where text is written masks with `current()`, so none needs to be handed the key. Those points:
the served backend (response bytes before they are decoded, so no part of the answer is read,
quoted or cut before it is masked; every error message, masked before it is shortened), the
Batch API output lines, the store's row encoder (`store.compact.Texts`, in the
driver and in the writer process, which the driver tells the secrets), every output file
(`fileio`), log records of every library (a record factory, installed with the first secret),
and the CLI's stdout and stderr. A secret once registered stays masked for the life of the
process: an answer made with an old key may still be echoed later.

Credentials in a URL (`http://user:password@host/v1`, as `--base-url`, `$OPENAI_BASE_URL`,
`proxy --upstream` and a panel's `base_url` take them) are secrets of their own: `register_url`
registers the URL's `user:password` (decoded: its percent-encoded form is one of the forms the
view finds, and the HTTP client sends it base64-encoded in `Authorization: Basic`), and the
password, or a user given alone (a token as the user name), of MIN_URL_SECRET_CHARS or more on
its own; `public_base_url` is the URL as it may be shown or kept (identities, messages). Both
live here, with the rest of what keeps secrets out of text, so every command that takes a URL
masks it the same way: the URL is registered where it enters (the CLI's `--base-url` and
`--upstream` as they are parsed, `$OPENAI_BASE_URL` at the CLI's start, the served backend and
the proxy's settings in Python), before it can reach a start line, an error, a log or a file.

Base64 forms shorter than MIN_BASE64_CHARS are not masked: a key of six bytes or fewer is a
placeholder (vLLM's `EMPTY`), and its few base64 characters would mask ordinary words.
Imports nothing of the project.
"""

from __future__ import annotations

import base64
import codecs
import logging
import re
import threading
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

REPLACEMENT = "***"
MIN_BASE64_CHARS = 8
# A URL's password (or lone user) shorter than this is masked only with its user name beside it
# (`user:pw`): on its own, a short word would be masked wherever it occurs in ordinary text.
MIN_URL_SECRET_CHARS = 8

# One escaped character, in any of the encodings (a run of percent-encoded bytes at once, as
# they may spell one UTF-8 character); one or more backslashes, as JSON text inside a JSON
# string escapes the escape, and %25 repeated, as a URL encoded twice does.
_ESCAPED = re.compile(
    r"\\(?:\\*u([dD][89abAB][0-9a-fA-F]{2})\\+u([dD][c-fC-F][0-9a-fA-F]{2})"  # a UTF-16 surrogate pair
    r"|\\*u([0-9a-fA-F]{4})|\\*([\"\\/bfnrt]))"
    r"|%(?:25)*[0-9a-fA-F]{2}(?:%(?:25)*[0-9a-fA-F]{2})*"
    r"|&(?:#(?:([0-9]{1,7})|[xX]([0-9a-fA-F]{1,6}));|([a-zA-Z]{2,8});)")
_PERCENT = re.compile(r"%(?:25)*([0-9a-fA-F]{2})")  # one percent-encoded byte
# Where an escape may start (JSON's backslash, URLs' percent sign, HTML's ampersand): a character
# class, which the regex engine scans for in C (the alternation above, searched for, tries each
# of its branches at every character: 20 times slower)
_INTRODUCER = re.compile(r"[\\%&]")
# Escapes that may spell a character of a secret's form, each searched for on its own (a pattern
# that starts with a literal is scanned for in C): percent-encoded bytes (_PERCENT), HTML
# references, and (per Mask, from the characters its forms hold) JSON's \u escapes and those
# short escapes that stand for such a character. JSON's \n, \t and \" never do: text with only
# those needs no view.
_HTML_ESCAPE = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});")
_JSON_SHORT = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
# HTML's named references for the characters keys and base64 are made of
_HTML_NAMED = {"sol": "/", "plus": "+", "equals": "=", "amp": "&", "lowbar": "_", "hyphen": "-", "dash": "-",
               "period": ".", "colon": ":", "quot": '"', "apos": "'", "lt": "<", "gt": ">"}


def _unescaped(match: re.Match) -> list[tuple[str, int, int]]:
    """The characters an escape stands for, each with the span of the text that spells it
    (a run of percent-encoded bytes may spell several). What it cannot stand for (a lone
    surrogate's pair, an unknown name, bytes that are not UTF-8) it spells as it is written."""
    start, end = match.span()
    high, low, unit, short, decimal, hexadecimal, name = match.groups()
    if high is not None:
        pair = (int(high, 16) - 0xD800) * 0x400 + (int(low, 16) - 0xDC00) + 0x10000
        return [(chr(pair), start, end)]
    if unit is not None:
        return [(chr(int(unit, 16)), start, end)]
    if short is not None:
        return [(_JSON_SHORT[short], start, end)]
    if match.string[start] == "%":
        chars, pending = [], start
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        for byte in _PERCENT.finditer(match.string, start, end):
            out = decoder.decode(bytes((int(byte.group(1), 16),)))
            chars.extend((ch, pending, byte.end()) for ch in out)
            if out:
                pending = byte.end()
        chars.extend((ch, pending, end) for ch in decoder.decode(b"", True))
        return chars
    code = int(decimal) if decimal is not None else int(hexadecimal, 16) if hexadecimal is not None else None
    if code is not None:
        return [(chr(code), start, end)] if code <= 0x10FFFF else [(ch, start, end) for ch in match.group()]
    named = _HTML_NAMED.get(name)
    return [(named, start, end)] if named else [(ch, i, i + 1) for i, ch in enumerate(match.group(), start)]


def _escapes(text: str) -> Iterator[re.Match]:
    """The escapes in `text`, in order."""
    at = 0
    while (hit := _INTRODUCER.search(text, at)) is not None:
        match = _ESCAPED.match(text, hit.start())
        if match is None:
            at = hit.start() + 1
        else:
            yield match
            at = match.end()


def _view(text: str) -> str:
    """`text` with every escape replaced by what it stands for: where a secret is looked for."""
    parts, at = [], 0
    for match in _escapes(text):
        parts.append(text[at:match.start()])
        parts.extend(ch for ch, _, _ in _unescaped(match))
        at = match.end()
    parts.append(text[at:])
    return "".join(parts)


def _base64_forms(secret: str) -> list[str]:
    """The base64 characters that only the secret's bytes decide, at each of the three offsets
    its first byte may have within a 3-byte group, in both alphabets."""
    data = secret.encode("utf-8")
    forms = []
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode("ascii")
        core = encoded[(8 * offset + 5) // 6:(8 * (offset + len(data))) // 6]
        if len(core) >= MIN_BASE64_CHARS:
            forms.append(core)
            forms.append(core.translate(str.maketrans("+/", "-_")))
    return forms


class Mask:
    """Replaces every form of the given secrets (see the module's docstring) with `***`.

    A form is looked for in a view of the text with its escapes undone; where one is found,
    the text that spells it, escapes and all, is replaced. Text with no escape character and no
    plain form is returned as it is."""

    def __init__(self, secrets: Iterable[str]):
        self.secrets = tuple(dict.fromkeys(s for s in secrets if s))
        forms: list[str] = []
        for secret in self.secrets:
            forms.append(secret)
            if "+" in secret:
                forms.append(secret.replace("+", " "))  # a plus sign read as a form-encoded space
            if " " in secret:
                forms.append(secret.replace(" ", "+"))  # a space form-encoded
            forms.extend(_base64_forms(secret))
        # longest first: where two forms overlap, the longer one is replaced whole
        self.forms = tuple(sorted(dict.fromkeys(forms), key=len, reverse=True))
        alphabet = set("".join(self.forms))
        shorts = "".join(re.escape(k) for k, v in _JSON_SHORT.items() if v in alphabet)
        # each escape's pattern, searched for only where its first character is in the text
        self._escapes = (("\\", re.compile(r"\\\\*[u" + shorts + "]")), ("%", _PERCENT), ("&", _HTML_ESCAPE))

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def text(self, text: str) -> str:
        """`text` with every form of every secret replaced; the same object when it holds none."""
        if not self.forms or not text:
            return text
        # (loops, not any() over generators: they cost more than the searches on a short text)
        for first, pattern in self._escapes:
            if first in text and pattern.search(text) is not None:
                view = _view(text)
                for form in self.forms:
                    if form in view:
                        return self._replace(text)
                return text
        for form in self.forms:
            if form in text:
                break
        else:
            return text
        for form in self.forms:
            text = text.replace(form, REPLACEMENT)
        return text

    def _replace(self, text: str) -> str:
        """Replace the text that spells each form found in the view, escapes and all."""
        view: list[str] = []
        spans: list[tuple[int, int]] = []  # per character of the view, the span of text it came from
        at = 0
        for match in _escapes(text):
            view.append(text[at:match.start()])
            spans.extend((i, i + 1) for i in range(at, match.start()))
            for ch, start, end in _unescaped(match):
                view.append(ch)
                spans.append((start, end))
            at = match.end()
        view.append(text[at:])
        spans.extend((i, i + 1) for i in range(at, len(text)))
        joined = "".join(view)
        found: list[tuple[int, int]] = []
        for form in self.forms:
            i = joined.find(form)
            while i >= 0:
                found.append((spans[i][0], spans[i + len(form) - 1][1]))
                i = joined.find(form, i + len(form))
        out, at = [], 0
        for start, end in sorted(found):
            if end <= at:
                continue  # inside a span replaced already
            if start >= at:
                out += (text[at:start], REPLACEMENT)
            at = end  # (a span that overlaps the one before joins its replacement)
        out.append(text[at:])
        return "".join(out)

    def bytes(self, data: bytes) -> bytes:
        """`text` for bytes (a response body before it is decoded), read as UTF-8; bytes that
        are not UTF-8 pass through as they are. The same object when it holds no secret."""
        if not self.forms or not data:
            return data
        text = data.decode("utf-8", "surrogateescape")
        masked = self.text(text)
        return data if masked is text else masked.encode("utf-8", "surrogateescape")

    def value(self, value: Any) -> Any:
        """A JSON-like value (str, list, tuple, dict; keys too) with every string masked; the same
        object wherever nothing in it changed, so a value without secrets is not copied. With no
        secret registered the value is not walked at all: a judgment's record is masked on every
        write, and walking its 40-odd nodes cost a tenth of a millisecond a pair."""
        if not self.forms:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            items = [(self.value(k), self.value(v)) for k, v in value.items()]
            if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items())):
                return value
            return dict(items)
        if isinstance(value, (list, tuple)):
            masked = [self.value(v) for v in value]
            if all(m is v for m, v in zip(masked, value)):
                return value
            return masked if isinstance(value, list) else tuple(masked)
        return value


_EMPTY = Mask(())
_lock = threading.Lock()
_current = _EMPTY


def register(secret: str | None) -> None:
    """Mask `secret` in everything this process writes from now on (see the module's docstring)."""
    global _current
    if not secret:
        return
    with _lock:
        if secret in _current.secrets:
            return
        _current = Mask((*_current.secrets, secret))
        _install_log_masking()


# The authority's user information: what comes before the last "@" ahead of the path, query or
# fragment (a password may hold an "@" of its own, encoded or not).
_USERINFO = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)@")


def url_credentials(url: str | None) -> list[str]:
    """The secrets a URL carries in its `user:password@` (see the module's docstring): the user
    information decoded, and its password (or lone user) where it is long enough to mask alone."""
    if not isinstance(url, str):
        return []
    match = _USERINFO.match(url.strip())
    if match is None or not match.group(1):
        return []
    userinfo = unquote(match.group(1))
    user, colon, password = userinfo.partition(":")
    alone = password if colon else user
    return [userinfo, *([alone] if len(alone) >= MIN_URL_SECRET_CHARS and alone != userinfo else [])]


def register_url(url: str | None) -> str | None:
    """Mask the credentials `url` carries (`url_credentials`) in everything this process writes
    from now on; returns `url`, so it can stand where the URL is taken (a CLI option's callback)."""
    for secret in url_credentials(url):
        register(secret)
    return url


def public_base_url(url: str) -> str:
    """The URL without user:password@, query string or fragment, and without a trailing slash:
    the endpoint as it may appear in a model's identity, the store and messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def current() -> Mask:
    """The mask of every secret registered in this process (empty, and false, when none is)."""
    return _current


def secrets() -> tuple[str, ...]:
    """The registered secrets, for a process of ours that writes what this one sends it."""
    return _current.secrets


def text(value: str) -> str:
    """`value` masked with every registered secret."""
    return _current.text(value)


def value(obj: Any) -> Any:
    """A JSON-like value masked with every registered secret (Mask.value)."""
    return _current.value(obj)


class Writer:
    """A text stream whose writes are masked; everything else is the stream's own (isatty,
    fileno, flush, encoding). For output files (fileio) and the CLI's stdout and stderr."""

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(_current.text(text))
        return len(text)  # what the caller gave: it may count on it

    def writelines(self, lines: Iterable[str]) -> None:
        mask = _current
        self._stream.writelines(mask.text(line) for line in lines)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_streams() -> None:
    """Mask what this process prints to stdout and stderr from now on (the CLI's tables, summaries
    and `error:` lines, Python's tracebacks and warnings). For a process of ours only: a library
    leaves its caller's streams alone."""
    import sys

    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, Writer):
            setattr(sys, name, Writer(stream))


# -- log records -----------------------------------------------------------------------------
_installed = False


def _install_log_masking() -> None:
    """Every log record made from now on, by any library (the HTTP client logs response headers
    at DEBUG), is masked as it is made: its message formatted and masked, its exception text too.
    A record factory, not a filter: a filter on a logger misses the records of its children."""
    global _installed
    if _installed:
        return
    _installed = True
    previous = logging.getLogRecordFactory()

    def masked_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        mask = _current
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: its handler reports it as it would have
            return record
        shown = mask.text(message)
        if shown != message:  # its arguments go too: they hold what was masked
            record.msg, record.args = shown, ()
        if record.exc_info and record.exc_info[0] is not None:
            trace = logging.Formatter().formatException(record.exc_info)
            masked_trace = mask.text(trace)
            if masked_trace != trace:
                record.exc_text = masked_trace
        if record.stack_info:
            record.stack_info = mask.text(record.stack_info)
        return record

    logging.setLogRecordFactory(masked_record)
