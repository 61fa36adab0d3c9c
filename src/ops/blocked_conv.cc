// Operator family: nee's channel-blocked layout (domain ai.nee): ToBlocked,
// FromBlocked, BlockedConv, BlockedMaxPool and BlockedGlobalAveragePool (see ops/blocked_conv.h for the layout and the
// contracts). The reference kernels are plain loops over the layout; the
// convolution sums in double, so it is an independent yardstick for the fast
// kernels (ep/cpu/blocked_conv_fast.cc). Work is split over output planes, each
// written by one task, so results do not depend on the thread count.
#include "ops/blocked_conv.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "ops/attention_sdpa.h"  // kNeeDomain
#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

Dim BlocksOf(const Dim& channels) {
  return channels.known() ? Dim::Known(ChannelBlocks(channels.value)) : Dim::Unknown();
}

Result<const Shape*> FloatInputOfRank(const InferenceContext& ctx, size_t i, size_t rank) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* t, InputTensorType(ctx, i));
  if (t->elem_type != DataType::kFloat)
    return ctx.InputError(i, std::string("must be float32, got ") + DataTypeName(t->elem_type));
  if (!t->shape) return static_cast<const Shape*>(nullptr);
  if (t->shape->size() != rank)
    return ctx.InputError(i, "must have rank " + std::to_string(rank) + ", got " + ShapeToString(*t->shape));
  if (rank == 5 && (*t->shape)[4].known() && (*t->shape)[4].value != kChannelBlock)
    return ctx.InputError(i, "must be blocked by " + std::to_string(kChannelBlock) + " channels, got " +
                                 ShapeToString(*t->shape));
  return &*t->shape;
}

// ---- ToBlocked / FromBlocked ---------------------------------------------------------

Status InferToBlocked(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Shape* x, FloatInputOfRank(ctx, 0, 4));
  if (!x) {
    ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat);
    return Status::Ok();
  }
  const Shape& s = *x;
  ctx.output_types[0] =
      TypeInfo::Tensor(DataType::kFloat, Shape{s[0], BlocksOf(s[1]), s[2], s[3], Dim::Known(kChannelBlock)});
  return Status::Ok();
}

Result<int64_t> ChannelsAttr(const Node& node, const std::string& where) {
  NEE_ASSIGN_OR_RETURN(int64_t channels, node.GetInt("channels"));
  if (channels <= 0) return InvalidModel(where + "channels must be positive, got " + std::to_string(channels));
  return channels;
}

// Input 0's shape as a blocked tensor of `channels` channels (null where unknown; the output then a float
// tensor of unknown shape).
Result<const Shape*> BlockedInputOf(InferenceContext& ctx, int64_t channels) {
  NEE_ASSIGN_OR_RETURN(const Shape* x, FloatInputOfRank(ctx, 0, 5));
  if (!x) {
    ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat);
    return x;
  }
  if ((*x)[1].known() && (*x)[1].value != ChannelBlocks(channels))
    return ctx.InputError(0, "has " + (*x)[1].ToString() + " channel blocks; " + std::to_string(channels) +
                                 " channels need " + std::to_string(ChannelBlocks(channels)));
  return x;
}

Status InferFromBlocked(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(int64_t channels, ChannelsAttr(ctx.node, ctx.node.Describe() + ": "));
  NEE_ASSIGN_OR_RETURN(const Shape* x, BlockedInputOf(ctx, channels));
  if (!x) return Status::Ok();
  const Shape& s = *x;
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat, Shape{s[0], Dim::Known(channels), s[2], s[3]});
  return Status::Ok();
}

Status ToBlockedKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->dtype() != DataType::kFloat || x->rank() != 4)
    return ctx.InputError(0, "must be a 4-D float32 tensor, got " + x->Describe());
  const int64_t N = x->dim(0), C = x->dim(1), plane = x->dim(2) * x->dim(3), Cb = ChannelBlocks(C);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(
                                     0, DataType::kFloat, {N, Cb, x->dim(2), x->dim(3), kChannelBlock}));
  const float* src = x->data<float>();
  float* dst = y.data<float>();
  ctx.ParallelFor(N * Cb, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nb = begin; nb < end; ++nb) {
      const int64_t n = nb / Cb, c0 = nb % Cb * kChannelBlock;
      float* out = dst + nb * plane * kChannelBlock;
      for (int64_t l = 0; l < kChannelBlock; ++l) {
        const float* in = c0 + l < C ? src + (n * C + c0 + l) * plane : nullptr;
        for (int64_t p = 0; p < plane; ++p) out[p * kChannelBlock + l] = in ? in[p] : 0.f;
      }
    }
  });
  return Status::Ok();
}

