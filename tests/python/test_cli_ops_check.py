"""`nee ops` (the compatibility matrix, docs/operators.md) and `nee check` (validation and inferred types).

Oracles: the onnx package's operator schemas (`onnx.defs`), `onnx.shape_inference` for the types and
shapes `nee check` prints, and `onnx.checker` / strict shape inference for the models it must reject.
"""
import json
import os
import re

import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import numpy as np

from cli_util import nee_cli

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REGENERATE = "build/bin/nee ops --format md > docs/operators.md"


# ---- nee ops ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def matrix():
    r = nee_cli("ops", "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_operators_md_is_current():
    r = nee_cli("ops", "--format", "md")
    assert r.returncode == 0, r.stderr
    with open(os.path.join(ROOT, "docs", "operators.md"), encoding="utf-8") as f:
        committed = f.read()
    assert committed == r.stdout, f"docs/operators.md is stale: regenerate it with `{REGENERATE}`"


def test_markdown_and_json_list_the_same_ops(matrix):
    md = nee_cli("ops", "--format", "md").stdout
    rows = set()
    domain = None
    for line in md.splitlines():
        heading = re.match(r"## (\S+) ", line)
        if heading:
            domain = heading.group(1)
        row = re.match(r"\| (\w+) \| ([\d, ]+) \|", line)
        if row:
            rows.add((domain, row.group(1), row.group(2)))
    from_json = {(op["domain"], op["op"], ", ".join(str(v["since"]) for v in op["versions"])) for op in matrix["operators"]}
    assert rows == from_json


def onnx_since_versions():
    """(domain, op) -> the since-versions of every schema the onnx package defines, deprecated ones too."""
    versions = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        domain = schema.domain or "ai.onnx"
        versions.setdefault((domain, schema.name), set()).add(schema.since_version)
    return versions


# Versions nee registers in the ONNX domain that ONNX itself lacks: ONNX Runtime's contrib ops that it
# registers in the ONNX domain too (LayerNormalization before ONNX added it in opset 17, the RMS form).
# test_ort_registers_the_extra_onnx_domain_ops checks that ONNX Runtime runs each.
ORT_ONNX_DOMAIN_EXTRAS = {("ai.onnx", "LayerNormalization"): {1}, ("ai.onnx", "SimplifiedLayerNormalization"): {1}}


@pytest.mark.parametrize("domain", ["ai.onnx", "ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training"])
def test_standard_ops_exist_in_onnx_at_their_versions(matrix, domain):
    """Every op nee lists in a standard domain is an ONNX op, and each of its since-versions is one
    at which ONNX introduced or changed it (nee registers one schema entry per ONNX version)."""
    onnx_versions = onnx_since_versions()
    for key, versions in ORT_ONNX_DOMAIN_EXTRAS.items():
        onnx_versions[key] = onnx_versions.get(key, set()) | versions
    listed = [op for op in matrix["operators"] if op["domain"] == domain]
    assert listed, f"nee lists no {domain} ops"
    unknown = [op["op"] for op in listed if (domain, op["op"]) not in onnx_versions]
    assert not unknown, f"listed as {domain} but not in onnx {onnx.__version__}: {unknown}"
    wrong = {op["op"]: sorted({v["since"] for v in op["versions"]} - onnx_versions[domain, op["op"]])
             for op in listed}
    wrong = {name: v for name, v in wrong.items() if v}
    assert not wrong, f"since-versions that are not ONNX versions of the op: {wrong}"


@pytest.mark.parametrize("op, opset", [("LayerNormalization", 13), ("SimplifiedLayerNormalization", 17)])
def test_ort_registers_the_extra_onnx_domain_ops(op, opset):
    import onnxruntime as ort

    node = helper.make_node(op, ["x", "scale"], ["y"], axis=-1, epsilon=1e-5)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
                                            helper.make_tensor_value_info("scale", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    assert op not in {s.name for s in onnx.defs.get_all_schemas_with_history() if s.since_version <= opset}
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    (y,) = session.run(None, {"x": x, "scale": np.ones(4, np.float32)})
    assert y.shape == (2, 4)


def spec_default(attr):
    """An attribute's default from its schema as a JSON-like value (None for none): onnx's
    OpSchema.Attribute.default_value, or onnxruntime's serialized _default_value."""
    if hasattr(attr, "default_value"):
        d = attr.default_value
    else:
        d = onnx.AttributeProto()
        if attr._default_value:
            d.ParseFromString(attr._default_value)
    if d.type == onnx.AttributeProto.UNDEFINED:
        return None
    value = helper.get_attribute_value(d)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [v.decode() if isinstance(v, bytes) else v for v in value]
    return value


def test_declared_attributes_and_defaults_are_the_specs(matrix):
    """Every declaration `nee ops` lists (which the checker and the kernels' defaults read) has the
    names, types, required flags and default values of onnx's schema (onnxruntime's for com.microsoft);
    float defaults compared as float32 values."""
    from onnxruntime.capi import onnxruntime_pybind11_state as ort

    ort_schemas = {(s.name, s.since_version): s for s in ort.get_all_operator_schema() if s.domain == "com.microsoft"}
    # onnxruntime's ONNX-domain contrib schemas nee declares (versions onnx lacks).
    ort_onnx_domain = {(s.name, s.since_version): s for s in ort.get_all_operator_schema()
                       if s.domain == "" and s.name in ("LayerNormalization", "SimplifiedLayerNormalization") and
                       s.since_version == 1}
    compared = with_default = 0
    for op in matrix["operators"]:
        for v in op["versions"]:
            if v["attributes"] is None or op["domain"] == "ai.nee":
                continue
            domain = "" if op["domain"] == "ai.onnx" else op["domain"]
            if domain == "com.microsoft":
                schema = ort_schemas.get((op["op"], v["since"]))
            elif domain == "" and (op["op"], v["since"]) in ort_onnx_domain:
                schema = ort_onnx_domain[(op["op"], v["since"])]
            else:
                try:
                    schema = onnx.defs.get_schema(op["op"], v["since"], domain)
                except onnx.defs.SchemaError:
                    schema = None
            if schema is None or schema.since_version != v["since"]:
                # An entry nee registers at a version the spec did not change (the declaration
                # in force there is the older one's).
                continue
            listed = {a["name"]: a for a in v["attributes"]}
            assert sorted(listed) == sorted(schema.attributes), (op["op"], v["since"])
            for name, attr in schema.attributes.items():
                a = listed[name]
                assert a["type"] == onnx.AttributeProto.AttributeType.Name(int(attr.type)), (op["op"], name)
                assert a["required"] == attr.required, (op["op"], name)
                want = spec_default(attr)
                if isinstance(want, float):  # (JSON writes -0 as 0: the sign is unit-tested in C++)
                    assert np.float32(a["default"]) == np.float32(want), (op["op"], name, a, want)
                elif isinstance(want, list) and want and isinstance(want[0], float):
                    assert np.array_equal(np.array(a["default"], np.float32), np.array(want, np.float32))
                else:
                    assert a["default"] == want, (op["op"], v["since"], name, a["default"], want)
                compared += 1
                with_default += want is not None
    assert compared > 1000 and with_default > 500, (compared, with_default)


def test_standard_domains_stop_at_the_onnx_release(matrix):
    """The newest opset listed per standard domain is the onnx package's (onnx.defs), and every op's last
    entry runs up to it."""
    newest = {"ai.onnx": onnx.defs.onnx_opset_version(), "ai.onnx.ml": onnx.defs.onnx_ml_opset_version()}
    domains = {d["domain"]: d for d in matrix["domains"]}
    for domain, version in newest.items():
        assert domains[domain]["newest_opset"] == version
        for op in matrix["operators"]:
            if op["domain"] == domain:
                assert op["versions"][-1]["until"] == version, op


def test_optimized_kernels_are_listed(matrix):
    ops = {(op["domain"], op["op"]): op for op in matrix["operators"]}
    conv = ops["ai.onnx", "Conv"]
    assert conv["has_optimized_kernel"] and conv["kernels"]["optimized"]["types"] == "float32; bfloat16 with AVX512-BF16"
    assert conv["kernels"]["optimized"]["opsets"] == conv["kernels"]["reference"]["opsets"]
    # Resize's optimized kernel is registered from its opset 10 entry on, and nee's Resize starts there.
    resize = ops["ai.onnx", "Resize"]
    assert resize["versions"][0]["since"] == 10 and resize["kernels"]["optimized"]["opsets"] == [[10, onnx.defs.onnx_opset_version()]]
    assert not ops["ai.onnx", "Abs"]["has_optimized_kernel"]
    assert ops["ai.onnx", "Abs"]["kernels"]["optimized"] == {"opsets": [], "types": None}


def test_domain_filter():
    r = nee_cli("ops", "--domain", "ai.onnx.ml", "--format", "json")
    assert r.returncode == 0, r.stderr
    ops = json.loads(r.stdout)["operators"]
    assert ops and {op["domain"] for op in ops} == {"ai.onnx.ml"}
    assert "TreeEnsembleClassifier" in {op["op"] for op in ops}
    md = nee_cli("ops", "--domain", "com.microsoft")
    assert md.returncode == 0 and "## com.microsoft" in md.stdout and "## ai.onnx " not in md.stdout


@pytest.mark.parametrize("args, message", [
    (["--domain", "org.example"], "no operators in domain 'org.example'"),
    (["--format", "yaml"], "--format expects md or json"),
    (["--domain"], "--domain needs a value"),
    (["--verbose"], "option '--verbose' does not apply to nee ops"),
])
def test_ops_usage_errors(args, message):
    r = nee_cli("ops", *args)
    assert r.returncode == 2 and message in r.stderr, r.stderr


# ---- nee check ----------------------------------------------------------------------------------


def save(tmp_path, nodes, inputs, outputs, initializers=(), opset=17, name="model.onnx"):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp_path / name
    onnx.save(model, path)
    return path, model


def parse_check(stdout):
    """{value name: 'tensor(float) [batch,4]'} for inputs, node outputs and outputs, and the problems."""
    values, problems, section = {}, [], None
    for line in stdout.splitlines():
        if line in ("inputs:", "nodes:", "outputs:", "problems:"):
            section = line[:-1]
            continue
        if section == "problems" and line.startswith("  "):
            problems.append(line.strip())
            continue
        m = re.match(r"^ {2,4}([^ ].*?): (.+)$", line)
        if section in ("inputs", "nodes", "outputs") and m and not line.startswith("  node '"):
            values.setdefault(m.group(1), m.group(2))
    return values, problems


def onnx_type_text(type_proto):
    t = type_proto.tensor_type
    dims = ["?" if not (d.HasField("dim_value") or d.HasField("dim_param")) else
            (d.dim_param if d.HasField("dim_param") else str(d.dim_value)) for d in t.shape.dim]
    elem = TensorProto.DataType.Name(t.elem_type).lower()
    return f"tensor({elem}) [{','.join(dims)}]"


def valid_model(tmp_path):
    shape = numpy_helper.from_array(np.array([0, -1], np.int64), "shape")
    w = numpy_helper.from_array(np.ones((12, 5), np.float32), "w")
    bias = numpy_helper.from_array(np.zeros(5, np.float32), "bias")
    nodes = [
        helper.make_node("Transpose", ["x"], ["xt"], name="transpose", perm=[0, 2, 1]),
        helper.make_node("Reshape", ["xt", "shape"], ["flat"], name="reshape"),
        helper.make_node("MatMul", ["flat", "w"], ["mm"], name="matmul"),
        helper.make_node("Add", ["mm", "bias"], ["biased"], name="add"),
        helper.make_node("Relu", ["biased"], ["act"], name="relu"),
        helper.make_node("ReduceMean", ["act"], ["mean"], name="mean", axes=[1], keepdims=1),
        helper.make_node("Concat", ["act", "mean"], ["y"], name="concat", axis=1),
        helper.make_node("Shape", ["y"], ["y_shape"], name="shape_of_y"),
        helper.make_node("Cast", ["x"], ["xi"], name="cast", to=TensorProto.INT64),
        helper.make_node("Flatten", ["x"], ["flat_x"], name="flatten", axis=1),  # [batch, 12]: keeps the symbol
        helper.make_node("Neg", ["flat_x"], ["neg_flat_x"], name="neg"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6]),
               helper.make_tensor_value_info("y_shape", TensorProto.INT64, [2]),
               helper.make_tensor_value_info("xi", TensorProto.INT64, ["batch", 3, 4]),
               helper.make_tensor_value_info("neg_flat_x", TensorProto.FLOAT, ["batch", 12])]
    return save(tmp_path, nodes, inputs, outputs, [shape, w, bias])


def test_check_valid_model_types_match_onnx_shape_inference(tmp_path):
    path, model = valid_model(tmp_path)
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True).graph
    expected = {vi.name: onnx_type_text(vi.type) for vi in [*inferred.input, *inferred.value_info, *inferred.output]}
    r = nee_cli("check", path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "opsets:     ai.onnx 17" in r.stdout and r.stdout.rstrip().endswith("valid")
    values, problems = parse_check(r.stdout)
    assert problems == ["none"] or problems == []
    node_outputs = {o for node in model.graph.node for o in node.output}
    assert node_outputs | {"x"} <= set(values)
    for name in expected:
        assert values[name] == expected[name], (name, values[name], expected[name])


def test_check_reports_every_shape_error_with_its_node(tmp_path):
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"], name="bad_matmul"),  # [batch,8] x [5,4]
        helper.make_node("Relu", ["mm"], ["r"], name="after_bad"),  # not reported again
        helper.make_node("Add", ["v", "u"], ["s"], name="bad_add"),  # [3] + [4] do not broadcast
        helper.make_node("Neg", ["v"], ["n"], name="fine"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8]),
              helper.make_tensor_value_info("v", TensorProto.FLOAT, [3]),
              helper.make_tensor_value_info("u", TensorProto.FLOAT, [4])]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("r", "s", "n")]
    w = numpy_helper.from_array(np.ones((5, 4), np.float32), "w")
    path, model = save(tmp_path, nodes, inputs, outputs, [w])
    with pytest.raises(onnx.shape_inference.InferenceError):  # the oracle rejects it too
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
    r = nee_cli("check", path)
    assert r.returncode == 1, r.stdout + r.stderr
    values, problems = parse_check(r.stdout)
    assert len(problems) == 2, problems
    assert "node 'bad_matmul' (MatMul)" in problems[0] and "node 'bad_add' (Add)" in problems[1]
    assert values["n"] == "tensor(float) [3]"  # the rest is still typed
    assert values["mm"] == "unknown" and values["r"] == "unknown"
    assert "invalid: 2 problems" in r.stdout


