"""Random graphs of Slice/Split/Concat/Reshape/Identity/Unsqueeze/elementwise
ops (and If nodes whose bodies read outer values) built to hit the memory
planner's sharing rules (plan/part_offsets.cc): leading dims 1, parts of
16 floats (64 bytes) or not, values read again long after a view of them,
Concats of views and of Concats, Concat graph outputs that host their parts.

Each graph runs in nee with sharing on and with NEE_SHARE_BUFFERS=0 at 1-3
threads, several runs per session with fresh inputs (the outputs of run 1,
held by the caller, must not change during run 2), and the outputs must be
bitwise those of onnx.reference (only exact float ops are used).

Used by test_share_fuzz.py (a few cases) and runnable alone for many:
    PYTHONPATH=build/python .venv/bin/python tests/python/share_fuzz.py --cases 500
"""
from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
import threading
from typing import List, Optional, Tuple

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import nee

OPSET = 13


class GraphBuilder:
    """Builds a random graph, tracking each value's shape."""

    def __init__(self, rng: random.Random, dtype: np.dtype) -> None:
        self.rng = rng
        self.dtype = dtype
        self.nodes: list = []
        self.inits: list = []
        self.shapes: dict = {}
        self.values: List[str] = []  # float tensors that later nodes may read
        self.concats: List[str] = []
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, array: np.ndarray) -> str:
        n = self.name("k")
        self.inits.append(numpy_helper.from_array(array, n))
        return n

    def add(self, op: str, inputs: List[str], shapes: List[Tuple[int, ...]], **attrs) -> List[str]:
        outs = [self.name(op[:2].lower()) for _ in shapes]
        self.nodes.append(helper.make_node(op, inputs, outs, **attrs))
        for o, s in zip(outs, shapes):
            self.shapes[o] = tuple(s)
            self.values.append(o)
        return outs

    def pick(self) -> str:
        # Recent values more often, but old ones too (a view's input read late).
        if self.rng.random() < 0.6:
            return self.rng.choice(self.values[-4:])
        return self.rng.choice(self.values)

    # ---- ops -------------------------------------------------------------

    def unary(self) -> None:
        x = self.pick()
        op = self.rng.choice(["Relu" if self.dtype != np.int64 else "Abs", "Neg", "Abs", "Add1", "Mul2"])
        if op == "Add1":
            self.add("Add", [x, self.const(np.array(1, self.dtype))], [self.shapes[x]])
        elif op == "Mul2":
            self.add("Mul", [x, self.const(np.array(2, self.dtype))], [self.shapes[x]])
        else:
            self.add(op, [x], [self.shapes[x]])

    def binary(self) -> None:
        x = self.pick()
        same = [v for v in self.values if self.shapes[v] == self.shapes[x]]
        y = self.rng.choice(same)
        self.add(self.rng.choice(["Add", "Sub", "Max"]), [x, y], [self.shapes[x]])

    def spelled(self, axis: int, rank: int) -> int:
        """The axis as written in the model: sometimes counted from the end."""
        return axis - rank if self.rng.random() < 0.25 else axis

    def pick_axis(self):
        """A value, its shape, an axis of it and that axis' size (None when under 2)."""
        x = self.pick()
        shape = self.shapes[x]
        axis = self.rng.randrange(len(shape))
        return (x, shape, axis, shape[axis]) if shape[axis] >= 2 else None

    def slice(self) -> None:
        picked = self.pick_axis()
        if not picked:
            return
        x, shape, axis, n = picked
        start = self.rng.randrange(n)
        end = self.rng.randrange(start + 1, n + 1)
        step = 1
        if self.rng.random() < 0.15 and end - start > 1:
            step = 2
        starts, ends = [start], [end]
        if self.rng.random() < 0.2:  # negative indices
            starts, ends = [start - n], [end - n if end < n else n + 5]
        inputs = [x, self.const(np.array(starts, np.int64)), self.const(np.array(ends, np.int64)),
                  self.const(np.array([self.spelled(axis, len(shape))], np.int64))]
        if step != 1 or self.rng.random() < 0.3:
            inputs.append(self.const(np.array([step], np.int64)))
        out = list(shape)
        out[axis] = len(range(start, end, step))
        self.add("Slice", inputs, [tuple(out)])

    def split(self) -> None:
        picked = self.pick_axis()
        if not picked:
            return
        x, shape, axis, n = picked
        parts = self.rng.randint(2, min(4, n))
        cuts = sorted(self.rng.sample(range(1, n), parts - 1))
        sizes = [b - a for a, b in zip([0] + cuts, cuts + [n])]
        shapes = []
        for s in sizes:
            out = list(shape)
            out[axis] = s
            shapes.append(tuple(out))
        self.add("Split", [x, self.const(np.array(sizes, np.int64))], shapes, axis=self.spelled(axis, len(shape)))

    def concat(self) -> None:
        x = self.pick()
        shape = self.shapes[x]
        axis = self.rng.randrange(len(shape))
        fits = [v for v in self.values
                if len(self.shapes[v]) == len(shape)
                and all(a == b for d, (a, b) in enumerate(zip(self.shapes[v], shape)) if d != axis)]
        parts = [x] + [self.rng.choice(fits) for _ in range(self.rng.randint(1, 3))]
        self.rng.shuffle(parts)
        out = list(shape)
        out[axis] = sum(self.shapes[p][axis] for p in parts)
        if out[axis] > 256:
            return
        self.concats.extend(self.add("Concat", parts, [tuple(out)], axis=self.spelled(axis, len(shape))))

    def view(self) -> None:
        x = self.pick()
        shape = self.shapes[x]
        kind = self.rng.choice(["Identity", "Reshape", "Unsqueeze", "Flatten", "Squeeze"])
        if kind == "Identity":
            self.add("Identity", [x], [shape])
        elif kind == "Reshape":
            size = int(np.prod(shape))
            target = (1, size) if len(shape) != 2 else (1, 1, size)
            if self.rng.random() < 0.5 and len(shape) >= 2 and shape[0] == 1:
                target = shape[1:]  # drop the leading 1
            self.add("Reshape", [x, self.const(np.array(target, np.int64))], [tuple(target)])
        elif kind == "Squeeze":
            ones = [d for d, n in enumerate(shape) if n == 1]
            if not ones or len(shape) < 2:
                return
            self.add("Squeeze", [x, self.const(np.array(ones[:1], np.int64))],
                     [tuple(n for d, n in enumerate(shape) if d != ones[0])])
        elif kind == "Unsqueeze":
            self.add("Unsqueeze", [x, self.const(np.array([0], np.int64))], [(1,) + shape])
        else:
            self.add("Flatten", [x], [(1, int(np.prod(shape)))] if shape and shape[0] == 1 else
                     [(shape[0], int(np.prod(shape[1:])))], axis=1)

    def if_node(self) -> None:
        """If whose branches read outer values: one hands one straight back (or
        through Identity), the other adds two."""
        x = self.pick()
        shape = self.shapes[x]
        same = [v for v in self.values if self.shapes[v] == shape]
        y = self.rng.choice(same)
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(self.dtype))
        out_t = lambda name, _, dims: helper.make_tensor_value_info(name, elem, dims)  # noqa: E731
        pass_through = self.rng.random() < 0.5
        if pass_through:  # the body's output is the outer value itself
            then_body = helper.make_graph([], self.name("then"), [], [out_t(x, TensorProto.FLOAT, list(shape))])
        else:
            t = self.name("t")
            then_body = helper.make_graph([helper.make_node("Identity", [x], [t])], self.name("then"), [],
                                          [out_t(t, TensorProto.FLOAT, list(shape))])
        e = self.name("e")
        else_body = helper.make_graph([helper.make_node("Add", [x, y], [e])], self.name("else"), [],
                                      [out_t(e, TensorProto.FLOAT, list(shape))])
        self.add("If", ["cond"], [shape], then_branch=then_body, else_branch=else_body)

    def step(self, with_if: bool) -> None:
        ops = [self.unary, self.unary, self.binary, self.slice, self.slice, self.split, self.split,
               self.concat, self.concat, self.concat, self.view]
        if with_if:
            ops.append(self.if_node)
        self.rng.choice(ops)()


