// Operator family: Attention and the KV-cache update that feeds it.
//
//   Attention        (23, 24: + nonpad_kv_seqlen, 25: + sliding window)
//   TensorScatter    (24: the KV-cache update that feeds Attention's past_key / past_value)
//
// The other transformer-era ops that were in this file have their own families:
// RotaryEmbedding (rotary_embedding.cc), LinearAttention and CausalConvWithState
// (linear_attention.cc), FlexAttention (flex_attention.cc); the helpers they
// share are in attention_util.h.
//
// Attention follows the ONNX reference step by step: Q and K are each scaled by
// sqrt(scale), multiplied, soft-capped, biased (mask + causal + window +
// padding), softmaxed and multiplied by V. The intermediate tensors the
// reference materializes in the input type (scaled Q/K, scores, probabilities)
// are rounded to that type here too, so float16/bfloat16 results track it; the
// arithmetic itself runs in float (double for double inputs).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/attention_util.h"
#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/tensor_util.h"

namespace nee {
namespace {

using namespace attention_util;  // NOLINT: shared with the other attention-era families
using nn::ComputeInput;
using nn::ComputeOutput;

Dim AddDims(const Dim& a, const Dim& b) {
  if (a.known() && b.known()) return Dim::Known(a.value + b.value);
  if (b.known() && b.value == 0) return a;
  if (a.known() && a.value == 0) return b;
  return Dim::Unknown();
}

// ---- Attention: geometry -------------------------------------------------------

struct AttentionAttrs {
  float scale = 0;  // 0: 1/sqrt(head_size)
  bool has_scale = false;
  bool is_causal = false;
  int64_t q_num_heads = 0;  // 0: not given
  int64_t kv_num_heads = 0;
  float softcap = 0;
  int64_t qk_mode = 0;
  DataType softmax_precision = DataType::kUndefined;  // kUndefined: the input type
  int64_t left_window = -1;
  int64_t right_window = -1;
};

Result<AttentionAttrs> ReadAttentionAttrs(const Node& node, int64_t opset) {
  AttentionAttrs a;
  const std::string where = node.Describe() + ": ";
  a.has_scale = node.HasAttr("scale");
  NEE_ASSIGN_OR_RETURN(a.scale, node.GetFloat("scale", 0.0f));
  NEE_ASSIGN_OR_RETURN(int64_t causal, node.GetInt("is_causal", 0));
  a.is_causal = causal != 0;
  NEE_ASSIGN_OR_RETURN(a.q_num_heads, node.GetInt("q_num_heads", 0));
  NEE_ASSIGN_OR_RETURN(a.kv_num_heads, node.GetInt("kv_num_heads", 0));
  NEE_ASSIGN_OR_RETURN(a.softcap, node.GetFloat("softcap", 0.0f));
  NEE_ASSIGN_OR_RETURN(a.qk_mode, node.GetInt("qk_matmul_output_mode", 0));
  if (a.qk_mode < 0 || a.qk_mode > 3)
    return InvalidModel(where + "qk_matmul_output_mode must be 0, 1, 2 or 3, got " + std::to_string(a.qk_mode));
  if (node.HasAttr("softmax_precision")) {
    NEE_ASSIGN_OR_RETURN(int64_t p, node.GetInt("softmax_precision"));
    a.softmax_precision = static_cast<DataType>(p);
    if (p != 1 && p != 10 && p != 11 && p != 16)
      return InvalidModel(where + "softmax_precision must be 1 (float), 10 (float16), 11 (double) or 16 (bfloat16), got " +
                          std::to_string(p));
  }
  if (a.q_num_heads < 0 || a.kv_num_heads < 0)
    return InvalidModel(where + "q_num_heads and kv_num_heads must be positive");
  if (opset >= 25) {
    NEE_ASSIGN_OR_RETURN(a.left_window, node.GetInt("left_window_size", -1));
    NEE_ASSIGN_OR_RETURN(a.right_window, node.GetInt("right_window_size", -1));
    if (a.left_window < -1 || a.right_window < -1)
      return InvalidModel(where + "left_window_size and right_window_size must be -1 or non-negative");
  }
  return a;
}

// Input slots.
constexpr size_t kQ = 0, kK = 1, kV = 2, kMask = 3, kPastKey = 4, kPastValue = 5, kNonpad = 6;
// Output slots.
constexpr size_t kY = 0, kPresentKey = 1, kPresentValue = 2, kQkOut = 3;

// Sizes of one Attention call, all validated against each other.
struct AttentionDims {
  bool three_d = false;
  int64_t batch = 0, q_heads = 0, kv_heads = 0;
  int64_t q_seq = 0, kv_seq = 0, past_seq = 0, total_seq = 0;
  int64_t head_size = 0, v_head_size = 0;
};

Result<AttentionDims> ComputeAttentionDims(const KernelContext& ctx, const AttentionAttrs& attrs, const Tensor& q,
                                           const Tensor& k, const Tensor& v, const Tensor* past_key,
                                           const Tensor* past_value) {
  AttentionDims d;
  const int64_t rank = q.rank();
  if (rank != 3 && rank != 4) return ctx.InputError(kQ, "Q must be 3-D or 4-D, got " + q.Describe());
  if (k.rank() != rank) return ctx.InputError(kK, "K must have Q's rank " + std::to_string(rank) + ", got " + k.Describe());
  if (v.rank() != rank) return ctx.InputError(kV, "V must have Q's rank " + std::to_string(rank) + ", got " + v.Describe());
  d.three_d = rank == 3;
  d.batch = q.dim(0);
  if (k.dim(0) != d.batch) return ctx.InputError(kK, "batch " + std::to_string(k.dim(0)) + " differs from Q's " + std::to_string(d.batch));
  if (v.dim(0) != d.batch) return ctx.InputError(kV, "batch " + std::to_string(v.dim(0)) + " differs from Q's " + std::to_string(d.batch));
  if (d.three_d) {
    if (attrs.q_num_heads <= 0 || attrs.kv_num_heads <= 0)
      return ctx.Error("3-D Q, K, V need the attributes q_num_heads and kv_num_heads");
    d.q_heads = attrs.q_num_heads;
    d.kv_heads = attrs.kv_num_heads;
    d.q_seq = q.dim(1);
    d.kv_seq = k.dim(1);
    if (q.dim(2) % d.q_heads != 0)
      return ctx.InputError(kQ, "hidden size " + std::to_string(q.dim(2)) + " is not divisible by q_num_heads " + std::to_string(d.q_heads));
    if (k.dim(2) % d.kv_heads != 0)
      return ctx.InputError(kK, "hidden size " + std::to_string(k.dim(2)) + " is not divisible by kv_num_heads " + std::to_string(d.kv_heads));
    if (v.dim(2) % d.kv_heads != 0)
      return ctx.InputError(kV, "hidden size " + std::to_string(v.dim(2)) + " is not divisible by kv_num_heads " + std::to_string(d.kv_heads));
    d.head_size = q.dim(2) / d.q_heads;
    if (k.dim(2) / d.kv_heads != d.head_size)
      return ctx.InputError(kK, "head size " + std::to_string(k.dim(2) / d.kv_heads) + " (hidden " + std::to_string(k.dim(2)) +
                                    " / kv_num_heads) differs from Q's " + std::to_string(d.head_size));
    d.v_head_size = v.dim(2) / d.kv_heads;
    if (v.dim(1) != d.kv_seq)
      return ctx.InputError(kV, "sequence length " + std::to_string(v.dim(1)) + " differs from K's " + std::to_string(d.kv_seq));
  } else {
    if (ctx.opset() >= 25 && (attrs.q_num_heads > 0 || attrs.kv_num_heads > 0))
      return ctx.Error("q_num_heads and kv_num_heads must not be given for 4-D inputs");
    d.q_heads = q.dim(1);
    d.kv_heads = k.dim(1);
    d.q_seq = q.dim(2);
    d.kv_seq = k.dim(2);
    d.head_size = q.dim(3);
    d.v_head_size = v.dim(3);
    if (v.dim(1) != d.kv_heads)
      return ctx.InputError(kV, "head count " + std::to_string(v.dim(1)) + " differs from K's " + std::to_string(d.kv_heads));
    if (v.dim(2) != d.kv_seq)
      return ctx.InputError(kV, "sequence length " + std::to_string(v.dim(2)) + " differs from K's " + std::to_string(d.kv_seq));
    if (k.dim(3) != d.head_size)
      return ctx.InputError(kK, "head size " + std::to_string(k.dim(3)) + " differs from Q's " + std::to_string(d.head_size));
  }
  if (d.kv_heads <= 0 || d.q_heads % d.kv_heads != 0)
    return ctx.Error("q heads (" + std::to_string(d.q_heads) + ") must be a multiple of kv heads (" +
                     std::to_string(d.kv_heads) + ")");
  if ((past_key == nullptr) != (past_value == nullptr))
    return ctx.Error("past_key and past_value must be given together");
  if (past_key) {
    if (past_key->rank() != 4)
      return ctx.InputError(kPastKey, "past_key must be 4-D (batch, kv_heads, past_seq, head_size), got " + past_key->Describe());
    if (past_value->rank() != 4)
      return ctx.InputError(kPastValue, "past_value must be 4-D (batch, kv_heads, past_seq, v_head_size), got " + past_value->Describe());
    const std::vector<int64_t> want_k = {d.batch, d.kv_heads, past_key->dim(2), d.head_size};
    if (past_key->dims() != want_k)
      return ctx.InputError(kPastKey, "expected past_key dims " + DimsToString(want_k) + ", got " + DimsToString(past_key->dims()));
    const std::vector<int64_t> want_v = {d.batch, d.kv_heads, past_key->dim(2), d.v_head_size};
    if (past_value->dims() != want_v)
      return ctx.InputError(kPastValue, "expected past_value dims " + DimsToString(want_v) + ", got " + DimsToString(past_value->dims()));
    d.past_seq = past_key->dim(2);
  }
  d.total_seq = d.past_seq + d.kv_seq;
  return d;
}

// The attention mask as an additive bias broadcast to (batch, q_heads, q_seq, *);
// keys at or beyond its last dim are masked (-inf), as the spec pads it.
template <typename A>
struct MaskBias {
  const Tensor* mask = nullptr;
  std::vector<A> values;  // bias per mask element (bool -> 0 / -inf)
  int64_t length = 0;     // the mask's last dim
  int64_t stride_b = 0, stride_h = 0, stride_s = 0;

