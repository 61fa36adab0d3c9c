"""`nee quantize --mode static` / nee.quantize(mode="static") (src/opt/quantize_static.cc,
src/exec/calibrate.h, docs/quantization.md).

Oracles, each independent of nee's quantizer:
  - ONNX Runtime's own quantizer, quantize_static(quant_format=QDQ, activation_type=QUInt8,
    weight_type=QInt8, calibrate_method=MinMax, op_types_to_quantize=[Conv, MatMul, Gemm, Relu, Clip]; with
    symmetric activations [Conv, MatMul, Gemm]) fed
    the same calibration samples through a CalibrationDataReader: same ops (but the Relu/Clip nee keeps where
    ONNX Runtime removes it: both quantize the activation's output instead of the op's), same scales and zero
    points, same int8/int32 values, and ONNX Runtime's outputs on the two models;
  - ONNX Runtime running nee's model (with its graph optimizations off, so that it computes the QDQ graph
    as the spec states it: DequantizeLinear -> float op -> QuantizeLinear; with them on it fuses QLinearConv
    whose u8s8 kernel on this AVX2 CPU may saturate int16 pair sums, see test_quantize.py);
  - numpy's np.percentile over the activations ONNX Runtime computes on the same samples;
  - the float32 model, against the error that quantization itself allows.
"""
import hashlib
import json
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nee

from cli_util import nee_cli

QUANTIZED_OPS = ("Conv", "MatMul", "Gemm")
# The activations ONNX Runtime's quantizer folds into the op before them (QDQRemovableActivation) when it is
# told to quantize them: nee's quantizer does the same on its own. Not with symmetric activations (zero point
# 128 does not clamp at 0): ONNX Runtime then keeps the activation and quantizes its input and output, even
# when no quantized op reads it, where nee quantizes only what Conv/MatMul/Gemm read and write; the symmetric
# reference is therefore ONNX Runtime told to quantize the three ops alone.
REMOVABLE_ACTIVATIONS = ("Relu", "Clip")


def ort_session(path, optimize=True):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def ort_run(path, feed, optimize=True):
    return ort_session(path, optimize).run(None, feed)


def nee_run(path, feed):
    return nee.InferenceSession(str(path)).run(None, feed)


def cnn_model(path):
    """x[N,1,8,8] -> Conv(4, 3x3, pad 1)+B -> Relu -> MaxPool 2x2 -> Flatten -> Gemm(transB)+C -> y[N,10]."""
    rng = np.random.default_rng(1)
    w1 = (rng.standard_normal((4, 1, 3, 3)) * 0.5).astype(np.float32)
    w1[2] *= 0.1  # channels of different magnitude: per-channel scales differ
    b1 = (rng.standard_normal(4) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((10, 64)) * 0.15).astype(np.float32)
    b2 = (rng.standard_normal(10) * 0.1).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "W1"), (b1, "B1"), (w2, "W2"), (b2, "B2"))]
    nodes = [
        helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p1"], ["f1"], name="flatten"),
        helper.make_node("Gemm", ["f1", "W2", "B2"], ["y"], name="fc", transB=1),
    ]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def mlp_model(path):
    """x[N,16] -> MatMul+Add -> Relu -> Gemm(C) -> Relu -> MatMul -> y[N,10]."""
    rng = np.random.default_rng(2)
    arrays = {"W1": rng.standard_normal((16, 32)) * 0.25, "b1": rng.standard_normal(32) * 0.1,
              "W2": rng.standard_normal((32, 24)) * 0.18, "b2": rng.standard_normal(24) * 0.1,
              "W3": rng.standard_normal((24, 10)) * 0.2}
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in arrays.items()]
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h1"], name="fc1"),
        helper.make_node("Add", ["h1", "b1"], ["h1b"], name="fc1_bias"),
        helper.make_node("Relu", ["h1b"], ["a1"], name="relu1"),
        helper.make_node("Gemm", ["a1", "W2", "b2"], ["h2"], name="fc2"),
        helper.make_node("Relu", ["h2"], ["a2"], name="relu2"),
        helper.make_node("MatMul", ["a2", "W3"], ["y"], name="fc3"),
    ]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


