// Operator family: Conv, ConvTranspose, ConvInteger; com.microsoft FusedConv
// (Conv + activation, written by the optimizer).
//
// Conv lowers each (image, group) to im2col + the GEMM core of nn_util.h;
// ConvTranspose to GEMM + col2im. Both handle 1-D, 2-D and 3-D (any rank,
// in fact). float16/bfloat16 compute in float; ConvInteger in int64.
#include <algorithm>

#include "ir/float_formats.h"
#include "ops/fused_conv.h"
#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/quant_conv.h"

namespace nee {
namespace {

using nn::ComputeInput;
using nn::ComputeKind;
using nn::ComputeKindOf;
using nn::ComputeOutput;
using nn::WindowSpec;

int NumThreads(const KernelContext& ctx) { return ctx.pool() ? ctx.pool()->num_threads() : 1; }

// ---- Shared shape rule pieces ------------------------------------------------

// The kernel shape from W's spatial dims when all are known.
bool KernelFromWeights(const Shape* w, std::vector<int64_t>* kernel) {
  if (!w || w->size() < 3) return false;
  kernel->clear();
  for (size_t d = 2; d < w->size(); ++d) {
    if (!(*w)[d].known()) return false;
    kernel->push_back((*w)[d].value);
  }
  return true;
}

Status CheckKernelAttrMatchesWeights(const Node& node, const std::vector<int64_t>& w_dims) {
  if (!node.HasAttr("kernel_shape")) return Status::Ok();
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> k, node.GetInts("kernel_shape"));
  std::vector<int64_t> w_spatial(w_dims.begin() + 2, w_dims.end());
  if (k != w_spatial)
    return InvalidModel(node.Describe() + ": kernel_shape " + DimsToString(k) + " does not match the weights' spatial dims " +
                        DimsToString(w_spatial));
  return Status::Ok();
}

// ---- Conv -------------------------------------------------------------------

Status InferConvLike(InferenceContext& ctx, DataType out_type) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* w, InputTensorType(ctx, 1));
  if (out_type == DataType::kUndefined) out_type = x->elem_type;
  if (!x->shape) {
    ctx.output_types[0] = TypeInfo::Tensor(out_type);
    return Status::Ok();
  }
  const Shape& xs = *x->shape;
  if (xs.size() < 3) return ctx.InputError(0, "must have rank >= 3 (N, C, spatial...), got " + ShapeToString(xs));
  const size_t n = xs.size() - 2;
  const Shape* ws = w->shape ? &*w->shape : nullptr;
  if (ws && ws->size() != xs.size())
    return ctx.InputError(1, "has rank " + std::to_string(ws->size()) + ", expected " + std::to_string(xs.size()) +
                                 " like the input");
  NEE_ASSIGN_OR_RETURN(int64_t group, ctx.node.GetInt("group", 1));
  if (group <= 0) return ctx.Error("group must be positive, got " + std::to_string(group));
  if (ws && xs[1].known() && (*ws)[1].known() && xs[1].value != (*ws)[1].value * group)
    return ctx.Error("input has " + xs[1].ToString() + " channels but weights expect " + (*ws)[1].ToString() +
                     " x group " + std::to_string(group));
  if (ws && (*ws)[0].known() && (*ws)[0].value % group != 0)
    return ctx.Error("output channels " + (*ws)[0].ToString() + " are not divisible by group " + std::to_string(group));
  Shape out{xs[0], ws ? (*ws)[0] : Dim::Unknown()};
  std::vector<int64_t> inferred;
  const bool have_kernel = KernelFromWeights(ws, &inferred);
  if (!ctx.node.HasAttr("kernel_shape") && !have_kernel) {
    for (size_t d = 0; d < n; ++d) out.push_back(Dim::Unknown());
    ctx.output_types[0] = TypeInfo::Tensor(out_type, out);
    return Status::Ok();
  }
  NEE_ASSIGN_OR_RETURN(WindowSpec spec, nn::ReadWindowSpec(ctx.node, n, have_kernel ? &inferred : nullptr));
  for (size_t d = 0; d < n; ++d) {
    const Dim& in = xs[2 + d];
    if (!in.known()) {
      out.push_back(Dim::Unknown());
      continue;
    }
    NEE_ASSIGN_OR_RETURN(int64_t o, nn::WindowOutputDim(ctx.node, spec, d, in.value));
    out.push_back(Dim::Known(o));
  }
  ctx.output_types[0] = TypeInfo::Tensor(out_type, out);
  return Status::Ok();
}

Status InferConv(InferenceContext& ctx) { return InferConvLike(ctx, DataType::kUndefined); }
Status InferConvInteger(InferenceContext& ctx) { return InferConvLike(ctx, DataType::kInt32); }

