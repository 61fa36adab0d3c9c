// Operator family: ONNX Runtime's com.microsoft attention contrib ops, as its transformer optimizer
// (onnxruntime.transformers.optimizer) writes them into BERT / GPT-2 / T5-like models:
//   Attention           fused QKV projection + multi-head attention (mask_index, past/present,
//                       attention_bias, unidirectional, qkv_hidden_sizes)
//   MultiHeadAttention  attention on given Q, K, V (3-D, packed QKV / KV, or BNSH key/value),
//                       key_padding_mask, attention_bias, past_key/past_value
//   RotaryEmbedding     rotary position embedding with cos/sin caches
// ONNX Runtime is the reference implementation; the rules here follow its CPU kernels (mask forms,
// mask_filter_value, scale default 1/sqrt(head_size), causal offset by the past length).
//
// Everything is computed in float (float16 / bfloat16 via float), as ONNX Runtime's CPU kernels do.
// Work is split over (batch, head) pairs, each writing its own output slice, so results do not
// depend on the thread count.
//
// GroupQueryAttention is in group_query_attention.cc; the helpers it shares
// with these ops are in attention_contrib_util.h.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/attention_contrib_util.h"
#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

using namespace attention_contrib_util;  // NOLINT: shared with GroupQueryAttention

// ---- Shared helpers -------------------------------------------------------------------------------

// The geometry of one attention: B batches, N heads, S queries, T = P + L keys (P from the past).
struct AttentionShape {
  int64_t batch = 0, heads = 0, q_len = 0, past = 0, total = 0, qk_head = 0, v_head = 0;
};

// The additive mask [B, S, T] (0 to keep, mask_filter_value to drop) built from mask_index /
// key_padding_mask and the causal rule; empty when neither applies. Mask forms (ONNX Runtime's CPU
// kernels): [B] key lengths (right padding), [2B] end then start positions (left padding too),
// [B, T] key padding (1 keep, 0 drop), [1, 1] / [B, 1] dummy (no mask), [B, S, T] full mask.
// Lengths beyond T are clamped to T; negative lengths are errors, as in ONNX Runtime.
Result<std::vector<float>> BuildAdditiveMask(const KernelContext& ctx, size_t input, const AttentionShape& g,
                                             bool unidirectional, float filter) {
  const int64_t B = g.batch, S = g.q_len, T = g.total;
  const bool causal = unidirectional && S > 1;
  const Tensor* mask = nullptr;
  if (ctx.has_input(input)) {
    NEE_ASSIGN_OR_RETURN(mask, ctx.InputTensor(input));
    const DataType mt = mask->dtype();
    if (mt != DataType::kInt32 && mt != DataType::kInt64 && mt != DataType::kBool)
      return ctx.InputError(input, std::string("(mask) must be int32, got ") + DataTypeName(mt));
  }
  std::vector<float> out;
  if (mask == nullptr && !causal) return out;
  out.assign(static_cast<size_t>(B * S * T), 0.0f);
  if (mask != nullptr) {
    const std::vector<int64_t>& d = mask->dims();
    auto value = [&](int64_t i) { return static_cast<int64_t>(ReadAsDouble(*mask, i)); };
    // Fills the mask row of batch b (shared by all S queries) from keep(t).
    auto fill_rows = [&](int64_t b, auto keep) {
      for (int64_t s = 0; s < S; ++s)
        for (int64_t t = 0; t < T; ++t)
          if (!keep(t)) out[static_cast<size_t>((b * S + s) * T + t)] = filter;
    };
    if (d.size() == 1 && (d[0] == B || d[0] == 2 * B)) {
      const bool has_start = d[0] == 2 * B && B > 0;
      for (int64_t b = 0; b < B; ++b) {
        const int64_t end = value(b), start = has_start ? value(B + b) : 0;
        if (end < 0 || start < 0)
          return ctx.InputError(input, "(mask_index) holds a negative position " +
                                           std::to_string(std::min(end, start)) + " for batch " + std::to_string(b));
        const int64_t e = std::min(end, T), st = std::min(start, T);
        fill_rows(b, [&](int64_t t) { return t < e && t >= st; });
      }
    } else if (d.size() == 2 && d[1] == 1 && (d[0] == 1 || d[0] == B) && T != 1) {
      // A dummy mask: the same as none.
    } else if (d.size() == 2 && d[0] == B && d[1] == T) {
      for (int64_t b = 0; b < B; ++b) fill_rows(b, [&](int64_t t) { return value(b * T + t) > 0; });
    } else if (d.size() == 3 && d[0] == B && d[1] == S && d[2] == T) {
      for (int64_t i = 0; i < B * S * T; ++i)
        if (value(i) <= 0) out[static_cast<size_t>(i)] = filter;
    } else if (d.size() == 4) {
      return NotImplemented(ctx.node().Describe() + ": input " + std::to_string(input) +
                            ": the 4-D (Megatron) mask is not supported (nor by ONNX Runtime's CPU kernel)");
    } else {
      return ctx.InputError(input, "(mask) has shape " + DimsToString(d) + "; expected [" + std::to_string(B) +
                                       "], [" + std::to_string(2 * B) + "], [" + std::to_string(B) + ", " +
                                       std::to_string(T) + "] or [" + std::to_string(B) + ", " +
                                       std::to_string(S) + ", " + std::to_string(T) + "]");
    }
  }
  if (causal) {
    // Query s sits at position P + s and sees keys up to it. ONNX Runtime hides later keys with the
    // lowest float whatever mask_filter_value says, so they stay below masked-but-earlier keys.
    const float hidden = std::numeric_limits<float>::lowest();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t t = g.past + s + 1; t < T; ++t) out[static_cast<size_t>((b * S + s) * T + t)] = hidden;
  }
  return out;
}