MODELS = {"cnn": (cnn_model, (1, 8, 8)), "mlp": (mlp_model, (16,))}


def samples_for(shape, count, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((2, *shape)).astype(np.float32) for _ in range(count)]


def write_calibration(dir_, samples, name="x"):
    for i, s in enumerate(samples):
        d = dir_ / f"sample_{i:03d}"
        d.mkdir(parents=True)
        np.save(d / f"{name}.npy", s)
    return dir_


@pytest.fixture(scope="module", params=sorted(MODELS))
def case(request, tmp_path_factory):
    build, shape = MODELS[request.param]
    d = tmp_path_factory.mktemp(request.param)
    samples = samples_for(shape, 64, seed=7)
    return {"name": request.param, "src": build(d / "model.onnx"), "shape": shape, "samples": samples,
            "calib": write_calibration(d / "calib", samples)}


def ort_quantize_static(src, dst, samples, per_channel, symmetric=False):
    # Imported here, not at collection (test_ort_api_names.py compares the onnxruntime namespace with nee's).
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": s} for s in samples])

        def get_next(self):
            return next(self.it, None)

    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=per_channel,
                    op_types_to_quantize=list(QUANTIZED_OPS if symmetric else QUANTIZED_OPS + REMOVABLE_ACTIVATIONS),
                    calibrate_method=CalibrationMethod.MinMax,
                    extra_options={"ActivationSymmetric": symmetric})


def qdq_view(path):
    """Per quantized node (by name): for each input, the DequantizeLinear's (values, scale, zero point,
    axis) that feeds it (None for a float input), and its output's QuantizeLinear (scale, zero point), through
    the Relu/Clip that alone reads the output when there is one ("activation": its op type)."""
    m = onnx.load(str(path))
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    producer = {o: n for n in m.graph.node for o in n.output}
    readers = {}
    for n in m.graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    view = {}
    for n in m.graph.node:
        if n.op_type not in QUANTIZED_OPS:
            continue
        ins = []
        for i in n.input:
            p = producer.get(i)
            if p is None or p.op_type != "DequantizeLinear":
                ins.append(None)
                continue
            axis = next((a.i for a in p.attribute if a.name == "axis"), None)
            values = inits.get(p.input[0])  # None for an activation (a QuantizeLinear's output)
            ins.append((values, inits[p.input[1]], inits[p.input[2]] if len(p.input) > 2 else None, axis))
        out_readers, activation = readers.get(n.output[0], []), None
        if len(out_readers) == 1 and out_readers[0].op_type in REMOVABLE_ACTIVATIONS:
            activation = out_readers[0].op_type
            out_readers = readers.get(out_readers[0].output[0], [])
        qs = [r for r in out_readers if r.op_type == "QuantizeLinear"]
        out = (inits[qs[0].input[1]], inits[qs[0].input[2]]) if qs else None
        view[n.name] = {"op": n.op_type, "inputs": ins, "output": out, "activation": activation}
    return m, view


def output_step(path):
    """The scale of the QuantizeLinear on the graph output's producer (one quantization step of y)."""
    _, view = qdq_view(path)
    steps = [float(v["output"][0]) for v in view.values() if v["output"] is not None]
    return steps[-1]


def quantize(case, dst, **kw):
    return nee.quantize(case["src"], dst, mode="static", calibration=case["calib"], **kw)


