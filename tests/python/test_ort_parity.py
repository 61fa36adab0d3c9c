"""Behaviours users meet when switching from ONNX Runtime, each checked against ONNX Runtime itself.

- scalar inputs fed as one-element tensors (accepted where ONNX Runtime accepts them);
- opsets newer than nee knows (refused at session creation, as ONNX Runtime refuses them);
- `import nee` does not import ml_dtypes until a narrow type is met;
- RunOptions.only_execute_path_to_fetches (honoured by nee; compiled out of ONNX Runtime's inference builds).

Expected values come from numpy or ONNX Runtime, never from nee itself. Where nee is deliberately
stricter than ONNX Runtime (README, Python section), the test says so."""
import collections
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import nee

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NEE_BIN = os.environ.get("NEE_BIN", os.path.join(ROOT, "build", "bin", "nee"))
vi = helper.make_tensor_value_info


def make_model(nodes, inputs, outputs, opsets=(("", 17),)):
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    model.ir_version = 8
    return model.SerializeToString()


def ort_session(model):
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"])


def ort_outcome(model, feeds):
    """ONNX Runtime's outputs, or None when it refuses the feed."""
    try:
        return ort_session(model).run(None, feeds)
    except Exception:  # noqa: BLE001 - any refusal
        return None


# ---------------------------------------------------------------- scalar inputs

def identity_model(shape, elem=TensorProto.INT64):
    return make_model([helper.make_node("Identity", ["x"], ["y"])], [vi("x", elem, shape)], [vi("y", elem, None)])


# (declared shape, fed shape). ONNX Runtime 1.32 checks nothing but the element type for a
# declared scalar; for a declared rank >= 1 it checks the rank and every known dim.
SHAPE_CASES = [
    ([], ()), ([], (1,)), ([], (1, 1)), ([], (1, 1, 1)),
    ([], (2,)), ([], (0,)), ([], (1, 0)), ([], (1, 2)),
    ([1], (1,)), ([1], ()), ([1], (2,)), ([1], (1, 1)),
    ([2], (1,)), ([2], ()),
    (["n"], (3,)), (["n"], ()), (["n"], (1, 1)), ([None], ()),
    ([1, 1], (1, 1)), ([1, 1], ()), ([1, 1], (1,)),
    ([1, "n"], (1,)), ([1, "n"], ()),
]


@pytest.mark.parametrize("declared,fed", SHAPE_CASES, ids=[f"{d}<-{list(f)}" for d, f in SHAPE_CASES])
def test_input_shapes_accepted_as_onnxruntime_accepts_them(declared, fed):
    model = identity_model(declared)
    x = np.arange(1, 1 + int(np.prod(fed)), dtype=np.int64).reshape(fed)
    theirs = ort_outcome(model, {"x": x})
    sess = nee.InferenceSession(model)
    one_element_for_scalar = declared == [] and x.size == 1
    if theirs is None or (declared == [] and not one_element_for_scalar):
        # Refused by both. For a declared scalar fed several (or no) elements, ONNX Runtime runs
        # with the fed shape; nee is deliberately stricter (README): a scalar has one element.
        if theirs is not None:
            assert declared == [] and x.size != 1
        with pytest.raises(nee.InvalidArgument, match="input 'x'") as err:
            sess.run(None, {"x": x})
        if declared == []:
            assert "scalar" in str(err.value) and str(list(fed)).replace(" ", "") in str(err.value)
        return
    (y,) = sess.run(None, {"x": x})
    # Same values; a one-element tensor fed for a scalar is taken as the declared scalar.
    np.testing.assert_array_equal(y.reshape(-1), theirs[0].reshape(-1))
    assert y.dtype == theirs[0].dtype
    assert y.shape == (() if declared == [] else fed)


