#!/usr/bin/env python3
"""nee side by side with ONNX Runtime, OpenVINO and tract on the benchmark zoo.

  PYTHONPATH=build/python .venv/bin/python bench/compare.py                       # every built zoo model
  PYTHONPATH=build/python .venv/bin/python bench/compare.py resnet50_b1 bert_base \\
      --threads 1 2 --runs 20 --warmup 3 --runtimes nee ort openvino tract --out /tmp/bench

Models come from bench/zoo.py (build them first; --zoo-dir or $NEE_ZOO_DIR picks the cache).
Any nee build works: the harness imports `nee` from PYTHONPATH. For each model and thread count:

- latency: every runtime holds a session in this one process, on the same inputs; after
  --warmup runs each, --runs rounds alternate the runtimes (one timed run each per round, the
  starting runtime rotating, --pause-ms of idle before each run so no runtime's spinning
  threads eat into the next one's time). Median and p90 per runtime, and nee's ratio to each
  peer (nee/peer > 1 means nee is slower), all from the same rounds, so machine noise hits all.
- creation and memory: a fresh interpreter per runtime imports the runtime's Python module,
  creates the session (that span is "creation"), runs the model once and reads its own
  VmHWM from /proc/self/status (peak RSS of that process alone).
- agreement: max abs and max relative difference (max |a - b| / max |b|, over each output,
  worst output) of every runtime's outputs vs ONNX Runtime's and vs the exporting
  framework's stored outputs.

A runtime that fails on a model (load or run) is reported with the first line of its error.
Writes results.md, results.json and latency.png to --out (default bench/results/<date-time>).
tract's Python API has no thread setting: it always runs single-threaded (noted in the table).
"""
import argparse
import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import zoo  # noqa: E402

RUNTIMES = ["nee", "ort", "openvino", "tract"]
LABELS = {"nee": "nee", "ort": "ORT", "openvino": "OpenVINO", "tract": "tract"}


# ---------------------------------------------------------------- runtime adapters
# Each opens a model for a thread count and returns (run, info): run(feed) -> [outputs in
# graph order] as numpy arrays. Each imports its runtime lazily, so that a fresh process
# can time import + creation together.

def open_nee(path, threads):
    import nee
    so = nee.SessionOptions()
    so.intra_op_num_threads = threads
    sess = nee.InferenceSession(path, so)
    return (lambda feed: sess.run(None, feed)), {"version": nee.__version__, "threads": threads}


def open_ort(path, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return (lambda feed: sess.run(None, feed)), {"version": ort.__version__, "threads": threads}


def open_openvino(path, threads):
    """CPU plugin, f32, one stream of `threads` threads, no core pinning: set explicitly so the
    result does not depend on what PERFORMANCE_HINT would choose."""
    import openvino as ov
    config = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1", "INFERENCE_NUM_THREADS": str(threads),
              "INFERENCE_PRECISION_HINT": "f32", "ENABLE_CPU_PINNING": "NO", "ENABLE_HYPER_THREADING": "NO"}
    compiled = ov.Core().compile_model(path, "CPU", config)
    request = compiled.create_infer_request()
    outputs = compiled.outputs

    def run(feed):
        result = request.infer(feed)
        return [np.asarray(result[o]) for o in outputs]
    effective = {k: str(compiled.get_property(k)) for k in ("NUM_STREAMS", "INFERENCE_NUM_THREADS",
                                                             "INFERENCE_PRECISION_HINT")}
    return run, {"version": ov.__version__.split("-")[0], "threads": threads, "effective": effective}


def open_tract(path, threads):
    import tract
    model = tract.onnx().load(path)
    names = [model.input_name(i) for i in range(model.input_count())]
    runnable = model.into_model().into_runnable()

    def run(feed):
        return [t.to_numpy() for t in runnable.run([feed[n] for n in names])]
    return run, {"version": tract.version(), "threads": 1, "note": "single-threaded (no thread setting)"}


OPENERS = {"nee": open_nee, "ort": open_ort, "openvino": open_openvino, "tract": open_tract}


def first_line(error):
    text = f"{type(error).__name__}: {error}".strip()
    return text.splitlines()[0][:300] if text else type(error).__name__


