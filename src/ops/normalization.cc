// Operator family: normalization. BatchNormalization (inference and
// training mode), InstanceNormalization, LayerNormalization,
// GroupNormalization, RMSNormalization, LpNormalization, LRN,
// MeanVarianceNormalization; ONNX Runtime's com.microsoft SkipLayerNormalization and
// SkipSimplifiedLayerNormalization and EmbedLayerNormalization, its SimplifiedLayerNormalization and its
// LayerNormalization before opset 17 (all written by its transformer optimizer).
//
// Statistics are accumulated in double (two passes: mean, then centered
// variance) whatever the element type, then applied in the compute type.
// Work is split over independent rows (planes, groups), so results do not
// depend on the thread count.
#include <algorithm>
#include <cmath>

#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/tensor_util.h"

namespace nee {
namespace {

using nn::ComputeInput;
using nn::ComputeKind;
using nn::ComputeKindOf;
using nn::ComputeOutput;

Status RequireRealFloat(const KernelContext& ctx, size_t input, DataType t) {
  if (nn::IsRealFloat(t)) return Status::Ok();
  return NotImplemented(ctx.node().Describe() + ": input " + std::to_string(input) + ": " +
                        nn::TypeError(ctx.node().op_type.c_str(), t));
}

int64_t MinChunk(int64_t work_per_item) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, work_per_item)); }

// Writes `values` (computed in double) into output i, of `type` and `dims`,
// when the graph uses that optional output.
Status WriteIfWanted(KernelContext& ctx, size_t i, DataType type, const std::vector<int64_t>& dims,
                     const std::vector<double>& values) {
  if (!ctx.wants_output(i)) return Status::Ok();
  NEE_ASSIGN_OR_RETURN(Tensor t, ctx.AllocateOutput(i, type, dims));
  nn::ConvertFromCompute<double>(values.data(), t);
  return Status::Ok();
}

// Mean and (population) variance of n values spaced `stride` apart.
template <typename A>
void MeanVar(const A* x, int64_t n, int64_t stride, double* mean, double* var) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i * stride]);
  const double m = n > 0 ? sum / static_cast<double>(n) : 0;
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i * stride]) - m;
    sq += d * d;
  }
  *mean = m;
  *var = n > 0 ? sq / static_cast<double>(n) : 0;
}

// Maps each element index of `dst_dims` to the element of a tensor of
// `src_dims` that broadcasts (numpy, right-aligned) onto it.
Result<std::vector<int64_t>> BroadcastIndex(const std::vector<int64_t>& src_dims, const std::vector<int64_t>& dst_dims) {
  if (src_dims.size() > dst_dims.size()) return InvalidArgument("rank " + std::to_string(src_dims.size()) + " exceeds " + std::to_string(dst_dims.size()));
  const size_t r = dst_dims.size(), lead = r - src_dims.size();
  std::vector<int64_t> src_strides(r, 0);
  std::vector<int64_t> s = StridesOf(src_dims);
  for (size_t d = 0; d < src_dims.size(); ++d) {
    const int64_t sd = src_dims[d], dd = dst_dims[lead + d];
    if (sd != 1 && sd != dd) return InvalidArgument(DimsToString(src_dims) + " does not broadcast to " + DimsToString(dst_dims));
    src_strides[lead + d] = sd == 1 ? 0 : s[d];
  }
  const int64_t total = ProductOf(dst_dims);
  std::vector<int64_t> map(static_cast<size_t>(total));
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < total; ++i) {
    map[static_cast<size_t>(i)] = off;
    for (size_t d = r; d-- > 0;) {
      off += src_strides[d];
      if (++idx[d] < dst_dims[d]) break;
      off -= src_strides[d] * idx[d];
      idx[d] = 0;
    }
  }
  return map;
}

// ---- BatchNormalization -------------------------------------------------------------

Status InferBatchNorm(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  ctx.output_types[0] = *x;
  // Running / saved statistics: per channel, typed like the mean input.
  Dim c = x->shape && x->shape->size() >= 2 ? (*x->shape)[1] : Dim::Unknown();
  DataType stat_type = ctx.has_input(3) ? ctx.input_type(3).elem_type : x->elem_type;
  for (size_t i = 1; i < ctx.num_outputs(); ++i)
    if (ctx.node.HasOutput(i)) ctx.output_types[i] = TypeInfo::Tensor(stat_type, Shape{c});
  return Status::Ok();
}

