// QLinearMatMul: the fast kernel (ep/cpu/qlinear_matmul_fast.cc: the integer
// GEMM, then the requantization) against the reference kernel
// (ops/quantize.cc), bitwise, on each GEMM the machine has, at one and two
// threads; the cases it hands to the reference still get the reference's
// results and errors.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"
#include "ep_test_util.h"

namespace nee {
namespace {

Result<Tensor> RunFast(const Node& node, const std::vector<Value>& inputs, int threads) {
  return testing::RunKernelOmitting(cpu::QLinearMatMulFast, node, 21, inputs, threads);
}

const auto Scale = testing::UniformFloats;

struct Case {
  std::vector<int64_t> a_dims;
  int64_t n;
  DataType at = DataType::kUint8, bt = DataType::kInt8, yt = DataType::kUint8;
  bool per_column = false;  // b's scale and zero point per column
};

// a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp. y_scale is chosen so
// that outputs land both inside the range and past both ends.
std::vector<Value> MakeInputs(const Case& c, std::mt19937& rng) {
  const int64_t k = c.a_dims.empty() ? 1 : c.a_dims.back();
  const std::vector<int64_t> per = c.per_column ? std::vector<int64_t>{c.n} : std::vector<int64_t>{};
  return {Value(testing::Random8(c.at, c.a_dims, rng)),  Value(Scale({}, rng, 0.005f, 0.05f)),
          Value(testing::Random8(c.at, {}, rng)),        Value(testing::Random8(c.bt, {k, c.n}, rng)),
          Value(Scale(per, rng, 0.005f, 0.05f)),         Value(testing::Random8(c.bt, per, rng)),
          Value(Scale({}, rng, 0.02f, 0.4f)),            Value(testing::Random8(c.yt, {}, rng))};
}

using testing::ExpectBitwise;
using QLinearMatMulFastTest = testing::IsaLimitedTest;

TEST_P(QLinearMatMulFastTest, MatchesReferenceBitwise) {
  const DataType u8 = DataType::kUint8, s8 = DataType::kInt8;
  const std::vector<Case> cases = {
      {{128, 768}, 768},                  // a BERT projection
      {{1, 17}, 33},                      // one row, odd k, n past a panel
      {{17}, 5, u8, s8, u8, true},        // 1-D a, per-column b
      {{7, 31}, 16, s8, u8, s8},          // int8 a, uint8 b, int8 y
      {{2, 3, 13}, 40, u8, u8, s8, true}, // batched a, n not a multiple of 16
      {{6, 1}, 19},                       // k = 1
      {{13, 64}, 15, s8, s8, u8, true},
      {{9, 70}, 3},                       // fewer columns than a vector
      {{0, 8}, 4},                        // no rows
      {{3, 8}, 0},                        // no columns
      {{4, 0}, 3},                        // k = 0: sums are 0
  };
  std::mt19937 rng(41);
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<Value> inputs = MakeInputs(cases[i], rng);
    const Node node = testing::MakeNode("QLinearMatMul", 8, 1);
    auto ref = testing::RunOp(node, 21, inputs);
    ASSERT_TRUE(ref.ok()) << "case " << i << ": " << ref.status().ToString();
    for (int threads : {1, 2}) {
      auto got = RunFast(node, inputs, threads);
      ASSERT_TRUE(got.ok()) << "case " << i << ": " << got.status().ToString();
      ExpectBitwise(got.value(), ref->outputs[0].tensor(),
                    "case " + std::to_string(i) + " threads " + std::to_string(threads));
    }
  }
}

// A case's inputs with scalar scales a_scale, b_scale and y_scale, fast against reference at one and two threads.
void ExpectMatchesWithScales(const Case& c, float a_scale, float b_scale, float y_scale, std::mt19937& rng) {
  std::vector<Value> in = MakeInputs(c, rng);
  in[1] = Value(Tensor::FromVector(std::vector<float>{a_scale}, {}));
  in[4] = Value(Tensor::FromVector(std::vector<float>{b_scale}, {}));
  in[6] = Value(Tensor::FromVector(std::vector<float>{y_scale}, {}));
  const Node node = testing::MakeNode("QLinearMatMul", 8, 1);
  auto ref = testing::RunOp(node, 21, in);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  for (int threads : {1, 2}) {
    auto got = RunFast(node, in, threads);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectBitwise(got.value(), ref->outputs[0].tensor(), DataTypeName(c.yt) + (" threads " + std::to_string(threads)));
  }
}

// A BERT-sized projection at multipliers of a quantized model's size (0.002, with scales 0.02, 0.01, 0.1): the
// requantization by one fma a column (RoundingFmaExact holds for every sum the bytes allow); the random
// multipliers above take it in some cases and the double arithmetic in others.
TEST_P(QLinearMatMulFastTest, OneFmaRequantizationMatchesTheReference) {
  std::mt19937 rng(44);
  for (DataType yt : {DataType::kUint8, DataType::kInt8})
    ExpectMatchesWithScales(Case{{128, 768}, 768, DataType::kUint8, DataType::kInt8, yt}, 0.02f, 0.01f, 0.1f, rng);
}

// Saturation at both ends of each output type and rounding halves to even:
// a product of exactly half-integer values after scaling (multiplier 0.5: odd sums end in .5).
TEST_P(QLinearMatMulFastTest, SaturatesAndRoundsHalvesToEvenAsTheReference) {
  std::mt19937 rng(42);
  for (DataType yt : {DataType::kUint8, DataType::kInt8})
    ExpectMatchesWithScales(Case{{5, 24}, 37, DataType::kUint8, DataType::kInt8, yt}, 0.5f, 1.f, 1.f, rng);
}

// What the fast kernel leaves to the reference: per-row a scales, a batched
// b, and malformed inputs, which the reference reports.
TEST_P(QLinearMatMulFastTest, OtherCasesGoToTheReference) {
  std::mt19937 rng(43);
  const Node node = testing::MakeNode("QLinearMatMul", 8, 1);
  Case c{{4, 8}, 5};
  std::vector<Value> in = MakeInputs(c, rng);
  in[1] = Value(Scale({4}, rng, 0.01f, 0.02f));  // a_scale per row
  in[2] = Value(testing::Random8(DataType::kUint8, {4}, rng));
  auto ref = testing::RunOp(node, 21, in);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  auto got = RunFast(node, in, 2);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectBitwise(got.value(), ref->outputs[0].tensor(), "per-row a");

  in = MakeInputs(c, rng);
  in[3] = Value(testing::Random8(DataType::kInt8, {7, 5}, rng));  // k mismatch
  EXPECT_FALSE(RunFast(node, in, 2).ok());
  in = MakeInputs(c, rng);
  in[4] = Value(Scale({4}, rng, 0.01f, 0.02f));  // b_scale neither 1 nor n
  EXPECT_FALSE(RunFast(node, in, 2).ok());
}

INSTANTIATE_TEST_SUITE_P(Isa, QLinearMatMulFastTest, testing::AllGemmIsas(), testing::IsaName);

}  // namespace
}  // namespace nee
