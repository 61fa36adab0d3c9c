// ai.nee BlockedConv on float32 for the CPU provider (AVX2): the layout pass's
// pointwise and depthwise convolutions (ops/blocked_conv.h, opt/layout_blocked.cc).
// On AVX-512 the pointwise convs run blocked_pointwise_avx512.cc's tiles instead
// (two blocks a vector, twice the accumulators; the same bits).
//
//  - pointwise: output tiles of 6 pixels x 2 channel blocks (twelve ymm
//    accumulators, started at the bias; 4 x 3 or 12 x 1 for odd block counts). Per input channel, each of the
//    tile's pixels is broadcast from where it lies in the blocked input and
//    meets the two blocks' weight vectors, packed once as [Mb][C][8] (the
//    6 x 2 tile's channel loop in assembly, Sums6x2). The finished tile is
//    stored whole: a block's pixels are contiguous.
//  - depthwise 3x3, stride 1 or 2: each output pixel's eight channels are one
//    vector, the sum of nine input vectors times the taps' weight vectors
//    (packed [Cb][9][8]); interior pixels four at a time without bounds
//    checks, the border with them. 5x5 and 7x7 ones the same way in
//    depthwise_blocked_kxk.cc.
// The pointwise tiles add the residual and apply the cheap activations (none,
// Relu, Clip) in registers as they store; otherwise, and for the depthwise
// convs, the residual and the activation run over each task's output after
// it, while it is in cache. Anything else (other geometries, padding lanes,
// no AVX2) goes to the reference kernel.
//
// Determinism: every output vector is one accumulator chain over the input
// channels (or taps) in a fixed order, computed by exactly one task, so the
// results do not depend on the thread count.
#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "base/huge_pages.h"
#include "ep/cpu/blocked_conv_parts.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/packed_weights.h"
#include "ep/cpu/parallel_tasks.h"
#include "ops/blocked_conv.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "ep/cpu/activation_simd.h"
#include "ep/cpu/blocked_direct_avx2.h"
#include "ep/cpu/blocked_direct_avx512.h"
#include "ep/cpu/conv_winograd.h"
#include "ep/cpu/blocked_pointwise_avx512.h"
#include "ep/cpu/blocked_stem_avx2.h"
#include "ep/cpu/blocked_stem_avx512.h"
#include "ep/cpu/depthwise_blocked_avx512.h"
#include "ep/cpu/depthwise_blocked_kxk.h"
#include "ep/cpu/sgemm.h"
#include "ep/cpu/simd_x86.h"
#define NEE_BLOCKED_X86 1
#endif

