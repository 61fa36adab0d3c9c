#!/usr/bin/env bash
# Sets everything up, builds, and runs every test: C++ unit tests and the C
# example (ctest), Python API and model tests (pytest), ONNX conformance
# against the committed floor, a bounded fuzz run, a soak, sanitizer builds
# (scripts/sanitize.sh quick: ASan+UBSan, and TSan over the multi-threaded
# tests unless NEE_SANITIZE_TSAN=0), and `pip wheel .` installed into a clean venv.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's heading says when it began (seconds since the start), so that a
# log shows where the time goes.
start=$SECONDS
step() { echo "== $* (t+$((SECONDS - start))s)"; }
trap 'echo "== test.sh exits with status $? (t+$((SECONDS - start))s)"' EXIT

step "setup (scripts/setup.sh)"
scripts/setup.sh
step "build (scripts/build.sh)"
scripts/build.sh

step "C++ unit tests and examples (ctest)"
(cd build && ctest --output-on-failure -j"$(nproc)")

step "Python tests (pytest)"
PYTHONPATH="$PWD/build/python" NEE_BIN="$PWD/build/bin/nee" NEE_UNIT_TEST_BINARY="$PWD/build/bin/nee_unit_tests" \
  .venv/bin/python -m pytest -q tests/python tests/models tests/unit/format/check_written_models.py

step "ONNX conformance (node tests and model tests), under each session configuration"
# default, optimizations off, reference kernels only, one thread: each must meet the floor.
PYTHONPATH="$PWD/build/python" .venv/bin/python tests/conformance/run_conformance.py \
  --config default --config no-opt --config reference --config one-thread \
  --report build/conformance.md --check-floor tests/conformance/conformance_floor.txt

if [ -x tests/fuzz/run_bounded_fuzz.sh ]; then
  step "bounded fuzz run"
  tests/fuzz/run_bounded_fuzz.sh 120 1 300000
fi

step "soak: one session shared by 8 threads, 10,000 runs (results and RSS)"
NEE_SOAK_RUNS=10000 build/bin/nee_unit_tests --gtest_filter='Soak.*' | grep -E "^soak:|PASSED|FAILED"

step "sanitizers (ASan+UBSan, and TSan over the multi-threaded tests; bounded)"
NEE_SANITIZE_TSAN="${NEE_SANITIZE_TSAN:-1}" scripts/sanitize.sh quick

step "pip wheel . (clean build of the Python package, with the nee command) into a clean venv"
tests/python/check_pip_install.sh
