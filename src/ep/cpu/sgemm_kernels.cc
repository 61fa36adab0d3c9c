// SGEMM micro-kernels (layout and contract in sgemm_kernels.h) and the run-time
// choice between them.
#include "ep/cpu/sgemm_kernels.h"

#include <algorithm>
#include <atomic>

#include "base/cpu_isa.h"
#include "ep/cpu/sgemm_avx2_asm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEE_SGEMM_X86 1
#endif

namespace nee::cpu::sgemm_internal {

namespace {

// ---- Portable ------------------------------------------------------------------
//
// Multiply and add are separate here: without FMA hardware, std::fma would be
// a slow library call. The column loop is what the auto-vectorizer turns into
// SIMD; the accumulators live in memory, which is what costs the speed.
void MicroPortable(int64_t kc, const float* a, const BSource& source, float* c, int64_t ldc, int64_t rows,
                   int64_t cols, bool accumulate) {
  const float* b = source.panel;  // always packed here
  float acc[kTileRows][kTileCols] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const float* ap = a + p * kTileRows;
    for (int64_t half = 0; half < kTileCols / kRun; ++half) {
      const float* bp = b + half * kc * kRun + p * kRun;
      for (int64_t r = 0; r < rows; ++r) {
        const float av = ap[r];
        for (int64_t j = 0; j < kRun; ++j) acc[r][half * kRun + j] += av * bp[j];
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) c[r * ldc + j] = accumulate ? c[r * ldc + j] + acc[r][j] : acc[r][j];
}

#ifdef NEE_SGEMM_X86
// ---- AVX2 + FMA ----------------------------------------------------------------
//
// Sub-tiles of R rows by V vectors of 8 columns: 6x16 (twelve ymm
// accumulators, two for B, one broadcast: 15 of the 16 registers), and for
// a last run of at most 8 columns 12x8 (twelve accumulators, one for B, one
// broadcast), so that a narrow output (a 7x7 image's 49 columns) does not
// pay for 16 columns where 8 would do. The accumulator arrays stay in
// registers because every loop over them is fully unrolled with a constant
// trip count.
// B's source: a packed panel (aligned, zero-padded, loaded whole), or, in
// place, row p at rows[p] (BSource::rows): all 8V columns, or only the
// first `cols` (masked loads past them: the memory there is another row, or
// none). Separate instances, so the common ones hold no masks in registers.
// The two kRows*Pack modes also store each row's vectors into a packed
// panel run (`b`, zero past `cols`, as SgemmPackBRow lays it out), so that
// the sub-tiles after the first read B packed without a separate pass.
enum class BRead { kPanel, kRowsWhole, kRowsPartial, kRowsWholePack, kRowsPartialPack };

template <int R, int V, BRead kRead>
__attribute__((target("avx2,fma"))) void SubTileAvx2(int64_t kc, const float* a, const float* b,
                                                     const float* const* b_rows, float* c, int64_t ldc, int64_t cols,
                                                     bool accumulate, const float* /*fetch*/, int64_t /*fetch_lines*/) {
  static_assert(V == 1 || V == 2, "one or two vectors of columns");
  constexpr bool kWhole = kRead == BRead::kRowsWhole || kRead == BRead::kRowsWholePack;
  constexpr bool kPack = kRead == BRead::kRowsWholePack || kRead == BRead::kRowsPartialPack;
  // Packing modes: `b` is the caller's writable panel run (BSource::pack_to).
  float* const pack_to = kPack ? const_cast<float*>(b) : nullptr;
  __m256 acc[R][V];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
  // The tile of C is written after the loop: fetch it now (as the AVX-512
  // kernel does), so that a tile that left the caches does not stall the end.
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 8 * V - 1), _MM_HINT_T0);
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i mask[V];
#pragma GCC unroll 2
  for (int v = 0; v < V; ++v) mask[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(cols) - 8 * v), lane);
  // Four steps of p per loop trip: the loop's own adds and branch otherwise
  // take issue slots from the FMAs (1024^3 at 1 thread: 90.5 -> 93.7 GFLOP/s).
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    __m256 bv[V];
    if constexpr (kRead != BRead::kPanel) {
      const float* row = b_rows[p];
      if (p + 8 < kc) _mm_prefetch(reinterpret_cast<const char*>(b_rows[p + 8]), _MM_HINT_T0);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) {
        bv[v] = kWhole ? _mm256_loadu_ps(row + 8 * v) : _mm256_maskload_ps(row + 8 * v, mask[v]);
        if constexpr (kPack) _mm256_store_ps(pack_to + p * kRun + 8 * v, bv[v]);
      }
      // A one-vector sub-tile packs half a run: the rest of it is padding.
      if constexpr (kPack && V == 1) _mm256_store_ps(pack_to + p * kRun + 8, _mm256_setzero_ps());
    } else {
      _mm_prefetch(reinterpret_cast<const char*>(b + (p + 32) * kRun), _MM_HINT_T0);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) bv[v] = _mm256_load_ps(b + p * kRun + 8 * v);
    }
    const float* ap = a + p * kTileRows;
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(ap + r);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc;
    if (cols == 8 * V) {
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) {
        __m256 sum = acc[r][v];
        if (accumulate) sum = _mm256_add_ps(sum, _mm256_loadu_ps(cr + 8 * v));
        _mm256_storeu_ps(cr + 8 * v, sum);
      }
    } else {
      alignas(32) float tile[8 * V];
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) _mm256_store_ps(tile + 8 * v, acc[r][v]);
      for (int64_t j = 0; j < cols; ++j) cr[j] = accumulate ? cr[j] + tile[j] : tile[j];
    }
  }
}

