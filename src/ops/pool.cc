// Operator family: pooling. MaxPool (with Indices), AveragePool, LpPool,
// their Global variants, MaxUnpool and MaxRoiPool.
//
// The windowed pools share one N-d loop: for every (image, channel) plane
// and output position, find per dim the kernel taps that land inside the
// input and walk only those (in row-major tap order, which decides MaxPool's
// ties). Taps in the declared padding count only for count_include_pad;
// taps past it (ceil_mode's overhang) never count. Planes run in parallel;
// each output is computed by one task.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

using nn::ComputeInput;
using nn::ComputeKind;
using nn::ComputeKindOf;
using nn::ComputeOutput;
using nn::WindowSpec;

enum class PoolKind { kMax, kAverage, kLp };

struct PoolGeometry {
  int64_t planes = 0;  // N * C
  std::vector<int64_t> in, out;
  WindowSpec spec;
  int64_t in_size = 1, out_size = 1;
};

Status CheckPoolType(const KernelContext& ctx, DataType t, bool allow_int8) {
  if (nn::IsRealFloat(t)) return Status::Ok();
  if (allow_int8 && Is8Bit(t)) return Status::Ok();
  return NotImplemented(ctx.node().Describe() + ": " + nn::TypeError(ctx.node().op_type.c_str(), t));
}

// Opset-dependent attributes the op does not have yet are ignored.
Result<WindowSpec> ReadPoolSpec(const Node& node, int64_t opset, size_t n) {
  NEE_ASSIGN_OR_RETURN(WindowSpec s, nn::ReadWindowSpec(node, n, nullptr));
  const bool avg = node.op_type == "AveragePool";
  if ((avg && opset < 19) || (node.op_type == "MaxPool" && opset < 10) || (node.op_type == "LpPool" && opset < 18))
    s.dilations.assign(n, 1);
  if (opset < 10 || (node.op_type == "LpPool" && opset < 18)) s.ceil_mode = false;
  return s;
}

Result<PoolGeometry> PlanPool(const KernelContext& ctx, const Tensor& x) {
  if (x.rank() < 3) return ctx.InputError(0, "must have rank >= 3 (N, C, spatial...), got " + DimsToString(x.dims()));
  PoolGeometry g;
  const size_t n = static_cast<size_t>(x.rank() - 2);
  NEE_ASSIGN_OR_RETURN(g.spec, ReadPoolSpec(ctx.node(), ctx.opset(), n));
  g.planes = x.dim(0) * x.dim(1);
  for (size_t d = 0; d < n; ++d) {
    const int64_t in = x.dim(static_cast<int64_t>(d + 2));
    NEE_ASSIGN_OR_RETURN(int64_t o, nn::WindowOutputDim(ctx.node(), g.spec, d, in));
    g.in.push_back(in);
    g.out.push_back(o);
    g.in_size *= in;
    g.out_size *= o;
  }
  return g;
}

struct PoolParams {
  PoolKind kind = PoolKind::kMax;
  bool count_include_pad = false;
  double p = 2;
  bool column_major_indices = false;  // MaxPool storage_order = 1
};

// The taps of one window along one dim: those in [lo, hi) read the input;
// `declared` taps (from 0) lie inside input + declared padding.
struct TapRange {
  int64_t lo = 0, hi = 0, declared = 0, first_x = 0;
};

TapRange TapsAt(const PoolGeometry& g, size_t d, int64_t pos) {
  const int64_t k = g.spec.kernel[d], dil = g.spec.dilations[d], in = g.in[d];
  const int64_t start = pos * g.spec.strides[d] - g.spec.pad_begin(d);  // input coordinate of tap 0
  TapRange r;
  auto first_tap_at_or_after = [&](int64_t x) {  // smallest tap t with start + t*dil >= x
    return x <= start ? 0 : (x - start + dil - 1) / dil;
  };
  r.lo = std::min(k, first_tap_at_or_after(0));
  r.hi = std::max(r.lo, std::min(k, first_tap_at_or_after(in)));
  r.declared = std::min(k, first_tap_at_or_after(in + g.spec.pad_end(d)));
  r.first_x = start + r.lo * dil;
  return r;
}

