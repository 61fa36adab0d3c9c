#!/usr/bin/env python3
"""Writes the small ONNX / .pb / .npy fixtures the format reader tests read.

Run with the project venv (onnx, numpy, ml_dtypes):
    /work/main/.venv/bin/python tests/unit/format/make_format_fixtures.py
Outputs go to tests/unit/format/data/ and are committed. Expected values for
the tensor tests (tensors_expected.txt) are the little-endian bytes numpy
produces for the same values, so the C++ test checks the reader against
numpy/onnx, not against itself.
"""
import os
import shutil

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")


def out(*parts):
    path = os.path.join(DATA, *parts)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def save(model, *parts, check=False):
    if check:
        onnx.checker.check_model(model, full_check=True)
    with open(out(*parts), "wb") as f:
        f.write(model.SerializeToString())


def pack_nibbles(values):
    """Two 4-bit values per byte, first in the low nibble (onnx.proto)."""
    values = [v & 0xF for v in values]
    if len(values) % 2:
        values.append(0)
    return bytes(values[i] | (values[i + 1] << 4) for i in range(0, len(values), 2))


def pack_crumbs(values):
    """Four 2-bit values per byte, first in the lowest bits (onnx.proto)."""
    values = [v & 0x3 for v in values]
    while len(values) % 4:
        values.append(0)
    return bytes(values[i] | values[i + 1] << 2 | values[i + 2] << 4 | values[i + 3] << 6
                 for i in range(0, len(values), 4))


# name -> (onnx type, dims, values for make_tensor (typed form), expected raw bytes)
def tensor_cases():
    cases = []

    def add(name, dtype, dims, values, raw):
        cases.append((name, dtype, dims, values, raw))

    f32 = [1.5, -2.25, 3.0e38, 0.0, -0.0, 7.0]
    add("float", T.FLOAT, [2, 3], f32, np.array(f32, np.float32).tobytes())
    f64 = [1.0 / 3.0, -1e300, 2.5]
    add("double", T.DOUBLE, [3], f64, np.array(f64, np.float64).tobytes())
    add("int8", T.INT8, [4], [-128, -1, 0, 127], np.array([-128, -1, 0, 127], np.int8).tobytes())
    add("uint8", T.UINT8, [4], [0, 1, 200, 255], np.array([0, 1, 200, 255], np.uint8).tobytes())
    add("int16", T.INT16, [3], [-32768, 5, 32767], np.array([-32768, 5, 32767], np.int16).tobytes())
    add("uint16", T.UINT16, [3], [0, 40000, 65535], np.array([0, 40000, 65535], np.uint16).tobytes())
    i32 = [-2147483648, -7, 0, 2147483647]
    add("int32", T.INT32, [2, 2], i32, np.array(i32, np.int32).tobytes())
    i64 = [-9223372036854775808, -1, 42, 9223372036854775807]
    add("int64", T.INT64, [4], i64, np.array(i64, np.int64).tobytes())
    u32 = [0, 4000000000, 4294967295]
    add("uint32", T.UINT32, [3], u32, np.array(u32, np.uint32).tobytes())
    u64 = [0, 18446744073709551615, 12345678901234567890]
    add("uint64", T.UINT64, [3], u64, np.array(u64, np.uint64).tobytes())
    add("bool", T.BOOL, [3], [True, False, True], np.array([True, False, True], np.bool_).tobytes())
    h = [1.0, -2.0, 0.5, 65504.0]
    add("float16", T.FLOAT16, [4], h, np.array(h, np.float16).tobytes())
    bf = [1.0, -2.0, 3.140625]
    add("bfloat16", T.BFLOAT16, [3], bf, np.array(bf, ml_dtypes.bfloat16).tobytes())
    c64 = [1 + 2j, 3 - 4j]
    add("complex64", T.COMPLEX64, [2], c64, np.array(c64, np.complex64).tobytes())
    c128 = [0.5 - 1j]
    add("complex128", T.COMPLEX128, [1], c128, np.array(c128, np.complex128).tobytes())
    f8 = [1.0, -2.0, 0.5]
    add("float8e4m3fn", T.FLOAT8E4M3FN, [3], f8, np.array(f8, ml_dtypes.float8_e4m3fn).tobytes())
    add("float8e4m3fnuz", T.FLOAT8E4M3FNUZ, [3], f8, np.array(f8, ml_dtypes.float8_e4m3fnuz).tobytes())
    add("float8e5m2", T.FLOAT8E5M2, [3], f8, np.array(f8, ml_dtypes.float8_e5m2).tobytes())
    add("float8e5m2fnuz", T.FLOAT8E5M2FNUZ, [3], f8, np.array(f8, ml_dtypes.float8_e5m2fnuz).tobytes())
    i4 = [1, -2, 7, -8, 3]
    add("int4", T.INT4, [5], i4, pack_nibbles(i4))
    u4 = [0, 15, 9]
    add("uint4", T.UINT4, [3], u4, pack_nibbles(u4))
    fp4 = [0.5, -6.0, 1.0]
    fp4_codes = [int(v) for v in np.array(fp4, ml_dtypes.float4_e2m1fn).view(np.uint8)]
    add("float4e2m1", T.FLOAT4E2M1, [3], fp4, pack_nibbles(fp4_codes))
    u2 = [0, 1, 2, 3, 1]
    add("uint2", T.UINT2, [5], u2, pack_crumbs(u2))
    i2 = [-2, -1, 0, 1]
    add("int2", T.INT2, [4], i2, pack_crumbs(i2))
    e8m0 = [1.0, 2.0, 0.25]
    add("float8e8m0", T.FLOAT8E8M0, [3], e8m0, np.array(e8m0, ml_dtypes.float8_e8m0fnu).tobytes())
    add("empty_float", T.FLOAT, [0, 3], [], b"")
    add("scalar_int64", T.INT64, [], [-5], np.array([-5], np.int64).tobytes())
    return cases


