#!/bin/bash
# Issue 30, second pass: how the figures in docs/benchmarks.md ("Second pass") were taken, one
# after another with nothing else running. NOW: this checkout; S0 and I23: checkouts of main
# at 7a22f95 (before the pass) and 0c6130a (where issue 23 measured its figures), e.g. made with
# `git worktree add --detach ../s0 7a22f95`. Each bench command is the project's own.
set -euo pipefail
NOW=$(cd "$(dirname "$0")/../../../.." && pwd); S0=${S0:?checkout of 7a22f95}; I23=${I23:?checkout of 0c6130a}
O=${OUT:-$NOW/bench/results/issue30/pass2}; PY=${PY:-python}
cd "$NOW"
for i in 1 2 3; do
  PYTHONPATH=$NOW/src $PY bench/injection_scan.py time --out $O/inj_main_$i.json
  PYTHONPATH=$S0/src $PY bench/injection_scan.py time --out $O/inj_s0_$i.json
done
PYTHONPATH=src $PY bench/cli_speed.py --pairs 10000 100000 --repeats 3 --out $O/cli_main.json
PYTHONPATH=src $PY bench/cli_speed.py --pairs 10000 100000 --repeats 3 --src $S0/src --out $O/cli_s0.json
(cd "$I23" && PYTHONPATH=src $PY bench/stream.py memory --sizes 10000 100000 --out $O/stream_i23.json)
PYTHONPATH=src $PY bench/driver.py all --parts ray_cpu --ray-calls 20000 --out $O/ray_main.json
(cd "$I23" && PYTHONPATH=src $PY bench/driver.py all --parts ray_cpu --ray-calls 20000 --out $O/ray_i23.json)
for i in 1 2 3 4; do
  PYTHONPATH=src $PY bench/driver.py all --parts served --served-calls 2000 --served-repeats 2 --out $O/served_main_$i.json
  (cd "$S0" && PYTHONPATH=src $PY bench/driver.py all --parts served --served-calls 2000 --served-repeats 2 --out $O/served_s0_$i.json)
done
