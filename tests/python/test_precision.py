"""`nee precision MODEL --against REF` and `nee.precision` (src/exec/precision.cc): per-output and per-layer error.

Oracles, never nee's own numbers: numpy computing each metric (max abs, relative error with its floor, float32 ULP
distance, cosine, RMS, top-1 agreement over the last axis) on outputs computed by numpy itself where the models are
exact elementwise arithmetic (then nee's metrics must match to rounding of the double sums), and on outputs from
ONNX Runtime (intermediate values exposed as extra graph outputs of a copy) where kernels may round differently
(then within a tolerance that is stated). A model against itself must show no error at all; a weight perturbed by
a known amount must show error from its layer on and none before; an fp16 copy built here with onnx + numpy is
compared in float32. Gates set the exit status; bad input is an error naming what is wrong.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nee

from cli_util import nee_cli


# ---- the oracle: numpy's metrics, as docs/precision.md defines them ----

def ordered(x):
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.int64)
    return np.where(bits & 0x80000000, -(bits & 0x7FFFFFFF), bits)


def np_metrics(model_samples, ref_samples):
    """Metrics over lists of per-sample arrays (model, reference)."""
    diffs, rels, ulps, a_all, b_all, agree, rows = [], [], [], [], [], 0, 0
    for a, b in zip(model_samples, ref_samples):
        a = np.asarray(a, np.float64)
        b = np.asarray(b, np.float64)
        floor = 1e-6 * np.max(np.abs(b))
        if floor == 0:
            floor = np.finfo(np.float32).tiny
        d = np.abs(a - b)
        diffs.append(d.ravel())
        rels.append((d / np.maximum(np.abs(b), floor)).ravel())
        ulps.append(np.abs(ordered(a.astype(np.float32)) - ordered(b.astype(np.float32))).ravel())
        a_all.append(a.ravel())
        b_all.append(b.ravel())
        if b.ndim >= 1 and b.shape[-1] >= 2:
            ra = a.reshape(-1, b.shape[-1]).argmax(axis=1)
            rb = b.reshape(-1, b.shape[-1]).argmax(axis=1)
            agree += int((ra == rb).sum())
            rows += ra.size
    d, a, b, u = (np.concatenate(v) for v in (diffs, a_all, b_all, ulps))
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return {
        "max_abs": d.max(), "max_rel": np.concatenate(rels).max(), "ulp_max": int(u.max()),
        "ulp_median": float(np.median(u)), "rms": float(np.sqrt(np.mean(d * d))),
        "cosine": 1.0 if na == 0 and nb == 0 else float(a @ b / (na * nb)) if na and nb else 0.0,
        "top1_agreement": agree / rows if rows else None, "elements": d.size,
    }


def assert_metrics(got, want, rtol=1e-9, ulp_rtol=0.0, atol=0.0):
    assert got["elements"] == want["elements"]
    for k in ("max_abs", "max_rel", "rms"):
        assert got[k] == pytest.approx(want[k], rel=rtol, abs=atol), k
    assert got["cosine"] == pytest.approx(want["cosine"], rel=max(rtol, 1e-12), abs=atol), "cosine"
    assert got["ulp_max"] == pytest.approx(want["ulp_max"], rel=ulp_rtol), "ulp_max"
    if want["ulp_median"] < 1024:
        assert got["ulp_median"] == pytest.approx(want["ulp_median"], rel=ulp_rtol, abs=0.5 if ulp_rtol else 0)
    else:  # above 1024 ULP, 64 buckets an octave
        assert got["ulp_median"] == pytest.approx(want["ulp_median"], rel=max(ulp_rtol, 1 / 64))
    if want["top1_agreement"] is None:
        assert got["top1_agreement"] is None
    else:
        assert got["top1_agreement"] == pytest.approx(want["top1_agreement"], abs=1e-12)


def by_name(entries):
    return {e["name"]: e for e in entries}


# ---- models ----

def save(path, nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    onnx.save(m, str(path))
    return path


RNG = np.random.default_rng(7)
W1 = RNG.standard_normal((16, 24)).astype(np.float32)
B1 = RNG.standard_normal(24).astype(np.float32) * 0.1
W2 = (RNG.standard_normal((24, 10)) * 0.3).astype(np.float32)
LAYERS = ["h1", "a1", "r1", "logits", "prob"]  # the reference's topological order


def mlp(path, w1=W1, w2=W2, dtype=np.float32):
    """x[N,16] -> MatMul W1 -> h1 -> Add B1 -> a1 -> Relu -> r1 -> MatMul W2 -> logits -> Softmax -> prob.
    With dtype float16: the same graph in float16 between a Cast of x and a Cast of prob (the edges keep float32),
    every intermediate value keeping its name."""
    f16 = dtype == np.float16
    t = TensorProto.FLOAT16 if f16 else TensorProto.FLOAT
    x = "x16" if f16 else "x"
    nodes = ([helper.make_node("Cast", ["x"], ["x16"], to=t)] if f16 else []) + [
        helper.make_node("MatMul", [x, "W1"], ["h1"], name="mm1"),
        helper.make_node("Add", ["h1", "B1"], ["a1"], name="bias"),
        helper.make_node("Relu", ["a1"], ["r1"], name="relu"),
        helper.make_node("MatMul", ["r1", "W2"], ["logits"], name="mm2"),
        helper.make_node("Softmax", ["logits"], ["prob16" if f16 else "prob"], name="softmax", axis=-1)]
    if f16:
        nodes.append(helper.make_node("Cast", ["prob16"], ["prob"], to=TensorProto.FLOAT))
    inits = [numpy_helper.from_array(w1.astype(dtype), "W1"), numpy_helper.from_array(B1.astype(dtype), "B1"),
             numpy_helper.from_array(w2.astype(dtype), "W2")]
    return save(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["N", 10])], inits)


def ort_values(path, feed, names):
    """ONNX Runtime's values of `names` (intermediate ones made extra graph outputs of a copy), optimizations off."""
    m = onnx.load(str(path))
    have = {o.name for o in m.graph.output}
    for n in names:
        if n not in have:
            m.graph.output.append(onnx.ValueInfoProto(name=n))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 4
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip(names, s.run(names, feed)))


