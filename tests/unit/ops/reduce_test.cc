// Reduce family tests. Expected values were computed with numpy 1.x in
// /work/main/.venv (the formulas of onnx.reference's Reduce* ops), e.g.
//   np.sum(x, axis=1, keepdims=True); np.sqrt(np.sum(r*r, axis=(0,2)))
// with r = np.random.default_rng(0).uniform(0.5, 2.0, size=(2,3,4)).astype(np.float32).
#include <cmath>
#include <limits>

#include "op_test_util.h"

namespace nee {
namespace {

using testing::ExpectTensorNear;
using testing::IntAttr;
using testing::IntsAttr;
using testing::MakeNode;
using testing::RunOp;

const std::vector<float> kX = {5, 1, 20, 2, 30, 1, 40, 2, 55, 1, 60, 2};  // shape [3,2,2]

// r above, shape [2,3,4].
const std::vector<float> kR = {
    1.4554425477981567f, 0.904680073261261f,  0.5614602565765381f, 0.5247914791107178f,
    1.7199053764343262f, 1.8691333532333374f, 1.4099537134170532f, 1.5942448377609253f,
    1.3154374361038208f, 1.9026086330413818f, 1.7237802743911743f, 0.5041077733039856f,
    1.7861064672470093f, 0.5503783822059631f, 1.5944831371307373f, 0.7634834051132202f,
    1.7947683334350586f, 1.3121918439865112f, 0.9495678544044495f, 1.134030818939209f,
    0.5424795150756836f, 0.6864249110221863f, 1.505936622619629f,  1.470784306526184f};

Tensor Axes(std::vector<int64_t> axes) {
  int64_t n = static_cast<int64_t>(axes.size());
  return Tensor::FromVector<int64_t>(axes, {n});
}

TEST(Reduce, SumAxesInputKeepdims) {
  Node node = MakeNode("ReduceSum", 2, 1);
  auto run = RunOp(node, 13, {Tensor::FromVector(kX, {3, 2, 2}), Axes({1})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {3, 1, 2}, {25, 3, 70, 3, 115, 3});
}

TEST(Reduce, SumDefaultReducesEverything) {
  Node node = MakeNode("ReduceSum", 1, 1, {IntAttr("keepdims", 0)});
  auto run = RunOp(node, 13, {Tensor::FromVector(kX, {3, 2, 2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {}, {219});
}

TEST(Reduce, SumNoopWithEmptyAxesCopiesInput) {
  Node node = MakeNode("ReduceSum", 2, 1, {IntAttr("noop_with_empty_axes", 1)});
  auto run = RunOp(node, 13, {Tensor::FromVector(kX, {3, 2, 2}), Axes({})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {3, 2, 2}, kX);
}

TEST(Reduce, MeanAttributeAxesNegativeNoKeepdims) {
  Node node = MakeNode("ReduceMean", 1, 1, {IntsAttr("axes", {-2}), IntAttr("keepdims", 0)});
  auto run = RunOp(node, 11, {Tensor::FromVector(kX, {3, 2, 2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {3, 2}, {12.5, 1.5, 35, 1.5, 57.5, 1.5});
}

TEST(Reduce, L1L2LogSumExpOnRandomData) {
  auto r = Tensor::FromVector(kR, {2, 3, 4});
  {
    auto run = RunOp(MakeNode("ReduceL1", 2, 1), 18, {r, Axes({2})});
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    ExpectTensorNear<float>(run->outputs[0].tensor(), {2, 3, 1},
                            {3.4463744163513184f, 6.593237400054932f, 5.445934295654297f,
                             4.694451332092285f, 5.190558910369873f, 4.205625534057617f});
  }
  {
    auto run = RunOp(MakeNode("ReduceL2", 2, 1, {IntAttr("keepdims", 0)}), 18, {r, Axes({0, 2})});
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    ExpectTensorNear<float>(run->outputs[0].tensor(), {3},
                            {3.185243844985962f, 4.2558274269104f, 3.7111120223999023f});
  }
  {
    auto run = RunOp(MakeNode("ReduceLogSumExp", 1, 1, {IntAttr("keepdims", 0)}), 18, {r});
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    ExpectTensorNear<float>(run->outputs[0].tensor(), {}, {4.518996310835628f});
  }
  {
    auto run = RunOp(MakeNode("ReduceLogSum", 1, 1, {IntsAttr("axes", {1}), IntAttr("keepdims", 0)}), 13, {r});
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    ExpectTensorNear<float>(run->outputs[0].tensor(), {2, 4},
                            {1.5020275115966797f, 1.5425333976745605f, 1.3070330619812012f,
                             0.9643735885620117f, 1.4166669845581055f, 0.9356992244720459f,
                             1.3987138271331787f, 1.2144076824188232f});
  }
  {
    auto run = RunOp(MakeNode("ReduceProd", 2, 1, {IntAttr("keepdims", 0)}), 18, {r, Axes({-1})});
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    ExpectTensorNear<float>(run->outputs[0].tensor(), {2, 3},
                            {0.3879680037498474f, 7.226111888885498f, 2.174828290939331f,
                             1.196708083152771f, 2.5360429286956787f, 0.8247685432434082f});
  }
}

TEST(Reduce, SumSquareKeepdimsAndNoop) {
  auto r = Tensor::FromVector(kR, {2, 3, 4});
  auto run = RunOp(MakeNode("ReduceSumSquare", 2, 1), 18, {r, Axes({1})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {2, 1, 4},
                          {6.806763172149658f, 7.932024955749512f, 5.274625778198242f, 3.0711474418640137f,
                           6.705653190612793f, 2.495943069458008f, 5.71190071105957f, 4.032139301300049f});
  // noop_with_empty_axes: numpy's axis=() applies square elementwise (np.square(r)).
  auto noop = RunOp(MakeNode("ReduceSumSquare", 1, 1, {IntAttr("noop_with_empty_axes", 1)}), 18, {r});
  ASSERT_TRUE(noop.ok()) << noop.status().ToString();
  const Tensor& y = noop->outputs[0].tensor();
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_NEAR(y.data<float>()[0], 2.1183130741119385, 1e-5);
  EXPECT_NEAR(y.data<float>()[23], 2.1632065773010254, 1e-5);
}

TEST(Reduce, EmptySetGivesIdentity) {
  // Shape [2,0,4] reduced over axis 1 -> [2,1,4] of the identity (onnx test_reduce_*_empty_set).
  auto empty = Tensor::Allocate(DataType::kFloat, {2, 0, 4}).value();
  auto max = RunOp(MakeNode("ReduceMax", 2, 1), 18, {empty, Axes({1})});
  ASSERT_TRUE(max.ok()) << max.status().ToString();
  ASSERT_EQ(max->outputs[0].tensor().dims(), (std::vector<int64_t>{2, 1, 4}));
  EXPECT_EQ(max->outputs[0].tensor().data<float>()[0], -std::numeric_limits<float>::infinity());
  auto prod = RunOp(MakeNode("ReduceProd", 2, 1), 18, {empty, Axes({1})});
  ASSERT_TRUE(prod.ok());
  EXPECT_EQ(prod->outputs[0].tensor().data<float>()[7], 1.0f);
  auto sum = RunOp(MakeNode("ReduceSum", 2, 1), 13, {empty, Axes({1})});
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->outputs[0].tensor().data<float>()[3], 0.0f);
  auto logsum = RunOp(MakeNode("ReduceLogSum", 2, 1), 18, {empty, Axes({1})});
  ASSERT_TRUE(logsum.ok());
  EXPECT_EQ(logsum->outputs[0].tensor().data<float>()[0], -std::numeric_limits<float>::infinity());
  // A non-reduced zero dim: no output elements at all.
  auto none = RunOp(MakeNode("ReduceSum", 2, 1), 13, {empty, Axes({2})});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->outputs[0].tensor().dims(), (std::vector<int64_t>{2, 0, 1}));
}

TEST(Reduce, IntegerTypesWrapAndTruncate) {
  // np.sum(int8 [[100,100,100],[1,2,3]], axis=1, dtype=int8) -> [44, 6]
  auto i8 = Tensor::FromVector<int8_t>({100, 100, 100, 1, 2, 3}, {2, 3});
  auto sum = RunOp(MakeNode("ReduceSum", 1, 1, {IntsAttr("axes", {1}), IntAttr("keepdims", 0)}), 11, {i8});
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  ExpectTensorNear<int8_t>(sum->outputs[0].tensor(), {2}, {44, 6});
  // np.min(i32, axis=0) -> [4,-3,-8]; np.mean(i32, axis=1, dtype=int32) -> [4, 0]
  auto i32 = Tensor::FromVector<int32_t>({7, -3, 9, 4, 4, -8}, {2, 3});
  auto mn = RunOp(MakeNode("ReduceMin", 2, 1, {IntAttr("keepdims", 0)}), 18, {i32, Axes({0})});
  ASSERT_TRUE(mn.ok()) << mn.status().ToString();
  ExpectTensorNear<int32_t>(mn->outputs[0].tensor(), {3}, {4, -3, -8});
  auto mean = RunOp(MakeNode("ReduceMean", 2, 1, {IntAttr("keepdims", 0)}), 18, {i32, Axes({1})});
  ASSERT_TRUE(mean.ok()) << mean.status().ToString();
  ExpectTensorNear<int32_t>(mean->outputs[0].tensor(), {2}, {4, 0});
}

TEST(Reduce, BoolMaxIsAny) {
  // np.max([[True,False],[False,False]], axis=1) -> [True, False]
  auto b = Tensor::FromVector<bool>({true, false, false, false}, {2, 2});
  auto run = RunOp(MakeNode("ReduceMax", 2, 1, {IntAttr("keepdims", 0)}), 20, {b, Axes({1})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<bool>(run->outputs[0].tensor(), {2}, {true, false});
  auto mn = RunOp(MakeNode("ReduceMin", 2, 1, {IntAttr("keepdims", 0)}), 20, {b, Axes({0})});
  ASSERT_TRUE(mn.ok()) << mn.status().ToString();
  ExpectTensorNear<bool>(mn->outputs[0].tensor(), {2}, {false, false});
}

TEST(Reduce, Float16AccumulatesThroughFloat) {
  auto h = Tensor::Allocate(DataType::kFloat16, {3}).value();
  h.data<uint16_t>()[0] = 0x3C00;  // 1.0
  h.data<uint16_t>()[1] = 0x4000;  // 2.0
  h.data<uint16_t>()[2] = 0x3800;  // 0.5
  auto run = RunOp(MakeNode("ReduceSum", 1, 1, {IntAttr("keepdims", 0)}), 13, {h});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->outputs[0].tensor().data<uint16_t>()[0], 0x4300);  // 3.5
}

TEST(Reduce, BadAxesAreErrors) {
  auto x = Tensor::FromVector(kX, {3, 2, 2});
  auto out_of_range = RunOp(MakeNode("ReduceSum", 2, 1), 13, {x, Axes({3})});
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.status().message().find("node 'test'"), std::string::npos);
  EXPECT_NE(out_of_range.status().message().find("out of range"), std::string::npos);
  auto duplicate = RunOp(MakeNode("ReduceMax", 1, 1, {IntsAttr("axes", {1, -2})}), 13, {x});
  ASSERT_FALSE(duplicate.ok());
  EXPECT_NE(duplicate.status().message().find("more than once"), std::string::npos);
  auto bad_type = RunOp(MakeNode("ReduceMean", 2, 1), 18,
                        {x, Tensor::FromVector<int32_t>({1}, {1})});
  ASSERT_FALSE(bad_type.ok());
  EXPECT_NE(bad_type.status().message().find("input 1"), std::string::npos);
}

TEST(Reduce, ShapeRuleWithUnknownAxes) {
  Node node = MakeNode("ReduceSum", 2, 1);
  TypeInfo x = TypeInfo::Tensor(DataType::kFloat, Shape{Dim::Symbol("N"), Dim::Known(3)});
  TypeInfo axes = TypeInfo::Tensor(DataType::kInt64, Shape{Dim::Known(1)});
  InferenceContext ictx{node, 13, {&x, &axes}, {nullptr, nullptr}, {TypeInfo{}}, {}, nullptr};
  const OpSchema* schema = OpRegistry::Global().Resolve("", "ReduceSum", 13).value();
  ASSERT_TRUE(schema->infer(ictx).ok());
  ASSERT_TRUE(ictx.output_types[0].shape.has_value());
  EXPECT_EQ(ictx.output_types[0].shape->size(), 2u);
  // Known axes keep the symbolic dim.
  Tensor axes_value = Axes({1});
  ictx.input_values[1] = &axes_value;
  ASSERT_TRUE(schema->infer(ictx).ok());
  EXPECT_EQ(ShapeToString(*ictx.output_types[0].shape), "[N,1]");
}

}  // namespace
}  // namespace nee
