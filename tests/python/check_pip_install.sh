#!/usr/bin/env bash
# Checks that `pip wheel .` builds a wheel of the `nee` package from the
# source tree (with the dev venv's build tools and ccache) and that the wheel,
# installed into a clean venv, works: `import nee` runs the bundled digits
# model, and the `nee` console command and `python -m nee` run the
# command-line tool shipped in the wheel (nee/_bin/nee).
#
# The clean venv gets its one dependency, numpy, offline: a .pth file puts a
# folder holding links to the dev venv's numpy (package and dist-info, so pip
# sees the requirement met) on its path; nothing else of the dev venv is visible.
set -euo pipefail
cd "$(dirname "$0")/../.."
src="$PWD"
work=$(mktemp -d)
# The CMake build directory: new and empty (a clean build), removed at the end;
# a folder of the source root like build/, and built as scripts/build.sh
# builds (make; cc and c++, CMake's choice there, where scikit-build-core would
# pass Python's gcc and g++, a name ccache hashes; the same flags) so that with
# CCACHE_BASEDIR its compiles are ccache hits of build/'s rather than a second
# compile of everything.
wheel_build=$(mktemp -d "$src/build-wheel.XXXXXX")
trap 'rm -rf "$work" "$wheel_build"' EXIT
launcher=""
if command -v ccache >/dev/null; then
  launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache"
  export CCACHE_BASEDIR="$src"
fi
CC="${CC:-cc}" CXX="${CXX:-c++}" CMAKE_GENERATOR="Unix Makefiles" CMAKE_ARGS="$launcher" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
  .venv/bin/pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w "$work/wheels" \
  -C build-dir="$wheel_build" .
wheel=$(ls "$work"/wheels/nee-*.whl)
echo "wheel: $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB)"
.venv/bin/python - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
for want in ("nee/__init__.py", "nee/__main__.py", "nee/_bin/nee"):
    assert want in names, f"{want} missing from the wheel"
assert any(n.startswith("nee/_nee") and n.endswith(".so") for n in names), "the extension is missing from the wheel"
entry = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
assert entry, "the wheel declares no entry points"
assert "nee = nee.__main__:main" in zipfile.ZipFile(sys.argv[1]).read(entry[0]).decode(), "no `nee` console script"
stray = [n for n in names if not (n.startswith("nee/") or ".dist-info/" in n)]
assert not stray, f"files outside the package in the wheel: {stray[:5]}"
PY

venv="$work/venv"
.venv/bin/python -m venv "$venv"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
dev_site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir "$work/numpy-only"
for d in "$dev_site"/numpy "$dev_site"/numpy.libs "$dev_site"/numpy-*.dist-info; do
  [ -e "$d" ] && ln -s "$d" "$work/numpy-only/"
done
echo "$work/numpy-only" >"$site/numpy-only.pth"
"$venv/bin/pip" install -q --disable-pip-version-check --no-index "$wheel"

cd "$work"  # away from the source tree
"$venv/bin/nee" --help | grep -q "^usage:" || { echo "FAIL: nee --help printed no usage" >&2; exit 1; }
[ "$("$venv/bin/nee" --version)" = "nee $(sed -n 's/^version = "\(.*\)"/\1/p' "$src/pyproject.toml")" ] \
  || { echo "FAIL: nee --version does not print the package version" >&2; exit 1; }
"$venv/bin/python" -m nee ops --format json >"$work/ops.json"
"$venv/bin/python" -c 'import json, sys; n = len(json.load(open(sys.argv[1]))["operators"]); assert n > 100, n' "$work/ops.json"
"$venv/bin/nee" run "$src/examples/models/digits_logreg.onnx" --input "input=$src/examples/models/digits_test_x.npy" \
  --output-dir "$work/out" >/dev/null
SRC="$src" VENV="$venv" "$venv/bin/python" - <<'PY'
import os
import numpy as np
import nee
assert nee.__file__.startswith(os.environ["VENV"]), nee.__file__
models = os.path.join(os.environ["SRC"], "examples", "models")
sess = nee.InferenceSession(os.path.join(models, "digits_logreg.onnx"))
x = np.load(os.path.join(models, "digits_test_x.npy"))
label, proba = sess.run(None, {sess.get_inputs()[0].name: x})[:2]
y = np.load(os.path.join(models, "digits_test_y.npy"))
acc = float((label == y).mean())
assert acc > 0.9, acc
cli = np.load("out/output_0.npy")  # what `nee run` wrote above
assert (cli == label).all(), "the nee command and the Python package disagree"
print(f"wheel in a clean venv: digits accuracy {acc:.3f} on {len(y)} images; `nee` and `python -m nee` run")
PY
