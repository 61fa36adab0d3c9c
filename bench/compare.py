#!/usr/bin/env python3
"""nee side by side with ONNX Runtime, OpenVINO and tract on the benchmark zoo.

  PYTHONPATH=build/python .venv/bin/python bench/compare.py                       # every built zoo model
  PYTHONPATH=build/python .venv/bin/python bench/compare.py resnet50_b1 bert_base \\
      --threads 1 2 --runs 20 --warmup 3 --runtimes nee ort openvino tract --out /tmp/bench

Models come from bench/zoo.py (build them first; --zoo-dir or $NEE_ZOO_DIR picks the cache);
a path to any .onnx file also works (seeded random inputs, no framework reference).
Any nee build works: the harness imports `nee` from PYTHONPATH. For each model and thread count:

- latency: every runtime holds a session in this one process, on the same inputs; after
  --warmup runs each, --runs rounds alternate the runtimes (one timed run each per round, the
  starting runtime rotating, --pause-ms of idle before each run so no runtime's spinning
  threads eat into the next one's time). Median and p90 per runtime, and nee's ratio to each
  peer (nee/peer > 1 means nee is slower), all from the same rounds, so machine noise hits all.
- creation and memory: a fresh interpreter per runtime imports the runtime's Python module,
  creates the session (that span is "creation"), runs the model once and reads its own
  VmHWM from /proc/self/status (peak RSS of that process alone); --fresh-runs such processes
  per runtime, alternating, and the medians reported.
- agreement: max abs and max relative difference (max |a - b| / max |b|, over each output,
  worst output) of every runtime's outputs vs ONNX Runtime's and vs the exporting
  framework's stored outputs.

A runtime that fails on a model (load or run) is reported with the first line of its error.
Each runtime's fresh process runs first: one that fails, crashes, outlives --timeout or whose
single run takes over --max-run-s is reported and not timed in the harness's own process.
Writes results.md, results.json and latency.png to --out (default bench/results/<date-time>);
--doc docs/performance.md also puts the tables in that file's "Zoo" section (other sections kept).
Settings per thread count T: nee and ORT intra_op_num_threads = T (ORT sequential, one
inter-op thread, default graph optimizations); OpenVINO CPU with NUM_STREAMS 1,
INFERENCE_NUM_THREADS T, INFERENCE_PRECISION_HINT f32 and no core pinning, set explicitly
so that PERFORMANCE_HINT decides nothing; tract as its Python API gives it, which has no
thread setting: it always runs single-threaded.
"""
import argparse
import datetime
import gc
import json
import os
import platform
import re
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
# Each opens a model for a thread count (and the inputs it will get) and returns (run, info):
# run(feed) -> [outputs in graph order] as numpy arrays. Each imports its runtime lazily, so
# that a fresh process can time import + creation together.

def open_nee(path, threads, inputs):
    import nee
    so = nee.SessionOptions()
    so.intra_op_num_threads = threads
    sess = nee.InferenceSession(path, so)
    return (lambda feed: sess.run(None, feed)), {"version": nee.__version__, "threads": threads}


def open_ort(path, threads, inputs):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return (lambda feed: sess.run(None, feed)), {"version": ort.__version__, "threads": threads}


def open_openvino(path, threads, inputs):
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


TRACT_TYPES = {"f4": "f32", "f8": "f64", "f2": "f16", "i8": "i64", "i4": "i32", "i1": "i8", "u1": "u8",
               "b1": "bool"}


def open_tract(path, threads, inputs):
    """Input facts (shape and type) are set from the inputs, as tract needs for free dimensions."""
    import tract
    model = tract.onnx().load(path)
    names = [model.input_name(i) for i in range(model.input_count())]
    for i, n in enumerate(names):
        x = inputs[n]
        model.set_input_fact(i, ",".join([str(d) for d in x.shape] + [TRACT_TYPES[x.dtype.str[1:]]]))
    runnable = model.into_model().into_runnable()

    def run(feed):
        return [t.to_numpy() for t in runnable.run([feed[n] for n in names])]
    return run, {"version": tract.version(), "threads": 1, "note": "single-threaded (no thread setting)"}


OPENERS = {"nee": open_nee, "ort": open_ort, "openvino": open_openvino, "tract": open_tract}
MODULES = {"nee": "nee", "ort": "onnxruntime", "openvino": "openvino", "tract": "tract"}


