// fuse-qdq-conv (src/opt/fuse_qdq_conv.cc) folding a Relu or Clip between the
// quantized op and its QuantizeLinear: Conv -> [Relu | Clip] -> Q into one
// QLinearConv, Add -> Clip -> Q into one QLinearAdd, only when Q's saturation
// clamps exactly where the activation would; and the near misses it must leave
// alone (a zero point that is not the type's lowest, Clip bounds inside Q's
// range, an intermediate with another reader, the activation's output a graph
// output).
//
// Expected outputs: ONNX Runtime with its optimizations off on the same models
// (tests/unit/opt/fuse_qdq_conv_expected.py); the values are chosen so that
// every float sum is exact, so the fused integer result must equal them bitwise,
// and so must the float graph a refused fusion leaves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "opt_test_util.h"

namespace nee {
namespace {

using namespace opt_test;

Tensor Uint8s(std::vector<uint8_t> v, std::vector<int64_t> dims) { return Tensor::FromVector(v, std::move(dims)); }

// xq[i] = (37 i + 11) % 256, uint8 [1,2,3,3].
Tensor ConvInputQ() {
  std::vector<uint8_t> v(18);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  return Uint8s(v, {1, 2, 3, 3});
}

// The Q after the activation: scale, zero point, and its type.
struct OutputQ {
  float scale;
  int zero_point;
  bool is_signed = false;
};

// DQ(xq, 1/32, 128), DQ(Wq, 0.25), DQ(Bq, 1/128) -> Conv 3x3 pads 1 -> c -> `activation` (writes "a"
// from "c"; none: Q reads c) -> Q(ys, yz) -> yq, the graph output.
ModelBuilder ConvCase(const std::function<void(ModelBuilder&)>& activation, OutputQ q) {
  std::vector<int8_t> w(36);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>((i * 29) % 15) - 7;
  ModelBuilder b(13);
  b.Input("xq", ShapeFromDims({1, 2, 3, 3}), DataType::kUint8)
      .Init("xs", Tensor::Scalar<float>(0.03125f))
      .Init("xz", Tensor::Scalar<uint8_t>(128))
      .Init("Wq", Tensor::FromVector(w, {2, 2, 3, 3}))
      .Init("ws", Tensor::Scalar<float>(0.25f))
      .Init("wz", Tensor::Scalar<int8_t>(0))
      .Init("Bq", Tensor::FromVector(std::vector<int32_t>{-40, 24}, {2}))
      .Init("bs", Tensor::Scalar<float>(0.0078125f))
      .Init("bz", Tensor::Scalar<int32_t>(0))
      .Init("ys", Tensor::Scalar<float>(q.scale));
  if (q.is_signed)
    b.Init("yz", Tensor::Scalar<int8_t>(static_cast<int8_t>(q.zero_point)));
  else
    b.Init("yz", Tensor::Scalar<uint8_t>(static_cast<uint8_t>(q.zero_point)));
  b.Op("DequantizeLinear", {"xq", "xs", "xz"}, {"x"})
      .Op("DequantizeLinear", {"Wq", "ws", "wz"}, {"W"})
      .Op("DequantizeLinear", {"Bq", "bs", "bz"}, {"B"})
      .Op("Conv", {"x", "W", "B"}, {"c"}, {IntsAttr("pads", {1, 1, 1, 1})});
  activation(b);
  const bool has_activation = b.model.graph.nodes.back().op_type != "Conv";
  b.Op("QuantizeLinear", {has_activation ? "a" : "c", "ys", "yz"}, {"yq"}).Output("yq");
  return b;
}

void NoActivation(ModelBuilder&) {}
void Relu(ModelBuilder& b) { b.Op("Relu", {"c"}, {"a"}); }
std::function<void(ModelBuilder&)> Clip(float lo, float hi) {
  return [lo, hi](ModelBuilder& b) {
    b.Init("lo", Tensor::Scalar<float>(lo)).Init("hi", Tensor::Scalar<float>(hi)).Op("Clip", {"c", "lo", "hi"}, {"a"});
  };
}

// The model's first output, optimized fully, as integers.
std::vector<int> RunQuantized(const Model& model, const std::vector<NamedValue>& feeds) {
  const Tensor y = RunAt(model, feeds, 99);
  std::vector<int> out;
  for (int64_t i = 0; i < y.num_elements(); ++i)
    out.push_back(y.dtype() == DataType::kInt8 ? y.data<int8_t>()[i] : y.data<uint8_t>()[i]);
  return out;
}

int Count(const Ops& ops, const std::string& op) { return static_cast<int>(std::count(ops.begin(), ops.end(), op)); }

// The fusion happened: one QLinearConv is all that is left, with Q's scale and zero point.
void ExpectOneQLinearConv(const ModelBuilder& b, const std::vector<int>& want) {
  const Model m = Optimized(b.model);
  ASSERT_EQ(OpTypes(m), Ops{"QLinearConv"});
  EXPECT_EQ(m.graph.nodes[0].inputs[6], "ys");
  EXPECT_EQ(m.graph.nodes[0].inputs[7], "yz");
  EXPECT_EQ(m.graph.nodes[0].outputs[0], "yq");
  EXPECT_EQ(RunQuantized(b.model, {{"xq", ConvInputQ()}}), want);
}

// The fusion was refused: the Conv stays float, the activation stays, and the result is still the
// chain's.
void ExpectConvKept(const ModelBuilder& b, const std::vector<int>& want) {
  const Ops ops = OpsAfter(b.model);
  EXPECT_EQ(Count(ops, "QLinearConv"), 0);
  EXPECT_EQ(Count(ops, "QuantizeLinear"), 1);
  EXPECT_EQ(Count(ops, "Conv") + Count(ops, "FusedConv"), 1);
  EXPECT_EQ(RunQuantized(b.model, {{"xq", ConvInputQ()}}), want);
}

const std::vector<int> kConvQ = {204, 0, 0, 0, 178, 210, 166, 252, 78, 145, 174, 129, 178, 0, 0, 0, 193, 194};
const std::vector<int> kConvRelu = {76, 0, 0, 0, 50, 82, 38, 124, 0, 17, 46, 1, 50, 0, 0, 0, 65, 66};
const std::vector<int> kConvReluZp10 = {86, 10, 10, 10, 60, 92, 48, 134, 10, 27, 56, 11, 60, 10, 10, 10, 75, 76};
const std::vector<int> kConvReluInt8 = {-52,  -128, -128, -128, -78,  -46,  -90, -4,  -128,
                                        -111, -82,  -127, -78,  -128, -128, -128, -63, -62};
const std::vector<int> kConvRelu6 = {203, 0, 0, 0, 133, 219, 103, 255, 0, 45, 122, 3, 133, 0, 0, 0, 173, 176};
const std::vector<int> kConvRelu6Narrow = {152, 0, 0, 0, 100, 164, 77, 192, 0, 34, 92, 2, 100, 0, 0, 0, 130, 132};
const std::vector<int> kConvClipSym = {255, 0, 0, 0, 228, 255, 205, 255, 29, 162, 220, 130, 228, 0, 0, 0, 255, 255};

TEST(FuseQdqConv, ConvThenQBecomesQLinearConv) {
  ExpectOneQLinearConv(ConvCase(NoActivation, {0.0625f, 128}), kConvQ);
}

TEST(FuseQdqConv, ReluBeforeQWithLowestZeroPointFolds) {
  ExpectOneQLinearConv(ConvCase(Relu, {0.0625f, 0}), kConvRelu);
  ExpectOneQLinearConv(ConvCase(Relu, {0.0625f, -128, /*is_signed=*/true}), kConvReluInt8);
}

TEST(FuseQdqConv, ClipWhoseBoundsQuantizeToTheEndsFolds) {
  // Relu6 with scale 6/256: Q(0) = 0, Q(6) = 256 -> 255.
  ExpectOneQLinearConv(ConvCase(Clip(0, 6), {0.0234375f, 0}), kConvRelu6);
  // A negative lower bound: Q(-4) = -128 + 128 = 0, Q(4) = 128 + 128 -> 255.
  ExpectOneQLinearConv(ConvCase(Clip(-4, 4), {0.03125f, 128}), kConvClipSym);
  // Bounds as Constant nodes and an absent upper bound (Clip(c, 0) is Relu).
  ModelBuilder b = ConvCase(
      [](ModelBuilder& m) {
        Attribute value;
        value.name = "value";
        value.type = AttrType::kTensor;
        value.t = Tensor::Scalar<float>(0.0f);
        m.Op("Constant", {}, {"zero"}, {value}).Op("Clip", {"c", "zero"}, {"a"});
      },
      {0.0625f, 0});
  ExpectOneQLinearConv(b, kConvRelu);
}

TEST(FuseQdqConv, RefusesReluWhenZeroPointIsNotLowest) {
  ExpectConvKept(ConvCase(Relu, {0.0625f, 10}), kConvReluZp10);
}

TEST(FuseQdqConv, RefusesClipWhoseBoundsAreInsideQsRange) {
  // Scale 1/32: Q(6) = 192, so Q alone would let 6.5 through as 208 where Clip gives 192.
  ExpectConvKept(ConvCase(Clip(0, 6), {0.03125f, 0}), kConvRelu6Narrow);
  // Lower bound: Q(-4) with zero point 200 is 72, not 0.
  const Ops ops = OpsAfter(ConvCase(Clip(-4, 4), {0.03125f, 200}).model);
  EXPECT_EQ(Count(ops, "QLinearConv"), 0);
  // A bound that is not a constant: not folded either.
  ModelBuilder b = ConvCase(NoActivation, {0.0234375f, 0});
  b.model.graph.nodes.pop_back();
  b.model.graph.outputs.clear();
  b.Input("hi", ShapeFromDims({}))
      .Init("lo", Tensor::Scalar<float>(0.0f))
      .Op("Clip", {"c", "lo", "hi"}, {"a"})
      .Op("QuantizeLinear", {"a", "ys", "yz"}, {"yq"})
      .Output("yq");
  EXPECT_EQ(Count(OpsAfter(b.model), "QLinearConv"), 0);
}

TEST(FuseQdqConv, RefusesWhenTheConvOutputHasAnotherReader) {
  ModelBuilder b = ConvCase(Relu, {0.0625f, 0});
  b.Op("Neg", {"c"}, {"n"}).Output("n");
  ExpectConvKept(b, kConvRelu);
}

TEST(FuseQdqConv, RefusesWhenTheActivationOutputHasAnotherReader) {
  ModelBuilder b = ConvCase(Relu, {0.0625f, 0});
  b.Op("Neg", {"a"}, {"n"}).Output("n");
  ExpectConvKept(b, kConvRelu);
}

TEST(FuseQdqConv, RefusesWhenTheActivationOutputIsAGraphOutput) {
  ModelBuilder b = ConvCase(Relu, {0.0625f, 0});
  b.Output("a");
  ExpectConvKept(b, kConvRelu);
}

TEST(FuseQdqConv, AddThenClipBecomesQLinearAdd) {
  std::vector<uint8_t> bq(18);
  for (size_t i = 0; i < bq.size(); ++i) bq[i] = static_cast<uint8_t>((i * 53 + 7) % 256);
  ModelBuilder b(13);
  b.Input("aq", ShapeFromDims({18}), DataType::kUint8)
      .Input("bq", ShapeFromDims({18}), DataType::kUint8)
      .Init("s", Tensor::Scalar<float>(0.03125f))
      .Init("z", Tensor::Scalar<uint8_t>(128))
      .Init("lo", Tensor::Scalar<float>(0.0f))
      .Init("hi", Tensor::Scalar<float>(6.0f))
      .Init("ys", Tensor::Scalar<float>(0.0234375f))
      .Init("yz", Tensor::Scalar<uint8_t>(0))
      .Op("DequantizeLinear", {"aq", "s", "z"}, {"a"})
      .Op("DequantizeLinear", {"bq", "s", "z"}, {"b"})
      .Op("Add", {"a", "b"}, {"c"})
      .Op("Clip", {"c", "lo", "hi"}, {"r"})
      .Op("QuantizeLinear", {"r", "ys", "yz"}, {"yq"})
      .Output("yq");
  const Model m = Optimized(b.model);
  ASSERT_EQ(OpTypes(m), Ops{"QLinearAdd"});
  const Tensor aq = ConvInputQ();
  const std::vector<uint8_t> a(aq.data<uint8_t>(), aq.data<uint8_t>() + 18);
  const std::vector<NamedValue> feeds = {{"aq", Uint8s(a, {18})}, {"bq", Uint8s(bq, {18})}};
  EXPECT_EQ(RunQuantized(b.model, feeds),
            (std::vector<int>{0, 0, 0, 43, 163, 0, 61, 0, 0, 80, 0, 0, 99, 219, 0, 0, 0, 16}));
}

// DQ -> MaxPool -> Q with one scale and zero point: MaxPool on the 8-bit values, bitwise the float chain
// computed by the unoptimized graph (a scale that is not a power of two, so DQ's products round).
ModelBuilder MaxPoolCase(bool is_signed, float out_scale, std::vector<Attribute> attrs) {
  ModelBuilder b(13);
  b.Input("xq", ShapeFromDims({1, 2, 7, 9}), is_signed ? DataType::kInt8 : DataType::kUint8)
      .Init("s", Tensor::Scalar<float>(0.0213f))
      .Init("ys", Tensor::Scalar<float>(out_scale));
  if (is_signed)
    b.Init("z", Tensor::Scalar<int8_t>(-37));
  else
    b.Init("z", Tensor::Scalar<uint8_t>(37));
  b.Op("DequantizeLinear", {"xq", "s", "z"}, {"x"})
      .Op("MaxPool", {"x"}, {"p"}, std::move(attrs))
      .Op("QuantizeLinear", {"p", "ys", "z"}, {"yq"})
      .Output("yq");
  return b;
}

std::vector<NamedValue> MaxPoolFeeds(bool is_signed) {
  std::vector<uint8_t> v(126);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>((i * 89 + 5) % 256);
  Tensor t = Tensor::FromVector(v, {1, 2, 7, 9});
  if (is_signed) {
    std::vector<int8_t> s(v.begin(), v.end());
    t = Tensor::FromVector(s, {1, 2, 7, 9});
  }
  return {{"xq", t}};
}

std::vector<Attribute> Pool3x3(std::vector<int64_t> pads, int64_t ceil_mode = 0) {
  return {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2}), IntsAttr("pads", std::move(pads)),
          IntAttr("ceil_mode", ceil_mode)};
}