template <typename A>
Status BatchNormTyped(KernelContext& ctx, const Tensor& x, const std::vector<const Tensor*>& params, bool training) {
  const int64_t N = x.dim(0), C = x.dim(1);
  const int64_t spatial = (N * C) > 0 ? x.num_elements() / (N * C) : 0;
  NEE_ASSIGN_OR_RETURN(float epsilon, ctx.node().GetFloat("epsilon", 1e-5f));
  NEE_ASSIGN_OR_RETURN(float momentum, ctx.node().GetFloat("momentum", 0.9f));
  // Opset 7's spatial=0 gives per-element parameters of C x spatial values.
  const bool per_element = params[0]->num_elements() == C * spatial && spatial != 1;
  const int64_t param_count = per_element ? C * spatial : C;
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i]->num_elements() != param_count)
      return ctx.InputError(i + 1, "has " + std::to_string(params[i]->num_elements()) + " elements; expected " +
                                       std::to_string(param_count) + " (one per channel)");
  ComputeInput<A> cx(x);
  std::vector<double> scale(static_cast<size_t>(param_count)), bias(scale.size()), mean(scale.size()), var(scale.size());
  {
    std::vector<double>* dst[4] = {&scale, &bias, &mean, &var};
    for (size_t i = 0; i < 4; ++i) nn::ConvertToCompute<double>(*params[i], dst[i]->data());
  }
  std::vector<double> batch_mean, batch_var;
  if (training) {
    if (per_element) return ctx.Error("training_mode needs per-channel parameters");
    batch_mean.assign(static_cast<size_t>(C), 0);
    batch_var.assign(static_cast<size_t>(C), 0);
    ctx.ParallelFor(C, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        double sum = 0, sq = 0;
        const double count = static_cast<double>(N * spatial);
        for (int64_t n = 0; n < N; ++n)
          for (int64_t i = 0; i < spatial; ++i) sum += static_cast<double>(cx[(n * C + c) * spatial + i]);
        const double m = count > 0 ? sum / count : 0;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t i = 0; i < spatial; ++i) {
            const double d = static_cast<double>(cx[(n * C + c) * spatial + i]) - m;
            sq += d * d;
          }
        batch_mean[static_cast<size_t>(c)] = m;
        batch_var[static_cast<size_t>(c)] = count > 0 ? sq / count : 0;
      }
    });
  }
  const std::vector<double>& use_mean = training ? batch_mean : mean;
  const std::vector<double>& use_var = training ? batch_var : var;
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.dims()));
  ComputeOutput<A> cy(y);
  ctx.ParallelFor(N * C, MinChunk(spatial), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t c = plane % C;
      for (int64_t i = 0; i < spatial; ++i) {
        const size_t p = static_cast<size_t>(per_element ? c * spatial + i : c);
        const double inv = 1.0 / std::sqrt(use_var[p] + static_cast<double>(epsilon));
        const double v = (static_cast<double>(cx[plane * spatial + i]) - use_mean[p]) * inv * scale[p] + bias[p];
        cy[plane * spatial + i] = static_cast<A>(v);
      }
    }
  });
  cy.Commit();
  // Optional statistics outputs: running mean/var (and, before opset 14,
  // saved mean/var). Outside training they pass the inputs through.
  const DataType stat_type = params[2]->dtype();
  for (size_t out = 1; out < ctx.num_outputs() && out < 5; ++out) {
    std::vector<double> v(static_cast<size_t>(param_count));
    const bool is_mean = out == 1 || out == 3;
    for (size_t i = 0; i < v.size(); ++i) {
      const double given = is_mean ? mean[i] : var[i];
      if (!training) v[i] = given;
      else if (out <= 2) v[i] = given * momentum + (is_mean ? batch_mean[i] : batch_var[i]) * (1 - momentum);
      else v[i] = is_mean ? batch_mean[i] : batch_var[i];
    }
    NEE_RETURN_IF_ERROR(WriteIfWanted(ctx, out, stat_type, params[2]->dims(), v));
  }
  return Status::Ok();
}

Status BatchNormKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(RequireRealFloat(ctx, 0, x->dtype()));
  if (x->rank() < 2) return ctx.InputError(0, "must have rank >= 2 (N, C, ...), got " + DimsToString(x->dims()));
  std::vector<const Tensor*> params;
  for (size_t i = 1; i <= 4; ++i) {
    NEE_ASSIGN_OR_RETURN(const Tensor* p, ctx.InputTensor(i));
    NEE_RETURN_IF_ERROR(RequireRealFloat(ctx, i, p->dtype()));
    params.push_back(p);
  }
  // Training mode normalizes with the batch's statistics: from opset 14 when training_mode is set;
  // before opset 7 unless is_test is (its default 0 means training: PyTorch's eval-mode exports
  // write is_test=1). Opsets 7 to 13 always run inference.
  bool training = false;
  if (ctx.opset() >= 14) {
    NEE_ASSIGN_OR_RETURN(int64_t mode, ctx.node().GetInt("training_mode", 0));
    training = mode != 0;
  } else if (ctx.opset() < 7) {
    NEE_ASSIGN_OR_RETURN(int64_t is_test, ctx.node().GetInt("is_test", 0));
    training = is_test == 0;
  }
  if (ComputeKindOf(x->dtype()) == ComputeKind::kFloat) return BatchNormTyped<float>(ctx, *x, params, training);
  return BatchNormTyped<double>(ctx, *x, params, training);
}

// ---- InstanceNormalization / GroupNormalization -----------------------------------------

// Normalizes each (image, group) block of `channels_per_group` channels and
// applies a per-channel affine transform.
template <typename A>
Status GroupNormTyped(KernelContext& ctx, const Tensor& x, const Tensor& scale, const Tensor& bias, int64_t groups,
                      double epsilon, bool per_group_affine) {
  const int64_t N = x.dim(0), C = x.dim(1);
  const int64_t spatial = (N * C) > 0 ? x.num_elements() / (N * C) : 0;
  const int64_t cpg = C / groups;
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.dims()));
  ComputeInput<A> cx(x), cs(scale), cb(bias);
  ComputeOutput<A> cy(y);
  const int64_t block = cpg * spatial;
  ctx.ParallelFor(N * groups, MinChunk(block), [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t g = u % groups;
      const A* xb = cx.data() + u * block;  // channels of one group are contiguous
      double mean = 0, var = 0;
      MeanVar(xb, block, 1, &mean, &var);
      const double inv = 1.0 / std::sqrt(var + epsilon);
      for (int64_t k = 0; k < cpg; ++k) {
        const int64_t c = g * cpg + k;
        const int64_t p = per_group_affine ? g : c;
        const double s = static_cast<double>(cs[p]), b = static_cast<double>(cb[p]);
        for (int64_t i = 0; i < spatial; ++i) {
          const int64_t e = k * spatial + i;
          cy[u * block + e] = static_cast<A>((static_cast<double>(xb[e]) - mean) * inv * s + b);
        }
      }
    }
  });
  cy.Commit();
  return Status::Ok();
}

