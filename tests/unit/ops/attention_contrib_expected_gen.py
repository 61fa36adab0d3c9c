#!/usr/bin/env python3
"""Prints the expected values of attention_contrib_test.cc: onnxruntime 1.32 (the reference implementation of
the com.microsoft contrib ops) running one-node models on the CPU provider. Run with /work/main/.venv/bin/python.

Inputs are the exact pattern Pattern(n, seed) below (multiples of 1/16, exact in float), which the C++ test
rebuilds with the same formula; masks and ids are written out literally."""
import sys
import numpy as np
import onnxruntime as ort
from onnx import helper as h, TensorProto as TP

MS = "com.microsoft"


def Pattern(n, seed):
    return np.array([((i * 7 + seed * 5) % 23 - 11) / 16.0 for i in range(n)], np.float32)


def P(shape, seed):
    return Pattern(int(np.prod(shape)), seed).reshape(shape)


def Run(op, inputs, n_out, **attrs):
    """inputs: list of numpy arrays or None (omitted). Returns ORT outputs or the error text."""
    names = [f"in{i}" if a is not None else "" for i, a in enumerate(inputs)]
    while names and names[-1] == "":
        names.pop()
    outs = [f"out{i}" for i in range(n_out)]
    node = h.make_node(op, names, outs, domain=MS, **attrs)
    def tp(a):
        return {np.float32: TP.FLOAT, np.float16: TP.FLOAT16, np.int32: TP.INT32, np.int64: TP.INT64}[a.dtype.type]
    g_in = [h.make_tensor_value_info(n, tp(a), a.shape) for n, a in zip(names, inputs) if n]
    g_out = [h.make_tensor_value_info(o, tp(inputs[0]), None) for o in outs]
    m = h.make_model(h.make_graph([node], "g", g_in, g_out),
                     opset_imports=[h.make_opsetid("", 17), h.make_opsetid(MS, 1)])
    m.ir_version = 8
    feeds = {n: a for n, a in zip(names, inputs) if n}
    try:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return s.run(None, feeds)
    except Exception as e:  # noqa: BLE001
        return str(e).splitlines()[0][:300]


def CppFloat(v):
    t = f"{float(v):.7g}"
    return t + ("f" if ("." in t or "e" in t) else ".0f")


def Show(title, result):
    print(f"// {title}")
    if isinstance(result, str):
        print("//   ORT error:", result)
        return
    for i, r in enumerate(result):
        vals = ", ".join(CppFloat(v) for v in np.asarray(r, np.float32).ravel())
        print(f"//   out{i} {list(r.shape)}\n{{{vals}}}")


B, S, IN, N = 2, 3, 4, 2
x = P((B, S, IN), 1)
w = P((IN, 12), 2)
bias = P((12,), 3)
i32 = lambda v: np.array(v, np.int32)