// Everything a Conv kernel needs once shapes are validated.
struct ConvGeometry {
  int64_t N = 0, C = 0, M = 0, group = 1;
  int64_t Cg = 0, Mg = 0;        // channels per group (input, output)
  std::vector<int64_t> in, out;  // spatial dims
  WindowSpec spec;
  int64_t in_size = 1, out_size = 1, kernel_size = 1;
  std::vector<std::vector<int64_t>> index;  // per spatial dim: WindowInputIndex
};

Result<ConvGeometry> PlanConv(const KernelContext& ctx, const Tensor& x, const Tensor& w) {
  ConvGeometry g;
  if (x.rank() < 3) return ctx.InputError(0, "must have rank >= 3 (N, C, spatial...), got " + DimsToString(x.dims()));
  if (w.rank() != x.rank())
    return ctx.InputError(1, "has shape " + DimsToString(w.dims()) + "; expected rank " + std::to_string(x.rank()));
  const size_t n = static_cast<size_t>(x.rank() - 2);
  NEE_ASSIGN_OR_RETURN(g.group, ctx.node().GetInt("group", 1));
  if (g.group <= 0) return ctx.Error("group must be positive, got " + std::to_string(g.group));
  g.N = x.dim(0);
  g.C = x.dim(1);
  g.M = w.dim(0);
  g.Cg = w.dim(1);
  if (g.C != g.Cg * g.group)
    return ctx.InputError(1, "has " + std::to_string(g.Cg) + " input channels per group; with group " +
                                 std::to_string(g.group) + " the input needs " + std::to_string(g.Cg * g.group) +
                                 " channels, it has " + std::to_string(g.C));
  if (g.M % g.group != 0)
    return ctx.InputError(1, "has " + std::to_string(g.M) + " output channels, not divisible by group " +
                                 std::to_string(g.group));
  g.Mg = g.M / g.group;
  NEE_RETURN_IF_ERROR(CheckKernelAttrMatchesWeights(ctx.node(), w.dims()));
  std::vector<int64_t> kernel(w.dims().begin() + 2, w.dims().end());
  NEE_ASSIGN_OR_RETURN(g.spec, nn::ReadWindowSpec(ctx.node(), n, &kernel));
  for (size_t d = 0; d < n; ++d) {
    const int64_t in = x.dim(static_cast<int64_t>(d + 2));
    NEE_ASSIGN_OR_RETURN(int64_t o, nn::WindowOutputDim(ctx.node(), g.spec, d, in));
    g.in.push_back(in);
    g.out.push_back(o);
    g.in_size *= in;
    g.out_size *= o;
    g.kernel_size *= kernel[d];
    g.index.push_back(nn::WindowInputIndex(g.spec, d, in, o));
  }
  // The im2col scratch holds Cg * kernel_size x out_size values.
  auto col = CheckedElementCount(std::vector<int64_t>{g.Cg, g.kernel_size, g.out_size});
  if (!col.ok() || col.value() * 8 > kMaxTensorBytes)
    return OutOfMemory(ctx.node().Describe() + ": the im2col buffer for this convolution would be too large");
  return g;
}

// Fills one im2col row: for kernel tap `taps` of one input channel plane,
// the input value seen by every output position (0 in the padding).
template <typename A>
void Im2ColRow(const ConvGeometry& g, const A* plane, const std::vector<int64_t>& taps, A* row) {
  const size_t n = g.in.size();
  const int64_t inner = g.out[n - 1];
  const int64_t* last = g.index[n - 1].data() + taps[n - 1] * inner;
  const int64_t outer = g.out_size / std::max<int64_t>(1, inner);
  std::vector<int64_t> pos(n, 0);  // outer output coordinate (dims 0..n-2)
  for (int64_t o = 0; o < outer; ++o) {
    int64_t base = 0;
    bool inside = true;
    for (size_t d = 0; d + 1 < n; ++d) {
      const int64_t xi = g.index[d][static_cast<size_t>(taps[d] * g.out[d] + pos[d])];
      if (xi < 0) inside = false;
      base = base * g.in[d] + xi;
    }
    A* dst = row + o * inner;
    if (!inside) {
      std::fill(dst, dst + inner, A{});
    } else {
      const A* src = plane + base * g.in[n - 1];
      for (int64_t j = 0; j < inner; ++j) dst[j] = last[j] < 0 ? A{} : src[last[j]];
    }
    for (size_t d = n - 1; d-- > 0;) {
      if (++pos[d] < g.out[d]) break;
      pos[d] = 0;
    }
  }
}

