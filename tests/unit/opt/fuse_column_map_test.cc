// The fuse-transpose-column-map pass (src/opt/fuse_column_map.cc), with
// hoist-activation-to-conv before it: a YOLO head's decode (Conv, Reshape,
// Transpose, Sigmoid, three Slices, the box arithmetic, Concat) becomes
// FusedConv(Sigmoid) -> Reshape -> ai.nee TransposeColumnMap, bitwise what the
// graph as written computes node by node (level 0); each bail-out leaves it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "opt/pass_manager.h"
#include "opt_test_util.h"

namespace nee {
namespace {
using namespace opt_test;

constexpr int64_t kH = 5, kW = 6, kNo = 9;  // 9 = 4 box values, objectness, 4 classes

// x [1, 8, H, W] -> Conv to 3 * kNo channels -> [1, 3, kNo, H, W] -> [1, 3, H, W, kNo] -> Sigmoid ->
// Concat(((s[..., 0:2] * 2 - 0.5) + grid) * 8, (s[..., 2:4] * 2)^2 * anchors, s[..., 4:]) -> [1, 3 H W, kNo].
ModelBuilder Head() {
  ModelBuilder b;
  Tensor grid = Tensor::Allocate(DataType::kFloat, {1, 1, kH, kW, 2}).value();
  for (int64_t i = 0; i < kH * kW; ++i) {
    grid.data<float>()[2 * i] = static_cast<float>(i % kW);
    grid.data<float>()[2 * i + 1] = static_cast<float>(i / kW);
  }
  auto ints = [](std::vector<int64_t> v) { return Tensor::FromVector(v, {static_cast<int64_t>(v.size())}); };
  b.Input("x", ShapeFromDims({1, 8, kH, kW}))
      .Init("W", Random({3 * kNo, 8, 1, 1}, 2))
      .Init("B", Random({3 * kNo}, 3))
      .Init("shape", ints({1, 3, kNo, kH, kW}))
      .Init("out_shape", ints({1, -1, kNo}))
      .Init("two", Scalar(2.f))
      .Init("half", Scalar(0.5f))
      .Init("stride", Scalar(8.f))
      .Init("grid", std::move(grid))
      .Init("anchors", Floats({10, 13, 16, 30, 33, 23}, {1, 3, 1, 1, 2}))
      .Init("axis", ints({4}))
      .Init("s0", ints({0}))
      .Init("s2", ints({2}))
      .Init("s4", ints({4}))
      .Init("end", ints({INT64_MAX}))
      .Op("Conv", {"x", "W", "B"}, {"c"})
      .Op("Reshape", {"c", "shape"}, {"r"})
      .Op("Transpose", {"r"}, {"t"}, {IntsAttr("perm", {0, 1, 3, 4, 2})})
      .Op("Sigmoid", {"t"}, {"s"})
      .Op("Slice", {"s", "s0", "s2", "axis"}, {"xy"})
      .Op("Mul", {"xy", "two"}, {"xy1"})
      .Op("Sub", {"xy1", "half"}, {"xy2"})
      .Op("Add", {"xy2", "grid"}, {"xy3"})
      .Op("Mul", {"xy3", "stride"}, {"xy4"})
      .Op("Slice", {"s", "s2", "s4", "axis"}, {"wh"})
      .Op("Mul", {"two", "wh"}, {"wh1"})
      .Op("Pow", {"wh1", "two"}, {"wh2"})
      .Op("Mul", {"wh2", "anchors"}, {"wh3"})
      .Op("Slice", {"s", "s4", "end", "axis"}, {"rest"})
      .Op("Concat", {"xy4", "wh3", "rest"}, {"cat"}, {IntAttr("axis", -1)})
      .Op("Reshape", {"cat", "out_shape"}, {"y"})
      .Output("y");
  return b;
}

void ExpectSameBits(const Model& model) {
  const std::vector<NamedValue> inputs = {{"x", Random({1, 8, kH, kW}, 7)}};
  const Tensor off = RunAt(model, inputs, 0);
  const Tensor on = RunAt(model, inputs, 99);
  ASSERT_TRUE(off.defined() && on.defined());
  ASSERT_EQ(off.dims(), on.dims());
  EXPECT_EQ(std::memcmp(off.raw_data(), on.raw_data(), static_cast<size_t>(off.num_elements()) * sizeof(float)), 0);
}

TEST(FuseTransposeColumnMap, YoloHeadDecodeBecomesOneNode) {
  ModelBuilder b = Head();
  EXPECT_EQ(OpsAfter(b.model), (Ops{"FusedConv", "Reshape", "TransposeColumnMap", "Reshape"}));
  ExpectSameBits(b.model);
}

TEST(FuseTransposeColumnMap, DivisionsAndReversedOperands) {
  // c - v and c / v keep their order; v / c too.
  ModelBuilder b = Head();
  for (Node& n : b.model.graph.nodes) {
    if (n.outputs[0] == "xy2") n.op_type = "Sub", n.inputs = {"half", "xy1"};
    if (n.outputs[0] == "wh3") n.op_type = "Div", n.inputs = {"anchors", "wh2"};
    if (n.outputs[0] == "xy4") n.op_type = "Div";
  }
  EXPECT_EQ(OpsAfter(b.model), (Ops{"FusedConv", "Reshape", "TransposeColumnMap", "Reshape"}));
  ExpectSameBits(b.model);
}

TEST(FuseTransposeColumnMap, StaysWhenThePartsDoNotTileTheColumns) {
  // The last slice starts at column 5: column 4 is missing.
  ModelBuilder gap = Head();
  gap.Init("s5", Tensor::FromVector<int64_t>({5}, {1}));
  gap.model.graph.nodes[13].inputs[1] = "s5";
  const Ops ops = OpsAfter(gap.model);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "TransposeColumnMap"), 0);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Concat"), 1);
  ExpectSameBits(gap.model);
}

TEST(FuseTransposeColumnMap, StaysWhenAnotherNodeReadsAValueOnTheWay) {
  ModelBuilder seen = Head();
  seen.Output("xy2");
  const Ops ops = OpsAfter(seen.model);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "TransposeColumnMap"), 0);
  ExpectSameBits(seen.model);
  // An operand that is an input, not a constant.
  ModelBuilder input = Head();
  input.model.graph.initializers.erase(input.model.graph.initializers.begin() + 6);  // stride
  input.Input("stride", ShapeFromDims({}));
  const Ops ops2 = OpsAfter(input.model);
  EXPECT_EQ(std::count(ops2.begin(), ops2.end(), "TransposeColumnMap"), 0);
}

}  // namespace
}  // namespace nee