Status InstanceNormKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* scale, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* bias, ctx.InputTensor(2));
  NEE_RETURN_IF_ERROR(RequireRealFloat(ctx, 0, x->dtype()));
  if (x->rank() < 3) return ctx.InputError(0, "must have rank >= 3 (N, C, spatial...), got " + DimsToString(x->dims()));
  const int64_t C = x->dim(1);
  if (scale->num_elements() != C) return ctx.InputError(1, "must have " + std::to_string(C) + " elements (one per channel), got " + scale->Describe());
  if (bias->num_elements() != C) return ctx.InputError(2, "must have " + std::to_string(C) + " elements (one per channel), got " + bias->Describe());
  NEE_ASSIGN_OR_RETURN(float epsilon, ctx.node().GetFloat("epsilon", 1e-5f));
  if (ComputeKindOf(x->dtype()) == ComputeKind::kFloat) return GroupNormTyped<float>(ctx, *x, *scale, *bias, C, epsilon, false);
  return GroupNormTyped<double>(ctx, *x, *scale, *bias, C, epsilon, false);
}

Status GroupNormKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* scale, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* bias, ctx.InputTensor(2));
  NEE_RETURN_IF_ERROR(RequireRealFloat(ctx, 0, x->dtype()));
  if (x->rank() < 2) return ctx.InputError(0, "must have rank >= 2 (N, C, ...), got " + DimsToString(x->dims()));
  NEE_ASSIGN_OR_RETURN(int64_t groups, ctx.node().GetInt("num_groups"));
  NEE_ASSIGN_OR_RETURN(float epsilon, ctx.node().GetFloat("epsilon", 1e-5f));
  const int64_t C = x->dim(1);
  if (groups <= 0 || C % groups != 0)
    return ctx.Error("num_groups " + std::to_string(groups) + " must be positive and divide the " + std::to_string(C) + " channels");
  // Opset 18 had one scale/bias per group; 21 one per channel.
  const bool per_group = scale->num_elements() == groups && groups != C;
  const int64_t expect = per_group ? groups : C;
  if (scale->num_elements() != expect || bias->num_elements() != expect)
    return ctx.InputError(1, "scale and bias must have " + std::to_string(C) + " (per channel) or " +
                                 std::to_string(groups) + " (per group, opset 18) elements");
  if (ComputeKindOf(x->dtype()) == ComputeKind::kFloat) return GroupNormTyped<float>(ctx, *x, *scale, *bias, groups, epsilon, per_group);
  return GroupNormTyped<double>(ctx, *x, *scale, *bias, groups, epsilon, per_group);
}

// ---- LayerNormalization / RMSNormalization ------------------------------------------------

Result<DataType> StashType(const Node& node) {
  NEE_ASSIGN_OR_RETURN(int64_t stash, node.GetInt("stash_type", 1));
  if (!IsValidDataType(static_cast<int32_t>(stash)) || !nn::IsRealFloat(static_cast<DataType>(stash)))
    return InvalidModel(node.Describe() + ": stash_type " + std::to_string(stash) + " is not a floating type");
  return static_cast<DataType>(stash);
}

Status InferLayerNormLike(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  ctx.output_types[0] = *x;
  if (ctx.num_outputs() < 2) return Status::Ok();
  NEE_ASSIGN_OR_RETURN(int64_t axis, ctx.node.GetInt("axis", -1));
  NEE_ASSIGN_OR_RETURN(DataType stash, StashType(ctx.node));
  std::optional<Shape> stat_shape;
  if (x->shape) {
    const int64_t rank = static_cast<int64_t>(x->shape->size());
    auto a = NormalizeAxis(axis, rank, ctx.node);
    if (!a.ok()) return a.status();
    stat_shape = Shape(x->shape->begin(), x->shape->begin() + a.value());
    stat_shape->resize(x->shape->size(), Dim::Known(1));
  }
  for (size_t i = 1; i < ctx.num_outputs() && i < 3; ++i) ctx.output_types[i] = TypeInfo::Tensor(stash, stat_shape);
  return Status::Ok();
}

// Element offsets of an affine parameter for each position of the normalized
// block (dims[axis:]), or for each element of x when it also varies across
// the outer dims. Empty when the parameter is absent.
struct AffineIndex {
  std::vector<int64_t> map;
  bool over_inner_only = true;
};

Result<AffineIndex> PlanAffine(const KernelContext& ctx, size_t input, const Tensor& x, int64_t axis) {
  AffineIndex a;
  if (!ctx.has_input(input)) return a;
  NEE_ASSIGN_OR_RETURN(const Tensor* p, ctx.InputTensor(input));
  std::vector<int64_t> inner(x.dims().begin() + axis, x.dims().end());
  std::vector<int64_t> pdims = p->dims();
  while (pdims.size() > inner.size() && pdims.front() == 1) pdims.erase(pdims.begin());
  a.over_inner_only = pdims.size() <= inner.size();
  auto map = BroadcastIndex(pdims, a.over_inner_only ? inner : x.dims());
  if (!map.ok()) return ctx.InputError(input, "of shape " + DimsToString(p->dims()) + " does not broadcast to the input " + DimsToString(x.dims()) + " normalized from axis " + std::to_string(axis));
  a.map = std::move(map).value();
  return a;
}

