// Conv and com.microsoft FusedConv on bfloat16 with AVX512-BF16 (vdpbf16ps):
// a group-1 2-D conv as the GEMM Y[M, pixels] = W[M, K] x im2col(X)[K, pixels],
// K = C * KH * KW, which lands in NCHW directly; a depthwise one (group = C =
// M) sixteen channels at a time in float32 lanes (RunBf16Depthwise, below).
//
//  - The weights are A: packed once per session into blocks of 12 output
//    channels, k pair by k pair (12 words of two bfloat16 each), so a tile
//    broadcasts them from one contiguous run (rows of W read in place would
//    lie 4 KiB apart at K = 2048 and evict each other from L1).
//  - The pixels are B: per task a chunk of whole 32-pixel panels of one image
//    is laid out as bf16_gemm.h's panels of k pairs, gathered straight
//    from X by masked loads (stride 2: two loads and a word permute).
//  - A tile is 12 channels x 32 pixels (24 zmm accumulators), float32 sums;
//    the epilogue adds the bias, rounds to bfloat16 and, for FusedConv, adds
//    Z and applies the activation, rounding after each step as the unfused
//    bfloat16 graph does (Conv, Add, activation each round their output), so
//    a FusedConv gives the unfused nodes' values up to float32 summation order
//    (the rounding before Relu or Clip is the final one's: they commute). The
//    rounding is vcvtneps2bf16's, which makes denormals zero as vdpbf16ps does.
//
// Each output's sum runs over k in the same order whatever the task split, so
// the results are the same at any thread count. vdpbf16ps treats denormal
// inputs and results as zero (see bf16_gemm.h). Shapes and activations the
// kernel does not take, and CPUs without AVX512-BF16, run the reference.
#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "base/cpu_isa.h"
#include "base/mapped_file.h"
#include "ep/cpu/bf16_gemm.h"
#include "ep/cpu/conv_common.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/parallel_tasks.h"
#include "ir/float_formats.h"
#include "ops/nn_util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "ep/cpu/bf16_simd.h"
#include "ep/cpu/transpose16_avx512.h"
#define NEE_CONV_BF16_X86 1
#endif

