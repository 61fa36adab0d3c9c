// Tests for ops/logic.cc. Expected values were computed with numpy 2.4 in
// /work/main/.venv (==, >, <, >=, <=, &, |, ^, ~ and np.where on the same
// arrays, broadcasting as numpy does) and pasted here.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "op_test_util.h"

namespace nee {
namespace {

using testing::ExpectRegisteredVersions;
using testing::ExpectTensorNear;
using testing::IntAttr;
using testing::MakeNode;
using testing::RunError;
using testing::RunOne;

template <typename T>
Value V(std::vector<int64_t> dims, std::vector<T> values) {
  return Value(Tensor::FromVector<T>(values, std::move(dims)));
}

TEST(Logic, ComparisonsBroadcast) {
  Value a = V<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Value b = V<float>({3}, {2, 5, 6});
  ExpectTensorNear<bool>(RunOne("Equal", 19, {a, b}), {2, 3}, {false, false, false, false, true, true});
  ExpectTensorNear<bool>(RunOne("Greater", 13, {a, b}), {2, 3}, {false, false, false, true, false, false});
  ExpectTensorNear<bool>(RunOne("Less", 13, {a, b}), {2, 3}, {true, true, true, false, false, false});
  ExpectTensorNear<bool>(RunOne("GreaterOrEqual", 16, {a, b}), {2, 3}, {false, false, false, true, true, true});
  ExpectTensorNear<bool>(RunOne("LessOrEqual", 12, {a, b}), {2, 3}, {true, true, true, false, true, true});
  // int64 with both sides broadcast: [[1],[5]] > [0,3,5,7].
  ExpectTensorNear<bool>(RunOne("Greater", 9, {V<int64_t>({2, 1}, {1, 5}), V<int64_t>({4}, {0, 3, 5, 7})}), {2, 4},
                         {true, false, false, false, true, true, false, false});
}

TEST(Logic, ComparisonsWithNaN) {
  const float nan = std::nanf("");
  Value n = V<float>({3}, {nan, 1, 2});
  ExpectTensorNear<bool>(RunOne("LessOrEqual", 16, {n, V<float>({3}, {nan, 1, 1})}), {3}, {false, true, false});
  ExpectTensorNear<bool>(RunOne("Equal", 13, {n, n}), {3}, {false, true, true});
}

TEST(Logic, EqualOnStringsAndBools) {
  ExpectTensorNear<bool>(RunOne("Equal", 19, {V<std::string>({4}, {"a", "bc", "", "x"}),
                                              V<std::string>({4}, {"a", "b", "", "y"})}),
                         {4}, {true, false, true, false});
  ExpectTensorNear<bool>(RunOne("Equal", 13, {V<bool>({3}, {true, false, true}), V<bool>({2, 1}, {true, false})}),
                         {2, 3}, {true, false, true, false, true, false});
  // Strings cannot be ordered.
  EXPECT_FALSE(RunError("Less", 13, {V<std::string>({1}, {"a"}), V<std::string>({1}, {"b"})}).ok());
}

TEST(Logic, Float16Comparison) {
  // float16 bits: 0x3c00 = 1.0, 0x4000 = 2.0, 0xbc00 = -1.0.
  Tensor a = Tensor::Allocate(DataType::kFloat16, {3}).value();
  Tensor b = Tensor::Allocate(DataType::kFloat16, {3}).value();
  const uint16_t av[] = {0x3c00, 0x4000, 0xbc00}, bv[] = {0x4000, 0x4000, 0x3c00};
  for (int i = 0; i < 3; ++i) {
    a.data<uint16_t>()[i] = av[i];
    b.data<uint16_t>()[i] = bv[i];
  }
  ExpectTensorNear<bool>(RunOne("Less", 13, {Value(a), Value(b)}), {3}, {true, false, true});
}

TEST(Logic, BFloat16Comparison) {
  // ml_dtypes bfloat16 x = [-2,-.5,0,1,3], y = [1,-.5,.5,1,2] (bits below): x > y, x == y.
  Tensor x = Tensor::Allocate(DataType::kBFloat16, {5}).value();
  Tensor y = Tensor::Allocate(DataType::kBFloat16, {5}).value();
  const uint16_t xv[] = {49152, 48896, 0, 16256, 16448}, yv[] = {16256, 48896, 16128, 16256, 16384};
  for (int i = 0; i < 5; ++i) {
    x.data<uint16_t>()[i] = xv[i];
    y.data<uint16_t>()[i] = yv[i];
  }
  ExpectTensorNear<bool>(RunOne("Greater", 13, {Value(x), Value(y)}), {5}, {false, false, false, false, true});
  ExpectTensorNear<bool>(RunOne("Equal", 13, {Value(x), Value(y)}), {5}, {false, true, false, true, false});
}

TEST(Logic, BooleanOps) {
  Value p = V<bool>({2, 2}, {true, false, true, true});
  Value q = V<bool>({2}, {true, false});
  ExpectTensorNear<bool>(RunOne("And", 7, {p, q}), {2, 2}, {true, false, true, false});
  ExpectTensorNear<bool>(RunOne("Or", 7, {p, q}), {2, 2}, {true, false, true, true});
  ExpectTensorNear<bool>(RunOne("Xor", 7, {p, q}), {2, 2}, {false, false, false, true});
  ExpectTensorNear<bool>(RunOne("Not", 1, {p}), {2, 2}, {false, true, false, false});
  // Legacy opset-1 broadcasting through the attribute.
  ExpectTensorNear<bool>(RunOne("And", 1, {p, q}, {IntAttr("broadcast", 1)}), {2, 2}, {true, false, true, false});
  EXPECT_FALSE(RunError("And", 7, {V<int32_t>({1}, {1}), V<int32_t>({1}, {1})}).ok());
  EXPECT_FALSE(RunError("Not", 1, {V<float>({1}, {1})}).ok());
}

TEST(Logic, WhereBroadcastsThreeWays) {
  // np.where([[T],[F]], np.arange(6).reshape(2,3), [-1,-2,-3]).
  ExpectTensorNear<float>(RunOne("Where", 16, {V<bool>({2, 1}, {true, false}), V<float>({2, 3}, {0, 1, 2, 3, 4, 5}),
                                               V<float>({3}, {-1, -2, -3})}),
                          {2, 3}, {0, 1, 2, -1, -2, -3});
  // Scalar X: np.where([T,F,T], 7, [[1,2,3],[4,5,6]]).
  ExpectTensorNear<int64_t>(RunOne("Where", 9, {V<bool>({3}, {true, false, true}), V<int64_t>({}, {7}),
                                               V<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6})}),
                            {2, 3}, {7, 2, 7, 7, 5, 7});
  // Strings: np.where([T,F], ['yes','yes2'], ['no']) -> ['yes','no'].
  Tensor s = RunOne("Where", 16, {V<bool>({2}, {true, false}), V<std::string>({2}, {"yes", "yes2"}),
                                  V<std::string>({1}, {"no"})});
  ASSERT_EQ(s.dtype(), DataType::kString);
  ASSERT_EQ(s.num_elements(), 2);
  EXPECT_EQ(s.data<std::string>()[0], "yes");
  EXPECT_EQ(s.data<std::string>()[1], "no");
  // bool and uint8 payloads, empty output.
  ExpectTensorNear<bool>(RunOne("Where", 16, {V<bool>({2}, {true, false}), V<bool>({2}, {false, false}),
                                              V<bool>({}, {true})}),
                         {2}, {false, true});
  ExpectTensorNear<uint8_t>(RunOne("Where", 16, {V<bool>({0}, {}), V<uint8_t>({1}, {1}), V<uint8_t>({1}, {2})}), {0},
                            {});
}

