// fuse-qdq-conv's (src/opt/fuse_qdq_conv.cc) pointwise groups: Concat(DQ, DQ, ...) -> Q into com.microsoft
// QLinearConcat, bitwise the chain (each part requantized as the chain computes it, a part already at the
// output's scale copied), and Mul(DQ a, DQ b) -> Q into QLinearMul, which rounds once where the chain rounds
// the dequantized product first: within one step of the unfused graph run by the reference kernels; and
// DQ -> an op that moves values (Transpose, Reshape, nearest Resize) -> Q of the same scale and zero point as
// that op on the bytes, bitwise the chain. Near misses stay float: a part that is not dequantized, a
// per-channel quantization, a linear Resize, a Q of another scale.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "opt_test_util.h"

namespace nee {
namespace {
using namespace opt_test;

Tensor Bytes(DataType type, std::vector<int64_t> dims, int seed) {
  Tensor t = Tensor::Allocate(type, dims).value();
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (int64_t i = 0; i < t.num_elements(); ++i) p[i] = static_cast<uint8_t>(i * (2 * seed + 1) + 5 * seed);
  return t;
}

Tensor ZeroPoint(DataType type, int value) {
  return type == DataType::kUint8 ? Tensor::Scalar<uint8_t>(static_cast<uint8_t>(value))
                                  : Tensor::Scalar<int8_t>(static_cast<int8_t>(value - 128));
}

Shape Dims(std::vector<int64_t> d) { return ShapeFromDims(d); }

// Concat of three dequantized parts along `axis` of [1, C_i, 4, 5]: one at Q's own scale and zero point
// (copied), two requantized.
ModelBuilder ConcatCase(DataType type, int64_t axis) {
  ModelBuilder b(13);
  b.Input("a", Dims({1, 2, 4, 5}), type)
      .Input("b", Dims({1, 3, 4, 5}), type)
      .Input("c", Dims({1, 1, 4, 5}), type)
      .Init("ys", Scalar(0.05f))
      .Init("yz", ZeroPoint(type, 120))
      .Init("bs", Scalar(0.031f))
      .Init("bz", ZeroPoint(type, 140))
      .Init("cs", Scalar(0.0733f))
      .Init("cz", ZeroPoint(type, 100))
      .Op("DequantizeLinear", {"a", "ys", "yz"}, {"da"})
      .Op("DequantizeLinear", {"b", "bs", "bz"}, {"db"})
      .Op("DequantizeLinear", {"c", "cs", "cz"}, {"dc"})
      .Op("Concat", {"da", "db", "dc"}, {"cat"}, {IntAttr("axis", axis)})
      .Op("QuantizeLinear", {"cat", "ys", "yz"}, {"y"})
      .Output("y");
  return b;
}

std::vector<NamedValue> ConcatFeeds(DataType type) {
  return {{"a", Value(Bytes(type, {1, 2, 4, 5}, 1))},
          {"b", Value(Bytes(type, {1, 3, 4, 5}, 2))},
          {"c", Value(Bytes(type, {1, 1, 4, 5}, 3))}};
}

void ExpectBitwiseWithReference(const Model& model, const std::vector<NamedValue>& feeds) {
  const Tensor reference = RunAt(model, feeds, 0, 1, /*reference_only=*/true);
  for (int threads : {1, 2}) {
    const Tensor fused = RunAt(model, feeds, 99, threads);
    ASSERT_TRUE(reference.defined() && fused.defined());
    ASSERT_EQ(fused.dims(), reference.dims());
    EXPECT_EQ(std::memcmp(fused.raw_data(), reference.raw_data(), reference.byte_size()), 0);
  }
}

TEST(FuseQdqPointwise, ConcatBecomesQLinearConcatBitwise) {
  for (DataType type : {DataType::kUint8, DataType::kInt8})
    for (int64_t axis : {int64_t{1}, int64_t{-3}}) {
      const ModelBuilder b = ConcatCase(type, axis);
      EXPECT_EQ(OpsAfter(b.model), Ops{"QLinearConcat"});
      ExpectBitwiseWithReference(b.model, ConcatFeeds(type));
    }
}

TEST(FuseQdqPointwise, ConcatWithAPartNotDequantizedStaysFloat) {
  ModelBuilder b(13);
  b.Input("a", Dims({1, 2, 4, 5}), DataType::kUint8)
      .Input("f", Dims({1, 3, 4, 5}))
      .Init("ys", Scalar(0.05f))
      .Init("yz", ZeroPoint(DataType::kUint8, 120))
      .Op("DequantizeLinear", {"a", "ys", "yz"}, {"da"})
      .Op("Concat", {"da", "f"}, {"cat"}, {IntAttr("axis", 1)})
      .Op("QuantizeLinear", {"cat", "ys", "yz"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"DequantizeLinear", "Concat", "QuantizeLinear"}));
}

// x [1, C, 4, 5] times a per-channel s [1, C, 1, 1] (a squeeze-and-excitation scale), both dequantized.
ModelBuilder MulCase(DataType type, bool per_channel_scale) {
  ModelBuilder b(13);
  b.Input("x", Dims({1, 6, 4, 5}), type)
      .Input("s", Dims({1, 6, 1, 1}), type)
      .Init("xs", Scalar(0.047f))
      .Init("xz", ZeroPoint(type, 131))
      .Init("ss", Scalar(1.0f / 255))
      .Init("sz", ZeroPoint(type, 0))
      .Init("ys", Scalar(0.021f))
      .Init("yz", ZeroPoint(type, 125))
      .Init("ss6", Floats({0.1f, 0.2f, 0.3f, 0.1f, 0.2f, 0.3f}, {6}))
      .Init("sz6", type == DataType::kUint8 ? Tensor::FromVector(std::vector<uint8_t>(6, 0), {6})
                                            : Tensor::FromVector(std::vector<int8_t>(6, 0), {6}))
      .Op("DequantizeLinear", {"x", "xs", "xz"}, {"dx"});
  if (per_channel_scale)
    b.Op("DequantizeLinear", {"s", "ss6", "sz6"}, {"ds"}, {IntAttr("axis", 1)});
  else
    b.Op("DequantizeLinear", {"s", "ss", "sz"}, {"ds"});
  b.Op("Mul", {"dx", "ds"}, {"m"}).Op("QuantizeLinear", {"m", "ys", "yz"}, {"y"}).Output("y");
  return b;
}

TEST(FuseQdqPointwise, MulBecomesQLinearMulWithinOneStep) {
  for (DataType type : {DataType::kUint8, DataType::kInt8}) {
    const ModelBuilder b = MulCase(type, false);
    EXPECT_EQ(OpsAfter(b.model), Ops{"QLinearMul"});
    const std::vector<NamedValue> feeds = {{"x", Value(Bytes(type, {1, 6, 4, 5}, 4))},
                                           {"s", Value(Bytes(type, {1, 6, 1, 1}, 5))}};
    const Tensor reference = RunAt(b.model, feeds, 0, 1, /*reference_only=*/true);
    const Tensor fused = RunAt(b.model, feeds, 99, 2);
    ASSERT_TRUE(reference.defined() && fused.defined());
    ASSERT_EQ(fused.dims(), reference.dims());
    int differ = 0;
    for (int64_t i = 0; i < reference.num_elements(); ++i) {
      const int r = type == DataType::kInt8 ? reference.data<int8_t>()[i] : reference.data<uint8_t>()[i];
      const int f = type == DataType::kInt8 ? fused.data<int8_t>()[i] : fused.data<uint8_t>()[i];
      EXPECT_LE(std::abs(r - f), 1) << "element " << i;
      differ += r != f;
    }
    EXPECT_LT(differ, reference.num_elements() / 10);  // a rounding tie now and then, not a different formula
  }
}

TEST(FuseQdqPointwise, MulWithAPerChannelQuantizationStaysFloat) {
  EXPECT_EQ(OpsAfter(MulCase(DataType::kUint8, true).model),
            (Ops{"DequantizeLinear", "DequantizeLinear", "Mul", "QuantizeLinear"}));
}

// DQ(x) -> `op` -> Q at `out_scale` (x's scale is 0.05), zero points 120.
ModelBuilder MoveCase(const std::string& op, std::vector<std::string> extra_inputs, std::vector<Attribute> attrs,
                      float out_scale) {
  ModelBuilder b(13);
  b.Input("x", Dims({1, 3, 4, 5}), DataType::kUint8)
      .Init("xs", Scalar(0.05f))
      .Init("ys", Scalar(out_scale))
      .Init("z", ZeroPoint(DataType::kUint8, 120))
      .Init("shape", Tensor::FromVector(std::vector<int64_t>{3, 20}, {2}))
      .Init("roi", Tensor::FromVector(std::vector<float>{}, {0}))
      .Init("scales", Floats({1, 1, 2, 2}, {4}))
      .Op("DequantizeLinear", {"x", "xs", "z"}, {"d"});
  std::vector<std::string> inputs = {"d"};
  inputs.insert(inputs.end(), extra_inputs.begin(), extra_inputs.end());
  b.Op(op, inputs, {"m"}, std::move(attrs)).Op("QuantizeLinear", {"m", "ys", "z"}, {"y"}).Output("y");
  return b;
}

TEST(FuseQdqPointwise, MovesBetweenOneQuantizationRunOnBytesBitwise) {
  const std::vector<NamedValue> feeds = {{"x", Value(Bytes(DataType::kUint8, {1, 3, 4, 5}, 6))}};
  const ModelBuilder transpose = MoveCase("Transpose", {}, {IntsAttr("perm", {0, 2, 3, 1})}, 0.05f);
  EXPECT_EQ(OpsAfter(transpose.model), Ops{"Transpose"});
  ExpectBitwiseWithReference(transpose.model, feeds);
  const ModelBuilder reshape = MoveCase("Reshape", {"shape"}, {}, 0.05f);
  EXPECT_EQ(OpsAfter(reshape.model), Ops{"Reshape"});
  ExpectBitwiseWithReference(reshape.model, feeds);
  const ModelBuilder resize = MoveCase("Resize", {"roi", "scales"}, {StringAttr("mode", "nearest")}, 0.05f);
  EXPECT_EQ(OpsAfter(resize.model), Ops{"Resize"});
  ExpectBitwiseWithReference(resize.model, feeds);
}

TEST(FuseQdqPointwise, MovesThatChangeValuesOrScaleStayFloat) {
  const Ops kept = {"DequantizeLinear", "Resize", "QuantizeLinear"};
  EXPECT_EQ(OpsAfter(MoveCase("Resize", {"roi", "scales"}, {StringAttr("mode", "linear")}, 0.05f).model), kept);
  EXPECT_EQ(OpsAfter(MoveCase("Transpose", {}, {IntsAttr("perm", {0, 2, 3, 1})}, 0.07f).model),
            (Ops{"DequantizeLinear", "Transpose", "QuantizeLinear"}));
}

}  // namespace
}  // namespace nee