namespace nee::cpu {

namespace {

bool IsBf16(const Tensor& t) { return t.dtype() == DataType::kBFloat16; }

// The conv's geometry (NCHW, group 1).
struct Bf16ConvShape {
  int64_t N = 0, C = 0, H = 0, W = 0;  // input
  int64_t M = 0, OH = 0, OW = 0;       // output
  int64_t KH = 0, KW = 0;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;
  bool depthwise = false;  // group = C = M: one KH x KW filter per channel
  // The GEMM's k runs tap by tap (kh, kw), and within a tap over channel
  // pairs (c, c + 1), so a pair of B is two input planes at one offset; an
  // odd C gets a zero channel (and zero weights) to pair with its last one.
  int64_t channel_pairs() const { return (C + 1) / 2; }
  int64_t taps() const { return KH * KW; }
  int64_t pairs() const { return taps() * channel_pairs(); }
  int64_t pixels() const { return OH * OW; }
};

// Fills `s`, or returns false for what the kernel does not take (the
// reference kernel then runs and reports any invalid input).
bool PlanBf16Conv(const KernelContext& ctx, const Tensor& x, const Tensor& w, const Tensor* b, Bf16ConvShape& s) {
  if (!IsBf16(x) || !IsBf16(w) || x.rank() != 4 || w.rank() != 4) return false;
  auto group = ctx.node().GetInt("group", 1);
  if (!group.ok()) return false;
  s.N = x.dim(0);
  s.C = x.dim(1);
  s.H = x.dim(2);
  s.W = x.dim(3);
  s.M = w.dim(0);
  s.depthwise = group.value() != 1;
  if (s.depthwise ? group.value() != s.C || s.M != s.C || w.dim(1) != 1 : w.dim(1) != s.C) return false;
  if (b && (!IsBf16(*b) || b->rank() != 1 || b->num_elements() != s.M)) return false;
  std::vector<int64_t> kernel{w.dim(2), w.dim(3)};
  auto spec = nn::ReadWindowSpec(ctx.node(), 2, &kernel);
  if (!spec.ok() || spec.value().kernel != kernel) return false;
  nn::WindowSpec& ws = spec.value();
  auto oh = nn::WindowOutputDim(ctx.node(), ws, 0, s.H);
  auto ow = nn::WindowOutputDim(ctx.node(), ws, 1, s.W);
  if (!oh.ok() || !ow.ok()) return false;
  s.OH = oh.value();
  s.OW = ow.value();
  s.KH = kernel[0];
  s.KW = kernel[1];
  s.sh = ws.strides[0];
  s.sw = ws.strides[1];
  s.dh = ws.dilations[0];
  s.dw = ws.dilations[1];
  s.pt = ws.pad_begin(0);
  s.pl = ws.pad_begin(1);
  return s.N > 0 && s.C > 0 && s.M > 0 && s.OH > 0 && s.OW > 0 && s.KH > 0 && s.KW > 0;
}

constexpr int64_t kRows = kBf16TileRows;     // output channels per tile
constexpr int64_t kPanel = kBf16PanelWidth;  // pixels per panel

// W [M, C, KH, KW] in blocks of 12 output channels, k pair by k pair in
// Bf16ConvShape's order: block b, pair (tap t, channel pair q) holds 12
// words (W[12b + r][2q][t], W[12b + r][2q + 1][t]); channels past M and
// past C are zero.
class Bf16ConvWeights {
 public:
  Bf16ConvWeights(const uint16_t* w, const Bf16ConvShape& s) : pairs_(s.pairs()) {
    const int64_t blocks = (s.M + kRows - 1) / kRows, taps = s.taps(), cpairs = s.channel_pairs();
    data_ = MakeAlignedArray<uint32_t>(static_cast<size_t>(blocks * pairs_ * kRows));
    auto weight = [&](int64_t row, int64_t c, int64_t t) -> uint32_t {
      return row < s.M && c < s.C ? w[(row * s.C + c) * taps + t] : 0u;
    };
    for (int64_t blk = 0; blk < blocks; ++blk)
      for (int64_t t = 0; t < taps; ++t)
        for (int64_t q = 0; q < cpairs; ++q)
          for (int64_t r = 0; r < kRows; ++r) {
            const int64_t row = blk * kRows + r;
            data_[static_cast<size_t>((blk * pairs_ + t * cpairs + q) * kRows + r)] =
                weight(row, 2 * q, t) | weight(row, 2 * q + 1, t) << 16;
          }
  }
  int64_t pairs() const { return pairs_; }
  const uint32_t* block(int64_t b) const { return data_.get() + b * pairs_ * kRows; }