def test_traced_int_fed_as_one_element_array():
    # TorchScript exports a Python int as a rank-0 input; scripts feed np.array([7]).
    model = make_model(
        [helper.make_node("Range", ["zero", "n_steps", "one"], ["steps"]),
         helper.make_node("Mul", ["steps", "n_steps"], ["scaled"])],
        [vi("zero", TensorProto.INT64, []), vi("n_steps", TensorProto.INT64, []), vi("one", TensorProto.INT64, [])],
        [vi("steps", TensorProto.INT64, None), vi("scaled", TensorProto.INT64, None)])
    for feed in ({"zero": np.array([0]), "n_steps": np.array([7]), "one": np.array([1])},
                 {"zero": np.array(0), "n_steps": np.array([7]), "one": np.array([[1]])}):
        mine = nee.InferenceSession(model).run(None, feed)
        np.testing.assert_array_equal(mine[0], np.arange(7))
        np.testing.assert_array_equal(mine[1], np.arange(7) * 7)
        if feed["one"].ndim <= 1:  # ONNX Runtime's Range refuses a [1,1] delta; nee took it as the scalar
            theirs = ort_session(model).run(None, feed)
            for m, t in zip(mine, theirs):
                np.testing.assert_array_equal(m, t)


def test_scalar_fed_as_one_element_tensor_broadcasts_as_the_declared_scalar():
    model = make_model([helper.make_node("Add", ["a", "b"], ["y"])],
                       [vi("a", TensorProto.FLOAT, []), vi("b", TensorProto.FLOAT, [3])],
                       [vi("y", TensorProto.FLOAT, None)])
    a, b = np.array([[2.0]], np.float32), np.array([1, 2, 3], np.float32)
    (y,) = nee.InferenceSession(model).run(None, {"a": a, "b": b})
    # The model's scalar broadcasts to [3] (numpy: scalar + [3]). ONNX Runtime computes with the fed
    # [1,1] and returns [1,3] — the same values (README lists the difference).
    np.testing.assert_array_equal(y, np.float32(2.0) + b)
    theirs = ort_session(model).run(None, {"a": a, "b": b})[0]
    np.testing.assert_array_equal(y, theirs.reshape(y.shape))


def test_scalar_loop_trip_count_fed_as_one_element_tensor():
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"]), helper.make_node("Add", ["v", "i"], ["v_out"])],
        "body", [vi("i", TensorProto.INT64, []), vi("cond", TensorProto.BOOL, []), vi("v", TensorProto.INT64, [])],
        [vi("cond_out", TensorProto.BOOL, []), vi("v_out", TensorProto.INT64, [])])
    model = make_model([helper.make_node("Loop", ["M", "keep_going", "v0"], ["total"], body=body)],
                       [vi("M", TensorProto.INT64, []), vi("keep_going", TensorProto.BOOL, []),
                        vi("v0", TensorProto.INT64, [])], [vi("total", TensorProto.INT64, None)])
    feed = {"M": np.array([5]), "keep_going": np.array([True]), "v0": np.array([10])}
    (total,) = nee.InferenceSession(model).run(None, feed)
    (theirs,) = ort_session(model).run(None, feed)
    assert int(total) == int(theirs.reshape(())) == 10 + sum(range(5))


def test_scalar_element_type_is_still_checked():
    model = identity_model([])
    assert ort_outcome(model, {"x": np.array([7], np.int32)}) is None
    with pytest.raises(nee.InvalidArgument, match="'x'.*int64"):
        nee.InferenceSession(model).run(None, {"x": np.array([7], np.int32)})


def test_string_scalar_fed_as_one_element_array():
    model = identity_model([], TensorProto.STRING)
    (theirs,) = ort_session(model).run(None, {"x": np.array(["seven"], object)})
    (y,) = nee.InferenceSession(model).run(None, {"x": np.array(["seven"], object)})
    assert y.shape == () and y.reshape(-1).tolist() == theirs.reshape(-1).tolist() == ["seven"]


# ---------------------------------------------------------------- opsets newer than nee knows

def newest_opsets():
    """The newest opset per domain: onnx's schemas for the ONNX domains; ONNX Runtime's 1 for com.microsoft."""
    newest = collections.defaultdict(int)
    for schema in onnx.defs.get_all_schemas_with_history():
        newest[schema.domain] = max(newest[schema.domain], schema.since_version)
    assert newest[""] == onnx.defs.onnx_opset_version()
    newest["com.microsoft"] = 1
    return dict(newest)


