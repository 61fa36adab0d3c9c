// MaxPool, AveragePool and GlobalAveragePool on float32 for the CPU provider.
//
// The windowed pools precompute, per spatial dim and output position, which
// kernel taps land inside the input (the same rule as the reference kernel in
// ops/pool.cc), then walk each output row input row by input row. Every output
// combines its taps in the reference's order (kd, kh, kw row-major; MaxPool
// keeps the first of equal values and treats NaN as the reference does:
// `v > best`), so MaxPool and AveragePool results equal the reference's
// bitwise. MaxPool's optional Indices output, other types and anything
// invalid go to the reference kernel.
//
// GlobalAveragePool sums each plane in eight interleaved partial sums (a
// fixed order, so deterministic, but not the reference's sequential order).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ep/cpu/conv_common.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"
#include "ep/cpu/simd_vector.h"
#include "ops/nn_util.h"

#if defined(__x86_64__) || defined(__i386__)
#include "ep/cpu/simd_x86.h"
#define NEE_POOL_X86 1
#endif

namespace nee::cpu {

namespace {

constexpr int kDims = kSpatialDims;

// The taps of one window along one dim: taps [lo, hi) read the input starting
// at input coordinate first_x; taps [0, declared) lie in input + declared padding.
struct TapRange {
  int64_t lo = 0, hi = 0, declared = 0, first_x = 0;
};

struct PoolShape {
  int64_t planes = 0;
  int64_t in[kDims] = {1, 1, 1}, out[kDims] = {1, 1, 1};
  int64_t dilation[kDims] = {1, 1, 1};
  int64_t in_size = 1, out_size = 1;
  // Along the last dim: kernel, stride, begin pad, and the output columns
  // [interior_lo, interior_hi) whose every tap is inside the input.
  int64_t kernel_w = 1, stride_w = 1, pad_w = 0, interior_lo = 0, interior_hi = 0;
  int64_t kernel_h = 1, stride_h = 1, pad_h = 0;  // the same along the dim before it (2-D pools)
  // Interior columns [vector_lo, vector_hi) the AVX2 row kernel computes
  // (empty without AVX2 or when fewer than eight; stride 2 stops where its
  // sixteen-float loads would leave the row).
  int64_t vector_lo = 0, vector_hi = 0;
  std::vector<TapRange> taps[kDims];  // per dim, per output position
};

TapRange TapsAt(int64_t k, int64_t stride, int64_t dil, int64_t pad_begin, int64_t pad_end, int64_t in, int64_t pos) {
  const int64_t start = pos * stride - pad_begin;  // input coordinate of tap 0
  auto first_tap_at_or_after = [&](int64_t x) { return x <= start ? 0 : (x - start + dil - 1) / dil; };
  TapRange r;
  r.lo = std::min(k, first_tap_at_or_after(0));
  r.hi = std::max(r.lo, std::min(k, first_tap_at_or_after(in)));
  r.declared = std::min(k, first_tap_at_or_after(in + pad_end));
  r.first_x = start + r.lo * dil;
  return r;
}

// Reads the window attributes exactly as the reference does (including the
// opset-dependent ones the op did not have yet); false sends the node to the
// reference kernel.
bool PlanFastPool(const KernelContext& ctx, const Tensor& x, PoolShape& s) {
  if (x.dtype() != DataType::kFloat || x.rank() < 3 || x.rank() > 2 + kDims) return false;
  const Node& node = ctx.node();
  const size_t n = static_cast<size_t>(x.rank() - 2);
  auto spec_or = nn::ReadWindowSpec(node, n, nullptr);
  if (!spec_or.ok()) return false;
  nn::WindowSpec& spec = spec_or.value();
  const int64_t opset = ctx.opset();
  if ((node.op_type == "AveragePool" && opset < 19) || (node.op_type == "MaxPool" && opset < 10))
    spec.dilations.assign(n, 1);
  if (opset < 10) spec.ceil_mode = false;
  s.planes = x.dim(0) * x.dim(1);
  const int first = kDims - static_cast<int>(n);
  for (int d = 0; d < first; ++d) s.taps[d] = {TapRange{0, 1, 1, 0}};
  for (size_t d = 0; d < n; ++d) {
    const int64_t in = x.dim(static_cast<int64_t>(d + 2));
    auto out = nn::WindowOutputDim(node, spec, d, in);
    if (!out.ok() || out.value() > (int64_t{1} << 24)) return false;  // (the tap tables would be huge)
    const int e = first + static_cast<int>(d);
    s.in[e] = in;
    s.out[e] = out.value();
    s.dilation[e] = spec.dilations[d];
    s.taps[e].resize(static_cast<size_t>(out.value()));
    for (int64_t o = 0; o < out.value(); ++o)
      s.taps[e][static_cast<size_t>(o)] =
          TapsAt(spec.kernel[d], spec.strides[d], spec.dilations[d], spec.pad_begin(d), spec.pad_end(d), in, o);
  }
  for (int d = 0; d < kDims; ++d) {
    s.in_size *= s.in[d];
    s.out_size *= s.out[d];
  }
  s.kernel_w = spec.kernel[n - 1];
  s.stride_w = spec.strides[n - 1];
  s.pad_w = spec.pad_begin(n - 1);
  if (n == 2) {
    s.kernel_h = spec.kernel[0];
    s.stride_h = spec.strides[0];
    s.pad_h = spec.pad_begin(0);
  }
  s.interior_lo = s.interior_hi = 0;
  for (int64_t o = 0; o < s.out[2]; ++o) {
    const TapRange& t = s.taps[2][static_cast<size_t>(o)];
    if (t.lo != 0 || t.hi != s.kernel_w) continue;
    if (s.interior_hi == s.interior_lo) s.interior_lo = o;  // windows move monotonically: one run
    s.interior_hi = o + 1;
  }
#ifdef NEE_POOL_X86
  if (CpuHasAvx2Fma() && !SgemmPortableForced() && (s.stride_w == 1 || s.stride_w == 2)) {
    int64_t hi = s.interior_hi;
    if (s.stride_w == 2) {
      // Columns from ow read up to input column 2*ow - pad + (K-1)*dil + 15.
      const int64_t room = s.in[2] - 16 - ((s.kernel_w - 1) * s.dilation[2] - s.pad_w);  // need 2*ow <= room
      hi = room < 0 ? s.interior_lo : std::clamp(room / 2 + 8, s.interior_lo, s.interior_hi);
    }
    if (hi - s.interior_lo >= 8) {
      s.vector_lo = s.interior_lo;
      s.vector_hi = hi;
    }
  }
#endif
  return s.planes > 0 && s.out_size > 0;
}

enum class Pool { kMax, kAverage };

// Interior columns [lo, hi) of one output row, one kernel tap k at a time
// (each output still combines its taps in order): acc[o] (op)= src[o*stride].
// (The portable path, and the AVX2 path's leftovers: strides above 2, short rows.)
void MaxTapRow(float* __restrict acc, const float* __restrict src, int64_t stride, int64_t lo, int64_t hi,
               bool first) {
  if (first) {
    for (int64_t o = lo; o < hi; ++o) acc[o] = src[o * stride];
  } else if (stride == 1) {
    for (int64_t o = lo; o < hi; ++o) acc[o] = src[o] > acc[o] ? src[o] : acc[o];
  } else {
    for (int64_t o = lo; o < hi; ++o) acc[o] = src[o * stride] > acc[o] ? src[o * stride] : acc[o];
  }
}

void SumTapRow(float* __restrict acc, const float* __restrict src, int64_t stride, int64_t lo, int64_t hi) {
  if (stride == 1) {
    for (int64_t o = lo; o < hi; ++o) acc[o] += src[o];
  } else {
    for (int64_t o = lo; o < hi; ++o) acc[o] += src[o * stride];
  }
}

#ifdef NEE_POOL_X86
// Columns [ow, ow + 8*kVecs) of one output row, whole windows in registers:
// each lane combines the taps in the reference's order (MAXPS(v, acc) is
// exactly `v > acc ? v : acc`), the average divides like the scalar code.
template <Pool kKind, int kStride, int kVecs>
__attribute__((target("avx2,fma"), always_inline)) inline void PoolChunk(const PoolShape& s, const float* const* rows,
                                                                         size_t n_rows, float divisor, int64_t ow,
                                                                         float* y_row) {
  const int64_t base = ow * kStride - s.pad_w, dil = s.dilation[2];
  __m256 acc[kVecs];
#pragma GCC unroll 4
  for (int v = 0; v < kVecs; ++v)
    acc[v] = kKind == Pool::kMax ? LoadStrided8<kStride>(rows[0] + base + v * 8 * kStride) : _mm256_setzero_ps();
  for (size_t r = 0; r < n_rows; ++r)
    for (int64_t k = (kKind == Pool::kMax && r == 0) ? 1 : 0; k < s.kernel_w; ++k) {
      const float* tap = rows[r] + base + k * dil;
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) {
        const __m256 x = LoadStrided8<kStride>(tap + v * 8 * kStride);
        acc[v] = kKind == Pool::kMax ? _mm256_max_ps(x, acc[v]) : _mm256_add_ps(acc[v], x);
      }
    }
#pragma GCC unroll 4
  for (int v = 0; v < kVecs; ++v) {
    if (kKind == Pool::kAverage) acc[v] = _mm256_div_ps(acc[v], _mm256_set1_ps(divisor));
    _mm256_storeu_ps(y_row + ow + v * 8, acc[v]);
  }
}

// Columns [lo, hi), hi - lo >= 8; a ragged end is covered by one more vector
// ending at hi (columns computed twice get bitwise the same value).
template <Pool kKind, int kStride>
__attribute__((target("avx2,fma"))) void PoolRowAvx2(const PoolShape& s, const float* const* rows, size_t n_rows,
                                                     float divisor, int64_t lo, int64_t hi, float* y_row) {
  int64_t ow = lo;
  for (; ow + 32 <= hi; ow += 32) PoolChunk<kKind, kStride, 4>(s, rows, n_rows, divisor, ow, y_row);
  for (; ow + 8 <= hi; ow += 8) PoolChunk<kKind, kStride, 1>(s, rows, n_rows, divisor, ow, y_row);
  if (ow < hi) PoolChunk<kKind, kStride, 1>(s, rows, n_rows, divisor, hi - 8, y_row);
}
#endif

#ifdef NEE_POOL_X86
// Stride-1 2-D MaxPool whose every window holds an input element (pads below
// the kernel), planes of at most kMaxPaddedCols columns: the SPPF block of
// YOLO-style detectors (5x5, pad 2, three in a row on 20x20 planes). The
// plane is copied into a -inf bordered scratch, then pooled separably (rows,
// then columns: 2K instead of K^2 maxima per output), sixteen columns per
// vector (eight with AVX2). Bitwise the reference when the plane holds no NaN and no -0: then
// equal floats have equal bits, so the order the taps are combined in cannot
// change the result, and a -inf border never exceeds the in-window element
// every window has. Planes with NaN or -0 (where the reference's "first of
// equals wins" and NaN rules depend on the order) take the general path.
constexpr int64_t kMaxPaddedCols = 240;

// The padded path's instruction set: AVX-512 (sixteen columns per vector),
// AVX2 (eight), or none.
enum class PaddedIsa { kNone, kAvx2, kAvx512 };
PaddedIsa PaddedMaxPoolIsa() {
  if (SgemmPortableForced()) return PaddedIsa::kNone;
  if (__builtin_cpu_supports("avx512f")) return PaddedIsa::kAvx512;
  if (__builtin_cpu_supports("avx2")) return PaddedIsa::kAvx2;
  return PaddedIsa::kNone;
}

bool PaddedMaxPoolApplies(const PoolShape& s) {
  if (PaddedMaxPoolIsa() == PaddedIsa::kNone) return false;
  if (s.in[0] != 1 || s.stride_h != 1 || s.stride_w != 1 || s.dilation[1] != 1 || s.dilation[2] != 1) return false;
  const int64_t pad_bottom = s.out[1] - s.in[1] - s.pad_h + s.kernel_h - 1;
  const int64_t pad_right = s.out[2] - s.in[2] - s.pad_w + s.kernel_w - 1;
  return s.pad_h >= 0 && s.pad_h < s.kernel_h && pad_bottom >= 0 && pad_bottom < s.kernel_h && s.pad_w >= 0 &&
         s.pad_w < s.kernel_w && pad_right >= 0 && pad_right < s.kernel_w && s.out[2] + s.kernel_w + 16 <= kMaxPaddedCols;
}

__attribute__((target("avx512f"))) void FillNegInf(float* p, int64_t n) {
  for (int64_t i = 0; i < n; i += 16)
    _mm512_mask_storeu_ps(p + i, n - i >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - i)) - 1),
                          _mm512_set1_ps(-__builtin_inff()));
}