def samples(n=4, rows=8):
    rng = np.random.default_rng(3)
    return [{"x": rng.uniform(-1, 1, (rows, 16)).astype(np.float32)} for _ in range(n)]


# ---- (1) a model against itself ----

def test_model_against_itself_has_no_error(tmp_path):
    ref = mlp(tmp_path / "ref.onnx")
    r = nee.precision(ref, ref, dims={"N": 5}, random=3)
    assert r["samples"] == 3 and r["inputs"].startswith("random")
    assert [o["name"] for o in r["outputs"]] == ["prob"]
    assert [layer["name"] for layer in r["layers"]] == LAYERS
    for e in r["outputs"] + r["layers"]:
        assert e["max_abs"] == 0 and e["max_rel"] == 0 and e["rms"] == 0
        assert e["ulp_max"] == 0 and e["ulp_median"] == 0
        assert e["cosine"] == 1.0
        assert e["top1_agreement"] == 1.0 and e["top1_rows"] == 3 * 5
        assert e["elements"] == 3 * 5 * (24 if e["name"] in ("h1", "a1", "r1") else 10)
    assert r["gates"]["passed"] is True


# ---- (2) exact arithmetic: numpy computes the outputs too, so the metrics must agree to rounding ----

def test_metrics_equal_numpy_on_exact_outputs(tmp_path):
    """ref: y = x (Identity); model: y = x + c, a float32 Add numpy rounds exactly as IEEE does. c is small for most
    elements (a few ULP), large for some (argmax flips) and zero for others; one row of the reference is all zeros
    (the relative error's floor)."""
    c = np.zeros((6, 5), np.float32)
    rng = np.random.default_rng(11)
    c[:, :3] = rng.uniform(-1e-6, 1e-6, (6, 3)).astype(np.float32)
    c[1, 4] = 2.0
    c[4, 0] = -3.0
    xv = helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 5])
    yv = helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 5])
    ref = save(tmp_path / "ref.onnx", [helper.make_node("Identity", ["x"], ["y"])], [xv], [yv])
    model = save(tmp_path / "model.onnx", [helper.make_node("Add", ["x", "c"], ["y"])], [xv], [yv],
                 [numpy_helper.from_array(c, "c")])
    feeds = []
    for s in range(3):
        x = rng.uniform(-2, 2, (6, 5)).astype(np.float32)
        x[5] = 0  # a zero row
        feeds.append({"x": x})
    r = nee.precision(model, ref, feeds)
    want = np_metrics([f["x"] + c for f in feeds], [f["x"] for f in feeds])
    assert 0 < want["top1_agreement"] < 1
    assert_metrics(r["outputs"][0], want)
    assert r["outputs"][0]["compared_in"] == "float32"
    # The same from files through the CLI: one subfolder per sample, the first as input_0.npy, the others as x.npy.
    for s, f in enumerate(feeds):
        d = tmp_path / "in" / f"s{s}"
        d.mkdir(parents=True)
        np.save(d / ("input_0.npy" if s == 0 else "x.npy"), f["x"])
    p = nee_cli("precision", model, "--against", ref, "--inputs", tmp_path / "in", "--json", tmp_path / "r.json")
    assert p.returncode == 0, p.stderr
    cli = json.loads((tmp_path / "r.json").read_text())
    assert cli["samples"] == 3
    assert_metrics(cli["outputs"][0], want)
    assert "outputs (matched by name)" in p.stdout and "max_abs" in p.stdout