namespace nee::cpu {

#ifdef NEE_BLOCKED_X86
namespace {

constexpr int64_t kB = kChannelBlock;
constexpr int kTilePixels = 6;
constexpr int64_t kChunkPixels = 48;  // pixels a pointwise task covers (a multiple of the tile)
// Pointwise weights a core's L2 (1 MiB on Zen 4) keeps beside a chunk's
// input, and what a group of output blocks holds when they do not all fit.
constexpr int64_t kWeightsInL2 = 768 * 1024;
constexpr int64_t kGroupWeights = 256 * 1024;

// Weights (and bias) in the kernels' layout, packed once per session.
// A pointwise conv's weights are packed for the AVX-512 tiles (pairs) when
// they will run, else for the AVX2 ones (w, bias): one layout, not both.
struct BlockedWeights {
  HugePageVector<float> w;  // pointwise [Mb][C][8]; depthwise [Cb][KH*KW][8]
  std::vector<float> bias;  // [Mb * 8], zero past M and without a bias
  PointwisePairs pairs;     // pointwise on AVX-512 (blocked_pointwise_avx512.h); w and bias then empty
  bool avx512() const { return !pairs.w16.empty(); }
};

// The AVX-512 pair tiles, where they pay: with three output blocks (M = 24,
// MobileNetV2's narrowest projections) a quarter of their lanes would be
// padding, and the AVX2 4 x 3 tiles ran 20% faster there.
// (A channels-last output takes them always: only they store it.)
bool UsePairs(const BlockedConvGeometry& g) {
  return g.pointwise() && BlockedPointwiseAvx512() && (g.Mb() != 3 || g.nhwc_output);
}

std::shared_ptr<const BlockedWeights> Pack(const BlockedConvGeometry& g) {
  auto p = std::make_shared<BlockedWeights>();
  if (UsePairs(g)) {
    PackPointwisePairs(g, &p->pairs);
    return p;
  }
  if (g.depthwise()) {
    BlockedDepthwiseWeights dw;
    PackBlockedDepthwise(g, &dw);
    p->w = std::move(dw.w);
    p->bias = std::move(dw.bias);
  } else {
    BlockedPointwiseWeights pw;
    PackBlockedPointwise(g, &pw);
    p->w = std::move(pw.w);
    p->bias = std::move(pw.bias);
  }
  return p;
}

// `weights`: the node's input holding g.w, its bias the next (BlockedConv's
// 1 and 2; a BlockedExpandDepthwise's depthwise conv reads 3 and 4).
// `drop`: PackedOnce's (the caller never reads g.w in place again).
std::shared_ptr<const BlockedWeights> PackedFor(KernelContext& ctx, const BlockedConvGeometry& g, size_t weights = 1,
                                                bool drop = false) {
  // The layout depends on the ISA (tests change it at run time): part of the key.
  const int64_t layout = UsePairs(g) ? 1 : 0;
  // The weights' input too: a node may run several convs of one shape (a BlockedExpandDepthwise's expand and
  // projection where C = E = P).
  const auto input = static_cast<int64_t>(weights);
  return PackedOnce<BlockedWeights>(ctx, {g.M, g.C, g.KH, g.KW, g.group, layout, input}, {weights, weights + 1},
                                    [&] { return Pack(g); }, drop);
}

// A BlockedConv node's own pointwise or depthwise weights: which kernel runs
// such a conv follows from its attributes and the CPU (Supported), never from
// its input's shape (an empty output reads no weights), so once packed its
// weights are never read in place again and the session may free them (a
// ResNet-50's BatchNormalization-folded 1x1 weights: 48 MB).
std::shared_ptr<const BlockedWeights> OwnPackedFor(KernelContext& ctx, const BlockedConvGeometry& g) {
  return PackedFor(ctx, g, 1, /*drop=*/true);
}

// y[at..at+8) = activation K of (v + z[at..at+8)) (z null: of v).
template <FusedActivation::Kind K>
__attribute__((target("avx2,fma"), always_inline)) inline void StoreFinished(const FusedActivation& act, float* y,
                                                                            const float* z, int64_t at, __m256 v) {
  if (z) v = _mm256_add_ps(v, _mm256_loadu_ps(z + at));
  _mm256_storeu_ps(y + at, Activate8<K>(act, v));
}

// ---- Pointwise -------------------------------------------------------------------------

// The 6 x 2 tile's sums (blocks >= 1 input blocks): acc[i][j] = bias[j] +
// x[i][c] * w[j][c] over the channels in order, one FMA chain each, as the
// other tiles' loop adds them. In assembly: GCC's allocation of twelve accumulators, two
// weight vectors and the broadcasts renamed accumulators through copies and
// spilled three per block; here they fill the 16 ymm registers exactly.
#define NEE_PW_PIXEL(l, i, a0, a1)                                 \
  "vbroadcastss " #l "*4+" #i "*32(%[x]), %%ymm14\n\t"             \
  "vfmadd231ps %%ymm12, %%ymm14, %[" #a0 "]\n\t"                   \
  "vfmadd231ps %%ymm13, %%ymm14, %[" #a1 "]\n\t"
#define NEE_PW_LANE(l)                                             \
  "vmovups " #l "*32(%[w]), %%ymm12\n\t"                           \
  "vmovups " #l "*32(%[w],%[ws]), %%ymm13\n\t"                     \
  NEE_PW_PIXEL(l, 0, a00, a01) NEE_PW_PIXEL(l, 1, a10, a11)        \
  NEE_PW_PIXEL(l, 2, a20, a21) NEE_PW_PIXEL(l, 3, a30, a31)        \
  NEE_PW_PIXEL(l, 4, a40, a41) NEE_PW_PIXEL(l, 5, a50, a51)
__attribute__((target("avx2,fma"), always_inline)) inline void Sums6x2(int64_t blocks, int64_t x_step,
                                                                      const float* x, const float* w,
                                                                      int64_t w_second, const float* bias,
                                                                      __m256 (&acc)[6][2]) {
  __asm__ volatile(
      "vmovups (%[b]), %[a00]\n\t"
      "vmovups 32(%[b]), %[a01]\n\t"
      "vmovaps %[a00], %[a10]\n\t"
      "vmovaps %[a01], %[a11]\n\t"
      "vmovaps %[a00], %[a20]\n\t"
      "vmovaps %[a01], %[a21]\n\t"
      "vmovaps %[a00], %[a30]\n\t"
      "vmovaps %[a01], %[a31]\n\t"
      "vmovaps %[a00], %[a40]\n\t"
      "vmovaps %[a01], %[a41]\n\t"
      "vmovaps %[a00], %[a50]\n\t"
      "vmovaps %[a01], %[a51]\n\t"
      "1:\n\t" NEE_PW_LANE(0) NEE_PW_LANE(1) NEE_PW_LANE(2) NEE_PW_LANE(3) NEE_PW_LANE(4) NEE_PW_LANE(5)
      NEE_PW_LANE(6) NEE_PW_LANE(7)
      "add $256, %[w]\n\t"
      "add %[xs], %[x]\n\t"
      "dec %[n]\n\t"
      "jnz 1b\n\t"
      : [x] "+r"(x), [w] "+r"(w), [n] "+r"(blocks), [a00] "=&x"(acc[0][0]), [a01] "=&x"(acc[0][1]),
        [a10] "=&x"(acc[1][0]), [a11] "=&x"(acc[1][1]), [a20] "=&x"(acc[2][0]), [a21] "=&x"(acc[2][1]),
        [a30] "=&x"(acc[3][0]), [a31] "=&x"(acc[3][1]), [a40] "=&x"(acc[4][0]), [a41] "=&x"(acc[4][1]),
        [a50] "=&x"(acc[5][0]), [a51] "=&x"(acc[5][1])
      : [xs] "r"(x_step), [ws] "r"(w_second), [b] "r"(bias)
      : "xmm12", "xmm13", "xmm14", "xmm15", "memory", "cc");
}
#undef NEE_PW_LANE
#undef NEE_PW_PIXEL

// PX pixels x OB blocks. x: the tile's first pixel in input block 0 (block cb
// is cb * plane * 8 further); w: the first output block's packed weights;
// y: the tile's first pixel in its first output block (block j is j *
// y_plane * 8 further), z (null: none) the residual there, laid out as y.
// Each sum is finished in registers as FinishRun would finish it once
// stored, (sum + z), then activation K: the same operations, so the same
// bits, without another pass over the output (MobileNetV2's ReLU6: 5%).
template <int PX, int OB, FusedActivation::Kind K>
__attribute__((target("avx2,fma"))) void PointwiseTile(int64_t C, int64_t plane, int64_t y_plane, const float* x,
                                                       const float* w, const float* bias, float* y, const float* z,
                                                       const FusedActivation& act) {
  __m256 acc[PX][OB];
  // The residual this tile adds as it stores, on its way from L3 while the
  // sums run (short runs of many planes: the hardware prefetcher misses them).
  if (z)
#pragma GCC unroll 3
    for (int j = 0; j < OB; ++j)
#pragma GCC unroll 4
      for (int at = 0; at < PX * kB; at += 16)
        _mm_prefetch(reinterpret_cast<const char*>(z + j * y_plane * kB + at), _MM_HINT_T0);
  if constexpr (PX == 6 && OB == 2) {
    if (C >= kB) {
      Sums6x2(C / kB, plane * kB * 4, x, w, C * kB * 4, bias, acc);
    } else {
      acc[0][0] = acc[1][0] = acc[2][0] = acc[3][0] = acc[4][0] = acc[5][0] = _mm256_loadu_ps(bias);
      acc[0][1] = acc[1][1] = acc[2][1] = acc[3][1] = acc[4][1] = acc[5][1] = _mm256_loadu_ps(bias + kB);
    }
  } else {
#pragma GCC unroll 3
    for (int j = 0; j < OB; ++j) {
      const __m256 b = _mm256_loadu_ps(bias + kB * j);
#pragma GCC unroll 12
      for (int i = 0; i < PX; ++i) acc[i][j] = b;
    }
  }
  if constexpr (PX != 6 || OB != 2)
  for (int64_t cb = 0; cb < C / kB; ++cb) {
    const float* xc = x + cb * plane * kB;
    const float* wc = w + cb * kB * kB;
#pragma GCC unroll 8
    for (int l = 0; l < kB; ++l) {
      __m256 wv[OB];
#pragma GCC unroll 3
      for (int j = 0; j < OB; ++j) wv[j] = _mm256_loadu_ps(wc + j * C * kB + l * kB);
#pragma GCC unroll 12
      for (int i = 0; i < PX; ++i) {
        const __m256 xv = _mm256_broadcast_ss(xc + i * kB + l);
#pragma GCC unroll 3
        for (int j = 0; j < OB; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
      }
    }
  }
#pragma GCC unroll 3
  for (int j = 0; j < OB; ++j)
#pragma GCC unroll 12
    for (int i = 0; i < PX; ++i) {
      StoreFinished<K>(act, y, z, (j * y_plane + i) * kB, acc[i][j]);
    }
}

// One pixel x OB blocks (3 to 12): a plane of one pixel (the squeeze and
// excitation convs after a global pool in MobileNetV3 and EfficientNet) in OB
// FMA chains, where the 1 x 2 tile ran two and waited on their latency. Each
// weight vector is read once, straight into its FMA; the blocks' weights lie
// C * 8 floats apart, reached from four pointers (blocks j, j + 1 and j + 2
// from one, as base + stride and base + 2 * stride) so that GCC keeps them in
// registers. The same sums, in the same order, as the other tiles.
template <int OB, FusedActivation::Kind K>
__attribute__((target("avx2,fma"))) void LoneTile(int64_t C, int64_t plane, int64_t y_plane, const float* x,
                                                  const float* w, const float* bias, float* y, const float* z,
                                                  const FusedActivation& act) {
  static_assert(OB >= 3 && OB <= 12);
  __m256 acc[OB];
#pragma GCC unroll 12
  for (int j = 0; j < OB; ++j) acc[j] = _mm256_loadu_ps(bias + kB * j);
  const int64_t stride = C * kB;
  const float* w0 = w;
  const float* w3 = w + 3 * stride;
  const float* w6 = w + 6 * stride;
  const float* w9 = w + 9 * stride;
  for (int64_t cb = 0; cb < C / kB; ++cb) {
    const float* xc = x + cb * plane * kB;
#pragma GCC unroll 8
    for (int l = 0; l < kB; ++l) {
      const __m256 xv = _mm256_broadcast_ss(xc + l);
      const float* base[4] = {w0 + l * kB, w3 + l * kB, w6 + l * kB, w9 + l * kB};
#pragma GCC unroll 12
      for (int j = 0; j < OB; ++j)
        acc[j] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(base[j / 3] + (j % 3) * stride), acc[j]);
    }
    w0 += kB * kB, w3 += kB * kB, w6 += kB * kB, w9 += kB * kB;
  }
#pragma GCC unroll 12
  for (int j = 0; j < OB; ++j) StoreFinished<K>(act, y, z, j * y_plane * kB, acc[j]);
}

using TileFn = void (*)(int64_t, int64_t, int64_t, const float*, const float*, const float*, float*, const float*,
                        const FusedActivation&);
// Tiles of twelve accumulators by the blocks they cover: 12 pixels x 1 block,
// 6 x 2, 4 x 3 (and narrower ones for the last pixels). An odd number of
// blocks ends in a group of three, not a lone block whose six accumulators
// could not hide the FMA latency (M = 24 convs ran 10% slower so).
template <FusedActivation::Kind K>
struct PointwiseTiles {
  static constexpr TileFn one[12] = {PointwiseTile<1, 1, K>,  PointwiseTile<2, 1, K>,  PointwiseTile<3, 1, K>,
                                     PointwiseTile<4, 1, K>,  PointwiseTile<5, 1, K>,  PointwiseTile<6, 1, K>,
                                     PointwiseTile<7, 1, K>,  PointwiseTile<8, 1, K>,  PointwiseTile<9, 1, K>,
                                     PointwiseTile<10, 1, K>, PointwiseTile<11, 1, K>, PointwiseTile<12, 1, K>};
  static constexpr TileFn two[6] = {PointwiseTile<1, 2, K>, PointwiseTile<2, 2, K>, PointwiseTile<3, 2, K>,
                                    PointwiseTile<4, 2, K>, PointwiseTile<5, 2, K>, PointwiseTile<6, 2, K>};
  static constexpr TileFn three[4] = {PointwiseTile<1, 3, K>, PointwiseTile<2, 3, K>, PointwiseTile<3, 3, K>,
                                      PointwiseTile<4, 3, K>};
  // One pixel, 3 to 12 blocks (LoneTile).
  static constexpr TileFn lone[10] = {LoneTile<3, K>, LoneTile<4, K>, LoneTile<5, K>,  LoneTile<6, K>,
                                      LoneTile<7, K>, LoneTile<8, K>, LoneTile<9, K>, LoneTile<10, K>,
                                      LoneTile<11, K>, LoneTile<12, K>};
};

// The tiles' finish in registers: the residual and the activations of the
// common CNNs (None, Relu, Clip: MobileNetV2's, ResNet's; HardSwish:
// MobileNetV3's; SiLU: EfficientNet's and YOLO's), as FinishRun would apply
// them after (the same bits) without a second pass over the output
// (MobileNetV3's expand convs 3-4% faster, EfficientNet-B0 1-1.5%, YOLO
// 0.5%); the rarer ones (Sigmoid, Tanh, HardSigmoid, LeakyRelu) store the sums
// and FinishRun finishes them (fewer tile instances).
struct TileSet {
  const TileFn* one;
  const TileFn* two;
  const TileFn* three;
  const TileFn* lone;  // a lone pixel's tiles, by blocks from 3
  bool finishes;       // the tiles apply the residual and the activation
};
template <FusedActivation::Kind K>
constexpr TileSet kTileSet{PointwiseTiles<K>::one, PointwiseTiles<K>::two, PointwiseTiles<K>::three,
                           PointwiseTiles<K>::lone, true};

TileSet TilesFor(FusedActivation::Kind kind) {
  using Kind = FusedActivation::Kind;
  if (kind == Kind::kRelu) return kTileSet<Kind::kRelu>;
  if (kind == Kind::kClip) return kTileSet<Kind::kClip>;
  if (kind == Kind::kHardSwish) return kTileSet<Kind::kHardSwish>;
  if (kind == Kind::kSilu) return kTileSet<Kind::kSilu>;
  TileSet sums = kTileSet<Kind::kNone>;
  sums.finishes = kind == Kind::kNone;
  return sums;
}

// Pixels [p0, p1) of image n, output blocks [ob0, ob1), written where `out`
// says (blocked: block ob's pixel p at out.y + (ob * out.plane + p -
// out.first) * 8, the residual out.z laid out alike): finished when the tile
// set finishes, else sums only.
void PointwiseRangeTo(const BlockedConvGeometry& g, const float* w_packed, const float* bias_packed,
                      const TileSet& set, int64_t n, int64_t p0, int64_t p1, int64_t ob0, int64_t ob1,
                      const PointwiseOut& out) {
  const int64_t plane = g.H * g.W;
  const float* x = g.x + n * g.Cb() * plane * kB;
  const float* z = set.finishes ? out.z : nullptr;
  if (p1 - p0 == 1 && ob1 - ob0 >= 3) {  // a pixel alone: as many blocks a tile as there are accumulators
    constexpr int64_t kLoneBlocks = 12;
    for (int64_t ob = ob0, obs = 0; ob < ob1; ob += obs) {
      const int64_t left = ob1 - ob;
      obs = left <= kLoneBlocks ? left : left < kLoneBlocks + 3 ? left - 3 : kLoneBlocks;  // no tile under 3
      const int64_t at = (ob * out.plane + p0 - out.first) * kB;
      set.lone[obs - 3](g.C, plane, out.plane, x + p0 * kB, w_packed + ob * g.C * kB, bias_packed + ob * kB,
                        out.y + at, z ? z + at : nullptr, g.act);
    }
    return;
  }
  for (int64_t ob = ob0, obs = 0; ob < ob1; ob += obs) {
    const int64_t left_blocks = ob1 - ob;
    obs = left_blocks == 3 ? 3 : std::min<int64_t>(2, left_blocks);
    const TileFn* tiles = obs == 1 ? set.one : obs == 2 ? set.two : set.three;
    const int64_t widest = 12 / obs;
    const float* w = w_packed + ob * g.C * kB;
    const float* bias = bias_packed + ob * kB;
    for (int64_t p = p0, px = 0; p < p1; p += px) {
      // The run's pixels in as few tiles as the widest allows, of even widths:
      // 25 as 5 x 5, not 6 + 6 + 6 + 4 + 3 (a tile streams all the weights,
      // whatever its width, and a 3 x 2 tile's six FMA chains leave the FMA
      // units idle; ResNet-50's 7x7 convs' second chunk), 8 as 4 + 4.
      const int64_t left = p1 - p, tiles_left = (left + widest - 1) / widest;
      px = (left + tiles_left - 1) / tiles_left;
      const int64_t at = (ob * out.plane + p - out.first) * kB;
      tiles[px - 1](g.C, plane, out.plane, x + p * kB, w, bias, out.y + at, z ? z + at : nullptr, g.act);
    }
  }
}

void PointwiseRange(const BlockedConvGeometry& g, const BlockedWeights& pw, const TileSet& set, int64_t n, int64_t p0,
                    int64_t p1, int64_t ob0, int64_t ob1) {
  const int64_t plane = g.H * g.W, image = n * g.Mb() * plane * kB;
  PointwiseRangeTo(g, pw.w.data(), pw.bias.data(), set, n, p0, p1, ob0, ob1,
                   {g.y + image, g.z ? g.z + image : nullptr, plane, 0});
}

// ---- Depthwise 3x3 -----------------------------------------------------------------------

// Output rows [oh0, oh1) of one channel block: x [H][W][8], w9 the nine taps'
// weight vectors, y [OH][OW][8], z (null: none) the residual laid out as y.
// Each output vector is finished as it is stored, (sum + z) then activation
// K, as FinishRun would do it after (the same bits).
template <int S, FusedActivation::Kind K>
__attribute__((target("avx2,fma"))) void Depthwise3x3Rows(const BlockedConvGeometry& g, const float* x,
                                                          const float* w9, const float* bias, float* y,
                                                          const float* z, int64_t oh0, int64_t oh1) {
  __m256 wv[9];
  for (int t = 0; t < 9; ++t) wv[t] = _mm256_loadu_ps(w9 + t * kB);
  const __m256 b = _mm256_loadu_ps(bias);
  const int64_t H = g.H, W = g.W, OW = g.OW;
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    const int64_t ih0 = oh * S - g.pt;
    const int64_t yr = oh * OW * kB;  // the row's offset in y (and z)
    int64_t ow = 0;
    const bool rows_inside = ih0 >= 0 && ih0 + 2 < H;
    if (rows_inside) {
      const float* r0 = x + ih0 * W * kB;
      const float* r1 = r0 + W * kB;
      const float* r2 = r1 + W * kB;
      // Columns whose three taps are all inside: iw0 = ow * S - pl >= 0 and iw0 + 2 < W.
      const int64_t first = (g.pl + S - 1) / S;
      for (; ow < first && ow < OW; ++ow) {
        __m256 acc = b;
        for (int kh = 0; kh < 3; ++kh) {
          const float* r = x + (ih0 + kh) * W * kB;
          for (int kw = 0; kw < 3; ++kw) {
            const int64_t iw = ow * S - g.pl + kw;
            if (iw >= 0 && iw < W) acc = _mm256_fmadd_ps(_mm256_loadu_ps(r + iw * kB), wv[kh * 3 + kw], acc);
          }
        }
        StoreFinished<K>(g.act, y, z, yr + ow * kB, acc);
      }
      for (; ow + 4 <= OW && (ow + 3) * S - g.pl + 2 < W; ow += 4) {
        __m256 a0 = b, a1 = b, a2 = b, a3 = b;
        const int64_t iw = ow * S - g.pl;
#pragma GCC unroll 3
        for (int kw = 0; kw < 3; ++kw) {
          const float* c0 = r0 + (iw + kw) * kB;
          const float* c1 = r1 + (iw + kw) * kB;
          const float* c2 = r2 + (iw + kw) * kB;
          a0 = _mm256_fmadd_ps(_mm256_loadu_ps(c0), wv[kw], a0);
          a1 = _mm256_fmadd_ps(_mm256_loadu_ps(c0 + S * kB), wv[kw], a1);
          a2 = _mm256_fmadd_ps(_mm256_loadu_ps(c0 + 2 * S * kB), wv[kw], a2);
          a3 = _mm256_fmadd_ps(_mm256_loadu_ps(c0 + 3 * S * kB), wv[kw], a3);
          a0 = _mm256_fmadd_ps(_mm256_loadu_ps(c1), wv[3 + kw], a0);
          a1 = _mm256_fmadd_ps(_mm256_loadu_ps(c1 + S * kB), wv[3 + kw], a1);
          a2 = _mm256_fmadd_ps(_mm256_loadu_ps(c1 + 2 * S * kB), wv[3 + kw], a2);
          a3 = _mm256_fmadd_ps(_mm256_loadu_ps(c1 + 3 * S * kB), wv[3 + kw], a3);
          a0 = _mm256_fmadd_ps(_mm256_loadu_ps(c2), wv[6 + kw], a0);
          a1 = _mm256_fmadd_ps(_mm256_loadu_ps(c2 + S * kB), wv[6 + kw], a1);
          a2 = _mm256_fmadd_ps(_mm256_loadu_ps(c2 + 2 * S * kB), wv[6 + kw], a2);
          a3 = _mm256_fmadd_ps(_mm256_loadu_ps(c2 + 3 * S * kB), wv[6 + kw], a3);
        }
        StoreFinished<K>(g.act, y, z, yr + ow * kB, a0);
        StoreFinished<K>(g.act, y, z, yr + (ow + 1) * kB, a1);
        StoreFinished<K>(g.act, y, z, yr + (ow + 2) * kB, a2);
        StoreFinished<K>(g.act, y, z, yr + (ow + 3) * kB, a3);
      }
    }
    // Whatever is left: the border, with every tap checked.
    for (; ow < OW; ++ow) {
      __m256 acc = b;
      for (int kh = 0; kh < 3; ++kh) {
        const int64_t ih = ih0 + kh;
        if (ih < 0 || ih >= H) continue;
        const float* r = x + ih * W * kB;
        for (int kw = 0; kw < 3; ++kw) {
          const int64_t iw = ow * S - g.pl + kw;
          if (iw >= 0 && iw < W) acc = _mm256_fmadd_ps(_mm256_loadu_ps(r + iw * kB), wv[kh * 3 + kw], acc);
        }
      }
      StoreFinished<K>(g.act, y, z, yr + ow * kB, acc);
    }
  }
}

// ---- Residual and activation ----------------------------------------------------------

// y[i] = act(y[i] + z[i]) over a run of n floats; z may be null. A last part
// vector (a channels-last output's rows are M floats, e.g. 255) goes masked,
// each lane computed as in a whole one.
template <FusedActivation::Kind K>
__attribute__((target("avx2,fma"))) void FinishRunAvx2(const FusedActivation& act, const float* z, float* y,
                                                       int64_t n) {
  int64_t i = 0;
  for (; i + kB <= n; i += kB) {
    __m256 v = _mm256_loadu_ps(y + i);
    if (z) v = _mm256_add_ps(v, _mm256_loadu_ps(z + i));
    _mm256_storeu_ps(y + i, Activate8<K>(act, v));
  }
  if (i == n) return;
  const __m256i lanes = LanesBetween8(0, n - i);
  __m256 v = _mm256_maskload_ps(y + i, lanes);
  if (z) v = _mm256_add_ps(v, _mm256_maskload_ps(z + i, lanes));
  _mm256_maskstore_ps(y + i, lanes, Activate8<K>(act, v));
}

// The same on sixteen lanes, a last part vector masked (any n: a channels-last
// output's rows are M floats, e.g. 255): Activate16 gives
// Activate8's bits, so the result is the same either way. With SiLU in a
// 32 -> 32 channel 1x1 conv at 160x160 this pass took 0.63 ns an element
// before (eight lanes, the former sigmoid), 0.35 now (CPU-time samples).
// Two vectors an iteration: the exponential ones are long chains of
// dependent operations, and a run is often short (48 pixels, 24 vectors), so
// two chains side by side keep the FMA pipes busier.
template <FusedActivation::Kind K>
__attribute__((target("avx512f"))) void FinishRunAvx512(const FusedActivation& act, const float* z, float* y,
                                                        int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 v0 = _mm512_loadu_ps(y + i), v1 = _mm512_loadu_ps(y + i + 16);
    if (z) {
      v0 = _mm512_add_ps(v0, _mm512_loadu_ps(z + i));
      v1 = _mm512_add_ps(v1, _mm512_loadu_ps(z + i + 16));
    }
    _mm512_storeu_ps(y + i, Activate16<K>(act, v0));
    _mm512_storeu_ps(y + i + 16, Activate16<K>(act, v1));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512 v = _mm512_maskz_loadu_ps(m, y + i);
    if (z) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, z + i));
    _mm512_mask_storeu_ps(y + i, m, Activate16<K>(act, v));
  }
}