// Copies the plane into `pad` (rows of `ld` floats, -inf around it); false if
// it holds a NaN or a -0.
__attribute__((target("avx512f"))) bool FillPadded(const PoolShape& s, const float* x, float* pad, int64_t ld,
                                                   int64_t rows) {
  __mmask16 special = 0;
  const int64_t W = s.in[2];
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = pad + r * ld;
    const int64_t h = r - s.pad_h;
    if (h < 0 || h >= s.in[1]) {
      FillNegInf(dst, ld);
      continue;
    }
    FillNegInf(dst, s.pad_w);
    const float* src = x + h * W;
    for (int64_t w = 0; w < W; w += 16) {
      const __mmask16 m = W - w >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (W - w)) - 1);
      const __m512 v = _mm512_maskz_loadu_ps(m, src + w);
      special |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) |
                 _mm512_mask_cmpeq_epi32_mask(m, _mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN));
      _mm512_mask_storeu_ps(dst + s.pad_w + w, m, v);
    }
    FillNegInf(dst + s.pad_w + W, ld - s.pad_w - W);
  }
  return special == 0;
}

// out[r][c] = max over t < k of in[r * ld_in + c + t * tap] for rows [r0,
// r0 + R) and columns [0, width), a vector of W at a time (the last one's
// lanes past `width` computed, stored only where `keep_all`). R rows run side
// by side so that R chains of `max` hide its latency. `v > acc ? v : acc` is
// the max instruction's own rule, so it compiles to one. Inlined into the
// ISA's entry point below, which decides the instructions.
template <typename W, int R>
inline __attribute__((always_inline)) void MaxChains(const float* in, int64_t ld_in, float* out, int64_t ld_out,
                                                     int64_t r0, int64_t width, int64_t k, int64_t tap,
                                                     bool keep_all) {
  using V = typename W::V;
  using U = typename W::U;
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  for (int64_t c = 0; c < width; c += kLanes) {
    const float* base = in + r0 * ld_in + c;
    V acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = *reinterpret_cast<const U*>(base + r * ld_in);
    for (int64_t t = 1; t < k; ++t)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const V v = *reinterpret_cast<const U*>(base + r * ld_in + t * tap);
        acc[r] = v > acc[r] ? v : acc[r];
      }
    const bool whole = keep_all || width - c >= kLanes;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      float* dst = out + (r0 + r) * ld_out + c;
      if (whole) {
        *reinterpret_cast<U*>(dst) = acc[r];
      } else {
        for (int64_t j = 0; j < width - c; ++j) dst[j] = acc[r][j];
      }
    }
  }
}