def test_perturbed_weight_error_enters_at_its_layer(tmp_path):
    ref = mlp(tmp_path / "ref.onnx")
    w2 = W2.copy()
    w2[5, 3] += 0.25
    model = mlp(tmp_path / "model.onnx", w2=w2)
    feeds = samples()
    r = nee.precision(model, ref, feeds)
    layers = r["layers"]
    assert [e["name"] for e in layers] == LAYERS
    for e in layers[:3]:  # before the perturbed MatMul: no error at all
        assert e["max_abs"] == 0 and e["ulp_max"] == 0 and e["cosine"] == 1.0, e["name"]
    for e in layers[3:]:
        assert e["max_abs"] > 1e-3, e["name"]
    # logits differ exactly by 0.25 * r1[:, 5] in column 3: the error is known in advance.
    ref_vals = [ort_values(ref, f, LAYERS) for f in feeds]
    model_vals = [ort_values(model, f, LAYERS) for f in feeds]
    assert layers[3]["max_abs"] == pytest.approx(max(0.25 * v["r1"][:, 5].max() for v in ref_vals), rel=1e-5)
    # Every metric against numpy's on ONNX Runtime's values; kernels may round differently, hence the tolerance
    # (ULPs of the few-ULP differences of rounding are not comparable: only where the perturbation dominates).
    for e in layers[3:] + r["outputs"]:
        name = e["name"]
        want = np_metrics([v[name] for v in model_vals], [v[name] for v in ref_vals])
        assert e["elements"] == want["elements"]
        assert e["max_abs"] == pytest.approx(want["max_abs"], rel=1e-4)
        assert e["rms"] == pytest.approx(want["rms"], rel=1e-4)
        assert e["cosine"] == pytest.approx(want["cosine"], abs=1e-6)
        assert e["max_rel"] == pytest.approx(want["max_rel"], rel=1e-3)
        assert e["ulp_max"] == pytest.approx(want["ulp_max"], rel=1e-3)
        assert e["top1_agreement"] == want["top1_agreement"]


# ---- (3) an fp16 copy against fp32 ----