// Runs the windowed pool over all planes. `indices` may be null.
template <typename A>
void RunPool(const KernelContext& ctx, const PoolGeometry& g, const PoolParams& params, const A* x, A* y,
             int64_t* indices) {
  const size_t n = g.in.size();
  const std::vector<int64_t> row_stride = StridesOf(g.in);
  // Column-major spatial strides for storage_order = 1.
  std::vector<int64_t> col_stride(n, 1);
  for (size_t d = 1; d < n; ++d) col_stride[d] = col_stride[d - 1] * g.in[d - 1];
  int64_t window = 1;
  for (int64_t k : g.spec.kernel) window *= k;
  ctx.ParallelFor(g.planes, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, g.out_size * window)),
                  [&](int64_t begin, int64_t end) {
    std::vector<int64_t> pos(n);
    std::vector<TapRange> taps(n);
    std::vector<int64_t> tap(n);
    for (int64_t plane = begin; plane < end; ++plane) {
      const A* xp = x + plane * g.in_size;
      std::fill(pos.begin(), pos.end(), 0);
      for (int64_t o = 0; o < g.out_size; ++o) {
        int64_t inside = 1, declared = 1;
        for (size_t d = 0; d < n; ++d) {
          taps[d] = TapsAt(g, d, pos[d]);
          inside *= taps[d].hi - taps[d].lo;
          declared *= taps[d].declared;
        }
        A best = std::numeric_limits<A>::lowest();
        int64_t best_index = -1;
        A sum{};
        if (inside > 0) {
          // Odometer over the inside taps, last dim fastest.
          for (size_t d = 0; d < n; ++d) tap[d] = taps[d].lo;
          for (int64_t t = 0; t < inside; ++t) {
            int64_t off = 0, col_off = 0;
            for (size_t d = 0; d < n; ++d) {
              const int64_t xi = taps[d].first_x + (tap[d] - taps[d].lo) * g.spec.dilations[d];
              off += xi * row_stride[d];
              col_off += xi * col_stride[d];
            }
            const A val = xp[off];
            if (params.kind == PoolKind::kMax) {
              if (best_index < 0 || val > best) {
                best = val;
                best_index = params.column_major_indices ? col_off : off;
              }
            } else if (params.kind == PoolKind::kAverage) {
              sum += val;
            } else {
              sum += static_cast<A>(std::pow(std::fabs(static_cast<double>(val)), params.p));
            }
            for (size_t d = n; d-- > 0;) {
              if (++tap[d] < taps[d].hi) break;
              tap[d] = taps[d].lo;
            }
          }
        }
        A result{};
        if (params.kind == PoolKind::kMax) {
          result = best_index >= 0 ? best : A{};
        } else if (params.kind == PoolKind::kAverage) {
          const int64_t counted = params.count_include_pad ? declared : inside;
          result = counted > 0 ? sum / static_cast<A>(counted) : A{};
        } else {
          result = static_cast<A>(std::pow(static_cast<double>(sum), 1.0 / params.p));
        }
        y[plane * g.out_size + o] = result;
        if (indices) indices[plane * g.out_size + o] = best_index < 0 ? -1 : plane * g.in_size + best_index;
        for (size_t d = n; d-- > 0;) {
          if (++pos[d] < g.out[d]) break;
          pos[d] = 0;
        }
      }
    }
  });
}

template <typename A>
Status PoolTyped(KernelContext& ctx, const Tensor& x, const PoolGeometry& g, const PoolParams& params) {
  std::vector<int64_t> out_dims{x.dim(0), x.dim(1)};
  out_dims.insert(out_dims.end(), g.out.begin(), g.out.end());
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out_dims));
  Tensor indices;
  if (params.kind == PoolKind::kMax && ctx.wants_output(1)) {
    NEE_ASSIGN_OR_RETURN(indices, ctx.AllocateOutput(1, DataType::kInt64, out_dims));
  }
  ComputeInput<A> cx(x);
  ComputeOutput<A> cy(y);
  RunPool<A>(ctx, g, params, cx.data(), cy.data(), indices.defined() ? indices.data<int64_t>() : nullptr);
  cy.Commit();
  return Status::Ok();
}

