// The float16 MatMul / Gemm fast kernels (ep/cpu/f16_matmul_fast.cc over
// f16_gemm.cc's float16-weight GEMM) against the reference kernels, which
// compute float16 in float32 and round each output once. The two differ only
// in the order of the float32 sums, so each output may differ by the rounding
// of a sum: within one float16 ulp of the output plus float32's epsilon times
// k times the sum of |a b| over k. Each case runs on every micro-kernel this
// CPU has (AVX-512, AVX2 + F16C, portable: SgemmLimitIsa, as NEE_MAX_ISA
// would), at 1, 2 and 3 threads and with B packed once as a constant.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "base/cpu_isa.h"
#include "bf16_test_util.h"  // RunFast, CheckGemmAgainstReference
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/f16_gemm.h"
#include "ep/cpu/sgemm.h"
#include "ep_test_util.h"
#include "ir/float_formats.h"

namespace nee {
namespace {

using bf16_test::RunFast;

std::vector<int64_t> Dims(std::initializer_list<int64_t> d) { return d; }

// float16 values uniform in [-1, 1) (rounded from float32).
Tensor RandomHalf(const std::vector<int64_t>& dims, std::mt19937& rng) {
  const std::vector<float> f = testing::RandomFloats(testing::ElementCount(dims), rng);
  Tensor t = Tensor::Allocate(DataType::kFloat16, dims).value();
  for (size_t i = 0; i < f.size(); ++i) t.data<uint16_t>()[i] = FloatToHalf(f[i]);
  return t;
}

float At(const Tensor& t, int64_t i) { return HalfToFloat(t.data<uint16_t>()[i]); }

// One float16 ulp at |v| (11 significant bits), at least the smallest subnormal's.
double HalfUlp(double v) { return std::ldexp(1.0, std::max(std::ilogb(std::max(std::abs(v), 1e-30)), -14) - 10); }

const bf16_test::NarrowFormat kHalf = {DataType::kFloat16, HalfToFloat, HalfUlp, 8};

// The ISA the kernel should run under the limit `isa` on this CPU.
cpu::F16GemmIsa ExpectedIsa(cpu::SgemmIsa isa) {
  const int level = std::min(static_cast<int>(isa), static_cast<int>(HostIsaLevel()));
  return static_cast<cpu::F16GemmIsa>(level);
}

class F16Gemm : public ::testing::TestWithParam<cpu::SgemmIsa> {
 protected:
  void SetUp() override {
    if (static_cast<int>(GetParam()) > static_cast<int>(HostIsaLevel()))
      GTEST_SKIP() << "this CPU (or NEE_MAX_ISA) is below the ISA level " << static_cast<int>(GetParam());
    cpu::SgemmLimitIsa(GetParam());
    // The kernel takes the limit: it is not the same code under every parameter.
    ASSERT_EQ(cpu::F16GemmActiveIsa(), ExpectedIsa(GetParam()));
  }
  void TearDown() override { cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512); }

  void CheckAgainstReference(KernelFn kernel, const Node& node, const std::vector<Value>& inputs, int64_t k,
                             const std::string& what, double scale = 1.0) {
    bf16_test::CheckGemmAgainstReference(kHalf, kernel, node, inputs, k, what, scale);
  }
};

TEST_P(F16Gemm, MatMulAgreesWithReferenceOnAwkwardShapes) {
  std::mt19937 rng(31);
  // n below / across / past the 32-column panel and its 16-column runs (and
  // AVX2's 8 lanes), m across the 6- and 12-row tiles and the task's row
  // groups, k = 0 (outputs 0), vector A, empty outputs.
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{1, 1}, {1, 1}},         {{3, 5}, {5, 7}},          {{13, 16}, {16, 17}},  {{12, 31}, {31, 32}},
      {{7, 9}, {9, 8}},         {{25, 64}, {64, 33}},      {{97, 129}, {129, 70}}, {{200, 96}, {96, 48}},
      {{7}, {7, 40}},           {{2, 3, 11}, {11, 16}},    {{4, 50, 300}, {300, 65}}, {{3, 0, 8}, {8, 5}},
      {{5, 0}, {0, 9}},         {{6, 40}, {40, 0}},        {{130, 1100}, {1100, 24}}};
  for (const auto& [ad, bd] : cases) {
    std::vector<Value> inputs = {Value(RandomHalf(ad, rng)), Value(RandomHalf(bd, rng))};
    CheckAgainstReference(cpu::MatMulFloatOrHalf, testing::MakeNode("MatMul", 2, 1), inputs, ad.back(),
                          DimsToString(ad) + " x " + DimsToString(bd));
  }
}

TEST_P(F16Gemm, BatchedAndBroadcastProducts) {
  std::mt19937 rng(32);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{2, 6, 40, 24}, {2, 6, 24, 50}},  // attention heads: many small products
      {{2, 1, 9, 17}, {3, 17, 20}},      // both batches broadcast
      {{5, 4, 33}, {1, 33, 7}},          // one B for every batch of A
      {{1, 3}, {4, 3, 18}},              // A broadcast over B's batch
      {{2, 130, 260}, {2, 260, 100}}};   // few large products, each over the threads
  for (const auto& [ad, bd] : cases) {
    std::vector<Value> inputs = {Value(RandomHalf(ad, rng)), Value(RandomHalf(bd, rng))};
    CheckAgainstReference(cpu::MatMulFloatOrHalf, testing::MakeNode("MatMul", 2, 1), inputs, ad.back(),
                          DimsToString(ad) + " x " + DimsToString(bd));
  }
}