 private:
  int64_t pairs_;
  AlignedArray<uint32_t> data_;
};

// What the epilogue applies: bias (widened once), Z and the activation.
struct Bf16ConvFinish {
  const float* bias = nullptr;  // M values, or null
  const uint16_t* z = nullptr;  // the output's shape, or null
  FusedActivation act;          // kNone for a plain Conv
  bool fused = false;           // FusedConv: round, add Z, round, activate
  // The activation commutes with rounding to bfloat16 (none, Relu, Clip:
  // monotone, and a bfloat16 value stays one), so the rounding before it
  // can be left to the final one: the same values.
  bool commutes = true;
};

bool ActivationTaken(const FusedActivation& act) {
  using K = FusedActivation::Kind;
  return act.kind == K::kNone || act.kind == K::kRelu || act.kind == K::kClip || act.kind == K::kLeakyRelu;
}

#ifdef NEE_CONV_BF16_X86

// Packed once per session when W is a constant, per call otherwise. W
// itself is kept (an input too small for the window sends a later run to
// the reference kernel, which reads it), but the pages of a mapped model
// file go back to the page cache once read. `pack()` returns a
// std::shared_ptr<const Packed>.
template <typename Packed, typename PackFn>
std::shared_ptr<const Packed> PackedOnce(KernelContext& ctx, const Tensor& w, const Bf16ConvShape& s, PackFn&& pack) {
  if (!ctx.prepared() || !ctx.input_is_constant(1)) return pack();
  auto packed = ctx.prepared()->GetOrBuild<Packed>(
      {s.M, s.C, s.KH, s.KW}, [&]() -> Result<std::shared_ptr<const Packed>> {
        std::shared_ptr<const Packed> built = pack();
        ReleaseFileBackedPages(w.raw_data(), w.byte_size());
        return built;
      });
  return packed.ok() ? packed.value() : pack();
}

std::shared_ptr<const Bf16ConvWeights> PackWeights(KernelContext& ctx, const Tensor& w, const Bf16ConvShape& s) {
  return PackedOnce<Bf16ConvWeights>(
      ctx, w, s, [&] { return std::make_shared<const Bf16ConvWeights>(w.data<uint16_t>(), s); });
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// ---- The pixels' panels (B) ---------------------------------------------------------

// Lanes of a panel that read one input row at one tap: lane j (in `mask`)
// reads plane[offset + j * sw].
struct PanelRun {
  __mmask32 mask;
  int64_t offset;
};

// The runs of tap (kh, kw) for the panel of pixels [p, p + cols): one per
// output row the panel crosses whose tap row is inside the image, its lanes
// those whose tap column is; padding reads no lane (zero). Returns the count.
int TapRuns(const Bf16ConvShape& s, int64_t kh, int64_t kw, int64_t p, int64_t cols, PanelRun* runs) {
  if (s.KH == 1 && s.KW == 1 && s.sh == 1 && s.sw == 1 && s.pt == 0 && s.pl == 0) {  // X's own rows
    runs[0] = {cols >= 32 ? ~__mmask32(0) : (__mmask32(1) << cols) - 1, p};
    return 1;
  }
  int count = 0;
  for (int64_t j = 0; j < cols;) {
    const int64_t oh = (p + j) / s.OW, ow = (p + j) % s.OW;
    const int64_t n = std::min(s.OW - ow, cols - j);
    const int64_t ih = oh * s.sh - s.pt + kh * s.dh;
    if (ih >= 0 && ih < s.H) {
      const int64_t iw0 = ow * s.sw - s.pl + kw * s.dw;  // the tap column of lane j
      const int64_t lo = iw0 >= 0 ? 0 : std::min(n, (-iw0 + s.sw - 1) / s.sw);
      const int64_t hi = iw0 >= s.W ? 0 : std::min(n, (s.W - 1 - iw0) / s.sw + 1);
      if (hi > lo) {
        const __mmask32 bits = static_cast<__mmask32>(((uint64_t{1} << (hi - lo)) - 1) << (j + lo));
        runs[count++] = {bits, ih * s.W + iw0 - j * s.sw};
      }
    }
    j += n;
  }
  return count;
}

// The 32 lanes of one input plane the runs read (zero elsewhere). Masked
// lanes are never read, so a run's base may lie outside the plane.
// (BMI2 for pdep: every AVX-512 CPU has it.)
#define NEE_BF16_PACK_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,bmi2")))

NEE_BF16_PACK_TARGET inline __m512i GatherLanes(const Bf16ConvShape& s, const uint16_t* plane,
                                                const PanelRun* runs, int count) {
  __m512i v = _mm512_setzero_si512();
  if (s.sw == 1) {
    for (int i = 0; i < count; ++i) v = _mm512_mask_loadu_epi16(v, runs[i].mask, plane + runs[i].offset);
  } else if (s.sw == 2) {
    // Words 2j of two vectors, lane j's mask bit spread to word 2j.
    alignas(64) static const uint16_t kEvens[32] = {0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20,
                                                    22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42,
                                                    44, 46, 48, 50, 52, 54, 56, 58, 60, 62};
    const __m512i evens = _mm512_load_si512(kEvens);
    for (int i = 0; i < count; ++i) {
      const uint64_t spread = _pdep_u64(runs[i].mask, 0x5555555555555555ull);
      const uint16_t* base = plane + runs[i].offset;
      const __m512i a = _mm512_maskz_loadu_epi16(static_cast<__mmask32>(spread), base);
      const __m512i b = _mm512_maskz_loadu_epi16(static_cast<__mmask32>(spread >> 32), base + 32);
      v = _mm512_mask_mov_epi16(v, runs[i].mask, _mm512_permutex2var_epi16(a, evens, b));
    }
  } else {
    alignas(64) uint16_t lanes[32] = {};
    for (int i = 0; i < count; ++i)
      for (int j = 0; j < 32; ++j)
        if (runs[i].mask >> j & 1) lanes[j] = plane[runs[i].offset + j * s.sw];
    v = _mm512_load_si512(lanes);
  }
  return v;
}

// One pair of B for a panel: out[j] = lo[j] | hi[j] << 16.
NEE_BF16_TARGET inline void StorePair(__m512i lo, __m512i hi, uint32_t* out) {
  alignas(64) static const uint16_t kFirst[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                                                  8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  const __m512i first = _mm512_load_si512(kFirst);
  const __m512i second = _mm512_add_epi16(first, _mm512_set1_epi16(16));
  _mm512_store_si512(out, _mm512_permutex2var_epi16(lo, first, hi));
  _mm512_store_si512(out + 16, _mm512_permutex2var_epi16(lo, second, hi));
}

// The B operand of one task: `panels` panels of k pairs x 32 pixels for
// pixels [p0, p0 + count) of image `x_img`, straight from X (no im2col).
NEE_BF16_PACK_TARGET void PackPixels(const Bf16ConvShape& s, const uint16_t* x_img, int64_t p0, int64_t count,
                                     int64_t panels, uint32_t* packed) {
  const int64_t plane = s.H * s.W, cpairs = s.channel_pairs(), pairs = s.pairs();
  PanelRun runs[kPanel + 1];
  for (int64_t t = 0; t < s.taps(); ++t)
    for (int64_t panel = 0; panel < panels; ++panel) {
      const int n = TapRuns(s, t / s.KW, t % s.KW, p0 + panel * kPanel, std::min(kPanel, count - panel * kPanel), runs);
      uint32_t* out = packed + (panel * pairs + t * cpairs) * kPanel;
      for (int64_t q = 0; q < cpairs; ++q, out += kPanel) {
        const uint16_t* lo = x_img + 2 * q * plane;
        const __m512i l = GatherLanes(s, lo, runs, n);
        const __m512i h = 2 * q + 1 < s.C ? GatherLanes(s, lo + plane, runs, n) : _mm512_setzero_si512();
        StorePair(l, h, out);
      }
    }
}

// The activation on sixteen lanes, NaN kept as the reference keeps it.
NEE_BF16_TARGET inline __m512 Activate(const FusedActivation& act, __m512 v) {
  using K = FusedActivation::Kind;
  const __m512 zero = _mm512_setzero_ps();
  switch (act.kind) {
    case K::kRelu: return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), zero);
    case K::kLeakyRelu:
      return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v, _mm512_set1_ps(act.a));
    case K::kClip: {
      const __m512 lo = _mm512_set1_ps(act.a), hi = _mm512_set1_ps(act.b);
      v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), lo);
      return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, hi, _CMP_GT_OQ), hi);
    }
    default: return v;
  }
}

