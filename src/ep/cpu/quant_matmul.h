// The 8-bit matrix product that MatMulInteger, com.microsoft
// MatMulIntegerToFloat (quant_fast.cc) and QLinearMatMul
// (qlinear_matmul_fast.cc) share: a constant B packed once per session for
// the integer GEMM (igemm.h), and C = (A - za)(B - zb) over the context's
// threads, exact.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "ep/cpu/igemm.h"
#include "ops/op_schema.h"

namespace nee::cpu::quant_matmul {

// A constant B packed once: for uint8 A, for the u8 x s8 kernel (always on
// AVX-512 VNNI; on AVX2 when few of its pairs need a remainder, igemm.h);
// otherwise widened. uint8 weights take the u8 x s8 kernel too, as int8 bytes
// B - 128 with zero points zb - 128: every B - zb, so every sum, is the same,
// in half the bytes of the widened layout and on VNNI's instruction.
//
// On AVX2 hosts without VNNI, for products of many rows (MatMulInteger's
// activations), uint8 A takes IgemmU8S8Paired instead when few enough of B's
// weights need a remainder (`paired`; then s8 and wide are empty).
struct QuantWeights {
  std::unique_ptr<IgemmPackedS8Paired> paired;
  std::unique_ptr<IgemmPackedBS8> s8;
  bool shifted = false;  // s8 holds uint8 weights minus 128: their zero points are read minus 128
  std::unique_ptr<IgemmPackedB> wide;
};

// B (k x n bytes, row-major; int8 when b_signed, else uint8) packed for A of
// uint8 (a_unsigned) or int8; `many_rows` for products of many rows of A
// (GetQuantWeights' MatMul-like ops), not of one or a few (an LSTM step's h),
// which the paired kernel's 8- and 16-row tiles would waste.
std::shared_ptr<QuantWeights> PackQuantWeights(const uint8_t* b, int64_t k, int64_t n, bool b_signed,
                                               bool a_unsigned, bool many_rows = false);

// B (input `index`, [k, n], 8-bit; [n, k] when b_transposed) packed, once
// per session when constant (its bytes then let go: runs read only the packed
// copy).
std::shared_ptr<const QuantWeights> GetQuantWeights(KernelContext& ctx, size_t index, const Tensor& b, int64_t k,
                                                    int64_t n, bool a_unsigned, bool b_transposed = false);

// C = (A - za) (B - zb) for A [rows, k] (row-major, 8-bit), into int32 c
// (row stride ldc) or through fout; za[i * za_stride], zb[j * zb_stride].
void QuantProduct(KernelContext& ctx, const Tensor& a, int64_t rows, int64_t k, const QuantWeights& w,
                  const int32_t* za, int64_t za_stride, const int32_t* zb, int64_t zb_stride, int32_t* c, int64_t ldc,
                  const IgemmFloatOut* fout);
// The same for A's bytes at `a` (int8 when a_signed, else uint8), over ctx's
// threads (null: the calling thread's alone).
void QuantProduct(const KernelContext* ctx, const uint8_t* a, bool a_signed, int64_t rows, int64_t k,
                  const QuantWeights& w, const int32_t* za, int64_t za_stride, const int32_t* zb, int64_t zb_stride,
                  int32_t* c, int64_t ldc, const IgemmFloatOut* fout);

// A zero point input: absent (0), one value, or `per_axis` values of `type`
// (stride 1; a single value has stride 0). False when malformed (the
// reference reports it).
bool ReadZeroPoint(const KernelContext& ctx, size_t index, DataType type, int64_t per_axis, bool allow_per_axis,
                   std::vector<int32_t>& out, int64_t& stride);

}  // namespace nee::cpu::quant_matmul
