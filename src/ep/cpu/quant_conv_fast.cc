// ai.nee ConvIntegerToFloat (ops/quant_conv.h) on the CPU: ConvInteger's fast
// kernel (quant_fast.cc) writes its int32 sums into the float output's bytes,
// then one pass converts them in place, row by row (a row: one channel of one
// image), while the row is in cache: plus the int32 bias, to float, times the
// scale, plus the float bias (vectorized with AVX2: the same integer add,
// conversion, float multiply and add as the reference, so the same bits), then
// FusedConv's residual and activation (BiasResidualActivate, conv_common.h).
// Replaces the unfused chain's four to six passes over the output (the bias
// Adds, Cast, Mul, the residual Add, the activation) with one. Every element is
// computed the same way whichever thread converts it.
#include <cstring>

#include "ep/cpu/conv_common.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/no_fp_contract.h"
#include "ep/cpu/sgemm.h"
#include "ops/quant_conv.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "ep/cpu/simd_x86.h"
#define NEE_QUANT_CONV_X86 1
#endif

namespace nee::cpu {

namespace {

// One row's dequantization: float(sum + sum_bias) * scale + bias.
struct RowDequant {
  int32_t sum_bias;
  float scale, bias;
};

// The n int32 sums at `bytes`, in place. (Multiply and add rounded apart, as the Mul and Add nodes do.)
NEE_NO_FP_CONTRACT void DequantizeRowPortable(uint8_t* bytes, int64_t n, const RowDequant& d) {
  for (int64_t j = 0; j < n; ++j) {
    int32_t sum;
    std::memcpy(&sum, bytes + 4 * j, 4);
    const uint32_t biased = static_cast<uint32_t>(sum) + static_cast<uint32_t>(d.sum_bias);
    // Two statements: Clang fuses a multiply and an add within one expression where FMA is available
    // (this loop is inlined into the AVX2 one for its tail), and has no per-function switch against it.
    float y = static_cast<float>(static_cast<int32_t>(biased)) * d.scale;
    y = y + d.bias;
    std::memcpy(bytes + 4 * j, &y, 4);
  }
}

#ifdef NEE_QUANT_CONV_X86
NEE_NO_FP_CONTRACT __attribute__((target("avx2,fma"))) void DequantizeRowAvx2(uint8_t* bytes, int64_t n,
                                                                                const RowDequant& d) {
  const __m256i sum_bias = _mm256_set1_epi32(d.sum_bias);
  const __m256 scale = _mm256_set1_ps(d.scale), bias = _mm256_set1_ps(d.bias);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256i sum = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes + 4 * j));
    // vpaddd wraps as the int32 Add does; vcvtdq2ps rounds to nearest as the Cast does.
    const __m256 v = _mm256_cvtepi32_ps(_mm256_add_epi32(sum, sum_bias));
    _mm256_storeu_ps(reinterpret_cast<float*>(bytes + 4 * j), _mm256_add_ps(_mm256_mul_ps(v, scale), bias));
  }
  DequantizeRowPortable(bytes + 4 * j, n - j, d);
}
#endif

void DequantizeRow(uint8_t* bytes, int64_t n, const RowDequant& d) {
#ifdef NEE_QUANT_CONV_X86
  if (CpuHasAvx2Fma() && !SgemmPortableForced()) return DequantizeRowAvx2(bytes, n, d);
#endif
  DequantizeRowPortable(bytes, n, d);
}

}  // namespace

Status ConvIntegerToFloatFast(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(Tensor y, RunConvIntegerIntoFloatOutput(ctx, ConvIntegerFast));
  auto epilogue = ReadConvIntegerEpilogue(ctx, y);
  if (!epilogue.ok()) return RunReference(ctx);  // which reports the error
  const ConvIntegerEpilogue& e = epilogue.value();
  const int64_t channels = y.dim(1);
  const int64_t rows = y.dim(0) * channels;
  const int64_t pixels = rows == 0 ? 0 : y.num_elements() / rows;
  auto* bytes = static_cast<uint8_t*>(y.raw_data());
  const bool finish = e.z || e.activation.kind != FusedActivation::Kind::kNone;
  ctx.ParallelFor(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(pixels, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t m = r % channels;
      // An absent bias adds -0, which leaves every float as it is (x + -0 is x, -0 included).
      const RowDequant d{e.sum_bias ? e.sum_bias[m * e.sum_bias_stride] : 0, e.scale[m * e.scale_stride],
                         e.bias ? e.bias[m * e.bias_stride] : -0.f};
      DequantizeRow(bytes + 4 * r * pixels, pixels, d);
      if (finish) {
        float* row = reinterpret_cast<float*>(bytes) + r * pixels;
        BiasResidualActivate(e.activation, nullptr, e.z ? e.z + r * pixels : nullptr, pixels, row, pixels, 1,
                             pixels);
      }
    }
  });
  return Status::Ok();
}

}  // namespace nee::cpu