Status FromBlockedKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(int64_t C, ChannelsAttr(ctx.node(), ctx.node().Describe() + ": "));
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->dtype() != DataType::kFloat || x->rank() != 5 || x->dim(4) != kChannelBlock ||
      x->dim(1) != ChannelBlocks(C))
    return ctx.InputError(0, "must be a float32 [N, " + std::to_string(ChannelBlocks(C)) + ", H, W, " +
                                 std::to_string(kChannelBlock) + "] tensor, got " + x->Describe());
  const int64_t N = x->dim(0), plane = x->dim(2) * x->dim(3), Cb = x->dim(1);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, {N, C, x->dim(2), x->dim(3)}));
  const float* src = x->data<float>();
  float* dst = y.data<float>();
  ctx.ParallelFor(N * C, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nc = begin; nc < end; ++nc) {
      const int64_t n = nc / C, c = nc % C;
      const float* in = src + ((n * Cb + c / kChannelBlock) * plane) * kChannelBlock + c % kChannelBlock;
      float* out = dst + nc * plane;
      for (int64_t p = 0; p < plane; ++p) out[p] = in[p * kChannelBlock];
    }
  });
  return Status::Ok();
}

// ---- BlockedConv ---------------------------------------------------------------------

// input_layout: "blocked" (the default) or "nchw" (a stem conv's plain input).
Result<bool> NchwInputAttr(const Node& node) {
  NEE_ASSIGN_OR_RETURN(std::string layout, node.GetString("input_layout", "blocked"));
  if (layout != "blocked" && layout != "nchw")
    return InvalidModel(node.Describe() + ": input_layout must be \"blocked\" or \"nchw\", got \"" + layout + "\"");
  return layout == "nchw";
}

// output_layout: "blocked" (the default) or "nhwc" (channels last, for a reader that wants it).
Result<bool> NhwcOutputAttr(const Node& node) {
  NEE_ASSIGN_OR_RETURN(std::string layout, node.GetString("output_layout", "blocked"));
  if (layout != "blocked" && layout != "nhwc")
    return InvalidModel(node.Describe() + ": output_layout must be \"blocked\" or \"nhwc\", got \"" + layout + "\"");
  return layout == "nhwc";
}

// Kernel shape from the weights [M, C/group, KH, KW], when known.
bool KernelOfWeights(const Shape* w, std::vector<int64_t>* kernel) {
  if (!w || w->size() != 4 || !(*w)[2].known() || !(*w)[3].known()) return false;
  *kernel = {(*w)[2].value, (*w)[3].value};
  return true;
}

// out's H and W (dims 2 and 3) from the node's window over x's, where known;
// the kernel from the weights w [M, C / group, KH, KW] when their shape is.
Status InferWindowDims(const InferenceContext& ctx, const Shape& x, const Shape* w, Shape* out) {
  std::vector<int64_t> kernel;
  const bool have_kernel = KernelOfWeights(w, &kernel);
  if (!have_kernel && !ctx.node.HasAttr("kernel_shape")) return Status::Ok();
  NEE_ASSIGN_OR_RETURN(nn::WindowSpec spec, nn::ReadWindowSpec(ctx.node, 2, have_kernel ? &kernel : nullptr));
  if (spec.auto_pad != "NOTSET") return ctx.Error("takes explicit pads, not auto_pad " + spec.auto_pad);
  for (size_t d = 0; d < 2; ++d) {
    if (!x[2 + d].known()) continue;
    NEE_ASSIGN_OR_RETURN(int64_t o, nn::WindowOutputDim(ctx.node, spec, d, x[2 + d].value));
    (*out)[2 + d] = Dim::Known(o);
  }
  return Status::Ok();
}

