// Operator family: the recurrent sequence-mixing ops of opset 27, the blocks of
// linear-attention / state-space models:
//
//   LinearAttention      (27: linear, gated, delta and gated-delta state updates)
//   CausalConvWithState  (27: the depthwise causal conv1d beside it, with its state)
//
// Split from attention.cc to keep each file readable whole; the helpers shared
// with the other attention-era families are in attention_util.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/attention_util.h"
#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

using namespace attention_util;  // NOLINT: shared with the other attention-era families
using nn::ComputeInput;
using nn::ComputeOutput;

// ---- LinearAttention ---------------------------------------------------------------
// A recurrence over time per (batch, kv head) on a d_k x d_v state, in float
// whatever the input type (as the reference accumulates).

enum class LinearUpdate { kLinear, kGated, kDelta, kGatedDelta };

struct LinearAttentionAttrs {
  int64_t q_heads = 0, kv_heads = 0;
  float scale = 0;
  LinearUpdate rule = LinearUpdate::kGatedDelta;
  bool gating() const { return rule == LinearUpdate::kGated || rule == LinearUpdate::kGatedDelta; }
  bool delta() const { return rule == LinearUpdate::kDelta || rule == LinearUpdate::kGatedDelta; }
};

Result<LinearAttentionAttrs> ReadLinearAttentionAttrs(const Node& node) {
  LinearAttentionAttrs a;
  const std::string where = node.Describe() + ": ";
  if (!node.HasAttr("q_num_heads") || !node.HasAttr("kv_num_heads"))
    return InvalidModel(where + "the attributes q_num_heads and kv_num_heads are required");
  NEE_ASSIGN_OR_RETURN(a.q_heads, node.GetInt("q_num_heads"));
  NEE_ASSIGN_OR_RETURN(a.kv_heads, node.GetInt("kv_num_heads"));
  if (a.q_heads <= 0 || a.kv_heads <= 0 || a.q_heads % a.kv_heads != 0)
    return InvalidModel(where + "q_num_heads (" + std::to_string(a.q_heads) + ") must be a positive multiple of kv_num_heads (" +
                        std::to_string(a.kv_heads) + ")");
  NEE_ASSIGN_OR_RETURN(a.scale, node.GetFloat("scale", 0.0f));
  NEE_ASSIGN_OR_RETURN(std::string rule, node.GetString("update_rule", "gated_delta"));
  if (rule == "linear") a.rule = LinearUpdate::kLinear;
  else if (rule == "gated") a.rule = LinearUpdate::kGated;
  else if (rule == "delta") a.rule = LinearUpdate::kDelta;
  else if (rule == "gated_delta") a.rule = LinearUpdate::kGatedDelta;
  else return InvalidModel(where + "update_rule must be 'linear', 'gated', 'delta' or 'gated_delta', got '" + rule + "'");
  return a;
}

constexpr size_t kLaQuery = 0, kLaKey = 1, kLaValue = 2, kLaPastState = 3, kLaDecay = 4, kLaBeta = 5;

Status InferLinearAttention(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(LinearAttentionAttrs attrs, ReadLinearAttentionAttrs(ctx.node));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* q, InputTensorType(ctx, kLaQuery));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* k, InputTensorType(ctx, kLaKey));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* v, InputTensorType(ctx, kLaValue));
  for (size_t i : {kLaQuery, kLaKey, kLaValue}) {
    const int64_t r = nn::KnownRank(ctx, i);
    if (r != -1 && r != 3) return ctx.InputError(i, "must be 3-D (batch, time, heads * head_size)");
  }
  const bool gating_given = ctx.has_input(kLaDecay), beta_given = ctx.has_input(kLaBeta);
  if (attrs.gating() != gating_given)
    return ctx.InputError(kLaDecay, attrs.gating() ? "decay is required by this update_rule" : "decay is not allowed by this update_rule");
  if (attrs.delta() != beta_given)
    return ctx.InputError(kLaBeta, attrs.delta() ? "beta is required by this update_rule" : "beta is not allowed by this update_rule");
  auto dim_of = [](const TypeInfo* t, size_t i) { return t->shape ? (*t->shape)[i] : Dim::Unknown(); };
  const Dim batch = nn::MergeDims(dim_of(q, 0), dim_of(k, 0));
  const Dim time = nn::MergeDims(dim_of(q, 1), dim_of(k, 1));
  NEE_ASSIGN_OR_RETURN(Dim d_k, DivideDim(ctx, kLaQuery, dim_of(q, 2), attrs.q_heads, "hidden size"));
  NEE_ASSIGN_OR_RETURN(Dim d_v, DivideDim(ctx, kLaValue, dim_of(v, 2), attrs.kv_heads, "hidden size"));
  ctx.output_types[0] = TypeInfo::Tensor(q->elem_type, Shape{batch, time, MultiplyDim(d_v, attrs.q_heads)});
  if (ctx.num_outputs() > 1) {
    const DataType state_type = ctx.has_input(kLaPastState) ? ctx.input_type(kLaPastState).elem_type : q->elem_type;
    ctx.output_types[1] = TypeInfo::Tensor(state_type, Shape{batch, Dim::Known(attrs.kv_heads), d_k, d_v});
  }
  return Status::Ok();
}