// attention_bias: [B or 1, N or 1, S, T], added to the scaled scores.
struct AttentionBias {
  std::vector<float> values;
  int64_t batch_stride = 0, head_stride = 0;  // 0 where broadcast
};

Result<AttentionBias> ReadAttentionBias(const KernelContext& ctx, size_t input, DataType type,
                                        const AttentionShape& g) {
  AttentionBias bias;
  if (!ctx.has_input(input)) return bias;
  NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(input));
  const std::vector<int64_t>& d = t->dims();
  if (d.size() != 4 || (d[0] != 1 && d[0] != g.batch) || (d[1] != 1 && d[1] != g.heads) || d[2] != g.q_len ||
      d[3] != g.total)
    return ctx.InputError(input, "(attention_bias) must have shape [" + std::to_string(g.batch) + " or 1, " +
                                     std::to_string(g.heads) + " or 1, " + std::to_string(g.q_len) + ", " +
                                     std::to_string(g.total) + "], got " + DimsToString(d));
  NEE_ASSIGN_OR_RETURN(bias.values, FloatsOf(ctx, input, type));
  const int64_t plane = g.q_len * g.total;
  bias.head_stride = d[1] == 1 ? 0 : plane;
  bias.batch_stride = d[0] == 1 ? 0 : d[1] * plane;
  return bias;
}

// The attention proper. q [B, N, S, H], k [B, N, T, H], v [B, N, T, Hv] -> out [B, S, N * Hv];
// scores = scale * q k^T + attention_bias + mask, softmax over T. qk (optional) receives the
// scores before the softmax, [B, N, S, T].
void Attend(const KernelContext& ctx, const AttentionShape& g, const std::vector<float>& q,
            const std::vector<float>& k, const std::vector<float>& v, const std::vector<float>& mask,
            const AttentionBias& bias, float scale, std::vector<float>* out, std::vector<float>* qk) {
  const int64_t B = g.batch, N = g.heads, S = g.q_len, T = g.total, H = g.qk_head, Hv = g.v_head;
  out->assign(static_cast<size_t>(B * S * N * Hv), 0.0f);
  if (qk != nullptr) qk->assign(static_cast<size_t>(B * N * S * T), 0.0f);
  ctx.ParallelFor(B * N, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(static_cast<size_t>(T));
    for (int64_t bn = begin; bn < end; ++bn) {
      const int64_t b = bn / N, n = bn % N;
      const float* qb = q.data() + bn * S * H;
      const float* kb = k.data() + bn * T * H;
      const float* vb = v.data() + bn * T * Hv;
      for (int64_t s = 0; s < S; ++s) {
        float max_score = -std::numeric_limits<float>::infinity();
        for (int64_t t = 0; t < T; ++t) {
          double dot = 0;
          for (int64_t h = 0; h < H; ++h) dot += static_cast<double>(qb[s * H + h]) * kb[t * H + h];
          float score = scale * static_cast<float>(dot);
          if (!bias.values.empty())
            score += bias.values[static_cast<size_t>(b * bias.batch_stride + n * bias.head_stride + s * T + t)];
          if (!mask.empty()) score += mask[static_cast<size_t>((b * S + s) * T + t)];
          if (qk != nullptr) (*qk)[static_cast<size_t>((bn * S + s) * T + t)] = score;
          scores[static_cast<size_t>(t)] = score;
          max_score = std::max(max_score, score);
        }
        double sum = 0;
        for (int64_t t = 0; t < T; ++t) {
          const float e = std::exp(scores[static_cast<size_t>(t)] - max_score);
          scores[static_cast<size_t>(t)] = e;
          sum += e;
        }
        float* o = out->data() + ((b * S + s) * N + n) * Hv;
        for (int64_t h = 0; h < Hv; ++h) {
          double acc = 0;
          for (int64_t t = 0; t < T; ++t) acc += static_cast<double>(scores[static_cast<size_t>(t)]) * vb[t * Hv + h];
          o[h] = sum > 0 ? static_cast<float>(acc / sum) : 0.0f;
        }
      }
    }
  });
}