def test_fp16_copy_against_fp32(tmp_path):
    ref = mlp(tmp_path / "ref.onnx")
    model = mlp(tmp_path / "model16.onnx", dtype=np.float16)
    feeds = samples()
    r = nee.precision(model, ref, feeds)
    out = r["outputs"][0]
    assert out["model_type"] == "float32" and out["reference_type"] == "float32"
    layers = by_name(r["layers"])
    assert list(layers) == LAYERS  # the fp16 copy keeps the names (its x16, prob16 are not the reference's)
    for n in ("h1", "a1", "r1", "logits"):
        assert layers[n]["model_type"] == "float16" and layers[n]["reference_type"] == "float32"
        assert layers[n]["compared_in"] == "float32"
    # Oracle: the onnx reference evaluator runs the fp16 copy, ONNX Runtime the fp32 model; float16 rounding
    # dominates the error, so nee's metrics agree with numpy's on those to a few percent.
    from onnx.reference import ReferenceEvaluator
    ev = ReferenceEvaluator(str(model))
    ref_vals = [ort_values(ref, f, LAYERS) for f in feeds]
    model_vals = [dict(zip(["h1", "a1", "r1", "logits"], ev.run(["h1", "a1", "r1", "logits"], f))) for f in feeds]
    for n in ("h1", "a1", "r1", "logits"):
        want = np_metrics([v[n] for v in model_vals], [v[n] for v in ref_vals])
        got = layers[n]
        assert got["elements"] == want["elements"]
        assert 0 < got["max_abs"] < 0.05
        assert got["max_abs"] == pytest.approx(want["max_abs"], rel=0.25)
        assert got["rms"] == pytest.approx(want["rms"], rel=0.1)
        assert got["cosine"] == pytest.approx(want["cosine"], abs=1e-6)
        assert 1 - got["cosine"] < 1e-5
        assert got["ulp_median"] == pytest.approx(want["ulp_median"], rel=0.25)
        assert got["ulp_max"] > 100  # float16 keeps 13 fewer mantissa bits than float32
    assert out["top1_agreement"] >= 0.9
    p = nee_cli("precision", model, "--against", ref, "--random", "2", "--dim", "N=3")
    assert p.returncode == 0, p.stderr
    assert "h1      float16/float32" in p.stdout and "compared in float32" in p.stdout


# ---- (4) gates ----

def test_gates_set_the_exit_status(tmp_path):
    ref = mlp(tmp_path / "ref.onnx")
    w2 = W2.copy()
    w2[:, 0] += 3.0  # class 0 wins far more often: top-1 drops
    model = mlp(tmp_path / "model.onnx", w2=w2)
    base = ["precision", model, "--against", ref, "--dim", "N=16", "--random", "4", "--no-layers"]
    p = nee_cli(*base, "--max-top1-drop", "0.5%")
    assert p.returncode == 4, p.stdout + p.stderr
    assert "precision gate failed: output 'prob': top-1 agreement dropped by" in p.stderr
    assert "layers" not in p.stdout
    p = nee_cli(*base, "--max-top1-drop", "100", "--max-abs", "1")
    assert p.returncode == 0, p.stderr
    assert "precision gates passed" in p.stdout
    p = nee_cli(*base, "--max-abs", "1e-6", "--json", tmp_path / "g.json")
    assert p.returncode == 4 and "--max-abs 1e-06" in p.stderr
    g = json.loads((tmp_path / "g.json").read_text())["gates"]
    assert g["passed"] is False and g["max_abs"] == 1e-6 and len(g["failures"]) == 1
    p = nee_cli("precision", ref, "--against", ref, "--dim", "N=4", "--max-top1-drop", "0", "--max-abs", "0")
    assert p.returncode == 0, p.stderr
    r = nee.precision(model, ref, dims={"N": 16}, max_top1_drop=0.5)
    assert r["gates"]["passed"] is False and "top-1" in r["gates"]["failures"][0]