// (The fetch arguments, BSource::fetch's share of a sub-tile, are for the
// assembly 6x16 sub-tile; the intrinsic ones do not fetch ahead.)
using SubTileFn = void (*)(int64_t, const float*, const float*, const float* const*, float*, int64_t, int64_t, bool,
                           const float*, int64_t);
template <BRead P>
constexpr SubTileFn kSubTilesAvx2[6] = {SubTileAvx2<1, 2, P>, SubTileAvx2<2, 2, P>, SubTileAvx2<3, 2, P>,
                                        SubTileAvx2<4, 2, P>, SubTileAvx2<5, 2, P>, SubTileAvx2<6, 2, P>};
template <BRead P>
constexpr SubTileFn kNarrowSubTilesAvx2[12] = {
    SubTileAvx2<1, 1, P>, SubTileAvx2<2, 1, P>, SubTileAvx2<3, 1, P>,  SubTileAvx2<4, 1, P>,
    SubTileAvx2<5, 1, P>, SubTileAvx2<6, 1, P>, SubTileAvx2<7, 1, P>,  SubTileAvx2<8, 1, P>,
    SubTileAvx2<9, 1, P>, SubTileAvx2<10, 1, P>, SubTileAvx2<11, 1, P>, SubTileAvx2<12, 1, P>};

// Whether MicroAvx2 takes SubTile6x16PanelAsm for full 6x16 packed-panel
// sub-tiles (SetAvx2PanelAssembly).
std::atomic<bool> g_panel_assembly{HaveSubTile6x16PanelAsm()};

template <BRead P>
SubTileFn NarrowSubTile(int64_t rows) {
  return kNarrowSubTilesAvx2<P>[rows - 1];
}

// The 12x32 tile as 6x16 sub-tiles (only those inside rows x cols), or one
// 12x8 sub-tile for a last run of at most 8 columns. Column halves
// outermost: a half panel (one run: a cache line per step of p, contiguous)
// is read from L2 by the first row half and from L1 by the second. In place, a half's rows
// start `col + j0` into each row of B: a per-call table of them
// (kc <= kSgemmDepthBlock).
// With BSource::pack_to, the first sub-tile of each half reads B's rows and
// packs them into that half's run; the other sub-tiles read the run.
void MicroAvx2(int64_t kc, const float* a, const BSource& source, float* c, int64_t ldc, int64_t rows, int64_t cols,
               bool accumulate) {
  const bool in_place = source.rows != nullptr;
  const bool packing = in_place && source.pack_to != nullptr;
  const bool panel_assembly = g_panel_assembly.load(std::memory_order_relaxed);
  const float* half_rows[kSgemmDepthBlock];
  // BSource::fetch's lines in equal shares over the 6-row sub-tiles (two
  // per half where there are more than 6 rows).
  const int64_t subs_per_half = rows > 6 ? 2 : 1, halves = cols > 16 ? 2 : 1;
  const int64_t fetch_lines = source.fetch ? source.fetch_lines : 0;
  const int64_t fetch_share = (fetch_lines + subs_per_half * halves - 1) / (subs_per_half * halves);
  for (int64_t j0 = 0; j0 < cols; j0 += 16) {
    if (in_place)
      for (int64_t p = 0; p < kc; ++p) half_rows[p] = source.rows[p] + source.col + j0;
    const int64_t sub_cols = std::min<int64_t>(16, cols - j0);
    const int64_t run = j0 / kRun * kc * kRun;  // this half's run in a packed panel
    if (sub_cols <= 8) {  // all rows at once, one vector wide
      const SubTileFn sub = !in_place       ? NarrowSubTile<BRead::kPanel>(rows)
                            : sub_cols == 8 ? (packing ? NarrowSubTile<BRead::kRowsWholePack>(rows)
                                                       : NarrowSubTile<BRead::kRowsWhole>(rows))
                            : packing       ? NarrowSubTile<BRead::kRowsPartialPack>(rows)
                                            : NarrowSubTile<BRead::kRowsPartial>(rows);
      const float* panel = packing ? source.pack_to + run : in_place ? nullptr : source.panel + run;
      sub(kc, a, panel, half_rows, c + j0, ldc, sub_cols, accumulate, nullptr, 0);
      continue;
    }
    // Rows in sub-tiles of six; 7 or 8 rows left go as 4 + the rest, as a
    // sub-tile of two rows has too few accumulators to hide the FMA latency.
    for (int64_t r0 = 0, step = 6, sub_index = j0 / 16 * subs_per_half; r0 < rows; r0 += step, ++sub_index) {
      const int64_t left = rows - r0;
      step = left == 7 || left == 8 ? 4 : std::min<int64_t>(6, left);
      const int64_t sub_rows = step - 1;
      float* tile = c + r0 * ldc + j0;
      // Packing: the first sub-tile packs this half, the others read it packed.
      const bool read_rows = in_place && (!packing || r0 == 0);
      const SubTileFn sub = !read_rows && sub_rows == 5 && panel_assembly ? SubTile6x16PanelAsm
                            : !read_rows        ? kSubTilesAvx2<BRead::kPanel>[sub_rows]
                            : sub_cols == 16 ? (packing ? kSubTilesAvx2<BRead::kRowsWholePack>[sub_rows]
                                                        : kSubTilesAvx2<BRead::kRowsWhole>[sub_rows])
                            : packing        ? kSubTilesAvx2<BRead::kRowsPartialPack>[sub_rows]
                                             : kSubTilesAvx2<BRead::kRowsPartial>[sub_rows];
      const float* panel = packing ? source.pack_to + run : in_place ? nullptr : source.panel + run;
      // This sub-tile's share of the lines to fetch (from a packed panel only).
      const int64_t fetch_first = std::min(sub_index * fetch_share, fetch_lines);
      const int64_t fetch_count = read_rows ? 0 : std::min(fetch_share, fetch_lines - fetch_first);
      sub(kc, a + r0, panel, half_rows, tile, ldc, sub_cols, accumulate, source.fetch + fetch_first * kRun,
          fetch_count);
    }
  }
}