// Kernel tap coordinates of flat tap index t.
std::vector<int64_t> TapCoords(const WindowSpec& s, int64_t t) {
  std::vector<int64_t> taps(s.rank());
  for (size_t d = s.rank(); d-- > 0;) {
    taps[d] = t % s.kernel[d];
    t /= s.kernel[d];
  }
  return taps;
}

// y[n, group g] = W_g x im2col(x[n, group g]) (+ bias). `col` is scratch
// of Cg*kernel_size x out_size; `parallel_inside` splits the work across
// threads within this one (n, g), otherwise the caller parallelizes.
template <typename A>
void ConvOneGroup(const KernelContext& ctx, const ConvGeometry& g, const A* x, const A* w, const A* bias, A* y,
                  int64_t n, int64_t grp, std::vector<A>& col, bool parallel_inside) {
  const int64_t rows = g.Cg * g.kernel_size;
  col.resize(static_cast<size_t>(rows * g.out_size));
  auto fill_rows = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t c = grp * g.Cg + r / g.kernel_size;
      const A* plane = x + (n * g.C + c) * g.in_size;
      Im2ColRow<A>(g, plane, TapCoords(g.spec, r % g.kernel_size), col.data() + r * g.out_size);
    }
  };
  const A* w_g = w + grp * g.Mg * rows;
  A* y_g = y + (n * g.M + grp * g.Mg) * g.out_size;
  auto gemm_rows = [&](int64_t begin, int64_t end) {
    nn::GemmRows<A>(begin, end, g.out_size, rows, w_g, rows, 1, col.data(), y_g, false);
    if (bias)
      for (int64_t m = begin; m < end; ++m) {
        const A b = bias[grp * g.Mg + m];
        for (int64_t p = 0; p < g.out_size; ++p) y_g[m * g.out_size + p] += b;
      }
  };
  if (parallel_inside) {
    ctx.ParallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, g.out_size)), fill_rows);
    ctx.ParallelFor(g.Mg, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, rows * g.out_size)), gemm_rows);
  } else {
    fill_rows(0, rows);
    gemm_rows(0, g.Mg);
  }
}

template <typename A>
void RunConv(const KernelContext& ctx, const ConvGeometry& g, const A* x, const A* w, const A* bias, A* y) {
  const int64_t units = g.N * g.group;
  if (units >= 2 * NumThreads(ctx) && g.Mg < 4 * NumThreads(ctx)) {
    // Many small (image, group) units (e.g. depthwise): one unit per task.
    ctx.ParallelFor(units, 1, [&](int64_t begin, int64_t end) {
      std::vector<A> col;
      for (int64_t u = begin; u < end; ++u) ConvOneGroup<A>(ctx, g, x, w, bias, y, u / g.group, u % g.group, col, false);
    });
  } else {
    std::vector<A> col;
    for (int64_t u = 0; u < units; ++u) ConvOneGroup<A>(ctx, g, x, w, bias, y, u / g.group, u % g.group, col, true);
  }
}

// The optional bias B (input 2) of Conv and ConvTranspose: a 1-D tensor of
// `channels` elements of X's type; null when absent.
Result<const Tensor*> OptionalBias(KernelContext& ctx, const Tensor& x, int64_t channels) {
  NEE_ASSIGN_OR_RETURN(const Tensor* b, OptionalInputTensor(ctx, 2));
  if (b && (b->dtype() != x.dtype() || b->num_elements() != channels || b->rank() != 1))
    return ctx.InputError(2, "must be a 1-D " + std::string(DataTypeName(x.dtype())) + " bias of " +
                                 std::to_string(channels) + " elements, got " + b->Describe());
  return b;
}

template <typename A>
Status ConvTyped(KernelContext& ctx, const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b) {
  std::vector<int64_t> out_dims{g.N, g.M};
  out_dims.insert(out_dims.end(), g.out.begin(), g.out.end());
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out_dims));
  ComputeInput<A> cx(x), cw(w), cb;
  if (b) cb = ComputeInput<A>(*b);
  ComputeOutput<A> cy(y);
  RunConv<A>(ctx, g, cx.data(), cw.data(), b ? cb.data() : nullptr, cy.data());
  cy.Commit();
  return Status::Ok();
}

Status ConvKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* w, ctx.InputTensor(1));
  NEE_RETURN_IF_ERROR(nn::RequireElementType(ctx, 1, w->dtype(), x->dtype()));
  NEE_ASSIGN_OR_RETURN(ConvGeometry g, PlanConv(ctx, *x, *w));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, OptionalBias(ctx, *x, g.M));
  switch (ComputeKindOf(x->dtype())) {
    case ComputeKind::kFloat: return ConvTyped<float>(ctx, g, *x, *w, b);
    case ComputeKind::kDouble: return ConvTyped<double>(ctx, g, *x, *w, b);
    default: return NotImplemented(ctx.node().Describe() + ": " + nn::TypeError("Conv", x->dtype()));
  }
}

