#!/usr/bin/env bash
# Sanitizer builds and runs (docs/SECURITY.md).
#
#   scripts/sanitize.sh          # everything: all unit tests, the Python and model
#                                # tests, the whole conformance suite, fuzz seeds, TSan
#   scripts/sanitize.sh quick    # the bounded form (about 10 minutes cold on 2
#                                # cores): no unit-test suite, a slice of the Python
#                                # and conformance tests, no TSan unless
#                                # NEE_SANITIZE_TSAN=1, which scripts/test.sh sets
#                                # (about 5 more minutes cold on 2 cores, under 1
#                                # once ccache holds build-tsan/'s objects)
#
# build-asan/: clang, AddressSanitizer + UndefinedBehaviorSanitizer (no
# recovery: the first report fails), plus libFuzzer's coverage
# instrumentation so that the fuzz targets link against the same objects. It
# runs the unit tests, Python tests with the extension loaded into python
# (the shared ASan runtime preloaded), the conformance suite, and the fuzz
# targets over their regression seeds.
# build-tsan/ (full mode, or quick with NEE_SANITIZE_TSAN=1): clang,
# ThreadSanitizer; builds nee_threaded_tests (the optimized CPU kernels' tests,
# which run them at 1-3 threads, the ops tests comparing thread counts, the
# session concurrency tests and the soak) rather than the whole suite, and runs
# all of it.
# Any sanitizer report fails the script. Needs clang (Debian: clang-14
# libclang-rt-14-dev).
set -euo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-full}"
ROOT="$PWD"
JOBS="${NEE_SANITIZE_JOBS:-$(nproc)}"
if ! command -v clang++ >/dev/null; then
  echo "clang++ not found: apt-get install clang-14 libclang-rt-14-dev" >&2
  exit 2
fi
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  # As in scripts/build.sh: paths relative to the build directory, so that a
  # clone elsewhere hits this cache (with -fdebug-prefix-map below, ccache
  # leaves the working directory out of the hash of a -g compile).
  export CCACHE_BASEDIR="$ROOT"
fi
RUNTIME_DIR="$(clang++ -print-runtime-dir)"
# -O1: fast enough to run the suites, and keeps stack traces readable.
# -fdebug-prefix-map: debug info names files relative to the source root.
dbg="-O1 -g1 -fdebug-prefix-map=$ROOT=."
common=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$dbg"
        -DCMAKE_C_FLAGS_RELWITHDEBINFO="$dbg" -DPython_EXECUTABLE="$ROOT/.venv/bin/python" "${launcher[@]}")
FUZZERS=(reader_fuzzer npy_fuzzer pb_fuzzer checker_fuzzer run_fuzzer)

