#!/usr/bin/env bash
# Configures and builds nee (library, CLI, examples, tests, Python extension) into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  # Paths under the source root reach the compiler relative to the build
  # directory, so that a clone in another directory (CI) hits what this one
  # cached, and `pip wheel .` (tests/python/check_pip_install.sh) hits this build's objects.
  export CCACHE_BASEDIR="$PWD"
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DNEE_BUILD_PYTHON=ON \
  -DPython_EXECUTABLE="$PWD/.venv/bin/python" "${launcher[@]}" >/dev/null
cmake --build build -j"$(nproc)"
# Byte-compile the Python package, as pip does when it installs a wheel: an
# interpreter that writes no bytecode (PYTHONDONTWRITEBYTECODE=1, as on these
# machines) would otherwise compile its modules on every import (18 ms of
# `import nee`'s 30).
"$PWD/.venv/bin/python" -m compileall -q build/python/nee