// ---- ConvInteger --------------------------------------------------------------------

Status ConvIntegerKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* w, ctx.InputTensor(1));
  for (size_t i = 0; i < 2; ++i) {
    DataType t = (i == 0 ? x : w)->dtype();
    if (t != DataType::kInt8 && t != DataType::kUint8)
      return ctx.InputError(i, std::string("must be int8 or uint8, got ") + DataTypeName(t));
  }
  NEE_ASSIGN_OR_RETURN(ConvGeometry g, PlanConv(ctx, *x, *w));
  int64_t x_zp = 0;
  std::vector<int64_t> w_zp(static_cast<size_t>(g.M), 0);
  if (ctx.has_input(2)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(2));
    if (t->num_elements() != 1 || t->dtype() != x->dtype())
      return ctx.InputError(2, "must be a scalar zero point of the input's type, got " + t->Describe());
    x_zp = static_cast<int64_t>(ReadAsDouble(*t, 0));
  }
  if (ctx.has_input(3)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(3));
    if (t->dtype() != w->dtype() || (t->num_elements() != 1 && t->num_elements() != g.M))
      return ctx.InputError(3, "must be a scalar or per-output-channel zero point of the weights' type, got " +
                                   t->Describe());
    for (int64_t m = 0; m < g.M; ++m)
      w_zp[static_cast<size_t>(m)] = static_cast<int64_t>(ReadAsDouble(*t, t->num_elements() == 1 ? 0 : m));
  }
  // Subtracting the input zero point before im2col makes the padding count
  // as the zero point, as the ONNX definition requires.
  std::vector<int64_t> xv(static_cast<size_t>(x->num_elements())), wv(static_cast<size_t>(w->num_elements()));
  nn::ConvertToCompute<int64_t>(*x, xv.data());
  nn::ConvertToCompute<int64_t>(*w, wv.data());
  for (int64_t& v : xv) v -= x_zp;
  const int64_t per_filter = g.M > 0 ? w->num_elements() / g.M : 0;
  for (size_t i = 0; i < wv.size(); ++i) wv[i] -= w_zp[i / static_cast<size_t>(std::max<int64_t>(1, per_filter))];
  std::vector<int64_t> out_dims{g.N, g.M};
  out_dims.insert(out_dims.end(), g.out.begin(), g.out.end());
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kInt32, out_dims));
  std::vector<int64_t> acc(static_cast<size_t>(y.num_elements()));
  RunConv<int64_t>(ctx, g, xv.data(), wv.data(), nullptr, acc.data());
  for (size_t i = 0; i < acc.size(); ++i) y.data<int32_t>()[i] = static_cast<int32_t>(acc[i]);
  return Status::Ok();
}

// ---- ConvTranspose --------------------------------------------------------------------

