// The AVX2 6x16 packed-panel SGEMM sub-tile with its k loop in inline
// assembly (contract in sgemm_avx2_asm.h).
#include "ep/cpu/sgemm_avx2_asm.h"

#include <algorithm>

#include "ep/cpu/sgemm.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define NEE_SGEMM_ASM 1
#endif

namespace nee::cpu::sgemm_internal {

#ifdef NEE_SGEMM_ASM
static_assert(kSgemmTileRows == 12 && kSgemmPanelRun == 16,
              "the assembly's offsets are for A steps of 12 floats and B runs of 16");

// One step of p, `u` steps past the loop's pointers (A at r8, B at r9): B's
// two vectors, then per row a broadcast of A and two FMAs, the broadcasts
// alternating between two registers so that each is loaded a row ahead of
// its FMAs. One line of B (a step) asked for 32 steps ahead, as the
// intrinsic kernel does; `extra` goes after that prefetch.
// AT&T order: vfmadd231ps b, x, c is c = x * b + c.
#define NEE_ASM_STR(x) #x
#define NEE_ASM_ROW(r, x, next)                     \
  "vfmadd231ps %%ymm12, %%" #x ", %[c" #r "0]\n\t" \
  "vfmadd231ps %%ymm13, %%" #x ", %[c" #r "1]\n\t" next
#define NEE_ASM_BROADCAST(u, r, x) "vbroadcastss " NEE_ASM_STR(48 * u + 4 * r) "(%%r8), %%" #x "\n\t"
#define NEE_ASM_STEP(u, extra)                               \
  "vmovaps " NEE_ASM_STR(64 * u) "(%%r9), %%ymm12\n\t"       \
  "vmovaps " NEE_ASM_STR(64 * u + 32) "(%%r9), %%ymm13\n\t"  \
  NEE_ASM_BROADCAST(u, 0, ymm14)                             \
  NEE_ASM_BROADCAST(u, 1, ymm15)                             \
  "prefetcht0 " NEE_ASM_STR(64 * u + 2048) "(%%r9)\n\t"      \
  extra                                                      \
  NEE_ASM_ROW(0, ymm14, NEE_ASM_BROADCAST(u, 2, ymm14))      \
  NEE_ASM_ROW(1, ymm15, NEE_ASM_BROADCAST(u, 3, ymm15))      \
  NEE_ASM_ROW(2, ymm14, NEE_ASM_BROADCAST(u, 4, ymm14))      \
  NEE_ASM_ROW(3, ymm15, NEE_ASM_BROADCAST(u, 5, ymm15))      \
  NEE_ASM_ROW(4, ymm14, "")                                  \
  NEE_ASM_ROW(5, ymm15, "")
// Line `u` past r11, asked for as a step's `extra` while fetching ahead
// (BSource::fetch).
#define NEE_ASM_FETCH(u) "prefetcht0 " NEE_ASM_STR(64 * u) "(%%r11)\n\t"

__attribute__((target("avx2,fma"))) void SubTile6x16PanelAsm(int64_t kc, const float* a, const float* b,
                                                             const float* const* /*b_rows*/, float* c, int64_t ldc,
                                                             int64_t cols, bool accumulate, const float* fetch,
                                                             int64_t fetch_lines) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(),
         c11 = _mm256_setzero_ps(), c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(),
         c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c40 = _mm256_setzero_ps(),
         c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  // Steps [p0, p0 + n) of the sub-tile: four per trip, then the last n % 4
  // one at a time (p ascending throughout, so each accumulator's chain is
  // the intrinsic kernel's). The loop's registers are fixed (r8 A, r9 B,
  // r10 the count, ymm12-13 B's vectors, ymm14-15 A's broadcasts; the
  // clobbers keep the accumulators out of them): the accumulators alone take
  // 24 of GCC's limit of 30 operands.
#define NEE_ASM_OPERANDS                                                                                    \
  : [c00] "+x"(c00), [c01] "+x"(c01), [c10] "+x"(c10), [c11] "+x"(c11), [c20] "+x"(c20), [c21] "+x"(c21), \
    [c30] "+x"(c30), [c31] "+x"(c31), [c40] "+x"(c40), [c41] "+x"(c41), [c50] "+x"(c50), [c51] "+x"(c51)
#define NEE_ASM_STEPS(p0, n)                                                                                  \
  __asm__("mov %[a], %%r8\n\t"                                                                                \
          "mov %[b], %%r9\n\t"                                                                                \
          "mov %[count], %%r10\n\t"                                                                           \
          "sub $4, %%r10\n\t"                                                                                 \
          "jl 2f\n\t"                                                                                         \
          ".p2align 5\n"                                                                                      \
          "1:\n\t" NEE_ASM_STEP(0, "") NEE_ASM_STEP(1, "") NEE_ASM_STEP(2, "") NEE_ASM_STEP(3, "")            \
          "add $192, %%r8\n\t"                                                                                \
          "add $256, %%r9\n\t"                                                                                \
          "sub $4, %%r10\n\t"                                                                                 \
          "jge 1b\n"                                                                                          \
          "2:\n\t"                                                                                            \
          "add $4, %%r10\n\t"                                                                                 \
          "jle 4f\n"                                                                                          \
          "3:\n\t" NEE_ASM_STEP(0, "")                                                                        \
          "add $48, %%r8\n\t"                                                                                 \
          "add $64, %%r9\n\t"                                                                                 \
          "dec %%r10\n\t"                                                                                     \
          "jnz 3b\n"                                                                                          \
          "4:\n\t" NEE_ASM_OPERANDS                                                                           \
          : [a] "r"(a + (p0) * kSgemmTileRows), [b] "r"(b + (p0) * kSgemmPanelRun), [count] "r"(n)            \
          : "r8", "r9", "r10", "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory")
  // Steps [0, n), n a multiple of 4, asking for a line from `fetch` on each.
#define NEE_ASM_STEPS_FETCHING(n)                                                                             \
  __asm__("mov %[a], %%r8\n\t"                                                                                \
          "mov %[b], %%r9\n\t"                                                                                \
          "mov %[count], %%r10\n\t"                                                                           \
          "mov %[f], %%r11\n\t"                                                                               \
          ".p2align 5\n"                                                                                      \
          "1:\n\t" NEE_ASM_STEP(0, NEE_ASM_FETCH(0)) NEE_ASM_STEP(1, NEE_ASM_FETCH(1))                        \
              NEE_ASM_STEP(2, NEE_ASM_FETCH(2)) NEE_ASM_STEP(3, NEE_ASM_FETCH(3))                             \
          "add $192, %%r8\n\t"                                                                                \
          "add $256, %%r9\n\t"                                                                                \
          "add $256, %%r11\n\t"                                                                               \
          "sub $4, %%r10\n\t"                                                                                 \
          "jg 1b\n\t" NEE_ASM_OPERANDS                                                                        \
          : [a] "r"(a), [b] "r"(b), [count] "r"(n), [f] "r"(fetch)                                            \
          : "r8", "r9", "r10", "r11", "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory")
  // BSource::fetch's share of lines (sgemm_kernels.h) is asked for in the
  // first steps, four a trip (rounded up to whole trips; never past kc).
  const int64_t fetch_steps = std::min((fetch_lines + 3) / 4 * 4, kc / 4 * 4);
  if (fetch_steps > 0) NEE_ASM_STEPS_FETCHING(fetch_steps);
  // The tile of C is read and written after the loop: it is fetched into L1
  // first, so that a tile that left the caches does not stall the end, and
  // late, about 32 steps before the end: fetched at the start (as the
  // intrinsic kernel does), its lines had 16 KiB of B and 12 KiB of A stream
  // through L1 after them and were often gone again when the loop ended.
  const int64_t c_at = std::max(fetch_steps, kc > 32 ? (kc - 32) / 4 * 4 : 0);
  if (c_at > fetch_steps) NEE_ASM_STEPS(fetch_steps, c_at - fetch_steps);
#pragma GCC unroll 6
  for (int r = 0; r < 6; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 15), _MM_HINT_T0);
  }
  NEE_ASM_STEPS(c_at, kc - c_at);
#undef NEE_ASM_STEPS_FETCHING
#undef NEE_ASM_STEPS
#undef NEE_ASM_OPERANDS
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
#undef NEE_ASM_FETCH
#undef NEE_ASM_STEP
#undef NEE_ASM_BROADCAST
#undef NEE_ASM_ROW
#undef NEE_ASM_STR

bool HaveSubTile6x16PanelAsm() { return true; }
#else
void SubTile6x16PanelAsm(int64_t, const float*, const float*, const float* const*, float*, int64_t, int64_t, bool,
                         const float*, int64_t) {}
bool HaveSubTile6x16PanelAsm() { return false; }

#endif

}  // namespace nee::cpu::sgemm_internal
