// The one-hot-matmul-as-gather pass (src/opt/one_hot_matmul.cc): a one-hot
// Cast(Equal(x, 0..K-1)) times a constant W becomes a Gather of W's rows where
// that is exact, stays a MatMul in each bail-out case, and the result is the
// row of W each index selects (zeros for an index outside 0..K-1), as the
// level-0 graph computes it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "opt/pass_manager.h"
#include "opt_test_util.h"

namespace nee {
namespace {
using namespace opt_test;

constexpr int64_t kDepth = 4, kCols = 3;

Tensor Weights() { return Seq({kDepth, kCols}, 7, 13, 6, 5); }

// x [2, 3, 1] (int64) -> Equal with c -> Cast(float) -> MatMul by w.
ModelBuilder OneHotMatMul(Tensor c, Tensor w, int64_t opset = 17) {
  ModelBuilder b(opset);
  b.Input("x", ShapeFromDims({2, 3, 1}), DataType::kInt64)
      .Init("c", std::move(c))
      .Init("w", std::move(w))
      .Op("Equal", {"x", "c"}, {"e"})
      .Op("Cast", {"e"}, {"a"}, {IntAttr("to", 1)})
      .Op("MatMul", {"a", "w"}, {"y"})
      .Output("y");
  return b;
}

Tensor Arange(int64_t k) {
  Tensor t = Tensor::Allocate(DataType::kInt64, {1, 1, k}).value();
  for (int64_t i = 0; i < k; ++i) t.data<int64_t>()[i] = i;
  return t;
}

// In range, below it, at K and above it.
const std::vector<int64_t> kIndices = {0, 3, -1, 4, 2, 1000};

// Row x of w for each index, zeros outside 0..K-1: what a one-hot product is.
std::vector<float> LookedUp(const std::vector<int64_t>& x, const Tensor& w) {
  std::vector<float> out;
  for (int64_t k : x) {
    for (int64_t j = 0; j < kCols; ++j) out.push_back(k >= 0 && k < kDepth ? w.data<float>()[k * kCols + j] : 0.f);
  }
  return out;
}

TEST(OneHotMatMul, BecomesAGatherOfTheWeightRows) {
  ModelBuilder b = OneHotMatMul(Arange(kDepth), Weights());
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Gather", "Clip", "Gather"}));
  const std::vector<NamedValue> inputs = {{"x", Tensor::FromVector<int64_t>(kIndices, {2, 3, 1})}};
  const std::vector<float> want = LookedUp(kIndices, Weights());
  ExpectNear(RunAt(b.model, inputs, 0), {2, 3, kCols}, want);
  ExpectNear(RunAt(b.model, inputs), {2, 3, kCols}, want);
}

TEST(OneHotMatMul, ReadsTheExpandOfAValueWithALastDimOfOne) {
  // jax2tf's form: x = Expand(z, shape) with a symbolic batch, so the Expand's
  // output dims are unknown to inference; the arange on the left of the Equal,
  // int32.
  Shape z_shape = {Dim::Symbol("batch"), Dim::Known(3), Dim::Known(1)};
  Tensor c = Tensor::Allocate(DataType::kInt32, {kDepth}).value();
  for (int64_t i = 0; i < kDepth; ++i) c.data<int32_t>()[i] = static_cast<int32_t>(i);
  ModelBuilder b;
  b.Input("z", z_shape, DataType::kInt32)
      .Init("c", std::move(c))
      .Init("w", Weights())
      .Op("Shape", {"z"}, {"s"})
      .Op("Expand", {"z", "s"}, {"x"})
      .Op("Equal", {"c", "x"}, {"e"})
      .Op("Cast", {"e"}, {"a"}, {IntAttr("to", 1)})
      .Op("MatMul", {"a", "w"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Shape", "Expand", "Gather", "Clip", "Gather"}));
  const std::vector<NamedValue> inputs = {{"z", Tensor::FromVector<int32_t>({2, -7, 3, 0, 4, 1}, {2, 3, 1})}};
  const std::vector<float> want = LookedUp({2, -7, 3, 0, 4, 1}, Weights());
  ExpectNear(RunAt(b.model, inputs, 0), {2, 3, kCols}, want);
  ExpectNear(RunAt(b.model, inputs), {2, 3, kCols}, want);
}

TEST(OneHotMatMul, KeepsTheMatMulWhereTheRewriteWouldNotBeExact) {
  const Ops kept = {"Equal", "Cast", "MatMul"};
  // Not 0..K-1 in order: a permutation.
  EXPECT_EQ(OpsAfter(OneHotMatMul(Tensor::FromVector<int64_t>({0, 2, 1, 3}, {1, 1, 4}), Weights()).model), kept);
  // Not starting at 0.
  EXPECT_EQ(OpsAfter(OneHotMatMul(Tensor::FromVector<int64_t>({1, 2, 3, 4}, {1, 1, 4}), Weights()).model), kept);
  // A non-finite weight: 0 * inf is NaN in the product.
  Tensor w = Weights();
  w.data<float>()[5] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(OpsAfter(OneHotMatMul(Arange(kDepth), w).model), kept);
  // Opset 12: Clip does not take integers.
  EXPECT_EQ(OpsAfter(OneHotMatMul(Arange(kDepth), Weights(), 12).model), kept);
}

TEST(OneHotMatMul, KeepsTheMatMulWhenTheLastAxisOfXVaries) {
  // x [2, 4] against c [4]: an elementwise Equal, not a one-hot.
  ModelBuilder b;
  Tensor c = Tensor::FromVector<int64_t>({0, 1, 2, 3}, {4});
  b.Input("x", ShapeFromDims({2, 4}), DataType::kInt64)
      .Init("c", std::move(c))
      .Init("w", Weights())
      .Op("Equal", {"x", "c"}, {"e"})
      .Op("Cast", {"e"}, {"a"}, {IntAttr("to", 1)})
      .Op("MatMul", {"a", "w"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Equal", "Cast", "MatMul"}));
}

}  // namespace
}  // namespace nee
