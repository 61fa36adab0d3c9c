// Operator family: nee's own fused ops for transformers (domain ai.nee),
// written by the optimizer and never by exporters. See ops/attention_sdpa.h
// for ScaledDotProductAttention's contract and ops/fused_matmul.h for
// FusedMatMul's.
//
// The reference kernel computes each score as a double-precision dot product
// (as the com.microsoft attention references do), so it is an independent
// yardstick for the SGEMM-based kernel in ep/cpu/attention_fast.cc. Work is
// split over (batch, head) pairs, each writing its own output slice, so
// results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ops/attention_sdpa.h"
#include "ops/fused_matmul.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

Dim DimAt(const TypeInfo& t, size_t axis) {
  if (!t.shape || axis >= t.shape->size()) return Dim::Unknown();
  return (*t.shape)[axis];
}

// Output [B, S, N*Hv] from query [B, S, .] and value [B, L, N*Hv].
Status InferSdpa(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(int64_t heads, ctx.node.GetInt("num_heads"));
  if (heads <= 0) return ctx.Error("num_heads must be positive, got " + std::to_string(heads));
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    NEE_ASSIGN_OR_RETURN(const TypeInfo* t, InputTensorType(ctx, i));
    if (t->elem_type != DataType::kFloat)
      return ctx.InputError(i, std::string("must be float32, got ") + DataTypeName(t->elem_type));
    const size_t rank = t->shape ? t->shape->size() : 0;
    if (t->shape && i < 3 && rank != 3) return ctx.InputError(i, "must be 3-D, got rank " + std::to_string(rank));
    if (t->shape && i == 3 && rank > 4) return ctx.InputError(i, "(bias) must have rank <= 4");
  }
  if (ctx.has_input(1) != ctx.has_input(2)) return ctx.Error("key and value must both be given or both be absent");
  const TypeInfo& q = ctx.input_type(0);
  Dim width = Dim::Unknown();
  if (ctx.has_input(2)) {
    width = DimAt(ctx.input_type(2), 2);
  } else if (DimAt(q, 2).value >= 0) {  // packed q | k | v
    if (DimAt(q, 2).value % (3 * heads) != 0)
      return ctx.InputError(0, "(packed q, k, v) width must be a multiple of 3 * num_heads");
    width = Dim::Known(DimAt(q, 2).value / 3);
  }
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat, Shape{DimAt(q, 0), DimAt(q, 1), width});
  return Status::Ok();
}

// Strides of a bias of dims `d` (rank <= 4) read as [B, N, S, L]; 0 where it broadcasts.
Status BiasStrides(const KernelContext& ctx, const std::vector<int64_t>& d, const std::array<int64_t, 4>& target,
                   std::array<int64_t, 4>* strides) {
  if (d.size() > 4) return ctx.InputError(3, "(bias) must have rank <= 4, got " + DimsToString(d));
  int64_t stride = 1;
  strides->fill(0);
  for (size_t k = 0; k < d.size(); ++k) {
    const size_t axis = 3 - k;                 // target axis, right-aligned
    const int64_t dim = d[d.size() - 1 - k];
    if (dim != 1 && dim != target[axis])
      return ctx.InputError(3, "(bias) of shape " + DimsToString(d) + " does not broadcast to [" +
                                   std::to_string(target[0]) + ", " + std::to_string(target[1]) + ", " +
                                   std::to_string(target[2]) + ", " + std::to_string(target[3]) + "]");
    (*strides)[axis] = dim == 1 ? 0 : stride;
    stride *= dim;
  }
  return Status::Ok();
}

// One (batch, head): scores, softmax and the weighted sum of values for every query.
void ReferenceHead(const SdpaGeometry& g, int64_t b, int64_t n, float* out) {
  const int64_t S = g.q_len, L = g.kv_len, H = g.head, Hv = g.v_head, N = g.heads;
  const float* q = g.query + b * S * g.q_ld + n * H;
  const float* k = g.key + b * L * g.k_ld + n * H;
  const float* v = g.value + b * L * g.v_ld + n * Hv;
  std::vector<float> p(static_cast<size_t>(L));
  for (int64_t s = 0; s < S; ++s) {
    float max_score = -std::numeric_limits<float>::infinity();
    std::fill(p.begin(), p.end(), -std::numeric_limits<float>::infinity());  // unseen keys: e^-inf = 0
    for (int64_t l = 0; l < g.VisibleKeys(s); ++l) {
      double dot = 0;
      for (int64_t h = 0; h < H; ++h) dot += static_cast<double>(q[s * g.q_ld + h]) * k[l * g.k_ld + h];
      float score = g.scale * static_cast<float>(dot);
      if (g.bias)
        score += g.bias[b * g.bias_stride[0] + n * g.bias_stride[1] + s * g.bias_stride[2] + l * g.bias_stride[3]];
      p[static_cast<size_t>(l)] = score;
      max_score = std::max(max_score, score);
    }
    double sum = 0;
    for (float& e : p) {
      e = std::exp(e - max_score);  // the unseen keys' exactly 0 (max_score is finite or NaN)
      sum += e;
    }
    float* o = out + (b * S + s) * N * Hv + n * Hv;
    for (int64_t h = 0; h < Hv; ++h) {
      double acc = 0;
      for (int64_t l = 0; l < L; ++l) acc += static_cast<double>(p[static_cast<size_t>(l)]) * v[l * g.v_ld + h];
      o[h] = static_cast<float>(acc / sum);
    }
  }
}

