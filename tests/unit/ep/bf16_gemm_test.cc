// The bfloat16 MatMul / Gemm fast kernels (ep/cpu/bf16_matmul_fast.cc over
// bf16_gemm.cc's vdpbf16ps GEMM) against the reference kernels, which compute
// bfloat16 in float32 and round each output once. The two differ only in the
// order of the float32 sums (and vdpbf16ps's flushing of denormals), so each
// output may differ by the rounding of a sum: within one bfloat16 ulp of the
// output plus float32's epsilon times k times the sum of |a b| over k.
#include <gtest/gtest.h>

#include "base/cpu_isa.h"

#include <cmath>
#include <cstring>
#include <random>

#include "ep/cpu/bf16_gemm.h"
#include "ep/cpu/cpu_kernels.h"
#include "bf16_test_util.h"
#include "ep_test_util.h"
#include "ir/float_formats.h"

namespace nee {
namespace {

using namespace bf16_test;

std::vector<int64_t> Dims(std::initializer_list<int64_t> d) { return d; }

const NarrowFormat kBf16 = {DataType::kBFloat16, BFloat16ToFloat, BfUlp, 4};

void CheckAgainstReference(KernelFn kernel, const Node& node, const std::vector<Value>& inputs, int64_t k,
                           const std::string& what) {
  CheckGemmAgainstReference(kBf16, kernel, node, inputs, k, what);
}

TEST(Bf16MatMul, AgreesWithReferenceOnAwkwardShapes) {
  SKIP_WITHOUT_AVX512BF16();
  std::mt19937 rng(21);
  // k odd and even, n below / across / past the 32-column panel and its
  // 16-column halves, m across the 12-row tile and the 96-row task.
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{1, 1}, {1, 1}},        {{3, 5}, {5, 7}},          {{13, 16}, {16, 17}},   {{12, 31}, {31, 32}},
      {{25, 64}, {64, 33}},    {{97, 129}, {129, 70}},    {{200, 96}, {96, 48}},  {{7}, {7, 40}},
      {{2, 3, 11}, {11, 16}},  {{4, 50, 300}, {300, 65}}, {{3, 0, 8}, {8, 5}},    {{5, 0}, {0, 9}}};
  for (const auto& [ad, bd] : cases) {
    std::vector<Value> inputs = {Value(RandomBf16(ad, rng)), Value(RandomBf16(bd, rng))};
    CheckAgainstReference(cpu::MatMulFloat, testing::MakeNode("MatMul", 2, 1), inputs, ad.back(),
                          DimsToString(ad) + " x " + DimsToString(bd));
  }
}

TEST(Bf16MatMul, BatchedAndBroadcastProducts) {
  SKIP_WITHOUT_AVX512BF16();
  std::mt19937 rng(22);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{2, 6, 40, 24}, {2, 6, 24, 50}},  // attention heads: many small products
      {{2, 1, 9, 17}, {3, 17, 20}},      // both batches broadcast
      {{5, 4, 33}, {1, 33, 7}},          // one B for every batch of A
      {{1, 3}, {4, 3, 18}},              // A broadcast over B's batch
      {{2, 130, 260}, {2, 260, 100}}};   // few large products, each over the threads
  for (const auto& [ad, bd] : cases) {
    std::vector<Value> inputs = {Value(RandomBf16(ad, rng)), Value(RandomBf16(bd, rng))};
    CheckAgainstReference(cpu::MatMulFloat, testing::MakeNode("MatMul", 2, 1), inputs, ad.back(),
                          DimsToString(ad) + " x " + DimsToString(bd));
  }
}