Status InferBlockedConv(InferenceContext& ctx) {
  const std::string where = ctx.node.Describe() + ": ";
  NEE_ASSIGN_OR_RETURN(int64_t C, ChannelsAttr(ctx.node, where));
  NEE_RETURN_IF_ERROR(ReadFusedActivation(ctx.node).status());
  NEE_ASSIGN_OR_RETURN(const bool nchw, NchwInputAttr(ctx.node));
  NEE_ASSIGN_OR_RETURN(const bool nhwc, NhwcOutputAttr(ctx.node));
  NEE_ASSIGN_OR_RETURN(const Shape* x, FloatInputOfRank(ctx, 0, nchw ? 4 : 5));
  NEE_ASSIGN_OR_RETURN(const Shape* w, FloatInputOfRank(ctx, 1, 4));
  if (ctx.has_input(2)) NEE_RETURN_IF_ERROR(FloatInputOfRank(ctx, 2, 1).status());
  if (ctx.has_input(3)) NEE_RETURN_IF_ERROR(FloatInputOfRank(ctx, 3, nhwc ? 4 : 5).status());
  NEE_ASSIGN_OR_RETURN(int64_t group, ctx.node.GetInt("group", 1));
  if (group <= 0 || C % group != 0)
    return ctx.Error("group " + std::to_string(group) + " must be positive and divide the " + std::to_string(C) +
                     " input channels");
  if (x && (*x)[1].known() && (*x)[1].value != (nchw ? C : ChannelBlocks(C)))
    return ctx.InputError(0, "has " + (*x)[1].ToString() + (nchw ? " channels; expected " : " channel blocks; ") +
                                 std::to_string(C) +
                                 (nchw ? "" : " channels need " + std::to_string(ChannelBlocks(C))));
  if (w && (*w)[1].known() && (*w)[1].value * group != C)
    return ctx.InputError(1, "has " + (*w)[1].ToString() + " input channels per group; expected " +
                                 std::to_string(C / group));
  if (w && (*w)[0].known() && (*w)[0].value % group != 0)
    return ctx.InputError(1, "has " + (*w)[0].ToString() + " output channels, not a multiple of group " +
                                 std::to_string(group));
  const Dim M = w ? (*w)[0] : Dim::Unknown();
  Shape out{x ? (*x)[0] : Dim::Unknown(), BlocksOf(M), Dim::Unknown(), Dim::Unknown(), Dim::Known(kChannelBlock)};
  if (x) NEE_RETURN_IF_ERROR(InferWindowDims(ctx, *x, w, &out));
  if (nhwc) out = Shape{out[0], out[2], out[3], M};
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat, out);
  return Status::Ok();
}

Result<const Tensor*> FloatTensor(const KernelContext& ctx, size_t i, size_t rank) {
  NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(i));
  if (t->dtype() != DataType::kFloat || t->rank() != static_cast<int64_t>(rank))
    return ctx.InputError(i, "must be a " + std::to_string(rank) + "-D float32 tensor, got " + t->Describe());
  return t;
}

// The node's window (kernel_shape, strides, pads, dilations) over g's H x W
// for the weights w [M, C / group, KH, KW]: g's output size, kernel, strides,
// dilations and begin pads.
Status PlanWindow(const KernelContext& ctx, const Tensor& w, BlockedConvGeometry* g) {
  std::vector<int64_t> kernel = {w.dim(2), w.dim(3)};
  NEE_ASSIGN_OR_RETURN(nn::WindowSpec spec, nn::ReadWindowSpec(ctx.node(), 2, &kernel));
  if (spec.auto_pad != "NOTSET") return ctx.Error("takes explicit pads, not auto_pad " + spec.auto_pad);
  if (spec.kernel != kernel)
    return ctx.Error("kernel_shape " + DimsToString(spec.kernel) + " does not match the weights " +
                     DimsToString(w.dims()));
  NEE_ASSIGN_OR_RETURN(g->OH, nn::WindowOutputDim(ctx.node(), spec, 0, g->H));
  NEE_ASSIGN_OR_RETURN(g->OW, nn::WindowOutputDim(ctx.node(), spec, 1, g->W));
  g->KH = kernel[0], g->KW = kernel[1];
  g->sh = spec.strides[0], g->sw = spec.strides[1];
  g->dh = spec.dilations[0], g->dw = spec.dilations[1];
  g->pt = spec.pad_begin(0), g->pl = spec.pad_begin(1);
  return Status::Ok();
}

Status BlockedConvKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(BlockedConvGeometry g, PlanBlockedConv(ctx));
  g.z = ResidualApart(g, false);  // the reference sums each output over many steps
  BlockedConvReference(ctx, g);
  return Status::Ok();
}

}  // namespace

int BlockedConvOverwritableInput(const Node& node, const std::function<const Shape*(size_t)>& input_shape) {
  constexpr int kResidual = 3;
  if (node.domain != kNeeDomain || node.op_type != "BlockedConv" || node.inputs.size() <= kResidual ||
      node.inputs[kResidual].empty())
    return -1;
  std::vector<int64_t> kernel;
  if (!KernelOfWeights(input_shape(1), &kernel) || kernel != std::vector<int64_t>{1, 1}) return -1;
  Result<bool> nchw = NchwInputAttr(node), nhwc = NhwcOutputAttr(node);
  Result<int64_t> group = node.GetInt("group", 1);
  Result<nn::WindowSpec> spec = nn::ReadWindowSpec(node, 2, &kernel);
  Result<FusedActivation> act = ReadFusedActivation(node);
  if (!nchw.ok() || *nchw || !nhwc.ok() || *nhwc || !group.ok() || *group != 1 || !spec.ok() || !act.ok())
    return -1;
  if (spec->kernel != kernel || spec->auto_pad != "NOTSET" || spec->pads != std::vector<int64_t>{0, 0, 0, 0})
    return -1;
  using Kind = FusedActivation::Kind;
  return act->kind == Kind::kNone || act->kind == Kind::kRelu || act->kind == Kind::kClip ? kResidual : -1;
}