def Attention():
    Show("Attention plain", Run("Attention", [x, w, bias], 1, num_heads=N))
    Show("Attention no bias", Run("Attention", [x, w], 1, num_heads=N))
    Show("Attention 1-D key lengths [2, 3]", Run("Attention", [x, w, bias, i32([2, 3])], 1, num_heads=N))
    Show("Attention 1-D end/start [3, 2, 1, 0]", Run("Attention", [x, w, bias, i32([3, 2, 1, 0])], 1, num_heads=N))
    Show("Attention 1-D hostile [-1, 7]", Run("Attention", [x, w, bias, i32([-1, 7])], 1, num_heads=N))
    Show("Attention 1-D hostile end/start [9, -4, 5, 2]", Run("Attention", [x, w, bias, i32([9, -4, 5, 2])], 1, num_heads=N))
    Show("Attention 1-D too long [9, 3]", Run("Attention", [x, w, bias, i32([9, 3])], 1, num_heads=N))
    Show("Attention 1-D end/start start past end [3, 2, 5, 1]", Run("Attention", [x, w, bias, i32([3, 2, 5, 1])], 1, num_heads=N))
    Show("Attention 1-D zero lengths [0, 0]", Run("Attention", [x, w, bias, i32([0, 0])], 1, num_heads=N))
    m2 = i32([[1, 1, 0], [0, 1, 1]])
    Show("Attention 2-D mask", Run("Attention", [x, w, bias, m2], 1, num_heads=N))
    Show("Attention 2-D dummy mask [2,1] zeros", Run("Attention", [x, w, bias, i32([[0], [0]])], 1, num_heads=N))
    m3 = i32([[[1, 0, 1], [1, 1, 0], [0, 1, 1]], [[1, 1, 1], [0, 0, 1], [1, 0, 0]]])
    Show("Attention 3-D mask", Run("Attention", [x, w, bias, m3], 1, num_heads=N))
    Show("Attention 3-D mask mask_filter_value=-50 unidirectional",
         Run("Attention", [x, w, bias, m3], 1, num_heads=N, unidirectional=1, mask_filter_value=-50.0))
    past = P((2, B, N, 2, 2), 4)
    m2p = i32([[1, 0, 1, 1, 1], [1, 1, 1, 1, 0]])
    Show("Attention past + unidirectional + 2-D mask [B, P+S], present",
         Run("Attention", [x, w, bias, m2p, past], 2, num_heads=N, unidirectional=1))
    m4 = np.tril(np.ones((6, 6), np.int32))[None, None].repeat(B, 0)
    m4[1, 0, :, 0] = 0
    Show("Attention 4-D megatron mask [B,1,6,6] with past",
         Run("Attention", [x, w, bias, m4, past], 2, num_heads=N))
    Show("Attention 4-D mask too small [B,1,4,4]", Run("Attention", [x, w, bias, m4[:, :, :4, :4].copy(), past], 2, num_heads=N))
    ab = P((1, N, S, S), 5)
    Show("Attention attention_bias [1,N,S,T] + 1-D mask", Run("Attention", [x, w, bias, i32([2, 3]), None, ab], 1, num_heads=N))
    w2 = P((IN, 14), 6)
    b2 = P((14,), 7)
    Show("Attention qkv_hidden_sizes [4,4,6] scale 0.3",
         Run("Attention", [x, w2, b2], 1, num_heads=N, qkv_hidden_sizes=[4, 4, 6], scale=0.3))
    Show("Attention float16", Run("Attention", [x.astype(np.float16), w.astype(np.float16), bias.astype(np.float16), i32([2, 3])], 1, num_heads=N))
    Show("Attention bad weights [4,11]", Run("Attention", [x, P((IN, 11), 2)], 1, num_heads=N))
    Show("Attention bad 2-D mask [2,5]", Run("Attention", [x, w, bias, i32(np.ones((2, 5)))], 1, num_heads=N))


def Mha():
    L = 4
    q = P((B, S, 4), 8)
    k = P((B, L, 4), 9)
    v = P((B, L, 6), 10)
    mb = P((14,), 11)
    Show("MHA q/k/v 3-D + bias (Dv 6)", Run("MultiHeadAttention", [q, k, v, mb], 1, num_heads=N))
    kpm = i32([[1, 1, 0, 1], [0, 1, 1, 1]])
    Show("MHA 2-D key_padding_mask", Run("MultiHeadAttention", [q, k, P((B, L, 4), 10), None, kpm], 1, num_heads=N))
    Show("MHA 1-D key lengths [3, 1]", Run("MultiHeadAttention", [q, k, P((B, L, 4), 10), None, i32([3, 1])], 1, num_heads=N))
    pk = P((B, N, 2, 2), 12)
    pv = P((B, N, 2, 2), 13)
    ab = P((B, 1, S, 5), 14)
    Show("MHA self-attn past_key/past_value + attention_bias [B,1,S,T] + unidirectional, presents",
         Run("MultiHeadAttention", [q, P((B, S, 4), 9), P((B, S, 4), 10), P((12,), 11), None, ab, pk, pv], 3,
             num_heads=N, unidirectional=1))
    k4 = P((B, N, L, 2), 15)
    v4 = P((B, N, L, 2), 16)
    Show("MHA cross-attn key/value 4-D BNLH, scale 0.5, presents", Run("MultiHeadAttention", [q, k4, v4], 3, num_heads=N, scale=0.5))
    Show("MHA cross-attn key/value 4-D BNLH with bias", Run("MultiHeadAttention", [q, k4, v4, P((12,), 11)], 1, num_heads=N))
    Show("MHA qk output", Run("MultiHeadAttention", [q, k, P((B, L, 4), 10), None, kpm], 4, num_heads=N))
    h = np.float16
    Show("MHA float16 with bias and key lengths [3, 1]",
         Run("MultiHeadAttention", [q.astype(h), k.astype(h), P((B, L, 4), 10).astype(h), P((12,), 11).astype(h), i32([3, 1])], 1, num_heads=N))
    Show("MHA bad key_padding_mask [2,3]", Run("MultiHeadAttention", [q, k, P((B, L, 4), 10), None, i32(np.ones((2, 3)))], 1, num_heads=N))
    qkv = P((B, S, N, 3, 2), 17)
    Show("MHA packed qkv [B,S,N,3,H]", Run("MultiHeadAttention", [qkv], 1, num_heads=N))
    kv = P((B, L, N, 2, 2), 18)
    Show("MHA packed kv [B,L,N,2,H]", Run("MultiHeadAttention", [q, kv], 1, num_heads=N))