def make_tensors_model():
    inits = []
    lines = []
    for name, dtype, dims, values, raw in tensor_cases():
        typed = helper.make_tensor(name + "_typed", dtype, dims, values)
        assert not typed.raw_data or dtype in (), name
        rawt = helper.make_tensor(name + "_raw", dtype, dims, raw, raw=True)
        inits += [typed, rawt]
        lines.append(f"{name} {dtype} {','.join(map(str, dims)) or '-'} {raw.hex() or '-'}")
    strings = helper.make_tensor("strings", T.STRING, [3], [b"hello", b"", "\u00e9t\u00e9".encode()])
    inits.append(strings)
    x = helper.make_tensor_value_info("x", T.FLOAT, [1])
    y = helper.make_tensor_value_info("y", T.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "tensors", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    save(model, "tensors.onnx")
    with open(out("tensors_expected.txt"), "w") as f:
        f.write("# name data_type dims raw_bytes_hex, from numpy (see make_format_fixtures.py)\n")
        f.write("\n".join(lines) + "\n")


def make_attributes_model():
    body = helper.make_graph(
        [helper.make_node("Neg", ["a"], ["b"])], "body",
        [helper.make_tensor_value_info("a", T.FLOAT, [2])],
        [helper.make_tensor_value_info("b", T.FLOAT, [2])])
    body2 = helper.make_graph(
        [helper.make_node("Abs", ["c"], ["d"])], "body2",
        [helper.make_tensor_value_info("c", T.INT64, None)],
        [helper.make_tensor_value_info("d", T.INT64, None)])
    t = numpy_helper.from_array(np.array([[1, 2], [3, 4]], np.int32), "t_value")
    t2 = numpy_helper.from_array(np.array([0.25], np.float32), "t2")
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([5.0, 6.0], np.float32), "sp_values"),
        numpy_helper.from_array(np.array([1, 3], np.int64), "sp_indices"), [4])
    sparse2 = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([7], np.int64), "sp2_values"),
        numpy_helper.from_array(np.array([[0, 1]], np.int64), "sp2_indices"), [2, 2])
    tp = helper.make_tensor_type_proto(T.FLOAT, ["N", 3])
    tp2 = helper.make_sequence_type_proto(helper.make_tensor_type_proto(T.INT64, None))
    node = helper.make_node(
        "AllAttrs", ["x"], ["y"], name="all_attrs", domain="test.domain", doc_string="node doc",
        f=0.5, i=-3, s=b"text", t=t, g=body, floats=[1.0, 2.5], ints=[-1, 0, 300000000000],
        strings=[b"a", b"bc"], tensors=[t, t2], graphs=[body, body2])
    node.attribute.extend([
        helper.make_attribute("sp", sparse),
        helper.make_attribute("sps", [sparse, sparse2]),
        helper.make_attribute("tp", tp),
        helper.make_attribute("tps", [tp, tp2]),
        helper.make_attribute("empty_ints", [], attr_type=onnx.AttributeProto.INTS),
    ])
    graph = helper.make_graph(
        [node], "attrs", [helper.make_tensor_value_info("x", T.FLOAT, [2])],
        [helper.make_tensor_value_info("y", T.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("test.domain", 1)])
    save(model, "attributes.onnx")


def make_types_model():
    inputs = [
        helper.make_tensor_value_info("sym", T.FLOAT, ["batch", 3, None, "seq"], doc_string="symbolic"),
        helper.make_tensor_value_info("scalar", T.INT64, []),
        helper.make_tensor_value_info("unranked", T.DOUBLE, None),
        helper.make_value_info("seq", helper.make_sequence_type_proto(helper.make_tensor_type_proto(T.FLOAT, [2]))),
        helper.make_value_info("map", helper.make_map_type_proto(T.STRING, helper.make_tensor_type_proto(T.INT64, []))),
        helper.make_value_info("opt", helper.make_optional_type_proto(helper.make_tensor_type_proto(T.UINT8, [4]))),
        helper.make_value_info("sparse", helper.make_sparse_tensor_type_proto(T.FLOAT, [10, 20])),
        helper.make_value_info("opt_seq", helper.make_optional_type_proto(
            helper.make_sequence_type_proto(helper.make_tensor_type_proto(T.BOOL, None)))),
    ]
    denoted = helper.make_tensor_value_info("image", T.UINT8, [1, 3, 224, 224])
    denoted.type.denotation = "IMAGE"
    denoted.type.tensor_type.shape.dim[1].denotation = "DATA_CHANNEL"
    inputs.append(denoted)
    outputs = [helper.make_tensor_value_info("out", T.FLOAT, ["batch"])]
    vi = [helper.make_tensor_value_info("mid", T.FLOAT16, [5])]
    graph = helper.make_graph([], "types", inputs, outputs, value_info=vi)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    save(model, "types.onnx")


def make_functions_model():
    # A local function "Scale(x) = Mul(x, alpha)" with attribute alpha (ref_attr_name)
    # and attribute "beta" with a default value (attribute_proto).
    const = helper.make_node("Constant", [], ["alpha_t"])
    const.attribute.append(onnx.AttributeProto(name="value_float", ref_attr_name="alpha",
                                               type=onnx.AttributeProto.FLOAT))
    mul = helper.make_node("Mul", ["X", "alpha_t"], ["Y"])
    fn = helper.make_function("custom.fn", "Scale", ["X"], ["Y"], [const, mul],
                              [helper.make_opsetid("", 21)], attributes=["alpha"],
                              attribute_protos=[helper.make_attribute("beta", 2)],
                              doc_string="scales X")
    fn.metadata_props.add(key="fn_key", value="fn_value")
    node = helper.make_node("Scale", ["x"], ["y"], domain="custom.fn", alpha=2.0)
    graph = helper.make_graph(
        [node], "fn_graph", [helper.make_tensor_value_info("x", T.FLOAT, [3])],
        [helper.make_tensor_value_info("y", T.FLOAT, [3])], doc_string="graph doc")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("custom.fn", 1)],
                              functions=[fn], producer_name="nee-fixtures", producer_version="1.2",
                              domain="org.nee.test", model_version=7, doc_string="model doc")
    helper.set_model_props(model, {"author": "nee", "license": "MIT"})
    model.graph.metadata_props.add(key="graph_key", value="graph_value")
    save(model, "functions.onnx", check=True)