const float* ResidualApart(const BlockedConvGeometry& g, bool read_in_place) {
  if (!g.z || g.z != g.y || read_in_place) return g.z;
  int64_t count = 1;
  for (int64_t d : g.OutputDims()) count *= d;
  thread_local std::vector<float> apart;
  apart.assign(g.z, g.z + count);
  return apart.data();
}

Result<BlockedConvGeometry> PlanBlockedConv(KernelContext& ctx) {
  const Node& node = ctx.node();
  BlockedConvGeometry g;
  NEE_ASSIGN_OR_RETURN(g.C, ChannelsAttr(node, node.Describe() + ": "));
  NEE_ASSIGN_OR_RETURN(g.act, ReadFusedActivation(node));
  NEE_ASSIGN_OR_RETURN(g.group, node.GetInt("group", 1));
  NEE_ASSIGN_OR_RETURN(g.nchw_input, NchwInputAttr(node));
  NEE_ASSIGN_OR_RETURN(g.nhwc_output, NhwcOutputAttr(node));
  NEE_ASSIGN_OR_RETURN(const Tensor* x, FloatTensor(ctx, 0, g.nchw_input ? 4 : 5));
  NEE_ASSIGN_OR_RETURN(const Tensor* w, FloatTensor(ctx, 1, 4));
  g.N = x->dim(0);
  g.H = x->dim(2);
  g.W = x->dim(3);
  g.M = w->dim(0);
  if (g.nchw_input && x->dim(1) != g.C)
    return ctx.InputError(0, "must be [N, " + std::to_string(g.C) + ", H, W], got " + x->Describe());
  if (!g.nchw_input && (x->dim(1) != g.Cb() || x->dim(4) != kChannelBlock))
    return ctx.InputError(0, "must be [N, " + std::to_string(g.Cb()) + ", H, W, " + std::to_string(kChannelBlock) +
                                 "] for " + std::to_string(g.C) + " channels, got " + x->Describe());
  if (g.group <= 0 || g.C % g.group != 0 || g.M % g.group != 0 || w->dim(1) * g.group != g.C)
    return ctx.InputError(1, "of shape " + DimsToString(w->dims()) + " does not fit " + std::to_string(g.C) +
                                 " input channels in group " + std::to_string(g.group));
  NEE_RETURN_IF_ERROR(PlanWindow(ctx, *w, &g));
  if (ctx.has_input(2)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* b, FloatTensor(ctx, 2, 1));
    if (b->dim(0) != g.M) return ctx.InputError(2, "(B) must have " + std::to_string(g.M) + " values, got " + b->Describe());
    g.bias = b->data<float>();
  }
  const std::vector<int64_t> out_dims = g.OutputDims();
  if (ctx.has_input(3)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* z, FloatTensor(ctx, 3, out_dims.size()));
    if (z->dims() != out_dims)
      return ctx.InputError(3, "(Z) must have the output's shape " + DimsToString(out_dims) + ", got " + z->Describe());
    g.z = z->data<float>();
  }
  g.x = x->data<float>();
  g.w = w->data<float>();
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, out_dims));
  g.y = y.data<float>();
  return g;
}

void BlockedConvReference(const KernelContext& ctx, const BlockedConvGeometry& g) {
  const int64_t Cg = g.C / g.group, Mg = g.M / g.group, Cb = g.Cb(), Mb = g.Mb();
  const int64_t in_plane = g.H * g.W * kChannelBlock;
  // Where channel c of image n starts, and the step from pixel to pixel.
  const int64_t pixel_step = g.nchw_input ? 1 : kChannelBlock;
  auto channel_start = [&](int64_t n, int64_t c) {
    if (g.nchw_input) return g.x + (n * g.C + c) * g.H * g.W;
    return g.x + (n * Cb + c / kChannelBlock) * in_plane + c % kChannelBlock;
  };
  // Tasks by output block (eight channels of every pixel): disjoint outputs in either layout.
  ctx.ParallelFor(g.N * Mb, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nb = begin; nb < end; ++nb) {
      const int64_t n = nb / Mb, mb = nb % Mb;
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow)
          for (int64_t l = 0; l < kChannelBlock; ++l) {
            const int64_t m = mb * kChannelBlock + l, p = oh * g.OW + ow;
            if (m >= g.M) {
              if (!g.nhwc_output) g.y[g.OutputIndex(n, m, p)] = 0.f;  // a padding lane
              continue;
            }
            const int64_t at = g.OutputIndex(n, m, p);
            const int64_t c0 = m / Mg * Cg;
            double sum = 0;
            for (int64_t c = c0; c < c0 + Cg; ++c) {
              const float* x = channel_start(n, c);
              const float* w = g.w + (m * Cg + c - c0) * g.KH * g.KW;
              for (int64_t kh = 0; kh < g.KH; ++kh) {
                const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
                if (ih < 0 || ih >= g.H) continue;
                for (int64_t kw = 0; kw < g.KW; ++kw) {
                  const int64_t iw = ow * g.sw - g.pl + kw * g.dw;
                  if (iw < 0 || iw >= g.W) continue;
                  sum += static_cast<double>(x[(ih * g.W + iw) * pixel_step]) * w[kh * g.KW + kw];
                }
              }
            }
            float v = static_cast<float>(sum);
            if (g.bias) v += g.bias[m];
            if (g.z) v += g.z[at];
            g.y[at] = ApplyFusedActivation<float>(g.act, v);
          }
    }
  });
}