Status WindowPoolKernel(KernelContext& ctx, PoolParams params) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(CheckPoolType(ctx, x->dtype(), params.kind == PoolKind::kMax));
  NEE_ASSIGN_OR_RETURN(PoolGeometry g, PlanPool(ctx, *x));
  switch (ComputeKindOf(x->dtype())) {
    case ComputeKind::kFloat: return PoolTyped<float>(ctx, *x, g, params);
    default: return PoolTyped<double>(ctx, *x, g, params);  // double, int8, uint8 (exact in double)
  }
}

Status MaxPoolKernel(KernelContext& ctx) {
  PoolParams params;
  params.kind = PoolKind::kMax;
  NEE_ASSIGN_OR_RETURN(int64_t order, ctx.node().GetInt("storage_order", 0));
  if (order != 0 && order != 1) return ctx.Error("storage_order must be 0 or 1, got " + std::to_string(order));
  params.column_major_indices = order == 1;
  return WindowPoolKernel(ctx, params);
}

Status AveragePoolKernel(KernelContext& ctx) {
  PoolParams params;
  params.kind = PoolKind::kAverage;
  NEE_ASSIGN_OR_RETURN(int64_t include, ctx.node().GetInt("count_include_pad", 0));
  params.count_include_pad = include != 0;
  return WindowPoolKernel(ctx, params);
}

// LpPool's p: a float attribute in opset 1, an int from opset 2.
Result<double> ReadLpP(const Node& node) {
  const Attribute* a = node.FindAttr("p");
  double p = 2;
  if (a) p = a->type == AttrType::kFloat ? a->f : static_cast<double>(a->i);
  if (!(p > 0)) return InvalidModel(node.Describe() + ": p must be positive");
  return p;
}

Status LpPoolKernel(KernelContext& ctx) {
  PoolParams params;
  params.kind = PoolKind::kLp;
  NEE_ASSIGN_OR_RETURN(params.p, ReadLpP(ctx.node()));
  return WindowPoolKernel(ctx, params);
}

Status InferWindowPool(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  std::optional<Shape> out;
  if (x->shape) {
    const Shape& xs = *x->shape;
    if (xs.size() < 3) return ctx.InputError(0, "must have rank >= 3 (N, C, spatial...), got " + ShapeToString(xs));
    const size_t n = xs.size() - 2;
    NEE_ASSIGN_OR_RETURN(WindowSpec spec, ReadPoolSpec(ctx.node, ctx.opset, n));
    out = Shape{xs[0], xs[1]};
    for (size_t d = 0; d < n; ++d) {
      if (!xs[2 + d].known()) {
        out->push_back(Dim::Unknown());
        continue;
      }
      NEE_ASSIGN_OR_RETURN(int64_t o, nn::WindowOutputDim(ctx.node, spec, d, xs[2 + d].value));
      out->push_back(Dim::Known(o));
    }
  }
  ctx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  if (ctx.num_outputs() > 1) ctx.output_types[1] = TypeInfo::Tensor(DataType::kInt64, out);
  return Status::Ok();
}

// ---- Global pools ------------------------------------------------------------------

Status InferGlobalPool(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  std::optional<Shape> out;
  if (x->shape) {
    if (x->shape->size() < 2) return ctx.InputError(0, "must have rank >= 2 (N, C, spatial...)");
    out = Shape{(*x->shape)[0], (*x->shape)[1]};
    for (size_t d = 2; d < x->shape->size(); ++d) out->push_back(Dim::Known(1));
  }
  ctx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  return Status::Ok();
}

