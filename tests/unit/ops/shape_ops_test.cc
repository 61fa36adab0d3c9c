// Tests for ops/shape_ops.cc, concat_split.cc, pad_tile.cc and rearrange.cc. Expected values were computed with numpy 2.4
// (/work/main/.venv/bin/python); each test names the expression used.
#include <gtest/gtest.h>

#include <limits>
#include <numeric>

#include "check/checker.h"
#include "ir/float_formats.h"
#include "op_test_util.h"

namespace nee::testing {
namespace {

template <typename T>
Value V(std::vector<T> values, std::vector<int64_t> dims) {
  return Value(Tensor::FromVector<T>(values, std::move(dims)));
}

template <typename T>
std::vector<T> Iota(int64_t n, T start = T(0)) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<T>(start + static_cast<T>(i));
  return v;
}

const Tensor& Out(const Result<OpRun>& r, size_t i = 0) { return r.value().outputs[i].tensor(); }

// ---- Reshape -------------------------------------------------------------------

TEST(ShapeOpsReshape, ZeroCopiesAndMinusOneInfers) {
  auto r = RunOp(MakeNode("Reshape", 2, 1), 21, {V<float>(Iota<float>(24), {2, 3, 4}), V<int64_t>({0, -1, 2}, {3})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(Out(r), {2, 6, 2}, Iota<float>(24));
}

TEST(ShapeOpsReshape, AllowZeroKeepsZero) {
  // np.reshape(np.zeros((0, 4)), (4, 0)) is valid; with allowzero the 0 is literal.
  auto r = RunOp(MakeNode("Reshape", 2, 1, {IntAttr("allowzero", 1)}), 14,
                 {V<float>({}, {0, 4}), V<int64_t>({4, 0}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Out(r).dims(), (std::vector<int64_t>{4, 0}));
}

TEST(ShapeOpsReshape, Opset1ShapeAttribute) {
  auto r = RunOp(MakeNode("Reshape", 1, 1, {IntsAttr("shape", {4, -1})}), 1, {V<int32_t>(Iota<int32_t>(8), {2, 4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int32_t>(Out(r), {4, 2}, Iota<int32_t>(8));
}

TEST(ShapeOpsReshape, MismatchedCountIsError) {
  auto r = RunOp(MakeNode("Reshape", 2, 1), 13, {V<float>(Iota<float>(24), {2, 3, 4}), V<int64_t>({5, -1}, {2})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node 'test' (Reshape)"), std::string::npos) << r.status().message();
  auto two = RunOp(MakeNode("Reshape", 2, 1), 13, {V<float>(Iota<float>(4), {4}), V<int64_t>({-1, -1}, {2})});
  EXPECT_FALSE(two.ok());
}

TEST(ShapeOpsReshape, RuleUsesKnownShapeWithSymbolicInput) {
  Node node = MakeNode("Reshape", 2, 1);
  TypeInfo x = TypeInfo::Tensor(DataType::kFloat, Shape{Dim::Symbol("batch"), Dim::Known(3), Dim::Known(4)});
  TypeInfo s = TypeInfo::Tensor(DataType::kInt64, Shape{Dim::Known(3)});
  Tensor shape = Tensor::FromVector<int64_t>({0, 12, 1}, {3});
  InferenceContext ictx{node, 13, {&x, &s}, {nullptr, &shape}, {}, {}, nullptr};
  ictx.output_types.resize(1);
  ictx.output_values.resize(1);
  const OpSchema* schema = OpRegistry::Global().Resolve("", "Reshape", 13).value();
  ASSERT_TRUE(schema->infer(ictx).ok());
  ASSERT_TRUE(ictx.output_types[0].shape.has_value());
  EXPECT_EQ(ShapeToString(*ictx.output_types[0].shape), "[batch,12,1]");
}

TEST(ShapeOpsReshape, StringsMove) {
  auto r = RunOp(MakeNode("Reshape", 2, 1), 21,
                 {V<std::string>({"a", "b", "c", "d"}, {2, 2}), V<int64_t>({4}, {1})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<std::string>(Out(r), {4}, {"a", "b", "c", "d"});
}

// ---- Flatten / Transpose ----------------------------------------------------------

TEST(ShapeOpsFlatten, AxisVariants) {
  auto r = RunOp(MakeNode("Flatten", 1, 1, {IntAttr("axis", -1)}), 13, {V<float>(Iota<float>(24), {2, 3, 4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(Out(r), {6, 4}, Iota<float>(24));
  auto r0 = RunOp(MakeNode("Flatten", 1, 1, {IntAttr("axis", 0)}), 13, {V<float>(Iota<float>(24), {2, 3, 4})});
  ASSERT_TRUE(r0.ok());
  EXPECT_EQ(Out(r0).dims(), (std::vector<int64_t>{1, 24}));
  EXPECT_FALSE(RunOp(MakeNode("Flatten", 1, 1, {IntAttr("axis", 4)}), 13, {V<float>(Iota<float>(24), {2, 3, 4})}).ok());
}

TEST(ShapeOpsTranspose, DefaultReversesAxes) {
  // np.arange(24).reshape(2,3,4).transpose()
  auto r = RunOp(MakeNode("Transpose", 1, 1), 21, {V<float>(Iota<float>(24), {2, 3, 4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(Out(r), {4, 3, 2},
                          {0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21, 2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23});
}

TEST(ShapeOpsTranspose, PermAndTypes) {
  // np.arange(24).reshape(2,3,4).transpose(1,0,2)
  std::vector<int64_t> expected = {0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 16, 17, 18, 19, 8, 9, 10, 11, 20, 21, 22, 23};
  auto r = RunOp(MakeNode("Transpose", 1, 1, {IntsAttr("perm", {1, 0, 2})}), 13, {V<int64_t>(Iota<int64_t>(24), {2, 3, 4})});
  ASSERT_TRUE(r.ok());
  ExpectTensorNear<int64_t>(Out(r), {3, 2, 4}, expected);
  // Strings: np.array([['a','b','c'],['d','e','f']]).T
  auto s = RunOp(MakeNode("Transpose", 1, 1), 13, {V<std::string>({"a", "b", "c", "d", "e", "f"}, {2, 3})});
  ASSERT_TRUE(s.ok());
  ExpectTensorNear<std::string>(Out(s), {3, 2}, {"a", "d", "b", "e", "c", "f"});
  // int4 (packed nibbles, low first): [[1,2],[3,4]].T = [[1,3],[2,4]]
  Tensor i4 = Tensor::Allocate(DataType::kInt4, {2, 2}).value();
  i4.data<uint8_t>()[0] = 0x21;
  i4.data<uint8_t>()[1] = 0x43;
  auto p = RunOp(MakeNode("Transpose", 1, 1), 21, {Value(i4)});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Out(p).data<uint8_t>()[0], 0x31);
  EXPECT_EQ(Out(p).data<uint8_t>()[1], 0x42);
}

TEST(ShapeOpsTranspose, BadPermIsError) {
  EXPECT_FALSE(RunOp(MakeNode("Transpose", 1, 1, {IntsAttr("perm", {0, 0})}), 13, {V<float>(Iota<float>(4), {2, 2})}).ok());
  EXPECT_FALSE(RunOp(MakeNode("Transpose", 1, 1, {IntsAttr("perm", {0})}), 13, {V<float>(Iota<float>(4), {2, 2})}).ok());
}

// ---- Squeeze / Unsqueeze ----------------------------------------------------------------

TEST(ShapeOpsSqueeze, AttributeInputAndDefault) {
  auto a = RunOp(MakeNode("Squeeze", 1, 1, {IntsAttr("axes", {-1})}), 11, {V<float>(Iota<float>(3), {1, 3, 1})});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(Out(a).dims(), (std::vector<int64_t>{1, 3}));
  auto b = RunOp(MakeNode("Squeeze", 2, 1), 13, {V<float>(Iota<float>(3), {1, 3, 1}), V<int64_t>({0}, {1})});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(Out(b).dims(), (std::vector<int64_t>{3, 1}));
  auto c = RunOp(MakeNode("Squeeze", 1, 1), 13, {V<float>(Iota<float>(3), {1, 3, 1})});
  ASSERT_TRUE(c.ok());
  ExpectTensorNear<float>(Out(c), {3}, {0, 1, 2});
  EXPECT_FALSE(RunOp(MakeNode("Squeeze", 2, 1), 13, {V<float>(Iota<float>(3), {1, 3, 1}), V<int64_t>({1}, {1})}).ok());
  EXPECT_FALSE(RunOp(MakeNode("Squeeze", 2, 1), 13, {V<float>(Iota<float>(3), {1, 3, 1}), V<int64_t>({3}, {1})}).ok());
}

TEST(ShapeOpsUnsqueeze, NegativeAxesAgainstOutputRank) {
  auto r = RunOp(MakeNode("Unsqueeze", 2, 1), 13, {V<float>(Iota<float>(6), {2, 3}), V<int64_t>({0, -1}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Out(r).dims(), (std::vector<int64_t>{1, 2, 3, 1}));
  auto old = RunOp(MakeNode("Unsqueeze", 1, 1, {IntsAttr("axes", {1})}), 11, {V<float>(Iota<float>(6), {2, 3})});
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(Out(old).dims(), (std::vector<int64_t>{2, 1, 3}));
  EXPECT_FALSE(RunOp(MakeNode("Unsqueeze", 2, 1), 13, {V<float>(Iota<float>(6), {2, 3}), V<int64_t>({1, 1}, {2})}).ok());
  // Scalar -> [1]: the value is propagated by the rule.
  auto s = RunOp(MakeNode("Unsqueeze", 2, 1), 13, {V<int64_t>({7}, {}), V<int64_t>({0}, {1})});
  ASSERT_TRUE(s.ok());
  ExpectTensorNear<int64_t>(Out(s), {1}, {7});
}

// ---- Concat / Split ------------------------------------------------------------------------

TEST(ShapeOpsConcat, NegativeAxisEmptyAndStrings) {
  // np.concatenate([[[1],[2]], [[3,4],[5,6]]], axis=-1) and an empty [2,0] input
  auto r = RunOp(MakeNode("Concat", 3, 1, {IntAttr("axis", -1)}), 13,
                 {V<int64_t>({1, 2}, {2, 1}), V<int64_t>({}, {2, 0}), V<int64_t>({3, 4, 5, 6}, {2, 2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int64_t>(Out(r), {2, 3}, {1, 3, 4, 2, 5, 6});
  auto s = RunOp(MakeNode("Concat", 2, 1, {IntAttr("axis", 0)}), 13,
                 {V<std::string>({"x"}, {1}), V<std::string>({"y", "z"}, {2})});
  ASSERT_TRUE(s.ok());
  ExpectTensorNear<std::string>(Out(s), {3}, {"x", "y", "z"});
  EXPECT_FALSE(RunOp(MakeNode("Concat", 2, 1, {IntAttr("axis", 0)}), 13,
                     {V<float>({1, 2}, {1, 2}), V<float>({1, 2, 3}, {1, 3})}).ok());
}

TEST(ShapeOpsSplit, NumOutputsUnevenAndSplitInput) {
  // np.array_split(np.arange(7), [3, 6]) = [0,1,2], [3,4,5], [6]
  auto r = RunOp(MakeNode("Split", 1, 3, {IntAttr("num_outputs", 3)}), 18, {V<int64_t>(Iota<int64_t>(7), {7})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int64_t>(Out(r, 0), {3}, {0, 1, 2});
  ExpectTensorNear<int64_t>(Out(r, 1), {3}, {3, 4, 5});
  ExpectTensorNear<int64_t>(Out(r, 2), {1}, {6});
  auto s = RunOp(MakeNode("Split", 2, 2, {IntAttr("axis", 1)}), 13,
                 {V<float>(Iota<float>(6), {2, 3}), V<int64_t>({1, 2}, {2})});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ExpectTensorNear<float>(Out(s, 0), {2, 1}, {0, 3});
  ExpectTensorNear<float>(Out(s, 1), {2, 2}, {1, 2, 4, 5});
  auto a = RunOp(MakeNode("Split", 1, 2, {IntsAttr("split", {3, 1})}), 11, {V<float>(Iota<float>(4), {4})});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ExpectTensorNear<float>(Out(a, 1), {1}, {3});
  EXPECT_FALSE(RunOp(MakeNode("Split", 1, 2), 13, {V<float>(Iota<float>(5), {5})}).ok());
  EXPECT_FALSE(RunOp(MakeNode("Split", 2, 2), 13, {V<float>(Iota<float>(5), {5}), V<int64_t>({1, 1}, {2})}).ok());
}

// ---- Expand / Tile ------------------------------------------------------------------------------

TEST(ShapeOpsExpand, BroadcastsBothWays) {
  // np.broadcast_to([[1],[2],[3]], (2,3,4))
  auto r = RunOp(MakeNode("Expand", 2, 1), 13, {V<float>({1, 2, 3}, {3, 1}), V<int64_t>({2, 1, 4}, {3})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(Out(r), {2, 3, 4}, {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  EXPECT_FALSE(RunOp(MakeNode("Expand", 2, 1), 13, {V<float>({1, 2, 3}, {3}), V<int64_t>({2}, {1})}).ok());
}

TEST(ShapeOpsExpand, AbsurdSizeFailsFast) {
  auto r = RunOp(MakeNode("Expand", 2, 1), 13,
                 {V<float>({1}, {1}), V<int64_t>({1 << 30, 1 << 30, 1 << 30}, {3})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfMemory) << r.status().ToString();
}

TEST(ShapeOpsTile, RepeatsAndErrors) {
  // np.tile([[1,2],[3,4]], (2,3))
  auto r = RunOp(MakeNode("Tile", 2, 1), 13, {V<int32_t>({1, 2, 3, 4}, {2, 2}), V<int64_t>({2, 3}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int32_t>(Out(r), {4, 6}, {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4});
  EXPECT_FALSE(RunOp(MakeNode("Tile", 2, 1), 13, {V<int32_t>({1, 2}, {2}), V<int64_t>({2, 3}, {2})}).ok());
  auto huge = RunOp(MakeNode("Tile", 2, 1), 13, {V<int32_t>({1, 2}, {2}), V<int64_t>({int64_t{1} << 50}, {1})});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kOutOfMemory);
}

// ---- Pad -------------------------------------------------------------------------------------------

Value M23() { return V<float>({1, 2, 3, 4, 5, 6}, {2, 3}); }

TEST(ShapeOpsPad, ConstantWithValue) {
  // np.pad(m, ((1,0),(0,2)), constant_values=9), m = [[1,2,3],[4,5,6]]
  auto r = RunOp(MakeNode("Pad", 3, 1), 13, {M23(), V<int64_t>({1, 0, 0, 2}, {4}), V<float>({9}, {})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(Out(r), {3, 5}, {9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 4, 5, 6, 9, 9});
}

TEST(ShapeOpsPad, ReflectEdgeWrap) {
  // np.pad(m, ((0,0),(2,2)), 'reflect')
  auto r = RunOp(MakeNode("Pad", 2, 1, {StringAttr("mode", "reflect")}), 13, {M23(), V<int64_t>({0, 2, 0, 2}, {4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(Out(r), {2, 7}, {3, 2, 1, 2, 3, 2, 1, 6, 5, 4, 5, 6, 5, 4});
  // np.pad(m, 1, 'edge')
  auto e = RunOp(MakeNode("Pad", 2, 1, {StringAttr("mode", "edge")}), 13, {M23(), V<int64_t>({1, 1, 1, 1}, {4})});
  ASSERT_TRUE(e.ok());
  ExpectTensorNear<float>(Out(e), {4, 5}, {1, 1, 2, 3, 3, 1, 1, 2, 3, 3, 4, 4, 5, 6, 6, 4, 4, 5, 6, 6});
  // np.pad(m, ((0,0),(2,1)), 'wrap')
  auto w = RunOp(MakeNode("Pad", 2, 1, {StringAttr("mode", "wrap")}), 19, {M23(), V<int64_t>({0, 2, 0, 1}, {4})});
  ASSERT_TRUE(w.ok());
  ExpectTensorNear<float>(Out(w), {2, 6}, {2, 3, 1, 2, 3, 1, 5, 6, 4, 5, 6, 4});
}

TEST(ShapeOpsPad, NegativePadsCropAndAxesInput) {
  // np.pad(m, ((0,0),(1,0)))[:, :-1]: pad one in front, crop one at the end of axis 1.
  auto r = RunOp(MakeNode("Pad", 4, 1), 18, {M23(), V<int64_t>({1, -1}, {2}), Value(), V<int64_t>({-1}, {1})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(Out(r), {2, 3}, {0, 1, 2, 0, 4, 5});
}

TEST(ShapeOpsPad, Opset2AttributesAndErrors) {
  auto r = RunOp(MakeNode("Pad", 1, 1, {IntsAttr("pads", {1, 0, 0, 2}), FloatAttr("value", 9)}), 2, {M23()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(Out(r), {3, 5}, {9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 4, 5, 6, 9, 9});
  EXPECT_FALSE(RunOp(MakeNode("Pad", 2, 1), 13, {M23(), V<int64_t>({1, 1}, {2})}).ok());
  EXPECT_FALSE(RunOp(MakeNode("Pad", 2, 1), 13, {M23(), V<int64_t>({0, -5, 0, 0}, {4})}).ok());
  EXPECT_FALSE(RunOp(MakeNode("Pad", 2, 1, {StringAttr("mode", "edge")}), 13,
                     {V<float>({}, {0, 2}), V<int64_t>({1, 0, 1, 0}, {4})}).ok());
}

TEST(ShapeOpsPad, HostileSizesFailCleanly) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  auto huge = RunOp(MakeNode("Pad", 2, 1), 13, {M23(), V<int64_t>({0, 0, int64_t{1} << 45, 0}, {4})});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kOutOfMemory) << huge.status().ToString();
  EXPECT_FALSE(RunOp(MakeNode("Pad", 2, 1), 13, {M23(), V<int64_t>({kMin, 0, 0, 0}, {4})}).ok());
  auto crop = RunOp(MakeNode("CenterCropPad", 2, 1), 18, {M23(), V<int64_t>({int64_t{1} << 40, 3}, {2})});
  ASSERT_FALSE(crop.ok());
  EXPECT_EQ(crop.status().code(), StatusCode::kOutOfMemory);
}

// ---- Shape / Size / Identity / Dropout -----------------------------------------------------------------

TEST(ShapeOpsShape, StartEndAndPropagation) {
  auto r = RunOp(MakeNode("Shape", 1, 1, {IntAttr("start", -2)}), 15, {V<float>(Iota<float>(24), {2, 3, 4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int64_t>(Out(r), {2}, {3, 4});
  auto e = RunOp(MakeNode("Shape", 1, 1, {IntAttr("start", 5), IntAttr("end", 1)}), 15, {V<float>({1}, {1})});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(Out(e).dims(), (std::vector<int64_t>{0}));

  // The rule computes the value from a static shape without the data.
  Node node = MakeNode("Shape", 1, 1, {IntAttr("end", -1)});
  TypeInfo x = TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({5, 6, 7}));
  InferenceContext ictx{node, 21, {&x}, {nullptr}, {}, {}, nullptr};
  ictx.output_types.resize(1);
  ictx.output_values.resize(1);
  ASSERT_TRUE(OpRegistry::Global().Resolve("", "Shape", 21).value()->infer(ictx).ok());
  ASSERT_TRUE(ictx.output_values[0].has_value());
  ExpectTensorNear<int64_t>(*ictx.output_values[0], {2}, {5, 6});
}

TEST(ShapeOpsSize, CountsElements) {
  auto r = RunOp(MakeNode("Size", 1, 1), 21, {V<float>(Iota<float>(24), {2, 3, 4})});
  ASSERT_TRUE(r.ok());
  ExpectTensorNear<int64_t>(Out(r), {}, {24});
}

TEST(ShapeOpsIdentity, TensorsAndSequences) {
  auto r = RunOp(MakeNode("Identity", 1, 1), 21, {V<std::string>({"a", "b"}, {2})});
  ASSERT_TRUE(r.ok());
  ExpectTensorNear<std::string>(Out(r), {2}, {"a", "b"});
  Value seq = Value::Sequence({V<float>({1}, {1}), V<float>({2, 3}, {2})}, TypeInfo::Tensor(DataType::kFloat));
  auto s = RunOp(MakeNode("Identity", 1, 1), 16, {seq});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(s.value().outputs[0].is_sequence());
  ASSERT_EQ(s.value().outputs[0].elements().size(), 2u);
  ExpectTensorNear<float>(s.value().outputs[0].elements()[1].tensor(), {2}, {2, 3});
  auto n = RunOp(MakeNode("Identity", 1, 1), 16, {Value::None(TypeInfo::Tensor(DataType::kFloat))});
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(n.value().outputs[0].is_none());
}

TEST(ShapeOpsDropout, InferenceIsIdentityWithTrueMask) {
  auto r = RunOp(MakeNode("Dropout", 2, 2), 13, {V<float>({1, 2, 3}, {3}), V<float>({0.5f}, {})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(Out(r, 0), {3}, {1, 2, 3});
  ExpectTensorNear<bool>(Out(r, 1), {3}, {true, true, true});
  auto zero = RunOp(MakeNode("Dropout", 3, 1), 13, {V<float>({1, 2}, {2}), V<float>({0.0f}, {}), V<bool>({true}, {})});
  ASSERT_TRUE(zero.ok());
  ExpectTensorNear<float>(Out(zero), {2}, {1, 2});
  auto training = RunOp(MakeNode("Dropout", 3, 1), 13, {V<float>({1, 2}, {2}), V<float>({0.3f}, {}), V<bool>({true}, {})});
  ASSERT_FALSE(training.ok());
  EXPECT_EQ(training.status().code(), StatusCode::kNotImplemented);
}

// ---- Trilu / DepthToSpace / SpaceToDepth / ReverseSequence / CenterCropPad ------------------------------

TEST(ShapeOpsTrilu, UpperAndLowerWithK) {
  // np.triu(np.arange(12).reshape(3,4), 1) and np.tril(..., -1)
  auto u = RunOp(MakeNode("Trilu", 2, 1), 14, {V<int64_t>(Iota<int64_t>(12), {3, 4}), V<int64_t>({1}, {})});
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  ExpectTensorNear<int64_t>(Out(u), {3, 4}, {0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 11});
  auto l = RunOp(MakeNode("Trilu", 2, 1, {IntAttr("upper", 0)}), 14,
                 {V<int64_t>(Iota<int64_t>(12), {3, 4}), V<int64_t>({-1}, {})});
  ASSERT_TRUE(l.ok());
  ExpectTensorNear<int64_t>(Out(l), {3, 4}, {0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0});
}

TEST(ShapeOpsDepthToSpace, DcrAndCrd) {
  // d = np.arange(16).reshape(1,8,1,2); DCR: d.reshape(1,2,2,2,1,2).transpose(0,3,4,1,5,2).reshape(1,2,2,4)
  auto dcr = RunOp(MakeNode("DepthToSpace", 1, 1, {IntAttr("blocksize", 2)}), 13, {V<float>(Iota<float>(16), {1, 8, 1, 2})});
  ASSERT_TRUE(dcr.ok()) << dcr.status().ToString();
  ExpectTensorNear<float>(Out(dcr), {1, 2, 2, 4}, {0, 4, 1, 5, 8, 12, 9, 13, 2, 6, 3, 7, 10, 14, 11, 15});
  // CRD: d.reshape(1,2,2,2,1,2).transpose(0,1,4,2,5,3).reshape(1,2,2,4)
  auto crd = RunOp(MakeNode("DepthToSpace", 1, 1, {IntAttr("blocksize", 2), StringAttr("mode", "CRD")}), 13,
                   {V<float>(Iota<float>(16), {1, 8, 1, 2})});
  ASSERT_TRUE(crd.ok());
  ExpectTensorNear<float>(Out(crd), {1, 2, 2, 4}, {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15});
  EXPECT_FALSE(RunOp(MakeNode("DepthToSpace", 1, 1, {IntAttr("blocksize", 3)}), 13,
                     {V<float>(Iota<float>(16), {1, 8, 1, 2})}).ok());
}

TEST(ShapeOpsSpaceToDepth, Dcr) {
  // s = np.arange(16).reshape(1,1,4,4); s.reshape(1,1,2,2,2,2).transpose(0,3,5,1,2,4).reshape(1,4,2,2)
  auto r = RunOp(MakeNode("SpaceToDepth", 1, 1, {IntAttr("blocksize", 2)}), 13, {V<float>(Iota<float>(16), {1, 1, 4, 4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(Out(r), {1, 4, 2, 2}, {0, 2, 8, 10, 1, 3, 9, 11, 4, 6, 12, 14, 5, 7, 13, 15});
}

TEST(ShapeOpsReverseSequence, SpecExample) {
  // Example 2 of the ONNX ReverseSequence specification (time_axis=1, batch_axis=0).
  auto r = RunOp(MakeNode("ReverseSequence", 2, 1, {IntAttr("time_axis", 1), IntAttr("batch_axis", 0)}), 10,
                 {V<float>(Iota<float>(16), {4, 4}), V<int64_t>({1, 2, 3, 4}, {4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(Out(r), {4, 4}, {0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12});
  EXPECT_FALSE(RunOp(MakeNode("ReverseSequence", 2, 1, {IntAttr("time_axis", 1), IntAttr("batch_axis", 0)}), 10,
                     {V<float>(Iota<float>(16), {4, 4}), V<int64_t>({1, 2, 3, 5}, {4})}).ok());
}

TEST(ShapeOpsCenterCropPad, CropsAndPads) {
  // onnx.reference CenterCropPad on np.arange(1,11).reshape(5,2) with shape [3,4].
  auto r = RunOp(MakeNode("CenterCropPad", 2, 1), 18, {V<float>(Iota<float>(10, 1.0f), {5, 2}), V<int64_t>({3, 4}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(Out(r), {3, 4}, {0, 3, 4, 0, 0, 5, 6, 0, 0, 7, 8, 0});
}

// ---- Propagation through a shape computation ------------------------------------------------------------

TEST(ShapeOpsPropagation, ConcatOfKnownValues) {
  Node node = MakeNode("Concat", 2, 1, {IntAttr("axis", 0)});
  TypeInfo t = TypeInfo::Tensor(DataType::kInt64, ShapeFromDims({1}));
  Tensor a = Tensor::FromVector<int64_t>({3}, {1}), b = Tensor::FromVector<int64_t>({-1}, {1});
  InferenceContext ictx{node, 13, {&t, &t}, {&a, &b}, {}, {}, nullptr};
  ictx.output_types.resize(1);
  ictx.output_values.resize(1);
  ASSERT_TRUE(OpRegistry::Global().Resolve("", "Concat", 13).value()->infer(ictx).ok());
  ASSERT_TRUE(ictx.output_values[0].has_value());
  ExpectTensorNear<int64_t>(*ictx.output_values[0], {2}, {3, -1});
}

Node GraphNode(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
               std::vector<Attribute> attributes = {}) {
  Node n;
  n.name = out[0];
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attributes = std::move(attributes);
  return n;
}

// Shape -> Gather -> Unsqueeze -> Concat -> Reshape gets a static shape in the checker.
TEST(ShapeOpsPropagation, CheckerFoldsShapeChain) {
  Graph g;
  g.name = "g";
  g.inputs.push_back({"x", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({2, 3, 4, 5})), "", {}});
  g.initializers.push_back({"zero", Tensor::Scalar<int64_t>(0), ""});
  g.initializers.push_back({"axes", Tensor::FromVector<int64_t>({0}, {1}), ""});
  g.initializers.push_back({"minus_one", Tensor::FromVector<int64_t>({-1}, {1}), ""});
  g.nodes.push_back(GraphNode("Shape", {"x"}, {"s"}));
  g.nodes.push_back(GraphNode("Gather", {"s", "zero"}, {"batch"}));
  g.nodes.push_back(GraphNode("Unsqueeze", {"batch", "axes"}, {"batch1"}));
  g.nodes.push_back(GraphNode("Concat", {"batch1", "minus_one"}, {"target"}, {IntAttr("axis", 0)}));
  g.nodes.push_back(GraphNode("Reshape", {"x", "target"}, {"y"}));
  g.outputs.push_back({"y", TypeInfo::Tensor(DataType::kFloat), "", {}});
  auto checked = CheckGraph(g, {{"", 21}}, OpRegistry::Global(), nullptr, CheckOptions{});
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  const TypeInfo& y = checked.value().types.at("y");
  ASSERT_TRUE(y.shape.has_value());
  EXPECT_EQ(ShapeToString(*y.shape), "[2,60]");
}

// [batch, -1] against a symbolic batch: the -1 is still known.
TEST(ShapeOpsPropagation, ReshapeKeepsSymbolicBatch) {
  Graph g;
  g.name = "g";
  g.inputs.push_back({"x", TypeInfo::Tensor(DataType::kFloat, Shape{Dim::Symbol("N"), Dim::Known(3), Dim::Known(4)}), "", {}});
  g.initializers.push_back({"target", Tensor::FromVector<int64_t>({0, -1}, {2}), ""});
  g.nodes.push_back(GraphNode("Reshape", {"x", "target"}, {"y"}));
  g.outputs.push_back({"y", TypeInfo::Tensor(DataType::kFloat), "", {}});
  auto checked = CheckGraph(g, {{"", 21}}, OpRegistry::Global(), nullptr, CheckOptions{});
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_EQ(ShapeToString(*checked.value().types.at("y").shape), "[N,12]");
}

}  // namespace
}  // namespace nee::testing
