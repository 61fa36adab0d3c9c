"""The nee command line for the Python tests: where the binary is ($NEE_BIN, else this checkout's build) and
how a test runs it."""
import os
import subprocess
from pathlib import Path

NEE = os.environ.get("NEE_BIN", str(Path(__file__).resolve().parents[2] / "build" / "bin" / "nee"))


def nee_cli(*args, env=None, timeout=120):
    """`nee ARGS...` (each argument str()-ed), output captured as text; the CompletedProcess."""
    return subprocess.run([NEE, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env)
