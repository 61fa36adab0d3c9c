// com.microsoft QGemm: the fast kernel (ep/cpu/qlinear_fast.cc: MatMulInteger's exact product, C, then the
// reference's float requantization) against the reference kernel (ops/quantize.cc), bitwise, on each GEMM the
// machine has, at one and two threads, B as [k, n] and as [n, k] (transB); what it leaves to the reference (transA, C of other shapes,
// malformed inputs) still gets the reference's results and errors.
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
  return testing::RunKernelOmitting(cpu::QGemmFast, node, 1, inputs, threads);
}

const auto Scale = testing::UniformFloats;

Tensor Bias(const std::vector<int64_t>& dims, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(-40000, 40000);
  std::vector<int32_t> v(static_cast<size_t>(testing::ElementCount(dims)));
  for (auto& e : v) e = dist(rng);
  return Tensor::FromVector(v, dims);
}

struct Case {
  int64_t m, k, n;
  DataType at = DataType::kUint8, bt = DataType::kInt8, yt = DataType::kUint8;
  bool per_column = false;          // b's scale and zero point per column
  std::vector<int64_t> c_dims{};    // C's shape; none without
  bool quantized_out = true;        // y_scale and y_zp given, else float output
  bool trans_b = false;             // B given as [n, k]
};

// a, a_scale, a_zp, b, b_scale, b_zp, C, y_scale, y_zp. y_scale is chosen so that outputs land inside the range
// and past both ends.
std::vector<Value> MakeInputs(const Case& c, std::mt19937& rng) {
  const std::vector<int64_t> per = c.per_column ? std::vector<int64_t>{c.n} : std::vector<int64_t>{};
  const std::vector<int64_t> b_dims = c.trans_b ? std::vector<int64_t>{c.n, c.k} : std::vector<int64_t>{c.k, c.n};
  std::vector<Value> in = {Value(testing::Random8(c.at, {c.m, c.k}, rng)), Value(Scale({}, rng, 0.005f, 0.05f)),
                           Value(testing::Random8(c.at, {}, rng)),         Value(testing::Random8(c.bt, b_dims, rng)),
                           Value(Scale(per, rng, 0.005f, 0.05f)),          Value(testing::Random8(c.bt, per, rng)),
                           c.c_dims.empty() ? Value() : Value(Bias(c.c_dims, rng))};
  if (c.quantized_out) {
    in.push_back(Value(Scale({}, rng, 0.02f, 0.4f)));
    in.push_back(Value(testing::Random8(c.yt, {}, rng)));
  }
  return in;
}

using testing::ExpectBitwise;

void ExpectAsReference(const Case& c, const std::vector<Value>& inputs, std::vector<Attribute> attrs,
                       const std::string& what) {
  const Node node = testing::MakeNode("QGemm", inputs.size(), 1, std::move(attrs), "com.microsoft");
  auto ref = testing::RunOp(node, 1, inputs);
  ASSERT_TRUE(ref.ok()) << what << ": " << ref.status().ToString();
  for (int threads : {1, 2}) {
    auto got = RunFast(node, inputs, threads);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
    ExpectBitwise(got.value(), ref->outputs[0].tensor(), what + " threads " + std::to_string(threads));
  }
  (void)c;
}

using QGemmFastTest = testing::IsaLimitedTest;

TEST_P(QGemmFastTest, MatchesReferenceBitwise) {
  const DataType u8 = DataType::kUint8, s8 = DataType::kInt8;
  const std::vector<Case> cases = {
      {1, 2048, 1000, u8, s8, u8, true, {1000}},      // ResNet-50's classifier
      {1, 17, 33, u8, s8, u8, false, {33}},           // odd k, n past a panel
      {3, 64, 19, s8, u8, s8, true, {1, 19}},         // int8 a, uint8 b, int8 y; C as one row
      {7, 31, 16, u8, u8, s8, false},                 // no C
      {5, 100, 40, s8, s8, u8, true, {40}, false},    // float output
      {6, 1, 19},                                     // k = 1
      {9, 70, 3, u8, s8, u8, true, {3}},              // fewer columns than a vector
      {0, 8, 4},                                      // no rows
      {3, 8, 0},                                      // no columns
      {4, 0, 3, u8, s8, u8, false, {3}},              // k = 0: C alone
  };
  std::mt19937 rng(51);
  for (size_t i = 0; i < cases.size(); ++i)
    ExpectAsReference(cases[i], MakeInputs(cases[i], rng), {}, "case " + std::to_string(i));
  // alpha scales the products and C alike.
  ExpectAsReference(cases[1], MakeInputs(cases[1], rng), {testing::FloatAttr("alpha", 0.75f)}, "alpha");
}