// Prepends past [B, N, P, H] (may be null with P = 0) to cur [B, N, L, H]: [B, N, P + L, H].
std::vector<float> ConcatPast(const float* past, const std::vector<float>& cur, int64_t BN, int64_t P, int64_t L,
                              int64_t H) {
  std::vector<float> all(static_cast<size_t>(BN * (P + L) * H));
  for (int64_t i = 0; i < BN; ++i) {
    float* dst = all.data() + i * (P + L) * H;
    if (P > 0) std::copy(past + i * P * H, past + (i + 1) * P * H, dst);
    std::copy(cur.data() + i * L * H, cur.data() + (i + 1) * L * H, dst + P * H);
  }
  return all;
}

// Rearranges rows of `src` [B, L, *] holding head n's H values at column offset + n * H (row width
// `row`) into [B, N, L, H], adding bias[offset + n * H + h] when given.
std::vector<float> SplitHeads(const float* src, int64_t B, int64_t L, int64_t N, int64_t H, int64_t row,
                              int64_t offset, const float* bias, int64_t bias_offset) {
  std::vector<float> dst(static_cast<size_t>(B * N * L * H));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t l = 0; l < L; ++l)
        for (int64_t h = 0; h < H; ++h) {
          float x = src[(b * L + l) * row + offset + n * H + h];
          if (bias != nullptr) x += bias[bias_offset + n * H + h];
          dst[static_cast<size_t>(((b * N + n) * L + l) * H + h)] = x;
        }
  return dst;
}

// ---- com.microsoft Attention ---------------------------------------------------------------------------
//
// Inputs: 0 input [B, S, In]; 1 weights [In, Dq + Dk + Dv]; 2 bias [Dq + Dk + Dv] (optional);
// 3 mask_index (optional, int32, forms above); 4 past [2, B, N, P, H] (optional); 5 attention_bias
// [B or 1, N or 1, S, P + S] (optional); 6 past_sequence_length (with past_present_share_buffer).
// Outputs: 0 output [B, S, Dv]; 1 present [2, B, N, P + S, H].
// Dq = Dk = Dv = weights' width / 3 unless qkv_hidden_sizes says otherwise.

struct AttentionSizes {
  int64_t q = 0, k = 0, v = 0;
};

Result<AttentionSizes> QkvSizes(const Node& node, int64_t weights_width) {
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, node.GetInts("qkv_hidden_sizes", {}));
  if (sizes.empty()) {
    if (weights_width < 0) return AttentionSizes{-1, -1, -1};
    if (weights_width % 3 != 0)
      return InvalidArgument(node.Describe() + ": input 1 (weights) width " + std::to_string(weights_width) +
                             " must be a multiple of 3 when qkv_hidden_sizes is not given");
    return AttentionSizes{weights_width / 3, weights_width / 3, weights_width / 3};
  }
  if (sizes.size() != 3 || sizes[0] <= 0 || sizes[1] <= 0 || sizes[2] <= 0 || sizes[0] != sizes[1])
    return InvalidArgument(node.Describe() + ": qkv_hidden_sizes must hold 3 positive sizes with Q's equal to K's, got " +
                           DimsToString(sizes));
  if (weights_width >= 0 && sizes[0] + sizes[1] + sizes[2] != weights_width)
    return InvalidArgument(node.Describe() + ": qkv_hidden_sizes " + DimsToString(sizes) + " do not add up to the weights' width " +
                           std::to_string(weights_width));
  return AttentionSizes{sizes[0], sizes[1], sizes[2]};
}

