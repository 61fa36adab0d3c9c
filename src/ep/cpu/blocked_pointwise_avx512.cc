#include "ep/cpu/blocked_pointwise_avx512.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "ep/cpu/blocked_tile_avx512.h"
#include "ep/cpu/sgemm.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "ep/cpu/activation_simd.h"
#include "ep/cpu/simd_x86.h"
#define NEE_PAIRS_X86 1
#endif

namespace nee::cpu {

namespace {
using Kind = FusedActivation::Kind;
constexpr int64_t kB = kChannelBlock;  // 8: a block; a pair of blocks is one zmm
constexpr int64_t kLanes = 2 * kB;
}  // namespace

void PackPointwisePairs(const BlockedConvGeometry& g, PointwisePairs* out) {
  const int64_t pairs = (g.Mb() + 1) / 2;
  out->w16.assign(static_cast<size_t>(pairs * g.C * kLanes), 0.f);
  out->bias16.assign(static_cast<size_t>(pairs * kLanes), 0.f);
  if (g.bias) std::copy(g.bias, g.bias + g.M, out->bias16.begin());
  // w16[(pair * C + c) * 16 + lane] = w[(16 * pair + lane) * C + c]: eight
  // output channels (half a pair) at a time through register transposes
  // where the CPU has AVX2, the rest one at a time.
  int64_t m = 0;
#ifdef NEE_PAIRS_X86
  if (CpuHasAvx2Fma())
    for (; m + kB <= g.M; m += kB)
      TransposeColumns8Avx2(g.w + m * g.C, g.C, g.C, out->w16.data() + (m / kLanes) * g.C * kLanes + m % kLanes,
                            kLanes);
#endif
  for (; m < g.M; ++m) {
    const int64_t pair = m / kLanes, lane = m % kLanes;
    for (int64_t c = 0; c < g.C; ++c) out->w16[static_cast<size_t>((pair * g.C + c) * kLanes + lane)] = g.w[m * g.C + c];
  }
}

#ifdef NEE_PAIRS_X86
namespace {

// Where a tile's finished vectors go. Blocked (ldy 0): pixel i of pair j's
// halves to blocks 2j and 2j + 1, `plane` pixels apart (`odd_tail`: the last
// pair has one block). Channels last (ldy = M): all sixteen lanes to pixel i's
// row at channel 16j, the row ldy floats from the next, the last pair's lanes
// past M (`tail_lanes` clear) left out. z, the residual, is laid out as y.
struct TileStore {
  int64_t ldy;
  int64_t plane;
  bool odd_tail;
  __mmask16 tail_lanes;
};

// PX pixels x OP pairs of output blocks. x: the tile's first pixel in input
// block 0 (block cb is cb * plane * 8 further); w: the first pair's packed
// weights ([C][16], the next pair C * 16 further); y, z: the tile's first
// pixel in its first output block (channels last: its first channel).
template <int PX, int OP>
__attribute__((target("avx512f,avx512dq"))) void PairTile(int64_t C, int64_t plane, const float* x, const float* w,
                                                          const float* bias, float* y, const float* z,
                                                          const FusedActivation& act, const TileStore& out) {
  __m512 acc[PX][OP];
#pragma GCC unroll 3
  for (int j = 0; j < OP; ++j) {
    const __m512 b = _mm512_loadu_ps(bias + kLanes * j);
#pragma GCC unroll 16
    for (int i = 0; i < PX; ++i) acc[i][j] = b;
  }
  for (int64_t cb = 0; cb < C / kB; ++cb) {
    const float* xc = x + cb * plane * kB;
    const float* wc = w + cb * kB * kLanes;
#pragma GCC unroll 8
    for (int l = 0; l < kB; ++l) {
      __m512 wv[OP];
#pragma GCC unroll 3
      for (int j = 0; j < OP; ++j) wv[j] = _mm512_loadu_ps(wc + j * C * kLanes + l * kLanes);
#pragma GCC unroll 16
      for (int i = 0; i < PX; ++i) {
        const __m512 xv = _mm512_set1_ps(xc[i * kB + l]);
#pragma GCC unroll 3
        for (int j = 0; j < OP; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
      }
    }
  }
  blocked_tile::WithActivation(act.kind, [&](auto kind) NEE_TILE_STORES {
    constexpr Kind K = decltype(kind)::value;
    if (out.ldy > 0) {
#pragma GCC unroll 3
      for (int j = 0; j < OP; ++j) {
        const __mmask16 lanes = j == OP - 1 ? out.tail_lanes : 0xFFFF;
#pragma GCC unroll 16
        for (int i = 0; i < PX; ++i) {
          const int64_t at = i * out.ldy + j * kLanes;
          __m512 v = acc[i][j];
          if (z) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(lanes, z + at));
          _mm512_mask_storeu_ps(y + at, lanes, blocked_tile::Activate<K>(act, v));
        }
      }
      return;
    }
#pragma GCC unroll 3
    for (int j = 0; j < OP; ++j) {
      const bool has_high = !(out.odd_tail && j == OP - 1);
#pragma GCC unroll 16
      for (int i = 0; i < PX; ++i) {
        const int64_t lo = (2 * j * out.plane + i) * kB;
        blocked_tile::StorePair<K>(act, y, z, lo, lo + out.plane * kB, has_high, acc[i][j]);
      }
    }
  });
}

using TileFn = void (*)(int64_t, int64_t, const float*, const float*, const float*, float*, const float*,
                        const FusedActivation&, const TileStore&);

template <int OP, int... PX>
constexpr auto TableOf(std::integer_sequence<int, PX...>) {
  return std::array<TileFn, sizeof...(PX)>{PairTile<PX + 1, OP>...};
}

// Tiles by the pairs they cover, indexed by pixels - 1: 16 x 1, 12 x 2, 8 x 3.
struct PairTiles {
  static constexpr auto one = TableOf<1>(std::make_integer_sequence<int, 16>{});
  static constexpr auto two = TableOf<2>(std::make_integer_sequence<int, 12>{});
  static constexpr auto three = TableOf<3>(std::make_integer_sequence<int, 8>{});
  static const TileFn* For(int64_t pairs) { return pairs == 1 ? one.data() : pairs == 2 ? two.data() : three.data(); }
};


// Pixels [p0, p1) of image n, output blocks [ob0, ob1) (ob0 even), written
// where `out` says: blocked (ldy 0), block ob's pixel p at out.y + (ob *
// out.plane + p - out.first) * 8; channels last, pixel p's row at out.y + (p -
// out.first) * ldy. The residual out.z is laid out as the output.
void Range(const BlockedConvGeometry& g, const PointwisePairs& pw, const FusedActivation& act, const PointwiseOut& out,
           int64_t n, int64_t p0, int64_t p1, int64_t ob0, int64_t ob1, int64_t ldy) {
  const int64_t plane = g.H * g.W;
  const float* x = g.x + n * g.Cb() * plane * kB;
  const int64_t pair_end = (ob1 + 1) / 2, last_pair = (g.Mb() + 1) / 2 - 1;
  for (int64_t pair = ob0 / 2, step = 0; pair < pair_end; pair += step) {
    const int64_t left_pairs = pair_end - pair;
    step = left_pairs == 3 ? 3 : std::min<int64_t>(2, left_pairs);
    const TileFn* tiles = PairTiles::For(step);
    const int64_t widest = step == 1 ? 16 : step == 2 ? 12 : 8;
    TileStore store{ldy, out.plane, pair + step == pair_end && ob1 % 2 == 1, 0xFFFF};
    if (ldy > 0 && pair + step - 1 == last_pair)
      store.tail_lanes = static_cast<__mmask16>((1u << (g.M - last_pair * kLanes)) - 1);
    const float* w = pw.w16.data() + pair * g.C * kLanes;
    const float* bias = pw.bias16.data() + pair * kLanes;
    for (int64_t p = p0, px = 0; p < p1; p += px) {
      px = blocked_tile::TilePixels(p1 - p, widest);
      const int64_t at = ldy > 0 ? (p - out.first) * ldy + 2 * pair * kB : (2 * pair * out.plane + p - out.first) * kB;
      tiles[px - 1](g.C, plane, x + p * kB, w, bias, out.y + at, out.z ? out.z + at : nullptr, act, store);
    }
  }
}

// Channels-last rows of M floats lie M floats apart, so where M is not a
// multiple of 16 (YOLO's heads: 255 channels, rows of 1020 bytes) every
// vector a tile stores straddles two cache lines, and a pair of output blocks
// at a time leaves the lines part-written until the last pair: a standalone
// copy of that store pattern ran 13-20% slower than over rows 64 bytes apart.
// Such rows are built kStagedPixels pixels at a time, every pair of blocks,
// in a per-thread buffer of aligned rows, then copied to the output (the
// pixels' rows are one contiguous run there) in aligned 64-byte stores.
constexpr int64_t kStagedPixels = 12;

bool Staged(const BlockedConvGeometry& g, const PointwiseOut& out, int64_t ob0, int64_t ob1) {
  return g.nhwc_output && g.M % kLanes != 0 && g.M > kLanes && !out.z && ob0 == 0 && ob1 == g.Mb();
}

// `rows` rows of m floats, ld floats apart in `staging` (which holds a row
// more, read under a mask), to dst as rows * m contiguous floats.
__attribute__((target("avx512f"))) void CopyStagedRows(const float* staging, int64_t ld, int64_t m, int64_t rows,
                                                       float* dst) {
  const int64_t total = rows * m;
  // Floats [e, e + 16) of the run: one row's, or the end of one and the start of the next.
  auto gather = [&](int64_t e) __attribute__((target("avx512f"), always_inline)) {
    const int64_t r = e / m, c = e % m;
    const __m512 v = _mm512_loadu_ps(staging + r * ld + c);
    if (c + kLanes <= m) return v;
    return _mm512_mask_loadu_ps(v, static_cast<__mmask16>(0xFFFFu << (m - c)), staging + (r + 1) * ld - (m - c));
  };
  const auto misaligned = static_cast<int64_t>(reinterpret_cast<uintptr_t>(dst) % 64 / sizeof(float));
  int64_t e = std::min(total, misaligned ? kLanes - misaligned : 0);
  if (e > 0) _mm512_mask_storeu_ps(dst, static_cast<__mmask16>((1u << e) - 1), gather(0));
  for (; e + kLanes <= total; e += kLanes) _mm512_store_ps(dst + e, gather(e));
  if (e < total) _mm512_mask_storeu_ps(dst + e, static_cast<__mmask16>((1u << (total - e)) - 1), gather(e));
}

void RangeStaged(const BlockedConvGeometry& g, const PointwisePairs& pw, const FusedActivation& act, float* rows,
                 int64_t n, int64_t p0, int64_t p1) {
  const int64_t ld = (g.M + kLanes - 1) / kLanes * kLanes;
  thread_local std::vector<float> buffer;
  buffer.resize(static_cast<size_t>((kStagedPixels + 1) * ld + kLanes));
  float* staging = buffer.data() + (kLanes - reinterpret_cast<uintptr_t>(buffer.data()) % 64 / sizeof(float)) % kLanes;
  for (int64_t q = p0; q < p1; q += kStagedPixels) {
    const int64_t q1 = std::min(p1, q + kStagedPixels);
    Range(g, pw, act, {staging, nullptr, 0, q}, n, q, q1, 0, g.Mb(), ld);
    CopyStagedRows(staging, ld, g.M, q1 - q, rows + q * g.M);
  }
}

}  // namespace

bool BlockedPointwiseAvx512() { return SgemmActiveIsa() == SgemmIsa::kAvx512 && !SgemmPortableForced(); }

void PointwiseRangeAvx512(const BlockedConvGeometry& g, const PointwisePairs& pw, bool finish, int64_t n, int64_t p0,
                          int64_t p1, int64_t ob0, int64_t ob1) {
  const FusedActivation none;
  const int64_t plane = g.OH * g.OW, image = g.nhwc_output ? n * plane * g.M : n * g.Mb() * plane * kB;
  const PointwiseOut out{g.y + image, finish && g.z ? g.z + image : nullptr, plane, 0};
  if (Staged(g, out, ob0, ob1)) return RangeStaged(g, pw, finish ? g.act : none, out.y, n, p0, p1);
  Range(g, pw, finish ? g.act : none, out, n, p0, p1, ob0, ob1, g.nhwc_output ? g.M : 0);
}

void PointwiseRowsToAvx512(const BlockedConvGeometry& g, const PointwisePairs& pw, bool finish, int64_t n, int64_t p0,
                           int64_t p1, int64_t ob0, int64_t ob1, const PointwiseOut& out) {
  const FusedActivation none;
  Range(g, pw, finish ? g.act : none, {out.y, finish ? out.z : nullptr, out.plane, out.first}, n, p0, p1, ob0, ob1, 0);
}

#else
bool BlockedPointwiseAvx512() { return false; }
void PointwiseRangeAvx512(const BlockedConvGeometry&, const PointwisePairs&, bool, int64_t, int64_t, int64_t, int64_t,
                          int64_t) {}
void PointwiseRowsToAvx512(const BlockedConvGeometry&, const PointwisePairs&, bool, int64_t, int64_t, int64_t, int64_t,
                           int64_t, const PointwiseOut&) {}
#endif

}  // namespace nee::cpu
