"""Embedded llama.cpp models through llama-cpp-python: `llamacpp:default`, `llamacpp:PATH.gguf`.

Prompts are formatted with the model's own chat template (read from the GGUF), or as plain
text for base models without one. Generate mode decodes greedily. Logprobs mode evaluates the
prompt plus the answer prefix once and reads the next-token logits of the label tokens: no
sampling, no full-vocabulary logits for every position. Both modes reuse the prefix shared
with the previous call, which is why the engine orders calls by prompt text.

Same input, same bits: llama.cpp's CPU kernels round differently for different batch shapes
(on an AVX-512 machine a pair's probability of label 0 was 0.1822 when the shared prefix was
reused and 0.1852 from an empty cache). So every prompt is evaluated in blocks of BLOCK tokens
at fixed positions (0-63, 64-127, ...), and only whole blocks are reused: a reused block holds
exactly what a fresh evaluation computes, and a pair's probabilities do not depend on which
pairs came before it (the order of the pairs, the number of workers, a resume). The price is
re-evaluating up to BLOCK-1 shared tokens per prompt and smaller batches; docs/benchmarks.md
has the measured cost. The call key names the scheme ("eval": "fixed-blocks-64"), so answers
stored by the earlier prefix-reuse path are not mixed with these.

Speed notes (measured in bench/benchmark.py, see docs/benchmarks.md):
- The " " then digit spelling of a label needs the logits after one more token (the space).
  By default that is a second, one-token forward pass (`space_path="separate"`). With
  `space_path="batched"` the space goes into the prompt's batch and the logits of the last
  two positions are read from one pass: a few percent faster, but llama.cpp's CPU kernels
  round differently for other batch shapes, so label probabilities move (by up to ~0.1 on
  DL19 pairs; the benchmark reports the agreement), hence it is an option, not the default.
- llama.cpp's CPU threads meet at a barrier after every graph node. This build runs them with
  OpenMP, whose waiting threads spin by default: on a machine already busy with other work a
  spinning thread burns the time slice its partner needs, and a two-thread eval ran 3x slower
  than with sleeping waits. So when the machine is already loaded (1-minute load average at
  or above the cores) at the first model load, OMP_WAIT_POLICY is set to PASSIVE, unless the
  environment sets it. Waiting changes no result, only speed; set OMP_WAIT_POLICY=ACTIVE (or
  PASSIVE) yourself to decide.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import logging
import math
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Literal, Optional

import numpy as np

from ..errors import JudgeblenderError, require
from ..calls import CallRequest, CallResult, Message
from ..hashing import sha256_file
from pydantic import Field

from .base import Backend, normalise_choice_probs
from .packaged_models import PACKAGED, ensure_model
from .registry import BackendOptions, Provider

DEFAULT_CTX = 4096
_LOG_CALLBACK = None  # the ctypes callback must outlive every model: llama.cpp holds a pointer to it


def _log_to_python(llama_cpp) -> None:
    """Send llama.cpp's own log lines to Python logging (logger `judgeblender.llamacpp`, DEBUG),
    never to stderr, in the CLI and in a notebook alike. llama-cpp-python 0.3.36 reads ggml's
    log levels as numbered before ggml added DEBUG, so a warning (Gemma's "using full-size SWA
    cache") arrives as an error and is printed even with verbose=False."""
    global _LOG_CALLBACK
    if _LOG_CALLBACK is None:
        logger = logging.getLogger("judgeblender.llamacpp")

        @llama_cpp.llama_log_callback
        def callback(level, text, user_data):
            logger.debug(text.decode("utf-8", "replace").rstrip("\n"))

        _LOG_CALLBACK = callback
    llama_cpp.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p(0))
# Every prompt is evaluated in blocks of this many tokens at fixed positions (0, 64, 128, ...),
# and only whole blocks are reused from the cache: llama.cpp's CPU kernels round differently
# for other batch shapes, so this is what makes a pair's probabilities independent of the
# pairs evaluated before it. See the module doc for what it costs.
BLOCK = 64


