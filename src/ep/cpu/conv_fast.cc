// Conv on float32 for the CPU provider, NCHW, 1-D, 2-D and 3-D.
//
// Strategies, chosen per node from its geometry:
//  - pointwise (1x1 kernel, stride 1, no padding): the input of each (image,
//    group) already is the GEMM's B matrix, so Y_g = W_g x X_g is one SGEMM;
//  - depthwise (one input channel per group): with AVX-512 and one output
//    channel per group, sixteen channels per vector (depthwise_blocked.cc);
//    otherwise a direct sliding-window kernel over each channel plane,
//    vectorized along output rows (depthwise_padded.cc);
//  - several images with few output pixels each (a batch of 1-D windows):
//    the im2col columns of a chunk of images side by side in one SGEMM, the
//    result scattered back per image (conv_batched.cc);
//  - 3x3 stride-1 single-group convs, on AVX-512 or AVX2: Winograd
//    F(2x2, 3x3) (conv_winograd.cc), 2.25x fewer multiplies;
//  - on AVX-512, every single-group pointwise conv: tiles of 8 output
//    channels x 48 pixels, the pixels in vectors, the input read in place,
//    finished in registers (conv_pointwise_avx512.cc);
//  - on AVX2, pointwise convs over at most 256 input channels (512 with at
//    least a quarter as many outputs) with many pixels: tiles of 4 output
//    channels x 24 pixels, the pixels in vectors, finished in registers
//    (conv_pointwise_small.cc);
//  - on AVX2, other single-group 2-D k x k convs with stride 1 or 2, and
//    deep pointwise convs on small images or with few outputs: output pixels
//    x channel vectors, the input broadcast where it lies (conv_pixel_gemm.cc);
//  - other single-group 2-D convs with stride 1 or 2, where SGEMM reads B in
//    place (AVX-512): SGEMM over windows of a padded copy of the input
//    (conv_indirect.cc), with no im2col matrix;
//  - everything else: im2col + SGEMM (sgemm.cc), the im2col rows written
//    straight into SGEMM's packed B panels (a PackBFn), so the im2col
//    matrix is never materialized; output columns are split into tiles that
//    are the parallel tasks.
// In a session, constant weights are packed as SGEMM's A once (PreparedCache).
//
// Determinism: every output element is computed by exactly one task, and its
// sum runs in an order fixed by the geometry alone (SGEMM's own guarantee for
// the GEMM paths, the tap order for depthwise). Which strategy parallelizes
// where depends on the thread count, but no arithmetic does, so results are
// bitwise identical for any thread count.
//
// Shapes and attributes are read with the same helpers (ops/nn_util.h) the
// reference kernel uses, so both always agree on output sizes and padding.
// Anything unusual (other types, invalid models, empty tensors) goes to the
// reference kernel, which also produces the error messages.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "ep/cpu/conv_batched.h"
#include "ep/cpu/conv_common.h"
#include "ep/cpu/conv_fast_internal.h"
#include "ep/cpu/conv_indirect.h"
#include "ep/cpu/conv_pixel_gemm.h"
#include "ep/cpu/conv_pointwise_avx512.h"
#include "ep/cpu/conv_pointwise_small.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/conv_winograd.h"
#include "ep/cpu/depthwise_blocked.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"
#include "ops/nn_util.h"

#if defined(__x86_64__) || defined(__i386__)
#include "ep/cpu/simd_x86.h"
#define NEE_CONV_X86 1
#endif

namespace nee::cpu {

// dst[i] = src[2 * i] for i in [0, n), reading nothing past src[2n - 2].
#ifdef NEE_CONV_X86
static __attribute__((target("avx512f"))) void CopyEvensAvx512(const float* src, float* dst, int64_t n) {
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  for (int64_t i = 0; i < n; i += 16) {
    const int64_t k = std::min<int64_t>(16, n - i), floats = 2 * k - 1;  // src floats this chunk needs
    const auto lanes = [](int64_t count) {
      return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << std::max<int64_t>(count, 0)) - 1u);
    };
    const __m512 lo = _mm512_maskz_loadu_ps(lanes(floats), src + 2 * i);
    const __m512 hi = _mm512_maskz_loadu_ps(lanes(floats - 16), src + 2 * i + 16);
    _mm512_mask_storeu_ps(dst + i, lanes(k), _mm512_permutex2var_ps(lo, evens, hi));
  }
}

