"""The `hf:MODEL_OR_PATH` backend: a causal language model run through Hugging Face transformers.

This is the plain reference method: `AutoModelForCausalLM` + `AutoTokenizer`, one call at a
time (batch size 1), `model.generate` for text and one forward pass for choice scoring.

- `hf:/path/to/model_dir` loads a local `save_pretrained` folder (safetensors or .bin weights);
- `hf:org/name` loads a hub id where a hub is reachable (`revision=` pins a commit);
- `hf:/path/to/model.gguf`, or `gguf_file="model.gguf"` with a folder or hub id, uses
  transformers' GGUF loading (dequantised to torch tensors; needs the `gguf` package).

Prompt format: the tokenizer's chat template when it has one (with the generation prompt
added), else the plain fallback `FALLBACK_FORMAT` describes. Which one was used is recorded in
`CallResult.extra["chat_format"]`.
"""

from __future__ import annotations

import importlib.util
import math
import re
import threading
import time
from pathlib import Path
from typing import Any, Optional

from ..errors import BackendError, JudgeblenderError, require
from ..calls import CallRequest, CallResult, Message
from ..hashing import sha256_file, sha256_text
from pydantic import Field

from ..parse.tokens import read_token
from .base import Backend, normalise_choice_probs
from .registry import BackendOptions, Provider

WHAT = "the hf: backend"

FALLBACK_FORMAT = (
    "no chat template: the message contents (system, user, assistant, in order) are joined "
    "with blank lines, a blank line follows, and the assistant turn (answer_prefix) starts there"
)

# Weight files hashed for identity(), in order of preference.
_WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.pth")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
# tokenizer.model_max_length above this is transformers' "unknown" placeholder, not a real limit.
_SANE_MAX_LENGTH = 10_000_000
_DTYPES = {
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
}

def weights_sha256(files: list[Path], root: Path) -> str:
    """One file: its own sha256 (what `sha256sum` prints). Several: the sha256 of their manifest,
    the lines `<sha256>  <path relative to root>` sorted by path, each ending in a newline."""
    if not files:
        raise BackendError(f"{WHAT}: no weight files found under {root}")
    if len(files) == 1:
        return sha256_file(files[0])
    named = sorted((f.relative_to(root).as_posix(), f) for f in files)
    manifest = "".join(f"{sha256_file(f)}  {name}\n" for name, f in named)
    return sha256_text(manifest)


def find_weight_files(folder: Path) -> list[Path]:
    """The weight files of a `save_pretrained` folder: safetensors if any, else .bin, ..."""
    for pattern in _WEIGHT_PATTERNS:
        found = sorted(p for p in folder.glob(pattern) if p.is_file() or p.is_symlink())
        # training_args.bin and the like are not weights
        found = [p for p in found if not p.name.startswith(("training_args", "optimizer", "scheduler"))]
        if found:
            return found
    return []


def local_revision(folder: Path) -> str | None:
    """The commit a local folder holds: a hub cache snapshot's name, or a git checkout's HEAD."""
    folder = folder.resolve()
    if folder.parent.name == "snapshots" and _HEX40.match(folder.name):
        return folder.name
    git = folder / ".git"
    if not git.is_dir():
        return None
    head = (git / "HEAD").read_text(encoding="utf-8").strip()
    if not head.startswith("ref:"):
        return head if _HEX40.match(head) else None
    ref = head[4:].strip()
    ref_file = git / ref
    if ref_file.is_file():
        return ref_file.read_text(encoding="utf-8").strip()
    packed = git / "packed-refs"
    if packed.is_file():
        for line in packed.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1] == ref:
                return parts[0]
    return None  # a repository with no commit yet


def fallback_prompt(messages: tuple[Message, ...] | list[Message], answer_prefix: str = "") -> str:
    """The prompt for a tokenizer without a chat template: see FALLBACK_FORMAT."""
    return "\n\n".join(m.content for m in messages) + "\n\n" + answer_prefix


def _require_gguf_support() -> None:
    """GGUF loading needs two packages beyond the [hf] extra; name them when missing."""
    missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
    if missing:
        raise JudgeblenderError(
            f"{WHAT} loading a GGUF file needs the Python packages 'gguf' and 'accelerate' "
            f"(missing: {', '.join(missing)}). Install them with: pip install gguf accelerate"
        )


def _torch_dtype(torch: Any, dtype: Any) -> Any:
    if dtype is None or dtype == "auto":
        return "auto"
    if isinstance(dtype, str):
        name = _DTYPES.get(dtype.lower())
        if name is None:
            raise JudgeblenderError(f"{WHAT}: unknown dtype {dtype!r}; use auto, float32, float16 or bfloat16")
        return getattr(torch, name)
    return dtype


