// Operator family: ONNX Runtime's com.microsoft GroupQueryAttention, the
// decoder attention with a KV cache that onnxruntime-genai's models use. Split
// from attention_contrib.cc (com.microsoft Attention, MultiHeadAttention,
// RotaryEmbedding) to keep each file readable whole; the helpers they share
// are in attention_contrib_util.h. As there, ONNX Runtime is the reference
// and everything is computed in float.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/attention_contrib_util.h"
#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

using namespace attention_contrib_util;  // NOLINT: shared with the other contrib attention ops

// ---- com.microsoft GroupQueryAttention ---------------------------------------------------------------------
//
// Decoder attention with a KV cache where groups of N / Nkv query heads share one key/value head.
// Inputs: 0 query [B, S, N * H] (or packed [B, S, (N + 2 Nkv) * H] with key and value omitted);
// 1 key, 2 value [B, S, Nkv * H]; 3 past_key, 4 past_value [B, Nkv, P_buffer, H] (optional);
// 5 seqlens_k (int32 [B]: each batch's total length - 1); 6 total_sequence_length (int32 scalar);
// 7 cos_cache, 8 sin_cache [max_position, R / 2] with do_rotary; 9 position_ids (optional).
// Per batch b: total_b = seqlens_k[b] + 1, past_b = total_b - S (0 for the first prompt, when S equals
// total_sequence_length); the new keys/values go to positions [past_b, past_b + S) of the present
// cache [B, Nkv, max(P_buffer, total_sequence_length), H] after the past ones, and query s sees keys
// [0, past_b + s] (only the last local_window_size of them when it is positive, as ONNX Runtime 1.32
// does). Always causal.
// Not supported: attention_bias, head_sink, quantized caches, q/k norms, query_seqlens, smooth_softmax,
// output_qk.

// Rotates (in place) the first R values of each head of x [B, S, heads * H] at the given positions.
Status RotateHeads(const KernelContext& ctx, std::vector<float>& x, int64_t B, int64_t S, int64_t heads, int64_t H,
                   const std::vector<int64_t>& positions, const std::vector<float>& cos_cache,
                   const std::vector<float>& sin_cache, int64_t max_pos, int64_t half, bool interleaved) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      const int64_t p = positions[static_cast<size_t>(b * S + s)];
      if (p < 0 || p >= max_pos)
        return ctx.Error("rotary position " + std::to_string(p) + " is outside the cache [0, " + std::to_string(max_pos) + ")");
      const float* c = cos_cache.data() + p * half;
      const float* sn = sin_cache.data() + p * half;
      for (int64_t n = 0; n < heads; ++n) {
        float* v = x.data() + ((b * S + s) * heads + n) * H;
        for (int64_t i = 0; i < half; ++i) {
          const int64_t a = interleaved ? 2 * i : i, z = interleaved ? 2 * i + 1 : i + half;
          const float va = v[a], vz = v[z];
          v[a] = va * c[i] - vz * sn[i];
          v[z] = vz * c[i] + va * sn[i];
        }
      }
    }
  return Status::Ok();
}

