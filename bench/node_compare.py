#!/usr/bin/env python3
"""Where a model's time goes, nee beside ONNX Runtime, node by node.

  PYTHONPATH=build/python .venv/bin/python bench/node_compare.py ~/.cache/nee-zoo/yolo_b1.onnx \\
      --runs 10 --threads 1 --top 20

Both runtimes profile the same inputs in this one process (enable_profiling): after --warmup
unprofiled runs, --runs profiled ones, nee and ORT alternating. Each node's time is its minimum
over the runs, which is steadier than a whole-model median on a shared machine. Reported:

- per op type, nee's and ORT's summed node minimums (--stat median: medians);
- per convolution kind (kernel, stride, depthwise or not, input channels), the same sums. ORT
  rewrites convolutions (NCHWc, fused activations) and names the fused node after the tensor
  it writes; such a node is mapped back to the ONNX Conv that tensor comes from (following
  Relu/Clip/Add/Sigmoid/Mul producers back to it). Time ORT spends in separate activation
  nodes (e.g. QuickGelu for SiLU, which nee fuses into its FusedConv) stays under their op;
- with --top N, the N convolutions with the largest nee - ORT gap, with their shapes.

Quantized models are broken down the same way: a QLinearConv is a convolution (its weights are
input 3), and so is a QDQ model's Conv, whose weights come through a DequantizeLinear. Both
runtimes fuse a QDQ group into a QLinearConv; nee names it after the group's QuantizeLinear, ORT
after the Conv with a "_token_N" suffix, and both are mapped back to the ONNX Conv (following the
QuantizeLinear and Relu/Clip producers). --planes adds each convolution's input plane (from nee's
profile) to its kind, which separates e.g. MobileNetV2's stride-2 depthwise convs on 112x112
and 56x56 from those on small planes. --threads takes several counts; each gets its own report.

Inputs: the model's .npz beside it (bench/zoo.py's "in:NAME" arrays) when there is one, else
seeded random floats (symbolic dims as 1).

Profiling costs the two runtimes differently, so these ratios read nee's lead larger than whole
unprofiled runs do: on the AVX2 Zen 3 guest (session 53, sessions with and without profiling
alternating in one process) ORT's whole runs took 7% (MobileNetV2) to 15% (MobileNetV3) longer
profiled, nee's 1-2%, and part of ORT's extra time falls inside its node spans (about 3% of
MobileNetV2's). At 2 threads the gap is wider (ORT's profiled node minimums summed above its own
unprofiled whole-run median). Use the breakdown to find where the time goes; judge a ratio by
bench/compare.py.
"""
import argparse
import collections
import json
import os
import re
import statistics

import numpy as np
import onnx