def _version_tuple(version: str) -> tuple[int, int]:
    nums = re.findall(r"\d+", version)
    return (int(nums[0]), int(nums[1])) if len(nums) >= 2 else (0, 0)


class HFBackend(Backend):
    """A transformers causal LM, run one call at a time."""

    kind = "hf"
    supports_logprobs = True
    max_concurrency = 1

    def __init__(
        self,
        path_or_id: str,
        *,
        n_threads: int | None = None,
        device: str = "cpu",
        dtype: Any = "auto",
        revision: str | None = None,
        gguf_file: str | None = None,
    ):
        torch = require("torch", "hf", WHAT)
        transformers = require("transformers", "hf", WHAT)
        self._torch = torch
        self.model_ref = path_or_id
        self._requested_revision = revision

        source = path_or_id
        local = Path(path_or_id).expanduser()
        # `hf:/path/model.gguf`: the folder is the source and the file the GGUF to load.
        if gguf_file is None and local.suffix.lower() == ".gguf" and local.is_file():
            source, gguf_file = str(local.parent), local.name
            local = local.parent
        self.gguf_file = gguf_file
        self.is_local = local.exists()
        self._local_dir = local if self.is_local else None
        if self.is_local:
            source = str(local)
        if gguf_file is not None:
            # transformers dequantises GGUF files with `gguf` and places the weights with `accelerate`
            _require_gguf_support()

        if n_threads:
            torch.set_num_threads(int(n_threads))

        load_kwargs: dict[str, Any] = {}
        if revision is not None:
            load_kwargs["revision"] = revision
        if gguf_file is not None:
            load_kwargs["gguf_file"] = gguf_file
        # transformers renamed torch_dtype to dtype in 4.56
        dtype_key = "dtype" if _version_tuple(transformers.__version__) >= (4, 56) else "torch_dtype"
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(source, **load_kwargs)
            self.model = transformers.AutoModelForCausalLM.from_pretrained(
                source, **load_kwargs, **{dtype_key: _torch_dtype(torch, dtype)}
            )
        except (OSError, ValueError) as exc:
            raise BackendError(f"{WHAT} could not load {path_or_id!r}: {exc}") from exc
        self.device = torch.device(device)
        self.model.to(self.device)
        self.model.eval()

        self.has_chat_template = bool(getattr(self.tokenizer, "chat_template", None))
        self._lock = threading.Lock()
        self._identity: dict[str, Any] | None = None
        self._decoded_vocab: dict[str, list[int]] | None = None
        self._choice_ids: dict[tuple[str, tuple[str, ...]], tuple[int, ...]] = {}
        self._vocab_choices: dict[tuple[str, ...], dict[str, list[int]]] = {}
        self._max_token_chars: int | None = None  # read from the vocabulary when first needed

    # ----------------------------------------------------------------- identity and sizes
    def _weights_folder_and_files(self) -> tuple[Path, list[Path]]:
        if self._local_dir is not None:
            folder = self._local_dir
        else:
            hub = require("huggingface_hub", "hf", WHAT)
            try:
                folder = Path(
                    hub.snapshot_download(self.model_ref, revision=self._requested_revision, local_files_only=True)
                )
            except Exception as exc:  # the model loaded, so its files must be in the cache
                raise BackendError(f"{WHAT}: cannot find the cached files of {self.model_ref!r}: {exc}") from exc
        if self.gguf_file is not None:
            return folder, [folder / self.gguf_file]
        return folder, find_weight_files(folder)

    def identity(self) -> dict[str, Any]:
        if self._identity is None:
            folder, files = self._weights_folder_and_files()
            # the commit the files come from, when it can be read; else what was asked for
            revision = local_revision(folder) or self._requested_revision
            ident: dict[str, Any] = {
                "backend": "hf",
                "model": self.model_ref,
                "revision": revision,
                "sha256": weights_sha256(files, folder),
            }
            if self.gguf_file is not None:
                ident["gguf_file"] = self.gguf_file
            self._identity = ident
        return dict(self._identity)

    def context_tokens(self) -> int | None:
        config = self.model.config
        get_text = getattr(config, "get_text_config", None)
        if callable(get_text):
            config = get_text()
        for attr in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
            value = getattr(config, attr, None)
            if isinstance(value, int) and value > 0:
                return value
        length = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(length, int) and 0 < length < _SANE_MAX_LENGTH:
            return length
        return None

    def count_tokens(self, text: str) -> int | None:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def token_prefix(self, text: str, n: int) -> tuple[int, int] | None:
        """From a fast tokenizer's offsets: where token n+1 starts is where the cut goes."""
        if not getattr(self.tokenizer, "is_fast", False):
            return None  # a slow tokenizer has no offsets: count instead
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = enc["input_ids"], enc["offset_mapping"]
        if len(ids) <= n:
            return len(ids), len(text)
        return len(ids), min(offsets[n][0], offsets[n - 1][1]) if n else 0

    def max_token_chars(self) -> int | None:
        """The longest vocabulary entry's length (a byte-level or SentencePiece entry spells at
        least as many characters as it covers); a wrong bound costs a call, never a wrong cut."""
        if self._max_token_chars is None:
            self._max_token_chars = max(1, max(map(len, self.tokenizer.get_vocab()), default=1))
        return self._max_token_chars

    # ----------------------------------------------------------------- prompts
    def render_prompt(self, request: CallRequest) -> tuple[str, str]:
        """The prompt text up to where the model continues, and which format made it."""
        if self.has_chat_template:
            conversation = [{"role": m.role, "content": m.content} for m in request.messages]
            try:
                text = self.tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
            except Exception as exc:  # jinja errors raised by the template itself, e.g. unsupported roles
                raise BackendError(f"{WHAT}: the chat template of {self.model_ref!r} failed: {exc}") from exc
            return text + request.answer_prefix, "template"
        return fallback_prompt(request.messages, request.answer_prefix), "fallback"

    def _encode(self, text: str, chat_format: str) -> Any:
        # A chat template writes its own special tokens (BOS ...); the fallback gets the tokenizer's.
        enc = self.tokenizer(text, return_tensors="pt", add_special_tokens=(chat_format == "fallback"))
        ids = enc["input_ids"]
        if ids.shape[1] == 0:
            raise BackendError(f"{WHAT}: the prompt encodes to no tokens")
        limit = self.context_tokens()
        if limit is not None and ids.shape[1] > limit:
            raise BackendError(
                f"{WHAT}: the prompt has {ids.shape[1]} tokens, more than {self.model_ref!r}'s context of {limit}"
            )
        return enc

    # ----------------------------------------------------------------- choices
    def _vocab_by_text(self) -> dict[str, list[int]]:
        """Every token id by the text it decodes to alone (built once, on first use)."""
        if self._decoded_vocab is None:
            size = len(self.tokenizer)
            texts = self.tokenizer.batch_decode([[i] for i in range(size)], skip_special_tokens=False)
            table: dict[str, list[int]] = {}
            for i, t in enumerate(texts):
                table.setdefault(t, []).append(i)
            self._decoded_vocab = table
        return self._decoded_vocab

    def choice_token_ids(self, choice: str, choices: tuple[str, ...] | None = None) -> tuple[int, ...]:
        """Token ids that stand for `choice` as one token, among the step's `choices` (the choice
        alone when not given).

        The ids the tokenizer encodes "c" and " c" to (when that is a single token) count, and so
        does every vocabulary entry whose text, alone, reads as the choice the way generate mode
        reads an answer (`parse.tokens`): "c" and " c" (sentencepiece tokenizers encode "2" as
        "▁" + "2", yet their lone "2" token is what follows "Score: "), and a label's digit in
        another script (full-width "２", "٢"), so logprobs mode counts what generate mode reads.
        """
        choices = tuple(choices) if choices else (choice,)
        key = (choice, choices)
        cached = self._choice_ids.get(key)
        if cached is not None:
            return cached
        ids: set[int] = set()
        for variant in (choice, " " + choice):
            enc = self.tokenizer.encode(variant, add_special_tokens=False)
            if len(enc) == 1:
                ids.add(int(enc[0]))
        ids.update(self._vocab_by_choice(choices).get(choice, ()))
        special = set(getattr(self.tokenizer, "all_special_ids", ()) or ())
        result = tuple(sorted(i for i in ids if i not in special and i < self._vocab_size()))
        self._choice_ids[key] = result
        return result

    def _vocab_by_choice(self, choices: tuple[str, ...]) -> dict[str, list[int]]:
        """The vocabulary's token ids by the choice their text stands for (one pass per set of
        choices, kept)."""
        table = self._vocab_choices.get(choices)
        if table is None:
            table = {}
            for text, ids in self._vocab_by_text().items():
                choice = read_token(text, choices)
                if choice is not None:
                    table.setdefault(choice, []).extend(ids)
            self._vocab_choices[choices] = table
        return table

    def _vocab_size(self) -> int:
        return int(self.model.get_output_embeddings().weight.shape[0])

    # ----------------------------------------------------------------- calls
    def execute(self, request: CallRequest) -> CallResult:
        if request.mode == "logprobs":
            return self._logprobs(request)
        if request.mode == "generate":
            return self._generate(request)
        raise BackendError(f"{WHAT}: unknown mode {request.mode!r}")

    def _generate(self, request: CallRequest) -> CallResult:
        torch = self._torch
        if request.max_tokens < 1:
            raise BackendError(f"{WHAT}: max_tokens must be at least 1, got {request.max_tokens}")
        with self._lock:
            start = time.perf_counter()
            prompt, chat_format = self.render_prompt(request)
            enc = self._encode(prompt, chat_format)
            input_ids = enc["input_ids"].to(self.device)
            attention_mask = enc["attention_mask"].to(self.device)
            sampling = request.temperature > 0
            # the answer cannot run past the context window: stop there, as a server would
            max_new = request.max_tokens
            limit = self.context_tokens()
            if limit is not None:
                room = limit - int(input_ids.shape[1])
                if room < 1:
                    raise BackendError(
                        f"{WHAT}: the prompt fills all {limit} tokens of {self.model_ref!r}'s context"
                    )
                max_new = min(max_new, room)
            gen_kwargs: dict[str, Any] = {
                "max_new_tokens": max_new,
                "do_sample": sampling,
                "num_beams": 1,
                "repetition_penalty": 1.0,
            }
            if sampling:
                # plain temperature sampling over the whole distribution, reproducible by seed
                gen_kwargs.update(temperature=float(request.temperature), top_k=0, top_p=1.0)
                torch.manual_seed(request.seed)
            pad_id = self.tokenizer.pad_token_id
            if pad_id is None:
                eos = self.model.generation_config.eos_token_id
                pad_id = eos[0] if isinstance(eos, list) else eos
            if pad_id is not None:
                gen_kwargs["pad_token_id"] = pad_id
            with torch.inference_mode():
                out = self.model.generate(input_ids=input_ids, attention_mask=attention_mask, **gen_kwargs)
            new_ids = out[0, input_ids.shape[1] :]
            continuation = self.tokenizer.decode(new_ids, skip_special_tokens=True)
            # as a server says it: "length" when the answer ran into the token limit unfinished
            eos = self.model.generation_config.eos_token_id
            eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
            last = int(new_ids[-1]) if int(new_ids.shape[0]) else None
            finish = "length" if int(new_ids.shape[0]) >= max_new and last not in eos_ids else "stop"
            latency = time.perf_counter() - start
        return CallResult(
            # the prefilled start of the assistant turn belongs to the answer the parser reads
            text=request.answer_prefix + continuation,
            tokens_in=int(input_ids.shape[1]),
            tokens_out=int(new_ids.shape[0]),
            latency_s=latency,
            extra={
                "chat_format": chat_format,
                "sampling": sampling,
                "answer_prefix_prefilled": bool(request.answer_prefix),
                "max_new_tokens": max_new,
                "finish_reason": finish,
            },
        )

    def _logprobs(self, request: CallRequest) -> CallResult:
        torch = self._torch
        if not request.choices:
            raise BackendError(f"{WHAT}: logprobs mode needs choices")
        with self._lock:
            start = time.perf_counter()
            prompt, chat_format = self.render_prompt(request)
            enc = self._encode(prompt, chat_format)
            input_ids = enc["input_ids"].to(self.device)
            attention_mask = enc["attention_mask"].to(self.device)
            with torch.inference_mode():
                logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits
            logprobs = torch.log_softmax(logits[0, -1].float(), dim=-1)
            ids_by_choice = {c: self.choice_token_ids(c, request.choices) for c in request.choices}
            lp_by_choice: dict[str, float] = {}
            for choice, ids in ids_by_choice.items():
                lp_by_choice[choice] = float(logprobs[list(ids)].max()) if ids else -math.inf
            latency = time.perf_counter() - start
        if not any(ids_by_choice.values()):
            raise BackendError(
                f"{WHAT}: none of the choices {list(request.choices)} is a single token of {self.model_ref!r}'s "
                "tokenizer, so they cannot be scored from the next token"
            )
        probs, mass = normalise_choice_probs(lp_by_choice)
        best = max(request.choices, key=lambda c: probs[c])
        return CallResult(
            text=best,
            probs=probs,
            choice_mass=mass,
            tokens_in=int(input_ids.shape[1]),
            tokens_out=0,
            latency_s=latency,
            extra={
                "chat_format": chat_format,
                "logprobs": lp_by_choice,
                "choice_token_ids": {c: list(ids) for c, ids in ids_by_choice.items()},
            },
        )

    def close(self) -> None:
        for attr in ("model", "tokenizer"):
            if hasattr(self, attr):
                delattr(self, attr)
        self._decoded_vocab = None
        self._vocab_choices = {}


class Options(BackendOptions):
    """`hf:` options."""

    n_threads: Optional[int] = Field(None, ge=1, description="torch CPU threads (process-wide)")
    device: str = "cpu"
    dtype: str = "auto"
    revision: Optional[str] = None
    gguf_file: Optional[str] = None


def build(path_or_id: str, options: Options) -> HFBackend:
    return HFBackend(path_or_id, **options.model_dump())


PROVIDER = Provider("hf", Options, build)
create = PROVIDER.create