// ---- BlockedExpandDepthwise ------------------------------------------------------------

namespace {

// W [E, C, 1, 1], DW [E, 1, KH, KW] and the biases [E], as far as known.
Status CheckExpandDepthwiseWeights(const InferenceContext& ctx, int64_t C, const Shape* w, const Shape* b,
                                   const Shape* dw, const Shape* db) {
  const Dim E = w ? (*w)[0] : Dim::Unknown();
  if (E.known() && E.value <= 0)
    return ctx.InputError(1, "(W) must have at least one output channel (the depthwise conv's groups), got " +
                                 ShapeToString(*w));
  auto differs = [](const Dim& d, int64_t v) { return d.known() && d.value != v; };
  if (w && (differs((*w)[1], C) || differs((*w)[2], 1) || differs((*w)[3], 1)))
    return ctx.InputError(1, "(W) must be [E, " + std::to_string(C) + ", 1, 1], got " + ShapeToString(*w));
  if (dw && ((E.known() && differs((*dw)[0], E.value)) || differs((*dw)[1], 1)))
    return ctx.InputError(3, "(DW) must be [" + E.ToString() + ", 1, KH, KW], got " + ShapeToString(*dw));
  for (const auto& [i, bias] : {std::pair<size_t, const Shape*>{2, b}, {4, db}})
    if (bias && E.known() && differs((*bias)[0], E.value))
      return ctx.InputError(i, "must have " + E.ToString() + " values, got " + ShapeToString(*bias));
  return Status::Ok();
}

Status InferBlockedExpandDepthwise(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(int64_t C, ChannelsAttr(ctx.node, ctx.node.Describe() + ": "));
  NEE_RETURN_IF_ERROR(ReadFusedActivation(ctx.node, "expand_").status());
  NEE_RETURN_IF_ERROR(ReadFusedActivation(ctx.node).status());
  NEE_ASSIGN_OR_RETURN(const Shape* x, FloatInputOfRank(ctx, 0, 5));
  NEE_ASSIGN_OR_RETURN(const Shape* w, FloatInputOfRank(ctx, 1, 4));
  NEE_ASSIGN_OR_RETURN(const Shape* b, FloatInputOfRank(ctx, 2, 1));
  NEE_ASSIGN_OR_RETURN(const Shape* dw, FloatInputOfRank(ctx, 3, 4));
  NEE_ASSIGN_OR_RETURN(const Shape* db, FloatInputOfRank(ctx, 4, 1));
  NEE_RETURN_IF_ERROR(CheckExpandDepthwiseWeights(ctx, C, w, b, dw, db));
  if (x && (*x)[1].known() && (*x)[1].value != ChannelBlocks(C))
    return ctx.InputError(0, "has " + (*x)[1].ToString() + " channel blocks; " + std::to_string(C) +
                                 " channels need " + std::to_string(ChannelBlocks(C)));
  Shape out{x ? (*x)[0] : Dim::Unknown(), BlocksOf(w ? (*w)[0] : Dim::Unknown()), Dim::Unknown(), Dim::Unknown(),
            Dim::Known(kChannelBlock)};
  if (x) NEE_RETURN_IF_ERROR(InferWindowDims(ctx, *x, dw, &out));
  if (!ctx.has_input(5) && (ctx.has_input(6) || ctx.has_input(7)))
    return ctx.InputError(5, "(PW) must be given with PB or Z");
  if (ctx.has_input(5)) {  // the projection's channels
    NEE_RETURN_IF_ERROR(ReadFusedActivation(ctx.node, "project_").status());
    NEE_ASSIGN_OR_RETURN(const Shape* pw, FloatInputOfRank(ctx, 5, 4));
    if (!ctx.has_input(6)) return ctx.InputError(6, "(PB) must be given with PW");
    NEE_RETURN_IF_ERROR(FloatInputOfRank(ctx, 6, 1).status());
    if (ctx.has_input(7)) NEE_RETURN_IF_ERROR(FloatInputOfRank(ctx, 7, 5).status());
    out[1] = BlocksOf(pw ? (*pw)[0] : Dim::Unknown());
  }
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat, out);
  return Status::Ok();
}