  A At(int64_t b, int64_t h, int64_t s, int64_t j) const {
    if (!mask) return A{0};
    if (j >= length) return -std::numeric_limits<A>::infinity();
    return values[static_cast<size_t>(b * stride_b + h * stride_h + s * stride_s + j)];
  }
};

template <typename A>
Result<MaskBias<A>> MakeMaskBias(const KernelContext& ctx, const Tensor* mask, const AttentionDims& d) {
  MaskBias<A> m;
  if (!mask) return m;
  const int64_t r = mask->rank();
  if (r < 1 || r > 4)
    return ctx.InputError(kMask, "attn_mask must have rank 1 to 4, got " + mask->Describe());
  m.mask = mask;
  m.length = mask->dim(r - 1);
  if (m.length > d.total_seq)
    return ctx.InputError(kMask, "attn_mask's last dim " + std::to_string(m.length) +
                                     " exceeds the total sequence length " + std::to_string(d.total_seq));
  // Right-aligned broadcast of the leading dims against (batch, q_heads, q_seq).
  const int64_t target[3] = {d.batch, d.q_heads, d.q_seq};
  const char* names[3] = {"batch", "q_num_heads", "q_sequence_length"};
  int64_t strides[3] = {0, 0, 0};
  int64_t stride = m.length;
  for (int64_t axis = 2, md = r - 2; md >= 0; --axis, --md) {
    const int64_t size = mask->dim(md);
    if (size != 1 && size != target[axis])
      return ctx.InputError(kMask, "attn_mask " + DimsToString(mask->dims()) + " does not broadcast to (" +
                                       std::to_string(d.batch) + ", " + std::to_string(d.q_heads) + ", " +
                                       std::to_string(d.q_seq) + ", " + std::to_string(d.total_seq) + "): dim " +
                                       std::to_string(md) + " should be 1 or " + names[axis]);
    strides[axis] = size == 1 ? 0 : stride;
    stride *= size;
  }
  m.stride_b = strides[0];
  m.stride_h = strides[1];
  m.stride_s = strides[2];
  const int64_t n = mask->num_elements();
  m.values.resize(static_cast<size_t>(n));
  if (mask->dtype() == DataType::kBool) {
    const bool* p = mask->data<bool>();
    for (int64_t i = 0; i < n; ++i) m.values[i] = p[i] ? A{0} : -std::numeric_limits<A>::infinity();
  } else if (mask->dtype() == DataType::kString || IsSubByte(mask->dtype()) ||
             mask->dtype() == DataType::kComplex64 || mask->dtype() == DataType::kComplex128) {
    return NotImplemented(ctx.node().Describe() + ": input 3: attn_mask of type " + DataTypeName(mask->dtype()) +
                          " is not supported");
  } else {
    nn::ConvertToCompute(*mask, m.values.data());
  }
  return m;
}

// The causal / sliding-window offset of the query block for batch b.
struct QueryOffsets {
  const int64_t* nonpad = nullptr;  // per batch, when given
  int64_t past_seq = 0;
  int64_t q_seq = 0;
  // nonpad values come from the caller: clamped far beyond any sequence so
  // that position arithmetic cannot overflow (the masks are unchanged).
  int64_t Of(int64_t b) const {
    constexpr int64_t kLimit = int64_t{1} << 40;
    return nonpad ? std::clamp<int64_t>(nonpad[b], -kLimit, kLimit) - q_seq : past_seq;
  }
};

template <typename A>
Status AttentionTyped(KernelContext& ctx, const AttentionAttrs& attrs, const AttentionDims& d, const Tensor& q,
                      const Tensor& k, const Tensor& v, const Tensor* mask, const Tensor* past_key,
                      const Tensor* past_value, const Tensor* nonpad) {
  const DataType t1 = q.dtype();
  const A inf = std::numeric_limits<A>::infinity();
  ComputeInput<A> cq(q), ck(k), cv(v);

  // present_key / present_value: past followed by the new keys, (batch, kv_heads, total, width).
  const int64_t T = d.total_seq, D = d.head_size, Dv = d.v_head_size;
  std::vector<A> keys(static_cast<size_t>(d.batch * d.kv_heads * T * D));
  std::vector<A> values(static_cast<size_t>(d.batch * d.kv_heads * T * Dv));
  {
    ComputeInput<A> cpk, cpv;
    if (past_key) {
      cpk = ComputeInput<A>(*past_key);
      cpv = ComputeInput<A>(*past_value);
    }
    const HeadLayout k_layout = HeadLayout::Of(d.three_d, d.kv_heads, d.kv_seq, D);
    const HeadLayout v_layout = HeadLayout::Of(d.three_d, d.kv_heads, d.kv_seq, Dv);
    for (int64_t b = 0; b < d.batch; ++b)
      for (int64_t h = 0; h < d.kv_heads; ++h)
        for (int64_t t = 0; t < T; ++t) {
          A* kd = keys.data() + ((b * d.kv_heads + h) * T + t) * D;
          A* vd = values.data() + ((b * d.kv_heads + h) * T + t) * Dv;
          const A* ks;
          const A* vs;
          if (t < d.past_seq) {
            ks = cpk.data() + ((b * d.kv_heads + h) * d.past_seq + t) * D;
            vs = cpv.data() + ((b * d.kv_heads + h) * d.past_seq + t) * Dv;
          } else {
            ks = ck.data() + k_layout.Row(b, h, t - d.past_seq);
            vs = cv.data() + v_layout.Row(b, h, t - d.past_seq);
          }
          std::copy(ks, ks + D, kd);
          std::copy(vs, vs + Dv, vd);
        }
  }
  if (ctx.wants_output(kPresentKey)) {
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(kPresentKey, k.dtype(), {d.batch, d.kv_heads, T, D}));
    nn::ConvertFromCompute(keys.data(), out);
  }
  if (ctx.wants_output(kPresentValue)) {
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(kPresentValue, v.dtype(), {d.batch, d.kv_heads, T, Dv}));
    nn::ConvertFromCompute(values.data(), out);
  }

