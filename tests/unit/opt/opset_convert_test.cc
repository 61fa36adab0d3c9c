// The opset converter (src/opt/opset_convert.cc, opset_adapters.cc): the
// nodes each adapter writes, results equal before and after (run through
// nee's reference path), and errors that name the node, the op and both
// opsets. Conversions of the ONNX node tests through nee and ONNX Runtime are
// in tests/python/test_convert.py.
#include <gtest/gtest.h>

#include "opt/opset_convert.h"
#include "opt_test_util.h"

namespace nee {
namespace {

using namespace opt_test;

TEST(OpsetConvert, SoftmaxAxisSemanticsUpAndDown) {
  // Softmax-11 at axis 1 of a rank-3 tensor normalizes over dims 1 and 2 together.
  ModelBuilder b(11);
  b.Input("x", ShapeFromDims({2, 3, 4})).Op("Softmax", {"x"}, {"y"}, {IntAttr("axis", 1)}).Output("y");
  const Tensor x = Random({2, 3, 4}, 7);
  const Tensor want = RunAt(b.model, {{"x", Value(x)}}, 0);
  Model up = b.model;
  auto r = ConvertModelOpset(up, 13);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(OpTypes(up), (Ops{"Flatten", "Softmax", "Shape", "Reshape"}));
  EXPECT_EQ(up.OpsetVersion(""), 13);
  const Tensor got = RunAt(up, {{"x", Value(x)}}, 0);
  for (int64_t i = 0; i < want.num_elements(); ++i) EXPECT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-6);

  // Softmax-13 at axis 0 goes back by moving the axis last.
  ModelBuilder n(13);
  n.Input("x", ShapeFromDims({2, 3, 4})).Op("Softmax", {"x"}, {"y"}, {IntAttr("axis", 0)}).Output("y");
  const Tensor want0 = RunAt(n.model, {{"x", Value(x)}}, 0);
  Model down = n.model;
  ASSERT_TRUE(ConvertModelOpset(down, 11).ok());
  EXPECT_EQ(OpTypes(down), (Ops{"Transpose", "Softmax", "Transpose"}));
  const Tensor got0 = RunAt(down, {{"x", Value(x)}}, 0);
  for (int64_t i = 0; i < want0.num_elements(); ++i) EXPECT_NEAR(got0.data<float>()[i], want0.data<float>()[i], 1e-6);
}

TEST(OpsetConvert, AttributesBecomeInputsAndBack) {
  ModelBuilder b(11);
  b.Input("x", ShapeFromDims({2, 3}))
      .Op("Unsqueeze", {"x"}, {"u"}, {IntsAttr("axes", {0})})
      .Op("ReduceSum", {"u"}, {"r"}, {IntsAttr("axes", {2}), IntAttr("keepdims", 0)})
      .Output("r");
  Model m = b.model;
  ASSERT_TRUE(ConvertModelOpset(m, 18).ok());
  EXPECT_EQ(OpTypes(m), (Ops{"Constant", "Unsqueeze", "Constant", "ReduceSum"}));
  EXPECT_EQ(m.graph.nodes[1].inputs.size(), 2u);
  EXPECT_FALSE(m.graph.nodes[1].HasAttr("axes"));
  // And back: the constants fold into attributes again, and are dropped.
  ASSERT_TRUE(ConvertModelOpset(m, 11).ok());
  EXPECT_EQ(OpTypes(m), (Ops{"Unsqueeze", "ReduceSum"}));
  EXPECT_EQ(m.graph.nodes[0].GetInts("axes").value(), (std::vector<int64_t>{0}));
}

TEST(OpsetConvert, ErrorsNameNodeOpAndVersions) {
  ModelBuilder b(13);
  b.Input("x", ShapeFromDims({2, 3})).Input("axes", ShapeFromDims({1}), DataType::kInt64)
      .Op("Unsqueeze", {"x", "axes"}, {"y"}).Output("y");
  Model m = b.model;
  auto r = ConvertModelOpset(m, 11);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node 'Unsqueeze0' (Unsqueeze): cannot convert Unsqueeze-13 (opset 13) to "
                                      "opset 11"), std::string::npos) << r.status().message();
  // An op the target opset lacks, with no decomposition.
  ModelBuilder g(16);
  g.Input("x", ShapeFromDims({1, 1, 2, 2})).Input("grid", ShapeFromDims({1, 2, 2, 2}))
      .Op("GridSample", {"x", "grid"}, {"y"}).Output("y");
  Model gm = g.model;
  r = ConvertModelOpset(gm, 13);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("GridSample does not exist before opset 16"), std::string::npos);
  // Out-of-range targets.
  Model again = b.model;
  EXPECT_FALSE(ConvertModelOpset(again, 6).ok());
  EXPECT_FALSE(ConvertModelOpset(again, 1000).ok());
}

TEST(OpsetConvert, OtherDomainsAndTypeOnlyStepsRestamped) {
  ModelBuilder b(13);
  b.model.opset_imports.push_back({"com.microsoft", 1});
  b.Input("x", ShapeFromDims({2, 3})).Op("Relu", {"x"}, {"r"}).Op("Gelu", {"r"}, {"y"});
  b.model.graph.nodes[1].domain = "com.microsoft";
  b.Output("y");
  Model m = b.model;
  auto r = ConvertModelOpset(m, 21);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(OpTypes(m), (Ops{"Relu", "Gelu"}));
  EXPECT_EQ(m.OpsetVersion("com.microsoft"), 1);
  EXPECT_EQ(m.OpsetVersion(""), 21);
  EXPECT_GE(m.ir_version, 10);
}

}  // namespace
}  // namespace nee