def Rotary():
    pos = np.array([[0, 1, 2], [2, 3, 4]], np.int64)
    cos = np.cos(np.arange(8)[:, None] * np.array([1.0, 0.1])[None]).astype(np.float32)  # max_pos 8, rot/2 = 2
    sin = np.sin(np.arange(8)[:, None] * np.array([1.0, 0.1])[None]).astype(np.float32)
    print("// cos", cos.ravel().tolist())
    print("// sin", sin.ravel().tolist())
    xr = P((B, S, 8), 19)  # 2 heads of 4
    Show("Rotary [B,S,D] num_heads 2", Run("RotaryEmbedding", [xr, pos, cos, sin], 1, num_heads=2))
    Show("Rotary [B,S,D] interleaved", Run("RotaryEmbedding", [xr, pos, cos, sin], 1, num_heads=2, interleaved=1))
    x4 = P((B, 2, S, 4), 20)
    Show("Rotary [B,N,S,H]", Run("RotaryEmbedding", [x4, pos, cos, sin], 1))
    x6 = P((B, S, 12), 21)  # 2 heads of 6, rotary dim 4
    Show("Rotary partial rotary_embedding_dim 4 of head 6", Run("RotaryEmbedding", [x6, pos, cos, sin], 1, num_heads=2, rotary_embedding_dim=4))
    Show("Rotary position_ids [1] offset 3", Run("RotaryEmbedding", [xr, np.array([3], np.int64), cos, sin], 1, num_heads=2))
    Show("Rotary position out of range 9", Run("RotaryEmbedding", [xr, np.array([[0, 1, 9], [0, 1, 2]], np.int64), cos, sin], 1, num_heads=2))


def Gqa():
    # B = 2, 2 query heads sharing 1 kv head, head size 8 (ORT wants multiples of 8).
    NQ, NKV, HD = 2, 1, 8
    q = P((B, S, NQ * HD), 22)
    k = P((B, S, NKV * HD), 23)
    v = P((B, S, NKV * HD), 24)
    def g(*ins, n_out=3, **kw):
        return Run("GroupQueryAttention", list(ins), n_out, num_heads=NQ, kv_num_heads=NKV, **kw)
    Show("GQA prompt S=3 total 3", g(q, k, v, None, None, i32([2, 2]), i32(3)))
    pk = P((B, NKV, 3, HD), 25)
    pv = P((B, NKV, 3, HD), 26)
    q1, k1, v1 = P((B, 1, NQ * HD), 27), P((B, 1, NKV * HD), 28), P((B, 1, NKV * HD), 29)
    Show("GQA decode S=1 past 3 total 4, seqlens [3, 2]", g(q1, k1, v1, pk, pv, i32([3, 2]), i32(4)))
    # ORT's CPU kernel takes S > 1 with a past only for batch 1.
    Show("GQA continue B=1 S=3 past 3 total 6, softcap 0.8",
         g(q[:1], k[:1], v[:1], pk[:1], pv[:1], i32([5]), i32(6), softcap=0.8))
    # (local_window_size with S > 1 and a past gives scrambled weights in ORT 1.32's CPU kernel; decode only.)
    Show("GQA decode local_window_size 2 softcap 0.8", g(q1, k1, v1, pk, pv, i32([3, 3]), i32(4), local_window_size=2, softcap=0.8))
    # Rotary: ORT wants head size 16 here; B = 1, 2 query heads, 1 kv head.
    freqs = np.array([1.0, 0.5, 0.25, 0.1, 0.05, 0.02, 0.01, 0.005])
    cos = np.cos(np.arange(8)[:, None] * freqs[None]).astype(np.float32)
    sin = np.sin(np.arange(8)[:, None] * freqs[None]).astype(np.float32)
    qr, kr, vr = P((1, 3, 32), 30), P((1, 3, 16), 31), P((1, 3, 16), 32)
    Show("GQA rotary prompt B=1 S=3 head 16", g(qr, kr, vr, None, None, i32([2]), i32(3), cos, sin, do_rotary=1))
    Show("GQA rotary interleaved decode B=1 past 3 head 16",
         g(qr[:, :1], kr[:, :1], vr[:, :1], P((1, 1, 3, 16), 33), P((1, 1, 3, 16), 34), i32([3]), i32(4), cos, sin,
           do_rotary=1, rotary_interleaved=1))
    packed = np.concatenate([q, k, v], axis=2)
    Show("GQA packed qkv prompt", g(packed, None, None, None, None, i32([2, 2]), i32(3)))


if __name__ == "__main__":
    which = sys.argv[1:] or ["attention", "mha", "rotary", "gqa"]
    if "attention" in which: Attention()
    if "mha" in which: Mha()
    if "rotary" in which: Rotary()
    if "gqa" in which: Gqa()