# ---------------------------------------------------------------- fresh process: creation and RSS

def vm_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def child_main(runtime, name, zoo_dir, threads):
    """Runs in a fresh interpreter: import + create (timed), one run, own peak RSS."""
    path, inputs, _, _ = zoo.load(name, zoo_dir)
    base_kb = vm_kb("VmHWM")
    start = time.perf_counter()
    try:
        run, _ = OPENERS[runtime](path, threads)
        created = time.perf_counter() - start
        run(inputs)
        result = {"create_s": created, "rss_peak_mb": vm_kb("VmHWM") / 1024, "rss_base_mb": base_kb / 1024}
    except Exception as e:  # reported by the parent
        result = {"error": first_line(e)}
    print("RESULT " + json.dumps(result))


def fresh_process(runtime, name, zoo_dir, threads, timeout):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", runtime, name, "--zoo-dir", zoo_dir,
           "--threads", str(threads)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"fresh process timed out after {timeout} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
    return {"error": f"fresh process died: {tail[:300]}"}


# ---------------------------------------------------------------- agreement

def differences(actual, expected):
    """(max abs, max relative) difference over outputs; relative = max|a-b| / max|b| per output."""
    if len(actual) != len(expected):
        return {"error": f"{len(actual)} outputs, expected {len(expected)}"}
    worst_abs = worst_rel = 0.0
    for a, e in zip(actual, expected):
        a, e = np.asarray(a), np.asarray(e)
        if a.shape != e.shape:
            return {"error": f"shape {list(a.shape)}, expected {list(e.shape)}"}
        if a.size == 0:
            continue
        diff = float(np.max(np.abs(a.astype(np.float64) - e.astype(np.float64))))
        scale = float(np.max(np.abs(e.astype(np.float64))))
        worst_abs = max(worst_abs, diff)
        worst_rel = max(worst_rel, diff / scale if scale else (0.0 if diff == 0 else float("inf")))
    return {"max_abs": worst_abs, "max_rel": worst_rel}


# ---------------------------------------------------------------- latency, in one process

def open_all(runtimes, path, threads, record):
    sessions = {}
    for rt in runtimes:
        try:
            sessions[rt], record[rt]["info"] = OPENERS[rt](path, threads)
        except Exception as e:
            record[rt]["error"] = "load: " + first_line(e)
    return sessions


def timed(run, feed, pause):
    time.sleep(pause)
    start = time.perf_counter()
    outputs = run(feed)
    return time.perf_counter() - start, outputs


def warm_up(sessions, feed, warmup, record, pause):
    """Each runtime runs `warmup` times (alternating); a runtime that fails is dropped."""
    outputs = {}
    for _ in range(max(1, warmup)):
        for rt in list(sessions):
            try:
                outputs[rt] = timed(sessions[rt], feed, pause)[1]
            except Exception as e:
                record[rt]["error"] = "run: " + first_line(e)
                del sessions[rt]
    return outputs


def alternate(sessions, feed, runs, pause):
    """`runs` rounds, one timed run per runtime each, the starting runtime rotating."""
    order = list(sessions)
    times = {rt: [] for rt in order}
    for i in range(runs):
        for rt in order[i % len(order):] + order[:i % len(order)]:
            times[rt].append(timed(sessions[rt], feed, pause)[0])
    return times


def percentile(values, q):
    return float(np.percentile(np.asarray(values), q))


def measure_latency(name, runtimes, threads, args, record):
    path, inputs, reference, _ = zoo.load(name, args.zoo_dir)
    sessions = open_all(runtimes, path, threads, record)
    pause = args.pause_ms / 1000.0
    outputs = warm_up(sessions, inputs, args.warmup, record, pause)
    times = alternate(sessions, inputs, args.runs, pause) if sessions else {}
    expected = list(reference.values())
    for rt, ts in times.items():
        record[rt].update(median_ms=1e3 * statistics.median(ts), p90_ms=1e3 * percentile(ts, 90),
                          times_ms=[round(1e3 * t, 3) for t in ts])
        record[rt]["vs_framework"] = differences(outputs[rt], expected)
        if "ort" in outputs:
            record[rt]["vs_ort"] = differences(outputs[rt], outputs["ort"])
    sessions.clear()
    gc.collect()


