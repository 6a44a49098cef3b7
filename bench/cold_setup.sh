#!/bin/bash
# Cold set-up, measured: `make demo` from a clean clone with empty caches, each recipe line
# timed (its start, from the start of `make demo`, and its wall and CPU time: the llama.cpp
# build and the other installs run side by side, so their lines overlap), plus the load average (the machine may be shared) and what the llama.cpp build
# compiles with the Makefile's flags against llama-cpp-python's defaults.
#
#   bench/cold_setup.sh [REPO]          # REPO defaults to this checkout
#
# Writes bench/out/cold_setup/{steps.log,time.log,load.log,compile_units.txt}. Needs git,
# /usr/bin/time, bc, cmake and ninja; downloads llama-cpp-python's sdist (PyPI) once.
set -euo pipefail
REPO=$(cd "${1:-$(dirname "$0")/..}" && pwd)
OUT=$REPO/bench/out/cold_setup
WORK=$(mktemp -d /tmp/jb-cold.XXXXXX)
mkdir -p "$OUT"
cat > "$WORK/timed-sh" <<'SH'
#!/bin/bash
start=$(date +%s.%N)
/usr/bin/time -f "%U %S" -o "$STEPS_LOG.cpu.$$" /bin/sh "$@"; rc=$?
end=$(date +%s.%N)
cpu=$(awk '{printf "%.1f", $1+$2}' "$STEPS_LOG.cpu.$$" 2>/dev/null); rm -f "$STEPS_LOG.cpu.$$"
printf 'at %6.1f s  %7.1f s  cpu %6s s  rc=%s  %s\n' "$(echo "$start - $T0" | bc)" "$(echo "$end - $start" | bc)" "$cpu" "$rc" "$(echo "${@: -1}" | tr '\n\t' '  ' | cut -c1-160)" >> "$STEPS_LOG"
exit $rc
SH
chmod +x "$WORK/timed-sh"
git clone -q "$REPO" "$WORK/clone"
: > "$OUT/steps.log"
(while sleep 15; do uptime; done) > "$OUT/load.log" & sampler=$!
uptime >> "$OUT/load.log"
(cd "$WORK/clone" && T0=$(date +%s.%N) HOME=$WORK/home PIP_CACHE_DIR=$WORK/pip XDG_CACHE_HOME=$WORK/home/.cache STEPS_LOG=$OUT/steps.log \
    /usr/bin/time -v make demo SHELL="$WORK/timed-sh") > "$OUT/time.log" 2>&1 || echo "make demo failed: see $OUT/time.log"
kill $sampler; uptime >> "$OUT/load.log"
sed -i "s|$WORK|\$WORK|g" "$OUT/steps.log" "$OUT/time.log"  # no machine path in the logs

# Which llama.cpp sources the build compiles: the Makefile's LLAMA_CMAKE against the same
# flags without the library-only options. The ggml and llama compile commands must be equal.
PIP=$WORK/clone/.venv/bin/pip
$PIP download --quiet --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d "$WORK/sdist"
tar xzf "$WORK"/sdist/llama_cpp_python-0.3.36.tar.gz -C "$WORK/sdist"
SRC=$WORK/sdist/llama_cpp_python-0.3.36
FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
LIB="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF
     -DCMAKE_PROJECT_INCLUDE=$REPO/scripts/llama_lib_only.cmake"
cmake -S "$SRC" -B "$WORK/full" -G Ninja -DCMAKE_BUILD_TYPE=Release $FLAGS >/dev/null
cmake -S "$SRC" -B "$WORK/lib" -G Ninja -DCMAKE_BUILD_TYPE=Release $FLAGS $LIB >/dev/null
{
  for v in full lib; do
    echo "$v: $(ninja -C "$WORK/$v" -t commands all | grep -c ' -c ') compile commands"
    ninja -C "$WORK/$v" -t commands all | grep ' -c ' | grep -E ' -o vendor/llama.cpp/(ggml|src)/' \
      | sed "s|$WORK/$v|BUILD|g" | sort > "$WORK/$v.ggml"
  done
  cmp -s "$WORK/full.ggml" "$WORK/lib.ggml" && echo "ggml + llama compile commands: identical ($(wc -l < "$WORK/lib.ggml"))" \
    || echo "ggml + llama compile commands DIFFER"
} | tee "$OUT/compile_units.txt"
cat "$OUT/steps.log"
grep -E "Elapsed|User time|System time|Maximum resident" "$OUT/time.log"