template <typename W>
inline __attribute__((always_inline)) void MaxChainsAllOf(const float* in, int64_t ld_in, float* out, int64_t ld_out,
                                                          int64_t rows, int64_t width, int64_t k, int64_t tap,
                                                          bool keep_all) {
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) MaxChains<W, 8>(in, ld_in, out, ld_out, r, width, k, tap, keep_all);
  for (; r + 4 <= rows; r += 4) MaxChains<W, 4>(in, ld_in, out, ld_out, r, width, k, tap, keep_all);
  for (; r < rows; ++r) MaxChains<W, 1>(in, ld_in, out, ld_out, r, width, k, tap, keep_all);
}

__attribute__((target("avx512f"))) void MaxChainsAll(const float* in, int64_t ld_in, float* out, int64_t ld_out,
                                                      int64_t rows, int64_t width, int64_t k, int64_t tap,
                                                      bool keep_all) {
  MaxChainsAllOf<Width16>(in, ld_in, out, ld_out, rows, width, k, tap, keep_all);
}

// The padded plane eight columns at a time with AVX2; tails scalar (a masked
// store is slow on some AVX2 CPUs, and these tails are short).
__attribute__((target("avx2"))) void FillNegInfAvx2(float* p, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(p + i, _mm256_set1_ps(-__builtin_inff()));
  for (; i < n; ++i) p[i] = -__builtin_inff();
}