def test_check_unknown_op(tmp_path):
    nodes = [helper.make_node("Frobnicate", ["x"], ["y"], name="mystery"), helper.make_node("Abs", ["x"], ["z"], name="abs")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])]
    path, model = save(tmp_path, nodes, inputs, outputs)
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model)
    r = nee_cli("check", path)
    assert r.returncode == 1, r.stdout + r.stderr
    _, problems = parse_check(r.stdout)
    assert len(problems) == 1 and "node 'mystery' (Frobnicate)" in problems[0] and "not supported" in problems[0]
    assert "    z: tensor(float) [2]" in r.stdout


def test_check_reports_a_function_no_node_calls(tmp_path):
    """A model-local function nothing calls, with an unknown attribute: onnx.checker refuses the model,
    `nee check` reports the function's problem and still types the graph."""
    fn = helper.make_function("local", "Unused", ["i"], ["o"], [helper.make_node("Relu", ["i"], ["o"], name="r", foo=1)],
                              [helper.make_opsetid("", 17)])
    graph = helper.make_graph([helper.make_node("Abs", ["x"], ["z"], name="abs")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
                              functions=[fn])
    model.ir_version = 8
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model)
    path = tmp_path / "unused_function.onnx"
    onnx.save(model, str(path))
    r = nee_cli("check", path)
    assert r.returncode == 1, r.stdout + r.stderr
    _, problems = parse_check(r.stdout)
    assert len(problems) == 1 and "model-local function 'local.Unused'" in problems[0], problems
    assert "node 'r' (Relu): unknown attribute 'foo'" in problems[0]
    assert "    z: tensor(float) [2]" in r.stdout


