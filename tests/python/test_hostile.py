"""Malformed and hostile models and inputs end in a clear, typed error: no crash, no hang,
no runaway memory, no file read outside the model's folder. The session and process stay usable."""
import os
import random
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import nee


def small_model():
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"), helper.make_node("Relu", ["y"], ["z"], name="relu")],
        "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def expect_error_or_valid(data):
    """Loading arbitrary bytes either fails with a nee error or yields a usable session."""
    try:
        nee.InferenceSession(data)
    except nee.NeeError:
        pass


def test_every_truncation_fails_cleanly():
    data = small_model().SerializeToString()
    for cut in range(len(data)):
        expect_error_or_valid(data[:cut])


def test_bit_flips_and_random_bytes():
    data = bytearray(small_model().SerializeToString())
    rng = random.Random(1234)
    for _ in range(400):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(mutated))
            mutated[i] ^= 1 << rng.randrange(8)
        expect_error_or_valid(bytes(mutated))
    for _ in range(200):
        expect_error_or_valid(bytes(rng.randrange(256) for _ in range(rng.randint(0, 300))))


def test_huge_claimed_dims_are_refused_without_allocating():
    t = TensorProto()
    t.name = "w"
    t.data_type = TensorProto.FLOAT
    t.dims.extend([1 << 40, 1 << 20])
    t.raw_data = b"\0" * 16
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [t])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(nee.NeeError):
        nee.InferenceSession(model.SerializeToString())