Status LinearAttentionKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(LinearAttentionAttrs attrs, ReadLinearAttentionAttrs(ctx.node()));
  NEE_ASSIGN_OR_RETURN(const Tensor* q, ctx.InputTensor(kLaQuery));
  NEE_ASSIGN_OR_RETURN(const Tensor* k, ctx.InputTensor(kLaKey));
  NEE_ASSIGN_OR_RETURN(const Tensor* v, ctx.InputTensor(kLaValue));
  NEE_ASSIGN_OR_RETURN(const Tensor* past, OptionalInput(ctx, kLaPastState));
  NEE_ASSIGN_OR_RETURN(const Tensor* decay, OptionalInput(ctx, kLaDecay));
  NEE_ASSIGN_OR_RETURN(const Tensor* beta, OptionalInput(ctx, kLaBeta));
  for (size_t i : {kLaQuery, kLaKey, kLaValue}) {
    const Tensor& t = i == kLaQuery ? *q : i == kLaKey ? *k : *v;
    NEE_RETURN_IF_ERROR(CheckFloatInput(ctx, i, t));
    if (t.rank() != 3) return ctx.InputError(i, "must be 3-D (batch, time, heads * head_size), got " + t.Describe());
  }
  if (attrs.gating() != (decay != nullptr))
    return ctx.InputError(kLaDecay, attrs.gating() ? "decay is required by this update_rule" : "decay is not allowed by this update_rule");
  if (attrs.delta() != (beta != nullptr))
    return ctx.InputError(kLaBeta, attrs.delta() ? "beta is required by this update_rule" : "beta is not allowed by this update_rule");

  const int64_t B = q->dim(0), T = q->dim(1), Hq = attrs.q_heads, Hkv = attrs.kv_heads;
  if (q->dim(2) % Hq != 0)
    return ctx.InputError(kLaQuery, "hidden size " + std::to_string(q->dim(2)) + " is not divisible by q_num_heads " + std::to_string(Hq));
  const int64_t dk = q->dim(2) / Hq;
  if (v->dim(2) % Hkv != 0)
    return ctx.InputError(kLaValue, "hidden size " + std::to_string(v->dim(2)) + " is not divisible by kv_num_heads " + std::to_string(Hkv));
  const int64_t dv = v->dim(2) / Hkv;
  const std::vector<int64_t> want_k = {B, T, Hkv * dk};
  if (k->dims() != want_k) return ctx.InputError(kLaKey, "expected dims " + DimsToString(want_k) + ", got " + DimsToString(k->dims()));
  if (v->dim(0) != B || v->dim(1) != T)
    return ctx.InputError(kLaValue, "batch and time must match the query's (" + std::to_string(B) + ", " + std::to_string(T) + ")");
  bool per_key_decay = false;
  if (decay) {
    NEE_RETURN_IF_ERROR(CheckFloatInput(ctx, kLaDecay, *decay));
    if (decay->rank() != 3 || decay->dim(0) != B || decay->dim(1) != T ||
        (decay->dim(2) != Hkv && decay->dim(2) != Hkv * dk))
      return ctx.InputError(kLaDecay, "expected (" + std::to_string(B) + ", " + std::to_string(T) + ", " + std::to_string(Hkv) +
                                          " or " + std::to_string(Hkv * dk) + "), got " + DimsToString(decay->dims()));
    per_key_decay = decay->dim(2) == Hkv * dk && decay->dim(2) != Hkv;
  }
  bool shared_beta = false;
  if (beta) {
    NEE_RETURN_IF_ERROR(CheckFloatInput(ctx, kLaBeta, *beta));
    if (beta->rank() != 3 || beta->dim(0) != B || beta->dim(1) != T || (beta->dim(2) != Hkv && beta->dim(2) != 1))
      return ctx.InputError(kLaBeta, "expected (" + std::to_string(B) + ", " + std::to_string(T) + ", " + std::to_string(Hkv) +
                                         " or 1), got " + DimsToString(beta->dims()));
    shared_beta = beta->dim(2) == 1 && Hkv != 1;
  }
  const std::vector<int64_t> state_dims = {B, Hkv, dk, dv};
  if (past) {
    NEE_RETURN_IF_ERROR(CheckFloatInput(ctx, kLaPastState, *past));
    if (past->dims() != state_dims)
      return ctx.InputError(kLaPastState, "expected dims " + DimsToString(state_dims) + ", got " + DimsToString(past->dims()));
  }

  ComputeInput<float> cq(*q), ck(*k), cv(*v), cdecay, cbeta;
  if (decay) cdecay = ComputeInput<float>(*decay);
  if (beta) cbeta = ComputeInput<float>(*beta);
  std::vector<float> state(static_cast<size_t>(B * Hkv * dk * dv), 0.0f);
  if (past) nn::ConvertToCompute(*past, state.data());
  const float scale = attrs.scale != 0.0f ? attrs.scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk)));
  const int64_t group = Hq / Hkv;

  NEE_ASSIGN_OR_RETURN(Tensor out_tensor, ctx.AllocateOutput(0, q->dtype(), {B, T, Hq * dv}));
  ComputeOutput<float> out(out_tensor);
  ctx.ParallelFor(B * Hkv, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> vt(static_cast<size_t>(dv)), retrieved(static_cast<size_t>(dv));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / Hkv, h = task % Hkv;
      float* S = state.data() + task * dk * dv;  // [dk][dv]
      for (int64_t t = 0; t < T; ++t) {
        const float* kt = ck.data() + (b * T + t) * Hkv * dk + h * dk;
        const float* vsrc = cv.data() + (b * T + t) * Hkv * dv + h * dv;
        std::copy(vsrc, vsrc + dv, vt.begin());
        if (decay) {
          const float* g = cdecay.data() + (b * T + t) * decay->dim(2);
          for (int64_t d = 0; d < dk; ++d) {
            const float factor = std::exp(per_key_decay ? g[h * dk + d] : g[h]);
            for (int64_t m = 0; m < dv; ++m) S[d * dv + m] *= factor;
          }
        }
        if (beta) {
          const float bt = cbeta[(b * T + t) * beta->dim(2) + (shared_beta ? 0 : h)];
          std::fill(retrieved.begin(), retrieved.end(), 0.0f);
          for (int64_t d = 0; d < dk; ++d) nn::AddScaledRow(retrieved.data(), S + d * dv, kt[d], dv);
          for (int64_t m = 0; m < dv; ++m) vt[m] = bt * (vt[m] - retrieved[m]);
        }
        for (int64_t d = 0; d < dk; ++d) nn::AddScaledRow(S + d * dv, vt.data(), kt[d], dv);
        // Every query head of the group reads the shared state.
        for (int64_t qh = h * group; qh < (h + 1) * group; ++qh) {
          const float* qt = cq.data() + (b * T + t) * Hq * dk + qh * dk;
          float* o = out.data() + (b * T + t) * Hq * dv + qh * dv;
          std::fill(o, o + dv, 0.0f);
          for (int64_t d = 0; d < dk; ++d) nn::AddScaledRow(o, S + d * dv, qt[d], dv);
          for (int64_t m = 0; m < dv; ++m) o[m] *= scale;
        }
      }
    }
  });
  out.Commit();
  if (ctx.wants_output(1)) {
    NEE_ASSIGN_OR_RETURN(Tensor st, ctx.AllocateOutput(1, past ? past->dtype() : q->dtype(), state_dims));
    nn::ConvertFromCompute(state.data(), st);
  }
  return Status::Ok();
}

