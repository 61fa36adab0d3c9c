// The AVX2 6x16 packed-panel SGEMM sub-tile with its k loop in inline
// assembly (contract in sgemm_avx2_asm.h).
#include "ep/cpu/sgemm_avx2_asm.h"

#include "ep/cpu/sgemm.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define NEE_SGEMM_ASM 1
#endif

namespace nee::cpu::sgemm_internal {

#ifdef NEE_SGEMM_ASM
static_assert(kSgemmTileRows == 12 && kSgemmPanelRun == 16,
              "the assembly's offsets are for A steps of 12 floats and B runs of 16");

// One step of p, `u` steps past the loop's pointers: B's two vectors, then
// per row a broadcast of A and two FMAs, the broadcasts alternating between
// two registers so that each is loaded a row ahead of its FMAs. One line of
// B (a step) asked for 32 steps ahead, as the intrinsic kernel does.
// AT&T order: vfmadd231ps b, x, c is c = x * b + c.
#define NEE_ASM_STR(x) #x
#define NEE_ASM_ROW(u, r, x, next)                               \
  "vfmadd231ps %%ymm12, %%" #x ", %[c" #r "0]\n\t"               \
  "vfmadd231ps %%ymm13, %%" #x ", %[c" #r "1]\n\t"               \
  next
#define NEE_ASM_BROADCAST(u, r, x) "vbroadcastss " NEE_ASM_STR(48 * u + 4 * r) "(%[a]), %%" #x "\n\t"
#define NEE_ASM_STEP(u)                                          \
  "vmovaps " NEE_ASM_STR(64 * u) "(%[b]), %%ymm12\n\t"             \
  "vmovaps " NEE_ASM_STR(64 * u + 32) "(%[b]), %%ymm13\n\t"        \
  NEE_ASM_BROADCAST(u, 0, ymm14)                                    \
  NEE_ASM_BROADCAST(u, 1, ymm15)                                    \
  "prefetcht0 " NEE_ASM_STR(64 * u + 2048) "(%[b])\n\t"          \
  NEE_ASM_ROW(u, 0, ymm14, NEE_ASM_BROADCAST(u, 2, ymm14))             \
  NEE_ASM_ROW(u, 1, ymm15, NEE_ASM_BROADCAST(u, 3, ymm15))             \
  NEE_ASM_ROW(u, 2, ymm14, NEE_ASM_BROADCAST(u, 4, ymm14))             \
  NEE_ASM_ROW(u, 3, ymm15, NEE_ASM_BROADCAST(u, 5, ymm15))             \
  NEE_ASM_ROW(u, 4, ymm14, "")                                      \
  NEE_ASM_ROW(u, 5, ymm15, "")

__attribute__((target("avx2,fma"))) void SubTile6x16PanelAsm(int64_t kc, const float* a, const float* b,
                                                             const float* const* /*b_rows*/, float* c, int64_t ldc,
                                                             int64_t cols, bool accumulate) {
  // The tile of C is written after the loop: fetch it now (as the intrinsic
  // kernel does), so that a tile that left the caches does not stall the end.
#pragma GCC unroll 6
  for (int r = 0; r < 6; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 15), _MM_HINT_T0);
  }
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(),
         c11 = _mm256_setzero_ps(), c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(),
         c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c40 = _mm256_setzero_ps(),
         c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  // The loop's scratch registers are fixed (ymm12-13 B, ymm14-15 A; the
  // clobbers keep the accumulators out of them): as operands, they and the
  // accumulators would pass GCC's limit of 30.
  int64_t left = kc;
  // Four steps per trip, then the last kc % 4 one at a time (p ascending
  // throughout, so each accumulator's chain is the intrinsic kernel's).
  __asm__(
      "sub $4, %[left]\n\t"
      "jl 2f\n\t"
      ".p2align 5\n"
      "1:\n\t"
      NEE_ASM_STEP(0) NEE_ASM_STEP(1) NEE_ASM_STEP(2) NEE_ASM_STEP(3)
      "add $192, %[a]\n\t"
      "add $256, %[b]\n\t"
      "sub $4, %[left]\n\t"
      "jge 1b\n"
      "2:\n\t"
      "add $4, %[left]\n\t"
      "jle 4f\n"
      "3:\n\t"
      NEE_ASM_STEP(0)
      "add $48, %[a]\n\t"
      "add $64, %[b]\n\t"
      "dec %[left]\n\t"
      "jnz 3b\n"
      "4:\n\t"
      : [c00] "+x"(c00), [c01] "+x"(c01), [c10] "+x"(c10), [c11] "+x"(c11), [c20] "+x"(c20), [c21] "+x"(c21),
        [c30] "+x"(c30), [c31] "+x"(c31), [c40] "+x"(c40), [c41] "+x"(c41), [c50] "+x"(c50), [c51] "+x"(c51),
        [a] "+r"(a), [b] "+r"(b), [left] "+r"(left)
      :
      : "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory");
  const __m256 acc[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
#pragma GCC unroll 6
  for (int r = 0; r < 6; ++r) {
    float* cr = c + r * ldc;
    if (cols == 16) {
#pragma GCC unroll 2
      for (int v = 0; v < 2; ++v) {
        __m256 sum = acc[r][v];
        if (accumulate) sum = _mm256_add_ps(sum, _mm256_loadu_ps(cr + 8 * v));
        _mm256_storeu_ps(cr + 8 * v, sum);
      }
    } else {
      alignas(32) float tile[16];
      _mm256_store_ps(tile, acc[r][0]);
      _mm256_store_ps(tile + 8, acc[r][1]);
      for (int64_t j = 0; j < cols; ++j) cr[j] = accumulate ? cr[j] + tile[j] : tile[j];
    }
  }
}
#undef NEE_ASM_STEP
#undef NEE_ASM_BROADCAST
#undef NEE_ASM_ROW
#undef NEE_ASM_STR

bool HaveSubTile6x16PanelAsm() { return true; }
#else
void SubTile6x16PanelAsm(int64_t, const float*, const float*, const float* const*, float*, int64_t, int64_t, bool) {}
bool HaveSubTile6x16PanelAsm() { return false; }
#endif

}  // namespace nee::cpu::sgemm_internal