# ---- (5) errors ----

def test_errors_name_what_is_wrong(tmp_path):
    ref = mlp(tmp_path / "ref.onnx")
    p = nee_cli("precision", tmp_path / "missing.onnx", "--against", ref)
    assert p.returncode == 1 and "missing.onnx" in p.stderr and "not a readable file" in p.stderr
    p = nee_cli("precision", ref)
    assert p.returncode == 2 and "--against" in p.stderr
    p = nee_cli("precision", ref, "--against", ref, "--bogus")
    assert p.returncode == 2 and "--bogus" in p.stderr
    p = nee_cli("precision", ref, "--against", ref, "--inputs", tmp_path / "nope")
    assert p.returncode == 1 and "is not a folder" in p.stderr
    (tmp_path / "empty").mkdir()
    np.save(tmp_path / "empty" / "other.npy", np.zeros(3, np.float32))
    p = nee_cli("precision", ref, "--against", ref, "--inputs", tmp_path / "empty")
    assert p.returncode == 1 and "input 'x' was not found" in p.stderr
    p = nee_cli("precision", ref, "--against", ref, "--input", "y=" + str(tmp_path / "empty" / "other.npy"))
    assert p.returncode == 1 and "no input 'y'" in p.stderr
    p = nee_cli("precision", ref, "--against", tmp_path / "garbage.onnx")
    assert p.returncode == 1

    xv = helper.make_tensor_value_info
    other_name = save(tmp_path / "name.onnx", [helper.make_node("Identity", ["z"], ["prob"])],
                      [xv("z", TensorProto.FLOAT, ["N", 16])], [xv("prob", TensorProto.FLOAT, ["N", 16])])
    with pytest.raises(nee.NeeError, match="input 'x' of .* is not an input of"):
        nee.precision(other_name, ref)
    other_type = save(tmp_path / "type.onnx", [helper.make_node("Cast", ["x"], ["prob"], to=TensorProto.FLOAT)],
                      [xv("x", TensorProto.DOUBLE, ["N", 16])], [xv("prob", TensorProto.FLOAT, ["N", 16])])
    p = nee_cli("precision", other_type, "--against", ref)
    assert p.returncode == 1 and "input 'x' is tensor(double) in" in p.stderr and "tensor(float) in" in p.stderr
    other_shape = save(tmp_path / "shape.onnx", [helper.make_node("Identity", ["x"], ["prob"])],
                       [xv("x", TensorProto.FLOAT, ["N", 8])], [xv("prob", TensorProto.FLOAT, ["N", 8])])
    with pytest.raises(nee.NeeError, match=r"input 'x' has shape \[N,8\] in .* but \[N,16\] in"):
        nee.precision(other_shape, ref)
    ints = save(tmp_path / "ints.onnx", [helper.make_node("ArgMax", ["x"], ["k"], axis=1)],
                [xv("x", TensorProto.FLOAT, ["N", 16])], [xv("k", TensorProto.INT64, ["N", 1])])
    p = nee_cli("precision", ints, "--against", ints)
    assert p.returncode == 1 and "no float outputs to compare" in p.stderr and "k (int64)" in p.stderr
    with pytest.raises(nee.NeeError, match="input 'x' was not given"):
        nee.precision(ref, ref, [{"q": np.zeros((1, 16), np.float32)}])
    with pytest.raises(ValueError):
        nee.precision(ref, ref, [])