def random_model(seed: int, big: bool = False):
    rng = random.Random(seed)
    # Mostly float32; 2- and 8-byte elements move where the 64-byte alignment falls.
    dtype = rng.choice([np.float32] * 4 + [np.float16, np.int64])
    b = GraphBuilder(rng, dtype)
    # Leading dims 1 (the rules' case); inner sizes multiples of 16 floats
    # (64-byte parts) or not.
    inner = rng.choice([16, 16, 32, 8, 5, 48])
    if big:  # rows of ~16-190 KiB: the fast copies cut them into several 64 KiB pieces among the threads
        inner *= 257
    shape = rng.choice([(1, rng.randint(2, 12), inner), (1, rng.randint(2, 8), 2, inner // 2 or 1),
                        (rng.randint(1, 2) * 16 * rng.randint(1, 4),), (2, rng.randint(2, 6), inner)])
    b.shapes["x"] = shape
    b.values.append("x")
    first = b.add("Abs", ["x"], [shape])  # so that the planner sees an intermediate from the start
    with_if = rng.random() < 0.3
    for _ in range(rng.randint(4, 24)):
        b.step(with_if)
    produced = [v for v in b.values if v != "x"]
    outputs = {produced[-1]}
    for c in b.concats:  # Concat graph outputs host their parts
        if rng.random() < 0.5:
            outputs.add(c)
    for v in rng.sample(produced, min(len(produced), rng.randint(0, 3))):
        outputs.add(v)
    outputs = sorted(outputs, key=produced.index)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    inputs = [helper.make_tensor_value_info("x", elem, list(shape)),
              helper.make_tensor_value_info("cond", TensorProto.BOOL, [])]
    graph = helper.make_graph(b.nodes, f"fuzz{seed}", inputs,
                              [helper.make_tensor_value_info(o, elem, list(b.shapes[o]))
                               for o in outputs], initializer=b.inits)
    del first
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), shape, dtype