def make_small_model():
    """A small realistic model (If with subgraphs, initializers, attributes):
    the base for truncation / bit-flip tests and the fuzzer seed."""
    then_g = helper.make_graph(
        [helper.make_node("Relu", ["sum"], ["then_out"])], "then", [],
        [helper.make_tensor_value_info("then_out", T.FLOAT, [2, 3])])
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["sum"], ["else_out"])], "else", [],
        [helper.make_tensor_value_info("else_out", T.FLOAT, [2, 3])])
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5, "w")
    nodes = [
        helper.make_node("Add", ["x", "w"], ["sum"], name="add"),
        helper.make_node("ReduceSum", ["sum"], ["total"], keepdims=0, name="reduce"),
        helper.make_node("Greater", ["total", "zero"], ["cond"], name="greater"),
        helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g, name="if"),
    ]
    zero = numpy_helper.from_array(np.array(0.0, np.float32), "zero")
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])], [w, zero])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="nee")
    save(model, "small.onnx", check=True)


def make_external_models():
    w = numpy_helper.from_array(np.arange(1024, dtype=np.float32), "w_big")
    b = numpy_helper.from_array(np.array([1, 2, 3], np.int64), "b_small")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w_big"], ["y"])], "ext",
        [helper.make_tensor_value_info("x", T.FLOAT, [1024])],
        [helper.make_tensor_value_info("y", T.FLOAT, [1024])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    ext_dir = os.path.join(DATA, "external")
    shutil.rmtree(ext_dir, ignore_errors=True)
    os.makedirs(ext_dir)
    onnx.save_model(model, os.path.join(ext_dir, "model.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    onnx.checker.check_model(os.path.join(ext_dir, "model.onnx"), full_check=True)

    # Hostile locations: the reader must refuse all of these.
    def hostile(file_name, location):
        t = onnx.TensorProto(name="evil", data_type=T.FLOAT, dims=[4])
        t.data_location = onnx.TensorProto.EXTERNAL
        t.external_data.add(key="location", value=location)
        t.external_data.add(key="length", value="16")
        g = helper.make_graph([helper.make_node("Identity", ["evil"], ["y"])], "evil", [],
                              [helper.make_tensor_value_info("y", T.FLOAT, [4])], [t])
        save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), "external", file_name)

    hostile("dotdot.onnx", "../outside.bin")
    hostile("dotdot_inner.onnx", "sub/../../outside.bin")
    hostile("absolute.onnx", "/etc/hostname")
    hostile("symlink.onnx", "link_dir/outside.bin")  # the test creates link_dir -> elsewhere
    hostile("missing.onnx", "no_such_file.bin")

    # Offset/length beyond the file.
    t = onnx.TensorProto(name="too_long", data_type=T.FLOAT, dims=[4])
    t.data_location = onnx.TensorProto.EXTERNAL
    t.external_data.add(key="location", value="weights.bin")
    t.external_data.add(key="offset", value=str(1 << 40))
    t.external_data.add(key="length", value="16")
    g = helper.make_graph([helper.make_node("Identity", ["too_long"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", T.FLOAT, [4])], [t])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), "external", "bad_offset.onnx")


def make_value_files():
    save_pb = lambda proto, name: open(out("values", name), "wb").write(proto.SerializeToString())
    save_pb(numpy_helper.from_array(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), "t"), "tensor.pb")
    save_pb(numpy_helper.from_array(np.array(["ab", "c"], dtype=object), "s"), "string_tensor.pb")
    save_pb(numpy_helper.from_list([np.array([1, 2], np.int64), np.array([3], np.int64)], "seq"),
            "sequence.pb")
    save_pb(numpy_helper.from_list([], "empty_seq", dtype=onnx.SequenceProto.TENSOR), "empty_sequence.pb")
    save_pb(numpy_helper.from_dict({1: np.float32(0.5), 7: np.float32(-1.5)}, "map"), "map_int.pb")
    # numpy_helper.from_dict cannot make string keys; build the MapProto directly.
    smap = onnx.MapProto(name="smap", key_type=T.STRING, string_keys=[b"a", b"b"])
    smap.values.CopyFrom(numpy_helper.from_list([np.array(3, np.int64), np.array(4, np.int64)]))
    save_pb(smap, "map_string.pb")
    save_pb(numpy_helper.from_optional(np.array([5, 6, 7], np.int32), "opt",
                                       dtype=onnx.OptionalProto.TENSOR), "optional_tensor.pb")
    save_pb(numpy_helper.from_optional(None, "none", dtype=onnx.OptionalProto.TENSOR),
            "optional_empty.pb")
    save_pb(numpy_helper.from_optional([np.array([1.0], np.float32), np.array([2.0, 3.0], np.float32)],
                                       "opt_seq", dtype=onnx.OptionalProto.SEQUENCE),
            "optional_sequence.pb")


def make_npy_files():
    rng = np.random.default_rng(0)
    arrays = {
        "f32": rng.standard_normal((2, 3)).astype(np.float32),
        "f64": np.array([1.0 / 3.0, -2.0], np.float64),
        "f16": np.array([[1.0, -0.5], [65504.0, 0.0]], np.float16),
        "i8": np.array([-128, 0, 127], np.int8),
        "i16": np.array([-300, 300], np.int16),
        "i32": np.arange(12, dtype=np.int32).reshape(3, 4),
        "i64": np.array([-(2**40), 2**40], np.int64),
        "u8": np.array([0, 255], np.uint8),
        "u16": np.array([65535], np.uint16),
        "u32": np.array([4000000000], np.uint32),
        "u64": np.array([2**63 + 5], np.uint64),
        "bool": np.array([True, False, True]),
        "scalar": np.array(3.5, np.float32),
        "empty": np.zeros((0, 4), np.float32),
    }
    lines = []
    for name, a in arrays.items():
        np.save(out("npy", name + ".npy"), a)
        lines.append(f"{name} {a.dtype.str} {','.join(map(str, a.shape)) or '-'} {a.tobytes().hex() or '-'}")
    # Fortran order must be refused; big-endian too.
    np.save(out("npy", "fortran.npy"), np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
    np.save(out("npy", "big_endian.npy"), np.array([1, 2], ">i4"))
    # Format versions 2.0 and 3.0 written explicitly.
    import numpy.lib.format as fmt
    for version in [(2, 0), (3, 0)]:
        with open(out("npy", f"v{version[0]}.npy"), "wb") as f:
            fmt.write_array(f, arrays["i32"], version=version)
    with open(out("npy_expected.txt"), "w") as f:
        f.write("# name numpy_dtype shape bytes_hex (from numpy, see make_format_fixtures.py)\n")
        f.write("\n".join(lines) + "\n")


def main():
    make_tensors_model()
    make_attributes_model()
    make_types_model()
    make_functions_model()
    make_small_model()
    make_external_models()
    make_value_files()
    make_npy_files()


if __name__ == "__main__":
    main()