template <typename A>
Status GlobalPoolTyped(KernelContext& ctx, const Tensor& x, PoolKind kind, double p) {
  std::vector<int64_t> out_dims{x.dim(0), x.dim(1)};
  out_dims.resize(static_cast<size_t>(x.rank()), 1);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out_dims));
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t size = planes > 0 ? x.num_elements() / planes : 0;
  ComputeInput<A> cx(x);
  ComputeOutput<A> cy(y);
  ctx.ParallelFor(planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, size)), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const A* xp = cx.data() + plane * size;
      A acc = kind == PoolKind::kMax ? (size > 0 ? xp[0] : A{}) : A{};
      for (int64_t i = 0; i < size; ++i) {
        if (kind == PoolKind::kMax) acc = std::max(acc, xp[i]);
        else if (kind == PoolKind::kAverage) acc += xp[i];
        else acc += static_cast<A>(std::pow(std::fabs(static_cast<double>(xp[i])), p));
      }
      if (kind == PoolKind::kAverage) acc = size > 0 ? acc / static_cast<A>(size) : A{};
      if (kind == PoolKind::kLp) acc = static_cast<A>(std::pow(static_cast<double>(acc), 1.0 / p));
      cy[plane] = acc;
    }
  });
  cy.Commit();
  return Status::Ok();
}

Status GlobalPoolKernel(KernelContext& ctx, PoolKind kind) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(CheckPoolType(ctx, x->dtype(), false));
  if (x->rank() < 2) return ctx.InputError(0, "must have rank >= 2 (N, C, spatial...), got " + DimsToString(x->dims()));
  double p = 2;
  if (kind == PoolKind::kLp) {
    NEE_ASSIGN_OR_RETURN(p, ReadLpP(ctx.node()));
  }
  if (ComputeKindOf(x->dtype()) == ComputeKind::kFloat) return GlobalPoolTyped<float>(ctx, *x, kind, p);
  return GlobalPoolTyped<double>(ctx, *x, kind, p);
}

Status GlobalAveragePoolKernel(KernelContext& ctx) { return GlobalPoolKernel(ctx, PoolKind::kAverage); }
Status GlobalMaxPoolKernel(KernelContext& ctx) { return GlobalPoolKernel(ctx, PoolKind::kMax); }
Status GlobalLpPoolKernel(KernelContext& ctx) { return GlobalPoolKernel(ctx, PoolKind::kLp); }

// ---- MaxUnpool ------------------------------------------------------------------------

// The spatial output dims implied by the attributes: (in-1)*stride + kernel - pads.
Result<std::vector<int64_t>> UnpoolDims(const Node& node, const std::vector<int64_t>& in) {
  NEE_ASSIGN_OR_RETURN(WindowSpec s, nn::ReadWindowSpec(node, in.size(), nullptr));
  std::vector<int64_t> out;
  for (size_t d = 0; d < in.size(); ++d) {
    const int64_t o = in[d] < 0 ? -1 : (in[d] - 1) * s.strides[d] + s.kernel[d] - s.pad_begin(d) - s.pad_end(d);
    if (in[d] >= 0 && o < 0) return InvalidModel(node.Describe() + ": pads exceed the unpooled size");
    out.push_back(o);
  }
  return out;
}

Status InferMaxUnpool(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  std::optional<Shape> out;
  if (const Tensor* shape = ctx.input_value(2)) {
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, shape->ToInt64Vector());
    out = ShapeFromDims(dims);
  } else if (ctx.has_input(2)) {
    out.reset();
  } else if (x->shape) {
    if (x->shape->size() < 3) return ctx.InputError(0, "must have rank >= 3 (N, C, spatial...)");
    std::vector<int64_t> in;
    for (size_t d = 2; d < x->shape->size(); ++d) in.push_back((*x->shape)[d].known() ? (*x->shape)[d].value : -1);
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> spatial, UnpoolDims(ctx.node, in));
    out = Shape{(*x->shape)[0], (*x->shape)[1]};
    for (int64_t v : spatial) out->push_back(v >= 0 ? Dim::Known(v) : Dim::Unknown());
  }
  ctx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  return Status::Ok();
}

