// The 8-bit product of a few rows of A by a constant B (com.microsoft QGemm's batch-1 classifier: one row of
// 2048 bytes by a 2048 x 1000 int8 matrix) on AVX2 hosts without VNNI: a GEMV that streams B once, as it is
// stored (8-bit, half the bytes of igemm's widened layout), widening it to int16 in registers, exact for any
// bytes (no clamped pairs or remainders, which the u8 x s8 kernels need and which common classifier weights
// have too many of).
#pragma once
#include <cstdint>
#include <vector>

#include "ops/op_schema.h"

namespace nee::cpu {

constexpr int64_t kQGemvCols = 16;  // columns of B per packed panel

// Up to this many rows of A (a batch-1 classifier, an LSTM step of a batch of one) products take QGemv on AVX2
// hosts without VNNI (QGemm, DynamicQuantizeLSTM's h R): B streamed once as 8-bit bytes, exact for any weights.
// The u8 x s8 kernels need clamped pairs with few remainders, which such weights often lack (ResNet-50's
// classifier), so B went to igemm's widened layout, twice the bytes, with six-row tiles computing empty rows.
constexpr int64_t kQGemvMaxRows = 4;

// B packed in panels of 16 columns, each [k pairs][16 columns][2 bytes] (the pair's two k for one column side
// by side; k padded with a zero row to an even count, the last panel's columns with zeros).
struct QGemvPackedB {
  int64_t k = 0, n = 0;
  bool b_signed = true;  // int8 bytes, else uint8
  std::vector<uint8_t> data;
};

// Whether QGemv's AVX2 kernel runs now: AVX2 without VNNI (where VNNI runs, igemm's u8 x s8 kernel is exact
// for any bytes and takes these products), not forced portable.
bool QGemvPreferred();

// Packs B: [k, n] row-major, or [n, k] when b_transposed.
void QGemvPackB(const uint8_t* b, int64_t k, int64_t n, bool b_signed, bool b_transposed, QGemvPackedB* out);

// c[i * ldc + j] = sum_k (A[i][k] - za) (B[k][j] - zb[j * zb_stride]) for m rows of A (row-major, k = b.k
// bytes a row, int8 when a_signed), wrapping modulo 2^32 as the reference's int64 sums narrowed to int32;
// column panels split among ctx's threads (null: this thread's alone). The AVX2 kernel where the CPU has it,
// else a portable loop over the same packing.
void QGemv(const KernelContext* ctx, const uint8_t* a, bool a_signed, int64_t m, int32_t za, const QGemvPackedB& b,
           const int32_t* zb, int64_t zb_stride, int32_t* c, int64_t ldc);

}  // namespace nee::cpu