int64_t FloorDiv2(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

struct ConvTransposeGeometry {
  int64_t N = 0, C = 0, M = 0, group = 1, Cg = 0, Mg = 0;
  std::vector<int64_t> in, out, kernel, strides, dilations, pads;  // pads may be negative
  int64_t in_size = 1, out_size = 1, kernel_size = 1;
};

// Resolves output size and pads per spatial dim; `in` entries < 0 are unknown
// (then the output dim is -1 too).
Status ResolveConvTranspose(const Node& node, size_t n, const std::vector<int64_t>& in,
                            const std::vector<int64_t>& kernel, ConvTransposeGeometry& g) {
  const std::string where = node.Describe() + ": ";
  g.kernel = kernel;
  NEE_ASSIGN_OR_RETURN(g.strides, node.GetInts("strides", std::vector<int64_t>(n, 1)));
  NEE_ASSIGN_OR_RETURN(g.dilations, node.GetInts("dilations", std::vector<int64_t>(n, 1)));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> out_pad, node.GetInts("output_padding", std::vector<int64_t>(n, 0)));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> out_shape, node.GetInts("output_shape", {}));
  NEE_ASSIGN_OR_RETURN(std::string auto_pad, node.GetString("auto_pad", "NOTSET"));
  const bool has_pads = node.HasAttr("pads");
  NEE_ASSIGN_OR_RETURN(g.pads, node.GetInts("pads", std::vector<int64_t>(2 * n, 0)));
  if (g.strides.size() != n || g.dilations.size() != n || g.pads.size() != 2 * n)
    return InvalidModel(where + "strides, dilations and pads must match the " + std::to_string(n) + " spatial dims");
  if (out_pad.size() == 2 * n) out_pad.resize(n);  // some exporters write begin+end
  if (out_pad.size() != n) return InvalidModel(where + "output_padding must have " + std::to_string(n) + " values");
  if (out_shape.size() == n + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  if (!out_shape.empty() && out_shape.size() != n)
    return InvalidModel(where + "output_shape must have " + std::to_string(n) + " values");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    return InvalidModel(where + "unknown auto_pad '" + auto_pad + "'");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  g.out.assign(n, -1);
  for (size_t d = 0; d < n; ++d) {
    if (g.kernel[d] <= 0 || g.strides[d] <= 0 || g.dilations[d] <= 0)
      return InvalidModel(where + "kernel, strides and dilations must be positive");
    constexpr int64_t kMax = int64_t{1} << 31;  // keeps the size arithmetic far from overflow
    if (g.kernel[d] > kMax || g.strides[d] > kMax || g.dilations[d] > kMax || g.pads[d] > kMax || g.pads[n + d] > kMax ||
        out_pad[d] > kMax || (!out_shape.empty() && (out_shape[d] < 0 || out_shape[d] > kMax)))
      return InvalidModel(where + "an attribute value is out of range");
    if (out_pad[d] < 0) return InvalidModel(where + "output_padding must be non-negative");
    if (g.pads[d] < 0 || g.pads[n + d] < 0) return InvalidModel(where + "pads must be non-negative");
    if (auto_pad == "VALID") g.pads[d] = g.pads[n + d] = 0;
    if (in[d] < 0) continue;
    const int64_t dk = (g.kernel[d] - 1) * g.dilations[d] + 1;
    const int64_t full = g.strides[d] * (in[d] - 1) + out_pad[d] + dk;
    if (!out_shape.empty() || (same && !has_pads)) {
      const int64_t target = out_shape.empty() ? in[d] * g.strides[d] : out_shape[d];
      const int64_t total = full - target;
      if (!out_shape.empty() && total < 0) {
        // An explicit output_shape beyond the full result: the extra positions come after it (they hold
        // only the bias), as in onnx.reference and ONNX Runtime, rather than being split around it.
        g.pads[d] = 0;
        g.pads[n + d] = total;
      } else if (auto_pad == "SAME_UPPER") {
        g.pads[d] = FloorDiv2(total);
        g.pads[n + d] = total - FloorDiv2(total);
      } else {
        g.pads[d] = total - FloorDiv2(total);
        g.pads[n + d] = FloorDiv2(total);
      }
      g.out[d] = target;
    } else {
      g.out[d] = full - g.pads[d] - g.pads[n + d];
    }
    if (g.out[d] < 0)
      return InvalidArgument(where + "spatial dim " + std::to_string(d) + " would have negative output size " +
                             std::to_string(g.out[d]));
  }
  return Status::Ok();
}

Status InferConvTranspose(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* w, InputTensorType(ctx, 1));
  if (!x->shape) {
    ctx.output_types[0] = TypeInfo::Tensor(x->elem_type);
    return Status::Ok();
  }
  const Shape& xs = *x->shape;
  if (xs.size() < 3) return ctx.InputError(0, "must have rank >= 3 (N, C, spatial...), got " + ShapeToString(xs));
  const size_t n = xs.size() - 2;
  const Shape* ws = w->shape ? &*w->shape : nullptr;
  if (ws && ws->size() != xs.size())
    return ctx.InputError(1, "has rank " + std::to_string(ws->size()) + ", expected " + std::to_string(xs.size()));
  NEE_ASSIGN_OR_RETURN(int64_t group, ctx.node.GetInt("group", 1));
  if (group <= 0) return ctx.Error("group must be positive, got " + std::to_string(group));
  if (ws && xs[1].known() && (*ws)[0].known() && xs[1].value != (*ws)[0].value)
    return ctx.Error("input has " + xs[1].ToString() + " channels but weights have " + (*ws)[0].ToString());
  Dim m = Dim::Unknown();
  if (ws && (*ws)[1].known()) m = Dim::Known((*ws)[1].value * group);
  Shape out{xs[0], m};
  std::vector<int64_t> kernel;
  if (ctx.node.HasAttr("kernel_shape")) {
    NEE_ASSIGN_OR_RETURN(kernel, ctx.node.GetInts("kernel_shape"));
  } else if (!KernelFromWeights(ws, &kernel)) {
    kernel.clear();
  }
  if (kernel.size() != n) {
    for (size_t d = 0; d < n; ++d) out.push_back(Dim::Unknown());
    ctx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
    return Status::Ok();
  }
  std::vector<int64_t> in(n, -1);
  for (size_t d = 0; d < n; ++d)
    if (xs[2 + d].known()) in[d] = xs[2 + d].value;
  ConvTransposeGeometry g;
  NEE_RETURN_IF_ERROR(ResolveConvTranspose(ctx.node, n, in, kernel, g));
  for (size_t d = 0; d < n; ++d) out.push_back(g.out[d] >= 0 ? Dim::Known(g.out[d]) : Dim::Unknown());
  ctx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  return Status::Ok();
}

