// What the bfloat16 kernel tests share (bf16_gemm_test.cc, bf16_conv_test.cc):
// random bfloat16 tensors, bitwise comparison, the bfloat16 ulp, and running
// a fast kernel on a thread pool as a session does; with the float16 GEMM's
// test (f16_gemm_test.cc), the check of a 16-bit-float GEMM kernel against
// the reference (CheckGemmAgainstReference).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ep/cpu/bf16_gemm.h"
#include "ep_test_util.h"
#include "ir/float_formats.h"

namespace nee::bf16_test {

#define SKIP_WITHOUT_AVX512BF16() \
  if (!cpu::CpuHasAvx512Bf16()) GTEST_SKIP() << "this CPU lacks avx512bf16"

// bfloat16 values uniform in [-1, 1) (rounded from float32).
inline Tensor RandomBf16(const std::vector<int64_t>& dims, std::mt19937& rng) {
  const std::vector<float> f = testing::RandomFloats(testing::ElementCount(dims), rng);
  Tensor t = Tensor::Allocate(DataType::kBFloat16, dims).value();
  for (size_t i = 0; i < f.size(); ++i) t.data<uint16_t>()[i] = FloatToBFloat16(f[i]);
  return t;
}

inline float At(const Tensor& t, int64_t i) { return BFloat16ToFloat(t.data<uint16_t>()[i]); }

inline bool BitwiseEqual(const Tensor& x, const Tensor& y) {
  return x.dtype() == y.dtype() && x.dims() == y.dims() &&
         std::memcmp(x.raw_data(), y.raw_data(), x.byte_size()) == 0;
}

// One bfloat16 ulp at |v| (8 significant bits), at least the smallest normal's.
inline double BfUlp(double v) {
  return std::ldexp(1.0, std::max(std::ilogb(std::max(std::abs(v), 1e-30)), -126) - 7);
}

// The fast kernel with a pool of `threads` threads, as a session runs it:
// with a PreparedCache when `cache` is given, the inputs marked `constant`.
inline Result<Tensor> RunFast(KernelFn kernel, const Node& node, const std::vector<Value>& inputs, int threads,
                              PreparedCache* cache = nullptr, std::vector<bool> constant = {}, int64_t opset = 13) {
  std::vector<const Value*> ptrs;
  for (const Value& v : inputs) ptrs.push_back(&v);
  std::vector<Value> outputs(1);
  ThreadPool pool(threads);
  KernelContext ctx(node, opset, ptrs, &outputs, nullptr, &pool, nullptr);
  constant.resize(inputs.size(), false);
  if (cache) ctx.SetPrepared(cache, &constant);
  NEE_RETURN_IF_ERROR(kernel(ctx));
  return outputs[0].tensor();
}

// A 16-bit float format as the GEMM checks read it.
struct NarrowFormat {
  DataType type;
  float (*to_float)(uint16_t);
  double (*ulp)(double);  // one ulp at |v|
  int max_differing_share;  // at most 1 / this of the outputs may differ from the reference
};

// Expects `got` within the accumulation-order bound of `want` for a sum over
// `k` terms whose magnitudes add up to at most `abs_sum` (an upper bound for
// every output: the inputs lie in [-1, 1], so k * max |alpha| suffices).
inline void ExpectCloseToReference(const NarrowFormat& f, const Tensor& got, const Tensor& want, double abs_sum,
                                   const std::string& what) {
  ASSERT_EQ(got.dtype(), f.type) << what;
  ASSERT_EQ(got.dims(), want.dims()) << what;
  int differing = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double g = f.to_float(got.data<uint16_t>()[i]), w = f.to_float(want.data<uint16_t>()[i]);
    const double tol = f.ulp(std::max(std::abs(g), std::abs(w))) + abs_sum * 0x1p-23;
    ASSERT_LE(std::abs(g - w), tol) << what << " element " << i << ": " << g << " vs " << w;
    differing += g != w;
  }
  // Most outputs round alike: a difference is a float32 sum next to a rounding boundary.
  EXPECT_LE(differing, want.num_elements() / f.max_differing_share + 1) << what;
}

// Runs the fast kernel at 1, 2 and 3 threads and with B packed once through a
// PreparedCache: every result bitwise equal, and within the accumulation
// bound of the reference kernel.
inline void CheckGemmAgainstReference(const NarrowFormat& f, KernelFn kernel, const Node& node,
                                      const std::vector<Value>& inputs, int64_t k, const std::string& what,
                                      double scale = 1.0) {
  auto ref = testing::RunOp(node, 13, inputs);
  ASSERT_TRUE(ref.ok()) << what << ": " << ref.status().ToString();
  auto one = RunFast(kernel, node, inputs, 1);
  ASSERT_TRUE(one.ok()) << what << ": " << one.status().ToString();
  ExpectCloseToReference(f, one.value(), ref->outputs[0].tensor(), scale * static_cast<double>(k), what);
  for (int threads : {2, 3}) {
    auto many = RunFast(kernel, node, inputs, threads);
    ASSERT_TRUE(many.ok()) << what;
    EXPECT_TRUE(BitwiseEqual(one.value(), many.value())) << what << ", " << threads << " threads";
  }
  PreparedCache cache;
  for (int run = 0; run < 2; ++run) {
    auto packed = RunFast(kernel, node, inputs, 2, &cache, {false, true});
    ASSERT_TRUE(packed.ok()) << what;
    EXPECT_TRUE(BitwiseEqual(one.value(), packed.value())) << what << ", B constant, run " << run;
  }
}

// A 14 x 9 by 9 x 35 MatMul on `kernel` (a and b random, in the format `f`)
// with an infinity and a NaN in A and a pair of `big` values whose product
// overflows: inf * 0 in a sum is NaN, a NaN input gives NaN, the overflowing
// sum rounds to infinity, as in the reference kernel. `same_nan_bits`: NaN
// outputs must have the reference's encoding too (else: NaN where it has NaN).
inline void CheckNonFiniteMatMul(const NarrowFormat& f, uint16_t (*from_float)(float), KernelFn kernel, Tensor a,
                                 Tensor b, float big, bool same_nan_bits) {
  a.data<uint16_t>()[3] = from_float(INFINITY);
  a.data<uint16_t>()[9 * 5 + 8] = from_float(NAN);
  b.data<uint16_t>()[35 * 4 + 2] = from_float(big);
  a.data<uint16_t>()[9 * 7 + 4] = from_float(big);
  Node node = testing::MakeNode("MatMul", 2, 1);
  std::vector<Value> inputs = {Value(a), Value(b)};
  auto ref = testing::RunOp(node, 13, inputs);
  auto fast = RunFast(kernel, node, inputs, 2);
  ASSERT_TRUE(ref.ok() && fast.ok());
  const Tensor& want = ref->outputs[0].tensor();
  int non_finite = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const uint16_t gb = fast.value().data<uint16_t>()[i], wb = want.data<uint16_t>()[i];
    const float g = f.to_float(gb), w = f.to_float(wb);
    if (std::isfinite(w)) continue;
    ++non_finite;
    if (same_nan_bits) {
      EXPECT_EQ(gb, wb) << i << ": " << g << " vs " << w;
    } else {
      EXPECT_EQ(std::isnan(g), std::isnan(w)) << i;
      if (!std::isnan(w)) EXPECT_EQ(g, w) << i;
    }
  }
  EXPECT_GT(non_finite, 35);
}

}  // namespace nee::bf16_test