template <typename A>
Status LayerNormTyped(KernelContext& ctx, const Tensor& x, int64_t axis, double epsilon, bool rms, DataType stash) {
  const int64_t outer = ProductOf(x.dims(), 0, static_cast<size_t>(axis));
  const int64_t inner = ProductOf(x.dims(), static_cast<size_t>(axis));
  NEE_ASSIGN_OR_RETURN(AffineIndex scale_index, PlanAffine(ctx, 1, x, axis));
  NEE_ASSIGN_OR_RETURN(AffineIndex bias_index, PlanAffine(ctx, 2, x, axis));
  ComputeInput<A> cx(x), cs, cb;
  if (ctx.has_input(1)) cs = ComputeInput<A>(ctx.input(1)->tensor());
  if (ctx.has_input(2)) cb = ComputeInput<A>(ctx.input(2)->tensor());
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.dims()));
  std::vector<int64_t> stat_dims(x.dims().begin(), x.dims().begin() + axis);
  stat_dims.resize(x.dims().size(), 1);
  std::vector<double> means(static_cast<size_t>(outer)), inv_stds(static_cast<size_t>(outer));
  ComputeOutput<A> cy(y);
  ctx.ParallelFor(outer, MinChunk(inner), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const A* xr = cx.data() + r * inner;
      double mean = 0, var = 0;
      if (rms) {
        for (int64_t i = 0; i < inner; ++i) var += static_cast<double>(xr[i]) * static_cast<double>(xr[i]);
        var = inner > 0 ? var / static_cast<double>(inner) : 0;
      } else {
        MeanVar(xr, inner, 1, &mean, &var);
      }
      const double inv = 1.0 / std::sqrt(var + epsilon);
      means[static_cast<size_t>(r)] = mean;
      inv_stds[static_cast<size_t>(r)] = inv;
      for (int64_t i = 0; i < inner; ++i) {
        double v = (static_cast<double>(xr[i]) - mean) * inv;
        const int64_t e = r * inner + i;
        if (!scale_index.map.empty())
          v *= static_cast<double>(cs[scale_index.map[static_cast<size_t>(scale_index.over_inner_only ? i : e)]]);
        if (!bias_index.map.empty())
          v += static_cast<double>(cb[bias_index.map[static_cast<size_t>(bias_index.over_inner_only ? i : e)]]);
        cy[e] = static_cast<A>(v);
      }
    }
  });
  cy.Commit();
  if (rms) {
    // Only SimplifiedLayerNormalization has a second output: the inverse RMS.
    if (ctx.num_outputs() > 1) return WriteIfWanted(ctx, 1, stash, stat_dims, inv_stds);
    return Status::Ok();
  }
  NEE_RETURN_IF_ERROR(WriteIfWanted(ctx, 1, stash, stat_dims, means));
  return WriteIfWanted(ctx, 2, stash, stat_dims, inv_stds);
}

Status LayerNormLikeKernel(KernelContext& ctx, bool rms) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(RequireRealFloat(ctx, 0, x->dtype()));
  NEE_ASSIGN_OR_RETURN(const Tensor* scale, ctx.InputTensor(1));
  (void)scale;
  NEE_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().GetInt("axis", -1));
  NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attr, x->rank(), ctx.node()));
  NEE_ASSIGN_OR_RETURN(float epsilon, ctx.node().GetFloat("epsilon", 1e-5f));
  NEE_ASSIGN_OR_RETURN(DataType stash, StashType(ctx.node()));
  if (ComputeKindOf(x->dtype()) == ComputeKind::kFloat) return LayerNormTyped<float>(ctx, *x, axis, epsilon, rms, stash);
  return LayerNormTyped<double>(ctx, *x, axis, epsilon, rms, stash);
}

Status LayerNormKernel(KernelContext& ctx) { return LayerNormLikeKernel(ctx, false); }
Status RmsNormKernel(KernelContext& ctx) { return LayerNormLikeKernel(ctx, true); }

// ---- com.microsoft SkipLayerNormalization / SkipSimplifiedLayerNormalization ---------
//
// ONNX Runtime's transformer optimizer fuses "Add (residual) [+ Add (bias)] +
// LayerNormalization" into SkipLayerNormalization: s = input + skip (+ bias), normalized over
// the last axis, times gamma (+ beta). The Simplified form is the RMS norm of s (no mean, no
// beta; T5 / LLaMA). Inputs: input [..., H]; skip of the input's shape or broadcast over the
// leading dims ([1, S, H] or [S, H]); gamma [H]; beta [H] (not in the Simplified form);
// bias [H]. Outputs: the result, mean and inverse standard deviation (float, [..., 1]),
// and s itself (input_skip_bias_sum).

Status InferSkipLayerNorm(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  ctx.output_types[0] = *x;
  std::optional<Shape> stat_shape;
  if (x->shape && !x->shape->empty()) {
    stat_shape = *x->shape;
    stat_shape->back() = Dim::Known(1);
  }
  if (ctx.num_outputs() > 1) ctx.output_types[1] = TypeInfo::Tensor(DataType::kFloat, stat_shape);
  if (ctx.num_outputs() > 2) ctx.output_types[2] = TypeInfo::Tensor(DataType::kFloat, stat_shape);
  if (ctx.num_outputs() > 3) ctx.output_types[3] = *x;
  return Status::Ok();
}

// Checks that an optional per-channel input (gamma, beta, bias) holds `hidden` values of x's type.
Status CheckChannelVector(const KernelContext& ctx, size_t i, const Tensor& x, int64_t hidden) {
  if (!ctx.has_input(i)) return Status::Ok();
  NEE_ASSIGN_OR_RETURN(const Tensor* p, ctx.InputTensor(i));
  if (p->dtype() != x.dtype())
    return ctx.InputError(i, std::string("has element type ") + DataTypeName(p->dtype()) + " but the input has " +
                                 DataTypeName(x.dtype()));
  if (p->num_elements() != hidden || (p->rank() != 1 && !(p->rank() == 2 && p->dim(0) == 1)))
    return ctx.InputError(i, "must have shape [" + std::to_string(hidden) + "], got " + DimsToString(p->dims()));
  return Status::Ok();
}