// A NaN or a -0 among v's lanes.
__attribute__((target("avx2"))) inline bool SpecialAvx2(__m256 v) {
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  const __m256i neg_zero = _mm256_cmpeq_epi32(_mm256_castps_si256(v), _mm256_set1_epi32(INT32_MIN));
  return _mm256_movemask_ps(_mm256_or_ps(nan, _mm256_castsi256_ps(neg_zero))) != 0;
}

__attribute__((target("avx2"))) bool FillPaddedAvx2(const PoolShape& s, const float* x, float* pad, int64_t ld,
                                                    int64_t rows) {
  bool special = false;
  const int64_t W = s.in[2];
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = pad + r * ld;
    const int64_t h = r - s.pad_h;
    if (h < 0 || h >= s.in[1]) {
      FillNegInfAvx2(dst, ld);
      continue;
    }
    FillNegInfAvx2(dst, s.pad_w);
    const float* src = x + h * W;
    int64_t w = 0;
    for (; w + 8 <= W; w += 8) {
      const __m256 v = _mm256_loadu_ps(src + w);
      special |= SpecialAvx2(v);
      _mm256_storeu_ps(dst + s.pad_w + w, v);
    }
    for (; w < W; ++w) {
      const float v = src[w];
      special |= v != v || (v == 0.f && std::signbit(v));
      dst[s.pad_w + w] = v;
    }
    FillNegInfAvx2(dst + s.pad_w + W, ld - s.pad_w - W);
  }
  return !special;
}

