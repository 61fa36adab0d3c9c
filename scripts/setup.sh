#!/usr/bin/env bash
# Installs what nee needs to build and test on a fresh Debian machine:
# compilers and libraries from Debian, Python packages into .venv (PyPI).
# Safe to run repeatedly; skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
# The image codec libraries are for the ImageDecoder operator (each optional to the build).
for pkg in g++ cmake make libgtest-dev python3-venv ccache clang libclang-rt-14-dev \
           pkg-config libjpeg-dev libpng-dev libtiff-dev libwebp-dev libopenjp2-7-dev libseccomp-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# Every package at the exact version in requirements-lock.txt (transitively): the
# conformance floor is measured against these onnx/numpy/ml_dtypes releases, so
# a new upstream release must not move the oracle under it.
.venv/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt -c requirements-lock.txt