// Eight at a time with plain loads while sixteen source floats are there to
// read; the rest one by one.
static __attribute__((target("avx2"))) void CopyEvensAvx2(const float* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n && 2 * i + 16 <= 2 * n - 1; i += 8) {
    const __m256 lo = _mm256_loadu_ps(src + 2 * i), hi = _mm256_loadu_ps(src + 2 * i + 8);
    // shuffle_ps picks within 128-bit halves; then the 64-bit pairs go in order.
    const __m256 evens = _mm256_shuffle_ps(lo, hi, 0x88);
    _mm256_storeu_ps(dst + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(evens), 0xD8)));
  }
  for (; i < n; ++i) dst[i] = src[2 * i];
}
#endif

void CopyEvens(const float* __restrict src, float* __restrict dst, int64_t n) {
#ifdef NEE_CONV_X86
  if (n >= 8 && SgemmActiveIsa() == SgemmIsa::kAvx512) return CopyEvensAvx512(src, dst, n);
  if (n >= 9 && SgemmActiveIsa() == SgemmIsa::kAvx2) return CopyEvensAvx2(src, dst, n);
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = src[2 * i];
}

namespace {

using namespace conv_fast;  // NOLINT: the geometry and depthwise kernel shared with depthwise_padded.cc

// Output positions o in [0, out) whose input coordinate
// o*stride - pad + tap*dilation lies inside [0, in): the range [lo, hi).
struct ValidRange {
  int64_t lo, hi;
};
ValidRange ValidOutputs(int64_t in, int64_t out, int64_t stride, int64_t pad, int64_t offset_of_tap) {
  const int64_t shift = pad - offset_of_tap;  // o*stride >= shift  and  o*stride <= in - 1 + shift
  int64_t lo = shift <= 0 ? 0 : (shift + stride - 1) / stride;
  const int64_t top = in - 1 + shift;
  int64_t hi = top < 0 ? 0 : top / stride + 1;
  lo = std::min(lo, out);
  hi = std::clamp(hi, lo, out);
  return {lo, hi};
}

// Fills in the geometry, or returns false when the reference kernel should
// handle the node (other types or ranks, invalid inputs, empty tensors).
bool PlanFastConv(const KernelContext& ctx, const Tensor& x, const Tensor& w, const Tensor* b, ConvShape& s) {
  if (x.dtype() != DataType::kFloat || w.dtype() != DataType::kFloat) return false;
  if (x.rank() < 3 || x.rank() > 2 + kDims || w.rank() != x.rank()) return false;
  const size_t n = static_cast<size_t>(x.rank() - 2);
  auto group = ctx.node().GetInt("group", 1);
  if (!group.ok() || group.value() <= 0) return false;
  s.group = group.value();
  s.N = x.dim(0);
  s.C = x.dim(1);
  s.M = w.dim(0);
  s.Cg = w.dim(1);
  if (s.C != s.Cg * s.group || s.M % s.group != 0) return false;
  s.Mg = s.M / s.group;
  if (b && (b->dtype() != DataType::kFloat || b->rank() != 1 || b->num_elements() != s.M)) return false;
  std::vector<int64_t> kernel(w.dims().begin() + 2, w.dims().end());
  auto spec = nn::ReadWindowSpec(ctx.node(), n, &kernel);
  if (!spec.ok() || spec.value().kernel != kernel) return false;
  nn::WindowSpec& ws = spec.value();
  const int first = kDims - static_cast<int>(n);
  for (size_t d = 0; d < n; ++d) {
    const int64_t in = x.dim(static_cast<int64_t>(d + 2));
    auto out = nn::WindowOutputDim(ctx.node(), ws, d, in);
    if (!out.ok()) return false;
    const int e = first + static_cast<int>(d);
    s.in[e] = in;
    s.out[e] = out.value();
    s.kernel[e] = kernel[d];
    s.stride[e] = ws.strides[d];
    s.dilation[e] = ws.dilations[d];
    s.pad[e] = ws.pad_begin(d);
    s.pad_end[e] = ws.pad_end(d);
  }
  for (int d = 0; d < kDims; ++d) {
    s.in_size *= s.in[d];
    s.out_size *= s.out[d];
    s.kernel_size *= s.kernel[d];
  }
  return s.N > 0 && s.Cg > 0 && s.Mg > 0 && s.in_size > 0 && s.out_size > 0;
}

// Moves spatial axes the window does not move along (input, kernel and
// output all 1, no padding) in front of the others, so that the innermost
// axes are the ones with extent. Memory is unchanged (a size-1 axis can sit
// anywhere), but a 1-D conv written as 2-D with a width of 1 (magika's 5x1
// kernel over [256, 512, 1]) becomes a conv along rows: the row-wise kernels
// then see 512-wide rows instead of 512 rows one pixel wide (3.6x faster).
void MoveTrivialAxesFirst(ConvShape& s) {
  auto trivial = [&](int d) {
    return s.in[d] == 1 && s.out[d] == 1 && s.kernel[d] == 1 && s.pad[d] == 0 && s.pad_end[d] == 0;
  };
  int write = kDims - 1;
  for (int d = kDims - 1; d >= 0; --d) {
    if (trivial(d)) continue;
    if (write != d) {
      s.in[write] = s.in[d], s.out[write] = s.out[d], s.kernel[write] = s.kernel[d];
      s.stride[write] = s.stride[d], s.dilation[write] = s.dilation[d];
      s.pad[write] = s.pad[d], s.pad_end[write] = s.pad_end[d];
    }
    --write;
  }
  // The axes now in front are trivial, set as PlanFastConv sets the missing
  // axes of a 1-D conv, which this conv then is.
  for (int d = write; d >= 0; --d) {
    s.in[d] = s.out[d] = s.kernel[d] = s.stride[d] = s.dilation[d] = 1;
    s.pad[d] = s.pad_end[d] = 0;
  }
}

// ---- im2col ----------------------------------------------------------------------

// At most this many output columns per task: SGEMM's own column block, so a
// longer tile would gain nothing and only give fewer tasks to share out.
constexpr int64_t kColumnsPerTask = 1024;

// How the output columns of each (image, group) are cut into tasks: at most
// kColumnsPerTask each, and enough tasks (at least as many as threads, four
// per thread where tiles keep 64 columns or more) for threads claiming them
// to end together. Cuts fall on whole SGEMM column panels (16) and share the
// panels out evenly: 196 columns in four go as 64 + 48 + 48 + 36, not as
// 64 + 64 + 64 + 4, which left one thread waiting for the other.
struct ColumnTiles {
  int64_t tiles, panels, out_size;
  int64_t Begin(int64_t t) const { return std::min(out_size, t * panels / tiles * 16); }
  int64_t End(int64_t t) const { return t + 1 == tiles ? out_size : Begin(t + 1); }
};

ColumnTiles ColumnTilesFor(const ConvShape& s, int64_t units, int threads) {
  int64_t tiles = (s.out_size + kColumnsPerTask - 1) / kColumnsPerTask;
  // More output channels than columns (96 -> 576 at 14x14): column tiles
  // would each read all the weights, the larger operand; one tile per unit
  // leaves the threads to SGEMM, which splits the channels.
  if (threads > 1 && units < threads && s.Mg >= s.out_size) tiles = 1;
  else if (threads > 1 && units * tiles < 4 * threads)
    tiles = std::max(tiles, std::min((4 * threads + units - 1) / units, (s.out_size + 63) / 64));
  const int64_t panels = (s.out_size + 15) / 16;
  return {std::min(tiles, panels), panels, s.out_size};
}

// Writes row r of the im2col matrix of one (image, group), output columns
// [j0, j0 + nc), to dst: row r = (channel, kd, kh, kw) holds the input value
// each output position sees through that tap (0 in padding). Runs are short
// (an output row's worth of columns), so the copies are plain loops.
NEE_NO_LIBCALL_LOOPS void FillColumnRow(const ConvShape& s, const float* x_group, int64_t r, int64_t j0, int64_t nc,
                                        float* __restrict dst) {
  const int64_t OH = s.out[1], OW = s.out[2];
  const int64_t KH = s.kernel[1], KW = s.kernel[2];
  const int64_t c = r / s.kernel_size, tap = r % s.kernel_size;
  const int64_t kd = tap / (KH * KW), kh = tap / KW % KH, kw = tap % KW;
  const float* plane = x_group + c * s.in_size;
  const ValidRange valid = ValidOutputs(s.in[2], OW, s.stride[2], s.pad[2], kw * s.dilation[2]);
  const int64_t w_offset = kw * s.dilation[2] - s.pad[2];
  const int64_t sw = s.stride[2];
  // Stride 1 along height and width with output rows as wide as input rows
  // (e.g. 3x3 "same" convs): consecutive output rows read consecutive input
  // rows, so a run of whole rows is one contiguous copy plus zeroed edges.
  const bool rows_contiguous = sw == 1 && s.stride[1] == 1 && OW == s.in[2] && valid.lo < valid.hi;
  int64_t j = j0, od = j0 / (OH * OW), oh = j0 / OW % OH, ow = j0 % OW;
  while (j < j0 + nc) {
    const int64_t id = od * s.stride[0] - s.pad[0] + kd * s.dilation[0];
    const int64_t ih = oh * s.stride[1] - s.pad[1] + kh * s.dilation[1];
    const bool inside = id >= 0 && id < s.in[0] && ih >= 0 && ih < s.in[1];
    if (rows_contiguous && inside && ow == 0) {
      // Whole output rows oh.. that stay inside the input and the tile.
      const int64_t run = std::min({(j0 + nc - j) / OW, OH - oh, s.in[1] - ih});
      if (run > 1) {
        float* __restrict out = dst + (j - j0);
        const float* __restrict src = plane + (id * s.in[1] + ih) * s.in[2];
        const int64_t lo = valid.lo, hi = valid.hi;
        // out[k] = src[k + w_offset] except the columns of each row outside [lo, hi), which are padding.
        for (int64_t k = lo; k < (run - 1) * OW + hi; ++k) out[k] = src[k + w_offset];
        for (int64_t row = 0; row < run; ++row) {
          for (int64_t o = 0; o < lo; ++o) out[row * OW + o] = 0.f;
          for (int64_t o = hi; o < OW; ++o) out[row * OW + o] = 0.f;
        }
        j += run * OW;
        oh += run;
        if (oh == OH) {
          oh = 0;
          ++od;
        }
        continue;
      }
    }
    const int64_t seg = std::min(OW - ow, j0 + nc - j);
    float* __restrict out = dst + (j - j0);  // out[o - ow] for o in [ow, ow + seg)
    if (!inside) {
      for (int64_t o = 0; o < seg; ++o) out[o] = 0.f;
    } else {
      const float* __restrict src = plane + (id * s.in[1] + ih) * s.in[2];
      const int64_t lo = std::clamp(valid.lo, ow, ow + seg), hi = std::clamp(valid.hi, lo, ow + seg);
      for (int64_t o = ow; o < lo; ++o) out[o - ow] = 0.f;
      if (sw == 1) {
        for (int64_t o = lo; o < hi; ++o) out[o - ow] = src[o + w_offset];
      } else if (sw == 2) {  // downsampling convs
        CopyEvens(src + w_offset + 2 * lo, out + (lo - ow), hi - lo);
      } else {
        for (int64_t o = lo; o < hi; ++o) out[o - ow] = src[o * sw + w_offset];
      }
      for (int64_t o = hi; o < ow + seg; ++o) out[o - ow] = 0.f;
    }
    j += seg;
    ow = 0;
    if (++oh == OH) {
      oh = 0;
      ++od;
    }
  }
}

// What every output element gets after its sum: the bias of its channel
// (null: none), and the FusedConv epilogue (null: none).
struct ConvFinish {
  const float* bias = nullptr;
  const ConvEpilogue* epilogue = nullptr;
  const float* z = nullptr;  // the epilogue's residual, if any
  bool needed() const {
    return bias || (epilogue && (epilogue->z || epilogue->activation.kind != FusedActivation::Kind::kNone));
  }
};

// Output columns [j0, j0 + nc) of one (image, group): one SGEMM directly on
// the input for pointwise convs, else SGEMM with B = im2col of those columns,
// packed as SGEMM asks for it. `pool` (may be null) parallelizes inside.
// `packed_w` (may be null) holds each group's weights packed beforehand.
void ConvTile(const ConvShape& s, const float* x, const float* w, const SgemmPackedA* packed_w, const ConvFinish& finish,
              float* y, int64_t unit, int64_t j0, int64_t nc, ThreadPool* pool) {
  const int64_t n = unit / s.group, g = unit % s.group;
  const float* x_g = x + (n * s.C + g * s.Cg) * s.in_size;
  const float* w_g = w + g * s.Mg * s.rows();
  const int64_t first_channel = n * s.M + g * s.Mg;
  float* y_g = y + first_channel * s.out_size;
  const int64_t rows = s.rows();
  const SgemmA weights = packed_w ? SgemmA(packed_w[g]) : SgemmA(MatrixView{w_g, rows, 1});
  // Bias, residual and activation per finished tile of the GEMM (rows are
  // this group's output channels, columns start at j0), while it is in L1.
  const FusedActivation none;
  const FusedActivation& act = finish.epilogue ? finish.epilogue->activation : none;
  const SgemmEpilogueFn finish_tile = [&](int64_t i0, int64_t jt, int64_t tile_rows, int64_t cols, float* tile,
                                          int64_t ldc) {
    const int64_t channel = g * s.Mg + i0;
    const float* z_tile = finish.z ? finish.z + (n * s.M + channel) * s.out_size + j0 + jt : nullptr;
    BiasResidualActivate(act, finish.bias ? finish.bias + channel : nullptr, z_tile, s.out_size, tile, ldc, tile_rows,
                         cols);
    // SGEMM's next tile is most often the one to the right: ask for its
    // residual now, so that it has arrived when that tile is finished (rows of
    // a residual far apart are too many streams for the hardware prefetcher).
    if (z_tile && jt + 2 * cols <= nc) PrefetchRows(z_tile + cols, s.out_size, tile_rows, cols);
  };
  const SgemmEpilogueFn* epilogue = finish.needed() ? &finish_tile : nullptr;
  if (s.pointwise()) {
    Sgemm(s.Mg, nc, rows, weights, SgemmB(MatrixView{x_g + j0, s.in_size, 1}), 0.f, y_g + j0, s.out_size, pool,
          epilogue);
    return;
  }
  // im2col straight into SGEMM's packed panels: each im2col row is built in
  // a small buffer (it stays in L1; the packing thread's own) and dealt out to the panels.
  auto pack = [&](int64_t p0, int64_t kc, int64_t jb, int64_t ncb, float* out) {
    float* row = ThreadScratch(static_cast<size_t>(ncb));
    for (int64_t p = p0; p < p0 + kc; ++p) {
      FillColumnRow(s, x_g, p, j0 + jb, ncb, row);
      SgemmPackBRow(row, ncb, kc, p - p0, out);
    }
  };
  const PackBFn pack_fn = pack;
  Sgemm(s.Mg, nc, rows, weights, SgemmB(pack_fn), 0.f, y_g + j0, s.out_size, pool, epilogue);
}

// Each group's weights (Mg x rows) packed as SGEMM's A, once per session.
struct PackedConvWeights {
  std::vector<SgemmPackedA> groups;
};

// Null unless the weights are a session constant (then the same bytes every
// run); the packing depends on nothing else but the geometry in the key.
std::shared_ptr<const PackedConvWeights> PackedWeights(KernelContext& ctx, const ConvShape& s, const float* w) {
  if (!ctx.prepared() || !ctx.input_is_constant(1)) return nullptr;
  auto packed = ctx.prepared()->GetOrBuild<PackedConvWeights>(
      {s.group, s.Mg, s.rows()}, [&]() -> Result<std::shared_ptr<const PackedConvWeights>> {
        auto p = std::make_shared<PackedConvWeights>();
        p->groups.reserve(static_cast<size_t>(s.group));
        for (int64_t g = 0; g < s.group; ++g)
          p->groups.emplace_back(s.Mg, s.rows(), 1.f, MatrixView{w + g * s.Mg * s.rows(), s.rows(), 1});
        ctx.ReleaseConstantInput(1);  // the packed copy is what runs use
        return std::shared_ptr<const PackedConvWeights>(std::move(p));
      });
  return packed.ok() ? packed.value() : nullptr;
}

// [tap * out_size + pixel]: the offset in an input channel plane that each
// output pixel reads through each tap, -1 where it reads padding.
std::vector<int64_t> TapOffsets(const ConvShape& s) {
  std::vector<int64_t> offsets;
  offsets.reserve(static_cast<size_t>(s.kernel_size * s.out_size));
  for (int64_t tap = 0; tap < s.kernel_size; ++tap) {
    const int64_t k[kDims] = {tap / (s.kernel[1] * s.kernel[2]), tap / s.kernel[2] % s.kernel[1], tap % s.kernel[2]};
    for (int64_t o = 0; o < s.out_size; ++o) {
      const int64_t at[kDims] = {o / (s.out[1] * s.out[2]), o / s.out[2] % s.out[1], o % s.out[2]};
      int64_t offset = 0;
      for (int d = 0; d < kDims && offset >= 0; ++d) {
        const int64_t i = at[d] * s.stride[d] - s.pad[d] + k[d] * s.dilation[d];
        offset = i >= 0 && i < s.in[d] ? offset * s.in[d] + i : -1;
      }
      offsets.push_back(offset);
    }
  }
  return offsets;
}

// The batched path's view of a conv; a 1-D one (after MoveTrivialAxesFirst,
// every axis but the last trivial) also gets its window along that axis.
BatchedConv BatchedGeometry(const ConvShape& s) {
  BatchedConv g{s.N, s.C, s.M, s.group, s.in_size, s.out_size, s.kernel_size, TapOffsets(s)};
  for (int64_t tap = 0; tap < s.kernel_size; ++tap) g.taps.push_back(tap);
  const bool line = s.in[0] * s.in[1] * s.kernel[0] * s.kernel[1] * s.out[0] * s.out[1] == 1 &&
                    s.pad[0] == 0 && s.pad[1] == 0 && s.pad[2] >= 0 && s.pad_end[2] >= 0;
  if (line) {
    g.line = true;
    g.pad = s.pad[2], g.pad_end = s.pad_end[2], g.stride = s.stride[2], g.dilation = s.dilation[2];
  }
  return g;
}

// The taps through which some output pixel reads the input.
std::vector<int64_t> LiveTaps(const BatchedConv& g) {
  std::vector<int64_t> live;
  for (int64_t tap = 0; tap < g.kernel_size; ++tap) {
    const int64_t* offsets = g.tap_offsets.data() + tap * g.out_size;
    if (std::any_of(offsets, offsets + g.out_size, [](int64_t at) { return at >= 0; })) live.push_back(tap);
  }
  return live;
}

// Each group's weights packed as SGEMM's A with only the columns of `taps`
// (per input channel, in order), once per session; null unless the weights
// are a session constant. The key holds the taps, so convs of this node over
// other input sizes get their own.
std::shared_ptr<const PackedConvWeights> PackedTapWeights(KernelContext& ctx, const ConvShape& s, const float* w,
                                                          const std::vector<int64_t>& taps) {
  if (!ctx.prepared() || !ctx.input_is_constant(1)) return nullptr;
  std::vector<int64_t> key{s.group, s.Mg, s.rows(), -1};
  key.insert(key.end(), taps.begin(), taps.end());
  const int64_t live = static_cast<int64_t>(taps.size()), depth = s.Cg * live;
  auto packed = ctx.prepared()->GetOrBuild<PackedConvWeights>(key, [&]() -> Result<std::shared_ptr<const PackedConvWeights>> {
    auto p = std::make_shared<PackedConvWeights>();
    std::vector<float> kept(static_cast<size_t>(s.Mg * depth));
    for (int64_t g = 0; g < s.group; ++g) {
      for (int64_t m = 0; m < s.Mg; ++m)
        for (int64_t c = 0; c < s.Cg; ++c)
          for (int64_t t = 0; t < live; ++t)
            kept[(m * s.Cg + c) * live + t] = w[((g * s.Mg + m) * s.Cg + c) * s.kernel_size + taps[t]];
      p->groups.emplace_back(s.Mg, depth, 1.f, MatrixView{kept.data(), depth, 1});
    }
    ctx.ReleaseConstantInput(1);  // as PackedWeights does
    return std::shared_ptr<const PackedConvWeights>(std::move(p));
  });
  return packed.ok() ? packed.value() : nullptr;
}

// The batched path's geometry for one input shape, prepared once per session
// and shape: the offset table has kernel_size x out_size entries (1280 for
// faster-whisper's 256-tap feature extractor), too many to rebuild per run.
// `live`: the same with only the taps that read the input, when some read
// only padding (null otherwise).
struct BatchedPlan {
  BatchedConv all;
  std::unique_ptr<const BatchedConv> live;
};

std::shared_ptr<const BatchedPlan> PlanBatched(KernelContext& ctx, const ConvShape& s) {
  auto build = [&] {
    auto plan = std::make_shared<BatchedPlan>();
    plan->all = BatchedGeometry(s);
    std::vector<int64_t> live = LiveTaps(plan->all);
    if (!live.empty() && live.size() < plan->all.taps.size()) {
      auto g = std::make_unique<BatchedConv>(plan->all);
      g->taps = std::move(live);
      plan->live = std::move(g);
    }
    return plan;
  };
  if (!ctx.prepared()) return build();
  PreparedCache::Key key{s.N, s.C, s.M, s.group};
  for (int d = 0; d < kDims; ++d)
    key.insert(key.end(), {s.in[d], s.out[d], s.kernel[d], s.stride[d], s.dilation[d], s.pad[d], s.pad_end[d]});
  auto plan = ctx.prepared()->GetOrBuild<BatchedPlan>(
      key, [&]() -> Result<std::shared_ptr<const BatchedPlan>> { return std::shared_ptr<const BatchedPlan>(build()); });
  return plan.ok() ? plan.value() : build();
}

// The batched path, its weights packed for the taps that read the input when
// some taps read only padding (or for all taps), or read as given.
Status RunBatched(KernelContext& ctx, const ConvShape& s, const float* x, const float* w, const float* bias,
                  const ConvEpilogue* epilogue, const float* z, float* y) {
  const std::shared_ptr<const BatchedPlan> plan = PlanBatched(ctx, s);
  if (plan->live) {
    if (auto packed = PackedTapWeights(ctx, s, w, plan->live->taps))
      return ConvBatched(ctx, *plan->live, x, w, packed->groups.data(), bias, epilogue, z, y);
  }
  const std::shared_ptr<const PackedConvWeights> packed = PackedWeights(ctx, s, w);
  return ConvBatched(ctx, plan->all, x, w, packed ? packed->groups.data() : nullptr, bias, epilogue, z, y);
}

}  // namespace

