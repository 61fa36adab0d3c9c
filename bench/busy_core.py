#!/usr/bin/env python3
"""Two threads against one, quiet and beside a busy core (issue 7).

  PYTHONPATH=build/python .venv/bin/python bench/busy_core.py                  # all eight zoo models
  PYTHONPATH=build/python .venv/bin/python bench/busy_core.py speech_lstm forest500 --runs 20 --ort
  PYTHONPATH=build/python .venv/bin/python bench/busy_core.py --base /tmp/busy-base-py   # A/B two builds

For each model (~/.cache/nee-zoo/NAME.onnx, inputs "in:NAME" in NAME.npz) each runtime's process
holds a 1-thread and a 2-thread session, and this one alternates all their runs (the starting
session rotating each round). Condition "quiet" runs them as they are; "busy" first starts --spinners
processes that spin in pure Python (`while True: pass`) until the condition ends. Prints the
median latency of every session and its 2t/1t ratio per condition, and the 1-minute load average
at the end of each model's conditions: on a shared machine other work can make "quiet" busy and
"busy" overloaded (1t busy much slower than 1t quiet is the sign), which moves the ratios. --base DIR adds a second
nee build (DIR holds its `nee` package) as runtime "base", so old and new are measured in the
same rounds, and a second table of nee / base per round (the median of the rounds' ratios, steadier
than the ratio of the medians on a loaded machine); --ort adds ONNX Runtime.
"""
import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import time

import numpy as np

MODELS = ["resnet50_b1", "mobilenetv2_b1", "bert_base", "gpt2", "vit_b16_b1", "yolo_b1", "speech_lstm", "forest500"]


def spin():
    while True:
        pass


def open_session(runtime, path, threads):
    """run(feed) for a `runtime` ("nee" or "ort") session of the model at `threads` threads."""
    if runtime == "ort":
        import onnxruntime as rt
        options = rt.SessionOptions()
        options.inter_op_num_threads = 1
        options.execution_mode = rt.ExecutionMode.ORT_SEQUENTIAL
        providers = {"providers": ["CPUExecutionProvider"]}
    else:
        import nee as rt
        options = rt.SessionOptions()
        providers = {}
    options.intra_op_num_threads = threads
    session = rt.InferenceSession(path, options, **providers)
    return lambda feed: session.run(None, feed)


def serve(runtime, path, feed):
    """Child process: holds a 1- and a 2-thread session; runs one per line of stdin ("1" or
    "2") and answers with its time in ms."""
    sessions = {t: open_session(runtime, path, t) for t in (1, 2)}
    print("ready", flush=True)
    for line in sys.stdin:
        run = sessions[int(line)]
        start = time.perf_counter()
        run(feed)
        print((time.perf_counter() - start) * 1e3, flush=True)


class Server:
    """A runtime in its own process (two nee builds cannot share one), driven over pipes."""

    def __init__(self, runtime, python_path, model, zoo_dir):
        env = dict(os.environ)
        if python_path:
            env["PYTHONPATH"] = python_path
        self.process = subprocess.Popen(
            [sys.executable, __file__, model, "--zoo-dir", zoo_dir, "--serve", runtime], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{runtime} ({python_path or 'PYTHONPATH'}) failed to open {model}")

    def __call__(self, threads):
        self.process.stdin.write(f"{threads}\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def close(self):
        self.process.stdin.close()
        self.process.wait()


def measure(servers, runs, warmup):
    """Every run's ms per (runtime, threads) over `runs` rounds that alternate them all."""
    keys = [(name, t) for name in servers for t in (1, 2)]
    for name, t in keys:
        for _ in range(warmup):
            servers[name](t)
    times = {key: [] for key in keys}
    for r in range(runs):
        for i in range(len(keys)):
            name, t = keys[(r + i) % len(keys)]
            times[(name, t)].append(servers[name](t))
    return times


def paired_ratio(a, b):
    """Median over rounds of a[i] / b[i]: runs of one round are adjacent in time, so their ratio
    cancels most of a shared machine's drifting load, where the ratio of two medians does not."""
    return statistics.median(x / y for x, y in zip(a, b))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", default=MODELS)
    parser.add_argument("--zoo-dir", default=os.path.expanduser("~/.cache/nee-zoo"))
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--spinners", type=int, default=1, help="busy-loop processes in the busy condition")
    parser.add_argument("--conditions", nargs="+", default=["quiet", "busy"], choices=["quiet", "busy"])
    parser.add_argument("--base", help="directory holding a second nee build's `nee` package")
    parser.add_argument("--ort", action="store_true", help="also ONNX Runtime")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        data = np.load(os.path.join(args.zoo_dir, args.models[0] + ".npz"))
        feed = {k[3:]: data[k] for k in data.files if k.startswith("in:")}
        serve(args.serve, os.path.join(args.zoo_dir, args.models[0] + ".onnx"), feed)
        return

    runtimes = {"nee": ("nee", None)}
    if args.base:
        runtimes["base"] = ("nee", args.base)
    if args.ort:
        runtimes["ort"] = ("ort", None)
    print("| model | runtime | " + " | ".join(f"{c} 1t | {c} 2t | {c} 2t/1t" for c in args.conditions) +
          " | " + " | ".join(f"{c} load" for c in args.conditions) + " |")
    print("|---|---|" + "--:|" * 4 * len(args.conditions), flush=True)
    paired_lines = []
    for model in args.models:
        servers = {name: Server(runtime, python_path, model, args.zoo_dir)
                   for name, (runtime, python_path) in runtimes.items()}
        results, loads = {}, {}
        for condition in args.conditions:
            spinners = []
            if condition == "busy":
                spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.spinners)]
                for p in spinners:
                    p.start()
                time.sleep(0.2)
            try:
                results[condition] = measure(servers, args.runs, args.warmup)
                loads[condition] = os.getloadavg()[0]
            finally:
                for p in spinners:
                    p.terminate()
                    p.join()
        for name in servers:
            cells = []
            for condition in args.conditions:
                one, two = (statistics.median(results[condition][(name, t)]) for t in (1, 2))
                cells += [f"{one:.2f}", f"{two:.2f}", f"{two / one:.2f}"]
            cells += [f"{loads[condition]:.1f}" for condition in args.conditions]
            print(f"| {model} | {name} | " + " | ".join(cells) + " |", flush=True)
        if "base" in servers:
            cells = []
            for condition in args.conditions:
                times = results[condition]
                cells += [f"{paired_ratio(times[('nee', t)], times[('base', t)]):.3f}" for t in (1, 2)]
            paired_lines.append(f"| {model} | " + " | ".join(cells) + " |")
        for server in servers.values():
            server.close()
    if paired_lines:
        print("\nnee / base, the median of each round's ratio:\n")
        print("| model | " + " | ".join(f"{c} 1t | {c} 2t" for c in args.conditions) + " |")
        print("|---|" + "--:|" * 2 * len(args.conditions))
        print("\n".join(paired_lines), flush=True)


if __name__ == "__main__":
    main()