  // Q and K are each multiplied by sqrt(scale), itself rounded to T1 as the
  // reference casts it.
  const double scale = attrs.has_scale ? static_cast<double>(attrs.scale) : 1.0 / std::sqrt(static_cast<double>(D));
  const A sqrt_scale = RoundTo<A>(t1, static_cast<A>(std::sqrt(scale)));
  for (A& x : keys) x = RoundTo<A>(t1, x * sqrt_scale);

  NEE_ASSIGN_OR_RETURN(MaskBias<A> mask_bias, MakeMaskBias<A>(ctx, mask, d));
  QueryOffsets offsets{nonpad ? nonpad->data<int64_t>() : nullptr, d.past_seq, d.q_seq};

  const std::vector<int64_t> y_dims = d.three_d ? std::vector<int64_t>{d.batch, d.q_seq, d.q_heads * Dv}
                                                : std::vector<int64_t>{d.batch, d.q_heads, d.q_seq, Dv};
  NEE_ASSIGN_OR_RETURN(Tensor y_tensor, ctx.AllocateOutput(kY, t1, y_dims));
  ComputeOutput<A> y(y_tensor);
  const bool want_qk = ctx.wants_output(kQkOut);
  std::vector<A> qk_out;
  if (want_qk) qk_out.resize(static_cast<size_t>(d.batch * d.q_heads * d.q_seq * T));

