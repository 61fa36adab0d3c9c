"""bench/compare.py checks that every runtime it is asked to compare can be imported before it
measures anything (a zoo run takes half an hour; one without nee on the path reported only "fail")."""
import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")
sys.path.insert(0, BENCH)
import compare  # noqa: E402


def test_a_runtime_that_cannot_be_imported_is_named():
    missing = compare.unimportable(["ort"])
    assert missing == {}
    compare.MODULES["fake"] = "nee_no_such_module_here"
    try:
        missing = compare.unimportable(["ort", "fake"])
    finally:
        del compare.MODULES["fake"]
    assert list(missing) == ["fake"]
    assert "nee_no_such_module_here" in missing["fake"]


def test_compare_stops_at_once_without_nee(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"")  # never opened: the import check comes first
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        import nee  # noqa: F401
        if os.path.dirname(nee.__file__).startswith(sys.prefix):
            pytest.skip("nee is installed in this interpreter's site-packages, so it imports without PYTHONPATH")
    except ImportError:
        pass
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "compare.py"), str(model), "--runtimes", "nee", "ort",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=120,
                          cwd=str(tmp_path))
    assert proc.returncode == 2
    assert "nee cannot be imported" in proc.stderr
    assert "PYTHONPATH=build/python" in proc.stderr
    assert not (tmp_path / "out").exists()
