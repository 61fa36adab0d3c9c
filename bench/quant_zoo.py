#!/usr/bin/env python3
"""Int8 versions of zoo models, made by ONNX Runtime's quantize_static (or quantize_dynamic), for
bench/compare.py and bench/node_compare.py.

    .venv/bin/python bench/quant_zoo.py [resnet50_b1 ...] [--per-channel]
    .venv/bin/python bench/quant_zoo.py --dynamic bert_base gpt2

For each float zoo model NAME (bench/zoo.py must have built it) this writes NAME_int8_qop.* (QOperator form:
QLinearConv, QLinearAdd, ...) and NAME_int8_qdq.* (QDQ form: DequantizeLinear -> Conv -> QuantizeLinear, which
nee fuses in src/opt/fuse_qdq_conv.cc) beside it: the .onnx, the zoo's .npz of inputs with ONNX Runtime's
outputs on the quantized model as the reference, and the .json. Calibration: four random normal inputs (seed 0),
activations uint8, weights int8, per tensor unless --per-channel.

--dynamic writes NAME_int8_dyn.* instead, made by quantize_dynamic (the transformer form: weights int8 offline,
activations quantized at run time, DynamicQuantizeLinear -> MatMulInteger -> Mul by the scales, which ORT's
own graph optimizer fuses to DynamicQuantizeMatMul / MatMulIntegerToFloat when it loads it): QInt8 weights, per
tensor unless --per-channel; no calibration. Its reference outputs are ONNX Runtime's on the quantized model.
"""
import argparse
import copy
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402


def random_reader(names_shapes, count=4):
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(0)
            self.feeds = iter([{n: rng.standard_normal(s).astype(np.float32) for n, s in names_shapes}
                               for _ in range(count)])

        def get_next(self):
            return next(self.feeds, None)

    return Reader()


def save_form(name, out_name, folder, inputs, meta, description):
    """Runs ONNX Runtime on the quantized model out_name and writes its .npz (the zoo's inputs and ORT's outputs
    as the reference) and .json beside it."""
    import onnxruntime as ort

    p = zoo.paths(out_name, folder)
    sess = ort.InferenceSession(p["onnx"], providers=["CPUExecutionProvider"])
    outputs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, inputs)))
    np.savez(p["npz"], **{"in:" + k: v for k, v in inputs.items()},
             **{"out:" + k: v for k, v in outputs.items()})
    out_meta = copy.deepcopy(meta)
    out_meta.update(name=out_name, onnx_bytes=os.path.getsize(p["onnx"]),
                    description=f"{meta.get('description', name)}; {description}")
    with open(p["json"], "w") as f:
        json.dump(out_meta, f, indent=1)
    print(f"{out_name}: {p['onnx']}", flush=True)


def quantize_dyn(name, folder, per_channel):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    src, inputs, _, meta = zoo.load(name, folder)
    out_name = f"{name}_int8_dyn"
    with tempfile.TemporaryDirectory() as tmp:
        prep = os.path.join(tmp, "prep.onnx")
        quant_pre_process(src, prep, skip_symbolic_shape=True)
        quantize_dynamic(prep, zoo.paths(out_name, folder)["onnx"], weight_type=QuantType.QInt8,
                         per_channel=per_channel)
    save_form(name, out_name, folder, inputs, meta,
              f"quantize_dynamic, s8 weights, {'per channel' if per_channel else 'per tensor'}")


def quantize(name, folder, per_channel):
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    src, inputs, _, meta = zoo.load(name, folder)
    with tempfile.TemporaryDirectory() as tmp:
        prep = os.path.join(tmp, "prep.onnx")
        quant_pre_process(src, prep, skip_symbolic_shape=True)
        for form, fmt in (("qop", QuantFormat.QOperator), ("qdq", QuantFormat.QDQ)):
            out_name = f"{name}_int8_{form}"
            p = zoo.paths(out_name, folder)
            quantize_static(prep, p["onnx"], random_reader([(k, v.shape) for k, v in inputs.items()]),
                            quant_format=fmt, activation_type=QuantType.QUInt8,
                            weight_type=QuantType.QInt8, per_channel=per_channel)
            save_form(name, out_name, folder, inputs, meta,
                      f"quantize_static {form}, u8 activations, s8 weights, "
                      f"{'per channel' if per_channel else 'per tensor'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=["resnet50_b1"])
    ap.add_argument("--per-channel", action="store_true")
    ap.add_argument("--dynamic", action="store_true",
                    help="make NAME_int8_dyn with quantize_dynamic instead of the static forms")
    ap.add_argument("--zoo-dir", default=zoo.default_dir())
    args = ap.parse_args()
    for name in args.names:
        (quantize_dyn if args.dynamic else quantize)(name, args.zoo_dir, args.per_channel)


if __name__ == "__main__":
    main()