def measure(name, runtimes, threads, args):
    record = {rt: {} for rt in runtimes}
    if not args.no_fresh:
        for rt in runtimes:
            record[rt]["fresh"] = fresh_process(rt, name, args.zoo_dir, threads, args.timeout)
    measure_latency(name, runtimes, threads, args, record)
    nee = record.get("nee", {}).get("median_ms")
    for rt in runtimes:
        peer = record[rt].get("median_ms")
        if nee and peer and rt != "nee":
            record[rt]["nee_ratio"] = nee / peer
    return record


# ---------------------------------------------------------------- report

def machine():
    model = platform.processor() or "?"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except Exception:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version()}


def fmt_ms(r):
    if "median_ms" not in r:
        return "fail" if "error" in r else "–"
    return f"{r['median_ms']:.1f} ({r['p90_ms']:.1f})"


def fmt_ratio(r):
    return f"{r['nee_ratio']:.2f}" if "nee_ratio" in r else "–"


def fmt_diff(d):
    if not d:
        return "–"
    if "error" in d:
        return "mismatch"
    return f"{d['max_abs']:.1e} / {d['max_rel']:.1e}"


def latency_table(results, runtimes, threads):
    peers = [rt for rt in runtimes if rt != "nee"]
    head = ["model"] + [f"{LABELS[rt]} ms" for rt in runtimes] + [f"nee/{LABELS[rt]}" for rt in peers]
    rows = []
    for name, per_thread in results.items():
        r = per_thread[str(threads)]
        rows.append([name] + [fmt_ms(r[rt]) for rt in runtimes] + [fmt_ratio(r[rt]) for rt in peers])
    return markdown(head, rows)


def fresh_table(results, runtimes, threads):
    head = ["model"] + [f"{LABELS[rt]} create s" for rt in runtimes] + [f"{LABELS[rt]} RSS MB" for rt in runtimes]
    rows = []
    for name, per_thread in results.items():
        fr = [per_thread[str(threads)][rt].get("fresh", {}) for rt in runtimes]
        rows.append([name] + [f"{f['create_s']:.2f}" if "create_s" in f else ("fail" if f else "–") for f in fr]
                    + [f"{f['rss_peak_mb']:.0f}" if "rss_peak_mb" in f else ("fail" if f else "–") for f in fr])
    return markdown(head, rows)


def agreement_table(results, runtimes, threads):
    head = (["model"] + [f"{LABELS[rt]} vs ORT" for rt in runtimes if rt != "ort"]
            + [f"{LABELS[rt]} vs framework" for rt in runtimes])
    rows = []
    for name, per_thread in results.items():
        r = per_thread[str(threads)]
        rows.append([name] + [fmt_diff(r[rt].get("vs_ort")) for rt in runtimes if rt != "ort"]
                    + [fmt_diff(r[rt].get("vs_framework")) for rt in runtimes])
    return markdown(head, rows)


def failures(results):
    seen = []
    for name, per_thread in results.items():
        for t, r in per_thread.items():
            for rt, rec in r.items():
                for what, err in (("", rec.get("error")), ("fresh process: ", rec.get("fresh", {}).get("error"))):
                    line = f"- {LABELS[rt]} on {name}: {what}{err}"
                    if err and line not in seen:
                        seen.append(line)
    return seen


def markdown(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["--:"] * (len(head) - 1)) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def versions(results):
    found = {}
    for per_thread in results.values():
        for r in per_thread.values():
            for rt, rec in r.items():
                if "info" in rec:
                    found[LABELS[rt]] = rec["info"]["version"]
    return ", ".join(f"{k} {v}" for k, v in found.items())