# (1) nee's quantizer against ONNX Runtime's on the same samples, MinMax.
@pytest.mark.parametrize("per_channel,symmetric", [(False, False), (True, False), (False, True)])
def test_same_as_ort_quantizer(case, tmp_path, per_channel, symmetric):
    ours, theirs = tmp_path / "nee.onnx", tmp_path / "ort.onnx"
    report = quantize(case, ours, per_channel=per_channel, symmetric_activations=symmetric)
    assert "quantized to int8 (static, QDQ)" in report
    ort_quantize_static(case["src"], theirs, case["samples"], per_channel, symmetric)
    m_nee, v_nee = qdq_view(ours)
    m_ort, v_ort = qdq_view(theirs)
    # ONNX Runtime removes a Relu/Clip whose output it quantizes (the op writes the activation's output, Q's
    # saturation clamps instead); nee keeps it between the op and the same Q (fuse-qdq-conv folds it).
    # With symmetric activations (zero point 128) neither folds.
    ops_nee, ops_ort = Counter(n.op_type for n in m_nee.graph.node), Counter(n.op_type for n in m_ort.graph.node)
    folded = Counter(v["activation"] for v in v_nee.values() if v["activation"])
    assert ops_nee == ops_ort + folded, (ops_nee, ops_ort)
    assert not symmetric or not folded
    assert symmetric or case["name"] != "cnn" or folded == Counter({"Relu": 1})  # conv1 -> relu1
    assert symmetric or case["name"] != "mlp" or folded == Counter({"Relu": 1})  # fc2 -> relu2
    expected = [n.name for n in onnx.load(str(case["src"])).graph.node if n.op_type in QUANTIZED_OPS]
    assert sorted(v_nee) == sorted(v_ort) == sorted(expected)
    worst_scale = 0.0
    for name in v_nee:
        a, b = v_nee[name], v_ort[name]
        assert (a["output"] is None) == (b["output"] is None), name
        if a["output"] is not None:
            # Activation scales: ONNX Runtime computes (max - min) / 255 in float64 from float32 ranges, as
            # nee does: equal but for float rounding of the range itself.
            np.testing.assert_allclose(a["output"][0], b["output"][0], rtol=1e-6, err_msg=name)
            assert a["output"][1] == b["output"][1] and a["output"][1].dtype == np.uint8, name
        for slot, (x, y) in enumerate(zip(a["inputs"], b["inputs"])):
            assert (x is None) == (y is None), (name, slot)
            if x is None:
                continue
            (xv, xs, xz, xa), (yv, ys, yz, ya) = x, y
            np.testing.assert_allclose(xs, ys, rtol=1e-6, err_msg=f"{name} input {slot} scale")
            worst_scale = max(worst_scale, float(np.max(np.abs(xs - ys) / np.maximum(ys, 1e-30))))
            # A per-tensor bias scale: ONNX Runtime writes shape [1], nee a scalar (the form the spec
            # names for per-tensor); the values are compared above.
            assert xs.size == ys.size and (xa or 0) == (ya or 0), (name, slot)
            if xz is not None and yz is not None:
                assert xz.dtype == yz.dtype and np.array_equal(xz.ravel(), yz.ravel()), (name, slot)
            if xv is not None:
                # Weights (int8) and biases (int32): identical values; a bias may differ by one where
                # b / (input_scale * weight_scale) lands on a rounding tie after float rounding.
                assert xv.dtype == yv.dtype and xv.shape == yv.shape, (name, slot)
                assert np.max(np.abs(xv.astype(np.int64) - yv.astype(np.int64))) <= (0 if xv.dtype == np.int8 else 1)
    print(f"{case['name']} per_channel={per_channel} symmetric={symmetric}: largest relative scale difference "
          f"{worst_scale:.2e}")
    # ONNX Runtime's outputs on the two models: within one output quantization step.
    step = output_step(ours)
    x = samples_for(case["shape"], 1, seed=99)[0]
    diff = np.max(np.abs(ort_run(ours, {"x": x}, optimize=False)[0] - ort_run(theirs, {"x": x}, optimize=False)[0]))
    print(f"  ORT on nee's model vs ORT on ORT's model: max {diff:.3g} (step {step:.3g})")
    assert diff <= step * 1.001


# (2) ONNX Runtime and nee run nee's model alike.
@pytest.mark.parametrize("per_channel", [False, True])
def test_nee_runs_as_ort(case, tmp_path, per_channel):
    ours = tmp_path / "nee.onnx"
    quantize(case, ours, per_channel=per_channel)
    step = output_step(ours)
    x = np.concatenate(samples_for(case["shape"], 8, seed=5)) * np.float32(1.3)  # partly beyond the ranges
    got = nee_run(ours, {"x": x})[0]
    want = ort_run(ours, {"x": x}, optimize=False)[0]
    diff = np.max(np.abs(got - want))
    print(f"{case['name']} per_channel={per_channel}: nee vs ORT on nee's model max {diff:.3g} (step {step:.3g})")
    assert diff <= step * 1.001