// Output channel `co`, pixels [p, p + 16) (`mask`: those that exist) of one
// image's output `y` (z: that image's Z): bias, rounding, Z, activation.
NEE_BF16_TARGET __attribute__((always_inline)) inline void StoreOutputs(const Bf16ConvFinish& f, int64_t pixels, int64_t co, int64_t p,
                                         __mmask16 mask, __m512 sum, const uint16_t* z, uint16_t* y) {
  if (f.bias) sum = _mm512_add_ps(sum, _mm512_set1_ps(f.bias[co]));
  if (f.fused) {
    if (z) sum = _mm512_add_ps(RoundedToBf16(sum), LoadBf16(z + co * pixels + p, mask));
    if (!f.commutes) sum = RoundedToBf16(sum);
    sum = Activate(f.act, sum);
  }
  _mm256_mask_storeu_epi16(y + co * pixels + p, mask, RoundToBf16Fast(sum));
}

// R output channels (block `a`) x one 32-pixel panel `b` starting at pixel
// p of the image: 2R accumulators, two B vectors, one broadcast word.
template <int R>
NEE_BF16_TARGET void ConvTile(const uint32_t* a, const uint32_t* b, int64_t pairs, const Bf16ConvFinish& f,
                              int64_t pixels, int64_t co, int64_t p, int64_t cols, const uint16_t* z, uint16_t* y) {
  __m512 acc[R][2];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t q = 0; q < pairs; ++q, a += kRows, b += kPanel) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(b + 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
  const __mmask16 mask0 = cols >= 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1);
  const __mmask16 mask1 = cols >= 32 ? __mmask16(0xffff) : cols <= 16 ? 0 : __mmask16((1u << (cols - 16)) - 1);
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    StoreOutputs(f, pixels, co + r, p, mask0, acc[r][0], z, y);
    if (mask1) StoreOutputs(f, pixels, co + r, p + 16, mask1, acc[r][1], z, y);
  }
}