Status InferContribAttention(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* w, InputTensorType(ctx, 1));
  const Dim width = DimOf(w, 1);
  NEE_ASSIGN_OR_RETURN(AttentionSizes sizes, QkvSizes(ctx.node, width.known() ? width.value : -1));
  NEE_ASSIGN_OR_RETURN(int64_t heads, NumHeads(ctx.node));
  const bool rank_known = x->shape && x->shape->size() == 3;
  std::optional<Shape> out;
  if (rank_known) out = Shape{DimOf(x, 0), DimOf(x, 1), sizes.v > 0 ? Dim::Known(sizes.v) : Dim::Unknown()};
  ctx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  if (ctx.num_outputs() > 1) {
    const TypeInfo* past = ctx.has_input(4) ? &ctx.input_type(4) : nullptr;
    NEE_ASSIGN_OR_RETURN(bool share, ctx.node.GetInt("past_present_share_buffer", 0));
    Dim total = past == nullptr ? DimOf(x, 1) : (share ? DimOf(past, 3) : Plus(DimOf(past, 3), DimOf(x, 1)));
    ctx.output_types[1] = TypeInfo::Tensor(
        x->elem_type, Shape{Dim::Known(2), DimOf(x, 0), Dim::Known(heads), total,
                            sizes.k > 0 ? DivBy(Dim::Known(sizes.k), heads) : Dim::Unknown()});
  }
  return Status::Ok();
}

Status ContribAttentionKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* w, ctx.InputTensor(1));
  NEE_RETURN_IF_ERROR(RequireFloatLike(ctx, 0, *x));
  const DataType type = x->dtype();
  if (x->rank() != 3) return ctx.InputError(0, "(input) must be 3-D [batch, sequence, hidden], got " + DimsToString(x->dims()));
  const int64_t B = x->dim(0), S = x->dim(1), In = x->dim(2);
  if (w->rank() != 2 || w->dim(0) != In)
    return ctx.InputError(1, "(weights) must be 2-D [" + std::to_string(In) + ", Dq + Dk + Dv], got " + DimsToString(w->dims()));
  NEE_ASSIGN_OR_RETURN(AttentionSizes sizes, QkvSizes(ctx.node(), w->dim(1)));
  NEE_ASSIGN_OR_RETURN(int64_t N, NumHeads(ctx.node()));
  if (sizes.q % N != 0 || sizes.v % N != 0)
    return ctx.Error("hidden sizes " + std::to_string(sizes.q) + " / " + std::to_string(sizes.v) +
                     " must be multiples of num_heads " + std::to_string(N));
  NEE_ASSIGN_OR_RETURN(int64_t do_rotary, ctx.node().GetInt("do_rotary", 0));
  NEE_ASSIGN_OR_RETURN(int64_t share_buffer, ctx.node().GetInt("past_present_share_buffer", 0));
  if (do_rotary != 0) return NotImplemented(ctx.node().Describe() + ": do_rotary is not supported");
  if (share_buffer != 0) return NotImplemented(ctx.node().Describe() + ": past_present_share_buffer is not supported");
  const int64_t H = sizes.q / N, Hv = sizes.v / N, width = w->dim(1);

  NEE_ASSIGN_OR_RETURN(std::vector<float> xf, FloatsOf(ctx, 0, type));
  NEE_ASSIGN_OR_RETURN(std::vector<float> wf, FloatsOf(ctx, 1, type));
  std::vector<float> bf;
  if (ctx.has_input(2)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* bias, ctx.InputTensor(2));
    NEE_RETURN_IF_ERROR(CheckDims(ctx, 2, *bias, {width}, "bias"));
    NEE_ASSIGN_OR_RETURN(bf, FloatsOf(ctx, 2, type));
  }
  // The projection [B*S, In] x [In, width] (+ bias), accumulated in double.
  std::vector<float> proj(static_cast<size_t>(B * S * width));
  ctx.ParallelFor(B * S, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(width));
    for (int64_t r = begin; r < end; ++r) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t i = 0; i < In; ++i) {
        const double xv = xf[static_cast<size_t>(r * In + i)];
        const float* wrow = wf.data() + i * width;
        for (int64_t c = 0; c < width; ++c) acc[static_cast<size_t>(c)] += xv * wrow[c];
      }
      for (int64_t c = 0; c < width; ++c)
        proj[static_cast<size_t>(r * width + c)] =
            static_cast<float>(acc[static_cast<size_t>(c)] + (bf.empty() ? 0.0 : bf[static_cast<size_t>(c)]));
    }
  });
  std::vector<float> q = SplitHeads(proj.data(), B, S, N, H, width, 0, nullptr, 0);
  std::vector<float> k = SplitHeads(proj.data(), B, S, N, H, width, sizes.q, nullptr, 0);
  std::vector<float> v = SplitHeads(proj.data(), B, S, N, Hv, width, sizes.q + sizes.k, nullptr, 0);

  AttentionShape g{B, N, S, 0, S, H, Hv};
  std::vector<float> past;
  if (ctx.has_input(4)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* p, ctx.InputTensor(4));
    if (H != Hv) return ctx.InputError(4, "(past) needs equal Q/K and V head sizes, got " + std::to_string(H) + " and " + std::to_string(Hv));
    if (p->rank() != 5 || p->dim(0) != 2 || p->dim(1) != B || p->dim(2) != N || p->dim(4) != H)
      return ctx.InputError(4, "(past) must have shape [2, " + std::to_string(B) + ", " + std::to_string(N) + ", past, " +
                                   std::to_string(H) + "], got " + DimsToString(p->dims()));
    g.past = p->dim(3);
    g.total = g.past + S;
    NEE_ASSIGN_OR_RETURN(past, FloatsOf(ctx, 4, type));
  }
  const int64_t half = B * N * g.past * H;
  k = ConcatPast(past.empty() ? nullptr : past.data(), k, B * N, g.past, S, H);
  v = ConcatPast(past.empty() ? nullptr : past.data() + half, v, B * N, g.past, S, Hv);

  NEE_ASSIGN_OR_RETURN(int64_t unidirectional, ctx.node().GetInt("unidirectional", 0));
  NEE_ASSIGN_OR_RETURN(float filter, ctx.node().GetFloat("mask_filter_value", -10000.0f));
  NEE_ASSIGN_OR_RETURN(std::vector<float> mask, BuildAdditiveMask(ctx, 3, g, unidirectional != 0, filter));
  NEE_ASSIGN_OR_RETURN(AttentionBias attn_bias, ReadAttentionBias(ctx, 5, type, g));
  NEE_ASSIGN_OR_RETURN(float scale, ScaleOf(ctx, H));
  std::vector<float> out;
  Attend(ctx, g, q, k, v, mask, attn_bias, scale, &out, nullptr);
  NEE_RETURN_IF_ERROR(WriteOutput(ctx, 0, type, {B, S, sizes.v}, out));
  if (ctx.num_outputs() > 1 && ctx.wants_output(1)) {
    std::vector<float> present(k);
    present.insert(present.end(), v.begin(), v.end());
    NEE_RETURN_IF_ERROR(WriteOutput(ctx, 1, type, {2, B, N, g.total, H}, present));
  }
  return Status::Ok();
}

