#!/usr/bin/env python3
"""How much a cold cache costs nee and ONNX Runtime on one zoo model, side by side.

  PYTHONPATH=build/python .venv/bin/python bench/cold_cache.py mobilenetv2_b1 --threads 1 --rounds 30

bench/compare.py alternates runtimes in one process, so each of nee's timed runs follows ORT's and
OpenVINO's and finds the caches holding their data, not its own. This script separates that effect:
one process holds a nee and an ORT session of the model (same inputs, same thread count) and times
each runtime's run in three conditions, the runtimes' order alternating every round:

- hot: right after an untimed run of the same session (its weights and buffers cached);
- sleep: after 100 ms asleep (what compare.py's pause does on an otherwise idle machine);
- evict: after streaming 64 MB through the caches (another runtime's run, roughly).

It prints each condition's median per runtime and nee/ORT. Models come from bench/zoo.py's cache
(--zoo-dir or $NEE_ZOO_DIR, default ~/.cache/nee-zoo), inputs from the model's .npz.
"""
import argparse
import os
import statistics
import time

import numpy as np

EVICT_FLOATS = 16 << 20  # 64 MB of float32: more than this machine's L2 and L3 hold for one core


def open_sessions(path, threads):
    import nee
    import onnxruntime as ort

    options = nee.SessionOptions()
    options.intra_op_num_threads = threads
    ort_options = ort.SessionOptions()
    ort_options.intra_op_num_threads = threads
    ort_options.inter_op_num_threads = 1
    ort_options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return {"nee": nee.InferenceSession(path, options),
            "ort": ort.InferenceSession(path, ort_options, providers=["CPUExecutionProvider"])}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="zoo model name (bench/zoo.py)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--zoo-dir", default=os.environ.get("NEE_ZOO_DIR", os.path.expanduser("~/.cache/nee-zoo")))
    args = parser.parse_args()

    path = os.path.join(args.zoo_dir, args.model + ".onnx")
    data = np.load(os.path.join(args.zoo_dir, args.model + ".npz"))
    sessions = open_sessions(path, args.threads)
    feed = {i.name: data["in:" + i.name] for i in sessions["nee"].get_inputs()}
    for session in sessions.values():
        for _ in range(3):
            session.run(None, feed)

    stream = np.ones(EVICT_FLOATS, np.float32)

    def evict():
        stream.__iadd__(1.0)  # reads and writes every line
        time.sleep(0.05)      # as long as compare.py's other runtimes' turns, roughly

    before = {"hot": None, "sleep": lambda: time.sleep(0.1), "evict": evict}
    times = {(condition, name): [] for condition in before for name in sessions}
    for r in range(args.rounds):
        order = list(sessions) if r % 2 == 0 else list(reversed(list(sessions)))
        for condition, prepare in before.items():
            for name in order:
                session = sessions[name]
                if prepare is None:
                    session.run(None, feed)
                else:
                    prepare()
                start = time.perf_counter()
                session.run(None, feed)
                times[(condition, name)].append((time.perf_counter() - start) * 1e3)

    print(f"{args.model}, {args.threads} thread(s), {args.rounds} rounds: median ms")
    for condition in before:
        a, b = (statistics.median(times[(condition, name)]) for name in ("nee", "ort"))
        print(f"  {condition:6s} nee {a:8.2f}  ORT {b:8.2f}  nee/ORT {a / b:.3f}")


if __name__ == "__main__":
    main()