float* ThreadScratch(size_t n) {
  thread_local std::unique_ptr<float[]> buffer;
  thread_local size_t capacity = 0;
  if (n > capacity) {
    buffer.reset(new float[n]);
    capacity = n;
  }
  return buffer.get();
}

Status ConvFloat(KernelContext& ctx) { return ConvFloatWithEpilogue(ctx, nullptr); }

Status ConvFloatWithEpilogue(KernelContext& ctx, const ConvEpilogue* epilogue) {
  ConvOperands in;
  NEE_ASSIGN_OR_RETURN(bool usable, ReadConvOperands(ctx, &in));
  ConvShape s;
  if (!usable || !PlanFastConv(ctx, *in.x, *in.w, in.bias, s))
    return epilogue ? RunReference(ctx) : RunReferenceOf(ctx, "Conv");
  const Tensor *x = in.x, *w = in.w, *b = in.bias;
  const std::vector<int64_t> out_dims = ConvOutputDims(s, x->rank() - 2);
  MoveTrivialAxesFirst(s);  // after out_dims, which keeps the node's own axis order
  const float* z = nullptr;
  if (epilogue && epilogue->z) {
    if (epilogue->z->dims() != out_dims)
      return ctx.InputError(3, "(Z) must have the output's shape " + DimsToString(out_dims) + ", got " +
                                   epilogue->z->Describe());
    z = epilogue->z->data<float>();
  }
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, out_dims));
  const float* xp = x->data<float>();
  const float* wp = w->data<float>();
  const float* bp = b ? b->data<float>() : nullptr;
  float* yp = out.data<float>();
  const int threads = NumThreads(ctx);
  const ConvFinish finish{bp, epilogue, z};

  // The depthwise kernel works on a padded copy of each plane; absurd pads
  // (possible with huge strides) would make that copy too big, so such nodes
  // take the im2col path, which never materializes the padding.
  double padded_size = 1;
  for (int d = 0; d < kDims; ++d) padded_size *= static_cast<double>(s.in[d] + s.pad[d] + s.pad_end[d]);
  const bool padded_copy_ok = padded_size <= 4.0 * static_cast<double>(s.in_size + s.out_size) + 65536;
  const ConvShape padded = padded_copy_ok ? PaddedGeometry(s) : s;
  const bool planar = s.in[0] == 1 && s.kernel[0] == 1 && s.out[0] == 1;  // 1-D or 2-D
  if (s.depthwise() && s.Mg == 1 && planar && padded_copy_ok) {
    const Depthwise2D g{s.N,         s.C,         s.in[1],       s.in[2],       s.out[1], s.out[2], s.kernel[1],
                        s.kernel[2], s.stride[1], s.stride[2], s.dilation[1], s.dilation[2], s.pad[1], s.pad[2]};
    if (DepthwiseFlatApplies(g)) {
      DepthwiseFlat(ctx, g, xp, wp, bp, epilogue, z, yp);
      return Status::Ok();
    }
    if (DepthwiseNarrowApplies(g)) {
      DepthwiseNarrow(ctx, g, xp, wp, bp, epilogue, z, yp);
      return Status::Ok();
    }
    if (DepthwisePlanarApplies(g)) {
      DepthwisePlanar(ctx, g, xp, wp, bp, epilogue, z, yp);
      return Status::Ok();
    }
    if (DepthwiseBlockedAvailable()) {
      DepthwiseBlocked(ctx, g, xp, wp, bp, epilogue, z, yp);
      return Status::Ok();
    }
  }
  if (s.depthwise() && padded_copy_ok) {
    const DepthwiseRowsFn rows_fn = SelectDepthwiseRows();
    const int64_t planes = s.N * s.C;
    const int64_t work_per_plane = s.Mg * s.out_size * s.kernel_size;
    // Planes are many and small (960 of 7x7 in MobileNetV2): scratch is
    // fetched once per chunk of planes, not per plane.
    auto chunk = [&](int64_t begin, int64_t end) {
      float* scratch = ThreadScratch(static_cast<size_t>(padded.in_size + kPlaneSlack));
      DepthwiseRows rows;
      for (int64_t p = begin; p < end; ++p) {
        DepthwisePlane(s, padded, xp, wp, bp, yp, p, rows_fn, scratch, rows);
        // The plane's outputs (bias included) are still in cache: finish them now.
        if (finish.epilogue && ConvFinish{nullptr, finish.epilogue, z}.needed()) {
          const int64_t offset = (p / s.C * s.M + p % s.C * s.Mg) * s.out_size, count = s.Mg * s.out_size;
          BiasResidualActivate(finish.epilogue->activation, nullptr, z ? z + offset : nullptr, 0, yp + offset, 0, 1,
                               count);
        }
      }
    };
    if (planes * work_per_plane < 32768) {
      chunk(0, planes);  // too little work to share out
    } else {
      ctx.ParallelFor(planes, 1, chunk);
    }
    return Status::Ok();
  }

  if (!s.depthwise() && ConvBatchedApplies(s.N, s.out_size)) {
    return RunBatched(ctx, s, xp, wp, bp, epilogue, z, yp);
  }

  const bool winograd_shape = planar && s.group == 1 && s.kernel[1] == 3 && s.kernel[2] == 3 && s.stride[1] == 1 &&
                              s.stride[2] == 1 && s.dilation[1] == 1 && s.dilation[2] == 1 && padded_copy_ok;
  if (winograd_shape) {
    const Winograd3x3 g{s.N, s.C, s.in[1], s.in[2], s.M, s.out[1], s.out[2], s.pad[1], s.pad[2]};
    if (WinogradApplies(ctx, g)) return ConvWinograd(ctx, g, xp, wp, bp, epilogue, z, yp);
  }

  if (s.pointwise() && s.group == 1) {  // conv_pointwise_avx512.cc; on AVX2 conv_pointwise_small.cc
    const Pointwise pw{s.N, s.C, s.M, s.out_size};
    if (ConvPointwiseAvx512Applies(pw)) return ConvPointwiseAvx512(ctx, pw, xp, wp, bp, epilogue, z, yp);
    if (ConvPointwiseSmallApplies(pw)) return ConvPointwiseSmall(ctx, pw, xp, wp, bp, epilogue, z, yp);
  }

  // The 2-D group-1 geometry the pixel-major and indirect paths take. A 1-D
  // conv's row axis is trivial (one input row, one output row, one kernel
  // row), so its stride there, always 1, does not matter: it runs with the
  // stride along the line (silero-vad's stride-2 encoder convs).
  const bool one_row = s.in[1] == 1 && s.out[1] == 1 && s.kernel[1] == 1 && s.pad[1] == 0;
  const bool conv2d_shape = planar && s.group == 1 && s.dilation[1] == 1 && s.dilation[2] == 1 &&
                            (s.stride[1] == s.stride[2] || one_row);
  const Conv2D g2{s.N,      s.C,         s.in[1],     s.in[2],     s.M,      s.out[1],
                  s.out[2], s.kernel[1], s.kernel[2], s.stride[2], s.pad[1], s.pad[2]};
  if (conv2d_shape && ConvPixelApplies(g2)) return ConvPixel(ctx, g2, xp, wp, bp, epilogue, z, yp);

  // (image, group) units split into column tiles: one task each, all in one
  // parallel loop (each task's im2col is consumed at once by its own SGEMM).
  // Tiles only split the columns, which SGEMM computes independently, so the
  // tiling (which depends on the thread count) never changes a result.
  const std::shared_ptr<const PackedConvWeights> packed = PackedWeights(ctx, s, wp);
  const SgemmPackedA* packed_w = packed ? packed->groups.data() : nullptr;
  if (conv2d_shape && !s.pointwise() && ConvIndirectApplies(g2)) {
    return ConvIndirect(ctx, g2, xp, wp, packed_w, bp, epilogue, z, yp);
  }
  const int64_t units = s.N * s.group;
  const ColumnTiles cut = ColumnTilesFor(s, units, threads);
  const int64_t tiles = cut.tiles;
  if (threads == 1 || units * tiles >= threads) {
    ParallelTasks(ctx, units * tiles, [&](int64_t t) {
      const int64_t j0 = cut.Begin(t % tiles);
      ConvTile(s, xp, wp, packed_w, finish, yp, t / tiles, j0, cut.End(t % tiles) - j0, nullptr);
    });
  } else {
    // Too few columns to go around: parallelize inside each tile (SGEMM over output channels).
    for (int64_t t = 0; t < units * tiles; ++t) {
      const int64_t j0 = cut.Begin(t % tiles);
      ConvTile(s, xp, wp, packed_w, finish, yp, t / tiles, j0, cut.End(t % tiles) - j0, ctx.pool());
    }
  }
  return Status::Ok();
}

}  // namespace nee::cpu
