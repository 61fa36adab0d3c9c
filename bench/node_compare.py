#!/usr/bin/env python3
"""Where a model's time goes, nee beside ONNX Runtime, node by node.

  PYTHONPATH=build/python .venv/bin/python bench/node_compare.py ~/.cache/nee-zoo/yolo_b1.onnx \\
      --runs 10 --threads 1 --top 20

Both runtimes profile the same inputs in this one process (enable_profiling): after --warmup
unprofiled runs, --runs profiled ones, nee and ORT alternating. Each node's time is its minimum
over the runs, which is steadier than a whole-model median on a shared machine. Reported:

- per op type, nee's and ORT's summed node minimums;
- per convolution kind (kernel, stride, depthwise or not, input channels), the same sums. ORT
  rewrites convolutions (NCHWc, fused activations) and names the fused node after the tensor
  it writes; such a node is mapped back to the ONNX Conv that tensor comes from (following
  Relu/Clip/Add/Sigmoid/Mul producers back to it). Time ORT spends in separate activation
  nodes (e.g. QuickGelu for SiLU, which nee fuses into its FusedConv) stays under their op;
- with --top N, the N convolutions with the largest nee - ORT gap, with their shapes.

Inputs: the model's .npz beside it (bench/zoo.py's "in:NAME" arrays) when there is one, else
seeded random floats (symbolic dims as 1).
"""
import argparse
import collections
import json
import os

import numpy as np
import onnx
from onnx import shape_inference


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


def node_minimums(session, skip_runs):
    """{node name: (op type, minimum duration in us)} from the session's profile."""
    path = session.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    times, ops = collections.defaultdict(list), {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            name = e["name"][:-len("_kernel_time")]
            times[name].append(e["dur"])
            ops[name] = e["args"].get("op_name", "?")
    return {n: (ops[n], float(min(v[skip_runs:] or v))) for n, v in times.items()}


def conv_kind(node, initializers):
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    w = initializers.get(node.input[1])
    per_group_in = w.dims[1] if w is not None else 0
    kernel = attrs.get("kernel_shape", [0])[0]
    stride = attrs.get("strides", [1])[0]
    depthwise = attrs.get("group", 1) > 1 and per_group_in == 1
    channels = "ci<=32" if per_group_in <= 32 else "ci<=128" if per_group_in <= 128 else "ci>128"
    return f"k{kernel} s{stride} " + ("depthwise" if depthwise else f"{channels}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--top", type=int, default=0, help="list the N convolutions with the largest gap")
    args = ap.parse_args()

    import nee
    import onnxruntime

    model = onnx.load(args.model)
    feeds = load_feeds(args.model, model)
    sessions = {"nee": make_session(nee, args.model, args.threads),
                "ort": make_session(onnxruntime, args.model, args.threads)}
    for r in range(args.warmup + args.runs):
        for name in (("nee", "ort") if r % 2 == 0 else ("ort", "nee")):
            sessions[name].run(None, feeds)
    mins = {name: node_minimums(s, args.warmup) for name, s in sessions.items()}

    initializers = {i.name: i for i in model.graph.initializer}
    by_name = {n.name: n for n in model.graph.node}
    producer = {o: n for n in model.graph.node for o in n.output}

    def conv_behind(tensor):
        for _ in range(6):  # through the activation / residual nodes ORT fused into the conv
            node = producer.get(tensor)
            if node is None:
                return None
            if node.op_type == "Conv":
                return node
            tensor = node.input[0]
        return None

    by_op = {k: collections.Counter() for k in mins}
    by_kind = {k: collections.Counter() for k in mins}
    per_conv = {k: collections.Counter() for k in mins}
    for runtime, nodes in mins.items():
        for name, (op, us) in nodes.items():
            conv = by_name.get(name) if runtime == "nee" else None
            if runtime == "ort" and op == "Conv":
                conv = conv_behind(name[:-len("_nchwc")] if name.endswith("_nchwc") else name) or by_name.get(name)
            if conv is not None and conv.op_type == "Conv":
                by_kind[runtime][conv_kind(conv, initializers)] += us
                per_conv[runtime][conv.name] += us
            else:
                by_op[runtime][op] += us

    total = {k: sum(v for _, v in nodes.values()) for k, nodes in mins.items()}
    print(f"{os.path.basename(args.model)}, {args.threads} thread(s), node minimums over {args.runs} runs")
    print(f"total (sum of node minimums): nee {total['nee'] / 1e3:.2f} ms, ORT {total['ort'] / 1e3:.2f} ms, "
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
        inferred = shape_inference.infer_shapes(model)
        shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
                  for v in list(inferred.graph.value_info) + list(inferred.graph.input)}
        print(f"\nconvolutions with the largest gap (us): nee, ORT, kind, weights, input")
        gaps = sorted(per_conv["nee"], key=lambda n: -(per_conv["nee"][n] - per_conv["ort"][n]))
        for n in gaps[:args.top]:
            conv = by_name[n]
            print(f"{per_conv['nee'][n]:8.0f} {per_conv['ort'][n]:8.0f}  {conv_kind(conv, initializers):20s} "
                  f"w{list(initializers[conv.input[1]].dims) if conv.input[1] in initializers else '?'} "
                  f"in{shapes.get(conv.input[0], ['?'])[1:]}  {n}")


if __name__ == "__main__":
    main()