def opset_model(domain, version):
    opsets = [("", 17)] if domain not in ("", "ai.onnx") else []
    return make_model([helper.make_node("Identity", ["x"], ["y"])], [vi("x", TensorProto.FLOAT, [2])],
                      [vi("y", TensorProto.FLOAT, None)], opsets + [(domain, version)])


TOO_NEW = [("", None), ("", 9999), ("ai.onnx", 9999), ("ai.onnx.ml", None), ("ai.onnx.ml", 99),
           ("ai.onnx.preview.training", None), ("ai.onnx.preview", None), ("com.microsoft", None)]


@pytest.mark.parametrize("domain,version", TOO_NEW, ids=[f"{d or 'default'}-{v or 'next'}" for d, v in TOO_NEW])
def test_opset_newer_than_known_is_refused_like_onnxruntime(domain, version):
    newest = newest_opsets()[domain if domain != "ai.onnx" else ""]
    version = version or newest + 1
    model = opset_model(domain, version)
    with pytest.raises(Exception):
        ort_session(model)
    with pytest.raises(nee.NotImplemented) as err:
        nee.InferenceSession(model)
    message = str(err.value)
    shown = domain or "ai.onnx"
    assert f"opset {version} of domain '{shown}'" in message, message
    assert f"newest nee supports ({newest})" in message, message


@pytest.mark.parametrize("domain", ["", "ai.onnx.ml", "ai.onnx.preview.training", "ai.onnx.preview",
                                    "com.microsoft"])
def test_newest_known_opset_loads_and_runs(domain):
    model = opset_model(domain, newest_opsets()[domain])
    x = np.array([1.5, -2.0], np.float32)
    (theirs,) = ort_session(model).run(None, {"x": x})
    (y,) = nee.InferenceSession(model).run(None, {"x": x})
    np.testing.assert_array_equal(y, theirs)


def test_unknown_custom_domain_opset_is_not_limited():
    # ONNX Runtime accepts any opset of a domain it does not know while no node uses it; so does nee.
    model = opset_model("com.example.custom", 99)
    x = np.array([1.5, -2.0], np.float32)
    (theirs,) = ort_session(model).run(None, {"x": x})
    (y,) = nee.InferenceSession(model).run(None, {"x": x})
    np.testing.assert_array_equal(y, theirs)
    # A node of that domain still fails as an unknown op.
    uses_it = make_model([helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example.custom")],
                         [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, None)],
                         [("", 17), ("com.example.custom", 99)])
    with pytest.raises(Exception):
        ort_session(uses_it)
    with pytest.raises(nee.NotImplemented, match="Frobnicate"):
        nee.InferenceSession(uses_it)