// ---- com.microsoft MultiHeadAttention ---------------------------------------------------------------------
//
// Inputs: 0 query [B, S, D]; 1 key [B, L, D] or [B, N, L, H] (cross-attention with a ready cache);
// 2 value [B, L, Dv] or [B, N, L, Hv]; 3 bias [D + D + Dv] (optional; with a 4-D key only Q's part
// is used); 4 key_padding_mask (optional, int32 [B], [2B], [B, T], [B, S, T]); 5 attention_bias
// [B or 1, N or 1, S, T]; 6 past_key [B, N, P, H]; 7 past_value [B, N, P, Hv] (with 3-D key/value);
// 8 past_sequence_length and 9 cache_indirection are not supported (beam search / shared buffers).
// Outputs: 0 output [B, S, Dv]; 1 present_key [B, N, T, H]; 2 present_value [B, N, T, Hv];
// 3 qk [B, N, S, T], the scores before the softmax (mask and bias included).
// Packed QKV ([B, S, N, 3, H] query) and packed KV ([B, L, N, 2, H] key) are not supported, as in
// ONNX Runtime's CPU kernel.

Status InferMultiHeadAttention(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* q, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(int64_t heads, NumHeads(ctx.node));
  const TypeInfo* k = ctx.has_input(1) ? &ctx.input_type(1) : nullptr;
  const TypeInfo* v = ctx.has_input(2) ? &ctx.input_type(2) : nullptr;
  const TypeInfo* pk = ctx.has_input(6) ? &ctx.input_type(6) : nullptr;
  const size_t q_rank = RankOf(ctx, 0), k_rank = RankOf(ctx, 1), v_rank = RankOf(ctx, 2);
  Dim dv = Dim::Unknown(), kv_len = Dim::Unknown();
  if (v_rank == 3) dv = DimOf(v, 2);
  if (v_rank == 4) dv = Times(DimOf(v, 3), heads);
  if (k_rank == 3) kv_len = DimOf(k, 1);
  if (k_rank == 4) kv_len = DimOf(k, 2);
  std::optional<Shape> out;
  if (q_rank == 3) out = Shape{DimOf(q, 0), DimOf(q, 1), dv};
  ctx.output_types[0] = TypeInfo::Tensor(q->elem_type, out);
  const Dim total = pk == nullptr ? kv_len : Plus(DimOf(pk, 2), kv_len);
  const Dim head = q_rank == 3 ? DivBy(DimOf(q, 2), heads) : Dim::Unknown();
  const Dim v_head = DivBy(dv, heads);
  if (ctx.num_outputs() > 1)
    ctx.output_types[1] = TypeInfo::Tensor(q->elem_type, Shape{DimOf(q, 0), Dim::Known(heads), total, head});
  if (ctx.num_outputs() > 2)
    ctx.output_types[2] = TypeInfo::Tensor(q->elem_type, Shape{DimOf(q, 0), Dim::Known(heads), total, v_head});
  if (ctx.num_outputs() > 3)
    ctx.output_types[3] = TypeInfo::Tensor(q->elem_type, Shape{DimOf(q, 0), Dim::Known(heads), DimOf(q, 1), total});
  return Status::Ok();
}