  const HeadLayout q_layout = HeadLayout::Of(d.three_d, d.q_heads, d.q_seq, D);
  const HeadLayout y_layout = HeadLayout::Of(d.three_d, d.q_heads, d.q_seq, Dv);
  const int64_t group = d.q_heads / d.kv_heads;
  const DataType softmax_type = attrs.softmax_precision == DataType::kUndefined ? t1 : attrs.softmax_precision;
  const A softcap = static_cast<A>(attrs.softcap);

  // One task per (batch, q head): each output element is computed by exactly
  // one task in a fixed order, whatever the chunking.
  ctx.ParallelFor(d.batch * d.q_heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<A> q_row(static_cast<size_t>(D)), scores(static_cast<size_t>(T)), bias(static_cast<size_t>(T));
    std::vector<A> probs(static_cast<size_t>(T)), acc(static_cast<size_t>(Dv));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / d.q_heads, h = task % d.q_heads, kvh = h / group;
      const A* head_keys = keys.data() + (b * d.kv_heads + kvh) * T * D;
      const A* head_values = values.data() + (b * d.kv_heads + kvh) * T * Dv;
      const int64_t offset = offsets.Of(b);
      for (int64_t s = 0; s < d.q_seq; ++s) {
        const A* qs = cq.data() + q_layout.Row(b, h, s);
        for (int64_t i = 0; i < D; ++i) q_row[i] = RoundTo<A>(t1, qs[i] * sqrt_scale);
        A* qk_row = want_qk ? qk_out.data() + ((b * d.q_heads + h) * d.q_seq + s) * T : nullptr;
        // Additive bias: mask, causal frontier, sliding window, padding.
        bool all_masked = true;
        for (int64_t j = 0; j < T; ++j) {
          A bj = mask_bias.At(b, h, s, j);
          const int64_t pos = s + offset;  // the query's absolute position
          if (attrs.is_causal && j > pos) bj += -inf;
          if (attrs.left_window >= 0 && pos - j > attrs.left_window) bj += -inf;
          if (attrs.right_window >= 0 && j - pos > attrs.right_window) bj += -inf;
          if (nonpad && j >= offsets.nonpad[b]) bj += -inf;
          bias[j] = bj;
          if (!(std::isinf(bj) && bj < 0)) all_masked = false;
        }
        for (int64_t j = 0; j < T; ++j) {
          const A* kj = head_keys + j * D;
          A dot{0};
          for (int64_t i = 0; i < D; ++i) dot += q_row[i] * kj[i];
          A score = RoundTo<A>(t1, dot);
          if (qk_row && attrs.qk_mode == 0) qk_row[j] = score;
          if (attrs.softcap > 0) {
            score = RoundTo<A>(t1, score / softcap);
            score = RoundTo<A>(t1, static_cast<A>(std::tanh(score)));
            score = RoundTo<A>(t1, score * softcap);
          }
          if (qk_row && attrs.qk_mode == 1) qk_row[j] = score;
          score = RoundTo<A>(t1, score + bias[j]);
          if (qk_row && attrs.qk_mode == 2) qk_row[j] = score;
          scores[j] = RoundTo<A>(softmax_type, score);
        }
        // Softmax in the requested precision; a row with no attendable key is zero.
        if (all_masked) {
          std::fill(probs.begin(), probs.end(), A{0});
        } else {
          A max = -inf;
          for (int64_t j = 0; j < T; ++j) max = std::max(max, scores[j]);
          if (std::isinf(max) && max < 0) max = 0;
          A sum{0};
          for (int64_t j = 0; j < T; ++j) {
            const A shifted = RoundTo<A>(softmax_type, scores[j] - max);
            probs[j] = RoundTo<A>(softmax_type, static_cast<A>(std::exp(shifted)));
            sum = SumStep<A>(softmax_type, sum, probs[j]);
          }
          sum = RoundTo<A>(softmax_type, sum);
          if (sum == A{0}) sum = A{1};
          for (int64_t j = 0; j < T; ++j) probs[j] = RoundTo<A>(t1, RoundTo<A>(softmax_type, probs[j] / sum));
        }
        if (qk_row && attrs.qk_mode == 3) std::copy(probs.begin(), probs.end(), qk_row);
        std::fill(acc.begin(), acc.end(), A{0});
        for (int64_t j = 0; j < T; ++j) nn::AddScaledRow(acc.data(), head_values + j * Dv, probs[j], Dv);
        std::copy(acc.begin(), acc.end(), y.data() + y_layout.Row(b, h, s));
      }
    }
  });
  y.Commit();
  if (want_qk) {
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(kQkOut, t1, {d.batch, d.q_heads, d.q_seq, T}));
    nn::ConvertFromCompute(qk_out.data(), out);
  }
  return Status::Ok();
}

