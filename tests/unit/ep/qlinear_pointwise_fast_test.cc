// com.microsoft QLinearMul, QLinearSigmoid and QLinearConcat fast kernels (ep/cpu/qlinear_pointwise_fast.cc)
// against the reference kernels (ops/quantize_contrib.cc): bitwise, at one and two threads, on every ISA level the
// machine has, over the broadcasts quantized CNNs use (a squeeze-and-excitation scale per channel, either
// operand first) and awkward ones (both operands broadcast, a scalar, empty tensors, odd lengths).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "ep_test_util.h"
#include "ep/cpu/cpu_kernels.h"

namespace nee {
namespace {

Node MsNode(const std::string& op, size_t inputs) { return testing::MakeNode(op, inputs, 1, {}, "com.microsoft"); }

void ExpectFastMatchesReference(KernelFn kernel, const Node& node, const std::vector<Value>& inputs,
                                const std::string& what) {
  auto ref = testing::RunOp(node, 1, inputs);
  ASSERT_TRUE(ref.ok()) << what << ": " << ref.status().ToString();
  for (int threads : {1, 2}) {
    auto got = testing::RunKernelOmitting(kernel, node, 1, inputs, threads);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
    testing::ExpectBitwise(got.value(), ref->outputs[0].tensor(), what + " threads=" + std::to_string(threads));
  }
}

class QLinearPointwiseFast : public testing::IsaLimitedTest {};

TEST_P(QLinearPointwiseFast, MulMatchesReference) {
  struct Shapes {
    std::vector<int64_t> a, b;
  };
  const std::vector<Shapes> shapes = {
      {{1, 9001}, {1, 9001}},                // same shape, over two 4096-element pieces and a tail
      {{1, 24, 13, 11}, {1, 24, 1, 1}},      // a per-channel scale (EfficientNet's SE block)
      {{1, 24, 1, 1}, {2, 24, 7, 5}},        // the same with the scale first and two images
      {{3, 1, 17}, {1, 5, 1}},               // both broadcast: runs where b stays, a advances
      {{7}, {}},                             // a scalar
      {{1, 5}, {4, 1}},                      // runs of five over one b each
      {{1, 3, 9, 7, 2}, {1, 3, 1, 1, 2}},    // runs of two: b written out at the output's shape (YOLO's anchors)
      {{1, 3, 1, 1, 2}, {1, 3, 9, 7, 2}},    // the same with a broadcast
      {{1, 3, 9, 7, 2}, {1, 3, 9, 7, 1}},    // runs of two over one b each: b written out too
      {{0, 3}, {1, 3}},                      // empty
  };
  std::mt19937 rng(13);
  for (DataType t : {DataType::kUint8, DataType::kInt8})
    for (const Shapes& s : shapes)
      for (float c_scale : {0.02f, 7e-5f}) {  // the second saturates most products
        const std::vector<Value> in = {
            Value(testing::Random8(t, s.a, rng)), Value(Tensor::Scalar<float>(0.031f)),
            Value(testing::Random8(t, {}, rng)),  Value(testing::Random8(t, s.b, rng)),
            Value(Tensor::Scalar<float>(0.017f)), Value(testing::Random8(t, {}, rng)),
            Value(Tensor::Scalar<float>(c_scale)), Value(testing::Random8(t, {}, rng))};
        ExpectFastMatchesReference(cpu::QLinearMulFast, MsNode("QLinearMul", 8), in,
                                   "QLinearMul " + DimsToString(s.a) + " x " + DimsToString(s.b));
      }
  // An output scale so small that the ratio overflows: the reference's path (infinities, NaN as 0).
  const std::vector<Value> huge = {
      Value(testing::Random8(DataType::kUint8, {1, 40}, rng)), Value(Tensor::Scalar<float>(3e30f)),
      Value(Tensor::Scalar<uint8_t>(3)), Value(testing::Random8(DataType::kUint8, {1, 40}, rng)),
      Value(Tensor::Scalar<float>(2e20f)), Value(Tensor::Scalar<uint8_t>(3)), Value(Tensor::Scalar<float>(1e-20f)),
      Value(Tensor::Scalar<uint8_t>(128))};
  ExpectFastMatchesReference(cpu::QLinearMulFast, MsNode("QLinearMul", 8), huge, "QLinearMul overflowing ratio");
}

TEST_P(QLinearPointwiseFast, SigmoidMatchesReference) {
  std::mt19937 rng(14);
  for (DataType t : {DataType::kUint8, DataType::kInt8})
    for (int64_t n : {int64_t{1}, int64_t{255}, int64_t{40000}}) {
      const std::vector<Value> in = {Value(testing::Random8(t, {2, n}, rng)), Value(Tensor::Scalar<float>(0.05f)),
                                     Value(testing::Random8(t, {}, rng)), Value(Tensor::Scalar<float>(1.0f / 255)),
                                     Value(testing::Random8(t, {}, rng))};
      ExpectFastMatchesReference(cpu::QLinearSigmoidFast, MsNode("QLinearSigmoid", 5), in,
                                 "QLinearSigmoid n=" + std::to_string(n));
    }
}

TEST_P(QLinearPointwiseFast, ConcatMatchesReference) {
  std::mt19937 rng(15);
  for (DataType t : {DataType::kUint8, DataType::kInt8})
    for (int64_t axis : {int64_t{1}, int64_t{-1}, int64_t{0}}) {
      // Three inputs along the axis: one requantized, one with the output's own scale and zero point (copied),
      // one empty along the axis.
      const Tensor zy = testing::Random8(t, {}, rng);
      std::vector<int64_t> d0 = {2, 3, 5}, d1 = {2, 3, 5}, d2 = {2, 3, 5};
      const size_t a = static_cast<size_t>(axis < 0 ? axis + 3 : axis);
      d0[a] = 4, d1[a] = 7, d2[a] = 0;
      const std::vector<Value> in = {
          Value(Tensor::Scalar<float>(0.04f)),  Value(zy),
          Value(testing::Random8(t, d0, rng)), Value(Tensor::Scalar<float>(0.013f)),
          Value(testing::Random8(t, {}, rng)), Value(testing::Random8(t, d1, rng)),
          Value(Tensor::Scalar<float>(0.04f)),  Value(zy),
          Value(testing::Random8(t, d2, rng)), Value(Tensor::Scalar<float>(0.5f)),
          Value(testing::Random8(t, {}, rng))};
      ExpectFastMatchesReference(cpu::QLinearConcatFast,
                                 testing::MakeNode("QLinearConcat", in.size(), 1, {testing::IntAttr("axis", axis)},
                                                   "com.microsoft"),
                                 in, "QLinearConcat axis " + std::to_string(axis));
    }
  // Inputs whose shapes do not match outside the axis: the reference's error.
  const std::vector<Value> bad = {
      Value(Tensor::Scalar<float>(0.04f)), Value(Tensor::Scalar<uint8_t>(0)),
      Value(testing::Random8(DataType::kUint8, {2, 3}, rng)), Value(Tensor::Scalar<float>(0.1f)),
      Value(Tensor::Scalar<uint8_t>(0)), Value(testing::Random8(DataType::kUint8, {3, 3}, rng)),
      Value(Tensor::Scalar<float>(0.1f)), Value(Tensor::Scalar<uint8_t>(0))};
  const Node node = testing::MakeNode("QLinearConcat", bad.size(), 1, {testing::IntAttr("axis", 1)}, "com.microsoft");
  auto fast = testing::RunKernelOmitting(cpu::QLinearConcatFast, node, 1, bad, 1);
  ASSERT_FALSE(fast.ok());
  EXPECT_NE(fast.status().message().find("does not match"), std::string::npos) << fast.status().ToString();
}

INSTANTIATE_TEST_SUITE_P(Isas, QLinearPointwiseFast, testing::AllGemmIsas(), testing::IsaName);

}  // namespace
}  // namespace nee