# Session configurations: the optimized kernels (ConcatFast, SplitFast,
# SliceFast), the unoptimized graph, and the reference kernels.
CONFIGS = ["default", "no-opt", "reference"]


@contextlib.contextmanager
def _sharing(share: bool):
    """NEE_SHARE_BUFFERS as asked while a session makes its plans (at the
    first run of each input signature), then as it was."""
    old = os.environ.get("NEE_SHARE_BUFFERS")
    if share:
        os.environ.pop("NEE_SHARE_BUFFERS", None)
    else:
        os.environ["NEE_SHARE_BUFFERS"] = "0"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("NEE_SHARE_BUFFERS", None)
        else:
            os.environ["NEE_SHARE_BUFFERS"] = old


def _session(model_bytes: bytes, threads: int, config: str):
    options = nee.SessionOptions()
    options.intra_op_num_threads = threads
    if config == "no-opt":
        options.graph_optimization_level = 0
    elif config == "reference":
        options.reference_kernels_only = True
    return nee.InferenceSession(model_bytes, options)


def _run(sess, feed, share: bool):
    with _sharing(share):
        return sess.run(None, feed)


def check_case(seed: int, runs: int = 3, big: bool = False) -> Optional[str]:
    """None when every configuration gives onnx.reference's bits, else what differed."""
    model, shape, dtype = random_model(seed, big)
    model_bytes = model.SerializeToString()
    ref = ReferenceEvaluator(model)
    rng = np.random.default_rng(seed)
    feeds = []
    for r in range(runs):
        x = (rng.standard_normal(shape) * (1000 if dtype == np.int64 else 1)).astype(dtype)
        feeds.append({"x": x, "cond": np.array(bool((seed + r) % 2))})
    expected = [ref.run(None, f) for f in feeds]
    bits = [[None] * len(e) for e in expected]
    for threads in (1, 2, 3):
        for share in (True, False):
            for config in CONFIGS:
                what = f"seed {seed} threads {threads} share {share} config {config}"
                try:
                    sess = _session(model_bytes, threads, config)
                except Exception as e:  # noqa: BLE001
                    return f"{what}: session failed: {e}"
                held = None
                for r, feed in enumerate(feeds):
                    got = _run(sess, feed, share)
                    for k, (g, e) in enumerate(zip(got, expected[r])):
                        # Equal values (Relu of -0 is +0 in nee, -0 in numpy), and the same bits in every
                        # configuration.
                        if g.shape != e.shape or not np.array_equal(g, e):
                            return f"{what} run {r} output {k} ({model.graph.output[k].name}) differs"
                        if bits[r][k] is None:
                            bits[r][k] = g.tobytes()
                        elif g.tobytes() != bits[r][k]:
                            return f"{what} run {r} output {k} ({model.graph.output[k].name}): other bits"
                    if held is None:
                        held = (got, [g.copy() for g in got])
                # The first run's outputs, held all along, unchanged by later runs.
                for k, (g, c) in enumerate(zip(*held)):
                    if g.tobytes() != c.tobytes():
                        return f"{what}: run 0's output {k} changed during later runs"
    return _check_concurrent_runs(model_bytes, feeds, bits, f"seed {seed} concurrent")


def _check_concurrent_runs(model_bytes: bytes, feeds, bits, what: str) -> Optional[str]:
    """One session (sharing on, 2 threads) run from two Python threads at once."""
    sess = _session(model_bytes, 2, "default")
    problems: List[str] = []

    def work(first: int) -> None:
        for i in range(6):
            r = (first + i) % len(feeds)
            got = sess.run(None, feeds[r])
            for k, g in enumerate(got):
                if g.tobytes() != bits[r][k]:
                    problems.append(f"{what}: run {r} output {k} differs")
                    return

    threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return problems[0] if problems else None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--big", action="store_true", help="tensors of hundreds of KiB")
    args = parser.parse_args()
    failures = 0
    for seed in range(args.first, args.first + args.cases):
        problem = check_case(seed, big=args.big)
        if problem:
            failures += 1
            print(problem, flush=True)
    print(f"{args.cases} cases, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