def unimportable(runtimes):
    """The runtimes whose Python module this interpreter cannot import, with the reason. Checked before
    measuring: a run of every model takes half an hour, and one whose runtime is missing reports nothing
    but "fail" for it (the fresh processes inherit this interpreter's PYTHONPATH)."""
    missing = {}
    for rt in runtimes:
        try:
            __import__(MODULES[rt])
        except Exception as e:  # ImportError, or a module that fails while loading
            missing[rt] = first_line(e)
    return missing


LOCATION_LINE = re.compile(r"^(Exception from \S+:\d+:|Check '.*' failed at \S+:)$")


def first_line(error):
    """The first informative line of an error: past OpenVINO's source-location lines, its
    conversion summary when there is one, and tract's 'Caused by' line."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    if "Summary:" in lines:
        lines = [" ".join(lines[lines.index("Summary:") + 1:])]
    lines = [ln for ln in lines if not LOCATION_LINE.match(ln)] or [""]
    text = lines[0]
    if "Caused by:" in lines and lines.index("Caused by:") + 1 < len(lines):
        text += " / " + lines[lines.index("Caused by:") + 1]
    return f"{type(error).__name__}: {text}"[:300]


# ---------------------------------------------------------------- models

def random_feed(path):
    """Seeded inputs for a model outside the zoo, shaped from its graph (free dims become 1);
    integer inputs get 0/1 so that they are valid indices and masks."""
    import onnxruntime as ort
    rng, feed = np.random.default_rng(1), {}
    types = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
             "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_}
    for arg in ort.InferenceSession(path, providers=["CPUExecutionProvider"]).get_inputs():
        shape, dtype = [d if isinstance(d, int) else 1 for d in arg.shape], types[arg.type]
        values = rng.standard_normal(shape) if np.dtype(dtype).kind == "f" else rng.integers(0, 2, shape)
        feed[arg.name] = values.astype(dtype)
    return feed


def load_model(model, zoo_dir):
    """(onnx path, inputs, reference outputs or None) for a zoo name or any .onnx file."""
    if model.endswith(".onnx"):
        return model, random_feed(model), None
    path, inputs, reference, _ = zoo.load(model, zoo_dir)
    return path, inputs, list(reference.values())


def label(model):
    return os.path.basename(model)[:-5] if model.endswith(".onnx") else model


# ---------------------------------------------------------------- fresh process: creation and RSS

def vm_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def read_inputs(npz):
    with np.load(npz) as z:
        return {k[3:]: z[k] for k in z.files if k.startswith("in:")}


def child_main(runtime, path, npz, threads):
    """Runs in a fresh interpreter: import + create (timed), one run, own peak RSS."""
    inputs = read_inputs(npz)
    base_kb = vm_kb("VmHWM")
    start = time.perf_counter()
    try:
        run, _ = OPENERS[runtime](path, threads, inputs)
        created = time.perf_counter() - start
        run(inputs)
        first_result = time.perf_counter() - start
        result = {"create_s": created, "first_run_s": first_result - created, "first_result_s": first_result,
                  "rss_peak_mb": vm_kb("VmHWM") / 1024, "rss_base_mb": base_kb / 1024}
    except Exception as e:  # reported by the parent
        result = {"error": first_line(e), "error_text": str(e)[:4000]}
    print("RESULT " + json.dumps(result))


def read_through(path):
    """Reads the model file once, so that it is in the page cache: the runtimes' fresh processes run one
    after another and the first would otherwise pay the disk read alone (this VM's kernel reclaims cold
    page cache: GPT-2's creation read 6.65 s for nee, first, and 1.77 s for ORT; 0.50 s and 1.63 s with the
    file cached). External data files are not read ahead."""
    try:
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass
    except OSError:
        pass


def fresh_process(runtime, path, npz, threads, timeout):
    """Creation time and peak RSS of `runtime` on the model, measured in a new interpreter, the model's
    file in the page cache first."""
    read_through(path)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", runtime, path, "--inputs", npz,
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


def fresh_median(samples):
    """One fresh-process record from several: each field's median (creation time is one sample of a noisy
    span, a page-cache or scheduler hiccup can double it), the samples' creation times kept beside."""
    merged = {key: float(np.median([s[key] for s in samples])) for key in samples[0]}
    merged["create_samples_s"] = [s["create_s"] for s in samples]
    return merged


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

