// TensorScatter (opset 24). Expected values were computed with onnx.reference
// by tensor_scatter_expected_gen.py; inputs are the generator's patterns:
// past_cache = arange(n), update = 100 + arange(m).
#include <numeric>
#include <string>

#include "op_test_util.h"

namespace nee::testing {
namespace {

template <typename T>
Value Arange(std::vector<int64_t> dims, T first) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<T>(first + static_cast<T>(i));
  return Value(Tensor::FromVector<T>(v, std::move(dims)));
}

Value Indices(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Value(Tensor::FromVector<int64_t>(v, {n}));
}

Node ScatterNode(size_t num_inputs, std::vector<Attribute> attrs = {}) {
  return MakeNode("TensorScatter", num_inputs, 1, std::move(attrs));
}

void ExpectError(const Result<OpRun>& r, const std::string& fragment) {
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
}

TEST(TensorScatter, Linear4D) {
  auto r = RunOp(ScatterNode(3), 24, {Arange<float>({2, 2, 4, 3}, 0), Arange<float>({2, 2, 2, 3}, 100), Indices({1, 2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 2, 4, 3},
                          {0,   1,   2,   100, 101, 102, 103, 104, 105, 9,   10,  11,  12,  13,  14,  106,
                           107, 108, 109, 110, 111, 21,  22,  23,  24,  25,  26,  27,  28,  29,  112, 113,
                           114, 115, 116, 117, 36,  37,  38,  39,  40,  41,  118, 119, 120, 121, 122, 123});
}

TEST(TensorScatter, CircularWrapsAndNegativeIndex) {
  auto r = RunOp(ScatterNode(3, {StringAttr("mode", "circular")}), 24,
                 {Arange<float>({2, 1, 4, 2}, 0), Arange<float>({2, 1, 3, 2}, 100), Indices({3, -2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 1, 4, 2},
                          {102, 103, 104, 105, 4, 5, 100, 101, 110, 111, 10, 11, 106, 107, 108, 109});
}

TEST(TensorScatter, WithoutWriteIndicesWritesAtZero) {
  auto r = RunOp(ScatterNode(2), 24, {Arange<float>({2, 3, 2}, 0), Arange<float>({2, 1, 2}, 100)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 2}, {100, 101, 2, 3, 4, 5, 102, 103, 8, 9, 10, 11});
}

TEST(TensorScatter, LastAxis) {
  auto r = RunOp(ScatterNode(3, {IntAttr("axis", -1)}), 24,
                 {Arange<float>({2, 2, 5}, 0), Arange<float>({2, 2, 2}, 100), Indices({3, 0})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 2, 5},
                          {0, 1, 2, 100, 101, 5, 6, 7, 102, 103, 104, 105, 12, 13, 14, 106, 107, 17, 18, 19});
}

TEST(TensorScatter, Axis1Int32) {
  auto r = RunOp(ScatterNode(3, {IntAttr("axis", 1)}), 24,
                 {Arange<int32_t>({2, 3, 2, 2}, 0), Arange<int32_t>({2, 2, 2, 2}, 100), Indices({1, 0})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int32_t>(r->outputs[0].tensor(), {2, 3, 2, 2},
                            {0,   1,   2,   3,   100, 101, 102, 103, 104, 105, 106, 107,
                             108, 109, 110, 111, 112, 113, 114, 115, 20,  21,  22,  23});
}

TEST(TensorScatter, StringsCircular) {
  Value past(Tensor::FromVector<std::string>({"a", "b", "c", "d", "e", "f"}, {2, 3}));
  Value update(Tensor::FromVector<std::string>({"X", "Y"}, {2, 1}));
  auto r = RunOp(ScatterNode(3, {StringAttr("mode", "circular"), IntAttr("axis", -1)}), 24,
                 {past, update, Indices({2, 5})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Tensor& out = r->outputs[0].tensor();
  ASSERT_EQ(out.dims(), (std::vector<int64_t>{2, 3}));
  const std::vector<std::string> expected = {"a", "b", "X", "d", "e", "Y"};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(out.data<std::string>()[i], expected[i]) << i;
}

TEST(TensorScatter, PastCacheIsNotModified) {
  Value past = Arange<float>({1, 3, 2}, 0);
  auto r = RunOp(ScatterNode(3), 24, {past, Arange<float>({1, 1, 2}, 100), Indices({1})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(past.tensor(), {1, 3, 2}, {0, 1, 2, 3, 4, 5});
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 3, 2}, {0, 1, 100, 101, 4, 5});
}

// Hostile write indices never write outside the cache: linear mode rejects them.
TEST(TensorScatter, LinearIndexOutOfRange) {
  ExpectError(RunOp(ScatterNode(3), 24, {Arange<float>({2, 4, 2}, 0), Arange<float>({2, 2, 2}, 100), Indices({0, 3})}),
              "write_indices[1] = 3");
  ExpectError(RunOp(ScatterNode(3), 24, {Arange<float>({2, 4, 2}, 0), Arange<float>({2, 1, 2}, 100), Indices({-1, 0})}),
              "write_indices[0] = -1");
  ExpectError(RunOp(ScatterNode(3), 24,
                    {Arange<float>({1, 4, 2}, 0), Arange<float>({1, 1, 2}, 100), Indices({INT64_MAX})}),
              "writes outside max_sequence_length 4");
}

TEST(TensorScatter, CircularHugeIndicesWrap) {
  // INT64_MIN % 4 == 0 and INT64_MAX % 4 == 3 (Python's modulo, as the reference).
  auto r = RunOp(ScatterNode(3, {StringAttr("mode", "circular")}), 24,
                 {Arange<float>({2, 4, 1}, 0), Arange<float>({2, 2, 1}, 100), Indices({INT64_MIN, INT64_MAX})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 4, 1}, {100, 101, 2, 3, 103, 5, 6, 102});
}

TEST(TensorScatter, ShapeErrors) {
  // axis 0 is the batch.
  ExpectError(RunOp(ScatterNode(2, {IntAttr("axis", 0)}), 24, {Arange<float>({2, 4}, 0), Arange<float>({2, 4}, 100)}),
              "cannot be 0");
  // rank 2 with the default axis -2 is also the batch.
  ExpectError(RunOp(ScatterNode(2), 24, {Arange<float>({2, 4}, 0), Arange<float>({2, 4}, 100)}), "cannot be 0");
  ExpectError(RunOp(ScatterNode(2), 24, {Arange<float>({2, 4, 2}, 0), Arange<float>({2, 5, 2}, 100)}),
              "exceeds the cache's max_sequence_length 4");
  ExpectError(RunOp(ScatterNode(2), 24, {Arange<float>({2, 4, 2}, 0), Arange<float>({2, 1, 3}, 100)}),
              "in dim 2");
  ExpectError(RunOp(ScatterNode(3), 24, {Arange<float>({2, 4, 2}, 0), Arange<float>({2, 1, 2}, 100), Indices({0})}),
              "write_indices must have shape");
  ExpectError(RunOp(ScatterNode(2, {StringAttr("mode", "ring")}), 24,
                    {Arange<float>({2, 4, 2}, 0), Arange<float>({2, 1, 2}, 100)}),
              "mode must be 'linear' or 'circular'");
  ExpectError(RunOp(ScatterNode(2), 24, {Arange<float>({2, 4, 2}, 0), Arange<double>({2, 1, 2}, 100)}),
              "element type");
}

}  // namespace
}  // namespace nee::testing
