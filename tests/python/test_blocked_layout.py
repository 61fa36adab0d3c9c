"""The channel-blocked layout pass (src/opt/layout_blocked.cc) on MobileNet-style blocks built here with
onnx.helper: pointwise and depthwise convs (stride 1 and 2) with activations, a residual Add, a value read
both inside and outside the run, and a graph output from inside it. ONNX Runtime runs the same model as the
oracle; the optimized model written by nee must contain the blocked ops, so the test covers them; results must
not depend on the thread count."""
import functools
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import nee

RNG = np.random.default_rng(11)


def conv(name, x, cin, cout, k=1, stride=1, group=1, act=None, inits=None, nodes=None):
    w = (RNG.standard_normal((cout, cin // group, k, k)) * (1.0 / np.sqrt(cin // group * k * k))).astype(np.float32)
    b = (RNG.standard_normal(cout) * 0.1).astype(np.float32)
    inits += [numpy_helper.from_array(w, name + "_w"), numpy_helper.from_array(b, name + "_b")]
    pad = k // 2
    y = name + "_conv"
    nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [y], name=name, kernel_shape=[k, k],
                                  strides=[stride, stride], pads=[pad] * 4, group=group))
    if act == "relu6":
        lo, hi = name + "_lo", name + "_hi"
        inits += [numpy_helper.from_array(np.array(0, np.float32), lo),
                  numpy_helper.from_array(np.array(6, np.float32), hi)]
        nodes.append(helper.make_node("Clip", [y, lo, hi], [name + "_out"]))
        return name + "_out"
    if act:
        nodes.append(helper.make_node(act, [y], [name + "_out"]))
        return name + "_out"
    return y


def conv_silu(name, x, cin, cout, k=1, stride=1, inits=None, nodes=None):
    """conv() with SiLU written out as x * Sigmoid(x), as torch exports it."""
    y = conv(name, x, cin, cout, k=k, stride=stride, act="Sigmoid", inits=inits, nodes=nodes)
    nodes.append(helper.make_node("Mul", [name + "_conv", y], [name + "_silu"]))
    return name + "_silu"


def mobilenet_block_model(batch=2, size=14):
    inits, nodes = [], []
    c = dict(inits=inits, nodes=nodes)
    x = "x"
    a = conv("expand", x, 16, 32, act="relu6", **c)
    d = conv("dw", a, 32, 32, k=3, group=32, act="Relu", **c)
    p = conv("project", d, 32, 16, **c)
    nodes.append(helper.make_node("Add", [p, x], ["residual"]))
    e = conv("expand2", "residual", 16, 48, act="HardSwish", **c)
    d2 = conv("dw2", e, 48, 48, k=3, stride=2, group=48, act="Sigmoid", **c)
    out = conv("project2", d2, 48, 24, **c)
    # `e` is also read outside the run (a graph output from inside it).
    half = (size + 1) // 2
    outputs = [helper.make_tensor_value_info(out, TensorProto.FLOAT, [batch, 24, half, half]),
               helper.make_tensor_value_info(e, TensorProto.FLOAT, [batch, 48, size, size])]
    graph = helper.make_graph(nodes, "blocks", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                               [batch, 16, size, size])],
                              outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def session(model_bytes, threads=1, optimized_path=None, reference=False):
    so = nee.SessionOptions()
    so.intra_op_num_threads = threads
    so.reference_kernels_only = reference
    if optimized_path:
        so.optimized_model_filepath = str(optimized_path)
    return nee.InferenceSession(model_bytes, so)


@pytest.mark.parametrize("size,reference", [(14, False), (9, False), (9, True)])
def test_blocked_run_agrees_with_onnxruntime(tmp_path, size, reference):
    model = mobilenet_block_model(size=size)
    data = model.SerializeToString()
    x = RNG.standard_normal((2, 16, size, size)).astype(np.float32)
    optimized = tmp_path / "optimized.onnx"
    got = session(data, optimized_path=optimized, reference=reference).run(None, {"x": x})
    ops = [n.op_type for n in onnx.load(str(optimized)).graph.node]
    assert ops.count("BlockedConv") == 6, ops
    assert ops.count("ToBlocked") == 1 and ops.count("FromBlocked") == 2, ops  # into the run; out twice
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5)


def test_blocked_run_gives_the_same_bits_at_any_thread_count():
    data = mobilenet_block_model().SerializeToString()
    x = RNG.standard_normal((2, 16, 14, 14)).astype(np.float32)
    first = session(data, 1).run(None, {"x": x})
    for threads in (2, 3):
        for a, b in zip(session(data, threads).run(None, {"x": x}), first):
            assert np.array_equal(a, b)


def test_a_lone_pointwise_conv_stays_nchw(tmp_path):
    inits, nodes = [], []
    y = conv("only", "x", 16, 32, act="Relu", inits=inits, nodes=nodes)
    graph = helper.make_graph(nodes, "one", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 5, 5])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 32, 5, 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    optimized = tmp_path / "optimized.onnx"
    session(model.SerializeToString(), optimized_path=optimized)
    ops = [n.op_type for n in onnx.load(str(optimized)).graph.node]
    assert "BlockedConv" not in ops and "ToBlocked" not in ops, ops