Status MultiHeadAttentionKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* query, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(RequireFloatLike(ctx, 0, *query));
  const DataType type = query->dtype();
  NEE_ASSIGN_OR_RETURN(int64_t N, NumHeads(ctx.node()));
  if (query->rank() == 5 || (ctx.has_input(1) && ctx.input(1)->is_tensor() && ctx.input(1)->tensor().rank() == 5))
    return NotImplemented(ctx.node().Describe() + ": packed QKV / KV inputs are not supported");
  if (ctx.has_input(8) || ctx.has_input(9))
    return NotImplemented(ctx.node().Describe() + ": past_sequence_length / cache_indirection are not supported");
  if (query->rank() != 3) return ctx.InputError(0, "(query) must be 3-D [batch, sequence, hidden], got " + DimsToString(query->dims()));
  const int64_t B = query->dim(0), S = query->dim(1), D = query->dim(2);
  if (D % N != 0) return ctx.InputError(0, "(query) hidden size " + std::to_string(D) + " is not a multiple of num_heads " + std::to_string(N));
  const int64_t H = D / N;
  if (!ctx.has_input(1) || !ctx.has_input(2)) return ctx.Error("needs key and value inputs");
  NEE_ASSIGN_OR_RETURN(const Tensor* key, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* value, ctx.InputTensor(2));
  const bool bnsh = key->rank() == 4;
  int64_t L = 0, Dv = 0;
  if (bnsh) {
    if (key->dim(0) != B || key->dim(1) != N || key->dim(3) != H)
      return ctx.InputError(1, "(key) must be [" + std::to_string(B) + ", " + std::to_string(N) + ", kv_sequence, " +
                                   std::to_string(H) + "], got " + DimsToString(key->dims()));
    L = key->dim(2);
    if (value->rank() != 4 || value->dim(0) != B || value->dim(1) != N || value->dim(2) != L)
      return ctx.InputError(2, "(value) must be [" + std::to_string(B) + ", " + std::to_string(N) + ", " +
                                   std::to_string(L) + ", head], got " + DimsToString(value->dims()));
    Dv = value->dim(3) * N;
    if (ctx.has_input(6) || ctx.has_input(7))
      return ctx.Error("past_key / past_value cannot be combined with a 4-D (BNSH) key");
  } else {
    if (key->rank() != 3 || key->dim(0) != B || key->dim(2) != D)
      return ctx.InputError(1, "(key) must be [" + std::to_string(B) + ", kv_sequence, " + std::to_string(D) + "], got " +
                                   DimsToString(key->dims()));
    L = key->dim(1);
    if (value->rank() != 3 || value->dim(0) != B || value->dim(1) != L || value->dim(2) % N != 0)
      return ctx.InputError(2, "(value) must be [" + std::to_string(B) + ", " + std::to_string(L) +
                                   ", a multiple of num_heads], got " + DimsToString(value->dims()));
    Dv = value->dim(2);
  }
  const int64_t Hv = Dv / N;
  NEE_ASSIGN_OR_RETURN(std::vector<float> qf, FloatsOf(ctx, 0, type));
  NEE_ASSIGN_OR_RETURN(std::vector<float> kf, FloatsOf(ctx, 1, type));
  NEE_ASSIGN_OR_RETURN(std::vector<float> vf, FloatsOf(ctx, 2, type));
  std::vector<float> bias;
  if (ctx.has_input(3)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(3));
    NEE_RETURN_IF_ERROR(CheckDims(ctx, 3, *b, {D + D + Dv}, "bias"));
    NEE_ASSIGN_OR_RETURN(bias, FloatsOf(ctx, 3, type));
  }
  const float* bp = bias.empty() ? nullptr : bias.data();
  std::vector<float> q = SplitHeads(qf.data(), B, S, N, H, D, 0, bp, 0);
  std::vector<float> k, v;
  if (bnsh) {
    k = std::move(kf);
    v = std::move(vf);
  } else {
    k = SplitHeads(kf.data(), B, L, N, H, D, 0, bp, D);
    v = SplitHeads(vf.data(), B, L, N, Hv, Dv, 0, bp, 2 * D);
  }
  AttentionShape g{B, N, S, 0, L, H, Hv};
  if (ctx.has_input(6) != ctx.has_input(7)) return ctx.Error("past_key and past_value must be given together");
  if (ctx.has_input(6)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* pk, ctx.InputTensor(6));
    NEE_ASSIGN_OR_RETURN(const Tensor* pv, ctx.InputTensor(7));
    if (pk->rank() != 4 || pk->dim(0) != B || pk->dim(1) != N || pk->dim(3) != H)
      return ctx.InputError(6, "(past_key) must be [" + std::to_string(B) + ", " + std::to_string(N) + ", past, " +
                                   std::to_string(H) + "], got " + DimsToString(pk->dims()));
    g.past = pk->dim(2);
    NEE_RETURN_IF_ERROR(CheckDims(ctx, 7, *pv, {B, N, g.past, Hv}, "past_value"));
    NEE_ASSIGN_OR_RETURN(std::vector<float> pkf, FloatsOf(ctx, 6, type));
    NEE_ASSIGN_OR_RETURN(std::vector<float> pvf, FloatsOf(ctx, 7, type));
    k = ConcatPast(pkf.data(), k, B * N, g.past, L, H);
    v = ConcatPast(pvf.data(), v, B * N, g.past, L, Hv);
  }
  g.total = g.past + L;
  NEE_ASSIGN_OR_RETURN(int64_t unidirectional, ctx.node().GetInt("unidirectional", 0));
  NEE_ASSIGN_OR_RETURN(float filter, ctx.node().GetFloat("mask_filter_value", -10000.0f));
  NEE_ASSIGN_OR_RETURN(std::vector<float> mask, BuildAdditiveMask(ctx, 4, g, unidirectional != 0, filter));
  NEE_ASSIGN_OR_RETURN(AttentionBias attn_bias, ReadAttentionBias(ctx, 5, type, g));
  NEE_ASSIGN_OR_RETURN(float scale, ScaleOf(ctx, H));
  const bool want_qk = ctx.num_outputs() > 3 && ctx.wants_output(3);
  std::vector<float> out, qk;
  Attend(ctx, g, q, k, v, mask, attn_bias, scale, &out, want_qk ? &qk : nullptr);
  NEE_RETURN_IF_ERROR(WriteOutput(ctx, 0, type, {B, S, Dv}, out));
  if (ctx.num_outputs() > 1 && ctx.wants_output(1)) NEE_RETURN_IF_ERROR(WriteOutput(ctx, 1, type, {B, N, g.total, H}, k));
  if (ctx.num_outputs() > 2 && ctx.wants_output(2)) NEE_RETURN_IF_ERROR(WriteOutput(ctx, 2, type, {B, N, g.total, Hv}, v));
  if (want_qk) NEE_RETURN_IF_ERROR(WriteOutput(ctx, 3, type, {B, N, S, g.total}, qk));
  return Status::Ok();
}

