// Operator family: FlexAttention (ai.onnx.preview 1), attention whose scores
// and probabilities pass through the model's own modifier subgraphs. Split
// from attention.cc to keep each file readable whole; the rounding and checks
// it shares with Attention are in attention_util.h.
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

// ---- FlexAttention (ai.onnx.preview) ---------------------------------------------------
// Scores (computed in the input type, then widened to the softmax precision)
// pass through the optional score_mod subgraph, are softmaxed, pass through
// the optional prob_mod subgraph and are multiplied by V.

Result<DataType> FlexSoftmaxType(const Node& node, DataType input) {
  if (node.HasAttr("softmax_precision")) {
    NEE_ASSIGN_OR_RETURN(int64_t p, node.GetInt("softmax_precision"));
    if (p != 1 && p != 10 && p != 11 && p != 16)
      return InvalidModel(node.Describe() + ": softmax_precision must be 1, 10, 11 or 16, got " + std::to_string(p));
    return static_cast<DataType>(p);
  }
  return input == DataType::kDouble ? DataType::kDouble : DataType::kFloat;
}

Status InferFlexAttention(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* q, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* k, InputTensorType(ctx, 1));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* v, InputTensorType(ctx, 2));
  for (size_t i = 0; i < 3; ++i) {
    const int64_t r = nn::KnownRank(ctx, i);
    if (r != -1 && r != 4) return ctx.InputError(i, "must be 4-D (batch, heads, sequence, head_size)");
  }
  NEE_RETURN_IF_ERROR(FlexSoftmaxType(ctx.node, q->elem_type).status());
  auto dim_of = [](const TypeInfo* t, size_t i) { return t->shape ? (*t->shape)[i] : Dim::Unknown(); };
  if (nn::DimsConflict(dim_of(q, 3), dim_of(k, 3))) return ctx.InputError(1, "K's head size differs from Q's");
  ctx.output_types[0] = TypeInfo::Tensor(
      v->elem_type, Shape{nn::MergeDims(dim_of(q, 0), dim_of(v, 0)), dim_of(q, 1), dim_of(q, 2), dim_of(v, 3)});
  return Status::Ok();
}

// Runs a modifier subgraph on `values` (dims `dims`, element type `type`) in place.
template <typename A>
Status RunModifier(KernelContext& ctx, const char* attr, DataType type, const std::vector<int64_t>& dims,
                   std::vector<A>& values) {
  if (!ctx.node().HasAttr(attr)) return Status::Ok();
  NEE_ASSIGN_OR_RETURN(const Graph* body, ctx.node().GetGraph(attr));
  if (!ctx.subgraphs()) return ctx.Error(std::string("cannot run ") + attr + ": no subgraph runner was provided");
  NEE_ASSIGN_OR_RETURN(Tensor in, Tensor::Allocate(type, dims));
  nn::ConvertFromCompute(values.data(), in);
  Result<std::vector<Value>> outs = ctx.subgraphs()->Run(*body, {Value(in)});
  if (!outs.ok()) return outs.status().WithContext(ctx.node().Describe() + ": in " + attr + ": ");
  if (outs->size() != 1 || !(*outs)[0].is_tensor())
    return ctx.Error(std::string(attr) + " must produce exactly one tensor");
  const Tensor& out = (*outs)[0].tensor();
  if (out.dims() != dims || !IsAttentionFloat(out.dtype()))
    return ctx.Error(std::string(attr) + " must keep its input's shape " + DimsToString(dims) + ", got " + out.Describe());
  nn::ConvertToCompute(out, values.data());
  for (A& x : values) x = RoundTo<A>(type, x);
  return Status::Ok();
}