def open_all(runtimes, path, threads, inputs, record):
    sessions = {}
    for rt in runtimes:
        try:
            sessions[rt], record[rt]["info"] = OPENERS[rt](path, threads, inputs)
        except Exception as e:
            record[rt].update(error="load: " + first_line(e), error_text=str(e)[:4000])
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
                record[rt].update(error="run: " + first_line(e), error_text=str(e)[:4000])
                del sessions[rt]
    return outputs


def alternate(sessions, feed, runs, pause):
    """`runs` rounds, one timed run per runtime each, the starting runtime rotating."""
    order = list(sessions)
    times = {rt: [] for rt in order}
    gc.collect()
    gc.disable()  # no collector pauses inside a timed run
    try:
        for i in range(runs):
            for rt in order[i % len(order):] + order[:i % len(order)]:
                times[rt].append(timed(sessions[rt], feed, pause)[0])
    finally:
        gc.enable()
    return times


def percentile(values, q):
    return float(np.percentile(np.asarray(values), q))


def measure_latency(model, runtimes, threads, args, record):
    path, inputs, expected = model
    sessions = open_all(runtimes, path, threads, inputs, record)
    pause = args.pause_ms / 1000.0
    outputs = warm_up(sessions, inputs, args.warmup, record, pause)
    if not sessions:
        return
    times = alternate(sessions, inputs, args.runs, pause) if sessions else {}
    for rt, ts in times.items():
        record[rt].update(median_ms=1e3 * statistics.median(ts), p90_ms=1e3 * percentile(ts, 90),
                          times_ms=[round(1e3 * t, 3) for t in ts])
        if expected is not None:
            record[rt]["vs_framework"] = differences(outputs[rt], expected)
        if "ort" in outputs:
            record[rt]["vs_ort"] = differences(outputs[rt], outputs["ort"])
    sessions.clear()
    gc.collect()


def gate(record, max_run_s):
    """Whether a runtime is timed in this process: not when its fresh process failed (it would
    fail here too, or crash the harness) or its one run took longer than --max-run-s."""
    fresh = record.get("fresh", {})
    if "error" in fresh:
        return False
    if fresh.get("first_run_s", 0) > max_run_s:
        record["error"] = f"too slow: one run took {fresh['first_run_s']:.0f} s (> --max-run-s {max_run_s:g})"
        return False
    return True


def measure(model, npz, runtimes, threads, args, failed):
    """Everything for one model at one thread count: {runtime: record}. `failed` holds the
    fresh-process failures at an earlier thread count; those runtimes are not tried again."""
    record = {rt: {} for rt in runtimes}
    if not args.no_fresh:
        samples = {rt: [] for rt in runtimes}
        for _ in range(max(1, args.fresh_runs)):  # the runtimes alternate, as the timed runs do
            for rt in runtimes:
                if rt in failed:
                    continue
                samples[rt].append(fresh_process(rt, model[0], npz, threads, args.timeout))
                if "error" in samples[rt][-1]:
                    failed[rt] = samples[rt][-1]
        for rt in runtimes:
            record[rt]["fresh"] = failed.get(rt) or fresh_median(samples[rt])
    timed_here = [rt for rt in runtimes if gate(record[rt], args.max_run_s)]
    measure_latency(model, timed_here, threads, args, record)
    nee = record.get("nee", {}).get("median_ms")
    for rt in runtimes:
        peer = record[rt].get("median_ms")
        if nee and peer and rt != "nee":
            record[rt]["nee_ratio"] = nee / peer
    return record


def measure_model(name, args):
    """{threads: measure(...)} for a zoo name or .onnx path; the inputs go to the fresh
    processes as an .npz (the zoo's own, or one written next to the results)."""
    model = load_model(name, args.zoo_dir)
    npz = zoo.paths(name, args.zoo_dir)["npz"] if not name.endswith(".onnx") else \
        os.path.join(args.out, label(name) + ".inputs.npz")
    if name.endswith(".onnx"):
        np.savez(npz, **{"in:" + k: v for k, v in model[1].items()})
    per_thread, failed = {}, {}
    for t in args.threads:
        print(f"{label(name)}, {t} thread(s) ...", file=sys.stderr, flush=True)
        per_thread[str(t)] = measure(model, npz, args.runtimes, t, args, failed)
    return per_thread


# ---------------------------------------------------------------- report

def machine():
    model = platform.processor() or "?"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except Exception:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(), "simd": simd_level()}