template <typename A>
Status SkipLayerNormTyped(KernelContext& ctx, const Tensor& x, const Tensor& skip, bool simplified, double epsilon) {
  const int64_t hidden = x.dims().back();
  const int64_t rows = hidden > 0 ? x.num_elements() / hidden : 0;
  const int64_t skip_count = skip.num_elements();  // skip repeats over the leading dims
  const size_t bias_input = simplified ? 3 : 4;  // beta is input 3 of the plain form only
  ComputeInput<A> cx(x), cskip(skip), cgamma(ctx.input(2)->tensor()), cbeta, cbias;
  const bool has_beta = !simplified && ctx.has_input(3), has_bias = ctx.has_input(bias_input);
  if (has_beta) cbeta = ComputeInput<A>(ctx.input(3)->tensor());
  if (has_bias) cbias = ComputeInput<A>(ctx.input(bias_input)->tensor());
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.dims()));
  ComputeOutput<A> cy(y);
  std::vector<double> sums(static_cast<size_t>(x.num_elements()));
  std::vector<double> means(static_cast<size_t>(rows)), inv_stds(static_cast<size_t>(rows));
  ctx.ParallelFor(rows, MinChunk(hidden), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      double* s = sums.data() + r * hidden;
      for (int64_t i = 0; i < hidden; ++i) {
        const int64_t e = r * hidden + i;
        // The sum is rounded to the element type, as ONNX Runtime stores it (output 3).
        double v = static_cast<double>(cx[e]) + static_cast<double>(cskip[e % skip_count]);
        if (has_bias) v += static_cast<double>(cbias[i]);
        s[i] = static_cast<double>(static_cast<A>(v));
      }
      double mean = 0, var = 0;
      if (simplified) {
        for (int64_t i = 0; i < hidden; ++i) var += s[i] * s[i];
        var /= static_cast<double>(hidden);
      } else {
        MeanVar(s, hidden, 1, &mean, &var);
      }
      const double inv = 1.0 / std::sqrt(var + epsilon);
      means[static_cast<size_t>(r)] = mean;
      inv_stds[static_cast<size_t>(r)] = inv;
      for (int64_t i = 0; i < hidden; ++i) {
        double v = (s[i] - mean) * inv * static_cast<double>(cgamma[i]);
        if (has_beta) v += static_cast<double>(cbeta[i]);
        cy[r * hidden + i] = static_cast<A>(v);
      }
    }
  });
  cy.Commit();
  std::vector<int64_t> stat_dims = x.dims();
  stat_dims.back() = 1;
  NEE_RETURN_IF_ERROR(WriteIfWanted(ctx, 1, DataType::kFloat, stat_dims, means));
  NEE_RETURN_IF_ERROR(WriteIfWanted(ctx, 2, DataType::kFloat, stat_dims, inv_stds));
  return WriteIfWanted(ctx, 3, x.dtype(), x.dims(), sums);
}

Status SkipLayerNormLikeKernel(KernelContext& ctx, bool simplified) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(RequireRealFloat(ctx, 0, x->dtype()));
  NEE_ASSIGN_OR_RETURN(const Tensor* skip, ctx.InputTensor(1));
  if (x->rank() < 1 || x->dims().back() < 1)
    return ctx.InputError(0, "must have a non-empty last (hidden) axis, got " + DimsToString(x->dims()));
  const int64_t hidden = x->dims().back();
  // skip: the input's shape, or its trailing dims (leading 1s allowed), repeated over the rest.
  std::vector<int64_t> skip_dims = skip->dims();
  while (skip_dims.size() > 1 && skip_dims.front() == 1) skip_dims.erase(skip_dims.begin());
  const bool skip_ok = skip->dtype() == x->dtype() && skip_dims.size() <= x->dims().size() &&
                       std::equal(skip_dims.begin(), skip_dims.end(), x->dims().end() - static_cast<std::ptrdiff_t>(skip_dims.size())) &&
                       skip->num_elements() > 0;
  if (!skip_ok)
    return ctx.InputError(1, "(skip) " + skip->Describe() + " must match the input " + x->Describe() +
                                 " or its trailing dimensions");
  NEE_ASSIGN_OR_RETURN(const Tensor* gamma, ctx.InputTensor(2));
  (void)gamma;
  NEE_RETURN_IF_ERROR(CheckChannelVector(ctx, 2, *x, hidden));
  NEE_RETURN_IF_ERROR(CheckChannelVector(ctx, 3, *x, hidden));
  if (!simplified) NEE_RETURN_IF_ERROR(CheckChannelVector(ctx, 4, *x, hidden));
  NEE_ASSIGN_OR_RETURN(float epsilon, ctx.node().GetFloat("epsilon", 1e-12f));
  if (ComputeKindOf(x->dtype()) == ComputeKind::kFloat) return SkipLayerNormTyped<float>(ctx, *x, *skip, simplified, epsilon);
  return SkipLayerNormTyped<double>(ctx, *x, *skip, simplified, epsilon);
}

Status SkipLayerNormKernel(KernelContext& ctx) { return SkipLayerNormLikeKernel(ctx, false); }
Status SkipSimplifiedLayerNormKernel(KernelContext& ctx) { return SkipLayerNormLikeKernel(ctx, true); }

// ---- com.microsoft EmbedLayerNormalization -----------------------------------------------
//
// The embedding front of ONNX Runtime-optimized BERT models: for token (b, s),
// e = word[input_ids] + position[position_ids or s] (+ segment[segment_ids]), then layer
// normalization over the hidden axis with gamma and beta. Inputs: 0 input_ids, 1 segment_ids
// (optional), 2 word, 3 position, 4 segment (optional) embeddings, 5 gamma, 6 beta, 7 mask
// (optional), 8 position_ids (optional, [B, S] or [1, S]); ids are int32 (int64 accepted).
// Outputs: the normalized embeddings [B, S, H]; mask_index (int32 [B]): per row the count
// of mask values equal to 1, zeros without a mask; and e itself (optional).

Status InferEmbedLayerNorm(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* ids, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* word, InputTensorType(ctx, 2));
  std::optional<Shape> out, mask_shape;
  if (ids->shape && ids->shape->size() == 2) {
    Dim hidden = word->shape && word->shape->size() == 2 ? (*word->shape)[1] : Dim::Unknown();
    out = Shape{(*ids->shape)[0], (*ids->shape)[1], hidden};
    mask_shape = Shape{(*ids->shape)[0]};
  }
  ctx.output_types[0] = TypeInfo::Tensor(word->elem_type, out);
  if (ctx.num_outputs() > 1) ctx.output_types[1] = TypeInfo::Tensor(DataType::kInt32, mask_shape);
  if (ctx.num_outputs() > 2) ctx.output_types[2] = TypeInfo::Tensor(word->elem_type, out);
  return Status::Ok();
}