__attribute__((target("avx2"))) void MaxChainsAllAvx2(const float* in, int64_t ld_in, float* out, int64_t ld_out,
                                                      int64_t rows, int64_t width, int64_t k, int64_t tap,
                                                      bool keep_all) {
  MaxChainsAllOf<Width8>(in, ld_in, out, ld_out, rows, width, k, tap, keep_all);
}
#endif

// One plane. `acc` is scratch for one output row.
template <Pool kKind>
void PoolPlane(const PoolShape& s, bool count_include_pad, const float* x, float* y, std::vector<float>& acc) {
  const int64_t OH = s.out[1], OW = s.out[2];
  acc.resize(static_cast<size_t>(OW));
  const std::vector<TapRange>& tw = s.taps[2];
  for (int64_t od = 0; od < s.out[0]; ++od) {
    const TapRange& td = s.taps[0][static_cast<size_t>(od)];
    for (int64_t oh = 0; oh < OH; ++oh) {
      const TapRange& th = s.taps[1][static_cast<size_t>(oh)];
      float* y_row = y + (od * OH + oh) * OW;
      bool first_row = true;
      if (kKind == Pool::kAverage) std::fill(acc.begin(), acc.end(), 0.f);
      // Columns [done_lo, done_hi) are finished by the vector kernel below.
      int64_t done_lo = 0, done_hi = 0;
#ifdef NEE_POOL_X86
      if (s.vector_hi > s.vector_lo && td.hi > td.lo && th.hi > th.lo) {
        const float* rows[64];
        size_t n_rows = 0;
        for (int64_t kd = td.lo; kd < td.hi; ++kd)
          for (int64_t kh = th.lo; kh < th.hi && n_rows < 64; ++kh) {
            const int64_t id = td.first_x + (kd - td.lo) * s.dilation[0];
            const int64_t ih = th.first_x + (kh - th.lo) * s.dilation[1];
            rows[n_rows++] = x + (id * s.in[1] + ih) * s.in[2];
          }
        if (static_cast<int64_t>(n_rows) == (td.hi - td.lo) * (th.hi - th.lo)) {  // else: a huge window, scalar path
          const int64_t counted = count_include_pad ? td.declared * th.declared * s.kernel_w
                                                    : static_cast<int64_t>(n_rows) * s.kernel_w;
          const float divisor = static_cast<float>(counted);
          if (s.stride_w == 1) PoolRowAvx2<kKind, 1>(s, rows, n_rows, divisor, s.vector_lo, s.vector_hi, y_row);
          else PoolRowAvx2<kKind, 2>(s, rows, n_rows, divisor, s.vector_lo, s.vector_hi, y_row);
          done_lo = s.vector_lo;
          done_hi = s.vector_hi;
        }
      }
#endif
      for (int64_t kd = td.lo; kd < td.hi; ++kd)
        for (int64_t kh = th.lo; kh < th.hi; ++kh) {
          const int64_t id = td.first_x + (kd - td.lo) * s.dilation[0];
          const int64_t ih = th.first_x + (kh - th.lo) * s.dilation[1];
          const float* src = x + (id * s.in[1] + ih) * s.in[2];
          const int64_t dil = s.dilation[2];
          // The interior columns the vector kernel did not do: [from, interior_hi).
          const int64_t from = done_hi > done_lo ? done_hi : s.interior_lo;
          for (int64_t k = 0; k < s.kernel_w && from < s.interior_hi; ++k) {
            // Interior column from + o reads tap[o * stride].
            const float* tap = src + from * s.stride_w - s.pad_w + k * dil;
            const int64_t width = s.interior_hi - from;
            if (kKind == Pool::kMax) MaxTapRow(acc.data() + from, tap, s.stride_w, 0, width, first_row && k == 0);
            else SumTapRow(acc.data() + from, tap, s.stride_w, 0, width);
          }
          for (int64_t ow = 0; ow < OW; ++ow) {
            if (ow == s.interior_lo) ow = std::max(ow, s.interior_hi);  // skip the interior
            if (ow >= OW) break;
            const TapRange& t = tw[static_cast<size_t>(ow)];
            const float* p = src + t.first_x;
            const int64_t count = t.hi - t.lo;
            if (count <= 0) continue;
            if (kKind == Pool::kMax) {
              float best = first_row ? p[0] : (p[0] > acc[ow] ? p[0] : acc[ow]);
              for (int64_t k = 1; k < count; ++k) {
                const float v = p[k * dil];
                best = v > best ? v : best;
              }
              acc[ow] = best;
            } else {
              float sum = acc[ow];
              for (int64_t k = 0; k < count; ++k) sum += p[k * dil];
              acc[ow] = sum;
            }
          }
          first_row = false;
        }
      const int64_t inside_dh = (td.hi - td.lo) * (th.hi - th.lo);
      for (int64_t ow = 0; ow < OW; ++ow) {
        if (ow == done_lo) ow = std::max(ow, done_hi);  // finished by the vector kernel
        if (ow >= OW) break;
        const TapRange& t = tw[static_cast<size_t>(ow)];
        const int64_t inside = inside_dh * (t.hi - t.lo);
        if (kKind == Pool::kMax) {
          y_row[ow] = inside > 0 ? acc[ow] : 0.f;
        } else {
          const int64_t counted = count_include_pad ? td.declared * th.declared * t.declared : inside;
          y_row[ow] = inside > 0 && counted > 0 ? acc[ow] / static_cast<float>(counted) : 0.f;
        }
      }
    }
  }
}

