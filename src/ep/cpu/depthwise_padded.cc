// The float32 Conv's direct depthwise kernel, for the depthwise convs the
// specialized kernels (depthwise_planar.cc, depthwise_small.cc,
// depthwise_blocked.cc) do not take: any kernel, stride, dilation and channel
// multiplier, 1-D to 3-D. conv_fast.cc calls it plane by plane. Split from
// conv_fast.cc to keep each file readable whole; what they share is in
// conv_fast_internal.h.
//
// Each input channel plane is first copied into a zero-padded scratch plane,
// so every tap of every output lies inside it: no border cases, and each
// output is bias + all taps in (kd, kh, kw) order (padding contributes w*0).
// Output rows are computed four at a time and eight columns per vector, which
// gives enough independent sums to hide the FMA latency.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ep/cpu/conv_fast_internal.h"
#include "ep/cpu/sgemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include "ep/cpu/simd_x86.h"
#define NEE_CONV_X86 1
#endif

namespace nee::cpu::conv_fast {

namespace {

// Copies one input plane into the padded plane (zeros around it and in the slack).
// Rows are short (7 to 112 floats): plain loops, not memcpy/memset calls.
NEE_NO_LIBCALL_LOOPS void PadPlane(const ConvShape& s, const ConvShape& p, const float* src, float* dst) {
  const int64_t Hp = p.in[1], Wp = p.in[2];
  for (int64_t d = 0; d < p.in[0]; ++d) {
    float* slice = dst + d * Hp * Wp;
    const int64_t id = d - s.pad[0];
    if (id < 0 || id >= s.in[0]) {
      std::fill(slice, slice + Hp * Wp, 0.f);
      continue;
    }
    std::fill(slice, slice + s.pad[1] * Wp, 0.f);
    for (int64_t h = 0; h < s.in[1]; ++h) {
      float* row = slice + (h + s.pad[1]) * Wp;
      std::fill(row, row + s.pad[2], 0.f);
      const float* __restrict in_row = src + (id * s.in[1] + h) * s.in[2];
      for (int64_t w = 0; w < s.in[2]; ++w) row[s.pad[2] + w] = in_row[w];
      std::fill(row + s.pad[2] + s.in[2], row + Wp, 0.f);
    }
    std::fill(slice + (s.pad[1] + s.in[1]) * Wp, slice + Hp * Wp, 0.f);
  }
  std::fill(dst + p.in_size, dst + p.in_size + kPlaneSlack, 0.f);
}

void DepthwiseRowsPortable(const ConvShape& p, const DepthwiseRows& rows, const RowBlock& block, float bias,
                           int64_t lo, int64_t hi, float* y_row) {
  for (int64_t i = 0; i < block.count; ++i)
    for (int64_t ow = lo; ow < hi; ++ow) {
      float acc = bias;
      for (size_t r = 0; r < rows.src.size(); ++r) {
        const float* src = rows.src[r] + i * block.row_shift + ow * p.stride[2];
        for (int64_t kw = 0; kw < p.kernel[2]; ++kw) acc += rows.weights[r][kw] * src[kw * p.dilation[2]];
      }
      y_row[i * block.y_step + ow] = acc;
    }
}

#ifdef NEE_CONV_X86
// Columns [ow, ow + 8*kVecs) of kRows rows of a block: kRows*kVecs
// independent sums. (The accumulator array stays in registers: every loop
// over it is fully unrolled.)
template <int kStride, int kRows, int kVecs>
__attribute__((target("avx2,fma"), always_inline)) inline void DepthwiseTile(const ConvShape& p,
                                                                             const DepthwiseRows& rows,
                                                                             const RowBlock& block, float bias,
                                                                             int64_t ow, float* y_row) {
  __m256 acc[kRows * kVecs];
#pragma GCC unroll 16
  for (int a = 0; a < kRows * kVecs; ++a) acc[a] = _mm256_set1_ps(bias);
  const int64_t KW = p.kernel[2], dil = p.dilation[2], shift = block.row_shift;
  for (size_t r = 0; r < rows.src.size(); ++r) {
    const float* src = rows.src[r] + ow * kStride;
    const float* wr = rows.weights[r];
    for (int64_t kw = 0; kw < KW; ++kw) {
      const __m256 wv = _mm256_broadcast_ss(wr + kw);
      const float* tap = src + kw * dil;
#pragma GCC unroll 16
      for (int i = 0; i < kRows; ++i)
#pragma GCC unroll 16
        for (int v = 0; v < kVecs; ++v)
          acc[i * kVecs + v] =
              _mm256_fmadd_ps(wv, LoadStrided8<kStride>(tap + i * shift + v * 8 * kStride), acc[i * kVecs + v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < kRows; ++i)
#pragma GCC unroll 16
    for (int v = 0; v < kVecs; ++v) _mm256_storeu_ps(y_row + i * block.y_step + ow + v * 8, acc[i * kVecs + v]);
}

// Columns [0, width) of kRows rows. A ragged end is covered by one more vector
// ending at `width`, overlapping the previous one: columns computed twice get
// bitwise the same value both times (same lanes, same operation order). Rows
// narrower than eight are computed in a full vector into a side buffer.
template <int kStride, int kRows>
__attribute__((target("avx2,fma"))) void DepthwiseRowsVector(const ConvShape& p, const DepthwiseRows& rows,
                                                             const RowBlock& block, float bias, int64_t width,
                                                             float* y_row) {
  if (width < 8) {
    alignas(32) float narrow[kRows * 8];
    DepthwiseTile<kStride, kRows, 1>(p, rows, {kRows, block.row_shift, 8}, bias, 0, narrow);
    for (int i = 0; i < kRows; ++i) std::memcpy(y_row + i * block.y_step, narrow + i * 8, sizeof(float) * width);
    return;
  }
  constexpr int kWide = kRows >= 4 ? 2 : 4;  // vectors per row in the main loop: eight accumulators
  int64_t ow = 0;
  for (; ow + 8 * kWide <= width; ow += 8 * kWide) DepthwiseTile<kStride, kRows, kWide>(p, rows, block, bias, ow, y_row);
  for (; ow + 8 <= width; ow += 8) DepthwiseTile<kStride, kRows, 1>(p, rows, block, bias, ow, y_row);
  if (ow < width) DepthwiseTile<kStride, kRows, 1>(p, rows, block, bias, width - 8, y_row);
}

// The same sums one column at a time (strides other than 1 and 2), fused like the vector lanes.
__attribute__((target("avx2,fma"))) void DepthwiseRowsScalarAvx2(const ConvShape& p, const DepthwiseRows& rows,
                                                                  const RowBlock& block, float bias, int64_t width,
                                                                  float* y_row) {
  for (int64_t i = 0; i < block.count; ++i)
    for (int64_t ow = 0; ow < width; ++ow) {
      __m128 acc = _mm_set_ss(bias);
      for (size_t r = 0; r < rows.src.size(); ++r) {
        const float* src = rows.src[r] + i * block.row_shift + ow * p.stride[2];
        for (int64_t kw = 0; kw < p.kernel[2]; ++kw)
          acc = _mm_fmadd_ss(_mm_load_ss(rows.weights[r] + kw), _mm_load_ss(src + kw * p.dilation[2]), acc);
      }
      y_row[i * block.y_step + ow] = _mm_cvtss_f32(acc);
    }
}

__attribute__((target("avx2,fma"))) void DepthwiseRowsAvx2(const ConvShape& p, const DepthwiseRows& rows,
                                                           const RowBlock& block, float bias, int64_t lo, int64_t hi,
                                                           float* y_row) {
  // Always called for whole rows (lo == 0).
  const int64_t width = hi - lo;
  const bool four = block.count == 4;
  if (p.stride[2] == 1) {
    if (four) DepthwiseRowsVector<1, 4>(p, rows, block, bias, width, y_row + lo);
    else DepthwiseRowsVector<1, 1>(p, rows, block, bias, width, y_row + lo);
  } else if (p.stride[2] == 2) {
    if (four) DepthwiseRowsVector<2, 4>(p, rows, block, bias, width, y_row + lo);
    else DepthwiseRowsVector<2, 1>(p, rows, block, bias, width, y_row + lo);
  } else {
    DepthwiseRowsScalarAvx2(p, rows, block, bias, width, y_row + lo);
  }
}
#endif

}  // namespace

// The geometry of the padded plane: input dims grown by the pads, no padding.
ConvShape PaddedGeometry(const ConvShape& s) {
  ConvShape p = s;
  p.in_size = 1;
  for (int d = 0; d < kDims; ++d) {
    p.in[d] = s.in[d] + s.pad[d] + s.pad_end[d];
    p.pad[d] = p.pad_end[d] = 0;
    p.in_size *= p.in[d];
  }
  return p;
}

DepthwiseRowsFn SelectDepthwiseRows() {
#ifdef NEE_CONV_X86
  // Follow SGEMM's switch so that one flag selects the portable code everywhere.
  if (CpuHasAvx2Fma() && !SgemmPortableForced()) return DepthwiseRowsAvx2;
#endif
  return DepthwiseRowsPortable;
}

// All Mg output channels of input channel plane `plane_index` (= n*C + c).
// `padded` holds p.in_size + kPlaneSlack floats; `rows` is the caller's scratch.
void DepthwisePlane(const ConvShape& s, const ConvShape& p, const float* x, const float* w, const float* bias,
                    float* y, int64_t plane_index, DepthwiseRowsFn rows_fn, float* padded,
                    DepthwiseRows& rows) {
  const int64_t n = plane_index / s.C, c = plane_index % s.C;
  PadPlane(s, p, x + plane_index * s.in_size, padded);
  const int64_t OD = s.out[0], OH = s.out[1], OW = s.out[2];
  const int64_t KD = s.kernel[0], KH = s.kernel[1], KW = s.kernel[2];
  rows.src.resize(static_cast<size_t>(KD * KH));
  rows.weights.resize(static_cast<size_t>(KD * KH));
  for (int64_t m = 0; m < s.Mg; ++m) {
    const int64_t oc = c * s.Mg + m;
    const float* wk = w + oc * s.kernel_size;
    float* y_plane = y + (n * s.M + oc) * s.out_size;
    const float b = bias ? bias[oc] : 0.f;
    for (int64_t od = 0; od < OD; ++od)
      for (int64_t oh = 0; oh < OH;) {
        const RowBlock block{oh + 4 <= OH ? 4 : 1, s.stride[1] * p.in[2], OW};
        for (int64_t kd = 0; kd < KD; ++kd)
          for (int64_t kh = 0; kh < KH; ++kh) {
            const int64_t id = od * s.stride[0] + kd * s.dilation[0];
            const int64_t ih = oh * s.stride[1] + kh * s.dilation[1];
            rows.src[kd * KH + kh] = padded + (id * p.in[1] + ih) * p.in[2];
            rows.weights[kd * KH + kh] = wk + (kd * KH + kh) * KW;
          }
        rows_fn(p, rows, block, b, 0, OW, y_plane + (od * OH + oh) * OW);
        oh += block.count;
      }
  }
}

}  // namespace nee::cpu::conv_fast
