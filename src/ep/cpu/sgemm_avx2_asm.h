// The AVX2 SGEMM's 6x16 sub-tile over a packed B panel (BRead::kPanel in
// sgemm_kernels.cc) with its k loop in inline assembly (x86-64 only): the
// sub-tile that constant-weight MatMul/Gemm/FusedMatMul spend their time in.
// Internal to sgemm*.cc and their tests.
//
// Same operations in the same order as the intrinsic SubTileAvx2<6, 2,
// BRead::kPanel>: each accumulator starts at zero and takes one fused
// multiply-add per step of p, p ascending, so the two give the same bits.
// What the assembly fixes is the schedule: GCC's placement of the loads,
// broadcasts and prefetch in the loop moved from build to build.
#pragma once
#include <cstdint>

namespace nee::cpu::sgemm_internal {

// C[0:6, 0:cols] (= or +=) A_panel[0:6] x B over kc steps: `a` points at
// row 0 of the sub-tile in a packed A panel (steps of kSgemmTileRows
// floats), `b` at one run of a packed B panel (steps of kSgemmPanelRun
// floats, 32-byte aligned, zero past the matrix). 9 <= cols <= 16.
// `fetch_lines` cache lines from `fetch` on (this sub-tile's share of
// BSource::fetch; none when 0) are asked for in cache during the first
// steps. The signature is SubTileFn's (sgemm_kernels.cc); `b_rows` is unused.
void SubTile6x16PanelAsm(int64_t kc, const float* a, const float* b, const float* const* b_rows, float* c,
                         int64_t ldc, int64_t cols, bool accumulate, const float* fetch, int64_t fetch_lines);

// Whether SubTile6x16PanelAsm is built (x86-64 with GCC-style inline asm).
bool HaveSubTile6x16PanelAsm();

}  // namespace nee::cpu::sgemm_internal
