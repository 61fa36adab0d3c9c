"""`nee convert MODEL --opset N -o OUT` (src/opt/opset_convert.cc): nee's own opset converter.

Oracles: the ONNX backend node tests' expected outputs (tests/python/convert_cases.py converts each case whose op
has a conversion step to several opsets and runs the result through nee and ONNX Runtime), onnx.checker with
full_check on every converted model, the PyTorch-exported models' own outputs, and ONNX Runtime on hand-built
models with subgraphs, functions and other domains. Impossible conversions must fail naming the node, the op and
both versions, writing nothing; the lineage record must be appended and verify.
"""
import json
import os
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nee

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convert_cases  # noqa: E402

from cli_util import nee_cli

ROOT = Path(__file__).resolve().parents[2]
TORCH = ROOT / "tests" / "models" / "torch"


def ort_run(path, feed):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feed)


def nee_run(path, feed):
    return nee.InferenceSession(str(path)).run(None, feed)


def opset_of(model, domain=""):
    return next(o.version for o in model.opset_import if o.domain == domain)


# ---- (1) node tests: convert, check, run through nee and ONNX Runtime against the test data ----

# One group per conversion family keeps a failure's report short; the full sweep (every node test, nine
# targets) is `python tests/python/convert_cases.py --all` (docs/convert_coverage.md).
GROUPS = {
    "softmax": ("softmax", "logsoftmax", "hardmax"),
    "reduce": ("reduce_",),
    "axes": ("squeeze", "unsqueeze", "split", "topk", "top_k"),
    "pad_slice_clip": ("_pad", "_slice", "_clip", "reflect_pad", "edge_pad", "constant_pad", "wrap_pad"),
    "resize_upsample": ("resize", "upsample"),
    "normalization": ("batchnorm", "layer_norm", "group_norm", "instancenorm"),
    "misc": ("dropout", "gelu", "gridsample", "scatter_elements", "castlike", "shape", "_max_", "_min_", "_sum_",
             "_mean_", "reshape", "constant"),
}
TARGETS = (7, 11, 13, 18, 21)


@pytest.fixture(scope="module")
def node_cases():
    return convert_cases.load_cases()


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_node_tests_convert_and_agree(node_cases, group):
    cases = [c for c in convert_cases.selected(node_cases) if any(k in c.name for k in GROUPS[group])]
    assert cases, group
    outcomes = convert_cases.run(cases, TARGETS)
    s, failed = convert_cases.summary(cases, outcomes)
    print(group, s)
    assert not failed, "\n".join(map(repr, failed[:20]))
    # Every group converts most of its cases somewhere; upgrades of opset >= 7 models are never refused
    # except for ops removed on the way (none in these groups).
    assert s["converted"] > 0
    ups_refused = [o for o in outcomes if o.status == "refused" and o.target > o.source]
    assert not [o for o in ups_refused if "removed" not in o.reason and "deprecated" not in o.reason
                and "tf_half_pixel_for_nn" not in o.reason], ups_refused[:5]


# ---- exported models ----

EXPORTED = ["cnn_opset11", "cnn_opset13", "cnn_opset17", "rnn_opset11", "transformer_opset13", "transformer_opset17",
            "control_flow_opset13", "mobilenet_v3_small_opset13", "grid_sample_bicubic_opset16"]


@pytest.mark.parametrize("name", EXPORTED)
@pytest.mark.parametrize("target", [11, 13, 17, 21])
def test_exported_models(name, target, tmp_path):
    folder = TORCH / name
    src = folder / "model.onnx"
    model = onnx.load(src)
    inits = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    feed = {n: np.load(folder / f"input_{i}.npy") for i, n in enumerate(names) if (folder / f"input_{i}.npy").exists()}
    expected = np.load(folder / "expected_0.npy")
    dst = tmp_path / "converted.onnx"
    try:
        nee.convert_opset(src, dst, target)
    except nee.InvalidArgument as e:
        # GridSample-16 has no ancestor; LayerNormalization decomposes, so only GridSample may refuse.
        assert "GridSample" in str(e) and target < 16, e
        assert not dst.exists()
        return
    converted = onnx.load(dst)
    assert opset_of(converted) == target
    onnx.checker.check_model(converted, full_check=True)
    tol = dict(rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(nee_run(dst, feed)[0], expected, **tol)
    np.testing.assert_allclose(ort_run(dst, feed)[0], expected, **tol)


# ---- hand-built models: subgraphs, functions, other domains ----

def softmax_model(opset, axis=1):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])
    node = helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=axis)
    return helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", opset)])


