#!/usr/bin/env bash
# Checks that `pip install .` builds and installs a working `nee` package
# from the source tree (into a scratch folder, with the dev venv's build tools).
set -euo pipefail
cd "$(dirname "$0")/../.."
target=$(mktemp -d)
trap 'rm -rf "$target"' EXIT
launcher=""
command -v ccache >/dev/null && launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache"
CMAKE_ARGS="$launcher" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
  .venv/bin/pip install -q --disable-pip-version-check --no-build-isolation --no-deps --target "$target" .
cd "$target"
PYTHONPATH="$target" "$OLDPWD/.venv/bin/python" - <<'PY'
import numpy as np
import nee
sess = nee.InferenceSession("%s/examples/models/digits_logreg.onnx" % __import__("os").environ["OLDPWD"])
x = np.load("%s/examples/models/digits_test_x.npy" % __import__("os").environ["OLDPWD"])
label, proba = sess.run(None, {sess.get_inputs()[0].name: x})[:2]
y = np.load("%s/examples/models/digits_test_y.npy" % __import__("os").environ["OLDPWD"])
acc = float((label == y).mean())
assert acc > 0.9, acc
print(f"pip-installed nee: digits accuracy {acc:.3f} on {len(y)} images")
PY
