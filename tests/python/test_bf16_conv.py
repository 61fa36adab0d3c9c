"""bfloat16 CNNs in a session: on CPUs with AVX512-BF16 the widen-narrow-float pass keeps a bf16 model's
group-1 Convs bfloat16 with the residual Add and Relu after them (fused into ai.nee FusedConv) and
ep/cpu/conv_bf16.cc computes them with vdpbf16ps; elsewhere (and under NEE_MAX_ISA=avx2) they are widened
to float32 between Casts as before. Either way each op's output is rounded to bfloat16 as the model's
per-op semantics say.

Oracles, independent of the kernel: nee's reference kernels (optimizations off) and onnx's reference
evaluator on the same bf16 model, and the float32 model within what 8 significant bits allow; 1, 2 and 3
threads give the same bits.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import nee

from cli_util import nee_cli
from test_quantize_bf16 import BF16, cpu_has_avx512_bf16, narrow_ulp, nee_run


def resnet_block_model(path):
    """A small ResNet: 7x7 stride-2 stem over 3 channels, MaxPool, a bottleneck block with a downsample
    branch (1x1, 3x3, 1x1, residual Add, Relu), a 3x3 stride-2 conv, GlobalAveragePool, Gemm. Float32,
    opset 22 (where Conv allows bfloat16)."""
    rng = np.random.default_rng(41)
    inits = []

    def weight(name, *shape):
        fan_in = int(np.prod(shape[1:]))
        w = (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, "W_" + name))
        inits.append(numpy_helper.from_array((rng.standard_normal(shape[0]) * 0.1).astype(np.float32), "B_" + name))
        return ["W_" + name, "B_" + name]

    n = helper.make_node
    nodes = [
        n("Conv", ["x", *weight("stem", 16, 3, 7, 7)], ["s"], strides=[2, 2], pads=[3, 3, 3, 3]),
        n("Relu", ["s"], ["sr"]),
        n("MaxPool", ["sr"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        n("Conv", ["p", *weight("c1", 8, 16, 1, 1)], ["c1"]),
        n("Relu", ["c1"], ["r1"]),
        n("Conv", ["r1", *weight("c2", 8, 8, 3, 3)], ["c2"], pads=[1, 1, 1, 1]),
        n("Relu", ["c2"], ["r2"]),
        n("Conv", ["r2", *weight("c3", 32, 8, 1, 1)], ["c3"]),
        n("Conv", ["p", *weight("down", 32, 16, 1, 1)], ["d"]),
        n("Add", ["c3", "d"], ["sum"]),
        n("Relu", ["sum"], ["r3"]),
        n("Conv", ["r3", *weight("c4", 24, 32, 3, 3)], ["c4"], strides=[2, 2], pads=[1, 1, 1, 1]),
        n("Relu", ["c4"], ["r4"]),
        n("GlobalAveragePool", ["r4"], ["g"]),
        n("Flatten", ["g"], ["f"]),
        n("Gemm", ["f", *weight("fc", 10, 24)], ["y"], transB=1),
    ]
    graph = helper.make_graph(nodes, "resnet_block",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 37, 33])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]), str(path))
    return path


def bf16_model(tmp_path):
    out = tmp_path / "resnet_block_bf16.onnx"
    nee.quantize(str(resnet_block_model(tmp_path / "resnet_block.onnx")), str(out), mode="bf16")
    return out


def feed():
    return {"x": np.random.default_rng(42).standard_normal((2, 3, 37, 33)).astype(np.float32)}


def ops_after_level2(tmp_path, model, env=None):
    opt = tmp_path / "opt.onnx"
    r = nee_cli("optimize", model, "-o", opt, "--opt-level", "2", env=env)
    assert r.returncode == 0, r.stderr
    return onnx.load(str(opt))


def expect_close(got, want, ulps, what):
    # Each op rounds its output to bfloat16 in both; a float32 sum in another order can land on the other
    # side of a rounding boundary (one ulp), which later layers carry on: a few ulps of the output's scale.
    tol = ulps * narrow_ulp(np.abs(want).max(), BF16)
    assert np.abs(got - want).max() <= tol, (what, np.abs(got - want).max(), tol)


def test_bf16_convs_stay_bfloat16_and_fuse_where_the_cpu_computes_them(tmp_path):
    model = bf16_model(tmp_path)
    om = ops_after_level2(tmp_path, model)
    onnx.checker.check_model(om)
    convs = [nd for nd in om.graph.node if nd.op_type in ("Conv", "FusedConv")]
    if not cpu_has_avx512_bf16():
        assert all(nd.domain != "ai.nee" for nd in convs)
        return
    # Stem + Relu, c1 + Relu, c2 + Relu, c4 + Relu and one of c3 / downsample with the Add (the other
    # one's output as Z) and Relu: ai.nee FusedConv; the other a plain bfloat16 Conv; bfloat16 weights.
    assert sorted((nd.domain, nd.op_type) for nd in convs) == [("", "Conv")] + [("ai.nee", "FusedConv")] * 5
    residual = [nd for nd in convs if len(nd.input) == 4]
    assert len(residual) == 1 and residual[0].input[3] in ("c3", "d")
    heavy_inputs = {i for nd in convs for i in nd.input}
    assert all(i.data_type == TensorProto.BFLOAT16 for i in om.graph.initializer if i.name in heavy_inputs)
    # Casts only at the model's input and output and around the widened MaxPool and GlobalAveragePool.
    assert sum(nd.op_type == "Cast" for nd in om.graph.node) == 6
    assert not any(nd.op_type in ("Add", "Relu") for nd in om.graph.node)


def test_bf16_cnn_matches_the_reference_kernels_and_evaluator(tmp_path):
    model = bf16_model(tmp_path)
    x = feed()
    runs = [nee_run(model, x, threads=threads) for threads in (1, 2, 3)]
    for other in runs[1:]:
        assert other[0].tobytes() == runs[0][0].tobytes()
    got = runs[0][0]
    ref = nee_run(model, x, nee.GraphOptimizationLevel.ORT_DISABLE_ALL)[0]
    expect_close(got, ref, 4, "reference kernels")
    spec = ReferenceEvaluator(str(model)).run(None, x)[0]
    expect_close(got, spec, 4, "onnx reference evaluator")
    # bfloat16's 8 significant bits through six layers: a few percent of the float32 output's scale.
    fp32 = nee_run(tmp_path / "resnet_block.onnx", x)[0]
    assert np.abs(got - fp32).max() <= 0.05 * np.abs(fp32).max()


def test_bf16_cnn_without_avx512_keeps_the_widened_path(tmp_path):
    # NEE_MAX_ISA=avx2 hides AVX-512 (and AVX512-BF16): every Conv is widened to float32 between Casts, and
    # the model computes the same per-op-rounded values.
    model = bf16_model(tmp_path)
    env = dict(os.environ, NEE_MAX_ISA="avx2")
    om = ops_after_level2(tmp_path, model, env=env)
    assert not any(nd.domain == "ai.nee" for nd in om.graph.node)
    assert sum(nd.op_type == "Cast" for nd in om.graph.node) > 6
    np.save(tmp_path / "x.npy", feed()["x"])
    r = nee_cli("run", model, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "out", env=env)
    assert r.returncode == 0, r.stderr
    widened = np.load(tmp_path / "out" / "output_0.npy")
    ref = nee_run(model, feed(), nee.GraphOptimizationLevel.ORT_DISABLE_ALL)[0]
    expect_close(widened, ref, 4, "widened under NEE_MAX_ISA=avx2")