def test_check_undefined_input_and_unreadable_file(tmp_path):
    nodes = [helper.make_node("Relu", ["nowhere"], ["y"], name="dangling")]
    path, _ = save(tmp_path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    r = nee_cli("check", path)
    assert r.returncode == 1 and "node 'dangling' (Relu): input 'nowhere' is not defined" in r.stdout
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\xff\xff\xff\xff not a model")
    r = nee_cli("check", junk)
    assert r.returncode == 1 and "invalid: 1 problem" in r.stdout


def test_check_unknown_op_in_an_if_branch_fails_whatever_the_condition(tmp_path):
    """A branch's type errors may be forgiven while the condition is unknown; an op nobody knows may not."""
    then_branch = helper.make_graph([helper.make_node("Frobnicate", ["x"], ["t"], name="mystery")], "then", [],
                                    [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    else_branch = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="neg")], "else", [],
                                    [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    nodes = [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_branch, else_branch=else_branch)]
    inputs = [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
              helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])]
    path, model = save(tmp_path, nodes, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    with pytest.raises(onnx.checker.ValidationError, match="Frobnicate"):  # the oracle rejects it too
        onnx.checker.check_model(model)
    r = nee_cli("check", path)
    assert r.returncode == 1, r.stdout + r.stderr
    _, problems = parse_check(r.stdout)
    assert len(problems) == 1 and "node 'branch' (If)" in problems[0] and "node 'mystery' (Frobnicate)" in problems[0]


def test_check_goes_on_past_model_and_graph_problems(tmp_path):
    """A too-new opset, a cycle and an output nothing produces: each reported once, the rest still typed."""
    nodes = [helper.make_node("Relu", ["b"], ["a"], name="r1"), helper.make_node("Relu", ["a"], ["b"], name="r2"),
             helper.make_node("Abs", ["x"], ["w"], name="abs")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("a", "w", "missing")]
    path, model = save(tmp_path, nodes, inputs, outputs, opset=99)
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model)
    r = nee_cli("check", path)
    assert r.returncode == 1, r.stdout + r.stderr
    values, problems = parse_check(r.stdout)
    assert len(problems) == 3, problems
    assert "imports opset 99 of domain 'ai.onnx'" in problems[0]
    assert "has a cycle" in problems[1] and "node 'r1' (Relu)" in problems[1]
    assert "output 'missing' is not produced" in problems[2]
    assert values["w"] == "tensor(float) [n]"


@pytest.mark.parametrize("args, message", [
    ([], "nee check needs a model path"),
    (["--verbose"], "expected a model path after 'check'"),
    (["model.onnx", "--threads", "2"], "option '--threads' does not apply to nee check"),
])
def test_check_usage_errors(args, message):
    r = nee_cli("check", *args)
    assert r.returncode == 2 and message in r.stderr, r.stderr