# Reports go to files as well as stderr, so that reports from processes whose
# output a harness swallows (conformance workers, CLI subprocesses) still fail
# the script.
REPORTS="$ROOT/build-asan/sanitizer-reports"
export ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
fail_on_reports() {
  local where="$1"
  if compgen -G "$where/*" >/dev/null; then
    echo "sanitizer reports in $where:" >&2
    head -n 60 "$where"/* >&2
    exit 1
  fi
}

echo "== ASan+UBSan build (build-asan)"
CC=clang CXX=clang++ cmake -S . -B build-asan "${common[@]}" -DNEE_SANITIZE=ON -DNEE_SANITIZE_FUZZ=ON \
  -DNEE_BUILD_PYTHON=ON >/dev/null
# quick: the unit-test suite is most of the compile time; its concurrency
# part is built alone.
targets=(_nee nee_cli nee_concurrency_tests)
[ "$MODE" = quick ] || targets+=(nee_unit_tests)
for f in "${FUZZERS[@]}"; do targets+=("nee_$f"); done
cmake --build build-asan -j"$JOBS" --target "${targets[@]}"
rm -rf "$REPORTS" && mkdir -p "$REPORTS"

echo "== ASan+UBSan: concurrency tests and soak"
NEE_SOAK_RUNS=400 build-asan/bin/nee_concurrency_tests --gtest_brief=1
if [ "$MODE" != quick ]; then
  echo "== ASan+UBSan: unit tests"
  build-asan/bin/nee_unit_tests --gtest_brief=1
fi

echo "== ASan+UBSan: fuzz targets over their regression seeds (full: and the seed corpora)"
SEEDS="$ROOT/build-asan/fuzz-seeds"
if [ "$MODE" != quick ] && [ ! -d "$SEEDS/run" ]; then .venv/bin/python tests/fuzz/make_seeds.py "$SEEDS"; fi
for f in "${FUZZERS[@]}"; do
  inputs=()
  for r in tests/fuzz/regressions/"${f%_fuzzer}"_*; do
    if [ -e "$r" ]; then inputs+=("$r"); fi  # (not `[ ] &&`: a false test ends the loop with status 1 under -e)
  done
  # quick: the conformance slice below runs node-test models through the same code.
  if [ "$MODE" != quick ]; then
    case "$f" in
      checker_fuzzer) inputs+=("$SEEDS/checker") ;;
      run_fuzzer) inputs+=("$SEEDS/run") ;;
      pb_fuzzer) inputs+=("$SEEDS/pb") ;;
    esac
  fi
  if [ ${#inputs[@]} -eq 0 ]; then continue; fi
  # -runs=0: execute the given inputs once each, no mutation.
  ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" build-asan/bin/nee_"$f" -runs=0 -rss_limit_mb=3072 -timeout=60 \
    "${inputs[@]}" >"build-asan/$f.replay.log" 2>&1 || { tail -n 40 "build-asan/$f.replay.log"; exit 1; }
  echo "$f: ${#inputs[@]} regression seeds or corpora replayed"
done

# Python loads the extension; the ASan runtime must be first in the process.
PRELOAD="$RUNTIME_DIR/libclang_rt.asan-x86_64.so"
py_env=(env LD_PRELOAD="$PRELOAD" PYTHONPATH="$ROOT/build-asan/python" NEE_PYTHON_DIR="$ROOT/build-asan/python"
        NEE_BIN="$ROOT/build-asan/bin/nee" NEE_UNIT_TEST_BINARY="$ROOT/build-asan/bin/nee_unit_tests"
        ASAN_OPTIONS="detect_leaks=0:log_path=$REPORTS/asan"
        UBSAN_OPTIONS="$UBSAN_OPTIONS:log_path=$REPORTS/ubsan")
echo "== ASan+UBSan: Python tests"
if [ "$MODE" = quick ]; then
  py_tests=(tests/python/test_hostile.py tests/python/test_run_limits.py tests/python/test_api.py)
else
  py_tests=(tests/python tests/models)
fi
"${py_env[@]}" .venv/bin/python -m pytest -q -x -p no:cacheprovider "${py_tests[@]}"
fail_on_reports "$REPORTS"

echo "== ASan+UBSan: ONNX conformance"
conf=(--config default)
# quick: every fourth node case by name (all op families are still reached through
# their many cases) and every model-level case (kind/name: 140 small models, the
# only ones reaching the opset-6 operator versions); the pass count is not
# compared, only sanitizer reports.
[ "$MODE" = quick ] && conf+=(--filter '^test_[a-c]|^test_(gather|scatter|slice|pad|resize|reshape|loop|if|scan|split|top)|/')
"${py_env[@]}" .venv/bin/python tests/conformance/run_conformance.py "${conf[@]}" --build build-asan
fail_on_reports "$REPORTS"

if [ "$MODE" = quick ] && [ "${NEE_SANITIZE_TSAN:-0}" != 1 ]; then
  echo "sanitizers (quick): no reports"
  exit 0
fi

echo "== TSan build (build-tsan)"
CC=clang CXX=clang++ cmake -S . -B build-tsan "${common[@]}" -DNEE_TSAN=ON -DNEE_BUILD_PYTHON=OFF >/dev/null
# The tests that run kernels and sessions on several threads (not the whole
# suite: the library alone is most of this build).
cmake --build build-tsan -j"$JOBS" --target nee_threaded_tests
echo "== TSan: kernels at several thread counts, concurrency tests, soak"
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" NEE_SOAK_RUNS=400 build-tsan/bin/nee_threaded_tests \
  --gtest_brief=1
echo "sanitizers${MODE:+ ($MODE)}: no reports"