// ---- CausalConvWithState -------------------------------------------------------------
// Depthwise causal conv1d over [past_state (or zeros), input] with an optional
// fused SiLU; present_state is the last k - 1 positions of that sequence.

Result<bool> ReadCausalConvActivation(const Node& node) {
  Result<std::string> read = node.GetString("activation", "none");
  if (!read.ok()) return read.status();
  const std::string& act = read.value();
  if (act == "none") return false;
  if (act == "silu" || act == "swish") return true;
  return InvalidModel(node.Describe() + ": activation must be 'none', 'silu' or 'swish', got '" + act + "'");
}

Status InferCausalConvWithState(InferenceContext& ctx) {
  NEE_RETURN_IF_ERROR(ReadCausalConvActivation(ctx.node).status());
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* w, InputTensorType(ctx, 1));
  if (nn::KnownRank(ctx, 0) != -1 && nn::KnownRank(ctx, 0) != 3) return ctx.InputError(0, "input must be 3-D (batch, channels, length)");
  if (nn::KnownRank(ctx, 1) != -1 && nn::KnownRank(ctx, 1) != 3) return ctx.InputError(1, "weight must be 3-D (channels, 1, k)");
  ctx.output_types[0] = *x;
  if (ctx.num_outputs() > 1) {
    Dim batch = x->shape ? (*x->shape)[0] : Dim::Unknown();
    Dim channels = x->shape ? (*x->shape)[1] : Dim::Unknown();
    Dim k = w->shape ? (*w->shape)[2] : Dim::Unknown();
    Dim state_len = k.known() ? Dim::Known(std::max<int64_t>(0, k.value - 1)) : Dim::Unknown();
    ctx.output_types[1] = TypeInfo::Tensor(x->elem_type, Shape{batch, channels, state_len});
  }
  return Status::Ok();
}

