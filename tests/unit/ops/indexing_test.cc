// Tests for ops/indexing.cc and selection.cc. Expected values were computed with numpy 2.4
// (/work/main/.venv/bin/python); each test names the expression used.
#include <gtest/gtest.h>

#include <limits>

#include "op_test_util.h"

namespace nee::testing {
namespace {

template <typename T>
Value V(std::vector<T> values, std::vector<int64_t> dims) {
  return Value(Tensor::FromVector<T>(values, std::move(dims)));
}

template <typename T>
std::vector<T> Iota(int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<T>(i);
  return v;
}

const Tensor& Out(const Result<OpRun>& r, size_t i = 0) { return r.value().outputs[i].tensor(); }

Value Y45() { return V<int64_t>(Iota<int64_t>(20), {4, 5}); }  // np.arange(20).reshape(4,5)

// ---- Slice -------------------------------------------------------------------------

TEST(IndexingSlice, NegativeSteps) {
  // y[3:0:-2, ::-1]
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  auto r = RunOp(MakeNode("Slice", 5, 1), 13,
                 {Y45(), V<int64_t>({3, -1}, {2}), V<int64_t>({0, kMin}, {2}), V<int64_t>({0, 1}, {2}),
                  V<int64_t>({-2, -1}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int64_t>(Out(r), {2, 5}, {19, 18, 17, 16, 15, 9, 8, 7, 6, 5});
}

TEST(IndexingSlice, ClampingAndNegativeAxes) {
  // y[-100:100, 1:-1]
  auto r = RunOp(MakeNode("Slice", 4, 1), 13,
                 {Y45(), V<int64_t>({-100, 1}, {2}), V<int64_t>({100, -1}, {2}), V<int64_t>({-2, -1}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int64_t>(Out(r), {4, 3}, {1, 2, 3, 6, 7, 8, 11, 12, 13, 16, 17, 18});
  // y[:, 10:-10:-3]
  auto s = RunOp(MakeNode("Slice", 5, 1), 13,
                 {Y45(), V<int64_t>({10}, {1}), V<int64_t>({-10}, {1}), V<int64_t>({1}, {1}), V<int64_t>({-3}, {1})});
  ASSERT_TRUE(s.ok());
  ExpectTensorNear<int64_t>(Out(s), {4, 2}, {4, 1, 9, 6, 14, 11, 19, 16});
  // y[5:9] is empty.
  auto e = RunOp(MakeNode("Slice", 3, 1), 13, {Y45(), V<int64_t>({5}, {1}), V<int64_t>({9}, {1})});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(Out(e).dims(), (std::vector<int64_t>{0, 5}));
}

TEST(IndexingSlice, Opset1AttributesAndErrors) {
  auto r = RunOp(MakeNode("Slice", 1, 1, {IntsAttr("starts", {1}), IntsAttr("ends", {3}), IntsAttr("axes", {1})}), 1,
                 {Y45()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int64_t>(Out(r), {4, 2}, {1, 2, 6, 7, 11, 12, 16, 17});
  EXPECT_FALSE(RunOp(MakeNode("Slice", 5, 1), 13,
                     {Y45(), V<int64_t>({0}, {1}), V<int64_t>({2}, {1}), V<int64_t>({0}, {1}), V<int64_t>({0}, {1})})
                   .ok());
  EXPECT_FALSE(RunOp(MakeNode("Slice", 4, 1), 13,
                     {Y45(), V<int64_t>({0}, {1}), V<int64_t>({2}, {1}), V<int64_t>({2}, {1})}).ok());
}

TEST(IndexingSlice, ExtremeStepsDoNotOverflow) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  // y[::kMax] -> first row only; y[::kMin] -> last row only (numpy: y[::-2**63])
  auto up = RunOp(MakeNode("Slice", 5, 1), 13,
                  {Y45(), V<int64_t>({0}, {1}), V<int64_t>({kMax}, {1}), V<int64_t>({0}, {1}), V<int64_t>({kMax}, {1})});
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  ExpectTensorNear<int64_t>(Out(up), {1, 5}, {0, 1, 2, 3, 4});
  auto down = RunOp(MakeNode("Slice", 5, 1), 13,
                    {Y45(), V<int64_t>({kMax}, {1}), V<int64_t>({kMin}, {1}), V<int64_t>({0}, {1}), V<int64_t>({kMin}, {1})});
  ASSERT_TRUE(down.ok()) << down.status().ToString();
  ExpectTensorNear<int64_t>(Out(down), {1, 5}, {15, 16, 17, 18, 19});
}

// ---- Gather family ---------------------------------------------------------------------

TEST(IndexingGather, NegativeIndicesAxis1) {
  // np.take(y, [[-1,0],[2,2]], axis=1)
  auto r = RunOp(MakeNode("Gather", 2, 1, {IntAttr("axis", 1)}), 13, {Y45(), V<int64_t>({-1, 0, 2, 2}, {2, 2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int64_t>(Out(r), {4, 2, 2}, {4, 0, 2, 2, 9, 5, 7, 7, 14, 10, 12, 12, 19, 15, 17, 17});
}

TEST(IndexingGather, OutOfRangeNamesInput) {
  auto r = RunOp(MakeNode("Gather", 2, 1), 13, {Y45(), V<int32_t>({4}, {1})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node 'test' (Gather): input 1"), std::string::npos) << r.status().message();
  EXPECT_FALSE(RunOp(MakeNode("Gather", 2, 1), 13, {Y45(), V<int32_t>({-5}, {1})}).ok());
}

TEST(IndexingGather, StringsScalarIndexAndPropagation) {
  auto r = RunOp(MakeNode("Gather", 2, 1), 13, {V<std::string>({"a", "b", "c"}, {3}), V<int64_t>({-2}, {})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<std::string>(Out(r), {}, {"b"});
  // Shape -> Gather: the rule yields the value.
  Node node = MakeNode("Gather", 2, 1);
  TypeInfo t = TypeInfo::Tensor(DataType::kInt64, ShapeFromDims({3}));
  TypeInfo it = TypeInfo::Tensor(DataType::kInt64, ShapeFromDims({}));
  Tensor shape = Tensor::FromVector<int64_t>({8, 3, 224}, {3});
  Tensor index = Tensor::Scalar<int64_t>(0);
  InferenceContext ictx{node, 13, {&t, &it}, {&shape, &index}, {}, {}, nullptr};
  ictx.output_types.resize(1);
  ictx.output_values.resize(1);
  ASSERT_TRUE(OpRegistry::Global().Resolve("", "Gather", 13).value()->infer(ictx).ok());
  ASSERT_TRUE(ictx.output_values[0].has_value());
  ExpectTensorNear<int64_t>(*ictx.output_values[0], {}, {8});
}

TEST(IndexingGatherElements, Axis1AndErrors) {
  // np.take_along_axis([[1,2],[3,4]], [[0,0],[1,0]], axis=1)
  auto r = RunOp(MakeNode("GatherElements", 2, 1, {IntAttr("axis", 1)}), 13,
                 {V<float>({1, 2, 3, 4}, {2, 2}), V<int64_t>({0, 0, 1, 0}, {2, 2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(Out(r), {2, 2}, {1, 1, 4, 3});
  auto neg = RunOp(MakeNode("GatherElements", 2, 1, {IntAttr("axis", 1)}), 13,
                   {V<float>({1, 2, 3, 4}, {2, 2}), V<int64_t>({-1, -2, 0, -1}, {2, 2})});
  ASSERT_TRUE(neg.ok());
  ExpectTensorNear<float>(Out(neg), {2, 2}, {2, 1, 3, 4});
  EXPECT_FALSE(RunOp(MakeNode("GatherElements", 2, 1, {IntAttr("axis", 1)}), 13,
                     {V<float>({1, 2, 3, 4}, {2, 2}), V<int64_t>({2, 0, 0, 0}, {2, 2})}).ok());
  EXPECT_FALSE(RunOp(MakeNode("GatherElements", 2, 1, {IntAttr("axis", 1)}), 13,
                     {V<float>({1, 2, 3, 4}, {2, 2}), V<int64_t>({0, 0, 0, 0, 0, 0}, {3, 2})}).ok());
}

TEST(IndexingGatherND, BatchDims) {
  // data = np.arange(8).reshape(2,2,2); idx = [[1],[0]]; out[b] = data[b][idx[b]]
  auto r = RunOp(MakeNode("GatherND", 2, 1, {IntAttr("batch_dims", 1)}), 13,
                 {V<int64_t>(Iota<int64_t>(8), {2, 2, 2}), V<int64_t>({1, 0}, {2, 1})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int64_t>(Out(r), {2, 2}, {2, 3, 4, 5});
  // Without batch dims, full index tuples: data[[0,1,1]], data[[1,0,-1]] = 3, 5
  auto t = RunOp(MakeNode("GatherND", 2, 1), 13,
                 {V<int64_t>(Iota<int64_t>(8), {2, 2, 2}), V<int64_t>({0, 1, 1, 1, 0, -1}, {2, 3})});
  ASSERT_TRUE(t.ok());
  ExpectTensorNear<int64_t>(Out(t), {2}, {3, 5});
  EXPECT_FALSE(RunOp(MakeNode("GatherND", 2, 1), 13,
                     {V<int64_t>(Iota<int64_t>(8), {2, 2, 2}), V<int64_t>({0, 2}, {1, 2})}).ok());
}

// ---- Scatter family -------------------------------------------------------------------------

Value Ones23() { return V<float>({1, 1, 1, 1, 1, 1}, {2, 3}); }
Value Idx() { return V<int64_t>({1, 1, 0, 2}, {2, 2}); }
Value Upd() { return V<float>({2, 3, 4, 5}, {2, 2}); }

TEST(IndexingScatterElements, Reductions) {
  // o = np.ones((2,3)); for each (i,j): o[i, idx[i,j]] = f(o[i, idx[i,j]], upd[i,j])
  struct Case {
    const char* reduction;
    std::vector<float> expected;
  } cases[] = {{"none", {1, 3, 1, 4, 1, 5}},
               {"add", {1, 6, 1, 5, 1, 6}},
               {"mul", {1, 6, 1, 4, 1, 5}},
               {"max", {1, 3, 1, 4, 1, 5}},
               {"min", {1, 1, 1, 1, 1, 1}}};
  for (const Case& c : cases) {
    auto r = RunOp(MakeNode("ScatterElements", 3, 1, {IntAttr("axis", 1), StringAttr("reduction", c.reduction)}), 18,
                   {Ones23(), Idx(), Upd()});
    ASSERT_TRUE(r.ok()) << c.reduction << ": " << r.status().ToString();
    ExpectTensorNear<float>(Out(r), {2, 3}, c.expected);
  }
}

TEST(IndexingScatterElements, ErrorsAndDeprecatedScatter) {
  EXPECT_FALSE(RunOp(MakeNode("ScatterElements", 3, 1, {IntAttr("axis", 1)}), 13,
                     {Ones23(), V<int64_t>({3, 0, 0, 0}, {2, 2}), Upd()}).ok());
  EXPECT_FALSE(RunOp(MakeNode("ScatterElements", 3, 1, {IntAttr("axis", 1)}), 13,
                     {Ones23(), Idx(), V<float>({1, 2}, {1, 2})}).ok());
  auto s = RunOp(MakeNode("Scatter", 3, 1, {IntAttr("axis", 1)}), 9, {Ones23(), Idx(), Upd()});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ExpectTensorNear<float>(Out(s), {2, 3}, {1, 3, 1, 4, 1, 5});
}

TEST(IndexingScatterND, AddWithDuplicates) {
  // o = np.arange(8).reshape(4,2); for k: o[ind[k]] += up[k], ind = [[2],[0],[2]]
  auto r = RunOp(MakeNode("ScatterND", 3, 1, {StringAttr("reduction", "add")}), 16,
                 {V<float>(Iota<float>(8), {4, 2}), V<int64_t>({2, 0, 2}, {3, 1}),
                  V<float>({10, 20, 30, 40, 50, 60}, {3, 2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(Out(r), {4, 2}, {30, 41, 2, 3, 64, 85, 6, 7});
  auto none = RunOp(MakeNode("ScatterND", 3, 1), 13,
                    {V<std::string>({"a", "b", "c"}, {3}), V<int64_t>({-1}, {1, 1}), V<std::string>({"z"}, {1})});
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  ExpectTensorNear<std::string>(Out(none), {3}, {"a", "b", "z"});
  EXPECT_FALSE(RunOp(MakeNode("ScatterND", 3, 1), 13,
                     {V<float>(Iota<float>(8), {4, 2}), V<int64_t>({4}, {1, 1}), V<float>({1, 2}, {1, 2})}).ok());
}

// ---- TopK / ArgMax / ArgMin --------------------------------------------------------------------

TEST(IndexingTopK, TiesPreferLowerIndex) {
  // idx = np.argsort(-x, axis=1, kind='stable')[:, :3], x = [[3,1,3,2],[5,5,0,5]]
  auto r = RunOp(MakeNode("TopK", 2, 2), 11, {V<float>({3, 1, 3, 2, 5, 5, 0, 5}, {2, 4}), V<int64_t>({3}, {1})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(Out(r, 0), {2, 3}, {3, 3, 2, 5, 5, 5});
  ExpectTensorNear<int64_t>(Out(r, 1), {2, 3}, {0, 2, 3, 0, 1, 3});
  // Smallest: np.argsort(x, axis=1, kind='stable')[:, :2]
  auto s = RunOp(MakeNode("TopK", 2, 2, {IntAttr("largest", 0)}), 11,
                 {V<float>({3, 1, 3, 2, 5, 5, 0, 5}, {2, 4}), V<int64_t>({2}, {1})});
  ASSERT_TRUE(s.ok());
  ExpectTensorNear<float>(Out(s, 0), {2, 2}, {1, 2, 0, 5});
  ExpectTensorNear<int64_t>(Out(s, 1), {2, 2}, {1, 3, 2, 0});
  EXPECT_FALSE(RunOp(MakeNode("TopK", 2, 2), 11, {V<float>({1, 2}, {2}), V<int64_t>({3}, {1})}).ok());
}

TEST(IndexingArg, MaxMinSelectLast) {
  // x = [[2,7,7],[9,1,9]]: np.argmax(x, 1) = [1,0]; last index of the max = [2,2]; np.argmin(x, 0) = [0,1,0]
  Value x = V<float>({2, 7, 7, 9, 1, 9}, {2, 3});
  auto a = RunOp(MakeNode("ArgMax", 1, 1, {IntAttr("axis", 1), IntAttr("keepdims", 0)}), 13, {x});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ExpectTensorNear<int64_t>(Out(a), {2}, {1, 0});
  auto l = RunOp(MakeNode("ArgMax", 1, 1, {IntAttr("axis", -1), IntAttr("select_last_index", 1)}), 13, {x});
  ASSERT_TRUE(l.ok());
  ExpectTensorNear<int64_t>(Out(l), {2, 1}, {2, 2});
  auto m = RunOp(MakeNode("ArgMin", 1, 1, {IntAttr("keepdims", 0)}), 13, {x});
  ASSERT_TRUE(m.ok());
  ExpectTensorNear<int64_t>(Out(m), {3}, {0, 1, 0});
  EXPECT_FALSE(RunOp(MakeNode("ArgMax", 1, 1, {IntAttr("axis", 2)}), 13, {x}).ok());
}

// ---- CumSum / NonZero / OneHot / Compress / Unique ------------------------------------------------

TEST(IndexingCumSum, ExclusiveReverse) {
  Value x = V<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  // np.cumsum(x, axis=1)
  auto r = RunOp(MakeNode("CumSum", 2, 1), 14, {x, V<int32_t>({1}, {})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<double>(Out(r), {2, 3}, {1, 3, 6, 4, 9, 15});
  // np.cumsum(x[:, ::-1], axis=1)[:, ::-1] - x
  auto e = RunOp(MakeNode("CumSum", 2, 1, {IntAttr("exclusive", 1), IntAttr("reverse", 1)}), 14,
                 {x, V<int64_t>({-1}, {})});
  ASSERT_TRUE(e.ok());
  ExpectTensorNear<double>(Out(e), {2, 3}, {5, 3, 0, 11, 6, 0});
  EXPECT_FALSE(RunOp(MakeNode("CumSum", 2, 1), 14, {x, V<int64_t>({2}, {})}).ok());
}

TEST(IndexingNonZero, Coordinates) {
  // np.array(np.nonzero([[1,0,2],[0,3,0]]))
  auto r = RunOp(MakeNode("NonZero", 1, 1), 13, {V<int32_t>({1, 0, 2, 0, 3, 0}, {2, 3})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int64_t>(Out(r), {2, 3}, {0, 0, 1, 0, 2, 1});
}

TEST(IndexingOneHot, AxisZeroNegativeAndOutOfRange) {
  // indices [0,-1,5,2], depth 3, axis 0, values [-1, 7]: -1 -> row 2, 5 -> all off.
  auto r = RunOp(MakeNode("OneHot", 3, 1, {IntAttr("axis", 0)}), 11,
                 {V<int64_t>({0, -1, 5, 2}, {4}), V<float>({3}, {}), V<float>({-1, 7}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(Out(r), {3, 4}, {7, -1, -1, -1, -1, -1, -1, -1, -1, 7, -1, 7});
}

TEST(IndexingCompress, AxisAndFlattened) {
  // np.compress([False,True,True], np.arange(6).reshape(3,2), axis=0)
  auto r = RunOp(MakeNode("Compress", 2, 1, {IntAttr("axis", 0)}), 11,
                 {V<int64_t>(Iota<int64_t>(6), {3, 2}), V<bool>({false, true, true}, {3})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int64_t>(Out(r), {2, 2}, {2, 3, 4, 5});
  // np.compress([True,False,True,False,True], np.arange(6).reshape(3,2))
  auto f = RunOp(MakeNode("Compress", 2, 1), 11,
                 {V<int64_t>(Iota<int64_t>(6), {3, 2}), V<bool>({true, false, true, false, true}, {5})});
  ASSERT_TRUE(f.ok());
  ExpectTensorNear<int64_t>(Out(f), {3}, {0, 2, 4});
  EXPECT_FALSE(RunOp(MakeNode("Compress", 2, 1, {IntAttr("axis", 0)}), 11,
                     {V<int64_t>(Iota<int64_t>(6), {3, 2}), V<bool>({false, false, false, true}, {4})}).ok());
}

TEST(IndexingUnique, SortedUnsortedAndAxis) {
  Value x = V<int64_t>({2, 1, 1, 3, 4, 3}, {6});
  // np.unique(x, return_index=True, return_inverse=True, return_counts=True)
  auto s = RunOp(MakeNode("Unique", 1, 4), 11, {x});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ExpectTensorNear<int64_t>(Out(s, 0), {4}, {1, 2, 3, 4});
  ExpectTensorNear<int64_t>(Out(s, 1), {4}, {1, 0, 3, 4});
  ExpectTensorNear<int64_t>(Out(s, 2), {6}, {1, 0, 0, 2, 3, 2});
  ExpectTensorNear<int64_t>(Out(s, 3), {4}, {2, 1, 2, 1});
  // Example 1 of the ONNX Unique specification (sorted=0).
  auto u = RunOp(MakeNode("Unique", 1, 4, {IntAttr("sorted", 0)}), 11, {x});
  ASSERT_TRUE(u.ok());
  ExpectTensorNear<int64_t>(Out(u, 0), {4}, {2, 1, 3, 4});
  ExpectTensorNear<int64_t>(Out(u, 1), {4}, {0, 1, 3, 4});
  ExpectTensorNear<int64_t>(Out(u, 2), {6}, {0, 1, 1, 2, 3, 2});
  ExpectTensorNear<int64_t>(Out(u, 3), {4}, {1, 2, 2, 1});
  // np.unique([[1,0,0],[1,0,0],[2,3,4]], axis=0, return_index=..., return_inverse=..., return_counts=...)
  auto a = RunOp(MakeNode("Unique", 1, 4, {IntAttr("axis", 0)}), 11, {V<int64_t>({1, 0, 0, 1, 0, 0, 2, 3, 4}, {3, 3})});
  ASSERT_TRUE(a.ok());
  ExpectTensorNear<int64_t>(Out(a, 0), {2, 3}, {1, 0, 0, 2, 3, 4});
  ExpectTensorNear<int64_t>(Out(a, 1), {2}, {0, 2});
  ExpectTensorNear<int64_t>(Out(a, 2), {3}, {0, 0, 1});
  ExpectTensorNear<int64_t>(Out(a, 3), {2}, {2, 1});
  // Strings sort lexicographically: np.unique(['b','a','b'])
  auto str = RunOp(MakeNode("Unique", 1, 1), 11, {V<std::string>({"b", "a", "b"}, {3})});
  ASSERT_TRUE(str.ok());
  ExpectTensorNear<std::string>(Out(str), {2}, {"a", "b"});
}

}  // namespace
}  // namespace nee::testing