# (3) int8 against fp32 on held-out inputs.
@pytest.mark.parametrize("per_channel", [False, True])
def test_int8_close_to_fp32(case, tmp_path, per_channel):
    ours = tmp_path / "nee.onnx"
    quantize(case, ours, per_channel=per_channel)
    x = np.concatenate(samples_for(case["shape"], 64, seed=1234))  # 128 held-out inputs
    y32 = nee_run(case["src"], {"x": x})[0]
    y8 = nee_run(ours, {"x": x})[0]
    top1 = float(np.mean(np.argmax(y32, 1) == np.argmax(y8, 1)))
    err = float(np.max(np.abs(y32 - y8)) / np.max(np.abs(y32)))
    mean = float(np.mean(np.abs(y32 - y8)) / np.max(np.abs(y32)))
    # On the calibration inputs themselves no activation leaves its calibrated range: the error is
    # rounding alone.
    xc = np.concatenate(case["samples"])
    yc32, yc8 = nee_run(case["src"], {"x": xc})[0], nee_run(ours, {"x": xc})[0]
    cal_err = float(np.max(np.abs(yc32 - yc8)) / np.max(np.abs(yc32)))
    print(f"{case['name']} per_channel={per_channel}: held out: top-1 agreement {top1:.3f}, max error {err:.3%} "
          f"(mean {mean:.3%}) of max |y|; on the calibration inputs max error {cal_err:.3%}")
    # Held-out inputs may exceed a calibrated range (MinMax over 128 rows) and be clipped there: the
    # max error bound is loose, the mean and top-1 bounds are not.
    assert top1 >= 0.95 and mean <= 0.01 and err <= 0.2 and cal_err <= 0.05


def collected_values(src, samples, names):
    """Every value of each named activation over all samples, computed by ONNX Runtime."""
    m = onnx.load(str(src))
    known = {o.name for o in m.graph.output} | {i.name for i in m.graph.input}
    for n in names:
        if n not in known:
            m.graph.output.append(helper.make_tensor_value_info(n, TensorProto.FLOAT, None))
    path = Path(str(src) + ".all.onnx")
    onnx.save(m, str(path))
    sess = ort_session(path)
    values = {n: [] for n in names}
    for s in samples:
        outs = sess.run(None, {"x": s})
        by_name = dict(zip([o.name for o in sess.get_outputs()], outs))
        by_name["x"] = s
        for n in names:
            values[n].append(by_name[n].ravel())
    return {n: np.concatenate(v) for n, v in values.items()}


# (4) percentile ranges equal numpy's percentile of the same values, within the histogram's resolution.
@pytest.mark.parametrize("symmetric", [False, True])
def test_percentile(case, tmp_path, symmetric):
    p = 99.0
    ours = tmp_path / "nee.onnx"
    quantize(case, ours, calibrator="percentile", percentile=p, symmetric_activations=symmetric)
    m, view = qdq_view(ours)
    # activation -> (scale, zp), from the QuantizeLinear nodes.
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    params = {n.input[0]: (float(inits[n.input[1]]), int(inits[n.input[2]]))
              for n in m.graph.node if n.op_type == "QuantizeLinear"}
    names = [n.replace("_QuantizeLinear_Input", "") for n in params]
    values = collected_values(case["src"], case["samples"], names)
    checked = 0
    for q_input, (scale, zp) in params.items():
        v = values[q_input.replace("_QuantizeLinear_Input", "")]
        if symmetric:
            t = np.percentile(np.abs(v), p)
            lo, hi = -t, t
            width = np.max(np.abs(v)) / 16384
            assert zp == 128
        else:
            lo, hi = np.percentile(v, 100 - p), np.percentile(v, p)
            width = (v.max() - v.min()) / 16384
        want = (max(hi, 0) - min(lo, 0)) / 255
        assert abs(scale - want) <= 2 * width / 255 + 1e-7 * want, (q_input, scale, want)
        checked += 1
    assert checked >= 4