// An optional [B, S] id input (position_ids may also be [1, S]); nullptr when absent.
Result<const Tensor*> OptionalIds(const KernelContext& ctx, size_t i, int64_t batch, int64_t seq, bool batch_one_ok) {
  if (!ctx.has_input(i)) return static_cast<const Tensor*>(nullptr);
  NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(i));
  const bool shape_ok = t->rank() == 2 && t->dim(1) == seq && (t->dim(0) == batch || (batch_one_ok && t->dim(0) == 1));
  if (!shape_ok) return ctx.InputError(i, "must have shape [" + std::to_string(batch) + ", " + std::to_string(seq) + "], got " + DimsToString(t->dims()));
  if (t->dtype() != DataType::kInt32 && t->dtype() != DataType::kInt64)
    return ctx.InputError(i, std::string("must be int32 (or int64), got ") + DataTypeName(t->dtype()));
  return t;
}

// A [rows, hidden] embedding table of the word table's type.
Status CheckTable(const KernelContext& ctx, size_t i, const Tensor& t, DataType dtype, int64_t hidden) {
  if (t.dtype() != dtype || t.rank() != 2 || t.dim(1) != hidden)
    return ctx.InputError(i, "must be a [rows, " + std::to_string(hidden) + "] " + DataTypeName(dtype) +
                                 " table, got " + t.Describe());
  return Status::Ok();
}

template <typename A>
Status EmbedLayerNormTyped(KernelContext& ctx, const Tensor& ids, const Tensor& word, const Tensor& position,
                           const Tensor* segment, const Tensor* segment_ids, const Tensor* position_ids, double eps) {
  const int64_t batch = ids.dim(0), seq = ids.dim(1), hidden = word.dim(1);
  ComputeInput<A> cword(word), cpos(position), cgamma(ctx.input(5)->tensor()), cbeta(ctx.input(6)->tensor()), cseg;
  if (segment) cseg = ComputeInput<A>(*segment);
  // Look every id up first, so that an out-of-range one is an error before any work.
  std::vector<int64_t> word_rows(static_cast<size_t>(batch * seq)), pos_rows(word_rows.size()), seg_rows(word_rows.size());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < seq; ++s) {
      const int64_t t = b * seq + s;
      const int64_t w = tensor_util::IndexAt(ids, t);
      const int64_t p = position_ids ? tensor_util::IndexAt(*position_ids, (position_ids->dim(0) == 1 ? 0 : b) * seq + s) : s;
      const int64_t g = segment_ids ? tensor_util::IndexAt(*segment_ids, t) : 0;
      if (w < 0 || w >= word.dim(0))
        return ctx.InputError(0, "holds id " + std::to_string(w) + " outside the word table's " + std::to_string(word.dim(0)) + " rows");
      if (p < 0 || p >= position.dim(0))
        return ctx.InputError(position_ids ? 8 : 3, "position " + std::to_string(p) + " is outside the position table's " +
                                                        std::to_string(position.dim(0)) + " rows");
      if (segment && (g < 0 || g >= segment->dim(0)))
        return ctx.InputError(1, "holds segment id " + std::to_string(g) + " outside the segment table's " +
                                     std::to_string(segment->dim(0)) + " rows");
      word_rows[static_cast<size_t>(t)] = w;
      pos_rows[static_cast<size_t>(t)] = p;
      seg_rows[static_cast<size_t>(t)] = g;
    }
  }
  const std::vector<int64_t> out_dims = {batch, seq, hidden};
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, word.dtype(), out_dims));
  ComputeOutput<A> cy(y);
  std::vector<double> sums(static_cast<size_t>(batch * seq * hidden));
  ctx.ParallelFor(batch * seq, MinChunk(hidden), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      double* e = sums.data() + t * hidden;
      const int64_t w = word_rows[static_cast<size_t>(t)], p = pos_rows[static_cast<size_t>(t)], g = seg_rows[static_cast<size_t>(t)];
      for (int64_t h = 0; h < hidden; ++h) {
        double v = static_cast<double>(cword[w * hidden + h]) + static_cast<double>(cpos[p * hidden + h]);
        if (segment) v += static_cast<double>(cseg[g * hidden + h]);
        e[h] = static_cast<double>(static_cast<A>(v));
      }
      double mean = 0, var = 0;
      MeanVar(e, hidden, 1, &mean, &var);
      const double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t h = 0; h < hidden; ++h)
        cy[t * hidden + h] = static_cast<A>((e[h] - mean) * inv * static_cast<double>(cgamma[h]) + static_cast<double>(cbeta[h]));
    }
  });
  cy.Commit();
  if (ctx.num_outputs() > 1 && ctx.wants_output(1)) {
    NEE_ASSIGN_OR_RETURN(Tensor mask_index, ctx.AllocateOutput(1, DataType::kInt32, {batch}));
    NEE_ASSIGN_OR_RETURN(const Tensor* mask, OptionalIds(ctx, 7, batch, seq, false));
    for (int64_t b = 0; b < batch; ++b) {
      int32_t count = 0;
      for (int64_t s = 0; mask && s < seq; ++s) count += tensor_util::IndexAt(*mask, b * seq + s) == 1 ? 1 : 0;
      mask_index.data<int32_t>()[b] = count;
    }
  }
  if (ctx.num_outputs() > 2) return WriteIfWanted(ctx, 2, word.dtype(), out_dims, sums);
  return Status::Ok();
}