def run_optimized(tmp_path, nodes, inits, x_shape, y, y_shape):
    """The one-input model of `nodes` run once on random x by nee, optimized: its bytes, x, the outputs and
    the optimized graph's op types."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, y_shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data = model.SerializeToString()
    optimized = tmp_path / "optimized.onnx"
    x = RNG.standard_normal(x_shape).astype(np.float32)
    got = session(data, optimized_path=optimized).run(None, {"x": x})
    return data, x, got, [n.op_type for n in onnx.load(str(optimized)).graph.node]


@pytest.mark.parametrize("kinds", [[3, 3, 3, 3], [1, 3, 1, 3, 1]])
def test_stride_one_3x3_convs_only_join_runs_that_others_make(tmp_path, kinds):
    """Stride-1 3x3 convs (Winograd either way) repay no reorders: a chain of them (VGG's) stays NCHW, and so
    do 1x1 convs that only they link (each 1x1 a run of one); inside a run they stay blocked (the CSP test)."""
    inits, nodes = [], []
    y = "x"
    for i, k in enumerate(kinds):
        y = conv("c%d" % i, y, 16, 16, k=k, act="Relu", inits=inits, nodes=nodes)
    data, x, got, ops = run_optimized(tmp_path, nodes, inits, [1, 16, 12, 12], y, [1, 16, 12, 12])
    assert "BlockedConv" not in ops and "ToBlocked" not in ops, ops
    expect_agrees_everywhere(data, x, got[0])


def downsampling_model(batch=2, size=15):
    """A ResNet bottleneck that halves the image (1x1 -> 3x3 stride 2 -> 1x1, its residual through a 1x1
    stride-2 conv) and a YOLO-style 3x3 stride-2 conv with SiLU after it; an odd size, so that windows reach
    into the padding on one side only."""
    inits, nodes = [], []
    c = dict(inits=inits, nodes=nodes)
    a = conv("reduce", "x", 16, 16, act="Relu", **c)
    b = conv("spatial", a, 16, 16, k=3, stride=2, act="Relu", **c)
    m = conv("expand", b, 16, 32, **c)
    d = conv("downsample", "x", 16, 32, stride=2, **c)
    nodes.append(helper.make_node("Add", [m, d], ["sum"]))
    nodes.append(helper.make_node("Relu", ["sum"], ["block"]))
    s = conv("down", "block", 32, 24, k=3, stride=2, **c)
    nodes.append(helper.make_node("Sigmoid", [s], ["gate"]))
    nodes.append(helper.make_node("Mul", [s, "gate"], ["silu"]))
    out = conv("head", "silu", 24, 16, **c)
    half, quarter = (size + 1) // 2, ((size + 1) // 2 + 1) // 2
    graph = helper.make_graph(nodes, "down", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                             [batch, 16, size, size])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, [batch, 16, quarter, quarter])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("size", [15, 28])
def test_stride_two_convs_agree_with_onnxruntime(tmp_path, size):
    data = downsampling_model(size=size).SerializeToString()
    x = RNG.standard_normal((2, 16, size, size)).astype(np.float32)
    optimized = tmp_path / "optimized.onnx"
    got = session(data, optimized_path=optimized).run(None, {"x": x})
    blocked = [n for n in onnx.load(str(optimized)).graph.node if n.op_type == "BlockedConv"]
    strided = [n for n in blocked if any(a.name == "strides" and list(a.ints) == [2, 2] for a in n.attribute)]
    # Stride-2 convs are blocked where the CPU provider computes them directly: AVX2 and AVX-512 hosts.
    assert len(strided) == (3 if host_has_avx2() else 0), [n.name for n in blocked]
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=3e-5)
    for threads in (2, 3):
        assert np.array_equal(session(data, threads).run(None, {"x": x})[0], got[0])


def stem_model(kind, batch=1, size=33):
    """A CNN's first conv on 3 channels into a blocked run: YOLO's 6x6 stride-2 stem with SiLU then a 3x3
    stride-2 conv, ResNet's 7x7 stride-2 stem with Relu then its 3x3 stride-2 MaxPool and 1x1 convs (one a
    residual branch), MobileNetV2's 3x3 stride-2 stem with ReLU6 then depthwise and pointwise convs. An odd
    size, so that windows reach into the padding on one side only."""
    inits, nodes = [], []
    c = dict(inits=inits, nodes=nodes)
    half = (size + 1) // 2  # the side after a stride-2 3x3 or 7x7 window ("same" padding)
    if kind == "yolo":
        w = (RNG.standard_normal((16, 3, 6, 6)) * 0.2).astype(np.float32)
        inits.append(numpy_helper.from_array(w, "stem_w"))
        nodes.append(helper.make_node("Conv", ["x", "stem_w"], ["stem_conv"], kernel_shape=[6, 6], strides=[2, 2],
                                      pads=[2, 2, 2, 2]))
        nodes.append(helper.make_node("Sigmoid", ["stem_conv"], ["stem_gate"]))
        nodes.append(helper.make_node("Mul", ["stem_conv", "stem_gate"], ["stem"]))
        a = conv("down", "stem", 16, 32, k=3, stride=2, act="Relu", **c)
        out = conv("head", a, 32, 16, **c)
        stem_side = (size + 4 - 6) // 2 + 1
        dims = [batch, 16, (stem_side + 1) // 2, (stem_side + 1) // 2]
    elif kind == "resnet":
        s = conv("stem", "x", 3, 64, k=7, stride=2, act="Relu", **c)
        nodes.append(helper.make_node("MaxPool", [s], ["pool"], kernel_shape=[3, 3], strides=[2, 2],
                                      pads=[1, 1, 1, 1]))
        a = conv("reduce", "pool", 64, 16, act="Relu", **c)
        b = conv("expand", a, 16, 64, **c)
        d = conv("downsample", "pool", 64, 64, **c)
        nodes.append(helper.make_node("Add", [b, d], ["sum"]))
        nodes.append(helper.make_node("Relu", ["sum"], ["block"]))
        out = "block"
        dims = [batch, 64, (half + 1) // 2, (half + 1) // 2]
    else:
        s = conv("stem", "x", 3, 32, k=3, stride=2, act="relu6", **c)
        d = conv("dw", s, 32, 32, k=3, group=32, act="relu6", **c)
        out = conv("project", d, 32, 16, **c)
        dims = [batch, 16, half, half]
    graph = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                           [batch, 3, size, size])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, dims)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def expect_agrees_everywhere(data, x, got):
    """The optimized session's output `got` for input x agrees with ONNX Runtime, nee's unoptimized (NCHW)
    graph and nee's reference kernels, and other thread counts give the same bits."""
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(got, want[0], rtol=1e-4, atol=3e-5)
    so = nee.SessionOptions()
    so.graph_optimization_level = nee.GraphOptimizationLevel(0)
    plain = nee.InferenceSession(data, so).run(None, {"x": x})
    np.testing.assert_allclose(got, plain[0], rtol=1e-4, atol=3e-5)
    ref = session(data, reference=True).run(None, {"x": x})
    np.testing.assert_allclose(got, ref[0], rtol=1e-4, atol=3e-5)
    for threads in (2, 3):
        assert np.array_equal(session(data, threads).run(None, {"x": x})[0], got)


