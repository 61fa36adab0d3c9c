#!/usr/bin/env python3
"""Expected outputs for attention_test.cc, computed with onnx.reference.

Run with /work/main/.venv/bin/python; paste the printed lists into the test.
Inputs use the same deterministic pattern as nn_test_util.h's Pattern():
element i is ((i % mod) - offset) * scale.
"""
import numpy as np
import onnx
from onnx import helper, TensorProto
from onnx.reference import ReferenceEvaluator


def P(dims, mod=7, offset=3, scale=0.5, dtype=np.float32):
    n = int(np.prod(dims))
    return (((np.arange(n) % mod) - offset) * scale).astype(dtype).reshape(dims)


def run(op, inputs, attrs, opset, n_out, domain=""):
    names = [f"in{i}" if x is not None else "" for i, x in enumerate(inputs)]
    outs = [f"out{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, domain=domain, **attrs)
    g_in = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
            for n, x in zip(names, inputs) if x is not None]
    g_out = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs]
    ops = [helper.make_opsetid("", opset if domain == "" else 23)]
    if domain:
        ops.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(helper.make_graph([node], "g", g_in, g_out), opset_imports=ops)
    feeds = {n: x for n, x in zip(names, inputs) if x is not None}
    return ReferenceEvaluator(model).run(None, feeds)


def show(name, arr):
    arr = np.asarray(arr, dtype=np.float64)
    print(f"// {name} {list(arr.shape)}")
    print("{" + ", ".join(f"{v:.9g}" for v in arr.reshape(-1)) + "}")


# 1. 4-D, MHA, float mask broadcast over batch and heads, qk output mode 0.
r = run("Attention", [P([1, 2, 2, 3]), P([1, 2, 3, 3], 5, 2, 0.25), P([1, 2, 3, 2], 4, 1, 0.5), P([2, 3], 3, 1, 0.5)],
        {}, 23, 4)
show("4d_mask Y", r[0]); show("4d_mask qk", r[3])

# 2. 3-D, GQA (4 q heads, 2 kv heads), causal, past key/value, mode 3.
r = run("Attention", [P([1, 2, 8]), P([1, 2, 4], 5, 2, 0.25), P([1, 2, 6], 4, 1, 0.5), None,
                      P([1, 2, 1, 2], 3, 1, 0.5), P([1, 2, 1, 3], 6, 2, 0.25)],
        {"q_num_heads": 4, "kv_num_heads": 2, "is_causal": 1, "qk_matmul_output_mode": 3}, 23, 4)
show("3d_gqa Y", r[0]); show("3d_gqa present_key", r[1]); show("3d_gqa present_value", r[2]); show("3d_gqa qk", r[3])

# 3. Bool mask with a fully masked row, softcap and an explicit scale.
mask = np.array([[True, False, True], [False, False, False]])
r = run("Attention", [P([1, 1, 2, 2]), P([1, 1, 3, 2], 5, 2, 0.75), P([1, 1, 3, 2], 4, 1, 0.5), mask],
        {"softcap": 1.5, "scale": 0.7}, 23, 1)
show("bool_mask Y", r[0])

# 4. Opset 24: nonpad_kv_seqlen with causal (bottom-right offset per batch).
r = run("Attention", [P([2, 1, 2, 2]), P([2, 1, 4, 2], 5, 2, 0.5), P([2, 1, 4, 2], 4, 1, 0.5), None, None, None,
                      np.array([3, 1], dtype=np.int64)],
        {"is_causal": 1}, 24, 1)
show("nonpad Y", r[0])

# 5. Opset 25: sliding window, mask shorter than the key sequence (padded with -inf), mode 2.
r = run("Attention", [P([1, 1, 4, 2]), P([1, 1, 5, 2], 5, 2, 0.5), P([1, 1, 5, 2], 4, 1, 0.5), P([4, 4], 3, 1, 0.5)],
        {"left_window_size": 1, "right_window_size": 1, "qk_matmul_output_mode": 2}, 25, 4)
show("window Y", r[0]); show("window qk", r[3])

# 6. RotaryEmbedding: 3-D input, interleaved, partial rotation, position ids.
x = P([1, 2, 8])  # 2 heads of size 4
cos = P([4, 1], 5, 2, 0.3); sin = P([4, 1], 3, 1, 0.4)
r = run("RotaryEmbedding", [x, cos, sin, np.array([[3, 1]], dtype=np.int64)],
        {"num_heads": 2, "interleaved": 1, "rotary_embedding_dim": 2}, 23, 1)
show("rope_3d Y", r[0])
# 4-D, halves, no position ids.
x = P([1, 2, 2, 4]); cos = P([1, 2, 2], 5, 2, 0.3); sin = P([1, 2, 2], 3, 1, 0.4)
r = run("RotaryEmbedding", [x, cos, sin], {}, 23, 1)
show("rope_4d Y", r[0])

# 7. SwiGLU with alpha.
r = run("SwiGLU", [P([2, 3]), P([2, 3], 5, 2, 0.25)], {"alpha": 1.5}, 28, 1)
show("swiglu Y", r[0])

# 8. LinearAttention gated_delta with GQA, per-head decay, past state.
B, T, Hq, Hkv, dk, dv = 1, 3, 2, 1, 2, 3
r = run("LinearAttention", [P([B, T, Hq * dk]), P([B, T, Hkv * dk], 5, 2, 0.25), P([B, T, Hkv * dv], 4, 1, 0.5),
                            P([B, Hkv, dk, dv], 3, 1, 0.1), P([B, T, Hkv], 3, 2, 0.2), P([B, T, 1], 4, 0, 0.25)],
        {"q_num_heads": Hq, "kv_num_heads": Hkv, "update_rule": "gated_delta"}, 27, 2)
show("linear_attention Y", r[0]); show("linear_attention state", r[1])

# 9. CausalConvWithState with bias, past state and SiLU.
r = run("CausalConvWithState", [P([1, 2, 3]), P([2, 1, 3], 5, 2, 0.5), P([2], 3, 1, 0.5), P([1, 2, 2], 4, 1, 0.5)],
        {"activation": "silu"}, 27, 2)
show("causal_conv Y", r[0]); show("causal_conv state", r[1])

# 10. FlexAttention (no modifiers), GQA, explicit scale.
r = run("FlexAttention", [P([1, 2, 2, 2]), P([1, 1, 3, 2], 5, 2, 0.5), P([1, 1, 3, 3], 4, 1, 0.5)],
        {"scale": 0.5}, 23, 1, domain="ai.onnx.preview")
show("flex Y", r[0])

# 11. Extreme nonpad_kv_seqlen (checked in C++ against the plain, unmasked run
# for INT64_MAX and zeros for INT64_MIN): the plain run.
r = run("Attention", [P([2, 1, 2, 2]), P([2, 1, 4, 2], 5, 2, 0.5), P([2, 1, 4, 2], 4, 1, 0.5)], {}, 23, 1)
show("plain Y", r[0])
