// SGEMM's micro-kernels (internal to sgemm*.cc): each computes one register
// tile of C from a packed A panel and a packed B panel.
//
// Every kernel variant works on the same packed layout, so packed operands
// (including ones packed once per session) serve whichever kernel runs:
//  - an A panel holds kSgemmTileRows rows: kc steps of kSgemmTileRows floats
//    (a[p * kSgemmTileRows + r] = A[r, p]), rows past the matrix zero;
//  - a B panel holds kSgemmPanelWidth columns as two runs of kSgemmPanelRun:
//    each run kc steps of kSgemmPanelRun floats (SgemmPanelOffset).
// The AVX-512 kernel holds the whole 12x32 tile in 24 zmm registers; the
// AVX2 kernel walks it as 6x16 sub-tiles (16 ymm registers would not hold
// more) and a last run of at most 8 columns as one 12x8; the portable one is
// plain loops for the auto-vectorizer.
//
// Within a tile, each C element is one chain of fused multiply-adds over p in
// increasing order (separate multiply and add in the portable kernel), so a
// tile computed by a 3-row edge call or a full 12-row call gives the same bits.
#pragma once
#include <cstdint>

#include "ep/cpu/sgemm.h"

namespace nee::cpu::sgemm_internal {

constexpr int64_t kTileRows = kSgemmTileRows;
constexpr int64_t kTileCols = kSgemmPanelWidth;
constexpr int64_t kRun = kSgemmPanelRun;

// Where the micro-kernel reads kc rows of B: a packed panel (two runs of
// kc x kRun floats, aligned, zero past `cols`), or, only for a kernel whose
// ReadsBInPlace() is true, rows anywhere: row p at rows[p] + col, of which
// only the first `cols` columns are read.
struct BSource {
  const float* panel = nullptr;
  // A packed panel the caller reads next (kc steps of kTileCols floats, or
  // null): the AVX-512 kernel asks for it in L2 while it computes, a line pair
  // a step, so that B coming from memory arrives a panel ahead of its use.
  const float* next = nullptr;
  int64_t next_kc = 0;
  // Packed B (`fetch_lines` cache lines from `fetch` on, or none) that a
  // later tile reads first: the AVX2 kernel asks for it in cache a line a
  // step, spread over the tile's 6x16 sub-tiles, so that weights coming from
  // memory are read a little during every tile rather than all by the first
  // row panel.
  const float* fetch = nullptr;
  int64_t fetch_lines = 0;
  const float* const* rows = nullptr;
  int64_t col = 0;
  // With `rows`, for a kernel whose PacksWhileReading() is true: a packed
  // panel (kc steps, aligned) that the kernel fills with the rows it reads
  // (zero past `cols`; a run of 16 columns only where some are in `cols`),
  // reading them back from there for the rest of the tile. Later row panels
  // then read that panel, and B needs no packing pass of its own.
  float* pack_to = nullptr;
};

// C[0:rows, 0:cols] (= or +=) A_panel x B over kc steps. rows <= 12,
// cols <= 32; C is row-major with leading dimension ldc; only the first
// `rows` x `cols` elements of C are read or written.
using MicroKernel = void (*)(int64_t kc, const float* a, const BSource& b, float* c, int64_t ldc, int64_t rows,
                             int64_t cols, bool accumulate);

// Whether the kernel for `isa` reads B in place (BSource::rows).
bool ReadsBInPlace(SgemmIsa isa);

// Whether the kernel for `isa` can pack the rows it reads (BSource::pack_to).
bool PacksWhileReading(SgemmIsa isa);

// The kernel for an ISA level (SgemmActiveIsa() says which one is in force).
MicroKernel KernelFor(SgemmIsa isa);

// The AVX2 kernel's 6x16 sub-tile over a packed B panel comes in two
// versions with the same bits: the inline-assembly one (sgemm_avx2_asm.h),
// used where it is built, and the intrinsic one, the fallback. Process-wide
// switch between them, for A/B measurements and tests (true: assembly where
// built); returns whether the assembly is now in use.
bool SetAvx2PanelAssembly(bool use);
// The intrinsic 6x16 packed-panel sub-tile (null off x86), with the
// signature of SubTile6x16PanelAsm: the tests' oracle for the assembly.
using PanelSubTileFn = void (*)(int64_t kc, const float* a, const float* b, const float* const* b_rows, float* c,
                                int64_t ldc, int64_t cols, bool accumulate, const float* fetch,
                                int64_t fetch_lines);
PanelSubTileFn Avx2PanelSubTileIntrinsic();

}  // namespace nee::cpu::sgemm_internal