template <FusedActivation::Kind K>
void FinishRun(const FusedActivation& act, const float* z, float* y, int64_t n) {
  if (SgemmActiveIsa() == SgemmIsa::kAvx512) return FinishRunAvx512<K>(act, z, y, n);
  FinishRunAvx2<K>(act, z, y, n);
}
using FinishFn = void (*)(const FusedActivation&, const float*, float*, int64_t);

// Output blocks [ob0, ob1) of image n, pixels [p0, p1) of each.
void Finish(const BlockedConvGeometry& g, FinishFn fn, int64_t n, int64_t ob0, int64_t ob1, int64_t p0, int64_t p1) {
  if (!fn) return;
  if (g.nhwc_output) {  // channels last: the blocks' channels of each pixel, one run when they are all of them
    const int64_t m0 = ob0 * kB, m1 = std::min(g.M, ob1 * kB);
    const bool whole_rows = m0 == 0 && m1 == g.M;
    for (int64_t p = p0; p < p1; p = whole_rows ? p1 : p + 1) {
      const int64_t at = g.OutputIndex(n, m0, p);
      fn(g.act, g.z ? g.z + at : nullptr, g.y + at, whole_rows ? (p1 - p0) * g.M : m1 - m0);
    }
    return;
  }
  const int64_t plane = g.OH * g.OW;
  for (int64_t ob = ob0; ob < ob1; ++ob) {
    const int64_t at = ((n * g.Mb() + ob) * plane + p0) * kB;
    fn(g.act, g.z ? g.z + at : nullptr, g.y + at, (p1 - p0) * kB);
  }
}