using ConvTileFn = void (*)(const uint32_t*, const uint32_t*, int64_t, const Bf16ConvFinish&, int64_t, int64_t,
                            int64_t, int64_t, const uint16_t*, uint16_t*);

ConvTileFn ConvTileFor(int64_t rows) {
  static const ConvTileFn table[kRows] = {ConvTile<1>, ConvTile<2>, ConvTile<3>,  ConvTile<4>,
                                          ConvTile<5>, ConvTile<6>, ConvTile<7>,  ConvTile<8>,
                                          ConvTile<9>, ConvTile<10>, ConvTile<11>, ConvTile<12>};
  return table[rows - 1];
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Per-thread scratch for a task's packed pixels, kept between calls
// (bounded by the largest chunk seen).
template <typename T>
T* ThreadBuffer(AlignedArray<T>& buffer, size_t& capacity, size_t n) {
  if (n > capacity) {
    buffer = MakeAlignedArray<T>(n);
    capacity = n;
  }
  return buffer.get();
}

// How the work is cut: chunks of `panels` 32-pixel panels per image, and the
// output channels in `groups` runs of whole 12-channel blocks.
struct Bf16ConvSplit {
  int64_t panels = 1, chunks_per_image = 1, groups = 1;
};

// A chunk's packed pixels take at most ~192 KiB, so they stay in L2 while
// every channel block streams past them; enough tasks for the threads to
// end together (a small image is also cut by output channels, each group
// packing its own copy of the chunk).
Bf16ConvSplit SplitWork(const Bf16ConvShape& s, int threads) {
  Bf16ConvSplit split;
  const int64_t image_panels = (s.pixels() + kPanel - 1) / kPanel;
  const int64_t panel_bytes = s.pairs() * kPanel * 4;
  split.panels = std::clamp<int64_t>((192 << 10) / panel_bytes, 1, 8);
  split.panels = std::min(split.panels, image_panels);
  const int64_t wanted = threads > 1 ? 4 * threads : 1;
  while (split.panels > 1 && s.N * ((image_panels + split.panels - 1) / split.panels) < wanted) --split.panels;
  split.chunks_per_image = (image_panels + split.panels - 1) / split.panels;
  const int64_t blocks = (s.M + kRows - 1) / kRows;
  const int64_t chunks = s.N * split.chunks_per_image;
  if (chunks < wanted) split.groups = std::min(blocks, (wanted + chunks - 1) / chunks);
  return split;
}

Status RunBf16Conv(KernelContext& ctx, const Bf16ConvShape& s, const Tensor& x, const Tensor& w, const Tensor* b,
                   Bf16ConvFinish finish) {
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kBFloat16, {s.N, s.M, s.OH, s.OW}));
  const auto weights = PackWeights(ctx, w, s);
  std::vector<float> bias;
  if (b) {
    bias.resize(static_cast<size_t>(s.M));
    for (int64_t i = 0; i < s.M; ++i) bias[static_cast<size_t>(i)] = BFloat16ToFloat(b->data<uint16_t>()[i]);
    finish.bias = bias.data();
  }
  const Bf16ConvSplit split = SplitWork(s, NumThreads(ctx));
  const int64_t blocks = (s.M + kRows - 1) / kRows, pixels = s.pixels(), pairs = s.pairs();
  const uint16_t* xp = x.data<uint16_t>();
  uint16_t* yp = out.data<uint16_t>();
  ParallelTasks(ctx, s.N * split.chunks_per_image * split.groups, [&](int64_t task) {
    const int64_t group = task % split.groups, chunk = task / split.groups;
    const int64_t n = chunk / split.chunks_per_image, p0 = chunk % split.chunks_per_image * split.panels * kPanel;
    const int64_t count = std::min(split.panels * kPanel, pixels - p0);
    const int64_t panels = (count + kPanel - 1) / kPanel;
    thread_local AlignedArray<uint32_t> packed_buf;
    thread_local size_t packed_cap = 0;
    uint32_t* packed = ThreadBuffer(packed_buf, packed_cap, static_cast<size_t>(pairs * panels * kPanel));
    PackPixels(s, xp + n * s.C * s.H * s.W, p0, count, panels, packed);
    const uint16_t* z = finish.z ? finish.z + n * s.M * pixels : nullptr;
    uint16_t* y = yp + n * s.M * pixels;
    const int64_t b0 = group * blocks / split.groups, b1 = (group + 1) * blocks / split.groups;
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t co = blk * kRows;
      const ConvTileFn tile = ConvTileFor(std::min(kRows, s.M - co));
      for (int64_t panel = 0; panel < panels; ++panel)
        tile(weights->block(blk), packed + panel * pairs * kPanel, pairs, finish, pixels, co, p0 + panel * kPanel,
             std::min(kPanel, count - panel * kPanel), z, y);
    }
  });
  return Status::Ok();
}