// ---- com.microsoft RotaryEmbedding -------------------------------------------------------------------------
//
// Inputs: 0 input [B, S, D] (heads side by side; num_heads or the cache width gives the head size)
// or [B, N, S, H]; 1 position_ids (int64 [B, S], or [1] holding the first position, then +s);
// 2 cos_cache and 3 sin_cache [max_position, R / 2] where R = rotary_embedding_dim (default: the
// head size). Per head, the first R values rotate in pairs: (i, i + R/2), or (2i, 2i + 1) when
// interleaved: x' = x cos - y sin, y' = y cos + x sin. The rest pass through.

Status RotaryEmbeddingKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(RequireFloatLike(ctx, 0, *x));
  NEE_ASSIGN_OR_RETURN(const Tensor* pos, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* cos_cache, ctx.InputTensor(2));
  NEE_ASSIGN_OR_RETURN(const Tensor* sin_cache, ctx.InputTensor(3));
  NEE_ASSIGN_OR_RETURN(int64_t interleaved, ctx.node().GetInt("interleaved", 0));
  NEE_ASSIGN_OR_RETURN(int64_t packed, ctx.node().GetInt("is_packed_batching", 0));
  NEE_ASSIGN_OR_RETURN(int64_t num_heads, ctx.node().GetInt("num_heads", 0));
  NEE_ASSIGN_OR_RETURN(int64_t rotary_dim, ctx.node().GetInt("rotary_embedding_dim", 0));
  if (packed != 0) return NotImplemented(ctx.node().Describe() + ": is_packed_batching is not supported");
  if (cos_cache->rank() != 2 || sin_cache->dims() != cos_cache->dims())
    return ctx.InputError(2, "(cos_cache / sin_cache) must both be 2-D [max_position, rotary_dim / 2], got " +
                                 DimsToString(cos_cache->dims()) + " and " + DimsToString(sin_cache->dims()));
  const int64_t max_pos = cos_cache->dim(0), half = cos_cache->dim(1);
  int64_t B = 0, S = 0, N = 0, H = 0;
  const bool bnsh = x->rank() == 4;
  if (bnsh) {
    B = x->dim(0), N = x->dim(1), S = x->dim(2), H = x->dim(3);
  } else if (x->rank() == 3) {
    B = x->dim(0), S = x->dim(1);
    const int64_t D = x->dim(2);
    if (num_heads > 0) {
      N = num_heads;
    } else if (rotary_dim > 0) {
      return ctx.Error("a 3-D input with rotary_embedding_dim needs num_heads");
    } else {
      // Without num_heads the cache width gives the head size (rotary over the whole head).
      N = half > 0 && D % (2 * half) == 0 ? D / (2 * half) : 0;
    }
    if (N <= 0 || D % N != 0)
      return ctx.InputError(0, "(input) hidden size " + std::to_string(D) + " does not split into num_heads " + std::to_string(N));
    H = D / N;
  } else {
    return ctx.InputError(0, "(input) must be [batch, sequence, hidden] or [batch, heads, sequence, head], got " +
                                 DimsToString(x->dims()));
  }
  const int64_t R = rotary_dim > 0 ? rotary_dim : H;
  if (R > H || R % 2 != 0 || half * 2 != R)
    return ctx.InputError(2, "(cos_cache) width " + std::to_string(half) + " must be half the rotary dimension " +
                                 std::to_string(R) + " (even, at most the head size " + std::to_string(H) + ")");
  const bool one_offset = pos->num_elements() == 1 && pos->rank() <= 1;
  if (!one_offset && pos->dims() != std::vector<int64_t>{B, S})
    return ctx.InputError(1, "(position_ids) must be [" + std::to_string(B) + ", " + std::to_string(S) + "] or [1], got " +
                                 DimsToString(pos->dims()));
  if (pos->dtype() != DataType::kInt64 && pos->dtype() != DataType::kInt32)
    return ctx.InputError(1, std::string("(position_ids) must be int64, got ") + DataTypeName(pos->dtype()));
  // The position of each (b, s), checked against the cache.
  std::vector<int64_t> positions(static_cast<size_t>(B * S));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      const int64_t p = one_offset ? static_cast<int64_t>(ReadAsDouble(*pos, 0)) + s
                                   : static_cast<int64_t>(ReadAsDouble(*pos, b * S + s));
      if (p < 0 || p >= max_pos)
        return ctx.InputError(1, "(position_ids) position " + std::to_string(p) + " is outside the cache [0, " +
                                     std::to_string(max_pos) + ")");
      positions[static_cast<size_t>(b * S + s)] = p;
    }
  NEE_ASSIGN_OR_RETURN(std::vector<float> xf, FloatsOf(ctx, 0, x->dtype()));
  NEE_ASSIGN_OR_RETURN(std::vector<float> cf, FloatsOf(ctx, 2, x->dtype()));
  NEE_ASSIGN_OR_RETURN(std::vector<float> sf, FloatsOf(ctx, 3, x->dtype()));
  std::vector<float> out(xf);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t base = bnsh ? ((b * N + n) * S + s) * H : ((b * S + s) * N + n) * H;
        const float* c = cf.data() + positions[static_cast<size_t>(b * S + s)] * half;
        const float* sn = sf.data() + positions[static_cast<size_t>(b * S + s)] * half;
        for (int64_t i = 0; i < half; ++i) {
          const int64_t a = base + (interleaved ? 2 * i : i), z = base + (interleaved ? 2 * i + 1 : i + half);
          const float xa = xf[static_cast<size_t>(a)], xz = xf[static_cast<size_t>(z)];
          out[static_cast<size_t>(a)] = xa * c[i] - xz * sn[i];
          out[static_cast<size_t>(z)] = xz * c[i] + xa * sn[i];
        }
      }
  return WriteOutput(ctx, 0, x->dtype(), x->dims(), out);
}

}  // namespace

void RegisterAttentionContribOps(OpRegistry& registry) {
  registry.RegisterVersions(kMs, "Attention", {1}, InferContribAttention, ContribAttentionKernel);
  registry.RegisterVersions(kMs, "MultiHeadAttention", {1}, InferMultiHeadAttention, MultiHeadAttentionKernel);
  registry.RegisterVersions(kMs, "RotaryEmbedding", {1}, InferSameAsInput0, RotaryEmbeddingKernel);
}

}  // namespace nee