Status AttentionKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(AttentionAttrs attrs, ReadAttentionAttrs(ctx.node(), ctx.opset()));
  NEE_ASSIGN_OR_RETURN(const Tensor* q, ctx.InputTensor(kQ));
  NEE_ASSIGN_OR_RETURN(const Tensor* k, ctx.InputTensor(kK));
  NEE_ASSIGN_OR_RETURN(const Tensor* v, ctx.InputTensor(kV));
  NEE_ASSIGN_OR_RETURN(const Tensor* mask, OptionalInput(ctx, kMask));
  NEE_ASSIGN_OR_RETURN(const Tensor* past_key, OptionalInput(ctx, kPastKey));
  NEE_ASSIGN_OR_RETURN(const Tensor* past_value, OptionalInput(ctx, kPastValue));
  const Tensor* nonpad = nullptr;
  if (ctx.opset() >= 24) {
    NEE_ASSIGN_OR_RETURN(nonpad, OptionalInput(ctx, kNonpad));
  }

  NEE_RETURN_IF_ERROR(CheckFloatInput(ctx, kQ, *q));
  NEE_RETURN_IF_ERROR(CheckFloatInput(ctx, kK, *k));
  NEE_RETURN_IF_ERROR(CheckFloatInput(ctx, kV, *v));
  if (k->dtype() != q->dtype())
    return ctx.InputError(kK, std::string("K must have Q's element type ") + DataTypeName(q->dtype()) + ", got " +
                                  DataTypeName(k->dtype()));
  if (past_key && past_key->dtype() != k->dtype())
    return ctx.InputError(kPastKey, std::string("past_key must have K's element type ") + DataTypeName(k->dtype()));
  if (past_value && past_value->dtype() != v->dtype())
    return ctx.InputError(kPastValue, std::string("past_value must have V's element type ") + DataTypeName(v->dtype()));

  NEE_ASSIGN_OR_RETURN(AttentionDims d, ComputeAttentionDims(ctx, attrs, *q, *k, *v, past_key, past_value));
  if (nonpad) {
    if (past_key) return ctx.InputError(kNonpad, "nonpad_kv_seqlen cannot be combined with past_key / past_value");
    if (nonpad->dtype() != DataType::kInt64)
      return ctx.InputError(kNonpad, std::string("nonpad_kv_seqlen must be int64, got ") + DataTypeName(nonpad->dtype()));
    if (nonpad->rank() != 1 || nonpad->dim(0) != d.batch)
      return ctx.InputError(kNonpad, "nonpad_kv_seqlen must have shape (" + std::to_string(d.batch) + "), got " +
                                         DimsToString(nonpad->dims()));
  }
  const bool use_double = q->dtype() == DataType::kDouble || v->dtype() == DataType::kDouble ||
                          attrs.softmax_precision == DataType::kDouble;
  if (use_double) return AttentionTyped<double>(ctx, attrs, d, *q, *k, *v, mask, past_key, past_value, nonpad);
  return AttentionTyped<float>(ctx, attrs, d, *q, *k, *v, mask, past_key, past_value, nonpad);
}