// B as [n, k] (transB = 1: ONNX Runtime's QOperator classifier), packed transposed by the fast kernel.
TEST_P(QGemmFastTest, TransposedBMatchesReferenceBitwise) {
  const DataType u8 = DataType::kUint8, s8 = DataType::kInt8;
  const std::vector<Case> cases = {
      {1, 2048, 1000, u8, s8, u8, false, {1000}, true, true},  // ResNet-50's classifier, per tensor
      {3, 37, 21, u8, s8, u8, true, {21}, true, true},         // odd sizes, per column
      {2, 5, 1, s8, u8, s8, false, {}, true, true},            // one column, int8 a, uint8 b
      {4, 9, 6, u8, s8, u8, true, {6}, false, true},           // float output
      {0, 4, 3, u8, s8, u8, false, {}, true, true},            // no rows
      {2, 0, 3, u8, s8, u8, false, {3}, true, true},           // k = 0
  };
  std::mt19937 rng(54);
  for (size_t i = 0; i < cases.size(); ++i)
    ExpectAsReference(cases[i], MakeInputs(cases[i], rng), {testing::IntAttr("transB", 1)},
                      "transB case " + std::to_string(i));
}

// Saturation at both ends of each output type and rounding halves to even: products of exactly half-integer
// values after scaling.
TEST_P(QGemmFastTest, SaturatesAndRoundsHalvesToEvenAsTheReference) {
  std::mt19937 rng(52);
  for (DataType yt : {DataType::kUint8, DataType::kInt8}) {
    Case c{5, 24, 37, DataType::kUint8, DataType::kInt8, yt, false, {37}};
    std::vector<Value> in = MakeInputs(c, rng);
    in[1] = Value(Tensor::FromVector(std::vector<float>{0.5f}, {}));
    in[4] = Value(Tensor::FromVector(std::vector<float>{1.f}, {}));
    in[7] = Value(Tensor::FromVector(std::vector<float>{1.f}, {}));  // multiplier 0.5: odd sums end in .5
    ExpectAsReference(c, in, {}, DataTypeName(yt));
  }
}

// What the fast kernel leaves to the reference: a transposed A and a C of [m, n]; malformed inputs, which the
// reference reports.
TEST_P(QGemmFastTest, OtherCasesGoToTheReference) {
  std::mt19937 rng(53);
  Case c{4, 8, 5, DataType::kUint8, DataType::kInt8, DataType::kUint8, true, {4, 5}};
  ExpectAsReference(c, MakeInputs(c, rng), {}, "C of [m, n]");
  c.c_dims = {5};
  std::vector<Value> in = MakeInputs(c, rng);
  in[0] = Value(testing::Random8(DataType::kUint8, {8, 4}, rng));  // A as [k, m]
  ExpectAsReference(c, in, {testing::IntAttr("transA", 1)}, "transA");

  const Node node = testing::MakeNode("QGemm", 9, 1, {}, "com.microsoft");
  in = MakeInputs(c, rng);
  in[3] = Value(testing::Random8(DataType::kInt8, {7, 5}, rng));  // k mismatch
  EXPECT_FALSE(RunFast(node, in, 2).ok());
  in = MakeInputs(c, rng);
  in[4] = Value(Scale({4}, rng, 0.01f, 0.02f));  // b_scale neither 1 nor n
  EXPECT_FALSE(RunFast(node, in, 2).ok());
  in = MakeInputs(c, rng);
  in[6] = Value(Bias({6}, rng));  // C not broadcastable
  EXPECT_FALSE(RunFast(node, in, 2).ok());
  const Node trans_node = testing::MakeNode("QGemm", 9, 1, {testing::IntAttr("transB", 1)}, "com.microsoft");
  in = MakeInputs(c, rng);
  in[3] = Value(testing::Random8(DataType::kInt8, {5, 7}, rng));  // transposed B's k mismatch
  EXPECT_FALSE(RunFast(trans_node, in, 2).ok());
}

INSTANTIATE_TEST_SUITE_P(Isa, QGemmFastTest, testing::AllGemmIsas(), testing::IsaName);

}  // namespace
}  // namespace nee
