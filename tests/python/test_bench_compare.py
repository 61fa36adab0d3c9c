"""bench/compare.py checks that every runtime it is asked to compare can be imported before it
measures anything (a zoo run takes half an hour; one without nee on the path reported only "fail")."""
import os
import sys

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")
sys.path.insert(0, BENCH)
import compare  # noqa: E402


def test_a_runtime_that_cannot_be_imported_is_named(monkeypatch):
    assert compare.unimportable(["ort"]) == {}
    monkeypatch.setitem(compare.MODULES, "fake", "nee_no_such_module_here")
    missing = compare.unimportable(["ort", "fake"])
    assert list(missing) == ["fake"]
    assert "nee_no_such_module_here" in missing["fake"]


def test_compare_stops_before_measuring_when_nee_does_not_import(tmp_path, capsys, monkeypatch):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"")  # never opened: the import check comes first
    monkeypatch.setitem(compare.MODULES, "nee", "nee_no_such_module_here")  # nee as if not on the path
    assert compare.main([str(model), "--runtimes", "nee", "ort", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "nee cannot be imported" in err
    assert "PYTHONPATH=build/python" in err
    assert not (tmp_path / "out").exists()