Status GroupQueryAttentionKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* query, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(RequireFloatLike(ctx, 0, *query));
  const DataType type = query->dtype();
  NEE_ASSIGN_OR_RETURN(int64_t N, NumHeads(ctx.node()));
  NEE_ASSIGN_OR_RETURN(int64_t Nkv, ctx.node().GetInt("kv_num_heads"));
  if (Nkv <= 0 || N % Nkv != 0)
    return ctx.Error("kv_num_heads " + std::to_string(Nkv) + " must be positive and divide num_heads " + std::to_string(N));
  for (size_t i = 10; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i)) return NotImplemented(ctx.node().Describe() + ": input " + std::to_string(i) + " is not supported");
  // smooth_softmax is declared with default -1; ONNX Runtime smooths only at
  // 1 (absent, -1 and 0 give the same result).
  NEE_ASSIGN_OR_RETURN(int64_t smooth, ctx.node().GetInt("smooth_softmax", -1));
  NEE_ASSIGN_OR_RETURN(int64_t qk_output, ctx.node().GetInt("qk_output", 0));
  if (smooth == 1 || qk_output != 0 || (ctx.num_outputs() > 3 && ctx.wants_output(3)))
    return NotImplemented(ctx.node().Describe() + ": smooth_softmax / output_qk are not supported");
  if (query->rank() != 3) return ctx.InputError(0, "(query) must be 3-D, got " + DimsToString(query->dims()));
  const int64_t B = query->dim(0), S = query->dim(1);
  const bool packed = !ctx.has_input(1);
  const int64_t width = query->dim(2);
  const int64_t H = packed ? width / (N + 2 * Nkv) : width / N;
  if (H <= 0 || (packed ? width != (N + 2 * Nkv) * H : width != N * H))
    return ctx.InputError(0, "(query) width " + std::to_string(width) + " does not split into heads");
  NEE_ASSIGN_OR_RETURN(std::vector<float> qf, FloatsOf(ctx, 0, type));
  // Split into q [B, S, N*H], k / v [B, S, Nkv*H].
  std::vector<float> q, k, v;
  if (packed) {
    if (ctx.has_input(2)) return ctx.Error("value given without key");
    const int64_t qw = N * H, kw = Nkv * H;
    q.resize(static_cast<size_t>(B * S * qw));
    k.resize(static_cast<size_t>(B * S * kw));
    v.resize(static_cast<size_t>(B * S * kw));
    for (int64_t r = 0; r < B * S; ++r) {
      const float* src = qf.data() + r * width;
      std::copy(src, src + qw, q.data() + r * qw);
      std::copy(src + qw, src + qw + kw, k.data() + r * kw);
      std::copy(src + qw + kw, src + width, v.data() + r * kw);
    }
  } else {
    q = std::move(qf);
    NEE_ASSIGN_OR_RETURN(const Tensor* key, ctx.InputTensor(1));
    NEE_ASSIGN_OR_RETURN(const Tensor* value, ctx.InputTensor(2));
    NEE_RETURN_IF_ERROR(CheckDims(ctx, 1, *key, {B, S, Nkv * H}, "key"));
    NEE_RETURN_IF_ERROR(CheckDims(ctx, 2, *value, {B, S, Nkv * H}, "value"));
    NEE_ASSIGN_OR_RETURN(k, FloatsOf(ctx, 1, type));
    NEE_ASSIGN_OR_RETURN(v, FloatsOf(ctx, 2, type));
  }
  // Cache geometry.
  int64_t past_buffer = 0;
  std::vector<float> past_k, past_v;
  if (ctx.has_input(3) != ctx.has_input(4)) return ctx.Error("past_key and past_value must be given together");
  if (ctx.has_input(3)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* pk, ctx.InputTensor(3));
    if (pk->rank() != 4 || pk->dim(0) != B || pk->dim(1) != Nkv || pk->dim(3) != H)
      return ctx.InputError(3, "(past_key) must be [" + std::to_string(B) + ", " + std::to_string(Nkv) + ", past, " +
                                   std::to_string(H) + "], got " + DimsToString(pk->dims()));
    past_buffer = pk->dim(2);
    NEE_ASSIGN_OR_RETURN(const Tensor* pv, ctx.InputTensor(4));
    NEE_RETURN_IF_ERROR(CheckDims(ctx, 4, *pv, pk->dims(), "past_value"));
    NEE_ASSIGN_OR_RETURN(past_k, FloatsOf(ctx, 3, type));
    NEE_ASSIGN_OR_RETURN(past_v, FloatsOf(ctx, 4, type));
  }
  NEE_ASSIGN_OR_RETURN(const Tensor* seqlens, ctx.InputTensor(5));
  NEE_ASSIGN_OR_RETURN(const Tensor* total_t, ctx.InputTensor(6));
  if (seqlens->num_elements() != B) return ctx.InputError(5, "(seqlens_k) must hold " + std::to_string(B) + " values, got " + DimsToString(seqlens->dims()));
  if (total_t->num_elements() != 1) return ctx.InputError(6, "(total_sequence_length) must be a scalar");
  const int64_t total_len = static_cast<int64_t>(ReadAsDouble(*total_t, 0));
  // The new tokens follow at most the whole past buffer, so the total cannot exceed both together.
  if (total_len < S || total_len > past_buffer + S)
    return ctx.InputError(6, "(total_sequence_length) " + std::to_string(total_len) + " must lie in [" + std::to_string(S) +
                                 ", " + std::to_string(past_buffer + S) + "] (sequence length plus past buffer)");
  const int64_t present_len = std::max(past_buffer, total_len);
  const bool first_prompt = S == total_len;
  std::vector<int64_t> past_len(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t total_b = static_cast<int64_t>(ReadAsDouble(*seqlens, b)) + 1;
    const int64_t p = first_prompt ? 0 : total_b - S;
    if (total_b < 1 || total_b > present_len || p < 0 || p > past_buffer || p + S > present_len || (first_prompt && total_b != S))
      return ctx.InputError(5, "(seqlens_k) " + std::to_string(total_b - 1) + " for batch " + std::to_string(b) +
                                   " does not fit S = " + std::to_string(S) + ", the past cache (" + std::to_string(past_buffer) +
                                   ") and total_sequence_length " + std::to_string(total_len) +
                                   (first_prompt ? " (padded prompts are not supported)" : ""));
    past_len[static_cast<size_t>(b)] = p;
  }
  // Rotary embedding of q and k at each token's position.
  NEE_ASSIGN_OR_RETURN(int64_t do_rotary, ctx.node().GetInt("do_rotary", 0));
  if (do_rotary != 0) {
    if (!ctx.has_input(7) || !ctx.has_input(8)) return ctx.Error("do_rotary needs cos_cache and sin_cache");
    NEE_ASSIGN_OR_RETURN(const Tensor* cos_t, ctx.InputTensor(7));
    NEE_ASSIGN_OR_RETURN(const Tensor* sin_t, ctx.InputTensor(8));
    if (cos_t->rank() != 2 || sin_t->dims() != cos_t->dims() || cos_t->dim(1) * 2 > H || cos_t->dim(1) <= 0)
      return ctx.InputError(7, "(cos_cache / sin_cache) must both be [max_position, at most head_size / 2], got " +
                                   DimsToString(cos_t->dims()) + " and " + DimsToString(sin_t->dims()));
    NEE_ASSIGN_OR_RETURN(std::vector<float> cf, FloatsOf(ctx, 7, type));
    NEE_ASSIGN_OR_RETURN(std::vector<float> sf, FloatsOf(ctx, 8, type));
    std::vector<int64_t> positions(static_cast<size_t>(B * S));
    if (ctx.has_input(9)) {
      NEE_ASSIGN_OR_RETURN(const Tensor* pos, ctx.InputTensor(9));
      if (pos->num_elements() != B * S) return ctx.InputError(9, "(position_ids) must be [B, S], got " + DimsToString(pos->dims()));
      for (int64_t i = 0; i < B * S; ++i) positions[static_cast<size_t>(i)] = static_cast<int64_t>(ReadAsDouble(*pos, i));
    } else {
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < S; ++s) positions[static_cast<size_t>(b * S + s)] = past_len[static_cast<size_t>(b)] + s;
    }
    NEE_ASSIGN_OR_RETURN(int64_t interleaved, ctx.node().GetInt("rotary_interleaved", 0));
    NEE_RETURN_IF_ERROR(RotateHeads(ctx, q, B, S, N, H, positions, cf, sf, cos_t->dim(0), cos_t->dim(1), interleaved != 0));
    NEE_RETURN_IF_ERROR(RotateHeads(ctx, k, B, S, Nkv, H, positions, cf, sf, cos_t->dim(0), cos_t->dim(1), interleaved != 0));
  }
  // Present caches: the past prefix, then the new tokens, zeros after.
  std::vector<float> present_k(static_cast<size_t>(B * Nkv * present_len * H), 0.0f), present_v(present_k.size(), 0.0f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < Nkv; ++n) {
      const int64_t p = past_len[static_cast<size_t>(b)];
      float* dk = present_k.data() + (b * Nkv + n) * present_len * H;
      float* dv = present_v.data() + (b * Nkv + n) * present_len * H;
      if (p > 0) {
        std::copy_n(past_k.data() + (b * Nkv + n) * past_buffer * H, p * H, dk);
        std::copy_n(past_v.data() + (b * Nkv + n) * past_buffer * H, p * H, dv);
      }
      for (int64_t s = 0; s < S; ++s) {
        std::copy_n(k.data() + ((b * S + s) * Nkv + n) * H, H, dk + (p + s) * H);
        std::copy_n(v.data() + ((b * S + s) * Nkv + n) * H, H, dv + (p + s) * H);
      }
    }
  NEE_ASSIGN_OR_RETURN(float scale, ScaleOf(ctx, H));
  NEE_ASSIGN_OR_RETURN(float softcap, ctx.node().GetFloat("softcap", 0.0f));
  NEE_ASSIGN_OR_RETURN(int64_t window, ctx.node().GetInt("local_window_size", -1));
  std::vector<float> out(static_cast<size_t>(B * S * N * H), 0.0f);
  const int64_t group = N / Nkv;
  ctx.ParallelFor(B * N, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> probs(static_cast<size_t>(present_len));
    for (int64_t bn = begin; bn < end; ++bn) {
      const int64_t b = bn / N, n = bn % N, kvh = n / group;
      const float* kb = present_k.data() + (b * Nkv + kvh) * present_len * H;
      const float* vb = present_v.data() + (b * Nkv + kvh) * present_len * H;
      for (int64_t s = 0; s < S; ++s) {
        const float* qs = q.data() + ((b * S + s) * N + n) * H;
        const int64_t causal_len = past_len[static_cast<size_t>(b)] + s + 1;
        const int64_t first = window > 0 ? std::max<int64_t>(0, causal_len - window) : 0;
        float max_score = -std::numeric_limits<float>::infinity();
        for (int64_t t = first; t < causal_len; ++t) {
          double dot = 0;
          for (int64_t h = 0; h < H; ++h) dot += static_cast<double>(qs[h]) * kb[t * H + h];
          float score = scale * static_cast<float>(dot);
          if (softcap > 0.0f) score = softcap * std::tanh(score / softcap);
          probs[static_cast<size_t>(t)] = score;
          max_score = std::max(max_score, score);
        }
        double sum = 0;
        for (int64_t t = first; t < causal_len; ++t) {
          probs[static_cast<size_t>(t)] = std::exp(probs[static_cast<size_t>(t)] - max_score);
          sum += probs[static_cast<size_t>(t)];
        }
        float* o = out.data() + ((b * S + s) * N + n) * H;
        for (int64_t h = 0; h < H; ++h) {
          double acc = 0;
          for (int64_t t = first; t < causal_len; ++t) acc += static_cast<double>(probs[static_cast<size_t>(t)]) * vb[t * H + h];
          o[h] = sum > 0 ? static_cast<float>(acc / sum) : 0.0f;
        }
      }
    }
  });
  NEE_RETURN_IF_ERROR(WriteOutput(ctx, 0, type, {B, S, N * H}, out));
  if (ctx.num_outputs() > 1 && ctx.wants_output(1)) NEE_RETURN_IF_ERROR(WriteOutput(ctx, 1, type, {B, Nkv, present_len, H}, present_k));
  if (ctx.num_outputs() > 2 && ctx.wants_output(2)) NEE_RETURN_IF_ERROR(WriteOutput(ctx, 2, type, {B, Nkv, present_len, H}, present_v));
  return Status::Ok();
}