Status MaxUnpoolKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* ind, ctx.InputTensor(1));
  if (x->rank() < 3) return ctx.InputError(0, "must have rank >= 3 (N, C, spatial...), got " + DimsToString(x->dims()));
  if (ind->dtype() != DataType::kInt64) return ctx.InputError(1, "must be int64 indices");
  if (ind->dims() != x->dims())
    return ctx.InputError(1, "has shape " + DimsToString(ind->dims()) + ", expected the input's " + DimsToString(x->dims()));
  std::vector<int64_t> inferred{x->dim(0), x->dim(1)};
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> spatial,
                       UnpoolDims(ctx.node(), std::vector<int64_t>(x->dims().begin() + 2, x->dims().end())));
  inferred.insert(inferred.end(), spatial.begin(), spatial.end());
  std::vector<int64_t> out_dims = inferred;
  if (ctx.has_input(2)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* shape, ctx.InputTensor(2));
    NEE_ASSIGN_OR_RETURN(out_dims, shape->ToInt64Vector());
    if (out_dims.size() != inferred.size())
      return ctx.InputError(2, "output_shape " + DimsToString(out_dims) + " must have rank " + std::to_string(inferred.size()));
    for (size_t d = 0; d < out_dims.size(); ++d)
      if (out_dims[d] < inferred[d])
        return ctx.InputError(2, "output_shape " + DimsToString(out_dims) + " is smaller than the unpooled shape " +
                                     DimsToString(inferred));
  }
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x->dtype(), out_dims));
  // Indices address the unpooled (inferred) shape, as in the ONNX reference;
  // a larger output_shape receives it in its leading corner.
  const int64_t inferred_count = ProductOf(inferred);
  const size_t elem = StorageBytes(x->dtype(), 1);
  if (x->dtype() == DataType::kString || IsSubByte(x->dtype()))
    return NotImplemented(ctx.node().Describe() + ": " + nn::TypeError("MaxUnpool", x->dtype()));
  const std::vector<int64_t> inferred_strides = StridesOf(inferred), out_strides = StridesOf(out_dims);
  const auto* src = static_cast<const uint8_t*>(x->raw_data());
  auto* dst = static_cast<uint8_t*>(y.raw_data());
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    int64_t flat = ind->data<int64_t>()[i];
    if (flat < 0 || flat >= inferred_count)
      return ctx.InputError(1, "index " + std::to_string(flat) + " at position " + std::to_string(i) +
                                   " is outside the unpooled tensor of " + std::to_string(inferred_count) + " elements");
    int64_t out_offset = 0;
    for (size_t d = 0; d < inferred.size(); ++d) {
      out_offset += (flat / inferred_strides[d]) * out_strides[d];
      flat %= inferred_strides[d];
    }
    std::copy(src + static_cast<size_t>(i) * elem, src + static_cast<size_t>(i + 1) * elem,
              dst + static_cast<size_t>(out_offset) * elem);
  }
  return Status::Ok();
}

// ---- MaxRoiPool -----------------------------------------------------------------------

Status InferMaxRoiPool(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> pooled, ctx.node.GetInts("pooled_shape"));
  if (pooled.size() != 2) return ctx.Error("pooled_shape must have 2 values");
  Dim rois = Dim::Unknown();
  if (const Shape* r = nn::KnownShape(ctx, 1); r && !r->empty()) rois = (*r)[0];
  Dim c = x->shape && x->shape->size() == 4 ? (*x->shape)[1] : Dim::Unknown();
  ctx.output_types[0] = TypeInfo::Tensor(x->elem_type, Shape{rois, c, Dim::Known(pooled[0]), Dim::Known(pooled[1])});
  return Status::Ok();
}