// The projection (inputs PW [P, E, 1, 1], PB [P], Z [N, Pb, OH, OW, 8]?) over the depthwise conv's output.
Status PlanProjection(KernelContext& ctx, BlockedExpandDepthwiseGeometry* fused) {
  const BlockedConvGeometry& d = fused->depthwise;
  BlockedConvGeometry& p = fused->project;
  NEE_ASSIGN_OR_RETURN(p.act, ReadFusedActivation(ctx.node(), "project_"));
  NEE_ASSIGN_OR_RETURN(const Tensor* pw, FloatTensor(ctx, 5, 4));
  if (!ctx.has_input(6)) return ctx.InputError(6, "(PB) must be given with PW");
  NEE_ASSIGN_OR_RETURN(const Tensor* pb, FloatTensor(ctx, 6, 1));
  const int64_t P = pw->dim(0);
  if (P <= 0 || pw->dims() != std::vector<int64_t>{P, d.M, 1, 1})
    return ctx.InputError(5, "(PW) must be [P, " + std::to_string(d.M) + ", 1, 1] with P > 0, got " + pw->Describe());
  if (pb->dim(0) != P)
    return ctx.InputError(6, "(PB) must have " + std::to_string(P) + " values, got " + pb->Describe());
  p.N = d.N;
  p.C = d.M;
  p.M = P;
  p.H = p.OH = d.OH;
  p.W = p.OW = d.OW;
  p.KH = p.KW = 1;
  p.w = pw->data<float>();
  p.bias = pb->data<float>();
  if (ctx.has_input(7)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* z, FloatTensor(ctx, 7, 5));
    if (z->dims() != p.OutputDims())
      return ctx.InputError(7, "(Z) must have the output's shape " + DimsToString(p.OutputDims()) + ", got " +
                                   z->Describe());
    p.z = z->data<float>();
  }
  fused->projects = true;
  return Status::Ok();
}

Status BlockedExpandDepthwiseKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(BlockedExpandDepthwiseGeometry g, PlanBlockedExpandDepthwise(ctx));
  BlockedExpandDepthwiseReference(ctx, g);
  return Status::Ok();
}

}  // namespace

Result<BlockedExpandDepthwiseGeometry> PlanBlockedExpandDepthwise(KernelContext& ctx) {
  const Node& node = ctx.node();
  BlockedExpandDepthwiseGeometry fused;
  BlockedConvGeometry& e = fused.expand;
  BlockedConvGeometry& d = fused.depthwise;
  NEE_ASSIGN_OR_RETURN(e.C, ChannelsAttr(node, node.Describe() + ": "));
  NEE_ASSIGN_OR_RETURN(e.act, ReadFusedActivation(node, "expand_"));
  NEE_ASSIGN_OR_RETURN(d.act, ReadFusedActivation(node));
  NEE_ASSIGN_OR_RETURN(const Tensor* x, FloatTensor(ctx, 0, 5));
  NEE_ASSIGN_OR_RETURN(const Tensor* w, FloatTensor(ctx, 1, 4));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, FloatTensor(ctx, 2, 1));
  NEE_ASSIGN_OR_RETURN(const Tensor* dw, FloatTensor(ctx, 3, 4));
  NEE_ASSIGN_OR_RETURN(const Tensor* db, FloatTensor(ctx, 4, 1));
  if (x->dim(1) != e.Cb() || x->dim(4) != kChannelBlock)
    return ctx.InputError(0, "must be [N, " + std::to_string(e.Cb()) + ", H, W, " + std::to_string(kChannelBlock) +
                                 "] for " + std::to_string(e.C) + " channels, got " + x->Describe());
  const int64_t E = w->dim(0);
  if (E <= 0)
    return ctx.InputError(1, "(W) must have at least one output channel (the depthwise conv's groups), got " +
                                 w->Describe());
  if (w->dims() != std::vector<int64_t>{E, e.C, 1, 1})
    return ctx.InputError(1, "(W) must be [E, " + std::to_string(e.C) + ", 1, 1], got " + w->Describe());
  if (dw->dim(0) != E || dw->dim(1) != 1)
    return ctx.InputError(3, "(DW) must be [" + std::to_string(E) + ", 1, KH, KW], got " + dw->Describe());
  if (b->dim(0) != E) return ctx.InputError(2, "(B) must have " + std::to_string(E) + " values, got " + b->Describe());
  if (db->dim(0) != E)
    return ctx.InputError(4, "(DB) must have " + std::to_string(E) + " values, got " + db->Describe());
  e.N = d.N = x->dim(0);
  e.H = e.OH = d.H = x->dim(2);
  e.W = e.OW = d.W = x->dim(3);
  e.M = d.C = d.M = d.group = E;
  e.KH = e.KW = 1;
  NEE_RETURN_IF_ERROR(PlanWindow(ctx, *dw, &d));
  e.x = x->data<float>();
  e.w = w->data<float>();
  e.bias = b->data<float>();
  d.w = dw->data<float>();
  d.bias = db->data<float>();
  if (!ctx.has_input(5) && (ctx.has_input(6) || ctx.has_input(7)))
    return ctx.InputError(5, "(PW) must be given with PB or Z");
  if (ctx.has_input(5)) NEE_RETURN_IF_ERROR(PlanProjection(ctx, &fused));
  BlockedConvGeometry& last = fused.projects ? fused.project : d;
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, last.OutputDims()));
  last.y = y.data<float>();
  return fused;
}