// Shape rule: works on whatever dims are known; errors only on definite conflicts.
Status InferAttention(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(AttentionAttrs attrs, ReadAttentionAttrs(ctx.node, ctx.opset));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* q, InputTensorType(ctx, kQ));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* k, InputTensorType(ctx, kK));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* v, InputTensorType(ctx, kV));
  const DataType t1 = q->elem_type;
  const DataType t2 = v->elem_type;
  if (ctx.has_input(kPastKey) != ctx.has_input(kPastValue))
    return ctx.Error("past_key and past_value must be given together");

  const Shape* qs = q->shape ? &*q->shape : nullptr;
  const Shape* ks = k->shape ? &*k->shape : nullptr;
  const Shape* vs = v->shape ? &*v->shape : nullptr;
  int64_t rank = qs ? static_cast<int64_t>(qs->size()) : ks ? static_cast<int64_t>(ks->size())
                                                         : vs ? static_cast<int64_t>(vs->size()) : -1;
  if (rank != -1 && rank != 3 && rank != 4) return ctx.InputError(kQ, "Q, K and V must be 3-D or 4-D");
  if ((qs && static_cast<int64_t>(qs->size()) != rank) || (ks && static_cast<int64_t>(ks->size()) != rank) ||
      (vs && static_cast<int64_t>(vs->size()) != rank))
    return ctx.Error("Q, K and V must have the same rank (3 or 4)");

  auto dim_of = [](const Shape* s, size_t i) { return s ? (*s)[i] : Dim::Unknown(); };
  Dim batch = nn::MergeDims(dim_of(qs, 0), nn::MergeDims(dim_of(ks, 0), dim_of(vs, 0)));
  Dim q_heads, kv_heads, q_seq, kv_seq, head_size, v_head_size, v_hidden;
  if (rank == 3) {
    if (attrs.q_num_heads <= 0 || attrs.kv_num_heads <= 0)
      return ctx.Error("3-D Q, K, V need the attributes q_num_heads and kv_num_heads");
    q_heads = Dim::Known(attrs.q_num_heads);
    kv_heads = Dim::Known(attrs.kv_num_heads);
    q_seq = dim_of(qs, 1);
    kv_seq = nn::MergeDims(dim_of(ks, 1), dim_of(vs, 1));
    NEE_ASSIGN_OR_RETURN(head_size, DivideDim(ctx, kQ, dim_of(qs, 2), attrs.q_num_heads, "hidden size"));
    NEE_ASSIGN_OR_RETURN(Dim k_head, DivideDim(ctx, kK, dim_of(ks, 2), attrs.kv_num_heads, "hidden size"));
    if (nn::DimsConflict(head_size, k_head)) return ctx.InputError(kK, "K's head size differs from Q's");
    head_size = nn::MergeDims(head_size, k_head);
    NEE_ASSIGN_OR_RETURN(v_head_size, DivideDim(ctx, kV, dim_of(vs, 2), attrs.kv_num_heads, "hidden size"));
  } else if (rank == 4) {
    q_heads = dim_of(qs, 1);
    kv_heads = nn::MergeDims(dim_of(ks, 1), dim_of(vs, 1));
    q_seq = dim_of(qs, 2);
    kv_seq = nn::MergeDims(dim_of(ks, 2), dim_of(vs, 2));
    head_size = nn::MergeDims(dim_of(qs, 3), dim_of(ks, 3));
    if (nn::DimsConflict(dim_of(qs, 3), dim_of(ks, 3))) return ctx.InputError(kK, "K's head size differs from Q's");
    v_head_size = dim_of(vs, 3);
  }
  if (q_heads.known() && kv_heads.known() && (kv_heads.value == 0 || q_heads.value % kv_heads.value != 0))
    return ctx.Error("q heads (" + q_heads.ToString() + ") must be a multiple of kv heads (" + kv_heads.ToString() + ")");

  Dim past_seq = Dim::Known(0);
  if (ctx.has_input(kPastKey)) {
    const Shape* ps = nn::KnownShape(ctx, kPastKey);
    past_seq = ps && ps->size() == 4 ? (*ps)[2] : Dim::Unknown();
  }
  const Dim total_seq = AddDims(past_seq, kv_seq);

  if (ctx.num_outputs() > kY) {
    std::optional<Shape> y;
    if (rank == 3) y = Shape{batch, q_seq, v_head_size.known() ? MultiplyDim(v_head_size, q_heads.value) : Dim::Unknown()};
    if (rank == 4) y = Shape{batch, q_heads, q_seq, v_head_size};
    ctx.output_types[kY] = TypeInfo::Tensor(t1, y);
  }
  const bool known_rank = rank != -1;
  if (ctx.num_outputs() > kPresentKey)
    ctx.output_types[kPresentKey] =
        TypeInfo::Tensor(k->elem_type, known_rank ? std::optional<Shape>(Shape{batch, kv_heads, total_seq, head_size}) : std::nullopt);
  if (ctx.num_outputs() > kPresentValue)
    ctx.output_types[kPresentValue] =
        TypeInfo::Tensor(t2, known_rank ? std::optional<Shape>(Shape{batch, kv_heads, total_seq, v_head_size}) : std::nullopt);
  if (ctx.num_outputs() > kQkOut)
    ctx.output_types[kQkOut] =
        TypeInfo::Tensor(t1, known_rank ? std::optional<Shape>(Shape{batch, q_heads, q_seq, total_seq}) : std::nullopt);
  return Status::Ok();
}

