"""Writes seed corpora for the fuzzers that need models, from the ONNX
backend node tests shipped in the onnx package:

  <out>/checker/  each test's model (ModelProto bytes)
  <out>/run/      run_fuzzer's format: u32 model size, model, input bytes
  <out>/pb/       the tests' inputs as TensorProto / SequenceProto files

Only tests whose files are small (64 KiB) are kept, so libFuzzer's -max_len
does not cut them.  Usage: make_seeds.py OUT_DIR
"""
import os
import struct
import sys
import warnings

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test import loader

MAX_BYTES = 65536


def input_bytes(arrays):
    """The raw bytes of every plain numeric array input, in order."""
    out = b""
    for a in arrays:
        if isinstance(a, np.ndarray) and a.dtype.kind in "biuf" and a.dtype.itemsize <= 8:
            out += np.ascontiguousarray(a).tobytes()
    return out


def main():
    out = sys.argv[1]
    for kind in ("checker", "run", "pb"):
        os.makedirs(os.path.join(out, kind), exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tests = loader.load_model_tests(kind="node")
    for t in tests:
        model = t.model.SerializeToString()
        if len(model) > MAX_BYTES:
            continue
        with open(os.path.join(out, "checker", t.name), "wb") as f:
            f.write(model)
        inputs = t.data_sets[0][0] if t.data_sets else []
        run = struct.pack("<I", len(model)) + model + input_bytes(inputs)
        if len(run) <= MAX_BYTES:
            with open(os.path.join(out, "run", t.name), "wb") as f:
                f.write(run)
        for i, a in enumerate(inputs[:1]):
            try:
                pb = numpy_helper.from_array(a).SerializeToString() if isinstance(a, np.ndarray) else None
            except Exception:  # a dtype TensorProto cannot hold (e.g. object)
                pb = None
            if pb and len(pb) <= MAX_BYTES:
                with open(os.path.join(out, "pb", t.name), "wb") as f:
                    f.write(pb)


if __name__ == "__main__":
    main()