Status InferGroupQueryAttention(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* q, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(int64_t heads, NumHeads(ctx.node));
  NEE_ASSIGN_OR_RETURN(int64_t kv_heads, ctx.node.GetInt("kv_num_heads"));
  const bool packed = !ctx.has_input(1);
  const Dim width = DimOf(q, 2);
  const Dim head = DivBy(width, packed ? heads + 2 * kv_heads : heads);
  std::optional<Shape> out;
  if (RankOf(ctx, 0) == 3) out = Shape{DimOf(q, 0), DimOf(q, 1), Times(head, heads)};
  ctx.output_types[0] = TypeInfo::Tensor(q->elem_type, out);
  // present length = max(past buffer, total_sequence_length): known only from values.
  Dim present = Dim::Unknown();
  const Tensor* total = ctx.input_value(6);
  const Dim past = ctx.has_input(3) ? DimOf(&ctx.input_type(3), 2) : Dim::Known(0);
  if (total != nullptr && total->num_elements() == 1 && past.known())
    present = Dim::Known(std::max<int64_t>(past.value, static_cast<int64_t>(ReadAsDouble(*total, 0))));
  for (size_t i = 1; i < 3 && i < ctx.num_outputs(); ++i)
    ctx.output_types[i] = TypeInfo::Tensor(q->elem_type, Shape{DimOf(q, 0), Dim::Known(kv_heads), present, head});
  return Status::Ok();
}

}  // namespace

void RegisterGroupQueryAttentionOps(OpRegistry& registry) {
  registry.RegisterVersions(kMs, "GroupQueryAttention", {1}, InferGroupQueryAttention, GroupQueryAttentionKernel);
}

}  // namespace nee