template <typename A>
Status MaxRoiPoolTyped(KernelContext& ctx, const Tensor& x, const Tensor& rois, int64_t ph, int64_t pw, float scale) {
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), R = rois.dim(0);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), {R, C, ph, pw}));
  ComputeInput<A> cx(x), cr(rois);
  ComputeOutput<A> cy(y);
  for (int64_t r = 0; r < R; ++r) {
    const A* roi = cr.data() + r * 5;
    const int64_t batch = static_cast<int64_t>(roi[0]);
    if (batch < 0 || batch >= N)
      return ctx.InputError(1, "roi " + std::to_string(r) + " has batch index " + std::to_string(batch) +
                                   ", outside [0, " + std::to_string(N) + ")");
    const int64_t x1 = static_cast<int64_t>(std::round(static_cast<double>(roi[1]) * scale));
    const int64_t y1 = static_cast<int64_t>(std::round(static_cast<double>(roi[2]) * scale));
    const int64_t x2 = static_cast<int64_t>(std::round(static_cast<double>(roi[3]) * scale));
    const int64_t y2 = static_cast<int64_t>(std::round(static_cast<double>(roi[4]) * scale));
    const double bin_h = static_cast<double>(std::max<int64_t>(y2 - y1 + 1, 1)) / static_cast<double>(ph);
    const double bin_w = static_cast<double>(std::max<int64_t>(x2 - x1 + 1, 1)) / static_cast<double>(pw);
    for (int64_t c = 0; c < C; ++c) {
      const A* plane = cx.data() + (batch * C + c) * H * W;
      for (int64_t i = 0; i < ph; ++i)
        for (int64_t j = 0; j < pw; ++j) {
          const int64_t hs = std::clamp<int64_t>(static_cast<int64_t>(std::floor(i * bin_h)) + y1, 0, H);
          const int64_t he = std::clamp<int64_t>(static_cast<int64_t>(std::ceil((i + 1) * bin_h)) + y1, 0, H);
          const int64_t ws = std::clamp<int64_t>(static_cast<int64_t>(std::floor(j * bin_w)) + x1, 0, W);
          const int64_t we = std::clamp<int64_t>(static_cast<int64_t>(std::ceil((j + 1) * bin_w)) + x1, 0, W);
          A best{};
          bool any = false;
          for (int64_t h = hs; h < he; ++h)
            for (int64_t w = ws; w < we; ++w)
              if (!any || plane[h * W + w] > best) {
                best = plane[h * W + w];
                any = true;
              }
          cy[((r * C + c) * ph + i) * pw + j] = best;
        }
    }
  }
  cy.Commit();
  return Status::Ok();
}

Status MaxRoiPoolKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* rois, ctx.InputTensor(1));
  NEE_RETURN_IF_ERROR(CheckPoolType(ctx, x->dtype(), false));
  if (x->rank() != 4) return ctx.InputError(0, "must be 4-D (N, C, H, W), got " + DimsToString(x->dims()));
  if (rois->rank() != 2 || rois->dim(1) != 5 || rois->dtype() != x->dtype())
    return ctx.InputError(1, "must be [num_rois, 5] of the input's type, got " + rois->Describe());
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> pooled, ctx.node().GetInts("pooled_shape"));
  NEE_ASSIGN_OR_RETURN(float scale, ctx.node().GetFloat("spatial_scale", 1.0f));
  if (pooled.size() != 2 || pooled[0] <= 0 || pooled[1] <= 0)
    return ctx.Error("pooled_shape must be two positive values, got " + DimsToString(pooled));
  if (ComputeKindOf(x->dtype()) == ComputeKind::kFloat)
    return MaxRoiPoolTyped<float>(ctx, *x, *rois, pooled[0], pooled[1], scale);
  return MaxRoiPoolTyped<double>(ctx, *x, *rois, pooled[0], pooled[1], scale);
}

}  // namespace

void RegisterPoolOps(OpRegistry& registry) {
  registry.RegisterVersions("", "MaxPool", {1, 8, 10, 11, 12, 22}, InferWindowPool, MaxPoolKernel);
  registry.RegisterVersions("", "AveragePool", {1, 7, 10, 11, 19, 22}, InferWindowPool, AveragePoolKernel);
  registry.RegisterVersions("", "LpPool", {1, 2, 11, 18, 22}, InferWindowPool, LpPoolKernel);
  registry.RegisterVersions("", "GlobalAveragePool", {1, 22}, InferGlobalPool, GlobalAveragePoolKernel);
  registry.RegisterVersions("", "GlobalMaxPool", {1, 22}, InferGlobalPool, GlobalMaxPoolKernel);
  registry.RegisterVersions("", "GlobalLpPool", {1, 2, 22}, InferGlobalPool, GlobalLpPoolKernel);
  registry.RegisterVersions("", "MaxUnpool", {9, 11, 22}, InferMaxUnpool, MaxUnpoolKernel);
  registry.RegisterVersions("", "MaxRoiPool", {1, 22}, InferMaxRoiPool, MaxRoiPoolKernel);
}

}  // namespace nee