Status SdpaKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(SdpaGeometry g, SdpaGeometryOf(ctx));
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat,
                                                                  {g.batch, g.q_len, g.heads * g.v_head}));
  float* po = out.data<float>();
  ctx.ParallelFor(g.batch * g.heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bn = begin; bn < end; ++bn) ReferenceHead(g, bn / g.heads, bn % g.heads, po);
  });
  return Status::Ok();
}

// ---- FusedMatMul ----------------------------------------------------------------------------

Result<FusedActivation> ActivationOf(const Node& node) {
  NEE_ASSIGN_OR_RETURN(std::string name, node.GetString("activation", ""));
  if (name.empty()) return FusedActivation::kNone;
  if (name == "Gelu") return FusedActivation::kGelu;
  if (name == "FastGelu") return FusedActivation::kFastGelu;
  return InvalidArgument(node.Describe() + ": unknown activation '" + name + "' (\"\", Gelu, FastGelu)");
}

// Output [..., M, N] from A [..., M, K] and B [K, N].
Status InferFusedMatMul(InferenceContext& ctx) {
  NEE_RETURN_IF_ERROR(ActivationOf(ctx.node).status());
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    NEE_ASSIGN_OR_RETURN(const TypeInfo* t, InputTensorType(ctx, i));
    if (t->elem_type != DataType::kFloat)
      return ctx.InputError(i, std::string("must be float32, got ") + DataTypeName(t->elem_type));
    const size_t rank = t->shape ? t->shape->size() : 0;
    if (t->shape && ((i == 0 && rank < 2) || (i == 1 && rank != 2) || (i == 2 && rank != 1)))
      return ctx.InputError(i, "has rank " + std::to_string(rank) + " (A: >= 2, B: 2, bias: 1)");
  }
  const TypeInfo& a = ctx.input_type(0);
  std::optional<Shape> out;
  if (a.shape) {
    out = *a.shape;
    out->back() = DimAt(ctx.input_type(1), 1);
  }
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat, out);
  return Status::Ok();
}

float Activate(FusedActivation act, double x) {
  switch (act) {
    case FusedActivation::kGelu:
      return static_cast<float>(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))));
    case FusedActivation::kFastGelu:
      return static_cast<float>(0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))));
    case FusedActivation::kNone:
      break;
  }
  return static_cast<float>(x);
}

// Each element summed in double over k, plus the bias, through the activation.
Status FusedMatMulKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(FusedMatMulGeometry g, FusedMatMulGeometryOf(ctx));
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, g.out_dims));
  float* y = out.data<float>();
  ctx.ParallelFor(g.rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < g.k; ++p) acc += static_cast<double>(g.a[i * g.k + p]) * g.b[p * g.n + j];
        y[i * g.n + j] = Activate(g.activation, static_cast<float>(acc) + (g.bias ? g.bias[j] : 0.f));
      }
  });
  return Status::Ok();
}

}  // namespace

Result<FusedMatMulGeometry> FusedMatMulGeometryOf(const KernelContext& ctx) {
  FusedMatMulGeometry g;
  NEE_ASSIGN_OR_RETURN(g.activation, ActivationOf(ctx.node()));
  const Tensor* t[3] = {nullptr, nullptr, nullptr};
  for (size_t i = 0; i < 3; ++i) {
    if (i == 2 && !ctx.has_input(2)) break;
    NEE_ASSIGN_OR_RETURN(t[i], ctx.InputTensor(i));
    if (t[i]->dtype() != DataType::kFloat)
      return ctx.InputError(i, std::string("must be float32, got ") + DataTypeName(t[i]->dtype()));
  }
  const Tensor &a = *t[0], &b = *t[1];
  if (a.rank() < 2 || b.rank() != 2 || a.dims().back() != b.dim(0))
    return ctx.Error("cannot multiply " + DimsToString(a.dims()) + " by " + DimsToString(b.dims()) +
                     " (A [..., M, K], B [K, N])");
  g.k = b.dim(0);
  g.n = b.dim(1);
  g.rows = g.k == 0 ? 0 : a.num_elements() / g.k;
  if (g.k == 0) {
    g.rows = 1;
    for (int64_t i = 0; i + 1 < a.rank(); ++i) g.rows *= a.dim(i);
  }
  if (t[2] && (t[2]->rank() != 1 || t[2]->dim(0) != g.n))
    return ctx.InputError(2, "(bias) must be [" + std::to_string(g.n) + "], got " + DimsToString(t[2]->dims()));
  g.out_dims = a.dims();
  g.out_dims.back() = g.n;
  g.a = a.data<float>();
  g.b = b.data<float>();
  g.bias = t[2] ? t[2]->data<float>() : nullptr;
  return g;
}