def simd_level():
    """The widest vector level the kernels of nee (and of the peers) can use here: the same model name ("AMD
    EPYC") covers guests with and without AVX-512, and the ratios differ between them."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = set(next(line for line in f if line.startswith("flags")).split(":", 1)[1].split())
    except (OSError, StopIteration):
        return "?"
    if "avx512f" in flags:
        return "AVX-512" + (" with VNNI" if "avx512_vnni" in flags else "")
    if "avx2" in flags:
        return "AVX2" + (" with AVX-VNNI" if "avx_vnni" in flags else "") + (" + FMA" if "fma" in flags else "")
    return "no AVX2"


def core_round_trip_ns():
    """The inter-core round trip of a cache line (bench/core_latency.cc), or None where it is not built.
    On this VM it tells whether the host ran the two vCPUs close together (~100 ns) or apart (~450 ns),
    which moves two-thread timings by 5-15%."""
    tool = os.path.join(HERE, "..", "build", "bin", "nee_core_latency")
    if not os.path.exists(tool):
        return None
    try:
        out = subprocess.run([tool], capture_output=True, text=True, timeout=30).stdout.split()
        return float(out[1]) if len(out) == 2 and out[0] == "round_trip_ns" else None
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def nee_build():
    """Where the nee module comes from and, when it sits in a git checkout, that checkout's commit."""
    import importlib.util
    spec = importlib.util.find_spec("nee")
    if spec is None or not spec.origin:
        return "not found"
    folder = os.path.dirname(spec.origin)
    git = subprocess.run(["git", "-C", folder, "log", "-1", "--format=%h %s"], capture_output=True, text=True)
    commit = f" (source {git.stdout.strip()[:70]})" if git.returncode == 0 and git.stdout.strip() else ""
    return folder + commit


def fmt_ms(r):
    if "median_ms" not in r:
        err = r.get("error") or r.get("fresh", {}).get("error")
        return "–" if not err else ("slow" if "too slow" in err or "timed out" in err else "fail")
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
    if len(results) > 1:
        rows.append(["geometric mean"] + [""] * len(runtimes)
                    + [geomean_ratio(results, rt, threads) for rt in peers])
    return markdown(head, rows)


def geomean_ratio(results, runtime, threads):
    recs = [r[str(threads)][runtime] for r in results.values()]
    ratios = [rec["nee_ratio"] for rec in recs if "nee_ratio" in rec]
    return f"{np.exp(np.mean(np.log(ratios))):.2f} ({len(ratios)})" if ratios else "–"