// ---- AVX-512 -------------------------------------------------------------------
//
// The whole 12x32 tile: 24 zmm accumulators, two for the B row, and the A
// values broadcast straight from memory into the FMAs. Per step of p that is
// 24 FMAs against 14 loads, so the two FMA pipes stay the limit; 24
// independent chains cover the FMA latency (4 cycles x 2 pipes needs 8).
// Partial column tiles use masked loads and stores.
#define NEE_TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,fma")))

// R rows by V vectors of 16 columns: V = 1 when at most 16 columns are left
// (a narrow output's last panel), so the zero padding costs no FMAs.
// kInPlace: B's rows are read where they lie (BSource::rows), so columns
// past `cols` are never loaded (the memory past them is another row, or
// none); a packed panel is aligned and zero-padded and is loaded whole.
template <int R, int V, bool kInPlace>
NEE_TARGET_AVX512 void TileAvx512(int64_t kc, const float* a, const BSource& source, float* c, int64_t ldc,
                                  int64_t cols, bool accumulate) {
  const float* b = source.panel;
  const float* const* b_rows = source.rows;
  const int64_t col = source.col;
  const int64_t run_stride = kc * kRun;  // packed: the second run of 16 columns
  const float* next = source.next;
  const int64_t next_lines = source.next_kc;  // line pairs of the next panel, one pair a step
  __mmask16 mask[V];
#pragma GCC unroll 2
  for (int v = 0; v < V; ++v) {
    const int64_t n = std::clamp<int64_t>(cols - 16 * v, 0, 16);
    mask[v] = n == 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
  }
  __m512 acc[R][V];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  // The tile of C is read (or written) only after the loop: fetch it now so
  // a tile that left the caches does not stall the end of every call.
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 16 * V - 1), _MM_HINT_T0);
  }
  for (int64_t p = 0; p < kc; ++p) {
    // B streams from L2; asking for it 16 steps ahead (2 KiB, when a panel
    // was not yet two runs: 1 KiB of each run now) measured a few
    // percent faster than leaving it to the hardware prefetcher alone. A is
    // asked for 64 steps (3 KiB) ahead: when A is large and B narrow (conv
    // weights x a few columns), A comes from L3 and needs the longer lead.
    // (In place, rows past kc are not asked for: the table ends there.)
    if (kInPlace) {
      b = b_rows[p] + col;
      if (p + 16 < kc) _mm_prefetch(reinterpret_cast<const char*>(b_rows[p + 16] + col), _MM_HINT_T0);
    } else {  // the two runs of the panel: kc * kRun floats apart
      _mm_prefetch(reinterpret_cast<const char*>(b + 16 * kRun), _MM_HINT_T0);
      if (V == 2) _mm_prefetch(reinterpret_cast<const char*>(b + run_stride + 16 * kRun), _MM_HINT_T0);
    }
    _mm_prefetch(reinterpret_cast<const char*>(a + 64 * kTileRows), _MM_HINT_T0);
    if (next && p < next_lines) {
      _mm_prefetch(reinterpret_cast<const char*>(next + 32 * p), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(next + 32 * p + 16), _MM_HINT_T1);
    }
    __m512 bv[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v)
      bv[v] = kInPlace ? _mm512_maskz_loadu_ps(mask[v], b + 16 * v) : _mm512_load_ps(b + v * run_stride);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r]);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
    a += kTileRows;
    if (!kInPlace) b += kRun;
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      float* cr = c + r * ldc + 16 * v;
      __m512 sum = acc[r][v];
      if (accumulate) sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(mask[v], cr));
      _mm512_mask_storeu_ps(cr, mask[v], sum);
    }
}

