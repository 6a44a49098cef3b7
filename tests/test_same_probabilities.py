"""The embedded model gives the same probabilities, bit for bit, on every machine the build
targets: llama.cpp is compiled for AVX2 (+FMA, F16C, BMI2), not for the building CPU, so AVX2
and AVX-512 machines run the same kernels (Makefile, LLAMA_CMAKE).

One pair's label probabilities are compared with `==` against values committed from an AVX2
build (tests/data/avx2_probs.json, written by `python tests/test_same_probabilities.py --write`
on the machine and build named in the file). A build with other ggml flags, or a llama.cpp
whose kernels changed, fails here: re-pin deliberately, never approximately.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from judgeblender.backends.registry import create_backend
from judgeblender.calls import CallRequest, Message

pytestmark = pytest.mark.model

PINNED = Path(__file__).parent / "data" / "avx2_probs.json"
PROMPT = (Message("user", "Query: what do goldfish eat\nPassage: Goldfish eat flakes, pellets and fresh vegetables "
                          "such as peas.\nRate relevance 0-3. Answer as ##final score: X"),)
LOGPROBS = dict(mode="logprobs", answer_prefix="##final score:", choices=("0", "1", "2", "3"))


def label_probs() -> dict[str, float]:
    backend = create_backend("llamacpp:default", n_threads=2)
    return dict(backend.execute(CallRequest(PROMPT, **LOGPROBS)).probs)


def test_one_pairs_probabilities_equal_the_values_pinned_from_an_avx2_build():
    pinned = json.loads(PINNED.read_text())
    probs = label_probs()
    assert {k: v.hex() for k, v in probs.items()} == pinned["probs_hex"]  # exact bits
    assert probs == {k: float.fromhex(v) for k, v in pinned["probs_hex"].items()}


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import platform

    import llama_cpp

    values = label_probs()
    flags = open("/proc/cpuinfo").read().split("flags", 1)[1].split("\n", 1)[0].split()
    PINNED.write_text(json.dumps({
        "llama_cpp_python": llama_cpp.__version__,
        "build": "GGML_NATIVE=OFF AVX AVX2 FMA F16C BMI2 (Makefile LLAMA_CMAKE)",
        "machine": f"{platform.machine()}, avx2={'avx2' in flags}, avx512f={'avx512f' in flags}",
        "probs": values,
        "probs_hex": {k: v.hex() for k, v in values.items()},
    }, indent=1) + "\n")
    print(PINNED.read_text())