// The pass that finishes what the tiles left as sums (the residual, the activation), or none.
FinishFn FinishFor(const BlockedConvGeometry& g) {
  if (!g.z && g.act.kind == FusedActivation::Kind::kNone) return nullptr;
  return ForActivation8(g.act.kind, [](auto k) -> FinishFn { return FinishRun<decltype(k)::value>; });
}

bool Supported(const BlockedConvGeometry& g) {
  if (!CpuHasAvx2Fma() || SgemmPortableForced() || g.C % kB != 0 || g.M % kB != 0) return false;
  if (g.pointwise() || BlockedDirectApplies(g) || BlockedDepthwiseKxKShape(g)) return true;
  return g.depthwise() && g.KH == 3 && g.KW == 3 && (g.sh == 1 || g.sh == 2) && g.sw == g.sh && g.dh == 1 &&
         g.dw == 1 && g.pt <= 1 && g.pl <= 1;
}

// ---- Pointwise, channels last (AVX2) ---------------------------------------------------

// A pointwise conv whose reader wants its output channels last (BlockedConv's
// output_layout = "nhwc"; YOLO's detector heads, 255 channels read through a
// Reshape and a Transpose). A task's chunk of pixels goes through the 6 x 2
// tiles into a per-thread buffer, every output block, blocked (each pair of
// blocks' weights stays in L1 across the chunk, as in RunPointwise); the
// pixels' rows of M floats (one contiguous run in y) are then copied out of
// it. So the sums are the blocked tiles' (the AVX-512 pair tiles' bits), and
// the transpose that reads it moves whole rows. YOLO's three heads (64, 128
// and 256 -> 255 channels at 80x80, 40x40, 20x20) ran outside the blocked run
// before: a reorder to NCHW, the SGEMM conv and a TransposeColumnMap moving
// single floats, 6.4 ms of node minimums at 1 thread; now 5.9.