// Adds one col2im row (output channel m, kernel tap `taps`) into the output plane.
template <typename A>
void Col2ImRow(const ConvTransposeGeometry& g, const std::vector<int64_t>& taps, const A* row, A* plane) {
  const size_t n = g.in.size();
  std::vector<int64_t> pos(n, 0);
  for (int64_t p = 0; p < g.in_size; ++p) {
    int64_t offset = 0;
    bool inside = true;
    for (size_t d = 0; d < n; ++d) {
      const int64_t o = pos[d] * g.strides[d] - g.pads[d] + taps[d] * g.dilations[d];
      if (o < 0 || o >= g.out[d]) {
        inside = false;
        break;
      }
      offset = offset * g.out[d] + o;
    }
    if (inside) plane[offset] += row[p];
    for (size_t d = n; d-- > 0;) {
      if (++pos[d] < g.in[d]) break;
      pos[d] = 0;
    }
  }
}

template <typename A>
Status ConvTransposeTyped(KernelContext& ctx, const ConvTransposeGeometry& g, const Tensor& x, const Tensor& w,
                          const Tensor* b) {
  std::vector<int64_t> out_dims{g.N, g.M};
  out_dims.insert(out_dims.end(), g.out.begin(), g.out.end());
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out_dims));
  ComputeInput<A> cx(x), cw(w), cb;
  if (b) cb = ComputeInput<A>(*b);
  ComputeOutput<A> cy(y);
  A* out = cy.data();
  const int64_t rows = g.Mg * g.kernel_size;  // col rows per group
  std::vector<A> col(static_cast<size_t>(rows * g.in_size));
  WindowSpec taps_spec;
  taps_spec.kernel = g.kernel;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t grp = 0; grp < g.group; ++grp) {
      // col[r, p] = sum_c W[c, r] * X[c, p] over this group's input channels:
      // a transposed-A GEMM, so W is read with swapped strides.
      const A* w_g = cw.data() + grp * g.Cg * rows;
      const A* x_g = cx.data() + (n * g.C + grp * g.Cg) * g.in_size;
      ctx.ParallelFor(rows, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, g.Cg * g.in_size)),
                      [&](int64_t begin, int64_t end) {
                        nn::GemmRows<A>(begin, end, g.in_size, g.Cg, w_g, 1, rows, x_g, col.data(), false);
                      });
      // Scatter per output channel; each channel's plane is written by one task.
      ctx.ParallelFor(g.Mg, 1, [&](int64_t begin, int64_t end) {
        for (int64_t m = begin; m < end; ++m) {
          A* plane = out + (n * g.M + grp * g.Mg + m) * g.out_size;
          std::fill(plane, plane + g.out_size, b ? cb[grp * g.Mg + m] : A{});
          for (int64_t t = 0; t < g.kernel_size; ++t)
            Col2ImRow<A>(g, TapCoords(taps_spec, t), col.data() + (m * g.kernel_size + t) * g.in_size, plane);
        }
      });
    }
  cy.Commit();
  return Status::Ok();
}