Result<SdpaGeometry> SdpaGeometryOf(const KernelContext& ctx) {
  SdpaGeometry g;
  NEE_ASSIGN_OR_RETURN(g.heads, ctx.node().GetInt("num_heads"));
  if (g.heads <= 0) return ctx.Error("num_heads must be positive, got " + std::to_string(g.heads));
  const bool packed = !ctx.has_input(1) && !ctx.has_input(2);
  const Tensor* t[4] = {nullptr, nullptr, nullptr, nullptr};
  for (size_t i = 0; i < 4; ++i) {
    if ((i == 3 && !ctx.has_input(3)) || (packed && (i == 1 || i == 2))) continue;
    NEE_ASSIGN_OR_RETURN(t[i], ctx.InputTensor(i));
    if (t[i]->dtype() != DataType::kFloat)
      return ctx.InputError(i, std::string("must be float32, got ") + DataTypeName(t[i]->dtype()));
    if (i < 3 && t[i]->rank() != 3) return ctx.InputError(i, "must be 3-D, got " + DimsToString(t[i]->dims()));
  }
  const Tensor& q = *t[0];
  g.batch = q.dim(0);
  g.q_len = q.dim(1);
  if (packed) {
    if (q.dim(2) % (3 * g.heads) != 0)
      return ctx.InputError(0, "(packed q, k, v) width " + std::to_string(q.dim(2)) + " must be a multiple of 3 * " +
                                   std::to_string(g.heads) + " heads");
    g.kv_len = g.q_len;
    g.head = g.v_head = q.dim(2) / (3 * g.heads);
    g.q_ld = g.k_ld = g.v_ld = q.dim(2);
    g.query = q.data<float>();
    g.key = g.query + g.heads * g.head;
    g.value = g.key + g.heads * g.head;
  } else {
    const Tensor &k = *t[1], &v = *t[2];
    g.kv_len = k.dim(1);
    if (q.dim(2) % g.heads != 0 || v.dim(2) % g.heads != 0)
      return ctx.Error("query and value widths " + std::to_string(q.dim(2)) + " and " + std::to_string(v.dim(2)) +
                       " must be multiples of num_heads " + std::to_string(g.heads));
    g.head = q.dim(2) / g.heads;
    g.v_head = v.dim(2) / g.heads;
    if (k.dim(0) != g.batch || k.dim(2) != q.dim(2))
      return ctx.InputError(1, "(key) must be [" + std::to_string(g.batch) + ", L, " + std::to_string(q.dim(2)) +
                                   "], got " + DimsToString(k.dims()));
    if (v.dim(0) != g.batch || v.dim(1) != g.kv_len)
      return ctx.InputError(2, "(value) must be [" + std::to_string(g.batch) + ", " + std::to_string(g.kv_len) +
                                   ", N*Hv], got " + DimsToString(v.dims()));
    g.q_ld = g.k_ld = q.dim(2);
    g.v_ld = v.dim(2);
    g.query = q.data<float>();
    g.key = k.data<float>();
    g.value = v.data<float>();
  }
  NEE_ASSIGN_OR_RETURN(g.scale, ctx.node().GetFloat("scale", g.head > 0 ? 1.f / std::sqrt(float(g.head)) : 1.f));
  NEE_ASSIGN_OR_RETURN(int64_t causal, ctx.node().GetInt("causal", 0));
  if (causal != 0 && causal != 1) return ctx.Error("causal must be 0 or 1, got " + std::to_string(causal));
  g.causal = causal == 1;
  if (g.causal && g.q_len > g.kv_len)
    return ctx.Error("causal attention needs no more queries than keys, got " + std::to_string(g.q_len) + " and " +
                     std::to_string(g.kv_len));
  if (t[3]) {
    NEE_RETURN_IF_ERROR(BiasStrides(ctx, t[3]->dims(), {g.batch, g.heads, g.q_len, g.kv_len}, &g.bias_stride));
    g.bias = t[3]->data<float>();
  }
  return g;
}

void RegisterAttentionFusedOps(OpRegistry& registry) {
  registry.RegisterVersions(kNeeDomain, "ScaledDotProductAttention", {1}, InferSdpa, SdpaKernel);
  registry.RegisterVersions(kNeeDomain, "FusedMatMul", {1}, InferFusedMatMul, FusedMatMulKernel);
}

}  // namespace nee