// Depthwise: each output plane is one input plane convolved with its
// channel's KH x KW filter, too little arithmetic per byte for vdpbf16ps'
// pairs to pay; kept in bfloat16 it saves the Casts around a widened conv
// and half its bytes. Sixteen channels run at once in float32 lanes, as the
// blocked layout's depthwise kernel runs them: a task's band of input rows
// of its sixteen channels is widened and transposed into a zero-padded
// pixel-major copy (each pixel sixteen channel lanes), so that a tap is one
// multiply-add per output pixel with the sixteen channels' weights and a
// plane of 7x7 fills the lanes as well as one of 112x112 (the NCHW planes
// read sixteen pixels at a time wasted 9 of 16 lanes on a 7-wide row, and ran
// 3-4x slower than the float32 blocked kernel). Sixteen output pixels are
// transposed back to channel rows for the group-1 path's epilogue
// (StoreOutputs). Each output's sum runs over the taps in (kh, kw) order in
// float32, so the values do not depend on the thread count or the banding.
constexpr int64_t kLanes = 16;

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push  // GCC 12 flags the intrinsics' own undefined vectors (see above)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// How the depthwise work is cut: output rows per band, and the padded copy's
// width (pixels; every tile of sixteen output pixels reads inside it).
struct DepthwiseBands {
  int64_t out_rows = 1, cols = 0;
  int64_t in_rows(const Bf16ConvShape& s, int64_t rows) const { return (rows - 1) * s.sh + (s.KH - 1) * s.dh + 1; }
};

// A band's copy takes at most ~192 KiB, so it stays in L2 while its taps
// run; bands of at least one output row.
DepthwiseBands PlanDepthwiseBands(const Bf16ConvShape& s) {
  DepthwiseBands b;
  const int64_t tile_cols = (s.OW + kLanes - 1) / kLanes * kLanes;
  b.cols = std::max((tile_cols - 1) * s.sw + (s.KW - 1) * s.dw + 1, s.pl + s.W);
  const int64_t budget_rows = std::max<int64_t>(1, (192 << 10) / (b.cols * kLanes * 4));
  b.out_rows = std::clamp<int64_t>((budget_rows - (s.KH - 1) * s.dh - 1) / s.sh + 1, 1, s.OH);
  return b;
}