// One plane through the padded path; false (nothing written) when it holds a NaN.
bool PaddedMaxPlane(const PoolShape& s, const float* x, float* y, std::vector<float>& scratch) {
#ifdef NEE_POOL_X86
  const int64_t ld = s.out[2] + s.kernel_w - 1 + 16;  // room for a whole last vector
  const int64_t rows = s.out[1] + s.kernel_h - 1;
  const int64_t hw = (s.out[2] + 15) / 16 * 16;  // row maxima: whole vectors, all written
  scratch.resize(static_cast<size_t>(ld * rows + hw * rows));
  float* pad = scratch.data();
  float* row_max = pad + ld * rows;
  if (PaddedMaxPoolIsa() == PaddedIsa::kAvx512) {
    if (!FillPadded(s, x, pad, ld, rows)) return false;
    MaxChainsAll(pad, ld, row_max, hw, rows, hw, s.kernel_w, 1, /*keep_all=*/true);
    MaxChainsAll(row_max, hw, y, s.out[2], s.out[1], s.out[2], s.kernel_h, hw, /*keep_all=*/false);
    return true;
  }
  if (!FillPaddedAvx2(s, x, pad, ld, rows)) return false;
  MaxChainsAllAvx2(pad, ld, row_max, hw, rows, hw, s.kernel_w, 1, /*keep_all=*/true);
  MaxChainsAllAvx2(row_max, hw, y, s.out[2], s.out[1], s.out[2], s.kernel_h, hw, /*keep_all=*/false);
  return true;
#else
  return false;
#endif
}