def test_cli_refuses_opset_newer_than_known(tmp_path):
    path = tmp_path / "future.onnx"
    path.write_bytes(opset_model("", 9999))
    r = subprocess.run([NEE_BIN, "run", str(path), "--random"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "opset 9999 of domain 'ai.onnx'" in r.stderr, r.stderr
    assert f"newest nee supports ({onnx.defs.onnx_opset_version()})" in r.stderr, r.stderr


# ---------------------------------------------------------------- ml_dtypes only when needed

def run_fresh(tmp_path, code, **models):
    """Runs `code` in a fresh interpreter that imports this nee and numpy but not onnx (onnx imports
    ml_dtypes itself); each model is written to a file whose path the code finds in MODELS[name].
    Returns the code's last stdout line as JSON."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(nee.__file__)),
                                         env.get("PYTHONPATH", "")])
    paths = {}
    for name, data in models.items():
        paths[name] = str(tmp_path / (name + ".onnx"))
        (tmp_path / (name + ".onnx")).write_bytes(data)
    prologue = f"import json, sys\nimport numpy as np\nMODELS = {paths!r}\n"
    r = subprocess.run([sys.executable, "-c", prologue + code], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def narrow_model(nodes, inputs, outputs):
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model.SerializeToString()


def test_import_and_plain_runs_do_not_import_ml_dtypes(tmp_path):
    add = narrow_model([helper.make_node("Add", ["x", "x"], ["y"])], [vi("x", TensorProto.FLOAT, [2])],
                       [vi("y", TensorProto.FLOAT, None)])
    result = run_fresh(tmp_path, """
import nee
after_import = "ml_dtypes" in sys.modules
sess = nee.InferenceSession(MODELS["add"])
y = sess.run(None, {"x": np.array([1, 2], np.float32)})[0]
print(json.dumps([after_import, "ml_dtypes" in sys.modules, y.tolist()]))
""", add=add)
    assert result == [False, False, [2.0, 4.0]]


def test_narrow_output_loads_ml_dtypes_on_demand(tmp_path):
    casts = narrow_model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BFLOAT16),
                          helper.make_node("Cast", ["x"], ["q"], to=TensorProto.INT4)],
                         [vi("x", TensorProto.FLOAT, [4])],
                         [vi("y", TensorProto.BFLOAT16, None), vi("q", TensorProto.INT4, None)])
    result = run_fresh(tmp_path, """
import nee
sess = nee.InferenceSession(MODELS["casts"])
before = "ml_dtypes" in sys.modules
y, q = sess.run(None, {"x": np.array([1.0, -2.5, 3.140625, 7.0], np.float32)})
print(json.dumps([before, str(y.dtype), y.astype(np.float32).tolist(), str(q.dtype), q.astype(np.int8).tolist()]))
""", casts=casts)
    import ml_dtypes

    x = np.array([1.0, -2.5, 3.140625, 7.0], np.float32)
    assert result[0] is False
    assert result[1] == "bfloat16" and result[2] == x.astype(ml_dtypes.bfloat16).astype(np.float32).tolist()
    # Cast to int4 rounds half to even and saturates: numpy's rint, clipped to [-8, 7].
    assert result[3] == "int4" and result[4] == np.clip(np.rint(x), -8, 7).astype(np.int8).tolist()


def test_narrow_inputs_in_a_fresh_process_and_concurrent_first_use(tmp_path):
    widen = narrow_model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
                         [vi("x", TensorProto.BFLOAT16, [3])], [vi("y", TensorProto.FLOAT, None)])
    result = run_fresh(tmp_path, """
import threading
import ml_dtypes  # the caller's arrays are ml_dtypes ones; nee has not filled its type table yet
import nee
sess = nee.InferenceSession(MODELS["widen"])
x = np.array([0.5, -3.0, 100.0], ml_dtypes.bfloat16)
results, errors = [], []
def work():
    try:
        results.append(sess.run(None, {"x": x})[0].tolist())
    except Exception as e:
        errors.append(repr(e))
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps([results, errors]))
""", widen=widen)
    results, errors = result
    assert errors == [] and results == [[0.5, -3.0, 100.0]] * 8


def test_only_execute_path_to_fetches_skips_what_onnxruntime_runs():
    """ONNX Runtime documents RunOptions.only_execute_path_to_fetches as running only the
    nodes the fetches need, but its inference builds compile it out: asked for Y1 only,
    it still runs the Reshape to Y2, which fails. nee honours the option
    (test_ort_api_execution.py checks nee's outputs against numpy)."""
    model = make_model([helper.make_node("Relu", ["X"], ["Y1"]), helper.make_node("Reshape", ["X", "S"], ["Y2"])],
                       [vi("X", TensorProto.FLOAT, [2, 3]), vi("S", TensorProto.INT64, [2])],
                       [vi("Y1", TensorProto.FLOAT, [2, 3]), vi("Y2", TensorProto.FLOAT, None)])
    feed = {"X": np.ones((2, 3), np.float32), "S": np.array([4, 4], np.int64)}
    options = ort.RunOptions()
    options.only_execute_path_to_fetches = True
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.Fail, match="Reshape"):
        ort_session(model).run(["Y1"], feed, options)
    nee_options = nee.RunOptions()
    nee_options.only_execute_path_to_fetches = True
    sess = nee.InferenceSession(model)
    np.testing.assert_array_equal(sess.run(["Y1"], feed, nee_options)[0], np.ones((2, 3), np.float32))
