#!/usr/bin/env bash
# Installs what the benchmark zoo and bench/compare.py need, on top of scripts/setup.sh:
#   - Debian's python3-torch and python3-torchvision (CPU) for the system interpreter
#     /usr/bin/python3, which bench/zoo.py uses to export the torch models;
#   - openvino, tract and matplotlib into .venv at the versions in bench/requirements.txt,
#     constrained by requirements-lock.txt so the project's own pins do not move.
# Safe to run repeatedly.  Usage: bash bench/setup.sh   (VENV=path/to/.venv to use another venv)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! /usr/bin/python3 -c "import torch, torchvision" >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-torch python3-torchvision >/dev/null
fi

VENV=${VENV:-.venv}  # another checkout's venv (e.g. a git worktree's) via VENV=/path/to/.venv
if [ ! -x "$VENV/bin/python" ]; then
  echo "bench/setup.sh: no $VENV here; run scripts/setup.sh first (or set VENV)" >&2
  exit 1
fi
"$VENV/bin/pip" install -q --disable-pip-version-check -r bench/requirements.txt -c requirements-lock.txt