def report(results, meta, args):
    runtimes, out = args.runtimes, []
    out.append(f"Machine: {meta['machine']['cpu']}, {meta['machine']['cores']} cores; load average "
               f"{meta['load_before'][0]:.1f} before, {meta['load_after'][0]:.1f} after. {meta['date']}.")
    out.append(f"Runtimes: {versions(results)}.")
    out.append(f"Command: `{meta['command']}`")
    out.append(f"Latency: median (p90) of {args.runs} alternating runs after {args.warmup} warm-up runs, "
               "milliseconds; nee/X > 1 means nee is slower. tract is single-threaded at any setting.")
    for t in args.threads:
        out += ["", f"**{t} thread{'s' if t > 1 else ''}**", "", latency_table(results, runtimes, t)]
    if not args.no_fresh:
        for t in args.threads:
            out += ["", f"Session creation (including the runtime module's import) and peak RSS of a fresh "
                    f"process that loads and runs the model once, {t} thread{'s' if t > 1 else ''}:", "",
                    fresh_table(results, runtimes, t)]
    t = args.threads[0]
    out += ["", f"Agreement, max abs / max relative difference ({t} thread{'s' if t > 1 else ''}; "
            "framework = the exporting framework's output for the same input):", "",
            agreement_table(results, runtimes, t)]
    fails = failures(results)
    if fails:
        out += ["", "Failures (first line of the error):", ""] + fails
    return "\n".join(out) + "\n"


def chart(results, args, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names, peers = list(results), [rt for rt in args.runtimes if rt != "ort"]
    fig, axes = plt.subplots(len(args.threads), 1, figsize=(max(6, 1.2 * len(names) + 2), 3.5 * len(args.threads)),
                             squeeze=False)
    width = 0.8 / max(1, len(peers))
    for ax, t in zip(axes[:, 0], args.threads):
        for k, rt in enumerate(peers):
            vals = []
            for n in names:
                r = results[n][str(t)]
                ok = "median_ms" in r[rt] and "median_ms" in r.get("ort", {})
                vals.append(r[rt]["median_ms"] / r["ort"]["median_ms"] if ok else np.nan)
            ax.bar(np.arange(len(names)) + (k - (len(peers) - 1) / 2) * width, vals, width, label=LABELS[rt])
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_ylabel("latency / ORT latency")
        ax.set_title(f"{t} thread{'s' if t > 1 else ''} (median; lower is faster)")
        ax.set_xticks(np.arange(len(names)), names, rotation=30, ha="right")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------- main

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help="zoo model names (default: every built one)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--runs", type=int, default=20, help="timed runs per runtime (alternating)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--runtimes", nargs="+", default=RUNTIMES, choices=RUNTIMES)
    ap.add_argument("--pause-ms", type=float, default=20.0, help="idle time before each timed run")
    ap.add_argument("--no-fresh", action="store_true", help="skip the fresh-process creation/RSS measurement")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds allowed per fresh process")
    ap.add_argument("--zoo-dir", default=zoo.default_dir())
    ap.add_argument("--out", default=None, help="output folder (default bench/results/<date-time>)")
    ap.add_argument("--child", metavar="RUNTIME", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    if args.child:
        child_main(args.child, args.models[0], args.zoo_dir, args.threads[0])
        return 0
    models = args.models or [n for n in zoo.MODELS if zoo.is_built(n, args.zoo_dir)]
    missing = [n for n in models if not zoo.is_built(n, args.zoo_dir)]
    if missing or not models:
        print(f"not built: {missing or 'any model'}; run bench/zoo.py first", file=sys.stderr)
        return 2
    stamp = datetime.datetime.now()
    out = args.out or os.path.join(HERE, "results", stamp.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    meta = {"date": stamp.strftime("%Y-%m-%d %H:%M"), "machine": machine(), "load_before": os.getloadavg(),
            "command": " ".join(["bench/compare.py"] + argv), "runs": args.runs, "warmup": args.warmup,
            "pause_ms": args.pause_ms, "threads": args.threads, "runtimes": args.runtimes}
    results = {}
    for name in models:
        results[name] = {}
        for t in args.threads:
            print(f"{name}, {t} thread(s) ...", file=sys.stderr, flush=True)
            results[name][str(t)] = measure(name, args.runtimes, t, args)
    meta["load_after"] = os.getloadavg()
    text = report(results, meta, args)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    chart(results, args, os.path.join(out, "latency.png"))
    print(text)
    print(f"wrote {out}/results.md, results.json, latency.png", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
