#!/usr/bin/env bash
# Builds the format fuzzers (reader, .npy, .pb values) with clang++ straight from the source list (no
# CMake) and runs each for a bounded time with the test fixtures as seeds.
#   tests/fuzz/run_bounded_fuzz.sh [seconds per target, default 60] [jobs, default 1] [max runs, default unbounded]
# NEE_FUZZ_SEED (default 1) fixes libFuzzer's seed: with a run cap the run is
# reproducible, so CI and a developer see the same inputs.
# Exits non-zero when a fuzzer finds a crash; the reproducer is left in the
# work folder it prints. Needs clang with libFuzzer (Debian: clang-14 and
# libclang-rt-14-dev).
set -euo pipefail
SECONDS_PER_TARGET="${1:-60}"
JOBS="${2:-1}"
MAX_RUNS="${3:--1}"
SEED="${NEE_FUZZ_SEED:-1}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
CXX="${CXX_FUZZ:-clang++}"
if ! command -v "$CXX" >/dev/null; then
  echo "clang++ not found: install clang (Debian: apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 2
fi
WORK="${NEE_FUZZ_WORK:-$(mktemp -d /tmp/nee_fuzz.XXXXXX)}"
mkdir -p "$WORK/obj"
FLAGS=(-std=c++20 -g -O1 -I"$ROOT/src" -fno-omit-frame-pointer)
SOURCES=("$ROOT"/src/base/*.cc "$ROOT"/src/ir/*.cc "$ROOT"/src/format/*.cc)
# The library's objects through ccache where there is one: paths relative to
# the source root (CCACHE_BASEDIR, -fdebug-prefix-map) so that a clone
# elsewhere hits them too.
cc_launcher=()
if command -v ccache >/dev/null; then
  cc_launcher=(ccache)
  export CCACHE_BASEDIR="$ROOT"
fi

echo "building in $WORK"
objects=()
for src in "${SOURCES[@]}"; do
  obj="$WORK/obj/$(basename "${src%.cc}")_$(echo "$src" | md5sum | cut -c1-8).o"
  "${cc_launcher[@]}" "$CXX" "${FLAGS[@]}" -fdebug-prefix-map="$ROOT"=. -fsanitize=fuzzer-no-link,address,undefined \
    -c "$src" -o "$obj"
  objects+=("$obj")
done
# An archive: only the objects the fuzzers need get linked.
rm -f "$WORK/libnee_fuzz_format.a"
ar rcs "$WORK/libnee_fuzz_format.a" "${objects[@]}"

run_target() {
  local name="$1"; shift
  local seeds=("$@")
  "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer,address,undefined "$ROOT/tests/fuzz/$name.cc" "$WORK/libnee_fuzz_format.a" \
    -lpthread -o "$WORK/$name"
  local corpus="$WORK/corpus_$name"
  mkdir -p "$corpus"
  cp "${seeds[@]}" "$corpus/"
  echo "running $name for ${SECONDS_PER_TARGET}s"
  local parallel=()
  if [ "$JOBS" -gt 1 ]; then parallel=(-jobs="$JOBS" -workers="$JOBS"); fi
  # -malloc_limit_mb: no input may make the reader allocate far beyond its size.
  local rc=0
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$WORK/$name" "$corpus" -max_total_time="$SECONDS_PER_TARGET" -runs="$MAX_RUNS" -seed="$SEED" -max_len=65536 \
    -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10 "${parallel[@]}" \
    -artifact_prefix="$WORK/crash_${name}_" -print_final_stats=1 >"$WORK/$name.log" 2>&1 || rc=$?
  tail -n 25 "$WORK/$name.log"
  if [ "$rc" != 0 ]; then
    echo "$name exited with $rc (log: $WORK/$name.log)" >&2
    return 1
  fi
  if ls "$WORK"/crash_"${name}"_* >/dev/null 2>&1; then
    echo "FOUND A CRASH in $name: $(ls "$WORK"/crash_"${name}"_*)" >&2
    return 1
  fi
}

DATA="$ROOT/tests/unit/format/data"
status=0
run_target reader_fuzzer "$DATA"/*.onnx "$DATA"/external/*.onnx "$DATA"/values/*.pb \
  "$ROOT"/tests/fuzz/regressions/reader_*.bin || status=1
run_target npy_fuzzer "$DATA"/npy/*.npy "$ROOT"/tests/fuzz/regressions/npy_*.bin || status=1
run_target pb_fuzzer "$DATA"/values/*.pb || status=1
[ "$status" = 0 ] && echo "no crashes"
exit "$status"