def load_feeds(path, model):
    npz = path[:-len(".onnx")] + ".npz"
    if os.path.exists(npz):
        data = np.load(npz)
        return {k[3:]: data[k] for k in data.files if k.startswith("in:")}
    initializers = {i.name for i in model.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = {}
    for i in model.graph.input:
        if i.name in initializers:
            continue
        dims = [d.dim_value if d.dim_value > 0 else 1 for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def make_session(module, path, threads):
    so = module.SessionOptions()
    so.enable_profiling = True
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    if module.__name__ == "onnxruntime":
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return module.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def node_times(session, skip_runs, stat=min):
    """({node name: (op type, stat of its durations in us)}, {node name: first input's shape}) from
    the session's profile."""
    path = session.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    times, ops, shapes = collections.defaultdict(list), {}, {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            name = e["name"][:-len("_kernel_time")]
            times[name].append(e["dur"])
            ops[name] = e["args"].get("op_name", "?")
            inputs = e["args"].get("input_type_shape") or [{}]
            shapes.setdefault(name, next(iter(inputs[0].values()), None))
    return {n: (ops[n], float(stat(v[skip_runs:] or v))) for n, v in times.items()}, shapes


CONV_OPS = ("Conv", "QLinearConv")
# Nodes a runtime folds into the convolution before them: activations, a residual Add, and a QDQ
# group's QuantizeLinear (nee names the fused QLinearConv after that QuantizeLinear).
FUSED_AFTER_CONV = ("Relu", "Clip", "Add", "Sigmoid", "HardSigmoid", "HardSwish", "Mul", "QuantizeLinear",
                    "LeakyRelu")


def conv_weights(node, initializers, producer):
    """The weight initializer of a Conv or QLinearConv (a QDQ Conv's through its DequantizeLinear)."""
    name = node.input[3] if node.op_type == "QLinearConv" else node.input[1]
    if name not in initializers and name in producer and producer[name].op_type == "DequantizeLinear":
        name = producer[name].input[0]
    return initializers.get(name)


def conv_kind(node, initializers, producer, plane=None):
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    w = conv_weights(node, initializers, producer)
    per_group_in = w.dims[1] if w is not None else 0
    kernel = attrs.get("kernel_shape", [0])[0]
    stride = attrs.get("strides", [1])[0]
    depthwise = attrs.get("group", 1) > 1 and per_group_in == 1
    channels = "ci<=32" if per_group_in <= 32 else "ci<=128" if per_group_in <= 128 else "ci>128"
    kind = f"k{kernel} s{stride} " + ("depthwise" if depthwise else f"{channels}")
    return kind + (f" @{plane}" if plane else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--top", type=int, default=0, help="list the N convolutions with the largest gap")
    ap.add_argument("--planes", action="store_true", help="add each convolution's input plane to its kind")
    ap.add_argument("--stat", choices=("min", "median"), default="min",
                    help="each node's time: its minimum over the runs (default) or its median")
    args = ap.parse_args()

    model = onnx.load(args.model)
    feeds = load_feeds(args.model, model)
    for threads in args.threads:
        report(args, model, feeds, threads)
        print()


def report(args, model, feeds, threads):
    import nee
    import onnxruntime

    sessions = {"nee": make_session(nee, args.model, threads),
                "ort": make_session(onnxruntime, args.model, threads)}
    for r in range(args.warmup + args.runs):
        for name in (("nee", "ort") if r % 2 == 0 else ("ort", "nee")):
            sessions[name].run(None, feeds)
    stat = min if args.stat == "min" else statistics.median
    profiles = {name: node_times(s, args.warmup, stat) for name, s in sessions.items()}
    mins = {name: p[0] for name, p in profiles.items()}

    initializers = {i.name: i for i in model.graph.initializer}
    by_name = {n.name: n for n in model.graph.node}
    producer = {o: n for n in model.graph.node for o in n.output}

    def conv_behind(name):
        """The ONNX convolution a profiled convolution node computes, or None."""
        name = re.sub(r"(_token_\d+|_nchwc)$", "", name)
        node = by_name.get(name) or producer.get(name)
        for _ in range(8):  # through the activation / residual / QuantizeLinear nodes fused into it
            if node is None or node.op_type in CONV_OPS:
                return node
            if node.op_type not in FUSED_AFTER_CONV:
                return None
            node = producer.get(node.input[0])
        return None

    planes = {}  # ONNX convolution name -> its input plane, from nee's profile (NCHW or blocked)
    by_op = {k: collections.Counter() for k in mins}
    by_kind = {k: collections.Counter() for k in mins}
    per_conv = {k: collections.Counter() for k in mins}
    for runtime, nodes in mins.items():
        for name, (op, us) in nodes.items():
            conv = conv_behind(name) if "Conv" in op else None
            if conv is not None:
                shape = profiles[runtime][1].get(name)
                if runtime == "nee" and shape and len(shape) >= 4:
                    planes[conv.name] = f"{shape[2]}x{shape[3]}"
                per_conv[runtime][conv.name] += us
            else:
                by_op[runtime][op] += us

    def kind_of(conv_name):
        return conv_kind(by_name[conv_name], initializers, producer,
                         planes.get(conv_name) if args.planes else None)

    for runtime, convs in per_conv.items():
        for n, us in convs.items():
            by_kind[runtime][kind_of(n)] += us

    total = {k: sum(v for _, v in nodes.values()) for k, nodes in mins.items()}
    print(f"{os.path.basename(args.model)}, {threads} thread(s), node {args.stat}s over {args.runs} runs")
    print(f"total (sum of node {args.stat}s): nee {total['nee'] / 1e3:.2f} ms, ORT {total['ort'] / 1e3:.2f} ms, "
          f"ratio {total['nee'] / max(total['ort'], 1e-9):.2f}\n")
    if by_kind["nee"] or by_kind["ort"]:
        print(f"{'convolutions by kind':28s} {'nee ms':>8s} {'ORT ms':>8s} {'ratio':>6s}")
        for k in sorted(set(by_kind["nee"]) | set(by_kind["ort"]), key=lambda k: -by_kind["nee"][k]):
            a, b = by_kind["nee"][k], by_kind["ort"][k]
            print(f"{k:28s} {a / 1e3:8.2f} {b / 1e3:8.2f} {a / b if b else float('nan'):6.2f}")
        print()
    print(f"{'other ops':28s} {'nee ms':>8s} {'ORT ms':>8s}")
    for k in sorted(set(by_op["nee"]) | set(by_op["ort"]), key=lambda k: -(by_op["nee"][k] + by_op["ort"][k])):
        print(f"{k:28s} {by_op['nee'][k] / 1e3:8.2f} {by_op['ort'][k] / 1e3:8.2f}")
    if args.top:
        print(f"\nconvolutions with the largest gap (us): nee, ORT, kind, weights, input plane")
        gaps = sorted(per_conv["nee"], key=lambda n: -(per_conv["nee"][n] - per_conv["ort"][n]))
        for n in gaps[:args.top]:
            w = conv_weights(by_name[n], initializers, producer)
            print(f"{per_conv['nee'][n]:8.0f} {per_conv['ort'][n]:8.0f}  {kind_of(n):28s} "
                  f"w{list(w.dims) if w is not None else '?'} {planes.get(n, '?')}  {n}")


if __name__ == "__main__":
    main()