Status EmbedLayerNormKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* ids, ctx.InputTensor(0));
  if (ids->rank() != 2) return ctx.InputError(0, "(input_ids) must be [batch, sequence], got " + DimsToString(ids->dims()));
  if (ids->dtype() != DataType::kInt32 && ids->dtype() != DataType::kInt64)
    return ctx.InputError(0, std::string("must be int32 (or int64), got ") + DataTypeName(ids->dtype()));
  const int64_t batch = ids->dim(0), seq = ids->dim(1);
  NEE_ASSIGN_OR_RETURN(const Tensor* word, ctx.InputTensor(2));
  NEE_RETURN_IF_ERROR(RequireRealFloat(ctx, 2, word->dtype()));
  if (word->rank() != 2 || word->dim(1) < 1) return ctx.InputError(2, "(word_embedding) must be [vocab, hidden], got " + word->Describe());
  const int64_t hidden = word->dim(1);
  NEE_ASSIGN_OR_RETURN(const Tensor* position, ctx.InputTensor(3));
  NEE_RETURN_IF_ERROR(CheckTable(ctx, 3, *position, word->dtype(), hidden));
  NEE_ASSIGN_OR_RETURN(const Tensor* segment, OptionalInputTensor(ctx, 4));
  if (segment) {
    NEE_RETURN_IF_ERROR(CheckTable(ctx, 4, *segment, word->dtype(), hidden));
  }
  NEE_ASSIGN_OR_RETURN(const Tensor* segment_ids, OptionalIds(ctx, 1, batch, seq, false));
  if (segment && !segment_ids) return ctx.InputError(1, "(segment_ids) is needed with a segment embedding");
  NEE_ASSIGN_OR_RETURN(const Tensor* position_ids, OptionalIds(ctx, 8, batch, seq, true));
  NEE_ASSIGN_OR_RETURN(const Tensor* gamma, ctx.InputTensor(5));
  NEE_ASSIGN_OR_RETURN(const Tensor* beta, ctx.InputTensor(6));
  (void)gamma;
  (void)beta;
  NEE_RETURN_IF_ERROR(CheckChannelVector(ctx, 5, *word, hidden));
  NEE_RETURN_IF_ERROR(CheckChannelVector(ctx, 6, *word, hidden));
  NEE_ASSIGN_OR_RETURN(float epsilon, ctx.node().GetFloat("epsilon", 1e-12f));
  if (ComputeKindOf(word->dtype()) == ComputeKind::kFloat)
    return EmbedLayerNormTyped<float>(ctx, *ids, *word, *position, segment, segment ? segment_ids : nullptr, position_ids, epsilon);
  return EmbedLayerNormTyped<double>(ctx, *ids, *word, *position, segment, segment ? segment_ids : nullptr, position_ids, epsilon);
}

// ---- LpNormalization --------------------------------------------------------------------

// Splits dims around `axis`: outer x axis_dim x inner.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisSplit SplitAt(const std::vector<int64_t>& dims, int64_t axis) {
  AxisSplit s;
  s.outer = ProductOf(dims, 0, static_cast<size_t>(axis));
  s.n = dims[static_cast<size_t>(axis)];
  s.inner = ProductOf(dims, static_cast<size_t>(axis) + 1);
  return s;
}

template <typename A>
Status LpNormTyped(KernelContext& ctx, const Tensor& x, int64_t axis, int64_t p) {
  const AxisSplit s = SplitAt(x.dims(), axis);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.dims()));
  ComputeInput<A> cx(x);
  ComputeOutput<A> cy(y);
  ctx.ParallelFor(s.outer * s.inner, MinChunk(s.n), [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t base = (u / s.inner) * s.n * s.inner + u % s.inner;
      double norm = 0;
      for (int64_t i = 0; i < s.n; ++i) {
        const double v = static_cast<double>(cx[base + i * s.inner]);
        norm += p == 1 ? std::fabs(v) : v * v;
      }
      if (p == 2) norm = std::sqrt(norm);
      // A zero vector stays zero rather than becoming 0/0.
      for (int64_t i = 0; i < s.n; ++i) {
        const double v = static_cast<double>(cx[base + i * s.inner]);
        cy[base + i * s.inner] = static_cast<A>(norm == 0 ? 0.0 : v / norm);
      }
    }
  });
  cy.Commit();
  return Status::Ok();
}

Status LpNormKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(RequireRealFloat(ctx, 0, x->dtype()));
  NEE_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().GetInt("axis", -1));
  NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeDimAxis(axis_attr, x->rank(), ctx.node()));
  NEE_ASSIGN_OR_RETURN(int64_t p, ctx.node().GetInt("p", 2));
  if (p != 1 && p != 2) return ctx.Error("p must be 1 or 2, got " + std::to_string(p));
  if (ComputeKindOf(x->dtype()) == ComputeKind::kFloat) return LpNormTyped<float>(ctx, *x, axis, p);
  return LpNormTyped<double>(ctx, *x, axis, p);
}

// ---- LRN ------------------------------------------------------------------------------------

template <typename A>
Status LrnTyped(KernelContext& ctx, const Tensor& x, int64_t size, double alpha, double beta, double bias) {
  const int64_t N = x.dim(0), C = x.dim(1);
  const int64_t spatial = (N * C) > 0 ? x.num_elements() / (N * C) : 0;
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.dims()));
  ComputeInput<A> cx(x);
  ComputeOutput<A> cy(y);
  const int64_t before = (size - 1) / 2, after = size / 2;  // floor and ceil of (size-1)/2
  ctx.ParallelFor(N * C, MinChunk(spatial * size), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t n = plane / C, c = plane % C;
      const int64_t lo = std::max<int64_t>(0, c - before), hi = std::min<int64_t>(C - 1, c + after);
      for (int64_t i = 0; i < spatial; ++i) {
        double sq = 0;
        for (int64_t k = lo; k <= hi; ++k) {
          const double v = static_cast<double>(cx[(n * C + k) * spatial + i]);
          sq += v * v;
        }
        const double v = static_cast<double>(cx[plane * spatial + i]);
        cy[plane * spatial + i] = static_cast<A>(v / std::pow(bias + alpha / static_cast<double>(size) * sq, beta));
      }
    }
  });
  cy.Commit();
  return Status::Ok();
}

