#!/usr/bin/env python3
"""The benchmark zoo: builds the models bench/compare.py runs, locally, with seeded random weights.

  .venv/bin/python bench/zoo.py --list            # the models and whether each is built
  .venv/bin/python bench/zoo.py                   # build every missing model
  .venv/bin/python bench/zoo.py resnet50_b1 gpt2  # build these (missing ones only)
  .venv/bin/python bench/zoo.py --force bert_base # rebuild

Models live outside the repository, in $NEE_ZOO_DIR or --dir (default ~/.cache/nee-zoo):
NAME.onnx, NAME.npz (the fixed inputs "in:<name>" and the exporting framework's outputs for
them "out:<name>") and NAME.json (what the model is, its inputs and outputs, a summary of the
reference outputs). Torch models are exported at opset 17 by bench/zoo_torch.py under the
system interpreter (Debian's python3-torch; $NEE_ZOO_TORCH_PYTHON overrides /usr/bin/python3);
the scikit-learn model is built in this interpreter with skl2onnx. Nothing is downloaded.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_PYTHON = os.environ.get("NEE_ZOO_TORCH_PYTHON", "/usr/bin/python3")

# name -> which builder makes it ("torch" runs bench/zoo_torch.py; "sklearn" runs here)
MODELS = {
    "resnet50_b1": "torch", "resnet50_b8": "torch",
    "mobilenetv2_b1": "torch", "mobilenetv2_b8": "torch",
    "bert_base": "torch", "gpt2": "torch",
    "vit_b16_b1": "torch",
    "yolo_b1": "torch", "yolo_b8": "torch",
    "speech_lstm": "torch",
    "forest500": "sklearn",
    # Beyond the list: MobileNetV3 (HardSwish, 5x5 depthwise, squeeze-and-excitation) and
    # EfficientNet-B0 (SiLU, 5x5 depthwise, SE), both exported with a dynamic batch axis.
    "mobilenetv3_b1": "torch", "efficientnetb0_b1": "torch",
}


def default_dir():
    return os.environ.get("NEE_ZOO_DIR", os.path.join(os.path.expanduser("~"), ".cache", "nee-zoo"))


def paths(name, folder):
    return {ext: os.path.join(folder, f"{name}.{ext}") for ext in ("onnx", "npz", "json")}


def is_built(name, folder):
    return all(os.path.exists(p) for p in paths(name, folder).values())


def load(name, folder=None):
    """(onnx path, {input name: array}, {output name: reference array}, metadata) of a built model."""
    p = paths(name, folder or default_dir())
    if not all(os.path.exists(x) for x in p.values()):
        raise FileNotFoundError(f"{name} is not built in {folder or default_dir()}: run bench/zoo.py {name}")
    with open(p["json"]) as f:
        meta = json.load(f)
    with np.load(p["npz"]) as z:
        inputs = {i["name"]: z["in:" + i["name"]] for i in meta["inputs"]}
        outputs = {o["name"]: z["out:" + o["name"]] for o in meta["outputs"]}
    return p["onnx"], inputs, outputs, meta


# ---------------------------------------------------------------- builders

def build_torch(name, folder):
    proc = subprocess.run([TORCH_PYTHON, os.path.join(HERE, "zoo_torch.py"), name, folder],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"torch export of {name} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def build_sklearn(name, folder, seed=0):
    """A 500-tree random forest (depth <= 10) on a 28-feature binary task, scored on 1000 rows."""
    import sklearn
    from skl2onnx import to_onnx
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier

    x, y = make_classification(n_samples=6000, n_features=28, n_informative=12, random_state=seed)
    x = x.astype(np.float32)
    start = time.perf_counter()
    forest = RandomForestClassifier(n_estimators=500, max_depth=10, random_state=seed, n_jobs=1)
    forest.fit(x[:5000], y[:5000])
    rows = x[5000:]
    onx = to_onnx(forest, rows[:1], options={id(forest): {"zipmap": False}},
                  target_opset={"": 17, "ai.onnx.ml": 3})
    # Name the graph's input and outputs as the npz does.
    inp, (label, proba) = onx.graph.input[0].name, [o.name for o in onx.graph.output]
    with open(paths(name, folder)["onnx"], "wb") as f:
        f.write(onx.SerializeToString())
    np.savez(paths(name, folder)["npz"], **{f"in:{inp}": rows,
                                            f"out:{label}": forest.predict(rows).astype(np.int64),
                                            f"out:{proba}": forest.predict_proba(rows).astype(np.float32)})
    return {"name": name, "framework": f"scikit-learn {sklearn.__version__}",
            "description": "RandomForestClassifier, 500 trees, max depth 10, 28 features, 1000 rows (skl2onnx)",
            "opset": 17, "seed": seed, "export_s": round(time.perf_counter() - start, 2)}


def summarize(array):
    a = np.asarray(array)
    info = {"shape": list(a.shape), "dtype": str(a.dtype)}
    if a.size and a.dtype.kind in "fiu":
        f = a.astype(np.float64)
        info.update(mean=float(f.mean()), std=float(f.std()), max_abs=float(np.abs(f).max()),
                    first=[float(v) for v in f.ravel()[:4]])
    return info


def write_metadata(name, folder, meta):
    p = paths(name, folder)
    with np.load(p["npz"]) as z:
        meta["inputs"] = [{"name": k[3:], **summarize(z[k])} for k in z.files if k.startswith("in:")]
        meta["outputs"] = [{"name": k[4:], **summarize(z[k])} for k in z.files if k.startswith("out:")]
    for out in meta["outputs"]:
        if out.get("std") == 0.0 and out["dtype"].startswith("float"):
            print(f"warning: {name} output {out['name']} is constant: agreement checks on it mean little",
                  file=sys.stderr)
    meta["onnx_bytes"] = os.path.getsize(p["onnx"])
    with open(p["json"], "w") as f:
        json.dump(meta, f, indent=1)


def build(name, folder, force=False):
    if is_built(name, folder) and not force:
        return "cached"
    os.makedirs(folder, exist_ok=True)
    start = time.perf_counter()
    meta = build_torch(name, folder) if MODELS[name] == "torch" else build_sklearn(name, folder)
    write_metadata(name, folder, meta)
    return f"built in {time.perf_counter() - start:.0f} s"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="models to build (default: all)")
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    ap.add_argument("--dir", default=default_dir(), help="cache folder (default $NEE_ZOO_DIR or ~/.cache/nee-zoo)")
    ap.add_argument("--force", action="store_true", help="rebuild even if cached")
    args = ap.parse_args()
    unknown = [n for n in args.names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; known: {', '.join(MODELS)}")
    if args.list:
        for name in MODELS:
            built = is_built(name, args.dir)
            about = json.load(open(paths(name, args.dir)["json"]))["description"] if built else \
                f"not built ({MODELS[name]})"
            print(f"{name:16} {about}")
        return 0
    failed = 0
    for name in args.names or MODELS:
        try:
            print(f"{name:16} {build(name, args.dir, args.force)}", flush=True)
        except Exception as e:  # report and go on with the other models
            failed += 1
            print(f"{name:16} FAILED: {e}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