template <Pool kKind>
Status WindowPoolFloat(KernelContext& ctx, bool count_include_pad) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  PoolShape s;
  if (!PlanFastPool(ctx, *x, s)) return RunReference(ctx);
  std::vector<int64_t> out_dims{x->dim(0), x->dim(1)};
  for (int d = kDims - static_cast<int>(x->rank() - 2); d < kDims; ++d) out_dims.push_back(s.out[d]);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, out_dims));
  const float* xp = x->data<float>();
  float* yp = y.data<float>();
  int64_t window = 1;
  for (int d = 0; d < kDims; ++d) window *= std::max<int64_t>(1, s.taps[d].empty() ? 1 : s.taps[d][0].declared);
  // Planes are tasks claimed dynamically; a few planes per task keep the claiming cheap.
  const int64_t per_task = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, s.out_size * window));
  const int64_t tasks = (s.planes + per_task - 1) / per_task;
#ifdef NEE_POOL_X86
  const bool padded = kKind == Pool::kMax && PaddedMaxPoolApplies(s);
#else
  const bool padded = false;
#endif
  auto run = [&](int64_t task) {
    thread_local std::vector<float> acc;
    for (int64_t p = task * per_task; p < std::min(s.planes, (task + 1) * per_task); ++p)
      if (!padded || !PaddedMaxPlane(s, xp + p * s.in_size, yp + p * s.out_size, acc))
        PoolPlane<kKind>(s, count_include_pad, xp + p * s.in_size, yp + p * s.out_size, acc);
  };
  if (s.planes * s.out_size * window < 32768) {
    for (int64_t t = 0; t < tasks; ++t) run(t);  // too little work to share out
  } else {
    ParallelTasks(ctx, tasks, run);
  }
  return Status::Ok();
}

}  // namespace

