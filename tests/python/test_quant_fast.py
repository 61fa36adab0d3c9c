"""The quantized fast kernels (ConvInteger, MatMulInteger, DynamicQuantizeLinear) in a session, where constant
weights are packed once and reused: outputs bitwise equal to the reference kernels' at 1 and 2 threads, on the
first run (which packs) and on later runs (which reuse the packed weights), as the graph quantize_dynamic writes
(DynamicQuantizeLinear -> ConvInteger -> Cast -> Mul by the scales)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import nee


def quantized_model():
    rng = np.random.default_rng(7)
    inits = [
        numpy_helper.from_array(rng.integers(0, 256, (12, 3, 3, 3), dtype=np.uint8), "w1"),
        numpy_helper.from_array(rng.integers(0, 256, (12,), dtype=np.uint8), "w1_zp"),  # per output channel
        numpy_helper.from_array(rng.integers(-128, 128, (12, 4, 3, 1), dtype=np.int8), "w2"),
        numpy_helper.from_array(np.array(3, np.int8), "w2_zp"),
        numpy_helper.from_array(rng.integers(-128, 128, (12 * 4 * 5, 37), dtype=np.int8), "b3"),
        numpy_helper.from_array(rng.integers(-128, 128, (37,), dtype=np.int8), "b3_zp"),
        numpy_helper.from_array(np.array([-1, 12 * 4 * 5], np.int64), "shape"),
        numpy_helper.from_array(np.array(0.01, np.float32), "w_scale"),
    ]
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
        helper.make_node("ConvInteger", ["xq", "w1", "xz", "w1_zp"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Cast", ["c1"], ["c1f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["c1f", "xs"], ["c1s"]),
        helper.make_node("Mul", ["c1s", "w_scale"], ["y1"]),
        helper.make_node("DynamicQuantizeLinear", ["y1"], ["yq", "ys", "yz"]),
        # A grouped conv on the uint8 activations with int8 weights (ONNX allows mixing the two).
        helper.make_node("ConvInteger", ["yq", "w2", "yz", "w2_zp"], ["c2"], group=3, pads=[1, 0, 1, 0],
                         dilations=[2, 1]),
        helper.make_node("Cast", ["c2"], ["c2f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["c2f", "ys"], ["y2"]),
        helper.make_node("Reshape", ["y2", "shape"], ["flat"]),
        helper.make_node("DynamicQuantizeLinear", ["flat"], ["fq", "fs", "fz"]),
        helper.make_node("MatMulInteger", ["fq", "b3", "fz", "b3_zp"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes, "quantized",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 11, 9])],
        [helper.make_tensor_value_info("out", TensorProto.INT32, ["N", 37]),
         helper.make_tensor_value_info("c2", TensorProto.INT32, ["N", 12, 4, 5])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def session(model, threads, reference):
    options = nee.SessionOptions()
    options.intra_op_num_threads = threads
    options.reference_kernels_only = reference
    return nee.InferenceSession(model, options)


@pytest.mark.parametrize("threads", [1, 2])
def test_quantized_kernels_in_a_session_match_reference_bitwise(threads):
    model = quantized_model()
    rng = np.random.default_rng(8)
    feeds = [{"x": (rng.standard_normal((n, 3, 11, 9)) * s).astype(np.float32)}
             for n, s in ((2, 1.0), (2, 3.0), (1, 0.1), (0, 1.0))]
    reference = session(model, 1, True)
    fast = session(model, threads, False)
    # The first run packs the weights (and lets the originals go), the later ones reuse them; the last has an
    # empty batch.
    for feed in feeds:
        want = reference.run(None, feed)
        got = fast.run(None, feed)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype == np.int32 and g.shape == w.shape
            np.testing.assert_array_equal(g, w)