// Input rows [r0, r0 + rows) of the padded image (row r is input row r - pt)
// of channels [c0, c0 + channels) into `band`: pixel (r, col) at
// ((r - r0) * cols + col) * 16, lane = channel - c0; padding and missing
// channels zero.
NEE_BF16_TARGET void FillDepthwiseBand(const Bf16ConvShape& s, const DepthwiseBands& b, const uint16_t* x_img,
                                       int64_t c0, int64_t channels, int64_t r0, int64_t rows, float* band) {
  const int64_t row_floats = b.cols * kLanes;
  for (int64_t rl = 0; rl < rows; ++rl) {
    float* out = band + rl * row_floats;
    const int64_t ih = r0 + rl - s.pt;
    if (ih < 0 || ih >= s.H) {
      std::fill(out, out + row_floats, 0.0f);
      continue;
    }
    std::fill(out, out + s.pl * kLanes, 0.0f);
    std::fill(out + (s.pl + s.W) * kLanes, out + row_floats, 0.0f);
    for (int64_t iw = 0; iw < s.W; iw += kLanes) {
      const int64_t n = std::min(kLanes, s.W - iw);
      const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1);
      __m512 v[16];
#pragma GCC unroll 16
      for (int64_t ch = 0; ch < kLanes; ++ch)
        v[ch] = ch < channels ? LoadBf16(x_img + ((c0 + ch) * s.H + ih) * s.W + iw, mask) : _mm512_setzero_ps();
      Transpose16(v);
      for (int64_t p = 0; p < n; ++p) _mm512_storeu_ps(out + (s.pl + iw + p) * kLanes, v[p]);
    }
  }
}

// Sixteen output pixels [ow, ow + 16) of output row `oh`, whose window rows
// start at band row `rl`: sixteen sums (one a pixel, the channels in lanes),
// then transposed to channel rows for the epilogue.
NEE_BF16_TARGET void DepthwiseTile(const Bf16ConvShape& s, const DepthwiseBands& b, const float* band, int64_t rl,
                                   const float* weights, const Bf16ConvFinish& f, int64_t c0, int64_t channels,
                                   int64_t oh, int64_t ow, const uint16_t* z, uint16_t* y) {
  __m512 sum[16];
#pragma GCC unroll 16
  for (int p = 0; p < 16; ++p) sum[p] = _mm512_setzero_ps();
  for (int64_t kh = 0; kh < s.KH; ++kh) {
    const float* row = band + ((rl + kh * s.dh) * b.cols + ow * s.sw) * kLanes;
    for (int64_t kw = 0; kw < s.KW; ++kw) {
      const __m512 w = _mm512_loadu_ps(weights + (kh * s.KW + kw) * kLanes);
      const float* tap = row + kw * s.dw * kLanes;
#pragma GCC unroll 16
      for (int p = 0; p < 16; ++p) sum[p] = _mm512_fmadd_ps(_mm512_loadu_ps(tap + p * s.sw * kLanes), w, sum[p]);
    }
  }
  Transpose16(sum);
  const __mmask16 mask = static_cast<__mmask16>((1u << std::min(kLanes, s.OW - ow)) - 1);
  for (int64_t ch = 0; ch < channels; ++ch)
    StoreOutputs(f, s.pixels(), c0 + ch, oh * s.OW + ow, mask, sum[ch], z, y);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// A depthwise conv's weights widened to float32: per group of sixteen
// channels, tap by tap, the sixteen channels' weights (zero past C).
class DepthwiseWeights {
 public:
  DepthwiseWeights(const uint16_t* w, const Bf16ConvShape& s) {
    const int64_t groups = (s.C + kLanes - 1) / kLanes, taps = s.taps();
    data_.assign(static_cast<size_t>(groups * taps * kLanes), 0.0f);
    for (int64_t c = 0; c < s.C; ++c)
      for (int64_t t = 0; t < taps; ++t)
        data_[static_cast<size_t>(((c / kLanes) * taps + t) * kLanes + c % kLanes)] = BFloat16ToFloat(w[c * taps + t]);
  }
  const float* data() const { return data_.data(); }

 private:
  std::vector<float> data_;
};

Status RunBf16Depthwise(KernelContext& ctx, const Bf16ConvShape& s, const Tensor& x, const Tensor& w,
                        const Tensor* b, Bf16ConvFinish finish) {
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kBFloat16, {s.N, s.M, s.OH, s.OW}));
  const int64_t groups = (s.C + kLanes - 1) / kLanes, taps = s.taps();
  const auto widened = PackedOnce<DepthwiseWeights>(
      ctx, w, s, [&] { return std::make_shared<const DepthwiseWeights>(w.data<uint16_t>(), s); });
  const float* weights = widened->data();
  std::vector<float> bias;
  if (b) {
    bias.resize(static_cast<size_t>(s.M));
    for (int64_t i = 0; i < s.M; ++i) bias[static_cast<size_t>(i)] = BFloat16ToFloat(b->data<uint16_t>()[i]);
    finish.bias = bias.data();
  }
  const DepthwiseBands bands = PlanDepthwiseBands(s);
  const int64_t bands_per_plane = (s.OH + bands.out_rows - 1) / bands.out_rows, pixels = s.pixels();
  const uint16_t* xp = x.data<uint16_t>();
  uint16_t* yp = out.data<uint16_t>();
  ParallelTasks(ctx, s.N * groups * bands_per_plane, [&](int64_t task) {
    const int64_t band_index = task % bands_per_plane, group = task / bands_per_plane % groups;
    const int64_t n = task / bands_per_plane / groups, c0 = group * kLanes, channels = std::min(kLanes, s.C - c0);
    const int64_t oh0 = band_index * bands.out_rows, oh1 = std::min(s.OH, oh0 + bands.out_rows);
    const int64_t rows = bands.in_rows(s, oh1 - oh0);
    thread_local AlignedArray<float> band_buf;
    thread_local size_t band_cap = 0;
    float* band = ThreadBuffer(band_buf, band_cap, static_cast<size_t>(rows * bands.cols * kLanes));
    FillDepthwiseBand(s, bands, xp + n * s.C * s.H * s.W, c0, channels, oh0 * s.sh, rows, band);
    const uint16_t* z = finish.z ? finish.z + n * s.M * pixels : nullptr;
    for (int64_t oh = oh0; oh < oh1; ++oh)
      for (int64_t ow = 0; ow < s.OW; ow += kLanes)
        DepthwiseTile(s, bands, band, (oh - oh0) * s.sh, weights + group * taps * kLanes, finish, c0, channels,
                      oh, ow, z, yp + n * s.M * pixels);
  });
  return Status::Ok();
}