def host_flags():
    """The CPU's flags from /proc/cpuinfo (none where it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line for line in f if line.startswith("flags")), "").split()
    except OSError:
        return []


def host_has_avx2():
    """Whether nee's AVX2 level (AVX2 with FMA) is there and NEE_MAX_ISA does not cap nee below it."""
    if os.environ.get("NEE_MAX_ISA") == "portable":
        return False
    return all(f in host_flags() for f in ("avx2", "fma"))


@pytest.mark.parametrize("size", [14, 15])
def test_bottleneck_3x3_convs_stay_in_the_run(tmp_path, size):
    """Two ResNet bottlenecks (1x1 -> 3x3 -> 1x1 + residual, Relu): where Winograd reads and writes the
    blocked layout (AVX2 and AVX-512 hosts), the 3x3 stride-1 convs join the run of the 1x1 convs around
    them, so no reorders sit around them: the input is reordered in (for the first residual), the first
    1x1 conv stays NCHW (only a 3x3 conv links it to the run) with a ToBlocked after it, and the output is
    reordered out. Results agree with ONNX Runtime and the reference kernels and do not depend on the
    thread count."""
    inits, nodes = [], []
    c = dict(inits=inits, nodes=nodes)
    x = "x"
    for i in range(2):
        a = conv("reduce%d" % i, x, 64, 16, act="Relu", **c)
        b = conv("spatial%d" % i, a, 16, 16, k=3, act="Relu", **c)
        e = conv("expand%d" % i, b, 16, 64, **c)
        nodes.append(helper.make_node("Add", [e, x], ["sum%d" % i]))
        nodes.append(helper.make_node("Relu", ["sum%d" % i], ["out%d" % i]))
        x = "out%d" % i
    data, xv, got, ops = run_optimized(tmp_path, nodes, inits, [1, 64, size, size], x, [1, 64, size, size])
    if host_has_avx2():
        assert ops.count("BlockedConv") == 5 and ops.count("FusedConv") == 1 and "Conv" not in ops, ops
        assert ops.count("ToBlocked") == 2 and ops.count("FromBlocked") == 1, ops
    expect_agrees_everywhere(data, xv, got[0])