Status ConvTransposeKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* w, ctx.InputTensor(1));
  NEE_RETURN_IF_ERROR(nn::RequireElementType(ctx, 1, w->dtype(), x->dtype()));
  if (x->rank() < 3) return ctx.InputError(0, "must have rank >= 3 (N, C, spatial...), got " + DimsToString(x->dims()));
  if (w->rank() != x->rank())
    return ctx.InputError(1, "has shape " + DimsToString(w->dims()) + "; expected rank " + std::to_string(x->rank()));
  ConvTransposeGeometry g;
  const size_t n = static_cast<size_t>(x->rank() - 2);
  NEE_ASSIGN_OR_RETURN(g.group, ctx.node().GetInt("group", 1));
  if (g.group <= 0) return ctx.Error("group must be positive, got " + std::to_string(g.group));
  g.N = x->dim(0);
  g.C = x->dim(1);
  if (w->dim(0) != g.C)
    return ctx.InputError(1, "has " + std::to_string(w->dim(0)) + " input channels, the input has " + std::to_string(g.C));
  if (g.C % g.group != 0)
    return ctx.InputError(0, "has " + std::to_string(g.C) + " channels, not divisible by group " + std::to_string(g.group));
  g.Cg = g.C / g.group;
  g.Mg = w->dim(1);
  g.M = g.Mg * g.group;
  NEE_RETURN_IF_ERROR(CheckKernelAttrMatchesWeights(ctx.node(), w->dims()));
  std::vector<int64_t> kernel(w->dims().begin() + 2, w->dims().end());
  g.in.assign(x->dims().begin() + 2, x->dims().end());
  NEE_RETURN_IF_ERROR(ResolveConvTranspose(ctx.node(), n, g.in, kernel, g));
  for (size_t d = 0; d < n; ++d) {
    g.in_size *= g.in[d];
    g.out_size *= g.out[d];
    g.kernel_size *= kernel[d];
  }
  auto col = CheckedElementCount(std::vector<int64_t>{g.Mg, g.kernel_size, g.in_size});
  if (!col.ok() || col.value() * 8 > kMaxTensorBytes)
    return OutOfMemory(ctx.node().Describe() + ": the col2im buffer for this convolution would be too large");
  NEE_ASSIGN_OR_RETURN(const Tensor* b, OptionalBias(ctx, *x, g.M));
  switch (ComputeKindOf(x->dtype())) {
    case ComputeKind::kFloat: return ConvTransposeTyped<float>(ctx, g, *x, *w, b);
    case ComputeKind::kDouble: return ConvTransposeTyped<double>(ctx, g, *x, *w, b);
    default: return NotImplemented(ctx.node().Describe() + ": " + nn::TypeError("ConvTranspose", x->dtype()));
  }
}


// ---- com.microsoft FusedConv ------------------------------------------------------
//
// ONNX Runtime's contrib op: Conv's inputs and attributes, an optional fourth
// input Z of the output's shape added before the activation, then the
// activation named by `activation` / `activation_params` (ops/fused_conv.h).

Status InferFusedConv(InferenceContext& ctx) {
  NEE_RETURN_IF_ERROR(ReadFusedActivation(ctx.node).status());
  // Every input is a tensor of X's type, float or double.
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  // bfloat16: ai.nee FusedConv, whose declaration allows only that type.
  if (x->elem_type != DataType::kFloat && x->elem_type != DataType::kDouble && x->elem_type != DataType::kBFloat16)
    return ctx.InputError(0, std::string("must be float, double or bfloat16, got ") + DataTypeName(x->elem_type));
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    NEE_ASSIGN_OR_RETURN(const TypeInfo* t, InputTensorType(ctx, i));
    if (t->elem_type != x->elem_type)
      return ctx.InputError(i, std::string("must have X's type ") + DataTypeName(x->elem_type) + ", got " +
                                   DataTypeName(t->elem_type));
  }
  return InferConv(ctx);
}

// FusedConv's Z (input 3) as T values, checked against Conv's output y; null
// when absent.
template <typename T>
Result<const T*> ReadResidual(KernelContext& ctx, const Tensor& y) {
  if (!ctx.has_input(3)) return static_cast<const T*>(nullptr);
  NEE_ASSIGN_OR_RETURN(const Tensor* zt, ctx.InputTensor(3));
  if (zt->dtype() != y.dtype() || zt->dims() != y.dims())
    return ctx.InputError(3, "(Z) must have the output's type and shape " + DimsToString(y.dims()) + ", got " +
                                 zt->Describe());
  return zt->data<T>();
}

// Adds Z (when given) and applies the activation over Conv's output y.
template <typename T>
Status FinishFusedConv(KernelContext& ctx, const FusedActivation& act, Tensor& y) {
  T* data = y.data<T>();
  NEE_ASSIGN_OR_RETURN(const T* z, ReadResidual<T>(ctx, y));
  ctx.ParallelFor(y.num_elements(), 16384, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) data[i] = ApplyFusedActivation<T>(act, z ? data[i] + z[i] : data[i]);
  });
  return Status::Ok();
}

// The bfloat16 form (ai.nee FusedConv): each step rounds its result to
// bfloat16 as the unfused Conv -> Add -> activation nodes would (y, Conv's
// output, is already rounded): y + Z rounded, then the activation rounded.
Status FinishFusedConvBFloat16(KernelContext& ctx, const FusedActivation& act, Tensor& y) {
  uint16_t* data = y.data<uint16_t>();
  NEE_ASSIGN_OR_RETURN(const uint16_t* z, ReadResidual<uint16_t>(ctx, y));
  ctx.ParallelFor(y.num_elements(), 16384, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float v = BFloat16ToFloat(data[i]);
      if (z) v = BFloat16ToFloat(FloatToBFloat16(v + BFloat16ToFloat(z[i])));
      data[i] = FloatToBFloat16(ApplyFusedActivation<float>(act, v));
    }
  });
  return Status::Ok();
}