using TileFn = void (*)(int64_t, const float*, const BSource&, float*, int64_t, int64_t, bool);
template <int V, bool P>
constexpr TileFn kTilesAvx512[12] = {TileAvx512<1, V, P>, TileAvx512<2, V, P>,  TileAvx512<3, V, P>,
                                     TileAvx512<4, V, P>, TileAvx512<5, V, P>,  TileAvx512<6, V, P>,
                                     TileAvx512<7, V, P>, TileAvx512<8, V, P>,  TileAvx512<9, V, P>,
                                     TileAvx512<10, V, P>, TileAvx512<11, V, P>, TileAvx512<12, V, P>};

void MicroAvx512(int64_t kc, const float* a, const BSource& b, float* c, int64_t ldc, int64_t rows, int64_t cols,
                 bool accumulate) {
  const bool in_place = b.rows != nullptr;
  const TileFn fn = cols > 16 ? (in_place ? kTilesAvx512<2, true> : kTilesAvx512<2, false>)[rows - 1]
                              : (in_place ? kTilesAvx512<1, true> : kTilesAvx512<1, false>)[rows - 1];
  fn(kc, a, b, c, ldc, cols, accumulate);
}
static_assert(kTileRows == 12 && kTileCols == 32 && kRun == 16,
              "the SIMD kernels are written for a 12x32 tile of two 16-column runs");
#endif

SgemmIsa BestIsa() {
  // The CPU's, capped by NEE_MAX_ISA (base/cpu_isa.h); the levels are the same.
  return static_cast<SgemmIsa>(static_cast<int>(HostIsaLevel()));
}

std::atomic<SgemmIsa> g_limit{SgemmIsa::kAvx512};

}  // namespace

bool ReadsBInPlace(SgemmIsa isa) { return isa == SgemmIsa::kAvx512 || isa == SgemmIsa::kAvx2; }

bool PacksWhileReading(SgemmIsa isa) { return isa == SgemmIsa::kAvx2; }

bool SetAvx2PanelAssembly(bool use) {
#ifdef NEE_SGEMM_X86
  g_panel_assembly.store(use && HaveSubTile6x16PanelAsm());
  return g_panel_assembly.load();
#else
  (void)use;
  return false;
#endif
}

PanelSubTileFn Avx2PanelSubTileIntrinsic() {
#ifdef NEE_SGEMM_X86
  return SubTileAvx2<6, 2, BRead::kPanel>;
#else
  return nullptr;
#endif
}

MicroKernel KernelFor(SgemmIsa isa) {
#ifdef NEE_SGEMM_X86
  if (isa == SgemmIsa::kAvx512) return MicroAvx512;
  if (isa == SgemmIsa::kAvx2) return MicroAvx2;
#endif
  return MicroPortable;
}

}  // namespace nee::cpu::sgemm_internal

namespace nee::cpu {

SgemmIsa SgemmActiveIsa() {
  return std::min(sgemm_internal::BestIsa(), sgemm_internal::g_limit.load(std::memory_order_relaxed));
}

void SgemmLimitIsa(SgemmIsa max) { sgemm_internal::g_limit.store(max); }

void SgemmForcePortable(bool force) { SgemmLimitIsa(force ? SgemmIsa::kPortable : SgemmIsa::kAvx512); }

bool SgemmPortableForced() { return sgemm_internal::g_limit.load() == SgemmIsa::kPortable; }

bool SgemmReadsBInPlace() { return sgemm_internal::ReadsBInPlace(SgemmActiveIsa()); }

const char* SgemmKernelName() {
  switch (SgemmActiveIsa()) {
    case SgemmIsa::kAvx512: return "avx512";
    case SgemmIsa::kAvx2: return "avx2-fma";
    case SgemmIsa::kPortable: break;
  }
  return "portable";
}

}  // namespace nee::cpu