TEST(FuseQdqConv, MaxPoolBetweenOneQuantizationRunsOnBytes) {
  for (bool is_signed : {false, true}) {
    ModelBuilder b = MaxPoolCase(is_signed, 0.0213f, Pool3x3({1, 1, 1, 1}));
    const Model m = Optimized(b.model);
    ASSERT_EQ(OpTypes(m), Ops{"MaxPool"});
    EXPECT_EQ(m.graph.nodes[0].inputs[0], "xq");
    EXPECT_EQ(m.graph.nodes[0].outputs[0], "yq");
    const Tensor off = RunAt(b.model, MaxPoolFeeds(is_signed), 0), on = RunAt(b.model, MaxPoolFeeds(is_signed), 99);
    ASSERT_EQ(on.dtype(), off.dtype());
    ASSERT_EQ(on.dims(), off.dims());
    EXPECT_EQ(0, std::memcmp(on.raw_data(), off.raw_data(), off.byte_size())) << "signed=" << is_signed;
  }
}

TEST(FuseQdqConv, RefusesMaxPoolWithOtherQuantizationOrEmptyWindows) {
  auto kept = [](const ModelBuilder& b) {
    const Ops ops = OpsAfter(b.model);
    EXPECT_EQ(Count(ops, "DequantizeLinear"), 1);
    EXPECT_EQ(Count(ops, "QuantizeLinear"), 1);
    const Tensor off = RunAt(b.model, MaxPoolFeeds(false), 0), on = RunAt(b.model, MaxPoolFeeds(false), 99);
    EXPECT_EQ(0, std::memcmp(on.raw_data(), off.raw_data(), off.byte_size()));
  };
  kept(MaxPoolCase(false, 0.05f, Pool3x3({1, 1, 1, 1})));  // Q's scale is not DQ's
  // Windows of padding alone (pads as large as the kernel, or ceil_mode's overhang): the float chain gives
  // Q(0.0f), the zero point 37, where an 8-bit MaxPool gives 0.
  kept(MaxPoolCase(false, 0.0213f, {IntsAttr("kernel_shape", {2, 2}), IntsAttr("pads", {2, 2, 2, 2})}));
  kept(MaxPoolCase(false, 0.0213f, Pool3x3({1, 1, 1, 1}, 1)));
  // int32 dequantized (no zero point, so "uint8" by the zero point's type) and quantized to uint8.
  ModelBuilder b(13);
  b.Input("xi", ShapeFromDims({1, 2, 7, 9}), DataType::kInt32)
      .Init("s", Tensor::Scalar<float>(0.0213f))
      .Op("DequantizeLinear", {"xi", "s"}, {"x"})
      .Op("MaxPool", {"x"}, {"p"}, Pool3x3({1, 1, 1, 1}))
      .Op("QuantizeLinear", {"p", "s"}, {"yq"})
      .Output("yq");
  const Ops ops = OpsAfter(b.model);
  EXPECT_EQ(Count(ops, "DequantizeLinear"), 1);
  EXPECT_EQ(Count(ops, "QuantizeLinear"), 1);
  std::vector<int32_t> v(126);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>((i * 89 + 5) % 300);
  const std::vector<NamedValue> feeds = {{"xi", Tensor::FromVector(v, {1, 2, 7, 9})}};
  const Tensor off = RunAt(b.model, feeds, 0), on = RunAt(b.model, feeds, 99);
  EXPECT_EQ(0, std::memcmp(on.raw_data(), off.raw_data(), off.byte_size()));
}

}  // namespace
}  // namespace nee
