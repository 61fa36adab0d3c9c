// The gather-rows-early pass (src/opt/gather_rows_early.cc): a Gather of rows
// moves above the row-wise nodes computing them where that is legal, stays
// in each bail-out case, and the kept rows come out as the unoptimized graph
// (level 0, which computes every row and then gathers) computes them.
#include <gtest/gtest.h>

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
  ModelBuilder b = NormMatMulGather(Tensor::Scalar<int64_t>(0), 1);
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Gather", "LayerNormalization", "MatMul"}));
  ExpectSameRowsAsLevel0(b, {1, 6});
}

TEST(GatherRowsEarly, MovesAGatherThatIsNotAGraphOutput) {
  ModelBuilder b = NormMatMulGather(Tensor::Scalar<int64_t>(0), 1);
  b.model.graph.outputs.clear();
  b.Op("Relu", {"y"}, {"r"}).Output("r");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Gather", "LayerNormalization", "MatMul", "Relu"}));
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
            (Ops{"Gather", "Gather", "SkipLayerNormalization", "MatMul", "SkipLayerNormalization"}));
  ExpectSameRowsAsLevel0(b, {1, 4});
}

TEST(GatherRowsEarly, StaysWhereAMovedNodeWouldLoseAReader) {
  // The LayerNormalization's output is also a graph output: only the MatMul moves.
  ModelBuilder out = NormMatMulGather(Tensor::Scalar<int64_t>(0), 1);
  out.Output("n");
  EXPECT_EQ(OpsAfter(out.model), (Ops{"LayerNormalization", "Gather", "MatMul"}));
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

}  // namespace
}  // namespace nee