// `pixels` rows of m floats, contiguous at `rows`, from `staged` (blocked:
// block ob's pixel i at (ob * kChunkPixels + i) * 8); a row's last part
// block goes masked, so nothing past the run is written.
__attribute__((target("avx2,fma"))) void CopyStagedToRows(const float* staged, int64_t pixels, int64_t m,
                                                         float* rows) {
  const int64_t whole = m / kB;
  const __m256i tail = LanesBetween8(0, m % kB);
  for (int64_t i = 0; i < pixels; ++i) {
    float* row = rows + i * m;
    const float* from = staged + i * kB;
    for (int64_t ob = 0; ob < whole; ++ob)
      _mm256_storeu_ps(row + ob * kB, _mm256_loadu_ps(from + ob * kChunkPixels * kB));
    if (m % kB) _mm256_maskstore_ps(row + whole * kB, tail, _mm256_loadu_ps(from + whole * kChunkPixels * kB));
  }
}

void RunPointwiseChannelsLastAvx2(KernelContext& ctx, const BlockedConvGeometry& g, const BlockedWeights& pw) {
  // The residual (laid out as the output) is added to the copied rows, the activation after it.
  TileSet tiles = TilesFor(g.z ? FusedActivation::Kind::kNone : g.act.kind);
  if (g.z) tiles.finishes = false;
  const FinishFn finish = tiles.finishes ? nullptr : FinishFor(g);
  const int64_t plane = g.H * g.W, Mb = g.Mb();
  const int64_t chunks = (plane + kChunkPixels - 1) / kChunkPixels;
  ParallelTasks(ctx, g.N * chunks, [&](int64_t t) {
    const int64_t n = t / chunks, p0 = t % chunks * kChunkPixels, p1 = std::min(plane, p0 + kChunkPixels);
    thread_local std::vector<float> staging;
    staging.resize(static_cast<size_t>(Mb * kChunkPixels * kB));
    PointwiseRangeTo(g, pw.w.data(), pw.bias.data(), tiles, n, p0, p1, 0, Mb,
                     {staging.data(), nullptr, kChunkPixels, p0});
    const int64_t at = g.OutputIndex(n, 0, p0);
    CopyStagedToRows(staging.data(), p1 - p0, g.M, g.y + at);
    if (finish) finish(g.act, g.z ? g.z + at : nullptr, g.y + at, (p1 - p0) * g.M);
  });
}

void RunPointwise(KernelContext& ctx, const BlockedConvGeometry& g, const BlockedWeights& pw, FinishFn finish) {
  const TileSet tiles = TilesFor(g.act.kind);
  const int threads = NumThreads(ctx);
  const int64_t plane = g.H * g.W, Mb = g.Mb();
  // Chunks of about kChunkPixels, starting on whole tiles; on several threads
  // a multiple of the thread count where an image has at least one a thread,
  // so the threads' shares are equal (28x28: 17 chunks of 46 pixels gave one
  // thread 9 of them, 414 pixels where 392 was its half; now 18 of 43-44).
  int64_t chunks = (plane + kChunkPixels - 1) / kChunkPixels;
  if (threads > 1 && chunks >= threads) chunks = (chunks + threads - 1) / threads * threads;
  const int64_t pairs = (Mb + 1) / 2;
  auto chunk_start = [&](int64_t i) { return TileAlignedStart(i, chunks, plane, kTilePixels); };
  // Few pixels (a small image): the output blocks are shared out too, in pairs.
  const int64_t wanted = 4 * threads, pixel_tasks = g.N * chunks;
  int64_t groups = threads > 1 && pixel_tasks < wanted ? std::min(pairs, (wanted + pixel_tasks - 1) / pixel_tasks) : 1;
  // Weights beyond L2 (ResNet-50's last two stages: 1-4 MB over 14x14 and
  // 7x7 planes): groups of output blocks whose weights L2 keeps, each taken
  // over every pixel chunk before the next group, so that the weights come
  // from L3 or memory once, not once a chunk, and each thread reads only
  // its groups' (pixel-major, both threads read all of them).
  const int64_t weight_bytes = 2 * pairs * kB * g.C * static_cast<int64_t>(sizeof(float));
  const bool by_channels = weight_bytes > kWeightsInL2;
  if (by_channels) groups = std::min(pairs, std::max(groups, (weight_bytes + kGroupWeights - 1) / kGroupWeights));
  ParallelTasks(ctx, pixel_tasks * groups, [&](int64_t t) {
    const int64_t group = by_channels ? t / pixel_tasks : t % groups;
    const int64_t pixel_task = by_channels ? t % pixel_tasks : t / groups;
    const int64_t n = pixel_task / chunks, chunk = pixel_task % chunks;
    const int64_t p0 = chunk_start(chunk), p1 = chunk_start(chunk + 1);
    const int64_t ob0 = 2 * (group * pairs / groups), ob1 = std::min(Mb, 2 * ((group + 1) * pairs / groups));
    if (pw.avx512()) PointwiseRangeAvx512(g, pw.pairs, tiles.finishes, n, p0, p1, ob0, ob1);
    else PointwiseRange(g, pw, tiles, n, p0, p1, ob0, ob1);
    if (!tiles.finishes) Finish(g, finish, n, ob0, ob1, p0, p1);
  });
}