// ---- TensorScatter -------------------------------------------------------------------
// present_cache = past_cache with, for every prefix index (batch, D1, ..., up to
// the sequence axis), `update`'s sequence_length rows written starting at row
// write_indices[batch] (modulo max_sequence_length in circular mode). Every
// write index is checked against the cache size before anything is written.

struct TensorScatterAttrs {
  bool circular = false;
  int64_t axis = -2;
};

Result<TensorScatterAttrs> ReadTensorScatterAttrs(const Node& node) {
  TensorScatterAttrs a;
  Result<std::string> read = node.GetString("mode", "linear");
  if (!read.ok()) return read.status();
  const std::string& mode = read.value();
  if (mode != "linear" && mode != "circular")
    return InvalidModel(node.Describe() + ": mode must be 'linear' or 'circular', got '" + mode + "'");
  a.circular = mode == "circular";
  NEE_ASSIGN_OR_RETURN(a.axis, node.GetInt("axis", -2));
  return a;
}

// The sequence axis in [1, rank): axis 0 is the batch and cannot be it.
Result<int64_t> TensorScatterAxis(const Node& node, int64_t axis, int64_t rank) {
  NEE_ASSIGN_OR_RETURN(int64_t normalized, NormalizeAxis(axis, rank, node));
  if (normalized == 0)
    return InvalidModel(node.Describe() + ": axis " + std::to_string(axis) +
                        " names the batch dimension; the sequence axis cannot be 0");
  return normalized;
}

Status InferTensorScatter(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(TensorScatterAttrs attrs, ReadTensorScatterAttrs(ctx.node));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* cache, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* update, InputTensorType(ctx, 1));
  if (update->elem_type != DataType::kUndefined && cache->elem_type != DataType::kUndefined &&
      update->elem_type != cache->elem_type)
    return ctx.InputError(1, std::string("update must have past_cache's element type ") +
                                 DataTypeName(cache->elem_type) + ", got " + DataTypeName(update->elem_type));
  ctx.output_types[0] = TypeInfo::Tensor(cache->elem_type, cache->shape);
  if (!cache->shape) return Status::Ok();
  const Shape& cs = *cache->shape;
  const int64_t rank = static_cast<int64_t>(cs.size());
  if (rank < 2) return ctx.InputError(0, "past_cache must have rank 2 or more (batch, ..., sequence, ...), got " +
                                             ShapeToString(cs));
  NEE_ASSIGN_OR_RETURN(int64_t axis, TensorScatterAxis(ctx.node, attrs.axis, rank));
  if (update->shape) {
    const Shape& us = *update->shape;
    if (us.size() != cs.size())
      return ctx.InputError(1, "update must have past_cache's rank " + std::to_string(rank) + ", got " +
                                   ShapeToString(us));
    for (int64_t d = 0; d < rank; ++d) {
      if (d == axis) {
        if (cs[d].known() && us[d].known() && us[d].value > cs[d].value)
          return ctx.InputError(1, "update's sequence length " + std::to_string(us[d].value) +
                                       " exceeds the cache's max_sequence_length " + std::to_string(cs[d].value));
      } else if (nn::DimsConflict(cs[d], us[d])) {
        return ctx.InputError(1, "update " + ShapeToString(us) + " differs from past_cache " + ShapeToString(cs) +
                                     " in dim " + std::to_string(d));
      }
    }
  }
  if (ctx.has_input(2)) {
    NEE_ASSIGN_OR_RETURN(const TypeInfo* indices, InputTensorType(ctx, 2));
    if (indices->elem_type != DataType::kUndefined && indices->elem_type != DataType::kInt64)
      return ctx.InputError(2, std::string("write_indices must be int64, got ") + DataTypeName(indices->elem_type));
    if (indices->shape && (indices->shape->size() != 1 || nn::DimsConflict((*indices->shape)[0], cs[0])))
      return ctx.InputError(2, "write_indices must have shape (batch_size) = (" + cs[0].ToString() + "), got " +
                                   ShapeToString(*indices->shape));
  }
  return Status::Ok();
}