def test_softmax_axis_semantics_both_ways(tmp_path):
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    for axis in (0, 1, 2, -1):
        old = tmp_path / f"old{axis}.onnx"
        onnx.save(softmax_model(11, axis), old)
        want = ort_run(old, {"x": x})[0]
        new = tmp_path / f"new{axis}.onnx"
        nee.convert_opset(old, new, 13)
        np.testing.assert_allclose(ort_run(new, {"x": x})[0], want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(nee_run(new, {"x": x})[0], want, rtol=1e-5, atol=1e-6)
        back = tmp_path / f"back{axis}.onnx"
        nee.convert_opset(new, back, 11)
        np.testing.assert_allclose(ort_run(back, {"x": x})[0], want, rtol=1e-5, atol=1e-6)
        onnx.checker.check_model(onnx.load(back), full_check=True)


def if_model(opset):
    """If whose branches hold Softmax (axis 1 of a rank-3 tensor) and ReduceSum with axes: both change."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])
    if opset < 13:
        reduce = helper.make_node("ReduceSum", ["x"], ["r"], axes=[1], keepdims=1)
        inits = []
    else:
        reduce = helper.make_node("ReduceSum", ["x", "axes"], ["r"], keepdims=1)
        inits = [numpy_helper.from_array(np.array([1], np.int64), "axes")]
    then = helper.make_graph([helper.make_node("Softmax", ["x"], ["t"], axis=1)], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3, 4])])
    else_ = helper.make_graph([reduce, helper.make_node("Mul", ["r", "x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 3, 4])], inits)
    node = helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=else_)
    return helper.make_model(helper.make_graph([node], "g", [x, c], [out]),
                             opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("source,target", [(11, 13), (11, 21), (13, 11), (21, 11)])
def test_subgraphs_are_converted(tmp_path, source, target):
    src = tmp_path / "if.onnx"
    onnx.save(if_model(source), src)
    dst = tmp_path / "out.onnx"
    nee.convert_opset(src, dst, target)
    converted = onnx.load(dst)
    onnx.checker.check_model(converted, full_check=True)
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    for c in (True, False):
        feed = {"x": x, "c": np.array(c)}
        want = ort_run(src, feed)[0]
        np.testing.assert_allclose(ort_run(dst, feed)[0], want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(nee_run(dst, feed)[0], want, rtol=1e-5, atol=1e-6)


def function_model(opset):
    """A model-local function (domain 'local') whose body uses Unsqueeze and Softmax; a com.microsoft and an
    ai.onnx.ml node beside it must be left alone."""
    if opset < 13:
        body = [helper.make_node("Unsqueeze", ["a"], ["u"], axes=[0])]
    else:
        body = [helper.make_node("Constant", [], ["ax"], value=numpy_helper.from_array(np.array([0], np.int64))),
                helper.make_node("Unsqueeze", ["a", "ax"], ["u"])]
    body.append(helper.make_node("Softmax", ["u"], ["b"], axis=-1))
    fn = helper.make_function("local", "UnsqSoftmax", ["a"], ["b"], body,
                              [helper.make_opsetid("", opset)])
    nodes = [helper.make_node("UnsqSoftmax", ["x"], ["f"], domain="local", name="call"),
             helper.make_node("Gelu", ["f"], ["g"], domain="com.microsoft", name="ms_gelu"),
             helper.make_node("Normalizer", ["x"], ["n"], domain="ai.onnx.ml", norm="L2", name="ml")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("g", TensorProto.FLOAT, [1, 2, 4]),
                               helper.make_tensor_value_info("n", TensorProto.FLOAT, [2, 4])])
    return helper.make_model(graph, functions=[fn],
                             opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("local", 1),
                                            helper.make_opsetid("com.microsoft", 1),
                                            helper.make_opsetid("ai.onnx.ml", 3)])


@pytest.mark.parametrize("source,target", [(11, 13), (13, 11), (13, 21)])
def test_functions_converted_other_domains_kept(tmp_path, source, target):
    src = tmp_path / "fn.onnx"
    onnx.save(function_model(source), src)
    dst = tmp_path / "out.onnx"
    nee.convert_opset(src, dst, target)
    m = onnx.load(dst)
    assert opset_of(m) == target
    assert opset_of(m, "ai.onnx.ml") == 3 and opset_of(m, "com.microsoft") == 1 and opset_of(m, "local") == 1
    assert next(o.version for o in m.functions[0].opset_import if o.domain == "") == target
    orig = onnx.load(src)
    for a, b in zip(orig.graph.node, m.graph.node):
        assert (a.op_type, a.domain, list(a.input), list(a.output)) == (b.op_type, b.domain, list(b.input),
                                                                         list(b.output))
    feed = {"x": np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)}
    want = ort_run(src, feed)
    for got in (ort_run(dst, feed), nee_run(dst, feed)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_decompositions_layernorm_gelu(tmp_path):
    """LayerNormalization (17) and Gelu (20) below their opsets become their formulas."""
    rng = np.random.default_rng(3)
    scale = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "s")
    bias = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    nodes = [helper.make_node("LayerNormalization", ["x", "s", "b"], ["l", "mean", "inv"], axis=-1, epsilon=1e-3),
             helper.make_node("Gelu", ["l"], ["g1"]),
             helper.make_node("Gelu", ["l"], ["g2"], approximate="tanh")]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape)
            for n, shape in (("g1", [3, 8]), ("g2", [3, 8]), ("mean", [3, 1]), ("inv", [3, 1]))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8])], outs,
                              [scale, bias])
    src = tmp_path / "ln.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), src)
    feed = {"x": rng.standard_normal((3, 8)).astype(np.float32)}
    want = ort_run(src, feed)
    for target in (17, 13, 9):
        dst = tmp_path / f"ln{target}.onnx"
        nee.convert_opset(src, dst, target)
        m = onnx.load(dst)
        onnx.checker.check_model(m, full_check=True)
        ops = {n.op_type for n in m.graph.node}
        assert "Gelu" not in ops and ("LayerNormalization" in ops) == (target >= 17)
        for got in (ort_run(dst, feed), nee_run(dst, feed)):
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_group_normalization_18_to_21(tmp_path):
    rng = np.random.default_rng(4)
    inits = [numpy_helper.from_array(rng.standard_normal(2).astype(np.float32), "s"),
             numpy_helper.from_array(rng.standard_normal(2).astype(np.float32), "b")]
    graph = helper.make_graph([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 3, 3])], inits)
    src = tmp_path / "gn18.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), src)
    x = rng.standard_normal((2, 4, 3, 3)).astype(np.float32)
    # The per-group formula, computed here: scale and bias per group at 18.
    xg = x.reshape(2, 2, -1)
    norm = ((xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    s, b = numpy_helper.to_array(inits[0]), numpy_helper.to_array(inits[1])
    want = norm * np.repeat(s, 2)[None, :, None, None] + np.repeat(b, 2)[None, :, None, None]
    dst = tmp_path / "gn21.onnx"
    nee.convert_opset(src, dst, 21)
    onnx.checker.check_model(onnx.load(dst), full_check=True)
    for got in (ort_run(dst, {"x": x})[0], nee_run(dst, {"x": x})[0]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # Back to 18: GroupNormalization-18 is deprecated, so nee refuses rather than write what onnx rejects.
    r = nee_cli("convert", dst, "--opset", 18, "-o", tmp_path / "back.onnx")
    assert r.returncode == 1 and "GroupNormalization" in r.stderr and "deprecated" in r.stderr
    assert not (tmp_path / "back.onnx").exists()


# ---- (3) lineage, CLI ----

def test_cli_lineage_and_verify(tmp_path):
    src = TORCH / "cnn_opset11" / "model.onnx"
    mid, out = tmp_path / "cnn17.onnx", tmp_path / "cnn13.onnx"
    r = nee_cli("convert", src, "--opset", 17, "-o", mid)
    assert r.returncode == 0, r.stderr
    assert "opset 11 -> 17" in r.stdout and "lineage record appended" in r.stdout
    r = nee_cli("convert", mid, "--opset", 13, "-o", out)
    assert r.returncode == 0, r.stderr
    m = onnx.load(out)
    records = sorted((k, json.loads(v)) for k, v in ((p.key, p.value) for p in m.metadata_props)
                     if k.startswith("nee.lineage."))
    assert [rec["action"] for _, rec in records] == ["convert", "convert"]
    assert records[0][1]["parameters"] == {"from_opset": 11, "to_opset": 17}
    assert records[1][1]["parameters"] == {"from_opset": 17, "to_opset": 13}
    r = nee_cli("meta", out, "--verify")
    assert r.returncode == 0, r.stdout + r.stderr
    r = nee_cli("inspect", out)
    assert "convert" in r.stdout


# ---- (4) impossible conversions fail cleanly ----

def test_impossible_conversions_fail_cleanly(tmp_path):
    src = TORCH / "grid_sample_bicubic_opset16" / "model.onnx"
    out = tmp_path / "gs.onnx"
    r = nee_cli("convert", src, "--opset", 13, "-o", out)
    assert r.returncode == 1
    assert "GridSample-16" in r.stderr and "opset 16" in r.stderr and "opset 13" in r.stderr and "node '" in r.stderr
    assert not out.exists()
    # Resize with half-pixel linear sampling has no Resize-10 form.
    graph = helper.make_graph(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up", mode="linear")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")])
    rs = tmp_path / "resize.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), rs)
    with pytest.raises(nee.InvalidArgument, match=r"node 'up' \(Resize\): cannot convert Resize-13 \(opset 13\) "
                                                  r"to opset 9: at Resize-11 -> Resize-10: .*half_pixel"):
        nee.convert_opset(rs, out, 9)
    assert not out.exists()
    # A runtime-computed input that the older version wants as an attribute.
    graph = helper.make_graph([helper.make_node("Unsqueeze", ["x", "axes"], ["y"], name="unsq")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                               helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    un = tmp_path / "unsq.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), un)
    r = nee_cli("convert", un, "--opset", 11, "-o", out)
    assert r.returncode == 1 and "Unsqueeze-13" in r.stderr and "axes" in r.stderr and not out.exists()
    # Targets out of range, usage errors.
    assert nee_cli("convert", un, "--opset", 99, "-o", out).returncode == 1
    assert nee_cli("convert", un, "--opset", 5, "-o", out).returncode == 1
    assert nee_cli("convert", un, "-o", out).returncode == 2
    assert nee_cli("convert", un, "--opset", 13).returncode == 2
    assert not out.exists()