template <typename A>
Status FlexAttentionTyped(KernelContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v, DataType softmax_type) {
  const int64_t B = q.dim(0), Hq = q.dim(1), L = q.dim(2), E = q.dim(3);
  const int64_t Hkv = k.dim(1), S = k.dim(2), Ev = v.dim(3);
  const DataType t1 = q.dtype();
  NEE_ASSIGN_OR_RETURN(float scale_attr, ctx.node().GetFloat("scale", 0.0f));
  const bool has_scale = ctx.node().HasAttr("scale");
  // sqrt(scale) in float, then rounded to the input type, as the reference does.
  const float scale = has_scale ? scale_attr : static_cast<float>(1.0 / std::sqrt(static_cast<double>(E)));
  const A sqrt_scale = RoundTo<A>(t1, static_cast<A>(std::sqrt(scale)));
  ComputeInput<A> cq(q), ck(k), cv(v);
  const int64_t group = Hq / Hkv;
  const std::vector<int64_t> score_dims = {B, Hq, L, S};
  std::vector<A> scores(static_cast<size_t>(B * Hq * L * S));
  ctx.ParallelFor(B * Hq, 1, [&](int64_t begin, int64_t end) {
    std::vector<A> q_row(static_cast<size_t>(E)), k_row(static_cast<size_t>(E));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / Hq, h = task % Hq, kvh = h / group;
      for (int64_t i = 0; i < L; ++i) {
        const A* qs = cq.data() + (task * L + i) * E;
        for (int64_t e = 0; e < E; ++e) q_row[e] = RoundTo<A>(t1, qs[e] * sqrt_scale);
        for (int64_t j = 0; j < S; ++j) {
          const A* ks = ck.data() + ((b * Hkv + kvh) * S + j) * E;
          A dot{0};
          for (int64_t e = 0; e < E; ++e) dot += q_row[e] * RoundTo<A>(t1, ks[e] * sqrt_scale);
          scores[(task * L + i) * S + j] = RoundTo<A>(softmax_type, RoundTo<A>(t1, dot));
        }
      }
    }
  });
  NEE_RETURN_IF_ERROR(RunModifier<A>(ctx, "score_mod", softmax_type, score_dims, scores));
  // Plain softmax along the keys (a fully masked row gives NaN, as in the reference).
  ctx.ParallelFor(B * Hq * L, 1, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      A* r = scores.data() + row * S;
      A max = -std::numeric_limits<A>::infinity();
      for (int64_t j = 0; j < S; ++j) max = std::max(max, r[j]);
      A sum{0};
      for (int64_t j = 0; j < S; ++j) {
        r[j] = RoundTo<A>(softmax_type, static_cast<A>(std::exp(RoundTo<A>(softmax_type, r[j] - max))));
        sum = SumStep<A>(softmax_type, sum, r[j]);
      }
      sum = RoundTo<A>(softmax_type, sum);
      for (int64_t j = 0; j < S; ++j) r[j] = RoundTo<A>(softmax_type, r[j] / sum);
    }
  });
  NEE_RETURN_IF_ERROR(RunModifier<A>(ctx, "prob_mod", softmax_type, score_dims, scores));
  NEE_ASSIGN_OR_RETURN(Tensor y_tensor, ctx.AllocateOutput(0, v.dtype(), {B, Hq, L, Ev}));
  ComputeOutput<A> y(y_tensor);
  ctx.ParallelFor(B * Hq, 1, [&](int64_t begin, int64_t end) {
    std::vector<A> v_row(static_cast<size_t>(Ev));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / Hq, h = task % Hq, kvh = h / group;
      for (int64_t i = 0; i < L; ++i) {
        A* out = y.data() + (task * L + i) * Ev;
        std::fill(out, out + Ev, A{0});
        for (int64_t j = 0; j < S; ++j) {
          const A* vs = cv.data() + ((b * Hkv + kvh) * S + j) * Ev;
          for (int64_t e = 0; e < Ev; ++e) v_row[e] = RoundTo<A>(softmax_type, vs[e]);
          nn::AddScaledRow(out, v_row.data(), scores[(task * L + i) * S + j], Ev);
        }
      }
    }
  });
  y.Commit();
  return Status::Ok();
}

Status FlexAttentionKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* q, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* k, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* v, ctx.InputTensor(2));
  const Tensor* inputs[3] = {q, k, v};
  for (size_t i = 0; i < 3; ++i) {
    NEE_RETURN_IF_ERROR(CheckFloatInput(ctx, i, *inputs[i]));
    if (inputs[i]->rank() != 4)
      return ctx.InputError(i, "must be 4-D (batch, heads, sequence, head_size), got " + inputs[i]->Describe());
    if (inputs[i]->dtype() != q->dtype())
      return ctx.InputError(i, std::string("must have Q's element type ") + DataTypeName(q->dtype()));
    if (inputs[i]->dim(0) != q->dim(0))
      return ctx.InputError(i, "batch " + std::to_string(inputs[i]->dim(0)) + " differs from Q's " + std::to_string(q->dim(0)));
  }
  if (k->dim(3) != q->dim(3))
    return ctx.InputError(1, "head size " + std::to_string(k->dim(3)) + " differs from Q's " + std::to_string(q->dim(3)));
  if (v->dim(1) != k->dim(1) || v->dim(2) != k->dim(2))
    return ctx.InputError(2, "heads and sequence length must match K's " + DimsToString(k->dims()));
  if (k->dim(1) <= 0 || q->dim(1) % k->dim(1) != 0)
    return ctx.Error("q heads (" + std::to_string(q->dim(1)) + ") must be a multiple of kv heads (" + std::to_string(k->dim(1)) + ")");
  NEE_ASSIGN_OR_RETURN(DataType softmax_type, FlexSoftmaxType(ctx.node(), q->dtype()));
  if (q->dtype() == DataType::kDouble || softmax_type == DataType::kDouble)
    return FlexAttentionTyped<double>(ctx, *q, *k, *v, softmax_type);
  return FlexAttentionTyped<float>(ctx, *q, *k, *v, softmax_type);
}

}  // namespace

void RegisterFlexAttentionOps(OpRegistry& registry) {
  registry.RegisterVersions("ai.onnx.preview", "FlexAttention", {1}, InferFlexAttention, FlexAttentionKernel);
}

}  // namespace nee
