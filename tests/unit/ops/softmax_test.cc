// Softmax, LogSoftmax, Hardmax across the opset-13 change. Expected values
// were computed with onnx.reference (opset 13) and numpy (pre-13 coercion to
// 2-D, which onnx.reference does not model) by nn_expected_gen.py.
#include "nn_test_util.h"

namespace nee::testing {
namespace {

TEST(NnSoftmax, Opset13IsSingleAxis) {
  // softmax_13_axis1
  auto r = RunOp(MakeNode("Softmax", 1, 1, {IntAttr("axis", 1)}), 13, {Pattern({2, 3, 2}, 11)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 2}, {0.0900305733, 0.0900305733, 0.244728461, 0.244728461, 0.665240943, 0.665240943, 0.0900305733, 0.266774863, 0.244728461, 0.725169241, 0.665240943, 0.00805590302});
}

TEST(NnSoftmax, BeforeOpset13CoercesTo2D) {
  // softmax_11_coerce: axis 1 on [2, 3, 2] normalizes rows of 6; 1 is also the default.
  for (bool explicit_axis : {true, false}) {
    std::vector<Attribute> attrs;
    if (explicit_axis) attrs.push_back(IntAttr("axis", 1));
    auto r = RunOp(MakeNode("Softmax", 1, 1, attrs), 11, {Pattern<double>({2, 3, 2}, 11)});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectTensorNear<double>(r->outputs[0].tensor(), {2, 3, 2}, {0.0339902028, 0.0560403704, 0.0923949506, 0.15233352, 0.251155515, 0.41408544, 0.0578451457, 0.0953705221, 0.157239408, 0.259243957, 0.427421026, 0.00287994022});
  }
}

TEST(NnLogSoftmax, BothSemantics) {
  // logsoftmax_13_last (default axis -1)
  auto r = RunOp(MakeNode("LogSoftmax", 1, 1), 13, {Pattern({2, 3, 2}, 11)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 2}, {-0.974076986, -0.474076957, -0.974076986, -0.474076957, -0.974076986, -0.474076957, -0.974076986, -0.474076957, -0.974076986, -0.474076957, -0.00671532424, -5.0067153});
  // logsoftmax_11_axis0
  r = RunOp(MakeNode("LogSoftmax", 1, 1, {IntAttr("axis", 0)}), 11, {Pattern({2, 3}, 11)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3}, {-3.38168295, -2.88168295, -2.38168295, -1.88168295, -1.38168295, -0.881682949});
}

TEST(NnHardmax, FirstMaximumWins) {
  Tensor x = Tensor::FromVector<float>({1, 3, 3, 3, 3, 0}, {2, 3});
  // hardmax_13_axis0
  auto r = RunOp(MakeNode("Hardmax", 1, 1, {IntAttr("axis", 0)}), 13, {x});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3}, {0, 1, 1, 1, 0, 0});
  // hardmax_11_ties
  r = RunOp(MakeNode("Hardmax", 1, 1, {IntAttr("axis", 0)}), 11, {x});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3}, {0, 1, 0, 0, 0, 0});
}

TEST(NnSoftmax, Float16AndLargeValuesStayFinite) {
  // By hand: softmax of {1000, 1000} is {0.5, 0.5}; in float16 {2, 2, 2, 2} gives 0.25 each.
  auto r = RunOp(MakeNode("Softmax", 1, 1), 13, {Tensor::FromVector<float>({1000, 1000}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2}, {0.5, 0.5});
  r = RunOp(MakeNode("Softmax", 1, 1), 13, {HalfTensor({2, 2, 2, 2}, {4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(HalfValues(r->outputs[0].tensor()), (std::vector<float>{0.25, 0.25, 0.25, 0.25}));
}

TEST(NnSoftmax, RejectsBadAxis) {
  ExpectOpError(MakeNode("Softmax", 1, 1, {IntAttr("axis", 3)}), 13, {Pattern({2, 3, 2})}, "axis");
  ExpectOpError(MakeNode("Softmax", 1, 1, {IntAttr("axis", -4)}), 11, {Pattern({2, 3, 2})}, "axis");
}

}  // namespace
}  // namespace nee::testing
