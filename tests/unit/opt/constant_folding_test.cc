// Constant folding of Shape and Size (src/opt/constant_folding.cc): a Shape
// reading only dims the model fixes folds, and the shape arithmetic after it
// folds with it; one reading a symbolic dim stays a node. Every optimized
// model computes what the unoptimized one (level 0) computes.
#include <gtest/gtest.h>

#include <cstring>

#include "opt/pass_manager.h"
#include "opt_test_util.h"

namespace nee {
namespace {
using namespace opt_test;

constexpr int kBasic = 1;  // the level constant folding runs at

// x -> Shape(start, end) -> Gather(last) -> Concat([-1], .) -> Reshape(x, .):
// x flattened to rows as wide as the last dim the Shape kept.
ModelBuilder ShapeChain(std::optional<Shape> x_shape, std::vector<Attribute> shape_attrs) {
  ModelBuilder b;
  b.Input("x", std::move(x_shape))
      .Init("last", Ints({-1}))
      .Init("minus_one", Ints({-1}))
      .Op("Shape", {"x"}, {"s"}, std::move(shape_attrs))
      .Op("Gather", {"s", "last"}, {"width"})
      .Op("Concat", {"minus_one", "width"}, {"target"}, {IntAttr("axis", 0)})
      .Op("Reshape", {"x", "target"}, {"y"})
      .Output("y");
  return b;
}

void ExpectSameAsLevel0(const Model& model, const Tensor& x) {
  const std::vector<NamedValue> inputs = {{"x", x}};
  const Tensor want = RunAt(model, inputs, 0);
  const Tensor got = RunAt(model, inputs, kBasic);
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.dims(), want.dims());
  ASSERT_EQ(got.byte_size(), want.byte_size());
  EXPECT_EQ(0, std::memcmp(got.raw_data(), want.raw_data(), want.byte_size()));
}

TEST(ConstantFolding, FoldsAShapeOfStaticDimsAndTheChainAfterIt) {
  ModelBuilder b = ShapeChain(ShapeFromDims({2, 3, 4}), {});
  EXPECT_EQ(OpsAfter(b.model, kBasic), (Ops{"Reshape"}));
  ExpectSameAsLevel0(b.model, Seq({2, 3, 4}, 3, 17, 8, 4));
}

TEST(ConstantFolding, FoldsAShapeWhoseRangeSkipsTheSymbolicDims) {
  // Opset 15+ start / end: only dims 1..2 are read, and those are static.
  ModelBuilder b = ShapeChain(Shape{Dim::Symbol("n"), Dim::Known(3), Dim::Known(4)},
                              {IntAttr("start", 1), IntAttr("end", 3)});
  EXPECT_EQ(OpsAfter(b.model, kBasic), (Ops{"Reshape"}));
  ExpectSameAsLevel0(b.model, Seq({5, 3, 4}, 3, 17, 8, 4));
  ModelBuilder negative = ShapeChain(Shape{Dim::Symbol("n"), Dim::Known(3), Dim::Known(4)}, {IntAttr("start", -1)});
  EXPECT_EQ(OpsAfter(negative.model, kBasic), (Ops{"Reshape"}));
  ExpectSameAsLevel0(negative.model, Seq({1, 3, 4}, 3, 17, 8, 4));
}

TEST(ConstantFolding, KeepsAShapeThatReadsASymbolicDim) {
  ModelBuilder b = ShapeChain(Shape{Dim::Known(2), Dim::Known(3), Dim::Symbol("w")}, {});
  EXPECT_EQ(OpsAfter(b.model, kBasic), (Ops{"Shape", "Gather", "Concat", "Reshape"}));
  // The session's feeds may give the symbolic dim any size.
  ExpectSameAsLevel0(b.model, Seq({2, 3, 4}, 3, 17, 8, 4));
  ExpectSameAsLevel0(b.model, Seq({2, 3, 7}, 5, 13, 6, 4));
  ModelBuilder unknown_rank = ShapeChain(std::nullopt, {IntAttr("start", 1)});
  EXPECT_EQ(OpsAfter(unknown_rank.model, kBasic), (Ops{"Shape", "Gather", "Concat", "Reshape"}));
  ExpectSameAsLevel0(unknown_rank.model, Seq({2, 6}, 5, 13, 6, 4));
}

TEST(ConstantFolding, FoldsASizeOfStaticDimsOnly) {
  ModelBuilder fixed;
  fixed.Input("x", ShapeFromDims({2, 3, 4})).Op("Size", {"x"}, {"n"}).Output("n");
  EXPECT_EQ(OpsAfter(fixed.model, kBasic), (Ops{}));
  ExpectSameAsLevel0(fixed.model, Seq({2, 3, 4}, 3, 17, 8, 4));
  ModelBuilder symbolic;
  symbolic.Input("x", Shape{Dim::Symbol("n"), Dim::Known(4)}).Op("Size", {"x"}, {"n"}).Output("n");
  EXPECT_EQ(OpsAfter(symbolic.model, kBasic), (Ops{"Size"}));
  ExpectSameAsLevel0(symbolic.model, Seq({5, 4}, 3, 17, 8, 4));
}

// Loop(trip 3) carrying v; the body declares v as [2] but doubles it each
// iteration (v = Concat(v, v)) and outputs Shape(v) as a scan output. The
// body's Shape reads its input's declared static shape, which the run does
// not keep to, so it must stay a node.
Model LoopDoublingACarriedValue() {
  auto body = std::make_shared<Graph>();
  body->name = "body";
  body->inputs.push_back({"i", TypeInfo::Tensor(DataType::kInt64, Shape{}), "", {}});
  body->inputs.push_back({"cond_in", TypeInfo::Tensor(DataType::kBool, Shape{}), "", {}});
  body->inputs.push_back({"v_in", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({2})), "", {}});
  auto node = [&](const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
                  std::vector<Attribute> attrs = {}) {
    Node n;
    n.name = "body_" + op + std::to_string(body->nodes.size());
    n.op_type = op;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    n.attributes = std::move(attrs);
    body->nodes.push_back(std::move(n));
  };
  node("Identity", {"cond_in"}, {"cond_out"});
  node("Shape", {"v_in"}, {"s"});
  node("Concat", {"v_in", "v_in"}, {"v_out"}, {IntAttr("axis", 0)});
  body->outputs.push_back({"cond_out", TypeInfo{}, "", {}});
  body->outputs.push_back({"v_out", TypeInfo{}, "", {}});
  body->outputs.push_back({"s", TypeInfo{}, "", {}});
  Attribute body_attr;
  body_attr.name = "body";
  body_attr.type = AttrType::kGraph;
  body_attr.g = body;
  ModelBuilder b;
  b.Input("x", ShapeFromDims({2}))
      .Init("trips", Tensor::Scalar<int64_t>(3))
      .Init("go", Tensor::FromVector<bool>({true}, {}))
      .Op("Loop", {"trips", "go", "x"}, {"v_final", "shapes"}, {body_attr})
      .Output("shapes");
  return b.model;
}

TEST(ConstantFolding, KeepsAShapeInALoopBody) {
  const Model model = LoopDoublingACarriedValue();
  const std::vector<NamedValue> inputs = {{"x", Floats({1.f, 2.f}, {2})}};
  const Tensor want = RunAt(model, inputs, 0);
  ASSERT_EQ(want.dims(), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(want.data<int64_t>()[2], 8);  // 2, 4, 8: the declaration is not kept to
  const Tensor got = RunAt(model, inputs, kBasic);
  ASSERT_EQ(got.dims(), want.dims());
  for (int64_t k = 0; k < want.num_elements(); ++k) EXPECT_EQ(got.data<int64_t>()[k], want.data<int64_t>()[k]);
}

}  // namespace
}  // namespace nee
