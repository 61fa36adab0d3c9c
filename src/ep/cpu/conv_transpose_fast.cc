// ConvTranspose on float32 for the CPU provider, NCHW, 1-D, 2-D and 3-D.
//
// Per (image, group): col = W_g^T x X_g by SGEMM (W read transposed through
// its strides, no copy), then col2im: each output channel plane starts at its
// bias and adds the col rows of its kernel taps, taps in order, which is the
// reference kernel's order (ops/conv.cc). Each plane is written by one task,
// so results do not depend on the thread count.
//
// Where every output element takes exactly one tap (kernel = stride, no
// padding or dilation: the 2x2 stride-2 upsampling of U-Nets and of PP-OCR's
// DB head), bands of input rows are multiplied into a col block that stays in
// cache and written straight out, bias plus the tap's sum: the same bits,
// without the generic path's bias fill, its read-modify-write col2im and a
// col buffer as large as the output in memory (PP-OCRv5's detector head,
// 24 -> 24 channels onto 272 x 368: 4.1 -> 2.5 ms at 1 thread; its 24 -> 1 after
// it 2.0 -> 1.2).
//
// The output size and padding rules (output_shape, output_padding, auto_pad,
// pads) mirror ResolveConvTranspose in ops/conv.cc; tests/unit/ep/
// conv_transpose_fast_test.cc checks the two agree over those attributes.
// Anything unusual goes to the reference kernel, which also reports errors.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ep/cpu/conv_common.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"
#include "ops/op_util.h"