void BlockedExpandDepthwiseReference(const KernelContext& ctx, BlockedExpandDepthwiseGeometry g) {
  auto elements = [](const BlockedConvGeometry& conv) {
    const std::vector<int64_t> dims = conv.OutputDims();
    return static_cast<size_t>(dims[0] * dims[1] * dims[2] * dims[3] * dims[4]);
  };
  std::vector<float> expanded(elements(g.expand)), filtered(g.projects ? elements(g.depthwise) : 0);
  g.expand.y = expanded.data();
  g.depthwise.x = expanded.data();
  BlockedConvReference(ctx, g.expand);
  if (g.projects) {
    g.depthwise.y = filtered.data();
    g.project.x = filtered.data();
  }
  BlockedConvReference(ctx, g.depthwise);
  if (g.projects) BlockedConvReference(ctx, g.project);
}

// ---- BlockedMaxPool ------------------------------------------------------------------

namespace {

// The window of a BlockedMaxPool: 2-D, explicit pads, no dilation.
Result<nn::WindowSpec> PoolWindow(const Node& node) {
  NEE_ASSIGN_OR_RETURN(nn::WindowSpec spec, nn::ReadWindowSpec(node, 2, nullptr));
  if (spec.auto_pad != "NOTSET" || spec.ceil_mode || spec.dilations != std::vector<int64_t>{1, 1})
    return InvalidModel(node.Describe() + ": takes explicit pads, no dilation or ceil_mode");
  return spec;
}

Status InferBlockedMaxPool(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(int64_t C, ChannelsAttr(ctx.node, ctx.node.Describe() + ": "));
  NEE_ASSIGN_OR_RETURN(nn::WindowSpec spec, PoolWindow(ctx.node));
  NEE_ASSIGN_OR_RETURN(const Shape* x, BlockedInputOf(ctx, C));
  if (!x) return Status::Ok();
  Shape out{(*x)[0], (*x)[1], Dim::Unknown(), Dim::Unknown(), Dim::Known(kChannelBlock)};
  for (size_t d = 0; d < 2; ++d) {
    if (!(*x)[2 + d].known()) continue;
    NEE_ASSIGN_OR_RETURN(int64_t o, nn::WindowOutputDim(ctx.node, spec, d, (*x)[2 + d].value, false));
    out[2 + d] = Dim::Known(o);
  }
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat, out);
  return Status::Ok();
}

Status BlockedMaxPoolKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(BlockedPoolGeometry g, PlanBlockedMaxPool(ctx));
  BlockedMaxPoolReference(ctx, g);
  return Status::Ok();
}

}  // namespace

Result<BlockedPoolGeometry> PlanBlockedMaxPool(KernelContext& ctx) {
  const Node& node = ctx.node();
  BlockedPoolGeometry g;
  NEE_ASSIGN_OR_RETURN(g.C, ChannelsAttr(node, node.Describe() + ": "));
  NEE_ASSIGN_OR_RETURN(nn::WindowSpec spec, PoolWindow(node));
  NEE_ASSIGN_OR_RETURN(const Tensor* x, FloatTensor(ctx, 0, 5));
  if (x->dim(1) != g.Cb() || x->dim(4) != kChannelBlock)
    return ctx.InputError(0, "must be [N, " + std::to_string(g.Cb()) + ", H, W, " + std::to_string(kChannelBlock) +
                                 "] for " + std::to_string(g.C) + " channels, got " + x->Describe());
  g.N = x->dim(0), g.H = x->dim(2), g.W = x->dim(3);
  NEE_ASSIGN_OR_RETURN(g.OH, nn::WindowOutputDim(node, spec, 0, g.H, false));
  NEE_ASSIGN_OR_RETURN(g.OW, nn::WindowOutputDim(node, spec, 1, g.W, false));
  g.KH = spec.kernel[0], g.KW = spec.kernel[1];
  g.sh = spec.strides[0], g.sw = spec.strides[1];
  g.pt = spec.pad_begin(0), g.pl = spec.pad_begin(1);
  g.x = x->data<float>();
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat,
                                                                {g.N, g.Cb(), g.OH, g.OW, kChannelBlock}));
  g.y = y.data<float>();
  return g;
}

