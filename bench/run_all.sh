#!/usr/bin/env bash
# The benchmark behind docs/benchmarks.md (issue #5). Runs for hours on a 2-core machine:
# 300 DL19 pairs x 3 repeats per embedded case, each case in its own process.
# Results: bench/out/benchmarks.json (bench/out/benchmarks.partial.json while it runs).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
exec "$PY" bench/benchmark.py all \
    --parts correlate served embedded baselines \
    --models gemma qwen \
    --pairs 300 --gen-pairs 20 --ref-pairs-gemma 10 --ref-pairs-qwen 6 \
    --repeats 3 --ref-repeats 3 --threads 2 \
    --requant --omp --omp-pairs 60 --knob-pairs-gemma 300 --knob-pairs-qwen 100 \
    --concurrency 1 8 64 --served-seconds 8 --correlate-repeats 5 \
    ${UMBRELA_PY:+--umbrela-python "$UMBRELA_PY"} \
    --json bench/out/benchmarks.json --out docs/benchmarks.md "$@"
