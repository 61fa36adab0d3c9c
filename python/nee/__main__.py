"""`python -m nee ARGS...` and the `nee` console command: the nee command-line tool.

The tool is the C++ binary (tools/, target nee_cli). A wheel ships it inside
the package as nee/_bin/nee; in a build tree (PYTHONPATH=build/python) it is
build/bin/nee. This module only finds it and replaces the Python process with
it, so arguments, standard streams, signals and the exit status are the tool's
own."""
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def binary() -> str | None:
    """The path of the `nee` executable this package runs, or None."""
    for path in (os.path.join(_HERE, "_bin", "nee"),  # installed from a wheel
                 os.path.join(_HERE, os.pardir, os.pardir, "bin", "nee")):  # build/python/nee -> build/bin/nee
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.normpath(path)
    return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    exe = binary()
    if exe is None:
        sys.stderr.write("nee: the command-line tool is not part of this installation of the nee package "
                         f"(looked for {os.path.join(_HERE, '_bin', 'nee')})\n")
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, ["nee", *args])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
