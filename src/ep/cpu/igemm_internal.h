// What igemm.cc (the int16 GEMM), igemm_u8s8.cc (the u8 x s8 GEMM's packing
// and driver) and igemm_vnni.cc (its AVX-512 VNNI kernel) share; not for
// other callers (igemm.h is the interface).
#pragma once
#include <cstdint>

#include "ep/cpu/igemm.h"

namespace nee::cpu {

// Whether the AVX2 kernels run now (the ISA limit and SgemmPortableForced allowing).
bool IgemmUseAvx2();
// Whether the AVX-512 VNNI kernels run now: the CPU has VNNI and no test lowered the ISA below AVX-512.
bool IgemmUseVnni();

// out[j] = float(v[j]) * scale[j] (+ bias[j]), each step rounded once (igemm.h, IgemmFloatOut).
void IgemmFloatRow(const int32_t* v, int64_t cols, const float* scale, const float* bias, float* out);

// One VNNI tile of the u8 x s8 GEMM with its epilogue: rows [0, rows) (rows <=
// kIgemmRowsVnni) of an A panel packed with kIgemmRowsVnni rows, times one
// or two consecutive B panels (panels: 1 or 2; the second kquads * 64 bytes
// after the first), `cols` (<= 16 * panels) columns stored:
//   v[r][j] = S[r][j] - zb[j] * row_term[r] - za[r] * col_sum[j]   (mod 2^32)
// to c (int32, ldc) or, with `scale` set, float(v) * scale[j] (+ bias[j]) to
// out (ldo). zb, col_sum and scale hold 16 * panels values (zero past cols);
// bias is read for the stored columns only. za_col_sum and zb_zero only skip
// work: the values are the same.
struct U8S8VnniTile {
  const uint8_t* a = nullptr;
  const int8_t* b = nullptr;
  int64_t kquads = 0;
  const int32_t* row_term = nullptr;
  const int32_t* za = nullptr;
  const int32_t* zb = nullptr;
  const int32_t* col_sum = nullptr;
  // Set when every row has one za: za * col_sum[j], the same for all rows (then za and col_sum are not read).
  const int32_t* za_col_sum = nullptr;
  bool zb_zero = false;  // zb all 0 (symmetric weights): no row term
  int32_t* c = nullptr;
  int64_t ldc = 0;
  const float* scale = nullptr;
  const float* bias = nullptr;
  float* out = nullptr;
  int64_t ldo = 0;
  int64_t cols = 0;
};
void U8S8TileVnni(int64_t rows, int64_t panels, const U8S8VnniTile& t);

}  // namespace nee::cpu