void BlockedMaxPoolReference(const KernelContext& ctx, const BlockedPoolGeometry& g) {
  const int64_t in_plane = g.H * g.W * kChannelBlock, out_plane = g.OH * g.OW * kChannelBlock;
  ctx.ParallelFor(g.N * g.Cb(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t nb = begin; nb < end; ++nb) {
      const float* x = g.x + nb * in_plane;
      float* y = g.y + nb * out_plane;
      const int64_t c0 = nb % g.Cb() * kChannelBlock;
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow)
          for (int64_t l = 0; l < kChannelBlock; ++l) {
            float best = 0.f;
            bool any = false;
            for (int64_t kh = 0; kh < g.KH; ++kh) {
              const int64_t ih = oh * g.sh - g.pt + kh;
              if (ih < 0 || ih >= g.H) continue;
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                const int64_t iw = ow * g.sw - g.pl + kw;
                if (iw < 0 || iw >= g.W) continue;
                const float v = x[(ih * g.W + iw) * kChannelBlock + l];
                if (!any || v > best) best = v;
                any = true;
              }
            }
            y[(oh * g.OW + ow) * kChannelBlock + l] = c0 + l < g.C ? best : 0.f;
          }
    }
  });
}

// ---- BlockedGlobalAveragePool ---------------------------------------------------------

namespace {

Status InferBlockedGlobalAveragePool(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(int64_t C, ChannelsAttr(ctx.node, ctx.node.Describe() + ": "));
  NEE_ASSIGN_OR_RETURN(const Shape* x, BlockedInputOf(ctx, C));
  if (!x) return Status::Ok();
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat, Shape{(*x)[0], Dim::Known(C), Dim::Known(1), Dim::Known(1)});
  return Status::Ok();
}

// The GlobalAveragePool reference's arithmetic on each channel of the blocked input.
Status BlockedGlobalAveragePoolKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(BlockedGlobalPoolGeometry g, PlanBlockedGlobalAveragePool(ctx));
  ctx.ParallelFor(g.N * g.C, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nc = begin; nc < end; ++nc) {
      const int64_t n = nc / g.C, c = nc % g.C;
      const float* x = g.x + ((n * g.Cb() + c / kChannelBlock) * g.pixels) * kChannelBlock + c % kChannelBlock;
      float sum = 0.f;
      for (int64_t p = 0; p < g.pixels; ++p) sum += x[p * kChannelBlock];
      g.y[nc] = g.pixels > 0 ? sum / static_cast<float>(g.pixels) : 0.f;
    }
  });
  return Status::Ok();
}

}  // namespace

Result<BlockedGlobalPoolGeometry> PlanBlockedGlobalAveragePool(KernelContext& ctx) {
  BlockedGlobalPoolGeometry g;
  NEE_ASSIGN_OR_RETURN(g.C, ChannelsAttr(ctx.node(), ctx.node().Describe() + ": "));
  NEE_ASSIGN_OR_RETURN(const Tensor* x, FloatTensor(ctx, 0, 5));
  if (x->dim(1) != g.Cb() || x->dim(4) != kChannelBlock)
    return ctx.InputError(0, "must be [N, " + std::to_string(g.Cb()) + ", H, W, " + std::to_string(kChannelBlock) +
                                 "] for " + std::to_string(g.C) + " channels, got " + x->Describe());
  g.N = x->dim(0), g.pixels = x->dim(2) * x->dim(3);
  g.x = x->data<float>();
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, {g.N, g.C, 1, 1}));
  g.y = y.data<float>();
  return g;
}

void RegisterBlockedConvOps(OpRegistry& registry) {
  registry.RegisterVersions(kNeeDomain, "BlockedGlobalAveragePool", {1}, InferBlockedGlobalAveragePool,
                            BlockedGlobalAveragePoolKernel);
  registry.RegisterVersions(kNeeDomain, "BlockedMaxPool", {1}, InferBlockedMaxPool, BlockedMaxPoolKernel);
  registry.RegisterVersions(kNeeDomain, "ToBlocked", {1}, InferToBlocked, ToBlockedKernel);
  registry.RegisterVersions(kNeeDomain, "FromBlocked", {1}, InferFromBlocked, FromBlockedKernel);
  registry.RegisterVersions(kNeeDomain, "BlockedConv", {1}, InferBlockedConv, BlockedConvKernel);
  registry.RegisterVersions(kNeeDomain, "BlockedExpandDepthwise", {1}, InferBlockedExpandDepthwise,
                            BlockedExpandDepthwiseKernel);
}

}  // namespace nee