class LlamaCppBackend(Backend):
    kind = "llamacpp"
    supports_logprobs = True
    max_concurrency = 1  # one model, one KV cache: calls are serialised

    def __init__(self, path: str | Path, name: str | None = None, sha256: str | None = None,
                 n_threads: int | None = None, n_ctx: int = DEFAULT_CTX, block: int = BLOCK, verbose: bool = False,
                 space_path: str = "separate"):
        if space_path not in ("batched", "separate"):
            raise JudgeblenderError(f"space_path must be 'batched' or 'separate', got {space_path!r}")
        self.omp_wait_policy = _choose_omp_wait_policy()
        llama_cpp = require("llama_cpp", "local", "the llamacpp: backend")
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        if not verbose:
            _log_to_python(llama_cpp)

        self.path = Path(path)
        if not self.path.exists():
            raise JudgeblenderError(f"{self.path}: no such GGUF file")
        threads = n_threads or max(1, min(os.cpu_count() or 1, 8))
        self.llm = llama_cpp.Llama(
            model_path=str(self.path), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
            n_batch=block, n_ubatch=block, logits_all=False, verbose=verbose,
        )
        self.block = block
        self._canonical = 0  # leading cache tokens computed in whole fixed blocks (see _eval_logprobs)
        self.model_name = name or self.path.name
        self._sha256 = sha256
        self._lock = threading.Lock()
        self.space_path = space_path
        self._n_vocab = self.llm.n_vocab()
        self._max_piece: int | None = None  # the longest token in bytes, read when first needed
        self._space = self._space_token()
        self._choice_ids: dict[str, list[int]] = {}
        self._evaluated = 0
        self._grammars: dict[str, Any] = {}
        template = self.llm.metadata.get("tokenizer.chat_template")
        self.bos_text = self._piece(self.llm.token_bos())
        self.formatter = None
        if template:
            self.formatter = Jinja2ChatFormatter(
                template=template, eos_token=self._piece(self.llm.token_eos()), bos_token=self.bos_text,
                add_generation_prompt=True,
            )

    def _piece(self, token: int) -> str:
        if token < 0:
            return ""
        return self.llm.detokenize([token], special=True).decode("utf-8", errors="ignore")

    # -- identity and sizes ---------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        if self._sha256 is None:
            self._sha256 = sha256_file(self.path)
        return {"backend": "llamacpp", "model": self.model_name, "sha256": self._sha256,
                "eval": f"fixed-blocks-{self.block}"}

    def context_tokens(self) -> int | None:
        return self.llm.n_ctx()

    def count_tokens(self, text: str) -> int | None:
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def token_prefix(self, text: str, n: int) -> tuple[int, int] | None:
        data = text.encode("utf-8")
        ids = self.llm.tokenize(data, add_bos=False, special=False)  # as count_tokens tokenizes
        if len(ids) <= n:
            return len(ids), len(text)
        kept = b"".join(self._piece_bytes(t) for t in ids[:n])
        if not data.startswith(kept) and kept[:1] == b" " and data.startswith(kept[1:]):
            kept = kept[1:]  # a SentencePiece vocabulary's space prefix, which the text lacks
        if not data.startswith(kept):
            return None  # the pieces do not spell the text (a normalising tokenizer): count instead
        return len(ids), len(kept.decode("utf-8", errors="ignore"))  # a split last character is not kept

    def max_token_chars(self) -> int | None:
        """The longest token's piece in bytes (read once from the vocabulary): a character is at
        least one byte, so no token covers more characters."""
        if self._max_piece is None:
            import ctypes

            import llama_cpp

            size, vocab, to_piece = 256, self.llm._model.vocab, llama_cpp.llama_token_to_piece  # private of llama_cpp
            buf = ctypes.create_string_buffer(size)  # one buffer: a piece longer than it returns -length
            self._max_piece = max(abs(to_piece(vocab, t, buf, size, 0, False)) for t in range(self._n_vocab))
        return max(self._max_piece, 1)

    def _piece_bytes(self, token: int) -> bytes:
        """The bytes a token spells. llama-cpp-python's detokenize reads at most 32 bytes a token
        (a longer piece comes back wrong), so this asks llama.cpp with a buffer that fits."""
        import ctypes

        import llama_cpp

        size = 64
        while True:
            buf = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_token_to_piece(self.llm._model.vocab, token, buf, size, 0, False)  # private of llama_cpp
            if n >= 0:
                return buf.raw[:n]
            size = -n

    # -- prompt formatting ----------------------------------------------------------
    def format_prompt(self, messages: tuple[Message, ...]) -> str:
        if self.formatter is not None:
            return self.formatter(messages=[{"role": m.role, "content": m.content} for m in messages]).prompt
        # A base model has no chat roles: the instructions, then the answer follows.
        return "\n\n".join(m.content for m in messages) + "\n\n"

    def _tokens(self, text: str) -> list[int]:
        has_bos = bool(self.bos_text) and text.startswith(self.bos_text)
        return self.llm.tokenize(text.encode("utf-8"), add_bos=not has_bos, special=True)

    def _token_ids(self, choice: str) -> list[int]:
        """Single tokens that spell the choice, with or without a leading space."""
        if choice not in self._choice_ids:
            ids = set()
            for variant in (choice, " " + choice):
                toks = self.llm.tokenize(variant.encode("utf-8"), add_bos=False, special=False)
                if len(toks) == 1:
                    ids.add(toks[0])
            if not ids:
                raise JudgeblenderError(f"{self.model_name}: the answer {choice!r} is not a single token")
            self._choice_ids[choice] = sorted(ids)
        return self._choice_ids[choice]

    # -- calls ----------------------------------------------------------------------
    def execute(self, request: CallRequest) -> CallResult:
        prompt = self.format_prompt(request.messages)
        with self._lock:
            started = time.perf_counter()
            if request.mode == "logprobs":
                result = self._score(prompt + request.answer_prefix, request.choices)
            else:
                result = self._generate(prompt, request)
            result.latency_s = time.perf_counter() - started
        return result

    def _grammar(self, schema: dict[str, Any]):
        """A llama.cpp grammar that only admits JSON matching the schema (built once per schema)."""
        from llama_cpp import LlamaGrammar

        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:  # built in declared key order: "reason" before "score" stays so
            self._grammars[key] = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        return self._grammars[key]

    def _generate(self, prompt: str, request: CallRequest) -> CallResult:
        tokens = self._tokens(prompt)
        # llama-cpp-python reuses what the cache holds up to n_tokens and evaluates the rest in
        # n_batch (= block) chunks from there: rewound to a whole block, those are the fixed blocks.
        self._rewind(tokens, len(tokens) - 1)
        grammar = self._grammar(request.json_schema) if request.json_schema else None
        out = self.llm.create_completion(
            prompt=tokens, max_tokens=request.max_tokens, temperature=request.temperature,
            seed=request.seed, top_k=0 if request.temperature == 0 else 40, repeat_penalty=1.0, grammar=grammar,
        )
        self._canonical = len(tokens) - len(tokens) % self.block
        usage = out.get("usage", {})
        choice = out["choices"][0]
        # "length" when the answer ran into max_tokens: the judge reads a cut answer as invalid
        extra = {"finish_reason": choice["finish_reason"]} if isinstance(choice.get("finish_reason"), str) else {}
        return CallResult(text=choice["text"], tokens_in=usage.get("prompt_tokens", len(tokens)),
                          tokens_out=usage.get("completion_tokens", 0), extra=extra)

    def _rewind(self, tokens: list[int], limit: int) -> int:
        """Keep the longest run of whole fixed blocks that the cache shares with `tokens` (at
        most `limit` tokens) and drop the rest of the cache; returns where evaluation resumes."""
        llm = self.llm
        n = min(self._canonical, llm.n_tokens, limit)
        if n >= self.block:
            cached = np.asarray(llm.input_ids[:n])
            differs = np.flatnonzero(cached != np.asarray(tokens[:n], dtype=cached.dtype))
            if differs.size:
                n = int(differs[0])
        n -= n % self.block
        llm.n_tokens = n
        self._canonical = n
        return n

    def _eval_logprobs(self, tokens: list[int], rows: int = 1, extend: bool = False) -> list[np.ndarray]:
        """Log-probabilities of the next token after each of the last `rows` tokens.

        The tokens are evaluated in blocks whose boundaries are fixed multiples of `block`
        counted from position 0, and only whole blocks computed that way are reused from the
        cache, so a reused block holds exactly the bits a fresh evaluation would compute and a
        pair's probabilities do not depend on what was evaluated before it. `extend=True`
        continues from the cache as it stands, which must hold this pair's own tokens[:-k]
        just evaluated (the space token after the prompt): the same steps whatever came before.
        """
        llm = self.llm
        if extend:
            start = llm.n_tokens
            if list(llm.input_ids[:start]) != tokens[:start]:
                raise JudgeblenderError("internal: extend=True needs the cache to hold the prompt just evaluated")
        else:
            start = self._rewind(tokens, len(tokens) - 1)  # the last token is always evaluated
            reusable = len(tokens) - len(tokens) % self.block
        llm._ctx.kv_cache_seq_rm(-1, start, -1)
        first_row = len(tokens) - rows
        out: list[np.ndarray] = []
        pos = start
        while pos < len(tokens):
            end = min(len(tokens), (pos // self.block + 1) * self.block)
            chunk = tokens[pos:end]
            llm._batch.set_batch(batch=chunk, n_past=pos, logits_all=False)  # the block's last row always
            for j in range(max(first_row - pos, 0), len(chunk)):
                llm._batch.batch.logits[j] = True
            llm._ctx.decode(llm._batch)
            llm.input_ids[pos:end] = chunk
            llm.n_tokens = end
            self._evaluated += end - pos
            out.extend(self._logprobs_row(j) for j in range(max(first_row - pos, 0), len(chunk)))
            pos = end
        if not extend:
            self._canonical = reusable
        return out

    def _logprobs_row(self, i: int) -> np.ndarray:
        """Log-softmax of the logits of the i-th token of the last batch (-1: its last)."""
        logits = np.ctypeslib.as_array(self.llm._ctx.get_logits_ith(i), shape=(self._n_vocab,)).astype(np.float64)
        top = logits.max()
        return logits - (top + math.log(np.exp(logits - top).sum()))

    def _score(self, text: str, choices: tuple[str, ...]) -> CallResult:
        """P(choice | prompt + prefix), summed over the two ways a tokenizer spells it after a
        prefix with no trailing space: the choice's own token (" 2" or "2"), or a lone space
        token followed by the choice's token. Most tokenizers split digits from spaces, so
        "score: 2" is ":", " ", "2" and the second path carries nearly all the mass."""
        self._evaluated = 0
        tokens = self._tokens(text)
        space = self._space
        if space is not None and text and not text[-1].isspace():
            if self.space_path == "batched":
                logp, via_space = self._eval_logprobs(tokens + [space], rows=2)
            else:
                (logp,) = self._eval_logprobs(tokens)
                (via_space,) = self._eval_logprobs(tokens + [space], extend=True)
        else:
            (logp,) = self._eval_logprobs(tokens)
            via_space = None
        direct = {c: max(logp[i] for i in self._token_ids(c)) for c in choices}
        if via_space is not None:
            space_lp = logp[space]
            for c in choices:
                other = space_lp + max(via_space[i] for i in self._token_ids(c))
                direct[c] = float(np.logaddexp(direct[c], other))
        probs, mass = normalise_choice_probs({c: float(v) for c, v in direct.items()})
        return CallResult(text=max(probs, key=probs.get), probs=probs, choice_mass=mass,
                          tokens_in=len(tokens), tokens_out=0, extra={"evaluated_tokens": self._evaluated})

    def _space_token(self) -> int | None:
        toks = self.llm.tokenize(b" ", add_bos=False, special=False)
        return toks[0] if len(toks) == 1 else None

    def close(self) -> None:
        # Drop it from the shared cache too, so a later create() loads a live model.
        for key, backend in list(_LOADED.items()):
            if backend is self:
                del _LOADED[key]
        if hasattr(self.llm, "close"):
            self.llm.close()


def _choose_omp_wait_policy() -> str:
    """OMP_WAIT_POLICY for llama.cpp's OpenMP threads, decided once per process (see the module doc)."""
    current = os.environ.get("OMP_WAIT_POLICY")
    if current:
        return current.upper()
    try:
        busy = os.getloadavg()[0] >= (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        busy = False
    if busy and "llama_cpp" not in sys.modules:  # OpenMP reads it when llama.cpp's libraries load
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        return "PASSIVE"
    return "default"


_LOADED: dict[tuple, LlamaCppBackend] = {}


@atexit.register
def _close_loaded() -> None:
    """Free the loaded models while llama_cpp's module still exists: left to the garbage
    collector at interpreter exit, Llama.__del__ ran after its C bindings were torn down and
    printed a TypeError traceback for every model."""
    for backend in list(_LOADED.values()):
        backend.close()


class Options(BackendOptions):
    """`llamacpp:` options."""

    n_threads: Optional[int] = Field(None, ge=1, description="CPU threads (default: up to 8)")
    n_ctx: int = Field(DEFAULT_CTX, ge=256, description="context window in tokens")
    space_path: Literal["batched", "separate"] = "separate"
    block: int = Field(BLOCK, ge=8, le=512, description="tokens per fixed evaluation block (see the module doc)")


def build(model: str, options: Options) -> LlamaCppBackend:
    """`default` / `qwen2.5-coder-0.5b` / `gemma-270m` are the packaged models; else a GGUF path.

    One loaded model per process and settings: judges sharing a model share its memory.
    """
    key = (model, options)
    if key in _LOADED:
        return _LOADED[key]
    settings = options.model_dump()
    if model in PACKAGED:
        packaged = PACKAGED[model]
        backend = LlamaCppBackend(ensure_model(model), name=packaged.name, sha256=packaged.sha256, **settings)
    else:
        backend = LlamaCppBackend(model, **settings)
    _LOADED[key] = backend
    return backend


PROVIDER = Provider("llamacpp", Options, build)
create = PROVIDER.create
