"""`python -m nee` and the CLI's --help/--version (the wheel's `nee` command runs the same launcher;
tests/python/check_pip_install.sh checks the installed wheel, tests/install/ the `cmake --install` tree)."""
import os
import subprocess
import sys

import nee
from nee import __main__ as launcher

from cli_util import NEE, nee_cli

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_help_and_version():
    r = subprocess.run([NEE, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("usage:"), r.stderr
    r = subprocess.run([NEE, "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"nee {nee.__version__}"


def test_python_m_nee_runs_the_cli():
    assert launcher.binary() is not None, "no nee binary beside this nee package (build the nee_cli target)"
    r = subprocess.run([sys.executable, "-m", "nee", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"nee {nee.__version__}", r.stderr
    # Arguments and the exit status are the tool's own.
    r = subprocess.run([sys.executable, "-m", "nee", "check", os.path.join(ROOT, "no", "such.onnx")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "such.onnx" in r.stdout + r.stderr