constexpr int64_t kStripsPerThreadBytes = 512 * 1024;  // see RunDepthwise

// The AVX2 depthwise rows kernel for a stride, finishing the outputs itself
// for the cheap activations as the pointwise tiles do (TilesFor).
template <FusedActivation::Kind K>
BlockedDepthwiseRows DepthwiseRowsOf(int64_t stride, bool finishes) {
  return {stride == 1 ? Depthwise3x3Rows<1, K> : Depthwise3x3Rows<2, K>, finishes};
}
BlockedDepthwiseRows DepthwiseRowsFor(FusedActivation::Kind kind, int64_t stride) {
  using Kind = FusedActivation::Kind;
  if (kind == Kind::kRelu) return DepthwiseRowsOf<Kind::kRelu>(stride, true);
  if (kind == Kind::kClip) return DepthwiseRowsOf<Kind::kClip>(stride, true);
  return DepthwiseRowsOf<Kind::kNone>(stride, kind == Kind::kNone);
}

void RunDepthwise(KernelContext& ctx, const BlockedConvGeometry& g, const BlockedWeights& pw, FinishFn finish) {
  const int threads = NumThreads(ctx);
  const int64_t Cb = g.Cb(), planes = g.N * Cb;
  const int64_t bytes = planes * g.OH * g.OW * kB * static_cast<int64_t>(sizeof(float));
  // Row strips outermost (pixel-major, as the pointwise convs around it); from
  // an output the size of this machine's L2 on, at least one a thread, so
  // each thread's share is rows of every plane (ParallelTasks); smaller
  // outputs are shared out by planes.
  const int64_t least = bytes >= kStripsPerThreadBytes ? threads : 1;
  const int64_t strips = std::min(g.OH, std::max<int64_t>(least, (4 * threads + planes - 1) / planes));
  // Stride 1 on AVX-512: two pixels of a block per zmm (depthwise_blocked_avx512.cc).
  const BlockedDepthwiseRows rows = BlockedDepthwiseKernelFor(g);
  ParallelTasks(ctx, planes * strips, [&](int64_t t) {
    const int64_t strip = t / planes, p = t % planes, cb = p % Cb;
    const int64_t oh0 = strip * g.OH / strips, oh1 = (strip + 1) * g.OH / strips;
    const int64_t at = p * g.OH * g.OW * kB;
    rows.fn(g, g.x + p * g.H * g.W * kB, pw.w.data() + cb * g.KH * g.KW * kB, pw.bias.data() + cb * kB, g.y + at,
            rows.finishes && g.z ? g.z + at : nullptr, oh0, oh1);
    if (!rows.finishes) Finish(g, finish, p / Cb, cb, cb + 1, oh0 * g.OW, oh1 * g.OW);
  });
}

// NCHW planes <-> blocked for pixels [p0, p1) of one channel block: 8x8
// transposes between eight channel planes and eight pixels' vectors, the
// last pixels one at a time. `to_blocked` picks the direction; `nchw` is one
// image's first plane of the block, `blocked` its block.
__attribute__((target("avx2"))) void ReorderPixels(bool to_blocked, int64_t plane, int64_t p0, int64_t p1, float* nchw,
                                                   float* blocked) {
  int64_t p = p0;
  for (; p + kB <= p1; p += kB) {
    if (to_blocked) Transpose8x8Avx2(nchw + p, plane, blocked + p * kB, kB);
    else Transpose8x8Avx2(blocked + p * kB, kB, nchw + p, plane);
  }
  for (; p < p1; ++p)
    for (int64_t l = 0; l < kB; ++l) {
      if (to_blocked) blocked[p * kB + l] = nchw[l * plane + p];
      else nchw[l * plane + p] = blocked[p * kB + l];
    }
}

bool ReorderSupported() { return CpuHasAvx2Fma() && !SgemmPortableForced(); }

}  // namespace

BlockedDepthwiseRows BlockedDepthwiseKernelFor(const BlockedConvGeometry& g) {
  if (!Supported(g) || !g.depthwise()) return {};
  if (const BlockedDepthwiseRows fast = BlockedDepthwiseAvx512For(g); fast.fn) return fast;
  if (const BlockedDepthwiseRows kxk = BlockedDepthwiseKxKFor(g); kxk.fn) return kxk;
  return DepthwiseRowsFor(g.act.kind, g.sh);
}

BlockedFinishFn BlockedFinishFor(const BlockedConvGeometry& g) { return FinishFor(g); }

bool BlockedPointwiseOnAvx2(const BlockedConvGeometry& g) { return g.pointwise() && Supported(g) && !UsePairs(g); }

void PointwiseRowsToAvx2(const BlockedConvGeometry& g, const BlockedPointwiseWeights& w, int64_t n, int64_t p0,
                         int64_t p1, const PointwiseOut& out) {
  const TileSet tiles = TilesFor(g.act.kind);
  PointwiseRangeTo(g, w.w.data(), w.bias.data(), tiles, n, p0, p1, 0, g.Mb(), out);
  const FinishFn finish = tiles.finishes ? nullptr : FinishFor(g);
  for (int64_t ob = 0; finish && ob < g.Mb(); ++ob) {
    const int64_t at = (ob * out.plane + p0 - out.first) * kB;
    finish(g.act, out.z ? out.z + at : nullptr, out.y + at, (p1 - p0) * kB);
  }
}

void RunBlockedPointwiseOrDepthwise(KernelContext& ctx, const BlockedConvGeometry& g, size_t weights) {
  if (!Supported(g) || !(g.pointwise() || g.depthwise()) || g.N == 0 || g.OH == 0 || g.OW == 0)
    return BlockedConvReference(ctx, g);
  const std::shared_ptr<const BlockedWeights> packed = PackedFor(ctx, g, weights);
  if (g.pointwise()) RunPointwise(ctx, g, *packed, FinishFor(g));
  else RunDepthwise(ctx, g, *packed, FinishFor(g));
}
#else
BlockedDepthwiseRows BlockedDepthwiseKernelFor(const BlockedConvGeometry&) { return {}; }
BlockedFinishFn BlockedFinishFor(const BlockedConvGeometry&) { return nullptr; }
bool BlockedPointwiseOnAvx2(const BlockedConvGeometry&) { return false; }
void PointwiseRowsToAvx2(const BlockedConvGeometry&, const BlockedPointwiseWeights&, int64_t, int64_t, int64_t,
                         const PointwiseOut&) {}
