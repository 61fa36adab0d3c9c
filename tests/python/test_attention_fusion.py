"""Fusion of multi-head attention into nee's ai.nee ScaledDotProductAttention (src/opt/fuse_attention.cc).

Three small models in the forms PyTorch exports (BERT: 4-D heads, Div scale, additive padding mask computed
from an input; GPT-2: Where with a constant causal mask and -FLT_MAX; ViT / nn.MultiheadAttention: 3-D heads,
Q scaled before the MatMul, no mask): ONNX Runtime (optimizations off) gives the expected outputs; nee with
optimizations off and on agrees, the optimized graph has the fused op, and outputs are bitwise identical at 1,
2 and 3 threads. The op itself is checked against a numpy computation of its contract, and `nee optimize`
writes it with the ai.nee opset import."""
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nee

F = TensorProto.FLOAT
_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NEE_BIN = os.environ.get("NEE_BIN", os.path.join(_ROOT, "build", "bin", "nee"))


def make_model(nodes, inputs, outputs, inits, opset=17, extra_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), *extra_opsets])
    model.ir_version = 8
    return model


def run_ort(model, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def nee_session(model, level, threads=1, reference=False):
    so = nee.SessionOptions()
    so.graph_optimization_level = nee.GraphOptimizationLevel(level)
    so.intra_op_num_threads = threads
    so.reference_kernels_only = reference
    return nee.InferenceSession(model.SerializeToString(), so)


def _heads(n, x, dims, perm, prefix, inits):
    inits[f"{prefix}_shape"] = np.array(dims, np.int64)
    return [n("Reshape", [x, f"{prefix}_shape"], [f"{prefix}_r"]),
            n("Transpose", [f"{prefix}_r"], [f"{prefix}_t"], perm=perm)]


def bert_attention(rng, B=2, S=7, N=3, H=8):
    """BERT: q/k/v projections, heads [B,N,S,H], K as [B,N,H,S], Div by sqrt(H), + (1 - mask) * -10000."""
    D = N * H
    n = helper.make_node
    inits = {f"W{c}": rng.normal(0, D ** -0.5, (D, D)).astype(np.float32) for c in "qkv"}
    inits.update({f"b{c}": rng.normal(0, 0.1, D).astype(np.float32) for c in "qkv"})
    inits.update(scale=np.float32(np.sqrt(H)), one=np.float32(1), big=np.float32(-10000), axes=np.array([1, 2]))
    inits["out_shape"] = np.array([B, S, D], np.int64)
    nodes = []
    for c in "qkv":
        nodes += [n("MatMul", ["x", f"W{c}"], [f"{c}_mm"]), n("Add", [f"b{c}", f"{c}_mm"], [c])]
    nodes += _heads(n, "q", [B, S, N, H], [0, 2, 1, 3], "qh", inits)
    nodes += _heads(n, "k", [B, S, N, H], [0, 2, 3, 1], "kh", inits)
    nodes += _heads(n, "v", [B, S, N, H], [0, 2, 1, 3], "vh", inits)
    nodes += [n("Unsqueeze", ["mask", "axes"], ["m4"]), n("Cast", ["m4"], ["mf"], to=F),
              n("Sub", ["one", "mf"], ["inv"]), n("Mul", ["inv", "big"], ["madd"]),
              n("MatMul", ["qh_t", "kh_t"], ["qk"]), n("Div", ["qk", "scale"], ["qks"]),
              n("Add", ["qks", "madd"], ["logits"]), n("Softmax", ["logits"], ["p"], axis=-1),
              n("MatMul", ["p", "vh_t"], ["ctx"]), n("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
              n("Reshape", ["ctx_t", "out_shape"], ["y"])]
    model = make_model(nodes, [helper.make_tensor_value_info("x", F, [B, S, D]),
                               helper.make_tensor_value_info("mask", TensorProto.INT64, [B, S])],
                       [helper.make_tensor_value_info("y", F, None)], inits)
    mask = np.ones((B, S), np.int64)
    mask[0, S - 2:] = 0
    return model, {"x": rng.normal(0, 1, (B, S, D)).astype(np.float32), "mask": mask}


def gpt2_attention(rng, S=9, N=2, H=16):
    """GPT-2: one c_attn projection Split into q, k, v; Where(causal, -FLT_MAX, scores / 4)."""
    D = N * H
    n = helper.make_node
    inits = {"W": rng.normal(0, D ** -0.5, (D, 3 * D)).astype(np.float32),
             "b": rng.normal(0, 0.1, 3 * D).astype(np.float32), "split": np.array([D, D, D], np.int64),
             "scale": np.float32(np.sqrt(H)), "fill": np.float32(np.finfo(np.float32).min),
             "causal": ~np.tril(np.ones((1, 1, S, S), bool)), "out_shape": np.array([1, S, D], np.int64)}
    nodes = [n("MatMul", ["x", "W"], ["mm"]), n("Add", ["b", "mm"], ["qkv"]),
             n("Split", ["qkv", "split"], ["q", "k", "v"], axis=2)]
    nodes += _heads(n, "q", [1, S, N, H], [0, 2, 1, 3], "qh", inits)
    nodes += _heads(n, "k", [1, S, N, H], [0, 2, 3, 1], "kh", inits)
    nodes += _heads(n, "v", [1, S, N, H], [0, 2, 1, 3], "vh", inits)
    nodes += [n("MatMul", ["qh_t", "kh_t"], ["qk"]), n("Div", ["qk", "scale"], ["qks"]),
              n("Where", ["causal", "fill", "qks"], ["logits"]), n("Softmax", ["logits"], ["p"], axis=-1),
              n("MatMul", ["p", "vh_t"], ["ctx"]), n("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
              n("Reshape", ["ctx_t", "out_shape"], ["y"])]
    model = make_model(nodes, [helper.make_tensor_value_info("x", F, [1, S, D])],
                       [helper.make_tensor_value_info("y", F, None)], inits)
    return model, {"x": rng.normal(0, 1, (1, S, D)).astype(np.float32)}


def _vit_heads_model(rng, nodes, inits, S, N, H):
    """nn.MultiheadAttention after q, k, v [S, 1, D]: 3-D heads [N, S, H], Q / sqrt(H) first, back to [S, D]."""
    n = helper.make_node
    nodes += _heads(n, "q", [S, N, H], [1, 0, 2], "qh", inits)
    nodes += _heads(n, "k", [S, N, H], [1, 2, 0], "kh", inits)
    nodes += _heads(n, "v", [S, N, H], [1, 0, 2], "vh", inits)
    nodes += [n("Div", ["qh_t", "scale"], ["qs"]), n("MatMul", ["qs", "kh_t"], ["qk"]),
              n("Softmax", ["qk"], ["p"], axis=-1), n("MatMul", ["p", "vh_t"], ["ctx"]),
              n("Transpose", ["ctx"], ["ctx_t"], perm=[1, 0, 2]), n("Reshape", ["ctx_t", "out_shape"], ["y"])]
    model = make_model(nodes, [helper.make_tensor_value_info("x", F, [1, S, N * H])],
                       [helper.make_tensor_value_info("y", F, None)], inits)
    return model, {"x": rng.normal(0, 1, (1, S, N * H)).astype(np.float32)}


def vit_attention(rng, S=11, N=4, H=8):
    """torch nn.MultiheadAttention for one image: [S, 1, D] rows, 3-D heads [N, S, H], Q / sqrt(H) first."""
    D = N * H
    n = helper.make_node
    inits = {f"W{c}": rng.normal(0, D ** -0.5, (D, D)).astype(np.float32) for c in "qkv"}
    inits.update(scale=np.float32(np.sqrt(H)), out_shape=np.array([S, D], np.int64))
    nodes = [n("Transpose", ["x"], ["xt"], perm=[1, 0, 2])]
    for c in "qkv":
        nodes.append(n("MatMul", ["xt", f"W{c}"], [c]))
    return _vit_heads_model(rng, nodes, inits, S, N, H)


def optimized(model, tmp_path):
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(model, str(src))
    r = subprocess.run([NEE_BIN, "optimize", str(src), "-o", str(dst)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return onnx.load(str(dst))


@pytest.mark.parametrize("build", [bert_attention, gpt2_attention, vit_attention])
def test_fused_attention_agrees_with_onnxruntime(build, tmp_path):
    rng = np.random.default_rng(17)
    model, feeds = build(rng)
    want = run_ort(model, feeds)[0]
    for level in (0, 99):
        got = nee_session(model, level).run(None, feeds)[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"level {level}")
    fused = optimized(model, tmp_path)
    ops = [(n.domain, n.op_type) for n in fused.graph.node]
    assert ("ai.nee", "ScaledDotProductAttention") in ops, ops
    assert not any(op == "Softmax" for _, op in ops), ops
    # Gone: the four head Transposes, both MatMuls and the softmax at least (ViT's input
    # Transpose stays: it is not part of the pattern).
    assert len(ops) <= len(model.graph.node) - 7, ops
    assert any(o.domain == "ai.nee" and o.version == 1 for o in fused.opset_import)
    # The written model runs as is, and the fused kernel does not depend on the thread count.
    runs = [nee_session(fused, 0, threads).run(None, feeds)[0] for threads in (1, 2, 3)]
    np.testing.assert_allclose(runs[0], want, rtol=1e-4, atol=1e-5)
    for r in runs[1:]:
        assert r.tobytes() == runs[0].tobytes()


def _sdpa_nodes(model):
    return [n for n in model.graph.node if n.domain == "ai.nee" and n.op_type == "ScaledDotProductAttention"]


def gpt2_additive_mask(rng, mask, S=9, N=2, H=16):
    """GPT-2 with its Where replaced by Add(scores, constant mask [1, 1, S, S])."""
    model, feeds = gpt2_attention(rng, S, N, H)
    for node in model.graph.node:
        if node.op_type == "Where":
            node.op_type = "Add"
            del node.input[:]
            node.input.extend(["qks", "additive"])
    model.graph.initializer.append(numpy_helper.from_array(mask.astype(np.float32), "additive"))
    return model, feeds


@pytest.mark.parametrize("form", ["where", "where_inf", "add_min", "add_hole", "add_small", "where_hole"])
def test_causal_mask_is_recognised_only_when_proven(form, tmp_path):
    """A constant causal mask (Where's fill or Add's values <= -1e30 above the diagonal, 0 on and below it)
    becomes causal = 1 with no bias input; a mask with one more hole, or -10000 as the fill, stays a bias."""
    rng = np.random.default_rng(23)
    S = 9
    tril = np.tril(np.ones((1, 1, S, S), bool))
    hole = tril.copy()
    hole[0, 0, 5, 2] = False
    fmin = np.finfo(np.float32).min
    if form.startswith("where"):
        model, feeds = gpt2_attention(rng, S)
        for init in model.graph.initializer:
            if init.name == "causal" and form == "where_hole":
                init.CopyFrom(numpy_helper.from_array(~hole, "causal"))
            if init.name == "fill" and form == "where_inf":
                init.CopyFrom(numpy_helper.from_array(np.float32(-np.inf), "fill"))
    else:
        keep = hole if form == "add_hole" else tril
        fill = -10000.0 if form == "add_small" else fmin
        model, feeds = gpt2_additive_mask(rng, np.where(keep, 0.0, fill), S)
    want = run_ort(model, feeds)[0]
    fused = optimized(model, tmp_path)
    nodes = _sdpa_nodes(fused)
    assert len(nodes) == 1, [n.op_type for n in fused.graph.node]
    attrs = {a.name: helper.get_attribute_value(a) for a in nodes[0].attribute}
    # GPT-2's q, k, v are a Split of one projection: the node reads it once (key and value absent).
    if form in ("where", "where_inf", "add_min"):
        assert attrs.get("causal") == 1, attrs
        assert list(nodes[0].input) == ["qkv"], list(nodes[0].input)
    else:
        assert attrs.get("causal", 0) == 0, attrs
        assert list(nodes[0].input)[:3] == ["qkv", "", ""] and len(nodes[0].input) == 4, list(nodes[0].input)
    assert not any(n.op_type == "Split" for n in fused.graph.node)
    for threads in (1, 2):
        got = nee_session(model, 99, threads).run(None, feeds)[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"{form} threads {threads}")
    # Causal skipping gives the bits the masked full rows give: the optimized model against the same model
    # with the fused node fed its mask again.
    if attrs.get("causal") == 1:
        masked = onnx.ModelProto()
        masked.CopyFrom(fused)
        node = _sdpa_nodes(masked)[0]
        for a in list(node.attribute):
            if a.name == "causal":
                node.attribute.remove(a)
        masked.graph.initializer.append(numpy_helper.from_array(np.where(tril, 0.0, fmin).astype(np.float32), "m"))
        node.input.extend(["", "", "m"])
        for threads in (1, 2):
            a = nee_session(fused, 0, threads).run(None, feeds)[0]
            b = nee_session(masked, 0, threads).run(None, feeds)[0]
            assert a.tobytes() == b.tobytes(), threads


def vit_packed_attention(rng, S=11, N=4, H=8, ranges=None, split=False):
    """nn.MultiheadAttention as torch exports it: one in-projection [D, 3D] on [S, 1, D] rows, then three Slices
    of its last axis (`ranges`, default q | k | v) or a Split, 3-D heads, Q / sqrt(H) first."""
    D = N * H
    ranges = ranges or [(0, D), (D, 2 * D), (2 * D, 3 * D)]
    n = helper.make_node
    inits = {"W": rng.normal(0, D ** -0.5, (D, 3 * D)).astype(np.float32),
             "b": rng.normal(0, 0.1, 3 * D).astype(np.float32), "scale": np.float32(np.sqrt(H)),
             "out_shape": np.array([S, D], np.int64), "axis": np.array([-1], np.int64),
             "sizes": np.array([D, D, D], np.int64)}
    nodes = [n("Transpose", ["x"], ["xt"], perm=[1, 0, 2]), n("MatMul", ["xt", "W"], ["mm"]),
             n("Add", ["mm", "b"], ["qkv"])]
    if split:
        nodes.append(n("Split", ["qkv", "sizes"], ["q", "k", "v"], axis=2))
    else:
        for c, (lo, hi) in zip("qkv", ranges):
            inits[f"{c}_lo"], inits[f"{c}_hi"] = np.array([lo], np.int64), np.array([hi], np.int64)
            nodes.append(n("Slice", ["qkv", f"{c}_lo", f"{c}_hi", "axis"], [c]))
    return _vit_heads_model(rng, nodes, inits, S, N, H)


@pytest.mark.parametrize("form", ["slices", "split", "swapped", "overlap", "shared"])
def test_qkv_read_from_one_projection_only_when_proven(form, tmp_path):
    """Slices (or a Split) taking q | k | v in order from one projection go, and the node reads the projection
    ([S, 1, 3D] through a Reshape to [1, S, 3D]); slices in another order, overlapping ones, or a q also read
    elsewhere keep the separate inputs. Outputs agree with ONNX Runtime, bitwise across thread counts."""
    rng = np.random.default_rng(31)
    D = 32
    ranges = {"swapped": [(0, D), (2 * D, 3 * D), (D, 2 * D)], "overlap": [(0, D), (D, 2 * D), (D, 2 * D)]}
    model, feeds = vit_packed_attention(rng, ranges=ranges.get(form), split=form == "split")
    if form == "shared":
        model.graph.output.append(helper.make_tensor_value_info("q", F, None))
    want = run_ort(model, feeds)
    fused = optimized(model, tmp_path)
    node = _sdpa_nodes(fused)[0]
    packed = form in ("slices", "split")
    assert (len(node.input) == 1) == packed, list(node.input)
    assert any(n.op_type in ("Slice", "Split") for n in fused.graph.node) != packed
    runs = [nee_session(model, 99, threads).run(None, feeds) for threads in (1, 2)]
    for w, g in zip(want, runs[0]):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(runs[0], runs[1]))


@pytest.mark.parametrize("build", [bert_attention, vit_attention])
def test_three_projections_become_one(build, tmp_path):
    """BERT's (and nn.MultiheadAttention's unpacked) q, k, v Linear layers of one x become one MatMul by
    [Wq | Wk | Wv] (+ [bq | bk | bv]) feeding the packed node; the old weights go. Every column is the same
    dot product as before: bitwise the model whose q is also a graph output (so nothing merges)."""
    rng = np.random.default_rng(41)
    model, feeds = build(rng)
    fused = optimized(model, tmp_path)
    node = _sdpa_nodes(fused)[0]
    assert list(node.input[1:3]) in ([], ["", ""]), list(node.input)  # key and value absent
    matmuls = [n for n in fused.graph.node if n.op_type in ("MatMul", "FusedMatMul")]
    assert len(matmuls) == 1, [n.op_type for n in fused.graph.node]
    names = {i.name for i in fused.graph.initializer}
    assert not names & {"Wq", "Wk", "Wv", "bq", "bk", "bv"}, names
    kept = onnx.ModelProto()
    kept.CopyFrom(model)
    kept.graph.output.append(helper.make_tensor_value_info("q", F, None))
    want = run_ort(model, feeds)[0]
    for threads in (1, 2):
        got = nee_session(model, 99, threads).run(None, feeds)[0]
        separate = nee_session(kept, 99, threads).run(None, feeds)[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        assert got.tobytes() == separate.tobytes(), threads


def quant_bert_attention(rng, per_column, bias, b_type):
    """bert_attention with its q/k/v Linear layers dynamically quantized as ONNX Runtime's quantize_dynamic
    writes them once nee fused them: DynamicQuantizeLinear(x), then com.microsoft MatMulIntegerToFloat per
    projection (8-bit W, its own scale and zero point, one or per column, and a bias or none)."""
    model, feeds = bert_attention(rng)
    D = feeds["x"].shape[-1]
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"])]
    # int8 weights within 7 bits (as quantize_dynamic's reduce_range): ONNX Runtime's AVX2 u8 x s8 kernel
    # saturates pairs of products beyond that, nee does not.
    lo, hi = (-64, 64) if b_type == np.int8 else (0, 256)
    for c in "qkv":
        w = inits.pop(f"W{c}")
        b = inits.pop(f"b{c}")
        cols = D if per_column else 1
        inits[f"W{c}q"] = rng.integers(lo, hi, (D, D)).astype(b_type)
        scale = rng.uniform(0.5, 2.0, cols).astype(np.float32) * np.float32(np.abs(w).max() / 100)
        inits[f"W{c}s"] = scale if per_column else scale.reshape(())
        zp = rng.integers(lo // 4 + hi // 4, hi // 4 + hi // 2, cols).astype(b_type) if b_type == np.uint8 else \
            np.zeros(cols, b_type)
        inits[f"W{c}z"] = zp if per_column else zp.reshape(())
        ins = ["xq", f"W{c}q", "xs", f"W{c}s", "xz", f"W{c}z"]
        if bias:
            inits[f"b{c}"] = b
            ins.append(f"b{c}")
        nodes.append(helper.make_node("MatMulIntegerToFloat", ins, [c], domain="com.microsoft"))
    for node in model.graph.node:
        if node.op_type == "Add" and node.output[0] in "qkv" or node.op_type == "MatMul" and node.input[0] == "x":
            continue
        nodes.append(node)
    out = make_model(nodes, list(model.graph.input), list(model.graph.output), inits,
                     extra_opsets=[helper.make_opsetid("com.microsoft", 1)])
    return out, feeds


@pytest.mark.parametrize("per_column, bias, b_type", [(False, True, np.int8), (True, True, np.uint8),
                                                      (False, False, np.uint8), (True, False, np.int8)])
def test_three_quantized_projections_become_one(per_column, bias, b_type, tmp_path):
    """Dynamically quantized q, k, v projections of one x (MatMulIntegerToFloat) become one
    MatMulIntegerToFloat by [Wq | Wk | Wv] with their scales, zero points and biases side by side,
    feeding the packed node; the old constants go. Each column is the same integer sum, scale product and
    bias as before: bitwise the model whose q is also a graph output (so nothing merges), at 1 and 2
    threads, and near ONNX Runtime."""
    rng = np.random.default_rng(43)
    model, feeds = quant_bert_attention(rng, per_column, bias, b_type)
    fused = optimized(model, tmp_path)
    node = _sdpa_nodes(fused)[0]
    assert list(node.input[1:3]) in ([], ["", ""]), list(node.input)  # key and value absent
    products = [n for n in fused.graph.node if n.op_type == "MatMulIntegerToFloat"]
    assert len(products) == 1, [n.op_type for n in fused.graph.node]
    assert len(products[0].input) == (7 if bias else 6), list(products[0].input)
    names = {i.name for i in fused.graph.initializer}
    assert not names & ({f"W{c}{s}" for c in "qkv" for s in "qsz"} | {"bq", "bk", "bv"}), names
    kept = onnx.ModelProto()
    kept.CopyFrom(model)
    kept.graph.output.append(helper.make_tensor_value_info("q", F, None))
    want = run_ort(model, feeds)[0]
    for threads in (1, 2):
        got = nee_session(model, 99, threads).run(None, feeds)[0]
        separate = nee_session(kept, 99, threads).run(None, feeds)[0]
        unoptimized = nee_session(model, 0, threads).run(None, feeds)[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        assert got.tobytes() == separate.tobytes(), threads
        np.testing.assert_allclose(got, unoptimized, rtol=1e-5, atol=1e-6)
    assert nee_session(fused, 0).run(None, feeds)[0].tobytes() == nee_session(model, 99).run(None, feeds)[0].tobytes()


def test_quantized_projections_of_different_inputs_stay_apart(tmp_path):
    """Two quantized projections of x and one of another tensor: nothing merges, three inputs stay."""
    rng = np.random.default_rng(44)
    model, feeds = quant_bert_attention(rng, False, True, np.int8)
    B, S, D = feeds["x"].shape
    model.graph.input.append(helper.make_tensor_value_info("memory", F, [B, S, D]))
    model.graph.node.insert(0, helper.make_node("DynamicQuantizeLinear", ["memory"], ["mq", "ms", "mz"]))
    for n in model.graph.node:
        if n.op_type == "MatMulIntegerToFloat" and n.output[0] == "v":
            n.input[0], n.input[2], n.input[4] = "mq", "ms", "mz"
    feeds["memory"] = rng.normal(0, 1, (B, S, D)).astype(np.float32)
    fused = optimized(model, tmp_path)
    node = _sdpa_nodes(fused)[0]
    assert len(node.input) == 4 and all(node.input), list(node.input)
    assert sum(n.op_type == "MatMulIntegerToFloat" for n in fused.graph.node) == 3
    np.testing.assert_allclose(nee_session(model, 99).run(None, feeds)[0], run_ort(model, feeds)[0],
                               rtol=1e-4, atol=1e-4)


def test_projections_of_different_inputs_stay_apart(tmp_path):
    """Cross attention (k and v projected from another tensor) keeps three inputs."""
    rng = np.random.default_rng(42)
    model, feeds = bert_attention(rng)
    B, S, D = feeds["x"].shape
    model.graph.input.append(helper.make_tensor_value_info("memory", F, [B, S, D]))
    for n in model.graph.node:
        if n.op_type == "MatMul" and n.input[1] in ("Wk", "Wv"):
            n.input[0] = "memory"
    feeds["memory"] = rng.normal(0, 1, (B, S, D)).astype(np.float32)
    fused = optimized(model, tmp_path)
    node = _sdpa_nodes(fused)[0]
    assert len(node.input) == 4 and all(node.input), list(node.input)
    np.testing.assert_allclose(nee_session(model, 99).run(None, feeds)[0], run_ort(model, feeds)[0],
                               rtol=1e-4, atol=1e-5)


def test_unfusable_patterns_are_left_alone():
    """A scores tensor that is also a graph output, and a softmax over another axis, keep their nodes."""
    rng = np.random.default_rng(3)
    model, feeds = bert_attention(rng)
    model.graph.output.append(helper.make_tensor_value_info("qk", F, None))
    want = run_ort(model, feeds)
    got = nee_session(model, 99).run(None, feeds)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    model, feeds = vit_attention(rng)
    for node in model.graph.node:
        if node.op_type == "Softmax":
            node.attribute[0].i = 1
    np.testing.assert_allclose(nee_session(model, 99).run(None, feeds)[0], run_ort(model, feeds)[0],
                               rtol=1e-4, atol=1e-5)


def numpy_sdpa(q, k, v, bias, heads, scale):
    B, S, D = q.shape
    L, Dv = k.shape[1], v.shape[2]
    qh = q.reshape(B, S, heads, -1).transpose(0, 2, 1, 3).astype(np.float64)
    kh = k.reshape(B, L, heads, -1).transpose(0, 2, 1, 3).astype(np.float64)
    vh = v.reshape(B, L, heads, -1).transpose(0, 2, 1, 3).astype(np.float64)
    s = scale * qh @ kh.transpose(0, 1, 3, 2) + (0 if bias is None else bias)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p @ vh).transpose(0, 2, 1, 3).reshape(B, S, Dv)


@pytest.mark.parametrize("bias_shape", [None, [2, 1, 1, 6], [3, 5, 6], [6]])
def test_the_op_matches_numpy(bias_shape):
    rng = np.random.default_rng(9)
    B, S, L, N, H, Hv = 2, 5, 6, 3, 4, 2
    feeds = {"q": rng.normal(0, 1, (B, S, N * H)).astype(np.float32),
             "k": rng.normal(0, 1, (B, L, N * H)).astype(np.float32),
             "v": rng.normal(0, 1, (B, L, N * Hv)).astype(np.float32)}
    inputs = ["q", "k", "v"]
    if bias_shape:
        feeds["bias"] = rng.normal(0, 1, bias_shape).astype(np.float32)
        inputs.append("bias")
    node = helper.make_node("ScaledDotProductAttention", inputs, ["y"], domain="ai.nee", num_heads=N, scale=0.7)
    model = make_model([node], [helper.make_tensor_value_info(i, F, feeds[i].shape) for i in inputs],
                       [helper.make_tensor_value_info("y", F, None)], {},
                       extra_opsets=[helper.make_opsetid("ai.nee", 1)])
    want = numpy_sdpa(feeds["q"], feeds["k"], feeds["v"], feeds.get("bias"), N, 0.7)
    for threads, reference in ((1, False), (2, False), (1, True)):
        got = nee_session(model, 0, threads, reference).run(None, feeds)[0]
        assert got.shape == (B, S, N * Hv)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # A bias that does not broadcast is an error, not a crash.
    if bias_shape:
        feeds["bias"] = np.zeros([4], np.float32)
        bad = make_model([node], [helper.make_tensor_value_info(i, F, None) for i in inputs],
                         [helper.make_tensor_value_info("y", F, None)], {},
                         extra_opsets=[helper.make_opsetid("ai.nee", 1)])
        with pytest.raises(Exception):
            nee_session(bad, 0).run(None, feeds)


@pytest.mark.parametrize("S,L", [(5, 5), (3, 8), (30, 31)])
def test_the_causal_op_matches_numpy(S, L):
    """causal = 1: query s sees keys l <= s + L - S (numpy: -inf above that diagonal); S > L is an error."""
    rng = np.random.default_rng(10)
    B, N, H = 2, 3, 4
    feeds = {"q": rng.normal(0, 1, (B, S, N * H)).astype(np.float32),
             "k": rng.normal(0, 1, (B, L, N * H)).astype(np.float32),
             "v": rng.normal(0, 1, (B, L, N * H)).astype(np.float32)}
    node = helper.make_node("ScaledDotProductAttention", ["q", "k", "v"], ["y"], domain="ai.nee", num_heads=N,
                            scale=0.7, causal=1)
    model = make_model([node], [helper.make_tensor_value_info(i, F, None) for i in "qkv"],
                       [helper.make_tensor_value_info("y", F, None)], {},
                       extra_opsets=[helper.make_opsetid("ai.nee", 1)])
    mask = np.where(np.tril(np.ones((S, L), bool), L - S), 0.0, -np.inf)
    want = numpy_sdpa(feeds["q"], feeds["k"], feeds["v"], mask, N, 0.7)
    for threads, reference in ((1, False), (2, False), (1, True)):
        np.testing.assert_allclose(nee_session(model, 0, threads, reference).run(None, feeds)[0], want,
                                   rtol=1e-5, atol=1e-6)
    feeds["q"] = rng.normal(0, 1, (B, L + 1, N * H)).astype(np.float32)
    with pytest.raises(Exception):
        nee_session(model, 0).run(None, feeds)


def mlp_3d(rng, B=2, S=100, D=48, F1=1100, F2=70, F3=40):
    """Three Linear layers on [B, S, D] as torch exports them (MatMul + Add bias): erf GELU (-> BiasGelu), no
    activation, tanh GELU (-> FastGelu). 200 rows make two row blocks; 1100 and 70 columns leave partial panels."""
    n = helper.make_node
    c = {"sqrt2": np.float32(np.sqrt(2)), "one": np.float32(1), "half": np.float32(0.5), "three": np.float32(3),
         "k": np.float32(0.044715), "s2pi": np.float32(np.sqrt(2 / np.pi))}
    inits = dict(c)
    for i, (fi, fo) in enumerate(((D, F1), (F1, F2), (F2, F3))):
        inits[f"W{i}"] = rng.normal(0, fi ** -0.5, (fi, fo)).astype(np.float32)
        inits[f"b{i}"] = rng.normal(0, 0.1, fo).astype(np.float32)
    nodes = [n("MatMul", ["x", "W0"], ["h0"]), n("Add", ["h0", "b0"], ["hb0"]),
             n("Div", ["hb0", "sqrt2"], ["d0"]), n("Erf", ["d0"], ["e0"]), n("Add", ["e0", "one"], ["a0"]),
             n("Mul", ["hb0", "a0"], ["m0"]), n("Mul", ["m0", "half"], ["g0"]),
             n("MatMul", ["g0", "W1"], ["h1"]), n("Add", ["b1", "h1"], ["g1"]),
             n("MatMul", ["g1", "W2"], ["h2"]), n("Add", ["h2", "b2"], ["hb2"]),
             n("Pow", ["hb2", "three"], ["p2"]), n("Mul", ["p2", "k"], ["kp2"]), n("Add", ["hb2", "kp2"], ["s2"]),
             n("Mul", ["s2", "s2pi"], ["u2"]), n("Tanh", ["u2"], ["t2"]), n("Add", ["t2", "one"], ["a2"]),
             n("Mul", ["hb2", "half"], ["hh2"]), n("Mul", ["hh2", "a2"], ["y"])]
    model = make_model(nodes, [helper.make_tensor_value_info("x", F, [B, S, D])],
                       [helper.make_tensor_value_info("y", F, None)], inits)
    return model, {"x": rng.normal(0, 1, (B, S, D)).astype(np.float32)}


def test_fused_matmul_agrees_with_onnxruntime(tmp_path):
    rng = np.random.default_rng(23)
    model, feeds = mlp_3d(rng)
    want = run_ort(model, feeds)[0]
    np.testing.assert_allclose(nee_session(model, 0).run(None, feeds)[0], want, rtol=1e-4, atol=1e-5)
    fused = optimized(model, tmp_path)
    ops = [(n.domain, n.op_type, tuple(a.s for a in n.attribute)) for n in fused.graph.node]
    assert ops == [("ai.nee", "FusedMatMul", (b"Gelu",)), ("ai.nee", "FusedMatMul", ()),
                   ("ai.nee", "FusedMatMul", (b"FastGelu",))], ops
    # Sessions pack the weights once: the packed path, at 1, 2 and 3 threads bitwise alike.
    runs = [nee_session(model, 99, threads).run(None, feeds)[0] for threads in (1, 2, 3)]
    np.testing.assert_allclose(runs[0], want, rtol=1e-4, atol=1e-5)
    for r in runs[1:]:
        assert r.tobytes() == runs[0].tobytes()
    reference = nee_session(fused, 0, 1, reference=True).run(None, feeds)[0]
    np.testing.assert_allclose(runs[0], reference, rtol=1e-5, atol=1e-5)


def test_fused_matmul_bails_out(tmp_path):
    """A product also read elsewhere, a weight fed as an input, and a bias that broadcasts rows stay unfused."""
    rng = np.random.default_rng(29)
    n = helper.make_node
    x = rng.normal(0, 1, (2, 3, 4)).astype(np.float32)
    w = rng.normal(0, 1, (4, 5)).astype(np.float32)
    cases = [
        ([n("MatMul", ["x", "W"], ["h"]), n("Add", ["h", "b"], ["y"]), n("Neg", ["h"], ["z"])],
         {"W": w, "b": np.ones(5, np.float32)}, {}),
        ([n("MatMul", ["x", "Win"], ["h"]), n("Add", ["h", "b"], ["y"]), n("Neg", ["h"], ["z"])],
         {"b": np.ones(5, np.float32)}, {"Win": w}),
        ([n("MatMul", ["x", "W"], ["h"]), n("Add", ["h", "b"], ["y"]), n("Neg", ["y"], ["z"])],
         {"W": w, "b": np.ones((3, 5), np.float32)}, {}),
    ]
    for nodes, inits, extra in cases:
        inputs = [helper.make_tensor_value_info("x", F, x.shape)]
        inputs += [helper.make_tensor_value_info(k, F, v.shape) for k, v in extra.items()]
        model = make_model(nodes, inputs, [helper.make_tensor_value_info(o, F, None) for o in ("y", "z")], inits)
        feeds = {"x": x, **extra}
        fused = optimized(model, tmp_path)
        assert not any(node.op_type == "FusedMatMul" for node in fused.graph.node)
        for w_, g in zip(run_ort(model, feeds), nee_session(model, 99).run(None, feeds)):
            np.testing.assert_allclose(g, w_, rtol=1e-5, atol=1e-5)