Status FusedConvKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(FusedActivation act, ReadFusedActivation(ctx.node()));
  NEE_ASSIGN_OR_RETURN(Tensor y, RunKeepingOutput(ctx, ConvKernel));
  switch (y.dtype()) {
    case DataType::kFloat: return FinishFusedConv<float>(ctx, act, y);
    case DataType::kDouble: return FinishFusedConv<double>(ctx, act, y);
    case DataType::kBFloat16: return FinishFusedConvBFloat16(ctx, act, y);
    default: return NotImplemented(ctx.node().Describe() + ": " + nn::TypeError("FusedConv", y.dtype()));
  }
}

}  // namespace

Result<FusedActivation> ReadFusedActivation(const Node& node, const std::string& prefix) {
  using K = FusedActivation::Kind;
  struct Known {
    const char* name;
    K kind;
    size_t params;
  };
  static const Known kKnown[] = {
      {"Relu", K::kRelu, 0},           {"Tanh", K::kTanh, 0},       {"Sigmoid", K::kSigmoid, 0},
      {"Silu", K::kSilu, 0},           {"LeakyRelu", K::kLeakyRelu, 1}, {"Clip", K::kClip, 2},
      {"HardSigmoid", K::kHardSigmoid, 2}, {"HardSwish", K::kHardSwish, 0},
  };
  FusedActivation act;
  const std::string attr = prefix + "activation", params_attr = prefix + "activation_params";
  if (!node.HasAttr(attr)) return act;
  NEE_ASSIGN_OR_RETURN(std::string name, node.GetString(attr));
  NEE_ASSIGN_OR_RETURN(std::vector<float> params, node.GetFloats(params_attr, {}));
  for (const Known& k : kKnown) {
    if (name != k.name) continue;
    if (params.size() != k.params)
      return InvalidModel(node.Describe() + ": " + attr + " " + name + " takes " + std::to_string(k.params) + " " +
                          params_attr + ", got " + std::to_string(params.size()));
    act.kind = k.kind;
    if (k.params > 0) act.a = params[0];
    if (k.params > 1) act.b = params[1];
    return act;
  }
  return InvalidModel(node.Describe() + ": unsupported " + attr + " '" + name + "'");
}

namespace {

// Forwards output allocation to the outer context (so the output lands where
// the plan put it) and remembers the tensor handed out.
class KeepingAllocator : public KernelContext::OutputAllocator {
 public:
  explicit KeepingAllocator(KernelContext& outer) : outer_(outer) {}
  Result<Tensor> Allocate(size_t index, DataType type, std::vector<int64_t> dims, bool zero_fill) override {
    NEE_ASSIGN_OR_RETURN(Tensor t, zero_fill ? outer_.AllocateOutput(index, type, std::move(dims))
                                             : outer_.AllocateOutputForOverwrite(index, type, std::move(dims)));
    if (index == 0) kept_ = t;
    return t;
  }
  const Tensor& kept() const { return kept_; }

 private:
  KernelContext& outer_;
  Tensor kept_;
};

}  // namespace

Result<Tensor> RunKeepingOutput(KernelContext& ctx, KernelFn kernel) {
  std::vector<const Value*> inputs;
  std::vector<bool> constant;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    inputs.push_back(ctx.input(i));
    constant.push_back(ctx.input_is_constant(i));
  }
  std::vector<Value> outputs(ctx.num_outputs());
  KeepingAllocator allocator(ctx);
  KernelContext inner(ctx.node(), ctx.opset(), std::move(inputs), &outputs, &allocator, ctx.pool(),
                      ctx.subgraphs());
  inner.SetPrepared(ctx.prepared(), &constant);
  NEE_RETURN_IF_ERROR(kernel(inner));
  if (!allocator.kept().defined()) return ctx.Error("the convolution produced no output");
  return allocator.kept();
}

Status InferConvIntegerOutput(InferenceContext& ctx) { return InferConvInteger(ctx); }
Status ConvIntegerReference(KernelContext& ctx) { return ConvIntegerKernel(ctx); }

void RegisterConvOps(OpRegistry& registry) {
  registry.RegisterVersions("", "Conv", {1, 11, 22}, InferConv, ConvKernel);
  registry.RegisterVersions("", "ConvTranspose", {1, 11, 22}, InferConvTranspose, ConvTransposeKernel);
  registry.RegisterVersions("", "ConvInteger", {10}, InferConvInteger, ConvIntegerKernel);
  registry.RegisterVersions("com.microsoft", "FusedConv", {1}, InferFusedConv, FusedConvKernel);
  registry.RegisterVersions("ai.nee", "FusedConv", {1}, InferFusedConv, FusedConvKernel);
}

}  // namespace nee