def test_enormous_runtime_allocation_is_an_error():
    shape = numpy_helper.from_array(np.array([1 << 30, 1 << 30], dtype=np.int64), "shape")
    graph = helper.make_graph([helper.make_node("ConstantOfShape", ["s"], ["y"], name="big")], "g",
                              [helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    sess = nee.InferenceSession(model.SerializeToString())
    with pytest.raises((nee.OutOfMemory, nee.InvalidArgument)):
        sess.run(None, {"s": np.array([1 << 30, 1 << 30], dtype=np.int64)})
    (y,) = sess.run(None, {"s": np.array([2, 3], dtype=np.int64)})
    np.testing.assert_array_equal(y, np.zeros((2, 3), np.float32))


def external_model(tmp_path, location):
    model = small_model()
    w = model.graph.initializer[0]
    w.ClearField("raw_data")
    w.ClearField("float_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "48")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    path = tmp_path / "model" / "m.onnx"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path


def test_external_data_inside_the_folder_loads(tmp_path):
    path = external_model(tmp_path, "weights.bin")
    (path.parent / "weights.bin").write_bytes(np.arange(12, dtype=np.float32).tobytes())
    sess = nee.InferenceSession(str(path))
    x = np.ones((2, 3), np.float32)
    (z,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(z, np.maximum(x @ np.arange(12, dtype=np.float32).reshape(3, 4), 0))


@pytest.mark.parametrize("location", ["../secret.bin", "/etc/passwd", "sub/../../secret.bin", "link.bin"])
def test_external_data_escaping_the_folder_is_refused(tmp_path, location):
    (tmp_path / "secret.bin").write_bytes(b"\0" * 64)
    path = external_model(tmp_path, location)
    os.symlink(tmp_path / "secret.bin", path.parent / "link.bin")
    with pytest.raises(nee.NeeError, match="w"):
        nee.InferenceSession(str(path))


def test_external_data_from_bytes_is_refused(tmp_path):
    path = external_model(tmp_path, "weights.bin")
    with pytest.raises(nee.NeeError):
        nee.InferenceSession(path.read_bytes())


def nested_if_model(depth):
    """An If whose then-branch nests `depth` levels of Ifs (else-branches are leaves)."""
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    leaf = helper.make_graph([helper.make_node("Constant", [], ["y"], value=numpy_helper.from_array(
        np.array([1.0], np.float32)))], "leaf", [], [out])
    body = leaf
    for level in range(depth):
        node = helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=leaf, name=f"if{level}")
        body = helper.make_graph([node], f"level{level}", [], [out])
    graph = helper.make_graph(body.node, "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, [])], [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number, payload):
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def deeply_nested_model_bytes(depth):
    """Like nested_if_model, serialized by hand: the protobuf library refuses such depth."""
    leaf = nested_if_model(0).graph
    out_vi = leaf.output[0].SerializeToString()
    leaf_bytes = leaf.SerializeToString()
    graph = leaf_bytes

    def attribute(name, graph_bytes):  # AttributeProto: name=1, g=6, type=20 (GRAPH=5)
        return _field(1, name) + _field(6, graph_bytes) + _varint(20 << 3) + _varint(5)

    for level in range(depth):
        node = (_field(1, b"c") + _field(2, b"y") + _field(3, b"if%d" % level) + _field(4, b"If")
                + _field(5, attribute(b"then_branch", graph)) + _field(5, attribute(b"else_branch", leaf_bytes)))
        graph = _field(1, node) + _field(2, b"level%d" % level) + _field(12, out_vi)
    graph += _field(11, helper.make_tensor_value_info("c", TensorProto.BOOL, []).SerializeToString())
    opset = helper.make_opsetid("", 13).SerializeToString()
    return _varint(1 << 3) + _varint(8) + _field(8, opset) + _field(7, graph)


def test_deep_subgraph_nesting_is_refused():
    with pytest.raises(nee.NeeError, match="(?i)nest|depth|deep"):
        nee.InferenceSession(deeply_nested_model_bytes(300))
    # Moderate nesting is fine and runs.
    sess = nee.InferenceSession(nested_if_model(10).SerializeToString())
    (y,) = sess.run(None, {"c": np.array(True)})
    np.testing.assert_array_equal(y, [1.0])


def test_cycles_unknown_ops_and_missing_opsets():
    graph = helper.make_graph([helper.make_node("Relu", ["b"], ["a"], name="r1"),
                               helper.make_node("Relu", ["a"], ["b"], name="r2")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(nee.InvalidGraph, match="cycle"):
        nee.InferenceSession(model.SerializeToString())
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r", domain="com.unknown")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(nee.InvalidGraph, match="com.unknown"):
        nee.InferenceSession(model.SerializeToString())


def test_out_of_range_gather_index_is_an_error_and_the_session_survives():
    data = numpy_helper.from_array(np.arange(5, dtype=np.float32), "data")
    graph = helper.make_graph([helper.make_node("Gather", ["data", "i"], ["y"], name="g")], "g",
                              [helper.make_tensor_value_info("i", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], [data])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    sess = nee.InferenceSession(model.SerializeToString())
    with pytest.raises(nee.NeeError, match="'g'"):
        sess.run(None, {"i": np.array([1000], np.int64)})
    (y,) = sess.run(None, {"i": np.array([-1], np.int64)})
    np.testing.assert_array_equal(y, [4.0])


# ---- Limits (SessionOptions; docs/SECURITY.md) -------------------------------

def options(**limits):
    opts = nee.SessionOptions()
    for name, value in limits.items():
        setattr(opts, name, value)
    return opts


def relu_chain(n):
    nodes = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"], name=f"relu{i}") for i in range(n)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info(f"v{n}", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def test_limit_defaults_are_visible_on_session_options():
    opts = nee.SessionOptions()
    assert opts.max_graph_nodes == 1_000_000
    assert opts.max_subgraph_depth == 32
    assert opts.max_tensor_bytes == 16 << 30
    assert opts.max_external_data_bytes == 64 << 30
    assert opts.session_memory_limit_bytes == -1


def test_graph_node_limit_names_itself_and_the_default_accepts():
    with pytest.raises(nee.NeeError, match="more than 10 nodes.*max_graph_nodes"):
        nee.InferenceSession(relu_chain(50), options(max_graph_nodes=10))
    sess = nee.InferenceSession(relu_chain(50))
    (y,) = sess.run(None, {"v0": np.array([-1.0, 2.0], np.float32)})
    np.testing.assert_array_equal(y, [0.0, 2.0])


def function_bomb(levels):
    """f0 is one Relu; f(k) calls f(k-1) twice: `levels` levels expand to 2**levels nodes."""
    functions = [helper.make_function("bomb", "f0", ["x"], ["y"], [helper.make_node("Relu", ["x"], ["y"])],
                                      [helper.make_opsetid("", 13)])]
    for k in range(1, levels + 1):
        body = [helper.make_node(f"f{k - 1}", ["x"], ["t"], domain="bomb"),
                helper.make_node(f"f{k - 1}", ["t"], ["y"], domain="bomb")]
        functions.append(helper.make_function("bomb", f"f{k}", ["x"], ["y"], body,
                                              [helper.make_opsetid("", 13), helper.make_opsetid("bomb", 1)]))
    graph = helper.make_graph([helper.make_node(f"f{levels}", ["x"], ["y"], domain="bomb", name="call")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, functions=functions,
                              opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("bomb", 1)])
    model.ir_version = 8
    return model.SerializeToString()


def test_function_expansion_bomb_is_refused():
    # A few hundred bytes that would expand to 2**30 nodes: refused after 10**6
    # (a few seconds; unbounded, it would exhaust memory), or fewer when asked.
    with pytest.raises(nee.NeeError, match="max_graph_nodes"):
        nee.InferenceSession(function_bomb(30))
    with pytest.raises(nee.NeeError, match="more than 1000 nodes"):
        nee.InferenceSession(function_bomb(30), options(max_graph_nodes=1000))
    (y,) = nee.InferenceSession(function_bomb(3)).run(None, {"x": np.array([-1.0, 2.0], np.float32)})
    np.testing.assert_array_equal(y, [0.0, 2.0])


def test_subgraph_depth_limit():
    data = nested_if_model(6).SerializeToString()
    with pytest.raises(nee.NeeError, match="nested 4 deep.*max_subgraph_depth"):
        nee.InferenceSession(data, options(max_subgraph_depth=3))
    (y,) = nee.InferenceSession(data).run(None, {"c": np.array(True)})
    np.testing.assert_array_equal(y, [1.0])


def test_tensor_bytes_limit_names_the_tensor():
    data = small_model().SerializeToString()  # w: 12 floats, 48 bytes
    with pytest.raises(nee.NeeError, match="tensor 'w'.*40 bytes per tensor.*max_tensor_bytes"):
        nee.InferenceSession(data, options(max_tensor_bytes=40))
    nee.InferenceSession(data, options(max_tensor_bytes=48))


def test_external_data_limit_names_the_file(tmp_path):
    path = external_model(tmp_path, "weights.bin")
    (path.parent / "weights.bin").write_bytes(np.arange(12, dtype=np.float32).tobytes())
    with pytest.raises(nee.NeeError, match="'weights.bin'.*limit of 40.*max_external_data_bytes"):
        nee.InferenceSession(str(path), options(max_external_data_bytes=40))
    nee.InferenceSession(str(path), options(max_external_data_bytes=48))


def constant_of_shape_model():
    graph = helper.make_graph([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")], "g",
                              [helper.make_tensor_value_info("s", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def test_session_memory_limit_stops_a_run_and_is_given_back():
    sess = nee.InferenceSession(constant_of_shape_model(), options(session_memory_limit_bytes=8 << 20))
    with pytest.raises(nee.OutOfMemory, match="'fill'.*session memory limit"):
        sess.run(None, {"s": np.array([4 << 20], np.int64)})  # 16 MiB
    # 4 MiB at a time, many times: each run's bytes are returned to the session's budget.
    for _ in range(20):
        (y,) = sess.run(None, {"s": np.array([1 << 20], np.int64)})
        assert y.shape == (1 << 20,)
        del y


def test_negative_limits_are_invalid_arguments():
    with pytest.raises(nee.InvalidArgument, match="negative"):
        nee.InferenceSession(relu_chain(2), options(max_graph_nodes=-5))


def test_cli_limit_flag(tmp_path):
    nee_bin = os.environ.get("NEE_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin", "nee"))
    path = tmp_path / "chain.onnx"
    path.write_bytes(relu_chain(50))
    capped = subprocess.run([nee_bin, "run", str(path), "--random", "--limit", "nodes=10"],
                            capture_output=True, text=True, timeout=60)
    assert capped.returncode == 1 and "max_graph_nodes" in capped.stderr
    ok = subprocess.run([nee_bin, "run", str(path), "--random", "--limit", "nodes=50", "--limit", "tensor-bytes=1M"],
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([nee_bin, "run", str(path), "--limit", "bogus=3"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--limit expects NAME=VALUE" in bad.stderr


def test_dynamic_quantize_of_nan_and_infinity_is_defined():
    # Found by run_fuzzer under UBSan: NaN was cast to uint8 (undefined behaviour).
    graph = helper.make_graph([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"], name="dq")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [3]),
                               helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
                               helper.make_tensor_value_info("z", TensorProto.UINT8, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    sess = nee.InferenceSession(model.SerializeToString())
    y, s, z = sess.run(None, {"x": np.array([np.nan, 2.55, -2.55], np.float32)})
    assert y[0] == z  # NaN quantizes like 0
    y, s, z = sess.run(None, {"x": np.array([-np.inf, 1.0, np.nan], np.float32)})
    assert z == 0 and np.isinf(s)