def fresh_table(results, runtimes, threads):
    """Creation and first result in milliseconds (two decimals of a second hid ratios: 0.04 vs 0.07 s read as
    0.57 for 35 vs 74 ms), nee/ORT of the unrounded times, and peak RSS. "First result" is creation plus the
    first run: nee packs its constant weights in the first run where ORT packs them while creating the
    session, so creation alone flatters nee; the time until a caller has its first output compares both."""
    ratio = "nee" in runtimes and "ort" in runtimes
    head = (["model"] + [f"{LABELS[rt]} create ms" for rt in runtimes] + (["nee/ORT create"] if ratio else [])
            + [f"{LABELS[rt]} first result ms" for rt in runtimes] + (["nee/ORT first result"] if ratio else [])
            + [f"{LABELS[rt]} RSS MB" for rt in runtimes])

    def first_result(f):  # older results.json files lack first_result_s
        if "first_result_s" in f:
            return f["first_result_s"]
        return f["create_s"] + f["first_run_s"] if "create_s" in f and "first_run_s" in f else None

    def cell(f, seconds):
        return f"{1e3 * seconds:.0f}" if seconds is not None else ("fail" if f else "–")

    rows = []
    for name, per_thread in results.items():
        fr = [per_thread[str(threads)][rt].get("fresh", {}) for rt in runtimes]
        nee, ort = (per_thread[str(threads)].get(rt, {}).get("fresh", {}) for rt in ("nee", "ort"))
        row = [name] + [cell(f, f.get("create_s")) for f in fr]
        if ratio:
            row.append(f"{nee['create_s'] / ort['create_s']:.2f}" if "create_s" in nee and "create_s" in ort
                       else "–")
        row += [cell(f, first_result(f)) for f in fr]
        if ratio:
            a, b = first_result(nee), first_result(ort)
            row.append(f"{a / b:.2f}" if a is not None and b else "–")
        rows.append(row + [f"{f['rss_peak_mb']:.0f}" if "rss_peak_mb" in f else ("fail" if f else "–") for f in fr])
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
    """One line per (runtime, model) that failed anywhere: the in-process error, else the fresh process's."""
    lines = []
    for name, per_thread in results.items():
        for rt in next(iter(per_thread.values())):
            recs = [r[rt] for r in per_thread.values()]
            errs = [x["error"] for x in recs if "error" in x] + \
                   ["fresh process: " + x["fresh"]["error"] for x in recs if "error" in x.get("fresh", {})]
            if errs:
                lines.append(f"- {LABELS[rt]} on {name}: {errs[0]}")
    return lines


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
    simd = meta["machine"].get("simd", "?")
    head = [f"Machine: {meta['machine']['cpu']} ({simd}), {meta['machine']['cores']} cores; load average "
            f"{meta['load_before'][0]:.1f} before, {meta['load_after'][0]:.1f} after. Date: {meta['date']}.",
            f"Runtimes: {versions(results)}. nee and ORT: intra_op_num_threads = T; OpenVINO: CPU, "
            "1 stream of T threads, f32, no pinning; tract: single-threaded (no thread setting)."]
    trips = meta.get("core_round_trip_ns") or []
    if any(t is not None for t in trips):
        shown = ", ".join("?" if t is None else f"{t:.0f} ns" for t in trips)
        head.append(f"Inter-core round trip of a cache line (build/bin/nee_core_latency) before and after: {shown} "
                    "(this VM: ~100 ns with the two vCPUs close together, ~450 ns apart, which makes two-thread "
                    "times 5-15% slower).")
    if meta["load_before"][0] > meta["machine"]["cores"]:
        head.append("The machine was busy (load average above its core count): absolute times are noisy; "
                    "the ratios, taken from the same alternating rounds, less so.")
    if meta.get("nee_build"):
        head.append(f"nee: {meta['nee_build']}")
    head.append(f"Command: `{meta['command']}`")
    head.append(f"Latency: median (p90) of {args.runs} alternating runs after {args.warmup} warm-up runs, "
                "milliseconds; nee/X > 1 means nee is slower. tract is single-threaded at any setting. "
                "fail/slow: see the failures below. Geometric mean over the models both ran (how many).")
    out += ["- " + line for line in head]
    if meta.get("note"):
        out += ["", meta["note"]]
    for t in args.threads:
        out += ["", f"**{t} thread{'s' if t > 1 else ''}**", "", latency_table(results, runtimes, t)]
    if not args.no_fresh:
        for t in args.threads:
            n = meta.get("fresh_runs", 1)
            each = f"medians of {n} fresh processes per runtime" if n > 1 else "one fresh process per runtime"
            out += ["", f"Session creation (including the runtime module's import), first result (creation plus the "
                    f"first run) and peak RSS of a fresh process that loads and runs the model once ({each}), "
                    f"{t} thread{'s' if t > 1 else ''}:", "",
                    fresh_table(results, runtimes, t)]
    t = args.threads[0]
    out += ["", f"Agreement, max abs / max relative difference ({t} thread{'s' if t > 1 else ''}; "
            "framework = the exporting framework's output for the same input):", "",
            agreement_table(results, runtimes, t)]
    fails = failures(results)
    if fails:
        out += ["", "Failures (first line of the error):", ""] + fails
    return "\n".join(out) + "\n"


DOC_HEADING = "## Zoo: nee vs ONNX Runtime, OpenVINO, tract"


def update_doc(path, text):
    """Replaces (or appends) this harness's section of a markdown file, leaving the others."""
    old = open(path).read() if os.path.exists(path) else "# Performance\n"
    lines = old.rstrip("\n").split("\n")
    start = next((i for i, ln in enumerate(lines) if ln.strip() == DOC_HEADING), len(lines))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    intro = ("Measured with `bench/compare.py` on the models of `bench/zoo.py` (see their docstrings; "
             "`bench/setup.sh` installs the peers). `--doc docs/performance.md` rewrites this section; "
             "`--render results.json --doc docs/performance.md` re-renders a saved run.")
    section = [DOC_HEADING, "", intro, "", text.rstrip("\n")]
    tail = lines[end:]
    new = lines[:start] + ([""] if start and lines[start - 1] else []) + section + ([""] + tail if tail else [])
    with open(path, "w") as f:
        f.write("\n".join(new) + "\n")