@pytest.mark.parametrize("also_read", [False, True])
def test_a_global_average_pool_reads_the_run_blocked(tmp_path, also_read):
    """A CNN's end: pointwise convs, then GlobalAveragePool (MobileNetV2's head over a 7x7 map). The pool reads
    the last conv's blocked output (BlockedGlobalAveragePool), so no FromBlocked is left, unless the feature map
    is also a graph output (also_read), which keeps its FromBlocked beside the blocked pool. The same bits as
    GlobalAveragePool's reference kernel over nee's unoptimized graph is not asked (the NCHW fast pool sums in
    another order); agreement with ONNX Runtime, the unoptimized graph and the reference kernels is."""
    inits, nodes = [], []
    c = dict(inits=inits, nodes=nodes)
    a = conv("a", "x", 16, 48, act="Relu", **c)
    b = conv("b", a, 48, 32, **c)
    f = conv("c", b, 32, 64, act="relu6", **c)
    nodes.append(helper.make_node("GlobalAveragePool", [f], ["pooled"]))
    outputs = [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [2, 64, 1, 1])]
    if also_read:
        outputs.append(helper.make_tensor_value_info(f, TensorProto.FLOAT, [2, 64, 7, 7]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 7, 7])],
                              outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data = model.SerializeToString()
    optimized = tmp_path / "optimized.onnx"
    x = RNG.standard_normal((2, 16, 7, 7)).astype(np.float32)
    got = session(data, optimized_path=optimized).run(None, {"x": x})
    ops = [n.op_type for n in onnx.load(str(optimized)).graph.node]
    assert "BlockedGlobalAveragePool" in ops and "GlobalAveragePool" not in ops, ops
    assert ops.count("FromBlocked") == (1 if also_read else 0), ops
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    so = nee.SessionOptions()
    so.graph_optimization_level = nee.GraphOptimizationLevel(0)
    plain = nee.InferenceSession(data, so).run(None, {"x": x})
    ref = session(data, reference=True).run(None, {"x": x})
    for other in (want, plain, ref):
        for g, w in zip(got, other):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=3e-5)
    for threads in (2, 3):
        for g, w in zip(session(data, threads).run(None, {"x": x}), got):
            assert np.array_equal(g, w)


@pytest.mark.parametrize("kind", ["yolo", "resnet", "mobilenet"])
@pytest.mark.parametrize("size", [33, 40])
def test_stems_and_maxpool_join_the_blocked_run(tmp_path, kind, size):
    data = stem_model(kind, batch=2, size=size).SerializeToString()
    x = RNG.standard_normal((2, 3, size, size)).astype(np.float32)
    optimized = tmp_path / "optimized.onnx"
    got = session(data, optimized_path=optimized).run(None, {"x": x})
    nodes = onnx.load(str(optimized)).graph.node
    ops = [n.op_type for n in nodes]
    stems = [n for n in nodes if n.op_type == "BlockedConv" and
             any(a.name == "input_layout" and a.s == b"nchw" for a in n.attribute)]
    if host_has_avx2():
        # The stem reads x where it lies and writes the blocked layout: nothing is reordered into the run.
        assert len(stems) == 1 and "ToBlocked" not in ops, ops
        assert ("BlockedMaxPool" in ops) == (kind == "resnet") and "MaxPool" not in ops, ops
    else:
        assert not stems and "BlockedMaxPool" not in ops, ops
    expect_agrees_everywhere(data, x, got[0])


def test_a_maxpool_read_only_outside_the_run_stays_nchw(tmp_path):
    """YOLO's SPPF: chained stride-1 MaxPools after a blocked run, all read by a Concat. Blocked, each pool
    would need a FromBlocked of its own output; NCHW they share the run's one."""
    inits, nodes = [], []
    c = dict(inits=inits, nodes=nodes)
    a = conv("a", "x", 16, 16, act="Relu", **c)
    b = conv("b", a, 16, 16, act="Relu", **c)
    s = conv("c", b, 16, 16, act="Relu", **c)
    pools = [s]
    for i in range(2):
        nodes.append(helper.make_node("MaxPool", [pools[-1]], [f"pool{i}"], kernel_shape=[5, 5], pads=[2, 2, 2, 2]))
        pools.append(f"pool{i}")
    nodes.append(helper.make_node("Concat", pools, ["cat"], axis=1))
    data, x, got, ops = run_optimized(tmp_path, nodes, inits, [1, 16, 9, 9], "cat", [1, 48, 9, 9])
    assert ops.count("MaxPool") == 2 and "BlockedMaxPool" not in ops and ops.count("BlockedConv") == 3, ops
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=3e-5)


