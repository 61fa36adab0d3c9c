// The gather-rows-early pass (src/opt/gather_rows_early.cc): a Gather of rows
// moves above the row-wise nodes computing them where that is legal, stays
// in each bail-out case, and the kept rows come out as the unoptimized graph
// (level 0, which computes every row and then gathers) computes them.
#include <gtest/gtest.h>

#include <algorithm>

#include "opt/pass_manager.h"
#include "opt_test_util.h"

namespace nee {
namespace {
using namespace opt_test;

// x [1, 5, 4] -> LayerNormalization -> MatMul by W [4, 6] -> Gather(indices, axis).
ModelBuilder NormMatMulGather(Tensor indices, int64_t axis) {
  ModelBuilder b;
  b.Input("x", ShapeFromDims({1, 5, 4}))
      .Init("scale", Floats({1.5f, -0.5f, 2.f, 1.f}, {4}))
      .Init("bias", Floats({0.1f, 0.2f, -0.3f, 0.f}, {4}))
      .Init("W", Seq({4, 6}, 7, 13, 6, 5))
      .Init("indices", std::move(indices))
      .Op("LayerNormalization", {"x", "scale", "bias"}, {"n"})
      .Op("MatMul", {"n", "W"}, {"m"})
      .Op("Gather", {"m", "indices"}, {"y"}, {IntAttr("axis", axis)})
      .Output("y");
  return b;
}

std::vector<float> Values(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.num_elements());
}

void ExpectSameRowsAsLevel0(const ModelBuilder& b, const std::vector<int64_t>& dims) {
  const std::vector<NamedValue> inputs = {{"x", Seq({1, 5, 4}, 3, 17, 8, 4)}};
  const Tensor want = RunAt(b.model, inputs, 0);
  ASSERT_EQ(want.dims(), dims);
  ExpectNear(RunAt(b.model, inputs), dims, Values(want));
}

TEST(GatherRowsEarly, MovesAScalarIndexAboveTheRowWiseNodes) {
  // One image: the flat form, whose rows keep their axis until a Reshape drops it.
  ModelBuilder b = NormMatMulGather(Tensor::Scalar<int64_t>(0), 1);
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Gather", "LayerNormalization", "MatMul", "Reshape"}));
  ExpectSameRowsAsLevel0(b, {1, 6});
}

TEST(GatherRowsEarly, MovesAGatherThatIsNotAGraphOutput) {
  ModelBuilder b = NormMatMulGather(Tensor::Scalar<int64_t>(0), 1);
  b.model.graph.outputs.clear();
  b.Op("Relu", {"y"}, {"r"}).Output("r");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Gather", "LayerNormalization", "MatMul", "Reshape", "Relu"}));
  ExpectSameRowsAsLevel0(b, {1, 6});
}

TEST(GatherRowsEarly, MovesSeveralIndices) {
  ModelBuilder b = NormMatMulGather(Tensor::FromVector<int64_t>({3, -5}, {2}), -2);
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Gather", "LayerNormalization", "MatMul"}));
  ExpectSameRowsAsLevel0(b, {1, 2, 6});
}

TEST(GatherRowsEarly, MovesAboveBothOutputsOfASkipLayerNormalization) {
  // ViT's last block: the residual sum (output 3) and the normalized value
  // (output 0) both lead to the gathered rows.
  ModelBuilder b;
  b.model.opset_imports.push_back({"com.microsoft", 1});
  b.Input("x", ShapeFromDims({1, 5, 4}))
      .Init("skip", Seq({1, 5, 4}, 5, 11, 3, 2))
      .Init("gamma", Floats({1.5f, -0.5f, 2.f, 1.f}, {4}))
      .Init("beta", Floats({0.1f, 0.2f, -0.3f, 0.f}, {4}))
      .Init("W", Seq({4, 4}, 7, 13, 6, 5))
      .Init("indices", Tensor::Scalar<int64_t>(0))
      .Op("SkipLayerNormalization", {"x", "skip", "gamma", "beta"}, {"n", "", "", "s"})
      .Op("MatMul", {"n", "W"}, {"m"})
      .Op("SkipLayerNormalization", {"s", "m", "gamma", "beta"}, {"o"})
      .Op("Gather", {"o", "indices"}, {"y"}, {IntAttr("axis", 1)})
      .Output("y");
  b.model.graph.nodes[0].domain = b.model.graph.nodes[2].domain = "com.microsoft";
  EXPECT_EQ(OpsAfter(b.model),
            (Ops{"Gather", "Gather", "SkipLayerNormalization", "MatMul", "SkipLayerNormalization", "Reshape"}));
  ExpectSameRowsAsLevel0(b, {1, 4});
}

TEST(GatherRowsEarly, StaysWhereAMovedNodeWouldLoseAReader) {
  // The LayerNormalization's output is also a graph output: only the MatMul moves.
  ModelBuilder out = NormMatMulGather(Tensor::Scalar<int64_t>(0), 1);
  out.Output("n");
  EXPECT_EQ(OpsAfter(out.model), (Ops{"LayerNormalization", "Gather", "MatMul", "Reshape"}));
  ExpectSameRowsAsLevel0(out, {1, 6});
  // Another node reads the MatMul's output: nothing moves.
  ModelBuilder shared = NormMatMulGather(Tensor::Scalar<int64_t>(0), 1);
  shared.Op("Relu", {"m"}, {"r"}).Output("r");
  EXPECT_EQ(OpsAfter(shared.model), (Ops{"LayerNormalization", "MatMul", "Gather", "Relu"}));
}

TEST(GatherRowsEarly, StaysForColumnsAndNonConstantWeights) {
  // Along the last axis the Gather picks columns, which every row needs.
  ModelBuilder columns = NormMatMulGather(Tensor::Scalar<int64_t>(0), 2);
  EXPECT_EQ(OpsAfter(columns.model), (Ops{"LayerNormalization", "MatMul", "Gather"}));
  // A B that is an input: MatMul is then not taken as row-wise.
  ModelBuilder input_b = NormMatMulGather(Tensor::Scalar<int64_t>(0), 1);
  input_b.model.graph.initializers.erase(input_b.model.graph.initializers.begin() + 2);  // W
  input_b.Input("W", ShapeFromDims({4, 6}));
  EXPECT_EQ(OpsAfter(input_b.model), (Ops{"LayerNormalization", "MatMul", "Gather"}));
}


// ViT's last attention block as nn.MultiheadAttention writes it: the heads'
// output x [B, 5, 4] -> Reshape [5B, 4] -> Gemm (out-projection, B transposed,
// bias per column) -> Reshape [5, B, 6] -> Transpose [B, 5, 6] ->
// SkipLayerNormalization with the residual -> Gather of row `index`.
ModelBuilder OutProjectionGather(int64_t batch, Tensor c) {
  ModelBuilder b;
  b.model.opset_imports.push_back({"com.microsoft", 1});
  b.Input("x", ShapeFromDims({batch, 5, 4}))
      .Init("flat", Ints({5 * batch, 4}))
      .Init("W", Seq({6, 4}, 7, 13, 6, 5))
      .Init("c", std::move(c))
      .Init("seq_first", Ints({5, batch, 6}))
      .Init("skip", Seq({batch, 5, 6}, 5, 11, 3, 2))
      .Init("gamma", Floats({1.5f, -0.5f, 2.f, 1.f, 0.5f, 0.25f}, {6}))
      .Init("beta", Floats({0.1f, 0.2f, -0.3f, 0.f, 1.f, -1.f}, {6}))
      .Init("indices", Tensor::Scalar<int64_t>(0))
      .Op("Reshape", {"x", "flat"}, {"x2"})
      .Op("Gemm", {"x2", "W", "c"}, {"p"}, {IntAttr("transB", 1)})
      .Op("Reshape", {"p", "seq_first"}, {"p3"})
      .Op("Transpose", {"p3"}, {"t"}, {IntsAttr("perm", {1, 0, 2})})
      .Op("SkipLayerNormalization", {"t", "skip", "gamma", "beta"}, {"o"})
      .Op("Gather", {"o", "indices"}, {"y"}, {IntAttr("axis", 1)})
      .Output("y");
  b.model.graph.nodes[4].domain = "com.microsoft";
  return b;
}

TEST(GatherRowsEarly, FlatRowsMoveAboveReshapesTransposeAndGemm) {
  ModelBuilder b = OutProjectionGather(1, Floats({0.5f, -1.f, 0.25f, 2.f, 0.f, 1.f}, {6}));
  // The Reshapes of one row stay (the first is no longer a no-op of eliminate-noops' kind).
  const Ops ops = OpsAfter(b.model);
  ASSERT_FALSE(ops.empty());
  EXPECT_EQ(ops.front(), "Gather");
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Gather"), 2) << "x's rows and the residual's";
  EXPECT_EQ(ops.back(), "Reshape");
  const Model optimized = Optimized(b.model);
  for (const Node& n : optimized.graph.nodes)
    if (n.op_type == "Gather") EXPECT_TRUE(n.inputs[0] == "x" || n.inputs[0] == "skip") << n.inputs[0];
  const std::vector<NamedValue> inputs = {{"x", Random({1, 5, 4}, 3)}};
  const Tensor want = RunAt(b.model, inputs, 0);
  ASSERT_EQ(want.dims(), (std::vector<int64_t>{1, 6}));
  ExpectNear(RunAt(b.model, inputs), {1, 6}, Values(want));
}

TEST(GatherRowsEarly, FlatRowsNeedOneImageAndABiasPerColumn) {
  // Two images: rows of the Gemm's input are not the Gather's rows in one
  // axis; only the SkipLayerNormalization moves.
  ModelBuilder two = OutProjectionGather(2, Floats({0.5f, -1.f, 0.25f, 2.f, 0.f, 1.f}, {6}));
  EXPECT_EQ(OpsAfter(two.model),
            (Ops{"Reshape", "Gemm", "Reshape", "Transpose", "Gather", "Gather", "SkipLayerNormalization"}));
  const std::vector<NamedValue> inputs = {{"x", Random({2, 5, 4}, 3)}};
  const Tensor want = RunAt(two.model, inputs, 0);
  ExpectNear(RunAt(two.model, inputs), {2, 6}, Values(want));
  // A bias per row and column: the Gemm stays, the Gather below it.
  ModelBuilder per_row = OutProjectionGather(1, Seq({5, 6}, 3, 7, 2, 4));
  const Ops ops = OpsAfter(per_row.model);
  const auto gemm = std::find(ops.begin(), ops.end(), "Gemm");
  ASSERT_NE(gemm, ops.end());
  EXPECT_EQ(std::count(gemm, ops.end(), "Gather"), 2) << "both Gathers after the Gemm";
  const std::vector<NamedValue> one = {{"x", Random({1, 5, 4}, 3)}};
  ExpectNear(RunAt(per_row.model, one), {1, 6}, Values(RunAt(per_row.model, one, 0)));
}

}  // namespace
}  // namespace nee