TEST(Bf16Gemm, AgreesWithReferenceWithTransposesAlphaBetaAndC) {
  SKIP_WITHOUT_AVX512BF16();
  std::mt19937 rng(23);
  const int64_t m = 29, n = 45, k = 37;
  const std::vector<std::vector<int64_t>> c_shapes = {{n}, {1, n}, {m, 1}, {m, n}, {1}, {}};
  for (size_t trial = 0; trial < 4 * c_shapes.size() + 4; ++trial) {
    const bool ta = trial & 1, tb = trial & 2;
    const bool with_c = trial < 4 * c_shapes.size();
    std::vector<Value> inputs = {Value(RandomBf16(ta ? Dims({k, m}) : Dims({m, k}), rng)),
                                 Value(RandomBf16(tb ? Dims({n, k}) : Dims({k, n}), rng))};
    if (with_c) inputs.push_back(Value(RandomBf16(c_shapes[trial / 4], rng)));
    const float alpha = trial % 3 ? 0.5f : 1.f, beta = trial % 5 ? 2.f : 0.f;
    Node node = testing::MakeNode("Gemm", inputs.size(), 1,
                                  {testing::IntAttr("transA", ta), testing::IntAttr("transB", tb),
                                   testing::FloatAttr("alpha", alpha), testing::FloatAttr("beta", beta)});
    const std::string what = "trans " + std::to_string(trial % 4) +
                             (with_c ? ", C " + DimsToString(c_shapes[trial / 4]) : std::string(", no C"));
    CheckAgainstReference(cpu::GemmFloat, node, inputs, k, what);
  }
}

// vdpbf16ps treats denormal inputs as zero, whatever MXCSR says: a product
// of a denormal bfloat16 counts as 0, where the reference keeps it. (The
// kernel's documented difference; bfloat16 denormals lie below 1.2e-38.)
TEST(Bf16MatMul, DenormalInputsCountAsZero) {
  SKIP_WITHOUT_AVX512BF16();
  Tensor a = Tensor::Allocate(DataType::kBFloat16, {1, 2}).value();
  Tensor b = Tensor::Allocate(DataType::kBFloat16, {2, 1}).value();
  a.data<uint16_t>()[0] = 0x0040;  // 2^-127: a denormal (exponent bits 0)
  a.data<uint16_t>()[1] = FloatToBFloat16(1.f);
  b.data<uint16_t>()[0] = FloatToBFloat16(4.f);
  b.data<uint16_t>()[1] = FloatToBFloat16(0.f);
  Node node = testing::MakeNode("MatMul", 2, 1);
  std::vector<Value> inputs = {Value(a), Value(b)};
  auto ref = testing::RunOp(node, 13, inputs);
  auto fast = RunFast(cpu::MatMulFloat, node, inputs, 1);
  ASSERT_TRUE(ref.ok() && fast.ok());
  EXPECT_GT(At(ref->outputs[0].tensor(), 0), 0.f);  // 4 x the denormal
  EXPECT_EQ(At(fast.value(), 0), 0.f);
}

// Infinities and NaN propagate as the reference's: inf * 0 in a sum is NaN,
// a NaN output is a quiet NaN, an overflowing sum rounds to infinity.
TEST(Bf16MatMul, NonFiniteValuesAsTheReference) {
  SKIP_WITHOUT_AVX512BF16();
  std::mt19937 rng(24);
  Tensor a = RandomBf16({14, 9}, rng);
  Tensor b = RandomBf16({9, 35}, rng);
  CheckNonFiniteMatMul(kBf16, FloatToBFloat16, cpu::MatMulFloat, a, b, 3e38f, /*same_nan_bits=*/false);
}

// Bad shapes are errors, not crashes.
TEST(Bf16MatMul, MismatchedShapesAreErrors) {
  SKIP_WITHOUT_AVX512BF16();
  std::mt19937 rng(25);
  std::vector<Value> inputs = {Value(RandomBf16({3, 4}, rng)), Value(RandomBf16({5, 6}, rng))};
  EXPECT_FALSE(RunFast(cpu::MatMulFloat, testing::MakeNode("MatMul", 2, 1), inputs, 1).ok());
  std::vector<Value> batched = {Value(RandomBf16({2, 3, 4}, rng)), Value(RandomBf16({3, 4, 6}, rng))};
  EXPECT_FALSE(RunFast(cpu::MatMulFloat, testing::MakeNode("MatMul", 2, 1), batched, 1).ok());
  std::vector<Value> gemm = {Value(RandomBf16({3, 4}, rng)), Value(RandomBf16({4, 6}, rng)),
                             Value(RandomBf16({2, 6}, rng))};
  EXPECT_FALSE(RunFast(cpu::GemmFloat, testing::MakeNode("Gemm", 3, 1), gemm, 1).ok());
}


}  // namespace
}  // namespace nee