void RunBlockedPointwiseOrDepthwise(KernelContext& ctx, const BlockedConvGeometry& g, size_t) {
  BlockedConvReference(ctx, g);
}
#endif  // NEE_BLOCKED_X86

void PackBlockedPointwise(const BlockedConvGeometry& g, BlockedPointwiseWeights* out) {
  const int64_t Mb = g.Mb();
  out->w.assign(static_cast<size_t>(Mb * g.C * kChannelBlock), 0.f);
  out->bias.assign(static_cast<size_t>(Mb * kChannelBlock), 0.f);
  for (int64_t m = 0; m < g.M; ++m)
    for (int64_t c = 0; c < g.C; ++c)
      out->w[(m / kChannelBlock * g.C + c) * kChannelBlock + m % kChannelBlock] = g.w[m * g.C + c];
  if (g.bias) std::copy(g.bias, g.bias + g.M, out->bias.begin());
}

void PackBlockedDepthwise(const BlockedConvGeometry& g, BlockedDepthwiseWeights* out) {
  const int64_t taps = g.KH * g.KW, Mb = g.Mb();
  out->w.assign(static_cast<size_t>(Mb * taps * kChannelBlock), 0.f);
  out->bias.assign(static_cast<size_t>(Mb * kChannelBlock), 0.f);
  for (int64_t m = 0; m < g.M; ++m)
    for (int64_t t = 0; t < taps; ++t) out->w[(m / kChannelBlock * taps + t) * kChannelBlock + m % kChannelBlock] =
        g.w[m * taps + t];
  if (g.bias) std::copy(g.bias, g.bias + g.M, out->bias.begin());
}

namespace {
// Both reorders: the input's dims and, when the fast path takes it, the
// output's dims; 8x8 transposes per (image, pixel range, channel block).
Status Reorder(KernelContext& ctx, bool to_blocked) {
#ifdef NEE_BLOCKED_X86
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  int64_t C = to_blocked && x->rank() == 4 ? x->dim(1) : 0;
  if (!to_blocked) {
    NEE_ASSIGN_OR_RETURN(C, ctx.node().GetInt("channels"));
  }
  const bool shape = to_blocked ? x->rank() == 4 : x->rank() == 5 && x->dim(4) == kB && x->dim(1) * kB == C;
  if (ReorderSupported() && x->dtype() == DataType::kFloat && shape && C % kB == 0) {
    const int64_t N = x->dim(0), Cb = C / kB, plane = x->dim(2) * x->dim(3);
    std::vector<int64_t> dims = {N, C, x->dim(2), x->dim(3)};
    if (to_blocked) dims = {N, Cb, x->dim(2), x->dim(3), kB};
    NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, dims));
    float* in = const_cast<float*>(x->data<float>());  // only read: ReorderBlock writes the other side
    float* out = y.data<float>();
    float* nchw = to_blocked ? in : out;
    float* blocked = to_blocked ? out : in;
    // Tasks are pixel ranges of an image, all channel blocks each: the convs on either side run pixel-major
    // tasks, so each thread reorders the pixels it wrote or will read (by channel block, every thread read
    // half its input from the other core: ResNet-50's reorders ran slower at 2 threads than at 1; the model
    // at 2 threads -0.6% with the vCPUs far apart, -0.4% near).
    ParallelImageRanges(ctx, N, RangesPerImage(ctx, plane, 64), plane, kB, [&](int64_t n, int64_t p0, int64_t p1) {
      for (int64_t cb = 0; cb < Cb; ++cb) {
        const int64_t offset = (n * Cb + cb) * kB * plane;
        ReorderPixels(to_blocked, plane, p0, p1, nchw + offset, blocked + offset);
      }
    });
    return Status::Ok();
  }
#endif
  (void)to_blocked;
  return RunReference(ctx);
}
}  // namespace

Status ToBlockedFloat(KernelContext& ctx) { return Reorder(ctx, true); }
Status FromBlockedFloat(KernelContext& ctx) { return Reorder(ctx, false); }

