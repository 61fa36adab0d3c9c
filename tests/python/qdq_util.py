"""What the QDQ fusion tests (test_qdq_conv_fusion.py, test_qdq_matmul_fusion.py) share: inputs, a model run by nee
(graph optimizations on or off) and by ONNX Runtime (optimizations on or off), the output's quantization step,
and the ops `nee optimize` leaves."""
from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

import nee

from cli_util import nee_cli


def inputs(shape, count, seed):
    return np.random.default_rng(seed).standard_normal((count, *shape)).astype(np.float32)


def nee_out(path, x, level=None, threads=1):
    so = nee.SessionOptions()
    so.intra_op_num_threads = threads
    if level is not None:
        so.graph_optimization_level = level
    return nee.InferenceSession(str(path), so).run(None, {"x": x})[0]


def ort_out(path, x, optimize):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.intra_op_num_threads = 1
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def ort_fuses_exactly():
    """Whether ONNX Runtime's fused integer MatMul/Gemm (uint8 activations x int8 weights) is an exact oracle here.

    On x86 CPUs without VNNI its kernel multiplies byte pairs with vpmaddubsw, whose int16 pair sum saturates for
    8-bit weights (ONNX Runtime's quantization docs advise reduce_range on such CPUs); there its fused result
    drifts from the QDQ graph it fuses (measured on a Zen 3 host: up to 34 output steps, and 0 once the same
    model's weights are halved to 7 bits). With AVX-512 VNNI or AVX-VNNI it sums exactly. Where this is False
    the tests compare with ONNX Runtime's unfused QDQ graph and with nee's own unfused graph only."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return " avx512_vnni" in flags or " avx_vnni" in flags


def ort_fused_steps(fused, path, x, step):
    """Max distance in output steps from ONNX Runtime's fused result, or 0 where that is no oracle
    (`ort_fuses_exactly`)."""
    if not ort_fuses_exactly():
        return 0.0
    return float(np.max(np.abs(fused - ort_out(path, x, optimize=True))) / step)


def output_step(path):
    """The scale of the QuantizeLinear writing the graph output's quantized value (the last one)."""
    m = onnx.load(str(path))
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    q = [n for n in m.graph.node if n.op_type == "QuantizeLinear"][-1]
    return float(inits[q.input[1]])


def optimized_ops(path, tmp_path):
    out = tmp_path / "optimized.onnx"
    r = nee_cli("optimize", path, "-o", out)
    assert r.returncode == 0, r.stderr
    return Counter(n.op_type for n in onnx.load(str(out)).graph.node)


def static_int8(src, tmp_path, shape, **kw):
    """nee's static int8 of the float model at `src`, calibrated on 32 seeded samples of `shape`."""
    calib = tmp_path / "calib"
    for i, row in enumerate(inputs(shape, 32, seed=11)):
        d = calib / f"s{i:03d}"
        d.mkdir(parents=True)
        np.save(d / "x.npy", row[None])
    dst = tmp_path / "int8.onnx"
    nee.quantize(src, dst, mode="static", calibration=calib, **kw)
    return dst