def entropy_threshold(v, levels, bins=2048):
    """The documented method (src/exec/calibrate.cc, EntropyThreshold), written from its description."""
    hist, edges = np.histogram(np.abs(v), bins=bins, range=(0, float(np.max(np.abs(v)))))
    hist = hist.astype(np.float64)
    best, best_i = np.inf, bins
    for i in range(levels, bins + 1):
        p = hist[:i].copy()
        p[-1] += hist[i:].sum()
        per = i // levels
        q = np.zeros(i)
        raw = hist[:i]
        for g in range(levels):
            lo, hi = g * per, (i if g == levels - 1 else g * per + per)
            nz = raw[lo:hi] > 0
            if nz.any():
                q[lo:hi][nz] = raw[lo:hi].sum() / nz.sum()
        p, q = p / p.sum(), q / q.sum()
        m = p > 0
        if np.any(q[m] == 0):
            continue
        kl = float(np.sum(p[m] * np.log(p[m] / q[m])))
        if kl < best:
            best, best_i = kl, i
    return edges[best_i], edges[1] - edges[0]


def test_entropy(case, tmp_path):
    ours = tmp_path / "nee.onnx"
    quantize(case, ours, calibrator="entropy")
    m = onnx.load(str(ours))
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    params = {n.input[0].replace("_QuantizeLinear_Input", ""): (float(inits[n.input[1]]), int(inits[n.input[2]]))
              for n in m.graph.node if n.op_type == "QuantizeLinear"}
    values = collected_values(case["src"], case["samples"], list(params))
    clipped = 0
    for name, (scale, zp) in params.items():
        v = values[name]
        t, width = entropy_threshold(v, 255 if v.min() >= 0 else 128)
        lo, hi = max(v.min(), -t), min(v.max(), t)
        want = (max(hi, 0) - min(lo, 0)) / 255
        assert abs(scale - want) <= 2 * width / 255 + 1e-6 * want, (name, scale, want)
        clipped += t < np.max(np.abs(v)) * 0.999
    print(f"{case['name']}: entropy clipped {clipped} of {len(params)} activations")
    x = np.concatenate(samples_for(case["shape"], 64, seed=1234))
    y32, y8 = nee_run(case["src"], {"x": x})[0], nee_run(ours, {"x": x})[0]
    top1 = float(np.mean(np.argmax(y32, 1) == np.argmax(y8, 1)))
    print(f"{case['name']}: entropy held-out top-1 agreement {top1:.3f}")
    # The entropy threshold also clips the logits (a graph output, quantized as Gemm/MatMul's output):
    # on these 128-row calibration sets that ties the largest logits of some inputs (measured: CNN 0.977,
    # MLP 0.828). A calibration set this small is not what the method is for; the bound says so.
    assert top1 >= 0.75


def test_lineage_and_cli(case, tmp_path):
    out = tmp_path / "q.onnx"
    r = nee_cli("quantize", case["src"], "-o", out, "--mode", "static", "--calibration", case["calib"],
                "--calibrator", "percentile", "--percentile", "99.9", "--per-channel", "--exclude",
                "conv1" if case["name"] == "cnn" else "fc1")
    assert r.returncode == 0, r.stderr
    assert "quantized to int8 (static, QDQ)" in r.stdout and "excluded" in r.stdout
    props = {p.key: p.value for p in onnx.load(str(out)).metadata_props}
    record = json.loads(props["nee.lineage.1"])
    assert record["action"] == "quantize"
    params = record["parameters"]
    assert params["mode"] == "static" and params["format"] == "QDQ" and params["per_channel"] is True
    assert params["calibrator"] == {"method": "percentile", "percentile": 99.9, "bins": 16384}
    assert params["calibration_samples"] == 64 and len(params["excluded_nodes"]) == 1
    assert record["input"]["sha256"] == hashlib.sha256(case["src"].read_bytes()).hexdigest()
    assert nee_cli("meta", out, "--verify").returncode == 0
    ort_run(out, {"x": case["samples"][0]})  # ONNX Runtime loads and runs it, optimizations on