TEST_P(F16Gemm, GemmWithTransposesAlphaBetaAndC) {
  std::mt19937 rng(33);
  const int64_t m = 29, n = 45, k = 37;
  const std::vector<std::vector<int64_t>> c_shapes = {{n}, {1, n}, {m, 1}, {m, n}, {1}, {}};
  for (size_t trial = 0; trial < 4 * c_shapes.size() + 4; ++trial) {
    const bool ta = trial & 1, tb = trial & 2;
    const bool with_c = trial < 4 * c_shapes.size();
    std::vector<Value> inputs = {Value(RandomHalf(ta ? Dims({k, m}) : Dims({m, k}), rng)),
                                 Value(RandomHalf(tb ? Dims({n, k}) : Dims({k, n}), rng))};
    if (with_c) inputs.push_back(Value(RandomHalf(c_shapes[trial / 4], rng)));
    const float alpha = trial % 3 ? 0.5f : 1.f, beta = trial % 5 ? 2.f : 0.f;
    Node node = testing::MakeNode("Gemm", inputs.size(), 1,
                                  {testing::IntAttr("transA", ta), testing::IntAttr("transB", tb),
                                   testing::FloatAttr("alpha", alpha), testing::FloatAttr("beta", beta)});
    const std::string what = "trans " + std::to_string(trial % 4) +
                             (with_c ? ", C " + DimsToString(c_shapes[trial / 4]) : std::string(", no C"));
    CheckAgainstReference(cpu::GemmFloatOrHalf, node, inputs, k, what, 2.0);
  }
}

// Infinities, NaN and overflow as the reference's: inf * 0 in a sum is NaN, a
// sum past 65504 rounds to infinity, a NaN input gives NaN.
TEST_P(F16Gemm, NonFiniteValuesAsTheReference) {
  std::mt19937 rng(34);
  Tensor a = RandomHalf({14, 9}, rng);
  Tensor b = RandomHalf({9, 35}, rng);
  bf16_test::CheckNonFiniteMatMul(kHalf, FloatToHalf, cpu::MatMulFloatOrHalf, a, b, 60000.f, /*same_nan_bits=*/true);
}

// Bad shapes are errors, not crashes.
TEST_P(F16Gemm, MismatchedShapesAreErrors) {
  std::mt19937 rng(35);
  std::vector<Value> inputs = {Value(RandomHalf({3, 4}, rng)), Value(RandomHalf({5, 6}, rng))};
  EXPECT_FALSE(RunFast(cpu::MatMulFloatOrHalf, testing::MakeNode("MatMul", 2, 1), inputs, 1).ok());
  std::vector<Value> batched = {Value(RandomHalf({2, 3, 4}, rng)), Value(RandomHalf({3, 4, 6}, rng))};
  EXPECT_FALSE(RunFast(cpu::MatMulFloatOrHalf, testing::MakeNode("MatMul", 2, 1), batched, 1).ok());
  std::vector<Value> gemm = {Value(RandomHalf({3, 4}, rng)), Value(RandomHalf({4, 6}, rng)),
                             Value(RandomHalf({2, 6}, rng))};
  EXPECT_FALSE(RunFast(cpu::GemmFloatOrHalf, testing::MakeNode("Gemm", 3, 1), gemm, 1).ok());
}

INSTANTIATE_TEST_SUITE_P(Isa, F16Gemm,
                         ::testing::Values(cpu::SgemmIsa::kAvx512, cpu::SgemmIsa::kAvx2, cpu::SgemmIsa::kPortable),
                         [](const ::testing::TestParamInfo<cpu::SgemmIsa>& info) {
                           switch (info.param) {
                             case cpu::SgemmIsa::kAvx512: return std::string("avx512");
                             case cpu::SgemmIsa::kAvx2: return std::string("avx2");
                             default: return std::string("portable");
                           }
                         });

// The packed weights are float16: half the bytes of SGEMM's float32 panels.
TEST(F16PackedB, KeepsTheWeightsAtTwoBytesAValue) {
  std::mt19937 rng(36);
  const Tensor b = RandomHalf({768, 3072}, rng);
  const cpu::F16PackedB packed(768, 3072, b.data<uint16_t>(), 3072, 1);
  EXPECT_EQ(packed.bytes(), 768 * 3072 * 2);
  // Element (r, j) of B is in run j / 16 of panel j / 32, row r.
  for (int64_t r : {0, 1, 767})
    for (int64_t j : {0, 15, 16, 31, 32, 3071})
      EXPECT_EQ(packed.run(j / 32, (j % 32) / 16)[r * 16 + j % 16], b.data<uint16_t>()[r * 3072 + j]) << r << ", " << j;
}

}  // namespace
}  // namespace nee