#endif  // NEE_CONV_BF16_X86

// The bfloat16 Conv or FusedConv (`epilogue` non-null), or the reference.
Status ConvBFloat16(KernelContext& ctx, const ConvEpilogue* epilogue) {
  ConvOperands in;
  NEE_ASSIGN_OR_RETURN(bool usable, ReadConvOperands(ctx, &in));
  Bf16ConvShape s;
  if (!usable || !CpuHasAvx512Bf16() || !PlanBf16Conv(ctx, *in.x, *in.w, in.bias, s)) return RunReference(ctx);
  Bf16ConvFinish finish;
  if (epilogue) {
    finish.fused = true;
    finish.act = epilogue->activation;
    if (!ActivationTaken(finish.act)) return RunReference(ctx);
    finish.commutes = finish.act.kind != FusedActivation::Kind::kLeakyRelu;
    if (epilogue->z) {
      const std::vector<int64_t> out_dims{s.N, s.M, s.OH, s.OW};
      if (!IsBf16(*epilogue->z) || epilogue->z->dims() != out_dims)
        return ctx.InputError(3, "(Z) must have the output's type and shape " + DimsToString(out_dims) + ", got " +
                                     epilogue->z->Describe());
      finish.z = epilogue->z->data<uint16_t>();
    }
  }
#ifdef NEE_CONV_BF16_X86
  if (s.depthwise) return RunBf16Depthwise(ctx, s, *in.x, *in.w, in.bias, finish);
  return RunBf16Conv(ctx, s, *in.x, *in.w, in.bias, finish);
#else
  return RunReference(ctx);
#endif
}

bool InputIsBf16(KernelContext& ctx) {
  auto x = ctx.InputTensor(0);
  return x.ok() && IsBf16(*x.value());
}

}  // namespace

Status ConvFloatOrBFloat16(KernelContext& ctx) {
  return InputIsBf16(ctx) ? ConvBFloat16(ctx, nullptr) : ConvFloat(ctx);
}

Status FusedConvBFloat16(KernelContext& ctx) {
  auto act = ReadFusedActivation(ctx.node());
  if (!act.ok() || (ctx.has_input(3) && !ctx.input(3)->is_tensor())) return RunReference(ctx);
  ConvEpilogue epilogue{act.value(), ctx.has_input(3) ? &ctx.input(3)->tensor() : nullptr};
  return ConvBFloat16(ctx, &epilogue);
}

}  // namespace nee::cpu