Status LrnKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(RequireRealFloat(ctx, 0, x->dtype()));
  if (x->rank() < 2) return ctx.InputError(0, "must have rank >= 2 (N, C, ...), got " + DimsToString(x->dims()));
  NEE_ASSIGN_OR_RETURN(int64_t size, ctx.node().GetInt("size"));
  NEE_ASSIGN_OR_RETURN(float alpha, ctx.node().GetFloat("alpha", 1e-4f));
  NEE_ASSIGN_OR_RETURN(float beta, ctx.node().GetFloat("beta", 0.75f));
  NEE_ASSIGN_OR_RETURN(float bias, ctx.node().GetFloat("bias", 1.0f));
  if (size <= 0) return ctx.Error("size must be positive, got " + std::to_string(size));
  if (ComputeKindOf(x->dtype()) == ComputeKind::kFloat) return LrnTyped<float>(ctx, *x, size, alpha, beta, bias);
  return LrnTyped<double>(ctx, *x, size, alpha, beta, bias);
}

// ---- MeanVarianceNormalization -------------------------------------------------------------

template <typename A>
Status MvnTyped(KernelContext& ctx, const Tensor& x, const std::vector<bool>& reduced) {
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.dims()));
  ComputeInput<A> cx(x);
  ComputeOutput<A> cy(y);
  // Group elements by their kept coordinates: "kept" dims index the groups,
  // "reduced" dims the members. Offsets are listed once for both.
  std::vector<int64_t> kept_dims, red_dims;
  const std::vector<int64_t> strides = StridesOf(x.dims());
  std::vector<int64_t> kept_strides, red_strides;
  for (size_t d = 0; d < reduced.size(); ++d) {
    (reduced[d] ? red_dims : kept_dims).push_back(x.dims()[d]);
    (reduced[d] ? red_strides : kept_strides).push_back(strides[d]);
  }
  auto offsets = [](const std::vector<int64_t>& dims, const std::vector<int64_t>& st) {
    std::vector<int64_t> out(static_cast<size_t>(ProductOf(dims)), 0);
    std::vector<int64_t> idx(dims.size(), 0);
    int64_t off = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = off;
      for (size_t d = dims.size(); d-- > 0;) {
        off += st[d];
        if (++idx[d] < dims[d]) break;
        off -= st[d] * idx[d];
        idx[d] = 0;
      }
    }
    return out;
  };
  const std::vector<int64_t> groups = offsets(kept_dims, kept_strides), members = offsets(red_dims, red_strides);
  const int64_t m = static_cast<int64_t>(members.size());
  ctx.ParallelFor(static_cast<int64_t>(groups.size()), MinChunk(m), [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      const int64_t base = groups[static_cast<size_t>(g)];
      double sum = 0, sq = 0;
      for (int64_t off : members) sum += static_cast<double>(cx[base + off]);
      const double mean = m > 0 ? sum / static_cast<double>(m) : 0;
      for (int64_t off : members) {
        const double d = static_cast<double>(cx[base + off]) - mean;
        sq += d * d;
      }
      // As the ONNX function body: (x - mean) / (sqrt(variance) + 1e-9).
      const double denom = std::sqrt(m > 0 ? sq / static_cast<double>(m) : 0) + 1e-9;
      for (int64_t off : members) cy[base + off] = static_cast<A>((static_cast<double>(cx[base + off]) - mean) / denom);
    }
  });
  cy.Commit();
  return Status::Ok();
}

Status MvnKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(RequireRealFloat(ctx, 0, x->dtype()));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.node().GetInts("axes", {0, 2, 3}));
  std::vector<bool> reduced(static_cast<size_t>(x->rank()), false);
  for (int64_t a : axes) {
    NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeDimAxis(a, x->rank(), ctx.node(), "axes"));
    reduced[static_cast<size_t>(axis)] = true;
  }
  if (ComputeKindOf(x->dtype()) == ComputeKind::kFloat) return MvnTyped<float>(ctx, *x, reduced);
  return MvnTyped<double>(ctx, *x, reduced);
}

}  // namespace

void RegisterNormalizationOps(OpRegistry& registry) {
  // Opsets 1 and 6 carry is_test (and 1 the ignored consumed_inputs); see BatchNormKernel.
  registry.RegisterVersions("", "BatchNormalization", {1, 6, 7, 9, 14, 15}, InferBatchNorm, BatchNormKernel);
  registry.RegisterVersions("", "InstanceNormalization", {1, 6, 22}, InferSameAsInput0, InstanceNormKernel);
  // Version 1 is ONNX Runtime's: its transformer optimizer writes LayerNormalization (same
  // attributes and semantics) into models of any opset, before ONNX added the op in 17.
  registry.RegisterVersions("", "LayerNormalization", {1, 17}, InferLayerNormLike, LayerNormKernel);
  registry.RegisterVersions("", "GroupNormalization", {18, 21}, InferSameAsInput0, GroupNormKernel);
  registry.RegisterVersions("", "RMSNormalization", {23}, InferSameAsInput0, RmsNormKernel);
  // ONNX Runtime's RMS norm (T5 / LLaMA graphs from its optimizer): RMSNormalization's
  // computation, with the inverse RMS as an optional second output.
  registry.RegisterVersions("", "SimplifiedLayerNormalization", {1}, InferLayerNormLike, RmsNormKernel);
  registry.RegisterVersions("", "LpNormalization", {1, 22}, InferSameAsInput0, LpNormKernel);
  registry.RegisterVersions("", "LRN", {1, 13}, InferSameAsInput0, LrnKernel);
  registry.RegisterVersions("", "MeanVarianceNormalization", {9, 13}, InferSameAsInput0, MvnKernel);
  registry.RegisterVersions("com.microsoft", "SkipLayerNormalization", {1}, InferSkipLayerNorm, SkipLayerNormKernel);
  registry.RegisterVersions("com.microsoft", "SkipSimplifiedLayerNormalization", {1}, InferSkipLayerNorm,
                            SkipSimplifiedLayerNormKernel);
  registry.RegisterVersions("com.microsoft", "EmbedLayerNormalization", {1}, InferEmbedLayerNorm, EmbedLayerNormKernel);
}

}  // namespace nee