namespace nee::cpu {

namespace {

constexpr int kDims = kSpatialDims;

struct TransposeShape {
  int64_t N = 0, C = 0, M = 0, group = 1, Cg = 0, Mg = 0;
  int64_t in[kDims] = {1, 1, 1}, out[kDims] = {1, 1, 1};
  int64_t kernel[kDims] = {1, 1, 1}, stride[kDims] = {1, 1, 1}, dilation[kDims] = {1, 1, 1};
  int64_t pad[kDims] = {0, 0, 0};  // begin pads; may be negative (output_shape beyond the full result)
  int64_t in_size = 1, out_size = 1, kernel_size = 1;
  int64_t rows() const { return Mg * kernel_size; }  // col rows per group
};

int64_t FloorDiv2(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

// Output dims and begin pads per spatial dim, as the reference resolves them;
// false for anything the reference would reject (it then reports it).
bool ResolveOutput(const Node& node, size_t n, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel,
                   std::vector<int64_t>& out, std::vector<int64_t>& pad_begin, std::vector<int64_t>& strides,
                   std::vector<int64_t>& dilations) {
  auto strides_or = node.GetInts("strides", std::vector<int64_t>(n, 1));
  auto dilations_or = node.GetInts("dilations", std::vector<int64_t>(n, 1));
  auto out_pad_or = node.GetInts("output_padding", std::vector<int64_t>(n, 0));
  auto out_shape_or = node.GetInts("output_shape", {});
  auto auto_pad_or = node.GetString("auto_pad", "NOTSET");
  auto pads_or = node.GetInts("pads", std::vector<int64_t>(2 * n, 0));
  if (!strides_or.ok() || !dilations_or.ok() || !out_pad_or.ok() || !out_shape_or.ok() || !auto_pad_or.ok() ||
      !pads_or.ok())
    return false;
  strides = strides_or.value();
  dilations = dilations_or.value();
  std::vector<int64_t> out_pad = out_pad_or.value(), out_shape = out_shape_or.value(), pads = pads_or.value();
  const std::string auto_pad = auto_pad_or.value();
  const bool has_pads = node.HasAttr("pads");
  if (strides.size() != n || dilations.size() != n || pads.size() != 2 * n) return false;
  if (out_pad.size() == 2 * n) out_pad.resize(n);  // some exporters write begin+end
  if (out_pad.size() != n) return false;
  if (out_shape.size() == n + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  if (!out_shape.empty() && out_shape.size() != n) return false;
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") return false;
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  out.assign(n, 0);
  pad_begin.assign(n, 0);
  for (size_t d = 0; d < n; ++d) {
    if (kernel[d] <= 0 || strides[d] <= 0 || dilations[d] <= 0) return false;
    constexpr int64_t kMax = int64_t{1} << 31;
    if (kernel[d] > kMax || strides[d] > kMax || dilations[d] > kMax || pads[d] > kMax || pads[n + d] > kMax ||
        out_pad[d] > kMax || (!out_shape.empty() && (out_shape[d] < 0 || out_shape[d] > kMax)))
      return false;
    if (out_pad[d] < 0 || pads[d] < 0 || pads[n + d] < 0) return false;
    if (auto_pad == "VALID") pads[d] = pads[n + d] = 0;
    const int64_t dk = (kernel[d] - 1) * dilations[d] + 1;
    const int64_t full = strides[d] * (in[d] - 1) + out_pad[d] + dk;
    if (!out_shape.empty() || (same && !has_pads)) {
      const int64_t target = out_shape.empty() ? in[d] * strides[d] : out_shape[d];
      const int64_t total = full - target;
      if (!out_shape.empty() && total < 0) {
        pads[d] = 0;  // the extra positions come after the full result
      } else if (auto_pad == "SAME_UPPER") {
        pads[d] = FloorDiv2(total);
      } else {
        pads[d] = total - FloorDiv2(total);
      }
      out[d] = target;
    } else {
      out[d] = full - pads[d] - pads[n + d];
    }
    if (out[d] < 0) return false;
    pad_begin[d] = pads[d];
  }
  return true;
}

bool PlanFastTranspose(const KernelContext& ctx, const Tensor& x, const Tensor& w, const Tensor* b,
                       TransposeShape& s) {
  if (x.dtype() != DataType::kFloat || w.dtype() != DataType::kFloat) return false;
  if (x.rank() < 3 || x.rank() > 2 + kDims || w.rank() != x.rank()) return false;
  const size_t n = static_cast<size_t>(x.rank() - 2);
  auto group = ctx.node().GetInt("group", 1);
  if (!group.ok() || group.value() <= 0) return false;
  s.group = group.value();
  s.N = x.dim(0);
  s.C = x.dim(1);
  if (w.dim(0) != s.C || s.C % s.group != 0) return false;
  s.Cg = s.C / s.group;
  s.Mg = w.dim(1);
  s.M = s.Mg * s.group;
  std::vector<int64_t> kernel(w.dims().begin() + 2, w.dims().end());
  if (ctx.node().HasAttr("kernel_shape")) {
    auto k = ctx.node().GetInts("kernel_shape");
    if (!k.ok() || k.value() != kernel) return false;
  }
  if (b && (b->dtype() != DataType::kFloat || b->rank() != 1 || b->num_elements() != s.M)) return false;
  std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end()), out, pad_begin, strides, dilations;
  if (!ResolveOutput(ctx.node(), n, in, kernel, out, pad_begin, strides, dilations)) return false;
  const int first = kDims - static_cast<int>(n);
  for (size_t d = 0; d < n; ++d) {
    const int e = first + static_cast<int>(d);
    s.in[e] = in[d];
    s.out[e] = out[d];
    s.kernel[e] = kernel[d];
    s.stride[e] = strides[d];
    s.dilation[e] = dilations[d];
    s.pad[e] = pad_begin[d];
  }
  for (int d = 0; d < kDims; ++d) {
    s.in_size *= s.in[d];
    s.out_size *= s.out[d];
    s.kernel_size *= s.kernel[d];
  }
  // The col buffer (rows x in_size per unit) must stay reasonable; the
  // reference applies its own limit and reports it.
  const double col = static_cast<double>(s.rows()) * static_cast<double>(s.in_size);
  return s.N > 0 && s.Cg > 0 && s.Mg > 0 && s.in_size > 0 && s.out_size > 0 && col * 4 <= double{1 << 30};
}

// Input positions i in [0, in) whose output coordinate i*stride + offset lies
// in [0, out): the range [lo, hi).
void ValidInputs(int64_t in, int64_t out, int64_t stride, int64_t offset, int64_t& lo, int64_t& hi) {
  lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int64_t top = out - 1 - offset;  // i*stride <= top
  hi = top < 0 ? 0 : top / stride + 1;
  lo = std::min(lo, in);
  hi = std::clamp(hi, lo, in);
}

// Adds the col rows of output channel m (one per kernel tap, in tap order)
// into its output plane.
void Col2ImPlane(const TransposeShape& s, const float* col, int64_t m, float* plane) {
  const int64_t KH = s.kernel[1], KW = s.kernel[2];
  for (int64_t t = 0; t < s.kernel_size; ++t) {
    const int64_t kd = t / (KH * KW), kh = t / KW % KH, kw = t % KW;
    const float* row = col + (m * s.kernel_size + t) * s.in_size;
    const int64_t w_offset = kw * s.dilation[2] - s.pad[2];
    int64_t w_lo, w_hi;
    ValidInputs(s.in[2], s.out[2], s.stride[2], w_offset, w_lo, w_hi);
    if (w_lo >= w_hi) continue;
    for (int64_t id = 0; id < s.in[0]; ++id) {
      const int64_t od = id * s.stride[0] - s.pad[0] + kd * s.dilation[0];
      if (od < 0 || od >= s.out[0]) continue;
      for (int64_t ih = 0; ih < s.in[1]; ++ih) {
        const int64_t oh = ih * s.stride[1] - s.pad[1] + kh * s.dilation[1];
        if (oh < 0 || oh >= s.out[1]) continue;
        const float* __restrict src = row + (id * s.in[1] + ih) * s.in[2];
        float* __restrict dst = plane + (od * s.out[1] + oh) * s.out[2];  // dst[iw*stride + w_offset]
        if (s.stride[2] == 1) {
          for (int64_t iw = w_lo; iw < w_hi; ++iw) dst[iw + w_offset] += src[iw];
        } else {
          for (int64_t iw = w_lo; iw < w_hi; ++iw) dst[iw * s.stride[2] + w_offset] += src[iw];
        }
      }
    }
  }
}

// Whether each output element takes exactly one tap (1-D or 2-D): kernel =
// stride, no dilation or padding, and the output exactly in * stride.
bool OneTapPerOutput(const TransposeShape& s) {
  if (s.in[0] != 1 || s.kernel[0] != 1) return false;
  for (int d = 1; d < kDims; ++d)
    if (s.kernel[d] != s.stride[d] || s.dilation[d] != 1 || s.pad[d] != 0 || s.out[d] != s.in[d] * s.stride[d])
      return false;
  return true;
}

// A band's col block: about this many bytes, so that it is still in L2 when written out.
constexpr int64_t kBandColBytes = 256 * 1024;

// One (image, group) where OneTapPerOutput: per band of input rows, col =
// W_g^T x X_band by SGEMM (each element the same sum as the whole unit's
// SGEMM computes), then each output row from its tap rows: out[oh = ih * KH
// + kh][iw * KW + kw] = bias + col[m, kh, kw][ih, iw], as the generic path's
// bias fill and single add give it. Bands in parallel when `parallel`.
void TransposeUnitOneTap(const KernelContext& ctx, const TransposeShape& s, const float* x, const float* w,
                         const float* bias, float* y, int64_t unit, bool parallel) {
  const int64_t n = unit / s.group, g = unit % s.group, rows = s.rows();
  const int64_t H = s.in[1], W = s.in[2], KH = s.kernel[1], KW = s.kernel[2], OW = s.out[2];
  const int64_t band = std::clamp<int64_t>(kBandColBytes / (rows * W * static_cast<int64_t>(sizeof(float))), 1, H);
  const int64_t bands = (H + band - 1) / band;
  const MatrixView w_transposed{w + g * s.Cg * rows, 1, rows};
  const float* x_g = x + (n * s.C + g * s.Cg) * s.in_size;
  auto run_band = [&](int64_t b) {
    const int64_t ih0 = b * band, ih1 = std::min(H, ih0 + band), px = (ih1 - ih0) * W;
    float* col = ThreadScratch(static_cast<size_t>(rows * band * W));
    Sgemm(rows, px, s.Cg, 1.f, w_transposed, MatrixView{x_g + ih0 * W, s.in_size, 1}, 0.f, col, px, nullptr);
    for (int64_t m = 0; m < s.Mg; ++m) {
      const int64_t oc = g * s.Mg + m;
      const float base = bias ? bias[oc] : 0.f;
      float* plane = y + (n * s.M + oc) * s.out_size;
      for (int64_t ih = ih0; ih < ih1; ++ih)
        for (int64_t kh = 0; kh < KH; ++kh) {
          float* __restrict dst = plane + (ih * KH + kh) * OW;
          const float* taps = col + (m * KH + kh) * KW * px + (ih - ih0) * W;  // tap kw's row at + kw * px
          if (KW == 2) {
            const float* __restrict t0 = taps;
            const float* __restrict t1 = taps + px;
            for (int64_t iw = 0; iw < W; ++iw) dst[2 * iw] = base + t0[iw], dst[2 * iw + 1] = base + t1[iw];
          } else {
            for (int64_t iw = 0; iw < W; ++iw)
              for (int64_t kw = 0; kw < KW; ++kw) dst[iw * KW + kw] = base + taps[kw * px + iw];
          }
        }
    }
  };
  if (parallel) {
    ParallelTasks(ctx, bands, run_band);
  } else {
    for (int64_t b = 0; b < bands; ++b) run_band(b);
  }
}

// One (image, group): SGEMM into `col`, then col2im. `pool` (may be null)
// parallelizes inside.
void TransposeUnit(const KernelContext& ctx, const TransposeShape& s, const float* x, const float* w,
                   const float* bias, float* y, int64_t unit, float* col, ThreadPool* pool) {
  const int64_t n = unit / s.group, g = unit % s.group;
  const int64_t rows = s.rows();
  // col[r, p] = sum_c W[c, r] * X[c, p] over the group's input channels.
  const MatrixView w_transposed{w + g * s.Cg * rows, 1, rows};
  const MatrixView x_g{x + (n * s.C + g * s.Cg) * s.in_size, s.in_size, 1};
  Sgemm(rows, s.in_size, s.Cg, 1.f, w_transposed, x_g, 0.f, col, s.in_size, pool);
  auto plane = [&](int64_t m) {
    const int64_t oc = g * s.Mg + m;
    float* out = y + (n * s.M + oc) * s.out_size;
    std::fill(out, out + s.out_size, bias ? bias[oc] : 0.f);
    Col2ImPlane(s, col, m, out);
  };
  if (pool) {
    ParallelTasks(ctx, s.Mg, plane);
  } else {
    for (int64_t m = 0; m < s.Mg; ++m) plane(m);
  }
}

}  // namespace

Status ConvTransposeFloat(KernelContext& ctx) {
  ConvOperands in;
  NEE_ASSIGN_OR_RETURN(bool usable, ReadConvOperands(ctx, &in));
  TransposeShape s;
  if (!usable || !PlanFastTranspose(ctx, *in.x, *in.w, in.bias, s)) return RunReference(ctx);
  const Tensor *x = in.x, *w = in.w, *b = in.bias;
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, DataType::kFloat, ConvOutputDims(s, x->rank() - 2)));
  const float* xp = x->data<float>();
  const float* wp = w->data<float>();
  const float* bp = b ? b->data<float>() : nullptr;
  float* yp = out.data<float>();
  const int threads = NumThreads(ctx);
  const int64_t units = s.N * s.group;
  const size_t col_size = static_cast<size_t>(s.rows() * s.in_size);
  if (OneTapPerOutput(s)) {
    const bool across_units = threads > 1 && units >= 2 * threads;
    if (across_units)
      ParallelTasks(ctx, units, [&](int64_t u) { TransposeUnitOneTap(ctx, s, xp, wp, bp, yp, u, false); });
    else
      for (int64_t u = 0; u < units; ++u) TransposeUnitOneTap(ctx, s, xp, wp, bp, yp, u, threads > 1);
  } else if (threads > 1 && units >= 2 * threads) {
    ParallelTasks(ctx, units,
                  [&](int64_t u) { TransposeUnit(ctx, s, xp, wp, bp, yp, u, ThreadScratch(col_size), nullptr); });
  } else {
    float* col = ThreadScratch(col_size);
    for (int64_t u = 0; u < units; ++u) TransposeUnit(ctx, s, xp, wp, bp, yp, u, col, threads > 1 ? ctx.pool() : nullptr);
  }
  return Status::Ok();
}

}  // namespace nee::cpu
