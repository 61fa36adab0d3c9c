"""Per-run overhead of a sandboxed session (SessionOptions.sandbox) against the
same session in this process: creation time and the median of N runs of each,
alternating, on 2 threads. Numbers go in docs/SECURITY.md ("Sandboxed sessions").

    PYTHONPATH=build/python .venv/bin/python bench/sandbox_overhead.py [MODEL.onnx ...]

Without arguments: a small MLP (64-256-256-10, made here), the torch
mobilenet_v3_small test model (1x3x64x64) and, if bench/zoo.py has fetched it,
mobilenetv2_b1 (1x3x224x224)."""
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import nee

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
RUNS = int(os.environ.get("RUNS", "50"))


def mlp(path):
    rng = np.random.default_rng(0)
    sizes = [64, 256, 256, 10]
    nodes, inits, x = [], [], "x"
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        inits += [numpy_helper.from_array(rng.standard_normal((a, b), np.float32) * 0.1, f"w{i}"),
                  numpy_helper.from_array(np.zeros(b, np.float32), f"b{i}")]
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [f"h{i}"]))
        x = f"h{i}"
        if i < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [x], [f"r{i}"]))
            x = f"r{i}"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def feed_for(sess):
    rng = np.random.default_rng(1)
    feed = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        feed[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feed


def options(sandbox):
    so = nee.SessionOptions()
    so.intra_op_num_threads = 2
    so.sandbox = sandbox
    # SPIN=0: idle pool workers sleep at once, so that the session not being
    # measured (both are alive, runs alternate) takes no core from the other.
    so.add_session_config_entry("session.intra_op.allow_spinning", os.environ.get("SPIN", "1"))
    return so


def measure(path):
    created = {False: [], True: []}
    for _ in range(5):
        for box in (False, True):
            t = time.perf_counter()
            nee.InferenceSession(path, options(box))
            created[box].append((time.perf_counter() - t) * 1e3)
    sessions = {box: nee.InferenceSession(path, options(box)) for box in (False, True)}
    feed = feed_for(sessions[False])
    times = {False: [], True: []}
    for box in (False, True):
        for _ in range(3):
            sessions[box].run(None, feed)  # warm up
    for _ in range(RUNS):
        for box in (False, True):
            t = time.perf_counter()
            sessions[box].run(None, feed)
            times[box].append((time.perf_counter() - t) * 1e3)
    out = [o.tobytes() for o in sessions[False].run(None, feed)] == [o.tobytes() for o in sessions[True].run(None, feed)]
    med = {k: statistics.median(v) for k, v in times.items()}
    cre = {k: statistics.median(v) for k, v in created.items()}
    in_bytes = sum(v.nbytes for v in feed.values())
    print(f"| {os.path.basename(os.path.dirname(path)) + '/' if 'tests' in path else ''}{os.path.basename(path)} "
          f"({in_bytes} input bytes) | {cre[False]:.1f} ms | {cre[True]:.1f} ms | {med[False]:.3f} ms | "
          f"{med[True]:.3f} ms | {med[True] - med[False]:+.3f} ms | {'yes' if out else 'NO'} |", flush=True)


def main():
    paths = sys.argv[1:]
    if not paths:
        tmp = tempfile.mkdtemp()
        paths = [mlp(os.path.join(tmp, "mlp_64_256_256_10.onnx")),
                 os.path.join(ROOT, "tests", "models", "torch", "mobilenet_v3_small_opset13", "model.onnx")]
        zoo = os.path.expanduser("~/.cache/nee-zoo/mobilenetv2_b1.onnx")
        if os.path.exists(zoo):
            paths.append(zoo)
    print(f"{RUNS} runs each, alternating, 2 threads, allow_spinning={os.environ.get('SPIN', '1')}; medians")
    print("| model | plain: create | sandbox: create | plain: run | sandbox: run | difference | bitwise equal |")
    print("|---|---|---|---|---|---|---|")
    for p in paths:
        measure(p)


if __name__ == "__main__":
    main()
