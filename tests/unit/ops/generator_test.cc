// Tests for ops/generator.cc. Expected values were computed with numpy 2.4
// (/work/main/.venv/bin/python); each test names the expression used.
#include <gtest/gtest.h>

#include "op_test_util.h"

namespace nee::testing {
namespace {

template <typename T>
Value V(std::vector<T> values, std::vector<int64_t> dims) {
  return Value(Tensor::FromVector<T>(values, std::move(dims)));
}

const Tensor& Out(const Result<OpRun>& r, size_t i = 0) { return r.value().outputs[i].tensor(); }

// ---- Constant -----------------------------------------------------------------------

TEST(GeneratorConstant, ValueKinds) {
  auto t = RunOp(MakeNode("Constant", 0, 1, {TensorAttr("value", Tensor::FromVector<int32_t>({1, 2, 3, 4}, {2, 2}))}),
                 13, {});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ExpectTensorNear<int32_t>(Out(t), {2, 2}, {1, 2, 3, 4});
  auto ints = RunOp(MakeNode("Constant", 0, 1, {IntsAttr("value_ints", {5, -6})}), 13, {});
  ASSERT_TRUE(ints.ok());
  ExpectTensorNear<int64_t>(Out(ints), {2}, {5, -6});
  auto f = RunOp(MakeNode("Constant", 0, 1, {FloatAttr("value_float", 2.5f)}), 13, {});
  ASSERT_TRUE(f.ok());
  ExpectTensorNear<float>(Out(f), {}, {2.5f});
  Attribute strings;
  strings.name = "value_strings";
  strings.type = AttrType::kStrings;
  strings.strings = {"x", "yz"};
  auto s = RunOp(MakeNode("Constant", 0, 1, {strings}), 13, {});
  ASSERT_TRUE(s.ok());
  ExpectTensorNear<std::string>(Out(s), {2}, {"x", "yz"});
}

TEST(GeneratorConstant, SparseValueDensifies) {
  // Dense [2,3] with 5 at flat index 1 and 7 at flat index 4.
  Attribute a;
  a.name = "sparse_value";
  a.type = AttrType::kSparseTensor;
  a.sparse_tensor.values = Tensor::FromVector<float>({5, 7}, {2});
  a.sparse_tensor.indices = Tensor::FromVector<int64_t>({1, 4}, {2});
  a.sparse_tensor.dims = {2, 3};
  auto r = RunOp(MakeNode("Constant", 0, 1, {a}), 13, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(Out(r), {2, 3}, {0, 5, 0, 0, 7, 0});
}

TEST(GeneratorConstant, NeedsExactlyOneValueAndPropagates) {
  EXPECT_FALSE(RunOp(MakeNode("Constant", 0, 1), 13, {}).ok());
  EXPECT_FALSE(RunOp(MakeNode("Constant", 0, 1, {IntAttr("value_int", 1), FloatAttr("value_float", 1)}), 13, {}).ok());
  Node node = MakeNode("Constant", 0, 1, {IntsAttr("value_ints", {1, 2})});
  InferenceContext ictx{node, 13, {}, {}, {}, {}, nullptr};
  ictx.output_types.resize(1);
  ictx.output_values.resize(1);
  ASSERT_TRUE(OpRegistry::Global().Resolve("", "Constant", 13).value()->infer(ictx).ok());
  ASSERT_TRUE(ictx.output_values[0].has_value());
  ExpectTensorNear<int64_t>(*ictx.output_values[0], {2}, {1, 2});
}

// ---- ConstantOfShape ---------------------------------------------------------------------

TEST(GeneratorConstantOfShape, FillsAndValidates) {
  auto d = RunOp(MakeNode("ConstantOfShape", 1, 1), 9, {V<int64_t>({2, 2}, {2})});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ExpectTensorNear<float>(Out(d), {2, 2}, {0, 0, 0, 0});
  auto v = RunOp(MakeNode("ConstantOfShape", 1, 1, {TensorAttr("value", Tensor::FromVector<int32_t>({7}, {1}))}), 20,
                 {V<int64_t>({3}, {1})});
  ASSERT_TRUE(v.ok());
  ExpectTensorNear<int32_t>(Out(v), {3}, {7, 7, 7});
  auto scalar = RunOp(MakeNode("ConstantOfShape", 1, 1), 20, {V<int64_t>({}, {0})});
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(Out(scalar).dims(), std::vector<int64_t>{});
  EXPECT_FALSE(RunOp(MakeNode("ConstantOfShape", 1, 1), 20, {V<int64_t>({2, -1}, {2})}).ok());
  auto huge = RunOp(MakeNode("ConstantOfShape", 1, 1), 20, {V<int64_t>({int64_t{1} << 40, int64_t{1} << 20}, {2})});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kOutOfMemory);
}

// ---- Range --------------------------------------------------------------------------------

TEST(GeneratorRange, IntegerAndFloat) {
  // np.arange(10, 4, -3)
  auto i = RunOp(MakeNode("Range", 3, 1), 11, {V<int64_t>({10}, {}), V<int64_t>({4}, {}), V<int64_t>({-3}, {})});
  ASSERT_TRUE(i.ok()) << i.status().ToString();
  ExpectTensorNear<int64_t>(Out(i), {2}, {10, 7});
  // np.arange(np.float32(1), np.float32(2), np.float32(0.3)) = [1, 1.3, 1.6, 1.9]
  auto f = RunOp(MakeNode("Range", 3, 1), 11, {V<float>({1}, {}), V<float>({2}, {}), V<float>({0.3f}, {})});
  ASSERT_TRUE(f.ok());
  ExpectTensorNear<float>(Out(f), {4}, {1.0f, 1.3f, 1.6f, 1.9f}, 1e-6);
  // Empty when the direction is wrong: np.arange(0, 5, -1).size == 0
  auto e = RunOp(MakeNode("Range", 3, 1), 11, {V<int32_t>({0}, {}), V<int32_t>({5}, {}), V<int32_t>({-1}, {})});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(Out(e).dims(), std::vector<int64_t>{0});
}

TEST(GeneratorRange, ZeroDeltaAndHugeFail) {
  EXPECT_FALSE(RunOp(MakeNode("Range", 3, 1), 11, {V<int64_t>({0}, {}), V<int64_t>({4}, {}), V<int64_t>({0}, {})}).ok());
  auto huge = RunOp(MakeNode("Range", 3, 1), 11,
                    {V<int64_t>({0}, {}), V<int64_t>({std::numeric_limits<int64_t>::max()}, {}), V<int64_t>({1}, {})});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kOutOfMemory);
  auto huge_f = RunOp(MakeNode("Range", 3, 1), 11, {V<float>({0}, {}), V<float>({1e30f}, {}), V<float>({1e-30f}, {})});
  EXPECT_FALSE(huge_f.ok());
}

TEST(GeneratorRange, RulePropagatesSmallAndNeverAllocatesHuge) {
  const OpSchema* schema = OpRegistry::Global().Resolve("", "Range", 11).value();
  Node node = MakeNode("Range", 3, 1);
  TypeInfo t = TypeInfo::Tensor(DataType::kInt64, Shape{});
  Tensor start = Tensor::Scalar<int64_t>(0), small = Tensor::Scalar<int64_t>(3), one = Tensor::Scalar<int64_t>(1);
  InferenceContext ictx{node, 11, {&t, &t, &t}, {&start, &small, &one}, {}, {}, nullptr};
  ictx.output_types.resize(1);
  ictx.output_values.resize(1);
  ASSERT_TRUE(schema->infer(ictx).ok());
  ASSERT_TRUE(ictx.output_values[0].has_value());
  ExpectTensorNear<int64_t>(*ictx.output_values[0], {3}, {0, 1, 2});  // np.arange(0, 3, 1)

  Tensor huge = Tensor::Scalar<int64_t>(int64_t{1} << 45);
  InferenceContext big{node, 11, {&t, &t, &t}, {&start, &huge, &one}, {}, {}, nullptr};
  big.output_types.resize(1);
  big.output_values.resize(1);
  ASSERT_TRUE(schema->infer(big).ok());
  EXPECT_FALSE(big.output_values[0].has_value());
}

// ---- EyeLike / random ---------------------------------------------------------------------------

TEST(GeneratorEyeLike, OffsetDiagonalAndDtype) {
  // np.eye(3, 4, k=1, dtype=np.int32)
  auto r = RunOp(MakeNode("EyeLike", 1, 1, {IntAttr("k", 1), IntAttr("dtype", 6)}), 22,
                 {V<float>(std::vector<float>(12, 0.5f), {3, 4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int32_t>(Out(r), {3, 4}, {0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1});
  EXPECT_FALSE(RunOp(MakeNode("EyeLike", 1, 1), 22, {V<float>({1, 2}, {2})}).ok());
}

TEST(GeneratorRandom, SeededUniformIsRepeatableAndInRange) {
  Node node = MakeNode("RandomUniform", 0, 1,
                       {IntsAttr("shape", {64}), FloatAttr("low", -2), FloatAttr("high", 3), FloatAttr("seed", 4)});
  auto a = RunOp(node, 22, {});
  auto b = RunOp(node, 22, {});
  ASSERT_TRUE(a.ok() && b.ok());
  for (int64_t i = 0; i < 64; ++i) {
    float v = Out(a).data<float>()[i];
    EXPECT_EQ(v, Out(b).data<float>()[i]);
    EXPECT_GE(v, -2.0f);
    EXPECT_LT(v, 3.0f);
  }
  auto bern = RunOp(MakeNode("Bernoulli", 1, 1), 22, {V<double>({0, 1, 0, 1}, {4})});
  ASSERT_TRUE(bern.ok());
  ExpectTensorNear<double>(Out(bern), {4}, {0, 1, 0, 1});
}

}  // namespace
}  // namespace nee::testing