Status CausalConvWithStateKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(bool silu, ReadCausalConvActivation(ctx.node()));
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* w, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* bias, OptionalInput(ctx, 2));
  NEE_ASSIGN_OR_RETURN(const Tensor* past, OptionalInput(ctx, 3));
  NEE_RETURN_IF_ERROR(CheckFloatInput(ctx, 0, *x));
  NEE_RETURN_IF_ERROR(CheckFloatInput(ctx, 1, *w));
  if (x->rank() != 3) return ctx.InputError(0, "input must be 3-D (batch, channels, length), got " + x->Describe());
  const int64_t B = x->dim(0), C = x->dim(1), L = x->dim(2);
  if (w->rank() != 3 || w->dim(0) != C || w->dim(1) != 1 || w->dim(2) < 1)
    return ctx.InputError(1, "weight must be (" + std::to_string(C) + ", 1, k) with k >= 1, got " + DimsToString(w->dims()));
  const int64_t K = w->dim(2), P = K - 1;
  if (bias) {
    NEE_RETURN_IF_ERROR(CheckFloatInput(ctx, 2, *bias));
    if (bias->rank() != 1 || bias->dim(0) != C)
      return ctx.InputError(2, "bias must be (" + std::to_string(C) + "), got " + DimsToString(bias->dims()));
  }
  if (past) {
    NEE_RETURN_IF_ERROR(CheckFloatInput(ctx, 3, *past));
    const std::vector<int64_t> want = {B, C, P};
    if (past->dims() != want)
      return ctx.InputError(3, "past_state must be " + DimsToString(want) + ", got " + DimsToString(past->dims()));
  }
  const DataType t = x->dtype();
  ComputeInput<float> cx(*x), cw(*w), cb, cp;
  if (bias) cb = ComputeInput<float>(*bias);
  if (past) cp = ComputeInput<float>(*past);
  NEE_ASSIGN_OR_RETURN(Tensor y_tensor, ctx.AllocateOutput(0, t, {B, C, L}));
  ComputeOutput<float> y(y_tensor);
  std::vector<float> state(static_cast<size_t>(B * C * P));
  ctx.ParallelFor(B * C, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> padded(static_cast<size_t>(P + L));
    for (int64_t bc = begin; bc < end; ++bc) {
      const int64_t c = bc % C;
      for (int64_t i = 0; i < P; ++i) padded[i] = past ? cp[bc * P + i] : 0.0f;
      std::copy(cx.data() + bc * L, cx.data() + (bc + 1) * L, padded.begin() + P);
      const float* wc = cw.data() + c * K;
      for (int64_t o = 0; o < L; ++o) {
        float acc = 0;
        for (int64_t i = 0; i < K; ++i) acc += padded[o + i] * wc[i];
        if (bias) acc += cb[c];
        acc = RoundTo<float>(t, acc);
        if (silu) acc = acc * (1.0f / (1.0f + std::exp(-acc)));
        y[bc * L + o] = acc;
      }
      std::copy(padded.end() - P, padded.end(), state.begin() + bc * P);
    }
  });
  y.Commit();
  if (ctx.wants_output(1)) {
    NEE_ASSIGN_OR_RETURN(Tensor st, ctx.AllocateOutput(1, t, {B, C, P}));
    nn::ConvertFromCompute(state.data(), st);
  }
  return Status::Ok();
}

}  // namespace

void RegisterLinearAttentionOps(OpRegistry& registry) {
  registry.RegisterVersions("", "LinearAttention", {27}, InferLinearAttention, LinearAttentionKernel);
  registry.RegisterVersions("", "CausalConvWithState", {27}, InferCausalConvWithState, CausalConvWithStateKernel);
}

}  // namespace nee