Status MaxPoolFloat(KernelContext& ctx) {
  if (ctx.wants_output(1)) return RunReference(ctx);  // Indices: the reference computes them
  auto order = ctx.node().GetInt("storage_order", 0);
  if (!order.ok() || (order.value() != 0 && order.value() != 1)) return RunReference(ctx);
  return WindowPoolFloat<Pool::kMax>(ctx, false);
}

Status AveragePoolFloat(KernelContext& ctx) {
  auto include = ctx.node().GetInt("count_include_pad", 0);
  if (!include.ok()) return RunReference(ctx);
  return WindowPoolFloat<Pool::kAverage>(ctx, include.value() != 0);
}

Status GlobalAveragePoolFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->dtype() != DataType::kFloat || x->rank() < 2) return RunReference(ctx);
  std::vector<int64_t> out_dims{x->dim(0), x->dim(1)};
  out_dims.resize(static_cast<size_t>(x->rank()), 1);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, out_dims));
  const int64_t planes = x->dim(0) * x->dim(1);
  const int64_t size = planes > 0 ? x->num_elements() / planes : 0;
  const float* xp = x->data<float>();
  float* yp = y.data<float>();
  ctx.ParallelFor(planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, size)), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const float* p = xp + plane * size;
      // Eight interleaved partial sums (vectorizable), combined pairwise.
      float part[8] = {};
      const int64_t body = size - size % 8;
      for (int64_t i = 0; i < body; i += 8)
        for (int j = 0; j < 8; ++j) part[j] += p[i + j];
      for (int64_t i = body; i < size; ++i) part[i - body] += p[i];
      const float sum = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
      yp[plane] = size > 0 ? sum / static_cast<float>(size) : 0.f;
    }
  });
  return Status::Ok();
}

namespace {

// The reference's maximum of a plane (acc = x[0], then acc = std::max(acc, x[i])
// in order), sixteen interleaved running maxima instead of one chain. Their
// combination is the same value whenever the plane holds no NaN (which the
// reference skips unless it comes first) and its maximum is not zero (where
// -0 or +0 is whichever came first); such planes take the reference's chain.
float PlaneMax(const float* p, int64_t size) {
  constexpr int64_t kParts = 16;
  float part[kParts];
  for (float& v : part) v = p[0];
  int unordered = 0;
  const int64_t body = size - size % kParts;
  for (int64_t i = 0; i < body; i += kParts)
    for (int64_t j = 0; j < kParts; ++j) {
      const float v = p[i + j];
      unordered |= v != v;
      part[j] = v > part[j] ? v : part[j];
    }
  for (int64_t i = body; i < size; ++i) {
    unordered |= p[i] != p[i];
    part[i - body] = p[i] > part[i - body] ? p[i] : part[i - body];
  }
  float m = part[0];
  for (int64_t j = 1; j < kParts; ++j) m = part[j] > m ? part[j] : m;
  if (unordered == 0 && m != 0.f) return m;
  m = p[0];
  for (int64_t i = 0; i < size; ++i) m = std::max(m, p[i]);
  return m;
}

}  // namespace

Status GlobalMaxPoolFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->dtype() != DataType::kFloat || x->rank() < 2 || x->num_elements() == 0) return RunReference(ctx);
  std::vector<int64_t> out_dims{x->dim(0), x->dim(1)};
  out_dims.resize(static_cast<size_t>(x->rank()), 1);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, out_dims));
  const int64_t planes = x->dim(0) * x->dim(1);
  const int64_t size = x->num_elements() / planes;
  const float* xp = x->data<float>();
  float* yp = y.data<float>();
  ctx.ParallelFor(planes, std::max<int64_t>(1, 16384 / size), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) yp[plane] = PlaneMax(xp + plane * size, size);
  });
  return Status::Ok();
}

}  // namespace nee::cpu