def csp_model(size):
    """YOLO's blocks: a C3 (two 1x1 branches, one through a bottleneck whose 3x3 conv and residual Add join
    the run, concatenated and fused), a stride-2 conv, an SPPF (chained MaxPools into a
    Concat), a nearest 2x upsampling concatenated with the C3's output, and a last 1x1 conv; SiLU throughout.
    An odd size, so that the stride-2 window reaches into the padding on one side only."""
    inits, nodes = [], []
    c = dict(inits=inits, nodes=nodes)
    silu = functools.partial(conv_silu, **c)

    a = silu("a", "x", 16, 16)
    b = silu("b", "x", 16, 16)
    m = silu("m_b", silu("m_a", a, 16, 16), 16, 16, k=3)
    nodes.append(helper.make_node("Add", [a, m], ["res"]))
    nodes.append(helper.make_node("Concat", ["res", b], ["cat"], axis=-3))
    c3 = silu("out", "cat", 32, 32)
    down = silu("down", c3, 32, 16, k=3, stride=2)
    pools = [down]
    for i in range(2):
        nodes.append(helper.make_node("MaxPool", [pools[-1]], [f"pool{i}"], kernel_shape=[5, 5], pads=[2, 2, 2, 2]))
        pools.append(f"pool{i}")
    nodes.append(helper.make_node("Concat", pools, ["sppf"], axis=1))
    lat = silu("lat", silu("sppf_out", "sppf", 48, 32), 32, 16)
    inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"))
    nodes.append(helper.make_node("Resize", [lat, "", "scales"], ["up"], mode="nearest",
                                  coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    nodes.append(helper.make_node("Slice", ["up", "starts", "ends", "axes"], ["up_cut"]))
    inits += [numpy_helper.from_array(np.array([0, 0], np.int64), "starts"),
              numpy_helper.from_array(np.array([size, size], np.int64), "ends"),
              numpy_helper.from_array(np.array([2, 3], np.int64), "axes")]
    nodes.append(helper.make_node("Concat", ["up_cut", c3], ["neck"], axis=1))
    out = silu("head", "neck", 48, 24)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, size, size])
    graph = helper.make_graph(nodes, "csp", [x], [helper.make_tensor_value_info(out, TensorProto.FLOAT,
                                                                              [1, 24, size, size])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def upsampled_csp_model(size):
    """csp_model without the Slice (an even size: the upsampling gives back the C3's size), so that the
    Resize feeds the Concat directly and runs blocked."""
    model = csp_model(size)
    graph = model.graph
    for n in graph.node:
        if n.op_type == "Concat" and n.output[0] == "neck":
            n.input[0] = "up"
    kept = [n for n in graph.node if n.op_type != "Slice"]
    del graph.node[:]
    graph.node.extend(kept)
    kept_inits = [i for i in graph.initializer if i.name not in ("starts", "ends", "axes")]
    del graph.initializer[:]
    graph.initializer.extend(kept_inits)
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("size", [15, 16, 30])
def test_concat_add_and_resize_join_the_blocked_run(tmp_path, size):
    model = upsampled_csp_model(size) if size % 2 == 0 else csp_model(size)
    data = model.SerializeToString()
    x = RNG.standard_normal((1, 16, size, size)).astype(np.float32)
    optimized = tmp_path / "optimized.onnx"
    got = session(data, optimized_path=optimized).run(None, {"x": x})
    nodes = onnx.load(str(optimized)).graph.node
    blocked = {o for n in nodes if n.op_type in ("ToBlocked", "BlockedConv", "BlockedMaxPool", "Concat", "Add",
                                                  "Resize") for o in n.output if o.endswith("_blocked")}
    on_blocked = {n.op_type: sum(1 for m in nodes if m.op_type == n.op_type and m.input[0] in blocked)
                  for n in nodes}
    if host_has_avx2():
        # The C3, SPPF and neck concats and the residual Add run on blocked tensors, and with an even size the
        # upsampling too (with an odd one a Slice, NCHW, reads it); the bottleneck's 3x3 stride-1 conv stays
        # in the run (Winograd on the blocked layout), so only the input and the output are reordered.
        assert on_blocked.get("Concat", 0) == 3 and on_blocked.get("Add") == 1, on_blocked
        assert [n.name for n in nodes if n.op_type == "BlockedConv" and n.name == "m_b"] == ["m_b"], on_blocked
        reorders = [n.op_type for n in nodes if n.op_type in ("ToBlocked", "FromBlocked")]
        if size % 2 == 0:
            assert reorders == ["ToBlocked", "FromBlocked"], reorders
        assert on_blocked.get("Resize", 0) == (1 if size % 2 == 0 else 0), on_blocked
        assert "MaxPool" not in on_blocked, on_blocked
    else:
        assert not on_blocked.get("Concat") and not on_blocked.get("Add"), on_blocked
    expect_agrees_everywhere(data, x, got[0])


@pytest.mark.parametrize("coord,nearest,scales", [
    ("asymmetric", "floor", [1, 1, 2, 2, 1]),
    ("half_pixel", "round_prefer_floor", [1, 1, 1.5, 3, 1]),
    ("align_corners", "ceil", [1, 1, 0.6, 2.5, 1]),
])
def test_rank_five_nearest_resize_copies_whole_pixels(coord, nearest, scales):
    """Resize's fast path on [N, Cb, H, W, 8] (the blocked layout the layout pass gives a Resize): bitwise
    onnx's reference evaluator (ONNX Runtime picks other pixels for align_corners with these scales) and
    nee's reference kernel, at any thread count."""
    x = RNG.standard_normal((2, 3, 5, 7, 8)).astype(np.float32)
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest",
                            coordinate_transformation_mode=coord, nearest_mode=nearest)
    graph = helper.make_graph([node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array(scales, np.float32), "scales")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data = model.SerializeToString()
    got = session(data).run(None, {"x": x})[0]
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert got.shape == want.shape and np.array_equal(got, want)
    assert np.array_equal(session(data, reference=True).run(None, {"x": x})[0], got)
    assert np.array_equal(session(data, 3).run(None, {"x": x})[0], got)


def host_has_avx512():
    """Whether nee's AVX-512 level (F, DQ, VL, BW with FMA) is there and NEE_MAX_ISA does not cap it."""
    if os.environ.get("NEE_MAX_ISA") in ("portable", "avx2"):
        return False
    return all(f in host_flags() for f in ("avx512f", "avx512dq", "avx512vl", "avx512bw", "fma"))


@pytest.mark.parametrize("head", ["split", "direct", "split_kept_order"])
@pytest.mark.parametrize("size", [9, 16])
def test_a_head_conv_writes_channels_last_for_its_transpose(tmp_path, head, size):
    """A detector head after a blocked run: a 1x1 conv to 3 x 7 channels (not a multiple of 8), Sigmoid,
    Reshape to [N, 3, 7, H, W] and Transpose to [N, 3, H, W, 7] ("split"), or the conv's output transposed
    to [N, H, W, 21] at once ("direct"). On AVX2 and AVX-512 hosts the conv joins the run and writes
    channels last, so the transpose moves whole rows: its permutation keeps the last axis. A transpose that
    would not ("split_kept_order": [N, 7, 3, H, W], the split axes swapped) leaves the conv as it was.
    Results agree with ONNX Runtime, nee's unoptimized graph and reference kernels at every thread count."""
    inits, nodes = [], []
    c = dict(inits=inits, nodes=nodes)
    a = conv("a", "x", 16, 32, act="Relu", **c)
    b = conv("b", a, 32, 32, k=3, stride=2, act="Relu", **c)
    d = conv("d", b, 32, 16, act="Relu", **c)
    h = conv("head", d, 16, 21, act="Sigmoid", **c)
    half = (size + 1) // 2
    if head == "direct":
        nodes.append(helper.make_node("Transpose", [h], ["y"], perm=[0, 2, 3, 1]))
        y_shape = [2, half, half, 21]
    else:
        inits.append(numpy_helper.from_array(np.array([2, 3, 7, half, half], np.int64), "split_shape"))
        nodes.append(helper.make_node("Reshape", [h, "split_shape"], ["split"]))
        perm = [0, 1, 3, 4, 2] if head == "split" else [0, 2, 1, 3, 4]
        nodes.append(helper.make_node("Transpose", ["split"], ["y"], perm=perm))
        y_shape = [[2, 3, 7, half, half][p] for p in perm]
    data, xv, got, _ = run_optimized(tmp_path, nodes, inits, [2, 16, size, size], "y", y_shape)
    graph = onnx.load(str(tmp_path / "optimized.onnx")).graph
    channels_last = [n for n in graph.node if n.op_type == "BlockedConv" and
                     any(a.name == "output_layout" and a.s == b"nhwc" for a in n.attribute)]
    perms = [list(a.ints) for n in graph.node if n.op_type == "Transpose" for a in n.attribute if a.name == "perm"]
    if host_has_avx2() and head != "split_kept_order":
        assert len(channels_last) == 1, [n.op_type for n in graph.node]
        assert perms in ([[0, 3, 1, 2, 4]], [[0, 1, 2, 3]], []), perms  # rows of 7 (or none) move whole
    else:
        assert not channels_last
    assert got[0].shape == tuple(y_shape)
    expect_agrees_everywhere(data, xv, got[0])


@pytest.mark.parametrize("stride,acts,size,residual", [(2, ("relu6", "relu6"), 60, False),
                                                       (1, ("HardSwish", "Sigmoid"), 57, False),
                                                       (1, ("relu6", "relu6"), 58, True),
                                                       (1, ("relu6", "relu6"), 20, True)])
def test_a_large_expand_conv_and_its_depthwise_conv_run_as_one_node(tmp_path, stride, acts, size, residual):
    """An inverted residual block (1x1 expand 16 -> 96, 3x3 depthwise, 1x1 project) in the blocked run. On
    AVX2 and AVX-512 hosts, where the expanded tensor is larger than 1 MiB (96 x 60 x 60 floats: 1.4 MB; 57 x 57:
    1.25 MB), the three convs become one BlockedExpandDepthwise that never holds all of the expanded or the
    depthwise output (the projection's residual Add, folded into it, too); a smaller block (20 x 20) keeps
    its three convs. Results agree with ONNX Runtime, nee's unoptimized graph and reference kernels at
    every thread count."""
    inits, nodes = [], []
    c = dict(inits=inits, nodes=nodes)
    e = conv("expand", "x", 16, 96, act=acts[0], **c)
    d = conv("dw", e, 96, 96, k=3, stride=stride, group=96, act=acts[1], **c)
    p = conv("project", d, 96, 16 if residual else 24, **c)
    if residual:
        nodes.append(helper.make_node("Add", [p, "x"], ["block_out"]))
        p = "block_out"
    out = (size - 1) // stride + 1
    data, xv, got, ops = run_optimized(tmp_path, nodes, inits, [1, 16, size, size], p,
                                       [1, 16 if residual else 24, out, out])
    fused = host_has_avx2() and size > 40
    assert ops.count("BlockedExpandDepthwise") == (1 if fused else 0), ops
    assert ops.count("BlockedConv") == (0 if fused else 3), ops
    expect_agrees_everywhere(data, xv, got[0])


def with_symbolic_dims(model, axes):
    """The model with the given NCHW axes of its input and outputs named instead of fixed (a model exported
    with dynamic axes), its inner value types dropped."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    del model.graph.value_info[:]
    for v in list(model.graph.input) + list(model.graph.output):
        for axis in axes:
            dim = v.type.tensor_type.shape.dim[axis]
            dim.ClearField("dim_value")
            dim.dim_param = "NCHW"[axis].lower()
    onnx.checker.check_model(model, full_check=True)
    return model


def blocked_op_counts(optimized):
    ops = [n.op_type for n in onnx.load(str(optimized)).graph.node]
    return {op: ops.count(op) for op in ("BlockedConv", "BlockedMaxPool", "BlockedExpandDepthwise", "ToBlocked",
                                         "FromBlocked", "Concat", "Add", "Resize")}


@pytest.mark.parametrize("make,shapes", [
    (lambda: mobilenet_block_model(size=14), [(2, 16, 14, 14), (1, 16, 9, 9), (3, 16, 20, 11)]),
    (lambda: downsampling_model(size=15), [(2, 16, 15, 15), (1, 16, 8, 13)]),
    (lambda: stem_model("resnet"), [(1, 3, 33, 33), (2, 3, 20, 17)]),
    (lambda: upsampled_csp_model(16), [(1, 16, 16, 16), (2, 16, 30, 30)]),
])
@pytest.mark.parametrize("axes", [(0,), (0, 2, 3)])
def test_dynamic_axes_run_blocked_as_static_ones_do(tmp_path, make, shapes, axes):
    """Models exported with a dynamic batch (or dynamic height and width too, as OCR detectors are) get the
    same blocked ops as with fixed dims (the kernels read N, H and W from the tensors), and one session
    runs every input size, agreeing with ONNX Runtime and with nee's unoptimized graph."""
    static = make()
    size = [d.dim_value for d in static.graph.input[0].type.tensor_type.shape.dim]
    if not all(s[1:] == tuple(size[1:]) for s in shapes if 2 not in axes):
        shapes = [s for s in shapes if s[1:] == tuple(size[1:])]  # only the batch may change
    session(static.SerializeToString(), optimized_path=tmp_path / "static.onnx")
    dynamic = with_symbolic_dims(static, axes)
    data = dynamic.SerializeToString()
    sess = session(data, optimized_path=tmp_path / "dynamic.onnx")
    if host_has_avx2():
        dynamic_ops = blocked_op_counts(tmp_path / "dynamic.onnx")
        static_ops = blocked_op_counts(tmp_path / "static.onnx")
        if 2 in axes:
            # A residual Add whose operands' sizes are not known to match stays an Add (blocked, with the
            # activation after it) rather than becoming the conv's Z, which must match exactly; where it ends
            # the graph it runs NCHW, after a reorder of each operand. The convs and pools are the same.
            for op in ("Add", "FromBlocked"):
                dynamic_ops.pop(op), static_ops.pop(op)
        assert dynamic_ops == static_ops
        assert dynamic_ops["BlockedConv"] >= 3
    so = nee.SessionOptions()
    so.graph_optimization_level = nee.GraphOptimizationLevel(0)
    plain = nee.InferenceSession(data, so)
    oracle = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for shape in shapes:
        x = RNG.standard_normal(shape).astype(np.float32)
        got = sess.run(None, {"x": x})
        for g, p, w in zip(got, plain.run(None, {"x": x}), oracle.run(None, {"x": x})):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=3e-5)
            np.testing.assert_allclose(g, p, rtol=1e-4, atol=3e-5)


def test_an_add_broadcast_over_pixels_joins_the_run_and_keeps_its_meaning(tmp_path):
    """An Add of a feature map and its per-channel mean ([N, C, 1, 1], broadcast over H and W) inside a run:
    on the blocked tensors the same broadcast adds the same channel's value to every pixel."""
    inits, nodes = [], []
    c = dict(inits=inits, nodes=nodes)
    a = conv("a", "x", 16, 16, act="Relu", **c)
    nodes.append(helper.make_node("GlobalAveragePool", [a], ["mean"]))
    nodes.append(helper.make_node("Add", [a, "mean"], ["shifted"]))
    b = conv("b", "shifted", 16, 24, act="Relu", **c)
    y = conv("c", b, 24, 16, **c)
    data, x, got, ops = run_optimized(tmp_path, nodes, inits, [2, 16, 7, 9], y, [2, 16, 7, 9])
    if host_has_avx2():
        assert ops.count("BlockedConv") == 3 and ops.count("FromBlocked") == 1, ops
    expect_agrees_everywhere(data, x, got[0])


@pytest.mark.parametrize("k,stride", [(5, 1), (5, 2), (7, 1)])
def test_a_mobilenet_v3_block_runs_blocked_whole(tmp_path, k, stride):
    """MobileNetV3's pieces: a HardSwish stem, a 5x5 (or 7x7) depthwise conv, a squeeze-and-excitation
    branch (pool, two 1x1 convs on one pixel, the HardSigmoid scale multiplied back over the pixels) and
    the projection: on AVX2 and AVX-512 hosts all of it blocked, the SE scale reordered in (one pixel) and
    only the output reordered out."""
    inits, nodes = [], []
    c = dict(inits=inits, nodes=nodes)
    s = conv("stem", "x", 3, 16, k=3, stride=2, act="HardSwish", **c)
    e = conv("expand", s, 16, 32, act="HardSwish", **c)
    d = conv("dw", e, 32, 32, k=k, stride=stride, group=32, act="HardSwish", **c)
    nodes.append(helper.make_node("GlobalAveragePool", [d], ["pooled"]))
    f = conv("fc1", "pooled", 32, 8, act="Relu", **c)
    g = conv("fc2", f, 8, 32, act="HardSigmoid", **c)
    nodes.append(helper.make_node("Mul", [d, g], ["excited"]))
    y = conv("project", "excited", 32, 16, **c)
    size = 27
    half = (size + 1) // 2
    out = (half - 1) // stride + 1
    data, x, got, ops = run_optimized(tmp_path, nodes, inits, [1, 3, size, size], y, [1, 16, out, out])
    if host_has_avx2():
        assert "FusedConv" not in ops and "Conv" not in ops, ops
        assert ops.count("FromBlocked") == 1 and ops.count("Mul") == 1, ops
    expect_agrees_everywhere(data, x, got[0])


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_a_c2f_split_runs_blocked(tmp_path, opset):
    """YOLOv8's C2f block: a 1x1 conv whose output is split in two along channels, one half through a
    bottleneck (two 3x3 convs and a residual Add), both halves and the bottleneck's output concatenated
    and fused by a 1x1 conv, then a 3x3 stride-2 conv. The Split runs on the blocked tensor (its parts given in blocks: as an input
    from opset 13 on, as the attribute before, and in place of opset 18's num_outputs), so the block is
    one run; SiLU throughout."""
    inits, nodes = [], []
    c = dict(inits=inits, nodes=nodes)
    silu = functools.partial(conv_silu, **c)

    a = silu("cv1", "x", 16, 32)
    if opset >= 18:
        nodes.append(helper.make_node("Split", [a], ["left", "right"], axis=1, num_outputs=2))
    elif opset >= 13:
        inits.append(numpy_helper.from_array(np.array([16, 16], np.int64), "halves"))
        nodes.append(helper.make_node("Split", [a, "halves"], ["left", "right"], axis=1))
    else:
        nodes.append(helper.make_node("Split", [a], ["left", "right"], axis=1, split=[16, 16]))
    m = silu("m_cv2", silu("m_cv1", "right", 16, 16, k=3), 16, 16, k=3)
    nodes.append(helper.make_node("Add", ["right", m], ["bottleneck"]))
    nodes.append(helper.make_node("Concat", ["left", "right", "bottleneck"], ["cat"], axis=1))
    y = silu("down", silu("cv2", "cat", 48, 32), 32, 32, k=3, stride=2)  # and a conv after it: a run of three
    graph = helper.make_graph(nodes, "c2f", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 12, 13])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 32, 6, 7])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    data = model.SerializeToString()
    x = RNG.standard_normal((1, 16, 12, 13)).astype(np.float32)
    optimized = tmp_path / "optimized.onnx"
    got = session(data, optimized_path=optimized).run(None, {"x": x})
    ops = [n.op_type for n in onnx.load(str(optimized)).graph.node]
    if host_has_avx2():
        assert ops.count("ToBlocked") == 1 and ops.count("FromBlocked") == 1, ops
        assert ops.count("Split") == 1 and ops.count("BlockedConv") == 5, ops
    expect_agrees_everywhere(data, x, got[0])