def test_pb_samples(case, tmp_path):
    """input_<i>.pb samples (as nee run --inputs-dir reads them) give the ranges .npy samples give."""
    d = tmp_path / "pb"
    for i, s in enumerate(case["samples"]):
        (d / f"s{i:02d}").mkdir(parents=True)
        (d / f"s{i:02d}" / "input_0.pb").write_bytes(numpy_helper.from_array(s).SerializeToString())
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    quantize(case, a)
    nee.quantize(case["src"], b, mode="static", calibration=d)
    ia = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(a)).graph.initializer}
    ib = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(b)).graph.initializer}
    assert sorted(ia) == sorted(ib) and all(np.array_equal(ia[k], ib[k]) for k in ia)


# (5) errors: named, never a crash, nothing written.
def test_errors(tmp_path):
    src = mlp_model(tmp_path / "mlp.onnx")
    out = tmp_path / "out.onnx"
    with pytest.raises(nee.InvalidArgument, match="'.*nowhere' does not exist"):
        nee.quantize(src, out, mode="static", calibration=tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(nee.InvalidArgument, match="holds no sample folders"):
        nee.quantize(src, out, mode="static", calibration=tmp_path / "empty")
    with pytest.raises(nee.InvalidArgument, match="needs calibration"):
        nee.quantize(src, out, mode="static")
    bad = tmp_path / "bad"
    write_calibration(bad, samples_for((16,), 2, 0))
    (bad / "sample_002").mkdir()
    np.save(bad / "sample_002" / "other.npy", np.zeros((1, 16), np.float32))
    with pytest.raises(nee.InvalidArgument, match="sample 'sample_002': input 'x' is missing"):
        nee.quantize(src, out, mode="static", calibration=bad)
    np.save(bad / "sample_002" / "x.npy", np.zeros((1, 16), np.float64))
    with pytest.raises(nee.InvalidArgument, match="sample 'sample_002'.*input 'x'.*element type"):
        nee.quantize(src, out, mode="static", calibration=bad)
    np.save(bad / "sample_002" / "x.npy", np.zeros((1, 15), np.float32))
    with pytest.raises(nee.InvalidArgument, match="sample 'sample_002'.*input 'x'.*shape"):
        nee.quantize(src, out, mode="static", calibration=bad)
    (bad / "sample_002" / "x.npy").write_bytes(b"not npy")
    with pytest.raises(nee.InvalidArgument, match="sample 'sample_002': input 'x'"):
        nee.quantize(src, out, mode="static", calibration=bad)
    good = tmp_path / "good"
    write_calibration(good, samples_for((16,), 2, 0))
    with pytest.raises(nee.InvalidArgument, match="unknown calibrator 'kl' .expected minmax, percentile or entropy"):
        nee.quantize(src, out, mode="static", calibration=good, calibrator="kl")
    with pytest.raises(nee.InvalidArgument, match="percentile must be in"):
        nee.quantize(src, out, mode="static", calibration=good, calibrator="percentile", percentile=20)
    with pytest.raises(nee.InvalidArgument, match="no node named 'nope'"):
        nee.quantize(src, out, mode="static", calibration=good, exclude=["nope"])
    r = nee_cli("quantize", src, "-o", out, "--mode", "static")
    assert r.returncode == 2 and "--calibration" in r.stderr
    m = onnx.load(str(src))
    m.opset_import[0].version = 12
    old = tmp_path / "old.onnx"
    onnx.save(m, str(old))
    with pytest.raises(nee.InvalidArgument, match="opset 13"):
        nee.quantize(old, out, mode="static", calibration=good, per_channel=True)
    assert not out.exists()
    nee.quantize(old, out, mode="static", calibration=good)  # per tensor: opset 10 is enough
    assert out.exists()