Status TensorScatterKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(TensorScatterAttrs attrs, ReadTensorScatterAttrs(ctx.node()));
  NEE_ASSIGN_OR_RETURN(const Tensor* cache, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* update, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* indices, OptionalInput(ctx, 2));
  const int64_t rank = cache->rank();
  if (rank < 2)
    return ctx.InputError(0, "past_cache must have rank 2 or more (batch, ..., sequence, ...), got " + cache->Describe());
  if (update->dtype() != cache->dtype())
    return ctx.InputError(1, std::string("update must have past_cache's element type ") + DataTypeName(cache->dtype()) +
                                 ", got " + DataTypeName(update->dtype()));
  if (update->rank() != rank)
    return ctx.InputError(1, "update must have past_cache's rank " + std::to_string(rank) + ", got " + update->Describe());
  NEE_ASSIGN_OR_RETURN(int64_t axis, TensorScatterAxis(ctx.node(), attrs.axis, rank));
  for (int64_t d = 0; d < rank; ++d) {
    const bool ok = d == axis ? update->dim(d) <= cache->dim(d) : update->dim(d) == cache->dim(d);
    if (!ok)
      return ctx.InputError(1, "update " + DimsToString(update->dims()) + " does not fit past_cache " +
                                   DimsToString(cache->dims()) + " (dims must match except the sequence axis " +
                                   std::to_string(axis) + ", where update's may be at most the cache's)");
  }
  const int64_t batch = cache->dim(0);
  const int64_t max_seq = cache->dim(axis), seq = update->dim(axis);
  if (indices) {
    if (indices->dtype() != DataType::kInt64)
      return ctx.InputError(2, std::string("write_indices must be int64, got ") + DataTypeName(indices->dtype()));
    if (indices->rank() != 1 || indices->dim(0) != batch)
      return ctx.InputError(2, "write_indices must have shape (" + std::to_string(batch) + "), got " +
                                   DimsToString(indices->dims()));
  }

  // The first cache row each batch entry writes to; linear writes must stay
  // inside the cache, circular ones wrap.
  std::vector<int64_t> start(static_cast<size_t>(batch), 0);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t w = indices ? indices->data<int64_t>()[b] : 0;
    if (attrs.circular) {
      start[b] = max_seq > 0 ? ((w % max_seq) + max_seq) % max_seq : 0;
    } else {
      if (w < 0 || w > max_seq - seq)
        return ctx.InputError(2, "write_indices[" + std::to_string(b) + "] = " + std::to_string(w) +
                                     " with sequence_length " + std::to_string(seq) +
                                     " writes outside max_sequence_length " + std::to_string(max_seq) +
                                     " (linear mode needs 0 <= index and index + sequence_length <= max)");
      start[b] = w;
    }
  }

  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, cache->dtype(), cache->dims()));
  NEE_RETURN_IF_ERROR(tensor_util::CopyElements(ctx.node(), *cache, out));
  if (seq == 0 || out.num_elements() == 0) return Status::Ok();
  // Rows are runs of `inner` elements; prefixes (the dims before the axis)
  // are walked in order and each belongs to batch prefix / per_batch.
  const int64_t inner = ProductOf(cache->dims(), static_cast<size_t>(axis) + 1);
  const int64_t prefixes = ProductOf(cache->dims(), 0, static_cast<size_t>(axis));
  const int64_t per_batch = prefixes / batch;
  return tensor_util::VisitStorage(ctx.node(), cache->dtype(), [&]<typename A>() -> Status {
    A src(*update), dst(out);
    for (int64_t p = 0; p < prefixes; ++p) {
      const int64_t b = p / per_batch;
      for (int64_t s = 0; s < seq; ++s) {
        const int64_t row = attrs.circular ? (start[b] + s) % max_seq : start[b] + s;
        dst.CopyRun((p * max_seq + row) * inner, src, (p * seq + s) * inner, inner);
      }
    }
    return Status::Ok();
  });
}
}  // namespace

void RegisterAttentionOps(OpRegistry& registry) {
  // 24 added nonpad_kv_seqlen (input 6); 25 added the sliding window attributes.
  registry.RegisterVersions("", "Attention", {23, 24, 25}, InferAttention, AttentionKernel);
  registry.RegisterVersions("", "TensorScatter", {24}, InferTensorScatter, TensorScatterKernel);
}

}  // namespace nee