TEST(Logic, WhereLargeThreaded) {
  // cond[i,j] = (i + j) % 2 == 0, x[j] = j, y = -1: closed form, exact.
  const int I = 300, J = 257;
  std::vector<double> x(J), expected;
  for (int j = 0; j < J; ++j) x[j] = j;
  Tensor cond = Tensor::Allocate(DataType::kBool, {I, J}).value();
  for (int i = 0; i < I; ++i)
    for (int j = 0; j < J; ++j) {
      bool c = (i + j) % 2 == 0;
      cond.data<bool>()[i * J + j] = c;
      expected.push_back(c ? j : -1.0);
    }
  ExpectTensorNear<double>(RunOne("Where", 16, {Value(cond), V<double>({J}, x), V<double>({}, {-1.0})}, {}, 4), {I, J},
                           expected, 0);
}

TEST(Logic, WhereErrors) {
  Status s = RunError("Where", 16, {V<int32_t>({1}, {1}), V<float>({1}, {1}), V<float>({1}, {2})});
  EXPECT_FALSE(s.ok());
  s = RunError("Where", 16, {V<bool>({1}, {true}), V<float>({1}, {1}), V<double>({1}, {2})});
  EXPECT_FALSE(s.ok());
  s = RunError("Where", 16, {V<bool>({2}, {true, false}), V<float>({3}, {1, 2, 3}), V<float>({1}, {2})});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Where"), std::string::npos) << s.message();
}