def test_outputs_matched_by_position_and_plot(tmp_path):
    ref = mlp(tmp_path / "ref.onnx")
    m = onnx.load(str(ref))
    m.graph.node[-1].output[0] = "probabilities"
    m.graph.output[0].name = "probabilities"
    onnx.save(m, str(tmp_path / "renamed.onnx"))
    r = nee.precision(tmp_path / "renamed.onnx", ref, dims={"N": 2}, random=2)
    assert r["output_matching"] == "position"
    assert r["outputs"][0]["name"] == "prob" and r["outputs"][0]["model_name"] == "probabilities"
    assert r["outputs"][0]["max_abs"] == 0
    assert [e["name"] for e in r["layers"]] == LAYERS[:-1]  # 'prob' is not a value of the renamed model
    assert r["layers_unmatched"] == 1
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(nee.__file__)))
    p = subprocess.run([sys.executable, "-m", "nee", "precision", str(tmp_path / "renamed.onnx"), "--against",
                        str(ref), "--random", "2", "--plot", str(tmp_path / "p.png")],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    assert "outputs (matched by position)" in p.stdout and "precision.json" not in p.stdout  # (the temporary JSON)
    try:
        import matplotlib  # noqa: F401
        assert "plot written to" in p.stdout and (tmp_path / "p.png").stat().st_size > 0
    except ImportError:
        assert "matplotlib is not importable" in p.stdout


# ---- a QDQ model from ONNX Runtime's quantizer: its values matched through <name>_DequantizeLinear_Output ----

def test_qdq_model_layers_matched_through_dequantize(tmp_path):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    ref = mlp(tmp_path / "ref.onnx")

    class Calibration(CalibrationDataReader):
        def __init__(self):
            self.it = iter(samples(n=4))

        def get_next(self):
            return next(self.it, None)

    q = tmp_path / "qdq.onnx"
    quantize_static(str(ref), str(q), Calibration(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    qnames = {o for n in onnx.load(str(q)).graph.node for o in n.output}
    feeds = samples(n=2)
    r = nee.precision(q, ref, feeds, max_top1_drop=50)
    layers = by_name(r["layers"])
    dq = [n for n in LAYERS if n + "_DequantizeLinear_Output" in qnames]
    assert dq, sorted(qnames)
    for n in dq:
        assert layers[n]["model_name"] == n + "_DequantizeLinear_Output"
        assert 0 < layers[n]["max_abs"] < 0.5 and layers[n]["cosine"] > 0.99
        # numpy on ONNX Runtime's values of the same pair; a value on a rounding boundary may quantize one
        # step apart in the two runtimes, so the cosine is compared, not the max.
        want = np_metrics([ort_values(q, f, [n + "_DequantizeLinear_Output"])[n + "_DequantizeLinear_Output"]
                           for f in feeds], [ort_values(ref, f, [n])[n] for f in feeds])
        assert layers[n]["cosine"] == pytest.approx(want["cosine"], abs=1e-4)
    assert r["outputs"][0]["cosine"] > 0.99
    p = nee_cli("precision", q, "--against", ref, "--random", "2", "--dim", "N=4")
    assert p.returncode == 0 and "(dequantized)" in p.stdout, p.stdout + p.stderr


def test_non_float_outputs_are_listed_as_skipped(tmp_path):
    xv = helper.make_tensor_value_info
    path = save(tmp_path / "two.onnx", [helper.make_node("Softmax", ["x"], ["p"], axis=-1),
                                       helper.make_node("ArgMax", ["p"], ["k"], axis=1, keepdims=0)],
                [xv("x", TensorProto.FLOAT, [3, 4])], [xv("p", TensorProto.FLOAT, [3, 4]), xv("k", TensorProto.INT64, [3])])
    r = nee.precision(path, path, random=2)
    out = by_name(r["outputs"])
    assert out["k"]["skipped"] == "not a float tensor" and out["k"]["model_type"] == "int64"
    assert out["p"]["max_abs"] == 0 and out["p"]["top1_rows"] == 6
    p = nee_cli("precision", path, "--against", path, "--random", "1")
    assert p.returncode == 0 and "skipped: not a float tensor" in p.stdout


# ---- --variant: the model against what nee quantize makes of it ----

@pytest.mark.parametrize("variant,mode", [("int8", "dynamic"), ("fp16", "fp16")])
def test_variant_against_its_source(tmp_path, variant, mode):
    ref = mlp(tmp_path / "ref.onnx")
    feeds = samples(n=3)
    r = nee.precision(ref, inputs=feeds, variant=variant)
    assert r["reference"] == str(ref) and f"{variant} variant" in r["model"]
    # Oracle: the file nee quantize writes, run by the onnx reference evaluator (not ONNX Runtime: its u8s8 kernels
    # saturate int16 pair sums on CPUs without VNNI, docs/quantization.md), against ONNX Runtime's fp32 outputs,
    # metrics by numpy. A value on a rounding boundary may quantize one step apart in two runtimes, hence the
    # tolerances.
    from onnx.reference import ReferenceEvaluator
    q = tmp_path / "q.onnx"
    nee.quantize(ref, q, mode)
    ev = ReferenceEvaluator(str(q))
    got_q = [ev.run(["prob"], f)[0] for f in feeds]
    want = np_metrics(got_q, [ort_values(ref, f, ["prob"])["prob"] for f in feeds])
    got = r["outputs"][0]
    assert got["max_abs"] > 0
    assert got["max_abs"] == pytest.approx(want["max_abs"], rel=0.25)
    assert got["rms"] == pytest.approx(want["rms"], rel=0.25)
    assert got["cosine"] == pytest.approx(want["cosine"], abs=1e-4)
    assert abs(got["top1_agreement"] - want["top1_agreement"]) <= 1 / 24
    p = nee_cli("precision", ref, "--variant", variant, "--random", "1", "--dim", "N=2")
    assert p.returncode == 0 and f"({variant} variant" in p.stdout, p.stderr
    p = nee_cli("precision", ref, "--variant", variant, "--against", ref)
    assert p.returncode == 2 and "one of them" in p.stderr
    p = nee_cli("precision", ref, "--variant", "int3")
    assert p.returncode == 1 and "expected int8 (dynamic), fp16, bf16 or int4" in p.stderr
    with pytest.raises(ValueError):
        nee.precision(ref)


def test_int4_variant_against_its_source(tmp_path):
    """Oracle: ONNX Runtime running the int4 file nee quantize writes (its MatMulNBits kernel) against its own
    fp32 outputs, metrics by numpy; the two runtimes sum in different orders, hence the tolerance."""
    ref = mlp(tmp_path / "ref.onnx")
    feeds = samples(n=3)
    r = nee.precision(ref, inputs=feeds, variant="int4")
    assert "int4 variant" in r["model"]
    q = tmp_path / "q.onnx"
    nee.quantize(ref, q, "int4")
    so = ort.SessionOptions()
    so.log_severity_level = 4
    s = ort.InferenceSession(str(q), so, providers=["CPUExecutionProvider"])
    want = np_metrics([s.run(["prob"], f)[0] for f in feeds], [ort_values(ref, f, ["prob"])["prob"] for f in feeds])
    got = r["outputs"][0]
    assert got["max_abs"] > 0
    assert got["max_abs"] == pytest.approx(want["max_abs"], rel=1e-3)
    assert got["rms"] == pytest.approx(want["rms"], rel=1e-3)
    assert got["top1_agreement"] == pytest.approx(want["top1_agreement"])


def test_bf16_variant_against_its_source(tmp_path):
    """Oracle for the bf16 variant: numpy with ml_dtypes, each op computed in float32 from bfloat16 values and
    its output rounded to bfloat16 (the model's semantics; onnx.reference's bfloat16 MatMul accumulates
    differently), against ONNX Runtime's fp32 outputs. A sum next to a rounding boundary may round the other
    way in nee (float32 accumulation order): hence the tolerance."""
    import ml_dtypes
    bf = lambda v: np.asarray(v, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)  # noqa: E731
    ref = mlp(tmp_path / "ref.onnx")
    feeds = samples(n=3)
    r = nee.precision(ref, inputs=feeds, variant="bf16")
    assert "bf16 variant" in r["model"]

    def emulated(x):
        h1 = bf(bf(x) @ bf(W1))
        r1 = bf(np.maximum(bf(h1 + bf(B1)), 0))
        logits = bf(r1 @ bf(W2))
        e = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return bf(e / e.sum(axis=-1, keepdims=True))

    want = np_metrics([emulated(f["x"]) for f in feeds], [ort_values(ref, f, ["prob"])["prob"] for f in feeds])
    got = r["outputs"][0]
    assert got["max_abs"] == pytest.approx(want["max_abs"], rel=0.25)
    assert got["rms"] == pytest.approx(want["rms"], rel=0.25)
    assert abs(got["top1_agreement"] - want["top1_agreement"]) <= 1 / 24


# ---- --fp64: the reference computed in float64 ----

def nee_values(path, feed, names):
    """nee's float32 values of `names` (made extra graph outputs of a copy, as the tool does): the side measured."""
    m = onnx.load(str(path))
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in have)
    return dict(zip(names, nee.InferenceSession(m.SerializeToString()).run(names, feed)))


def mlp_in_float64(x):
    """The MLP in numpy float64 from the same float32 weights: the exact answer up to float64 rounding."""
    h1 = x.astype(np.float64) @ W1.astype(np.float64)
    r1 = np.maximum(h1 + B1.astype(np.float64), 0)
    logits = r1 @ W2.astype(np.float64)
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return {"h1": h1, "logits": logits, "prob": e / e.sum(axis=-1, keepdims=True)}


def test_fp64_reference_is_the_float64_answer(tmp_path):
    ref = mlp(tmp_path / "ref.onnx")
    feeds = samples(n=3)
    r = nee.precision(ref, ref, inputs=feeds, fp64=True)
    assert r["reference"] == f"{ref} (in float64)"
    exact = [mlp_in_float64(f["x"]) for f in feeds]
    # Outputs: the float64 results rounded once to float32 (the graph's outputs keep float32).
    got = r["outputs"][0]
    assert got["compared_in"] == "float32"
    mine = [nee.InferenceSession(str(ref)).run(["prob"], f)[0] for f in feeds]
    assert_metrics(got, np_metrics(mine, [e["prob"].astype(np.float32) for e in exact]), rtol=1e-6)
    assert 0 < got["max_abs"] < 1e-6  # nee's float32 rounding, a few ulp
    # Layers inside the graph are float64 in the reference: compared in float64 against numpy's float64 values
    # (float64 sums in another order: equal to ~1e-16, far below the float32 errors measured).
    layers = by_name(r["layers"])
    for name in ("h1", "logits"):
        assert layers[name]["compared_in"] == "float64" and layers[name]["reference_type"] == "float64"
        measured = [nee_values(ref, f, [name])[name] for f in feeds]
        want = np_metrics(measured, [e[name] for e in exact])
        assert layers[name]["max_abs"] == pytest.approx(want["max_abs"], rel=1e-6)
        assert layers[name]["rms"] == pytest.approx(want["rms"], rel=1e-6)
    # The CLI, and a variant against the float64 model it comes from.
    p = nee_cli("precision", ref, "--against", ref, "--fp64", "--random", "2", "--dim", "N=3")
    assert p.returncode == 0 and "(in float64)" in p.stdout, p.stderr
    q = nee.precision(ref, inputs=feeds, variant="int8", fp64=True)
    assert q["reference"] == f"{ref} (in float64)" and q["outputs"][0]["max_abs"] > got["max_abs"]


def test_fp64_reference_needs_a_float_computation(tmp_path):
    xv = helper.make_tensor_value_info
    path = save(tmp_path / "int.onnx", [helper.make_node("Neg", ["x"], ["y"])], [xv("x", TensorProto.INT64, [2])],
                [xv("y", TensorProto.INT64, [2])])
    p = nee_cli("precision", path, "--against", path, "--fp64", "--random", "1")
    assert p.returncode == 1 and "--fp64: no node of the reference model computes in float64" in p.stderr
