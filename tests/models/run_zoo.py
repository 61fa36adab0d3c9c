#!/usr/bin/env python3
"""Runs a scratch zoo of exported models through nee and compares with the frameworks' outputs.

    PYTHONPATH=build/python /work/main/.venv/bin/python tests/models/run_zoo.py [--zoo /tmp/zoo]
        [--build build] [--filter SUBSTRING] [--no-cli] [--no-api]

Each model folder (made by tests/models/torch/export_zoo.py, tests/models/export_zoo_extra.py) holds
model.onnx, input_<i>.npy and expected_<i>.npy. Folders whose name starts with "quant" hold onnxruntime's
outputs and are compared with a small absolute tolerance (one uint8 step); the rest with rtol 1e-3, atol 1e-4.
A folder with a zipmap output (a sequence of maps) is compared after turning the maps into a matrix with
one column per class, columns in sorted class order.
Prints one line per model: name, pass/fail for the Python API and the CLI, max abs error, reason.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def load_case(folder):
    def by_index(pattern):
        paths = glob.glob(os.path.join(folder, pattern))
        return [np.load(p, allow_pickle=True) for p in sorted(paths, key=lambda p: int(p.rsplit("_", 1)[1][:-4]))]
    return by_index("input_*.npy"), by_index("expected_*.npy")


def as_array(value):
    if isinstance(value, list) and value and isinstance(value[0], dict):
        keys = sorted(value[0].keys())
        return np.array([[row[k] for k in keys] for row in value], dtype=np.float32)
    return np.asarray(value)


def tolerance(folder):
    if os.path.basename(folder).startswith("quant"):
        return 0.0, 2e-2
    return 1e-3, 1e-4


def compare(got, want, folder):
    got = as_array(got)
    want = as_array(want)
    if got.shape != want.shape and got.size == want.size and got.squeeze().shape == want.squeeze().shape:
        got = got.reshape(want.shape)  # (n, 1) scores against scikit-learn's (n,): same values
    if got.shape != want.shape:
        return False, float("inf"), f"shape {got.shape} != {want.shape}"
    if want.dtype.kind in "OUS":
        ok = np.array_equal(got.astype(str), want.astype(str))
        return ok, 0.0 if ok else float("inf"), "" if ok else "string mismatch"
    if want.dtype.kind in "biu":
        if got.dtype.kind not in "biu":
            return False, float("inf"), f"dtype {got.dtype} != {want.dtype}"
        diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
        err = float(diff.max()) if diff.size else 0.0
        return err == 0, err, "" if err == 0 else "integers differ"
    rtol, atol = tolerance(folder)
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    same_nonfinite = np.array_equal(np.isfinite(g), np.isfinite(w)) and np.array_equal(g[~np.isfinite(w)], w[~np.isfinite(w)])
    fin = np.isfinite(w)
    diff = np.abs(g[fin] - w[fin])
    err = float(diff.max()) if diff.size else 0.0
    ok = same_nonfinite and bool(np.all(diff <= atol + rtol * np.abs(w[fin])))
    return ok, err, "" if ok else ("non-finite mismatch" if not same_nonfinite else "values differ")


def check_outputs(outputs, expected, folder):
    if len(outputs) < len(expected):
        return False, float("inf"), f"{len(outputs)} outputs, expected {len(expected)}"
    worst, reasons, ok_all = 0.0, [], True
    for i, (got, want) in enumerate(zip(outputs, expected)):
        ok, err, why = compare(got, want, folder)
        worst = max(worst, err)
        if not ok:
            ok_all = False
            reasons.append(f"out{i}: {why} (err {err:.3g})")
    return ok_all, worst, "; ".join(reasons)


def run_api(folder, inputs, expected):
    import nee
    try:
        sess = nee.InferenceSession(os.path.join(folder, "model.onnx"))
        feed = {arg.name: x for arg, x in zip(sess.get_inputs(), inputs)}
        outputs = sess.run(None, feed)
    except Exception as e:  # report and go on with the next model
        return False, float("inf"), f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
    return check_outputs(outputs, expected, folder)


def run_cli(folder, inputs, expected, nee_bin, input_names):
    with tempfile.TemporaryDirectory() as tmp:
        args = [nee_bin, "run", os.path.join(folder, "model.onnx"), "--output-dir", tmp]
        for i, name in enumerate(input_names):
            args += ["--input", f"{name}={os.path.join(folder, f'input_{i}.npy')}"]
        try:
            r = subprocess.run(args, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            return False, float("inf"), "timeout"
        if r.returncode != 0:
            return False, float("inf"), "rc %d: %s" % (r.returncode, (r.stderr.strip().splitlines() or [""])[-1][:300])
        outputs, compared, note = [], [], ""
        for i in range(len(expected)):
            path = os.path.join(tmp, f"output_{i}.npy")
            if not os.path.exists(path):
                if "not written: only tensor outputs" in r.stdout:
                    note = " (CLI wrote no file for non-tensor outputs)"
                    continue
                return False, float("inf"), f"no {os.path.basename(path)} (files: {os.listdir(tmp)})"
            outputs.append(np.load(path, allow_pickle=True))
            compared.append(expected[i])
        ok, err, why = check_outputs(outputs, compared, folder)
        return ok, err, why + note


def ort_verdict(folder, inputs, expected):
    try:
        import nee
        import onnxruntime as ort
        sess = ort.InferenceSession(os.path.join(folder, "model.onnx"), providers=["CPUExecutionProvider"])
        feed = {a.name: x for a, x in zip(sess.get_inputs(), inputs)}
        theirs = sess.run(None, feed)
        ours = nee.InferenceSession(os.path.join(folder, "model.onnx")).run(None, feed)
    except Exception as e:  # either runtime failing is itself the verdict
        return f"ort/nee error: {str(e).splitlines()[0][:120]}"
    agree_nee = all(compare(o, t, "")[0] for o, t in zip(ours, theirs))
    agree_ref = all(compare(t, e, folder)[0] for t, e in zip(theirs, expected))
    return ("ORT agrees with nee" if agree_nee else "ORT differs from nee") + (
        ", ORT agrees with the framework" if agree_ref else ", ORT differs from the framework")


def graph_input_names(model_path):
    import onnx
    model = onnx.load(model_path, load_external_data=False)
    inits = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zoo", default="/tmp/zoo")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--filter", default="")
    ap.add_argument("--no-cli", action="store_true")
    ap.add_argument("--no-api", action="store_true")
    ap.add_argument("--ort", action="store_true",
                    help="for each failure, also run onnxruntime: when it agrees with nee rather than with the "
                         "framework, the difference is the exporter's (or the framework's), not nee's")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.build, "python"))
    nee_bin = os.path.join(args.build, "bin", "nee")
    folders = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(args.zoo, "*", "model.onnx")))
    folders = [f for f in folders if args.filter in os.path.basename(f)]
    print(f"{'model':45s} {'api':5s} {'cli':5s} {'max err':>10s} {'max|ref|':>9s} {'s':>5s}  reason", flush=True)
    failures = 0
    for folder in folders:
        start = time.time()
        inputs, expected = load_case(folder)
        api = run_api(folder, inputs, expected) if not args.no_api else (True, 0.0, "")
        cli = (run_cli(folder, inputs, expected, nee_bin, graph_input_names(os.path.join(folder, "model.onnx")))
               if not args.no_cli else (True, 0.0, ""))
        failures += not (api[0] and cli[0])
        reason = api[2] or cli[2]
        if api[2] and cli[2] and api[2] != cli[2]:
            reason = f"api: {api[2]} | cli: {cli[2]}"
        err = max(api[1], cli[1])
        if args.ort and not (api[0] and cli[0]):
            reason += " [" + ort_verdict(folder, inputs, expected) + "]"
        floats = [np.abs(e).max() for e in expected if getattr(e, "dtype", None) is not None and e.dtype.kind == "f" and e.size]
        ref = float(max(floats)) if floats else 0.0
        print(f"{os.path.basename(folder):45s} {'pass' if api[0] else 'FAIL':5s} {'pass' if cli[0] else 'FAIL':5s} "
              f"{err:10.3g} {ref:9.3g} {time.time() - start:5.1f}  {reason}", flush=True)
    print(f"{len(folders) - failures}/{len(folders)} models pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