TEST(Logic, ShapeRules) {
  const OpSchema* where = OpRegistry::Global().Resolve("", "Where", 16).value();
  Node node = MakeNode("Where", 3, 1);
  TypeInfo c = TypeInfo::Tensor(DataType::kBool, Shape{Dim::Symbol("B"), Dim::Known(1)});
  TypeInfo x = TypeInfo::Tensor(DataType::kString, Shape{Dim::Known(5)});
  InferenceContext ictx{node, 16, {&c, &x, &x}, {nullptr, nullptr, nullptr}, {TypeInfo{}}, {std::nullopt}, nullptr};
  ASSERT_TRUE(where->infer(ictx).ok());
  EXPECT_EQ(ictx.output_types[0].elem_type, DataType::kString);
  ASSERT_TRUE(ictx.output_types[0].shape.has_value());
  EXPECT_EQ(ShapeToString(*ictx.output_types[0].shape), "[B,5]");

  const OpSchema* equal = OpRegistry::Global().Resolve("", "Equal", 19).value();
  Node eq = MakeNode("Equal", 2, 1);
  TypeInfo f = TypeInfo::Tensor(DataType::kFloat, std::nullopt);
  InferenceContext e{eq, 19, {&f, &f}, {nullptr, nullptr}, {TypeInfo{}}, {std::nullopt}, nullptr};
  ASSERT_TRUE(equal->infer(e).ok());
  EXPECT_EQ(e.output_types[0].elem_type, DataType::kBool);
  EXPECT_FALSE(e.output_types[0].shape.has_value());
}

// Shape computations fold at check time: Where(Equal(shape, -1), 1, shape)
// with known int64 values gives the output value (numpy: np.where(s == -1, 1, s)).
TEST(Logic, ShapeRulesPropagateSmallIntegerValues) {
  Tensor shape = Tensor::FromVector<int64_t>({2, -1, 5}, {3});
  Tensor minus_one = Tensor::FromVector<int64_t>({-1}, {});
  TypeInfo shape_type = TypeInfo::Tensor(DataType::kInt64, Shape{Dim::Known(3)});
  TypeInfo scalar_type = TypeInfo::Tensor(DataType::kInt64, Shape{});
  Node eq = MakeNode("Equal", 2, 1);
  InferenceContext e{eq, 19, {&shape_type, &scalar_type}, {&shape, &minus_one}, {TypeInfo{}}, {std::nullopt}, nullptr};
  ASSERT_TRUE(OpRegistry::Global().Resolve("", "Equal", 19).value()->infer(e).ok());
  ASSERT_TRUE(e.output_values[0].has_value());
  ExpectTensorNear<bool>(*e.output_values[0], {3}, {false, true, false});

  Tensor cond = *e.output_values[0];
  Tensor one = Tensor::FromVector<int64_t>({1}, {});
  TypeInfo cond_type = TypeInfo::Tensor(DataType::kBool, Shape{Dim::Known(3)});
  Node where = MakeNode("Where", 3, 1);
  InferenceContext w{where, 16, {&cond_type, &scalar_type, &shape_type}, {&cond, &one, &shape}, {TypeInfo{}},
                     {std::nullopt}, nullptr};
  ASSERT_TRUE(OpRegistry::Global().Resolve("", "Where", 16).value()->infer(w).ok());
  ASSERT_TRUE(w.output_values[0].has_value());
  ExpectTensorNear<int64_t>(*w.output_values[0], {3}, {2, 1, 5});

  // An unknown input leaves the value unknown; float values are not folded.
  InferenceContext partial{eq, 19, {&shape_type, &scalar_type}, {&shape, nullptr}, {TypeInfo{}}, {std::nullopt},
                           nullptr};
  ASSERT_TRUE(OpRegistry::Global().Resolve("", "Equal", 19).value()->infer(partial).ok());
  EXPECT_FALSE(partial.output_values[0].has_value());
}

// Since-versions of each op as onnx 1.23.2 lists them:
//   sorted(s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.name == op and s.domain == "")
TEST(Logic, RegistersEveryOnnxVersion) {
  const std::vector<std::pair<std::string, std::vector<int>>> kVersions = {
      {"Equal", {1, 7, 11, 13, 19}}, {"Greater", {1, 7, 9, 13}}, {"Less", {1, 7, 9, 13}},
      {"GreaterOrEqual", {12, 16}}, {"LessOrEqual", {12, 16}}, {"And", {1, 7}}, {"Or", {1, 7}}, {"Xor", {1, 7}},
      {"Not", {1}}, {"Where", {9, 16}},
  };
  ExpectRegisteredVersions(kVersions);
}

}  // namespace
}  // namespace nee