def test_scalar_arithmetic_between_convs_runs_blocked(tmp_path):
    """PP-OCR's exports: a HardSwish written out as x * Clip(x + 3, 0, 6) / 6, then a learnable affine
    step (a scalar scale and shift, shaped [] and [1]) between the convs of a run: each is the same op
    on the blocked tensor (a single value broadcasts over any layout), so the run is not cut there."""
    inits, nodes = [], []
    c = dict(inits=inits, nodes=nodes)
    a = conv("expand", "x", 16, 32, **c)
    for name, value, shape in (("three", 3, []), ("zero", 0, []), ("six", 6, []), ("scale", 0.8, []),
                               ("shift", 0.1, [1])):
        inits.append(numpy_helper.from_array(np.full(shape, value, np.float32), name))
    nodes += [helper.make_node("Add", [a, "three"], ["plus3"]),
              helper.make_node("Clip", ["plus3", "zero", "six"], ["gate"]),
              helper.make_node("Mul", [a, "gate"], ["gated"]),
              helper.make_node("Div", ["gated", "six"], ["hswish"]),
              helper.make_node("Mul", ["scale", "hswish"], ["scaled"]),
              helper.make_node("Add", ["scaled", "shift"], ["affine"])]
    d = conv("dw", "affine", 32, 32, k=3, group=32, act="Relu", **c)
    y = conv("project", d, 32, 16, **c)
    data, x, got, ops = run_optimized(tmp_path, nodes, inits, [1, 16, 9, 11], y, [1, 16, 9, 11])
    if host_has_avx2():
        assert ops.count("ToBlocked") == 1 and ops.count("FromBlocked") == 1, ops
        assert ops.count("BlockedConv") == 3, ops
    expect_agrees_everywhere(data, x, got[0])