namespace {
#ifdef NEE_BLOCKED_X86
// A 1x1 conv with a stride and no padding (ResNet's downsampling shortcuts):
// the pointwise conv of the pixels it reads. Every pixel read must lie in
// the input: a bottom or right pad (an ai.nee BlockedConv written by hand;
// the layout pass gives a 1x1 conv none) would read past a plane.
bool StridedPointwise(const BlockedConvGeometry& g) {
  return !g.nchw_input && g.group == 1 && g.KH == 1 && g.KW == 1 && g.pt == 0 && g.pl == 0 && g.dh == 1 &&
         g.dw == 1 && (g.sh > 1 || g.sw > 1) && g.N > 0 && g.OH > 0 && g.OW > 0 && (g.OH - 1) * g.sh < g.H &&
         (g.OW - 1) * g.sw < g.W && CpuHasAvx2Fma() && !SgemmPortableForced();
}

// Gathers the pixels a strided 1x1 conv reads, [N, Cb, OH, OW, 8], into the
// calling thread's scratch, and returns the pointwise conv over them: one
// pass over a quarter of the input, then the pointwise tiles, where the
// direct tiles over the strided input ran at 85-90 GFLOP/s (each pixel's
// eight channels half a cache line, the lines refetched from L2 for every
// pair of output blocks). The same products in the same order.
BlockedConvGeometry SubsampledAsPointwise(KernelContext& ctx, const BlockedConvGeometry& g) {
  const int64_t planes = g.N * g.Cb(), in_plane = g.H * g.W * kB, out_plane = g.OH * g.OW * kB;
  thread_local SgemmScratch scratch;  // the workers read it while this thread waits
  float* gathered = scratch.Get(planes * out_plane);
  // Tasks of output rows, every block each, as the pointwise tasks after it
  // take pixels: each thread gathers what it then reads, from the rows it
  // wrote in the layer before (by planes, half of both crossed cores).
  const int64_t parts = std::min<int64_t>(g.OH, 4 * NumThreads(ctx));
  ParallelTasks(ctx, g.N * parts, [&](int64_t task) {
    const int64_t n = task / parts, part = task % parts;
    const int64_t oh0 = part * g.OH / parts, oh1 = (part + 1) * g.OH / parts;
    for (int64_t plane = n * g.Cb(); plane < (n + 1) * g.Cb(); ++plane) {
      const float* src = g.x + plane * in_plane;
      float* dst = gathered + plane * out_plane;
      for (int64_t oh = oh0; oh < oh1; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow)
          std::copy_n(src + (oh * g.sh * g.W + ow * g.sw) * kB, kB, dst + (oh * g.OW + ow) * kB);
    }
  });
  BlockedConvGeometry pointwise = g;
  pointwise.x = gathered;
  pointwise.H = g.OH;
  pointwise.W = g.OW;
  pointwise.sh = pointwise.sw = 1;
  return pointwise;
}
#endif

// A group-1 3x3 stride-1 conv on blocked input, begin pads inside the window.
bool WinogradShape(const BlockedConvGeometry& g) {
  return !g.nchw_input && g.group == 1 && g.KH == 3 && g.KW == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 &&
         g.dw == 1 && g.pt >= 0 && g.pl >= 0 && g.pt < 3 && g.pl < 3;
}

// Where the AVX2 direct kernel runs a 3x3 stride-1 conv faster than
// Winograd: under 32 input channels, where the transforms weigh most against
// the multiplies they save. YOLO's 16 -> 16-channel conv on 160x160 (Zen 3,
// node minimums, the two kernels alternating in one process, quiet and beside
// a memory-streaming process): 1 thread 1.67-1.79 ms Winograd, 1.56-1.61
// direct; 2 threads 1.31-1.41 vs 0.87-0.90. At 32 channels (80x80) Winograd
// still won at 1 thread (1.12 vs 1.41 ms) and tied at 2; on ResNet-50's 64-512
// channel convs it won every one. Whatever the plane: the raw weights may go.
bool DirectAlwaysBeatsWinograd(const BlockedConvGeometry& g) { return g.C < 32 && BlockedDirectAvx2Applies(g); }

// And where Winograd's 4x4 output tiles overrun the plane by 40% or more
// (10x10 computed as 12x12; 7x7 and 14x14 overrun it by 31%). nudenet's
// 10x10 convs (Zen 3, node minimums, 3 processes each way): 128 -> 128
// channels 0.95-0.97 of the Winograd time at 1 thread, 0.86-0.89 at 2; 256 ->
// 64 0.80-0.82 and 0.77-0.78. On 20x20 planes (no overrun) the direct kernel
// took 1.19-1.35x Winograd's time; ResNet-50's 512-channel 7x7 convs 1.11x,
// its 256-channel 14x14 convs 1.74-1.95x.
bool DirectBeatsWinograd(const BlockedConvGeometry& g) {
  const int64_t tiled = (g.OH + 3) / 4 * 4 * ((g.OW + 3) / 4 * 4);
  return DirectAlwaysBeatsWinograd(g) || (BlockedDirectAvx2Applies(g) && 5 * tiled >= 7 * g.OH * g.OW);
}

// The key of a node's geometry: each input's rank and dims (-1 for one that
// is absent); nothing when an input is not a float tensor (PlanBlockedConv
// then says what is wrong).
bool GeometryKey(const KernelContext& ctx, PreparedCache::Key* key) {
  for (size_t i = 0; i < 4; ++i) {
    if (!ctx.has_input(i)) {
      key->push_back(-1);
      continue;
    }
    Result<const Tensor*> t = ctx.InputTensor(i);
    if (!t.ok() || t.value()->dtype() != DataType::kFloat) return false;
    key->push_back(t.value()->rank());
    key->insert(key->end(), t.value()->dims().begin(), t.value()->dims().end());
  }
  return true;
}

// PlanBlockedConv with the node's attributes read once per session and
// input shapes, not on every run: reading them (kernel, strides, pads,
// activation, by name) took about 1% of MobileNetV2's run at 1 thread.
// A cached geometry was checked by PlanBlockedConv for exactly these
// shapes; only the tensors' addresses and the output are new each run.
Result<BlockedConvGeometry> PlanCached(KernelContext& ctx) {
  PreparedCache::Key key;
  if (!ctx.prepared() || !GeometryKey(ctx, &key)) return PlanBlockedConv(ctx);
  std::optional<BlockedConvGeometry> planned;  // this run's, when this run builds the entry
  auto shape = ctx.prepared()->GetOrBuild<BlockedConvGeometry>(
      key, [&]() -> Result<std::shared_ptr<const BlockedConvGeometry>> {
        NEE_ASSIGN_OR_RETURN(planned, PlanBlockedConv(ctx));
        auto kept = std::make_shared<BlockedConvGeometry>(*planned);
        kept->x = kept->w = kept->bias = kept->z = nullptr;
        kept->y = nullptr;
        return std::shared_ptr<const BlockedConvGeometry>(std::move(kept));
      });
  if (!shape.ok()) return shape.status();
  if (planned) return *planned;
  BlockedConvGeometry g = *shape.value();
  auto data = [&](size_t i) { return ctx.has_input(i) ? ctx.InputTensor(i).value()->data<float>() : nullptr; };
  g.x = data(0);
  g.w = data(1);
  g.bias = data(2);
  g.z = data(3);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, g.OutputDims()));
  g.y = y.data<float>();
  return g;
}
}  // namespace

// Whether this conv's path reads each residual vector just before it stores
// the output vector in its place (so the output may lie on the residual:
// BlockedConvOverwritableInput): the pointwise tiles, strided ones too on
// their gathered input, that finish as they store. Any other path reads a
// copy of a residual it would overwrite (ResidualApart).
bool ReadsResidualInPlace(const BlockedConvGeometry& g) {
  return !g.nhwc_output && (g.pointwise() || StridedPointwise(g)) && g.C % kB == 0 && g.M % kB == 0 &&
         CpuHasAvx2Fma() && !SgemmPortableForced() && TilesFor(g.act.kind).finishes;
}

Status BlockedConvFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(BlockedConvGeometry g, PlanCached(ctx));
#ifdef NEE_BLOCKED_X86
  g.z = ResidualApart(g, ReadsResidualInPlace(g));  // an output planned on the residual
  if (g.nhwc_output) {  // channels last: the AVX-512 pair tiles store it, the AVX2 tiles through a staging buffer
    const bool some = g.N > 0 && g.OH > 0 && g.OW > 0 && g.pointwise() && g.C % kB == 0;
    if (some && UsePairs(g)) RunPointwise(ctx, g, *OwnPackedFor(ctx, g), FinishFor(g));
    else if (some && CpuHasAvx2Fma() && !SgemmPortableForced())
      RunPointwiseChannelsLastAvx2(ctx, g, *OwnPackedFor(ctx, g));
    else BlockedConvReference(ctx, g);
    return Status::Ok();
  }
  if (g.nchw_input) {  // a stem conv on its NCHW input (blocked_stem_avx512.h)
    const bool some = g.N > 0 && g.OH > 0 && g.OW > 0;
    if (BlockedStemApplies(g) && some) RunBlockedStem(ctx, g);
    else if (BlockedStemAvx2Applies(g) && some) RunBlockedStemAvx2(ctx, g);
    else BlockedConvReference(ctx, g);
    return Status::Ok();
  }
  if (WinogradShape(g) && !DirectBeatsWinograd(g) && g.N > 0 && g.OH > 0 && g.OW > 0) {  // fewer multiplies
    const Winograd3x3 wg{g.N, g.C, g.H, g.W, g.M, g.OH, g.OW, g.pt, g.pl};
    if (WinogradBlockedApplies(ctx, wg)) return ConvWinogradBlocked(ctx, wg, g.x, g.w, g.bias, g.act, g.z, g.y);
  }
  if (BlockedDirectAvx2Applies(g) && g.N > 0 && g.OH > 0 && g.OW > 0) {  // k x k without AVX-512
    // Only a conv Winograd could take on other shapes (WinogradApplies wants
    // two output rows and columns, DirectBeatsWinograd a plane its tiles fit)
    // may need its weights in place again.
    RunBlockedDirectAvx2(ctx, g, /*drop_weights=*/!WinogradShape(g) || DirectAlwaysBeatsWinograd(g));
    return Status::Ok();
  }
  if (StridedPointwise(g)) g = SubsampledAsPointwise(ctx, g);
  if (Supported(g) && g.N > 0 && g.OH > 0 && g.OW > 0) {
    if (!g.pointwise() && !g.depthwise()) {
      RunBlockedDirect(ctx, g);
      return Status::Ok();
    }
    const std::shared_ptr<const BlockedWeights> packed = OwnPackedFor(ctx, g);
    const FinishFn finish = FinishFor(g);
    if (g.pointwise()) RunPointwise(ctx, g, *packed, finish);
    else RunDepthwise(ctx, g, *packed, finish);
    return Status::Ok();
  }
#else
  g.z = ResidualApart(g, false);
#endif
  BlockedConvReference(ctx, g);
  return Status::Ok();
}

}  // namespace nee::cpu
