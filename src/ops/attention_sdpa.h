// nee's fused scaled-dot-product attention (domain ai.nee, op
// ScaledDotProductAttention, since version 1), which the optimizer
// (opt/fuse_attention.cc) writes for the MatMul -> scale -> mask -> Softmax ->
// MatMul chains that PyTorch exports for multi-head attention:
//
//   inputs  0 query [B, S, N*H], 1 key [B, L, N*H], 2 value [B, L, N*Hv] (float32),
//           3 bias (optional, float32, rank <= 4, broadcastable to [B, N, S, L])
//   attrs   num_heads N (required), scale (default 1/sqrt(H)),
//           causal (default 0; 1: query s sees only keys l <= s + L - S, so
//           every query sees at least one key; needs S <= L)
//           key and value may both be absent: then query is [B, S, 3*N*H], q, k
//           and v side by side along its last axis (self-attention, L = S,
//           Hv = H), as a fused q/k/v projection writes them, so the fusion
//           reads them there instead of through a Split or Slices (copies)
//   output  [B, S, N*Hv]: per head n, softmax(scale * Q_n K_n^T + bias[b, n]) V_n,
//           Q_n = query[b, :, n*H:(n+1)*H] and likewise for K_n, V_n; with
//           causal, the keys a query does not see get probability exactly 0
//           (what a causal mask of -FLT_MAX or -inf gives the unfused graph).
//
// The geometry and its validation live here so that the reference kernel and
// the fast one (ep/cpu/attention_fast.cc) accept and reject the same inputs.
#pragma once
#include <array>
#include <cstdint>

#include "ops/op_schema.h"

namespace nee {

constexpr const char* kNeeDomain = "ai.nee";

struct SdpaGeometry {
  // How many keys query s sees: all L, or with `causal` the first s + L - S + 1.
  int64_t VisibleKeys(int64_t s) const { return causal ? s + kv_len - q_len + 1 : kv_len; }

  int64_t batch = 0, heads = 0, q_len = 0, kv_len = 0, head = 0, v_head = 0;
  float scale = 1.f;
  bool causal = false;
  const float* query = nullptr;  // (b, s) of the query at query + (b * q_len + s) * q_ld
  const float* key = nullptr;    // likewise with kv_len and k_ld
  const float* value = nullptr;  // likewise with kv_len and v_ld
  int64_t q_ld = 0, k_ld = 0, v_ld = 0;  // between consecutive tokens: N*H (N*Hv), or 3*N*H packed
  const float* bias = nullptr;          // nullptr without a bias
  std::array<int64_t, 4> bias_stride{};  // per [B, N, S, L] axis; 0 where broadcast
};

// Validates the inputs and attributes (float32, ranks, matching dims, bias
// broadcastable); a Status error for anything else, never a crash.
Result<SdpaGeometry> SdpaGeometryOf(const KernelContext& ctx);

}  // namespace nee