def chart(results, args, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401 (matplotlib.ticker below)
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
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
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
    ap.add_argument("models", nargs="*", help="zoo model names or .onnx files (default: every built zoo model)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--runs", type=int, default=20, help="timed runs per runtime (alternating)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--runtimes", nargs="+", default=RUNTIMES, choices=RUNTIMES)
    # ORT's idle workers spin on for 20-100 ms after a run (measured with MobileNetV2 at 2 threads:
    # the next runtime's run took 1.6x longer after a 20 ms pause than after 100 ms).
    ap.add_argument("--pause-ms", type=float, default=100.0, help="idle time before each timed run")
    ap.add_argument("--no-fresh", action="store_true", help="skip the fresh-process creation/RSS measurement")
    # Five, not three: forest500's creation ratio (~0.1 s for nee) read 0.56 over three processes and 0.41 over
    # nine minutes later (session 38), too close to the 0.5 target for three samples.
    ap.add_argument("--fresh-runs", type=int, default=5,
                    help="fresh processes per runtime (alternating); creation and RSS are their medians")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per fresh process")
    ap.add_argument("--max-run-s", type=float, default=30.0,
                    help="a runtime whose one run (in its fresh process) takes longer is not timed")
    ap.add_argument("--zoo-dir", default=zoo.default_dir())
    ap.add_argument("--out", default=None, help="output folder (default bench/results/<date-time>)")
    ap.add_argument("--doc", help="also write the tables into this markdown file's zoo section")
    ap.add_argument("--note", help="a paragraph to put under the report's header (e.g. what the numbers say)")
    ap.add_argument("--render", metavar="RESULTS_JSON", help="only re-render the report of an earlier run")
    ap.add_argument("--child", metavar="RUNTIME", help=argparse.SUPPRESS)
    ap.add_argument("--inputs", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def command_line(argv):
    env = f"PYTHONPATH={os.environ['PYTHONPATH']} " if os.environ.get("PYTHONPATH") else ""
    return env + " ".join([sys.executable, "bench/compare.py"] + argv)


def render(args):
    """Re-renders the report of an earlier run's results.json (and its --doc section)."""
    with open(args.render) as f:
        saved = json.load(f)
    meta = saved["meta"]
    if args.note:
        meta["note"] = args.note
    for key in ("runs", "warmup", "threads", "runtimes"):
        setattr(args, key, meta[key])
    args.no_fresh = not any("fresh" in rec for r in saved["results"].values() for t in r.values()
                            for rec in t.values())
    text = report(saved["results"], meta, args)
    if args.doc:
        update_doc(args.doc, text)
    print(text)
    return 0


def main(argv):
    args = parse_args(argv)
    if args.child:
        child_main(args.child, args.models[0], args.inputs, args.threads[0])
        return 0
    if args.render:
        return render(args)
    models = args.models or [n for n in zoo.MODELS if zoo.is_built(n, args.zoo_dir)]
    missing = [n for n in models if not (n.endswith(".onnx") and os.path.exists(n))
               and not zoo.is_built(n, args.zoo_dir)]
    if missing or not models:
        print(f"not built: {missing or 'any model'}; run bench/zoo.py first", file=sys.stderr)
        return 2
    missing_runtimes = unimportable(args.runtimes)
    if missing_runtimes:
        for rt, why in missing_runtimes.items():
            print(f"{LABELS[rt]} cannot be imported: {why}", file=sys.stderr)
        print("nee: PYTHONPATH=build/python (or an installed wheel); the peers: bash bench/setup.sh; "
              "or leave a runtime out with --runtimes", file=sys.stderr)
        return 2
    stamp = datetime.datetime.now()
    out = args.out = args.out or os.path.join(HERE, "results", stamp.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    meta = {"date": stamp.strftime("%Y-%m-%d %H:%M"), "machine": machine(), "load_before": os.getloadavg(),
            "command": command_line(argv), "runs": args.runs, "warmup": args.warmup, "fresh_runs": args.fresh_runs,
            "pause_ms": args.pause_ms, "note": args.note, "nee_build": nee_build(), "threads": args.threads,
            "runtimes": args.runtimes, "core_round_trip_ns": [core_round_trip_ns()]}
    results = {}
    for name in models:
        results[label(name)] = measure_model(name, args)
    meta["load_after"] = os.getloadavg()
    meta["core_round_trip_ns"].append(core_round_trip_ns())
    text = report(results, meta, args)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    chart(results, args, os.path.join(out, "latency.png"))
    if args.doc:
        update_doc(args.doc, text)
    print(text)
    print(f"wrote {out}/results.md, results.json, latency.png", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
