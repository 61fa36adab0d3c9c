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


def _precision_with_plot(exe: str, args: list[str]) -> int:
    """`nee precision ... --plot OUT.png`: the tool's own run (its table, --json and exit status), then the
    per-layer plot drawn from its JSON report with matplotlib when that is importable."""
    i = args.index("--plot")
    if i + 1 >= len(args):
        sys.stderr.write("nee: --plot needs a value (OUT.png)\n")
        return 2
    out = args[i + 1]
    rest = args[:i] + args[i + 2:]
    import subprocess
    import tempfile
    json_path = None
    tmp = None
    if "--json" in rest and rest.index("--json") + 1 < len(rest):
        json_path = rest[rest.index("--json") + 1]
    else:
        tmp = tempfile.TemporaryDirectory()
        json_path = os.path.join(tmp.name, "precision.json")
        rest = rest + ["--json", json_path]
    try:
        sys.stdout.flush()
        if tmp is None:
            rc = subprocess.call([exe, *rest])
        else:  # the tool's output less its line about the temporary JSON file
            p = subprocess.run([exe, *rest], stdout=subprocess.PIPE, text=True)
            sys.stdout.write("".join(line for line in p.stdout.splitlines(keepends=True)
                                     if line.strip() != f"written to {json_path}"))
            rc = p.returncode
        if os.path.isfile(json_path) and rc in (0, 4):  # 4: a gate failed; the report is complete
            import json
            from ._precision import plot
            with open(json_path, encoding="utf-8") as f:
                report = json.load(f)
            if plot(report, out):
                print(f"plot written to {out}")
            else:
                print("matplotlib is not importable: no plot drawn (pip install matplotlib to draw one)")
        return rc
    finally:
        if tmp is not None:
            tmp.cleanup()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    exe = binary()
    if exe is None:
        sys.stderr.write("nee: the command-line tool is not part of this installation of the nee package "
                         f"(looked for {os.path.join(_HERE, '_bin', 'nee')})\n")
        return 2
    if args[:1] == ["precision"] and "--plot" in args:
        return _precision_with_plot(exe, args)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, ["nee", *args])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
