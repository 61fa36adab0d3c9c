// Level-2 graph passes (src/opt): each rewrite happens where it is legal,
// does not happen in each bail-out case, and keeps results: outputs at level
// 99 are compared with ONNX Runtime's on the same model and inputs
// (tests/unit/opt/fusion_expected_gen.py prints them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "exec/session.h"
#include "opt/pass_manager.h"
#include "opt_test_util.h"

namespace nee {
namespace {
using namespace opt_test;

// ---- Conv + BatchNormalization ------------------------------------------------------------

ModelBuilder ConvBn() {
  ModelBuilder b;
  b.Input("x", ShapeFromDims({1, 2, 3, 3}))
      .Init("W", Seq({3, 2, 2, 2}, 5, 9, 4, 8))
      .Init("B", Seq({3}, 1, 3, 1, 2))
      .Init("scale", Floats({1.5f, -0.5f, 2.0f}, {3}))
      .Init("shift", Floats({0.1f, 0.2f, -0.3f}, {3}))
      .Init("mean", Floats({0.05f, -0.1f, 0.2f}, {3}))
      .Init("var", Floats({0.5f, 1.5f, 0.25f}, {3}))
      .Op("Conv", {"x", "W", "B"}, {"c"})
      .Op("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"y"}, {FloatAttr("epsilon", 1e-3f)})
      .Output("y");
  return b;
}

TEST(FoldConvBatchNorm, FoldsIntoTheConvAndKeepsResults) {
  ModelBuilder b = ConvBn();
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Conv"}));
  EXPECT_EQ(OpsAfter(b.model, 1), (Ops{"Conv", "BatchNormalization"}));
  Tensor y = RunAt(b.model, {{"x", Seq({1, 2, 3, 3}, 7, 11, 5, 4)}});
  // ONNX Runtime (fusion_expected_gen.py, conv_bn).
  ExpectNear(y, {1, 3, 2, 2},
             {-1.727812f, -1.727812f, -4.641715f, 0.4576154f, 0.0316537f, -0.03211385f, -0.01936033f, 0.1974493f,
              -6.587438f, 2.519367f, -1.223156f, 5.139133f});
}

TEST(FoldConvBatchNorm, FoldsConvTransposeWithGroups) {
  ModelBuilder b;
  b.Input("x", ShapeFromDims({1, 4, 2, 2}))
      .Init("W", Seq({4, 1, 2, 2}, 5, 9, 4, 8))
      .Init("scale", Floats({1.5f, -0.5f}, {2}))
      .Init("shift", Floats({0.1f, 0.2f}, {2}))
      .Init("mean", Floats({0.05f, -0.1f}, {2}))
      .Init("var", Floats({0.5f, 1.5f}, {2}))
      .Op("ConvTranspose", {"x", "W"}, {"c"}, {IntAttr("group", 2)})
      .Op("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"ConvTranspose"}));
  Tensor y = RunAt(b.model, {{"x", Seq({1, 4, 2, 2}, 3, 7, 3, 2)}});
  // ONNX Runtime (fusion_expected_gen.py, convtranspose_bn).
  ExpectNear(y, {1, 2, 3, 3},
             {1.054585f, 0.9220034f, -0.8015521f, -0.9341333f, 2.645559f, -2.392526f, -1.331877f, 2.115234f,
              -1.862202f, 0.261237f, 0.006082714f, 0.5163914f, 0.4653605f, -0.3001025f, 0.6184531f, 0.4143296f,
              -0.04494816f, 0.3122679f});
}

TEST(FoldConvBatchNorm, FoldsAChainOfBiasNormalizationAndScaleInOneSweep) {
  // PP-OCRv5's detector head: ConvTranspose -> Add(bias as [1, C, 1, 1]) -> BatchNormalization, here with a
  // per-channel Mul after it; and a Conv with a Sub before its BatchNormalization.
  ModelBuilder b;
  b.Input("x", ShapeFromDims({1, 4, 2, 2}))
      .Init("W", Seq({4, 3, 2, 2}, 5, 9, 4, 8))
      .Init("bias", Floats({0.3f, -0.2f, 0.5f}, {1, 3, 1, 1}))
      .Init("scale", Floats({1.5f, -0.5f, 0.75f}, {3}))
      .Init("shift", Floats({0.1f, 0.2f, -0.1f}, {3}))
      .Init("mean", Floats({0.05f, -0.1f, 0.3f}, {3}))
      .Init("var", Floats({0.5f, 1.5f, 0.8f}, {3}))
      .Init("gain", Floats({2.f, 0.5f, -1.f}, {3, 1, 1}))
      .Init("V", Seq({3, 3, 1, 1}, 3, 7, 3, 2))
      .Op("ConvTranspose", {"x", "W"}, {"t"}, {IntsAttr("strides", {2, 2})})
      .Op("Add", {"t", "bias"}, {"a"})
      .Op("BatchNormalization", {"a", "scale", "shift", "mean", "var"}, {"n"})
      .Op("Mul", {"gain", "n"}, {"m"})
      .Op("Conv", {"m", "V"}, {"c"})
      .Op("Sub", {"c", "bias"}, {"s"})
      .Op("BatchNormalization", {"s", "scale", "shift", "mean", "var"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"ConvTranspose", "Conv"}));
  ExpectSameResults(b.model, {{"x", Random({1, 4, 2, 2}, 5)}});
}

TEST(FoldConvAffine, FoldsAnAffineBeforeAnUnpaddedConvIntoIt) {
  // PP-LCNetV3's learnable affine (scalars) before a pointwise conv, and a per-channel Sub before a grouped
  // 3x3 conv without padding (the channel dim known, so the constant does not broadcast x).
  ModelBuilder b;
  b.Input("x", Shape{Dim::Symbol("n"), Dim::Known(4), Dim::Symbol("h"), Dim::Symbol("w")})
      .Init("s", Scalar(1.5f))
      .Init("t", Floats({-0.25f}, {1}))
      .Init("W", Random({6, 4, 1, 1}, 3))
      .Init("B", Random({6}, 4))
      .Init("shift", Floats({0.5f, -1.f, 2.f, 0.f, 0.25f, -0.5f}, {1, 6, 1, 1}))
      .Init("V", Random({6, 2, 3, 3}, 5))
      .Op("Mul", {"x", "s"}, {"m"})
      .Op("Add", {"t", "m"}, {"a"})
      .Op("Conv", {"a", "W", "B"}, {"c"})
      .Op("Sub", {"c", "shift"}, {"d"})
      .Op("Relu", {"d"}, {"r"})
      .Op("Mul", {"r", "shift"}, {"q"})
      .Op("Conv", {"q", "V"}, {"y"}, {IntAttr("group", 3)})
      .Output("y");
  // The Sub folds into the first Conv (output side), the Mul into the second (input side); the Relu stays.
  EXPECT_EQ(OpsAfter(b.model), (Ops{"FusedConv", "Conv"}));
  ExpectSameResults(b.model, {{"x", Random({2, 4, 5, 6}, 6)}});
}

TEST(FoldConvAffine, LeavesAffinesBeforePaddedOrSharedConvsAlone) {
  auto model = [](std::vector<Attribute> conv_attrs, bool shared, bool known_channels) {
    ModelBuilder b;
    b.Input("x", Shape{Dim::Known(1), known_channels ? Dim::Known(2) : Dim::Symbol("c"), Dim::Known(4),
                       Dim::Known(4)})
        .Init("shift", Floats({0.5f, -1.f}, {2, 1, 1}))
        .Init("W", Random({3, 2, 3, 3}, 3))
        .Op("Add", {"x", "shift"}, {"a"})
        .Op("Conv", {"a", "W"}, {"y"}, conv_attrs)
        .Output("y");
    if (shared) b.Op("Neg", {"a"}, {"n"}).Output("n");
    return b;
  };
  // Padding reads zeros where the shift would have been added; the shifted value read elsewhere; x's channels
  // unknown (it could have one channel that the shift broadcasts).
  EXPECT_EQ(OpsAfter(model({IntsAttr("pads", {1, 1, 1, 1})}, false, true).model), (Ops{"Add", "Conv"}));
  EXPECT_EQ(OpsAfter(model({}, true, true).model), (Ops{"Add", "Conv", "Neg"}));
  EXPECT_EQ(OpsAfter(model({}, false, false).model), (Ops{"Add", "Conv"}));
  EXPECT_EQ(OpsAfter(model({StringAttr("auto_pad", "VALID")}, false, true).model), (Ops{"Conv"}));
}

TEST(FoldConvBatchNorm, BailsOutOnNonConstantWeights) {
  ModelBuilder b = ConvBn();
  // W becomes overridable: a graph input with a default.
  b.model.graph.inputs.push_back({"W", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({3, 2, 2, 2})), "", {}});
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Conv", "BatchNormalization"}));
}

TEST(FoldConvBatchNorm, BailsOutOnNonConstantStatistics) {
  ModelBuilder b = ConvBn();
  b.model.graph.inputs.push_back({"mean", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({3})), "", {}});
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Conv", "BatchNormalization"}));
}

TEST(FoldConvBatchNorm, BailsOutWhenTheConvOutputIsAGraphOutput) {
  ModelBuilder b = ConvBn();
  b.Output("c");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Conv", "BatchNormalization"}));
}

TEST(FoldConvBatchNorm, BailsOutWhenTheConvOutputHasAnotherReader) {
  ModelBuilder b = ConvBn();
  b.Op("Relu", {"c"}, {"r"}).Output("r");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Conv", "BatchNormalization", "Relu"}));
}

TEST(FoldConvBatchNorm, BailsOutOnTrainingModeAndExtraOutputs) {
  ModelBuilder training = ConvBn();
  training.model.graph.nodes[1].attributes.push_back(IntAttr("training_mode", 1));
  EXPECT_EQ(OpsAfter(training.model), (Ops{"Conv", "BatchNormalization"}));
  ModelBuilder spatial(8);  // opset 8: spatial=0 normalizes per element
  spatial.model = ConvBn().model;
  spatial.model.opset_imports[0].version = 8;
  spatial.model.graph.nodes[1].attributes.push_back(IntAttr("spatial", 0));
  EXPECT_EQ(OpsAfter(spatial.model), (Ops{"Conv", "BatchNormalization"}));
}

TEST(FoldConvBatchNorm, BailsOutWhenASubgraphReadsTheConvOutput) {
  ModelBuilder b = ConvBn();
  AddIfReading(b, "c", "z");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Conv", "BatchNormalization", "If"}));
}

TEST(FoldConvBatchNorm, BailsOutOnDoubleWeights) {
  ModelBuilder b;
  b.Input("x", ShapeFromDims({1, 1, 2, 2}), DataType::kDouble)
      .Init("W", Tensor::FromVector<double>({1.0, 2.0}, {2, 1, 1, 1}))
      .Init("p", Tensor::FromVector<double>({1.0, 1.0}, {2}))
      .Op("Conv", {"x", "W"}, {"c"})
      .Op("BatchNormalization", {"c", "p", "p", "p", "p"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Conv", "BatchNormalization"}));
}

TEST(FoldConvBatchNorm, BailsOutOnNonFloatOrMisshapenParameters) {
  ModelBuilder b = ConvBn();
  b.model.graph.initializers[3].tensor = Floats({1.5f, -0.5f, 2.0f}, {1, 3});  // scale [1,3]
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Conv", "BatchNormalization"}));
}

// ---- Conv + Mul / Add -----------------------------------------------------------------------

ModelBuilder ConvMulAdd(Tensor scale) {
  ModelBuilder b;
  b.Input("x", ShapeFromDims({1, 2, 3, 3}))
      .Init("W", Seq({3, 2, 2, 2}, 5, 9, 4, 8))
      .Init("s", std::move(scale))
      .Init("b", Floats({0.25f, 0.5f, -1.0f}, {1, 3, 1, 1}))
      .Op("Conv", {"x", "W"}, {"c"})
      .Op("Mul", {"c", "s"}, {"m"})
      .Op("Add", {"b", "m"}, {"y"})
      .Output("y");
  return b;
}

TEST(FoldConvAddMul, FoldsPerChannelScaleAndShift) {
  ModelBuilder b = ConvMulAdd(Floats({2.0f, -1.0f, 0.5f}, {3, 1, 1}));
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Conv"}));
  Tensor y = RunAt(b.model, {{"x", Seq({1, 2, 3, 3}, 7, 11, 5, 4)}});
  // ONNX Runtime (fusion_expected_gen.py, conv_mul_add).
  ExpectNear(y, {1, 3, 2, 2},
             {-0.375f, -0.375f, -3.125f, 1.6875f, 0.1875f, 0.03125f, 0.0625f, 0.59375f, -1.9375f, -0.796875f,
              -1.265625f, -0.46875f});
}

TEST(FoldConvAddMul, BailsOutOnConstantsThatAreNotPerChannel) {
  // Per position, not per channel (the Add then follows a Mul, not a Conv).
  EXPECT_EQ(OpsAfter(ConvMulAdd(Seq({2, 2}, 1, 3, 1, 2)).model), (Ops{"Conv", "Mul", "Add"}));
  // Would broadcast the output to a higher rank.
  EXPECT_EQ(OpsAfter(ConvMulAdd(Floats({2.0f, -1.0f, 0.5f}, {1, 1, 3, 1, 1})).model), (Ops{"Conv", "Mul", "Add"}));
}

TEST(FoldConvAddMul, BailsOutOnNonConstantOperandAndSubFromConstant) {
  ModelBuilder b = ConvMulAdd(Floats({2.0f, -1.0f, 0.5f}, {3, 1, 1}));
  b.model.graph.inputs.push_back({"s", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({3, 1, 1})), "", {}});
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Conv", "Mul", "Add"}));
  ModelBuilder sub;
  sub.Input("x", ShapeFromDims({1, 2, 3, 3}))
      .Init("W", Seq({3, 2, 2, 2}, 5, 9, 4, 8))
      .Init("b", Floats({0.25f, 0.5f, -1.0f}, {3, 1, 1}))
      .Op("Conv", {"x", "W"}, {"c"})
      .Op("Sub", {"b", "c"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(sub.model), (Ops{"Conv", "Sub"}));
}

// ---- MatMul + Add -> Gemm, Transpose into Gemm ----------------------------------------------

ModelBuilder MatMulAdd(std::optional<Shape> a_shape, Tensor bias) {
  ModelBuilder b;
  b.Input("a", std::move(a_shape))
      .Init("B", Seq({3, 4}, 5, 9, 4, 8))
      .Init("bias", std::move(bias))
      .Op("MatMul", {"a", "B"}, {"p"})
      .Op("Add", {"p", "bias"}, {"y"})
      .Output("y");
  return b;
}

TEST(FuseMatMulAdd, BecomesGemmAndKeepsResults) {
  ModelBuilder b = MatMulAdd(Shape{Dim::Symbol("batch"), Dim::Known(3)}, Floats({0.5f, -0.25f, 1.0f, 0.0f}, {4}));
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Gemm"}));
  EXPECT_EQ(OpsAfter(b.model, 1), (Ops{"MatMul", "Add"}));
  Tensor y = RunAt(b.model, {{"a", Seq({2, 3}, 7, 11, 5, 4)}});
  // ONNX Runtime (fusion_expected_gen.py, matmul_add).
  ExpectNear(y, {2, 4}, {1.0f, 0.03125f, 1.34375f, 0.125f, -0.1875f, 0.375f, 0.40625f, 0.71875f});
}

TEST(FuseMatMulAdd, BailsOutOnHigherRankNonConstantOrWideningBias) {
  Tensor bias = Floats({0.5f, -0.25f, 1.0f, 0.0f}, {4});
  // 3-D A: not a Gemm, but nee's FusedMatMul (fuse_matmul_bias.cc).
  EXPECT_EQ(OpsAfter(MatMulAdd(ShapeFromDims({2, 2, 3}), bias).model), (Ops{"FusedMatMul"}));
  // Unknown rank.
  EXPECT_EQ(OpsAfter(MatMulAdd(std::nullopt, bias).model), (Ops{"MatMul", "Add"}));
  // Bias [2,4] with a symbolic row count would broadcast rows.
  EXPECT_EQ(OpsAfter(MatMulAdd(Shape{Dim::Symbol("batch"), Dim::Known(3)}, Seq({2, 4}, 1, 5, 2, 4)).model),
            (Ops{"MatMul", "Add"}));
  // Non-constant B.
  ModelBuilder b = MatMulAdd(ShapeFromDims({2, 3}), bias);
  b.model.graph.inputs.push_back({"B", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({3, 4})), "", {}});
  EXPECT_EQ(OpsAfter(b.model), (Ops{"MatMul", "Add"}));
  // The product is also a graph output.
  ModelBuilder shared = MatMulAdd(ShapeFromDims({2, 3}), bias);
  shared.Output("p");
  EXPECT_EQ(OpsAfter(shared.model), (Ops{"MatMul", "Add"}));
}

TEST(FuseMatMulAdd, BailsOutWhenASubgraphReadsTheProductOrTypesAreNotFloat) {
  ModelBuilder captured = MatMulAdd(ShapeFromDims({2, 3}), Floats({0.5f, -0.25f, 1.0f, 0.0f}, {4}));
  AddIfReading(captured, "p", "z");
  EXPECT_EQ(OpsAfter(captured.model), (Ops{"MatMul", "Add", "If"}));
  ModelBuilder doubles;
  doubles.Input("a", ShapeFromDims({2, 3}), DataType::kDouble)
      .Init("B", Tensor::FromVector<double>(std::vector<double>(12, 1.0), {3, 4}))
      .Init("bias", Tensor::FromVector<double>(std::vector<double>(4, 1.0), {4}))
      .Op("MatMul", {"a", "B"}, {"p"})
      .Op("Add", {"p", "bias"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(doubles.model), (Ops{"MatMul", "Add"}));
}

TEST(FoldTransposeIntoGemm, SetsTransFlagsAndKeepsResults) {
  ModelBuilder b;
  b.Input("at", ShapeFromDims({3, 2}))
      .Input("bt", ShapeFromDims({4, 3}))
      .Init("bias", Floats({0.5f, -0.25f, 1.0f, 0.0f}, {4}))
      .Op("Transpose", {"at"}, {"ta"}, {IntsAttr("perm", {1, 0})})
      .Op("Transpose", {"bt"}, {"tb"})
      .Op("Gemm", {"ta", "tb", "bias"}, {"y"}, {FloatAttr("alpha", 0.5f)})
      .Output("y");
  Model optimized = b.model;
  ASSERT_TRUE(OptimizeModel(optimized, 99).ok());
  ASSERT_EQ(optimized.graph.nodes.size(), 1u);
  EXPECT_EQ(optimized.graph.nodes[0].GetInt("transA", 0).value(), 1);
  EXPECT_EQ(optimized.graph.nodes[0].GetInt("transB", 0).value(), 1);
  Tensor y = RunAt(b.model, {{"at", Seq({3, 2}, 7, 11, 5, 4)}, {"bt", Seq({4, 3}, 5, 9, 4, 8)}});
  // ONNX Runtime (fusion_expected_gen.py, gemm_transposes).
  ExpectNear(y, {2, 4}, {0.734375f, -0.296875f, 0.953125f, 0.234375f, 0.59375f, -0.484375f, 1.28125f, 0.09375f});
}

TEST(FoldTransposeIntoGemm, BailsOutWhenTheTransposeHasAnotherReader) {
  ModelBuilder b;
  b.Input("at", ShapeFromDims({3, 2}))
      .Init("B", Seq({3, 4}, 5, 9, 4, 8))
      .Op("Transpose", {"at"}, {"ta"})
      .Op("Gemm", {"ta", "B"}, {"y"})
      .Op("Relu", {"ta"}, {"r"})
      .Output("y")
      .Output("r");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Transpose", "Gemm", "Relu"}));
}

// ---- No-op elimination ----------------------------------------------------------------------

TEST(EliminateNoOps, RemovesIdentityDropoutAndSameTypeCast) {
  ModelBuilder b;
  b.Input("x", Shape{Dim::Symbol("n"), Dim::Known(3)})
      .Op("Relu", {"x"}, {"r"})
      .Op("Identity", {"r"}, {"i"})
      .Op("Dropout", {"i"}, {"d"})
      .Op("Cast", {"d"}, {"c"}, {IntAttr("to", 1)})
      .Op("Abs", {"c"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Relu", "Abs"}));
  EXPECT_EQ(OpsAfter(b.model, 1), (Ops{"Relu", "Identity", "Dropout", "Cast", "Abs"}));
  // |relu(x)| = relu(x), computed by hand.
  Tensor y = RunAt(b.model, {{"x", Floats({-1.f, 2.f, -3.f, 4.f, 0.5f, -0.5f}, {2, 3})}});
  ExpectNear(y, {2, 3}, {0.f, 2.f, 0.f, 4.f, 0.5f, 0.f});
}

TEST(EliminateNoOps, RemovesFloatProductsWithOneAndKeepsOtherScalings) {
  // x * 1 (either side, any rank up to x's) and x / 1, x with an unknown dim: PaddlePaddle's swish.
  ModelBuilder b;
  b.Input("x", Shape{Dim::Symbol("n"), Dim::Known(3)})
      .Init("one", Scalar(1.f))
      .Init("ones", Floats({1.f}, {1, 1}))
      .Op("Relu", {"x"}, {"r"})
      .Op("Mul", {"r", "one"}, {"a"})
      .Op("Mul", {"ones", "a"}, {"b"})
      .Op("Div", {"b", "one"}, {"c"})
      .Op("Abs", {"c"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Relu", "Abs"}));
  ExpectNear(RunAt(b.model, {{"x", Floats({-1.f, 2.f, -3.f, 4.f, 0.5f, -0.5f}, {2, 3})}}), {2, 3},
             {0.f, 2.f, 0.f, 4.f, 0.5f, 0.f});
  // Kept: 1 / x; a scale other than 1; ones that broadcast x to a higher rank; several ones (they could
  // broadcast x's unknown dim); an integer product.
  ModelBuilder kept;
  kept.Input("x", Shape{Dim::Symbol("n"), Dim::Known(3)})
      .Input("i", ShapeFromDims({3}), DataType::kInt64)
      .Init("one", Scalar(1.f))
      .Init("two", Scalar(2.f))
      .Init("wide", Floats({1.f}, {1, 1, 1}))
      .Init("row", Floats({1.f, 1.f, 1.f}, {3}))
      .Init("ione", Tensor::FromVector<int64_t>({1}, {}))
      .Op("Div", {"one", "x"}, {"a"})
      .Op("Mul", {"a", "two"}, {"b"})
      .Op("Mul", {"b", "wide"}, {"c"})
      .Op("Mul", {"row", "c"}, {"y"})
      .Op("Mul", {"i", "ione"}, {"j"})
      .Output("y")
      .Output("j");
  EXPECT_EQ(OpsAfter(kept.model), (Ops{"Div", "Mul", "Mul", "Mul", "Mul"}));
}

TEST(EliminateNoOps, KeepsAGraphOutputNameByRenamingTheProducer) {
  ModelBuilder b;
  b.Input("x", ShapeFromDims({3})).Op("Neg", {"x"}, {"n"}).Op("Identity", {"n"}, {"y"}).Output("y");
  Model optimized = b.model;
  ASSERT_TRUE(OptimizeModel(optimized, 99).ok());
  ASSERT_EQ(optimized.graph.nodes.size(), 1u);
  EXPECT_EQ(optimized.graph.nodes[0].op_type, "Neg");
  EXPECT_EQ(optimized.graph.nodes[0].outputs[0], "y");
  ExpectNear(RunAt(b.model, {{"x", Floats({1.f, -2.f, 3.f}, {3})}}), {3}, {-1.f, 2.f, -3.f});
}

TEST(EliminateNoOps, KeepsIdentityBetweenGraphInputAndOutput) {
  ModelBuilder b;
  b.Input("x", ShapeFromDims({3})).Op("Identity", {"x"}, {"y"}).Output("y");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Identity"}));
  // Both names are graph outputs: neither can go.
  ModelBuilder both;
  both.Input("x", ShapeFromDims({3})).Op("Neg", {"x"}, {"n"}).Op("Identity", {"n"}, {"y"}).Output("n").Output("y");
  EXPECT_EQ(OpsAfter(both.model), (Ops{"Neg", "Identity"}));
}

TEST(EliminateNoOps, KeepsDropoutWhoseMaskIsReadOrInTrainingMode) {
  ModelBuilder mask;
  mask.Input("x", ShapeFromDims({3}))
      .Op("Dropout", {"x"}, {"d", "m"})
      .Op("Not", {"m"}, {"nm"})
      .Op("Abs", {"d"}, {"y"})
      .Output("y")
      .Output("nm");
  EXPECT_EQ(OpsAfter(mask.model), (Ops{"Dropout", "Not", "Abs"}));
  ModelBuilder training;
  training.Input("x", ShapeFromDims({3}))
      .Init("ratio", Tensor::Scalar<float>(0.5f))
      .Init("train", Tensor::Scalar<bool>(true))
      .Op("Dropout", {"x", "ratio", "train"}, {"d"})
      .Op("Abs", {"d"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(training.model), (Ops{"Dropout", "Abs"}));
  // A constant false training_mode is inference.
  training.model.graph.initializers[1].tensor = Tensor::Scalar<bool>(false);
  EXPECT_EQ(OpsAfter(training.model), (Ops{"Abs"}));
}

TEST(EliminateNoOps, KeepsCastToAnotherType) {
  ModelBuilder b;
  b.Input("x", ShapeFromDims({3})).Op("Cast", {"x"}, {"c"}, {IntAttr("to", 11)}).Op("Abs", {"c"}, {"y"}).Output("y");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Cast", "Abs"}));
}

TEST(EliminateNoOps, CancelsAndMergesTransposes) {
  ModelBuilder cancel;
  cancel.Input("x", ShapeFromDims({2, 3, 4}))
      .Op("Relu", {"x"}, {"r"})
      .Op("Transpose", {"r"}, {"t1"}, {IntsAttr("perm", {1, 2, 0})})
      .Op("Transpose", {"t1"}, {"t2"}, {IntsAttr("perm", {2, 0, 1})})
      .Op("Abs", {"t2"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(cancel.model), (Ops{"Relu", "Abs"}));

  ModelBuilder merge;
  merge.Input("x", ShapeFromDims({2, 3, 4}))
      .Op("Transpose", {"x"}, {"t1"}, {IntsAttr("perm", {1, 2, 0})})
      .Op("Transpose", {"t1"}, {"y"}, {IntsAttr("perm", {0, 2, 1})})
      .Output("y");
  Model optimized = merge.model;
  ASSERT_TRUE(OptimizeModel(optimized, 99).ok());
  ASSERT_EQ(optimized.graph.nodes.size(), 1u);
  // numpy: x.transpose(1, 2, 0).transpose(0, 2, 1) == x.transpose(1, 0, 2)
  EXPECT_EQ(optimized.graph.nodes[0].GetInts("perm").value(), (std::vector<int64_t>{1, 0, 2}));
  Tensor x = Seq({2, 3, 4}, 1, 100, 0, 1);  // 0..23
  // numpy: np.arange(24).reshape(2,3,4).transpose(1,0,2).ravel()
  ExpectNear(RunAt(merge.model, {{"x", x}}), {3, 2, 4},
             {0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 16, 17, 18, 19, 8, 9, 10, 11, 20, 21, 22, 23});
}

TEST(EliminateNoOps, KeepsTransposesWhoseMiddleIsShared) {
  ModelBuilder b;
  b.Input("x", ShapeFromDims({2, 3}))
      .Op("Transpose", {"x"}, {"t1"})
      .Op("Transpose", {"t1"}, {"t2"})
      .Output("t1")
      .Output("t2");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Transpose", "Transpose"}));
}

// Relu -> Transpose(perm) -> Abs over an input of shape `shape`.
ModelBuilder TransposeBetween(Shape shape, std::vector<int64_t> perm) {
  ModelBuilder b;
  b.Input("x", std::move(shape))
      .Op("Relu", {"x"}, {"r"})
      .Op("Transpose", {"r"}, {"t"}, {IntsAttr("perm", std::move(perm))})
      .Op("Abs", {"t"}, {"y"})
      .Output("y");
  return b;
}

TEST(EliminateNoOps, TurnsATransposeMovingOnlyUnitAxesIntoAReshape) {
  // ViT's [S, 1, D] -> [1, S, D] around attention moves no element.
  ModelBuilder unit = TransposeBetween(ShapeFromDims({3, 1, 4}), {1, 0, 2});
  EXPECT_EQ(OpsAfter(unit.model), (Ops{"Relu", "Reshape", "Abs"}));
  // numpy: abs(relu(x)).transpose(1, 0, 2) of x = arange(12) - 5 in [3, 1, 4].
  std::vector<float> want(12);
  for (int i = 0; i < 12; ++i) want[i] = static_cast<float>(std::max(i - 5, 0));
  ExpectNear(RunAt(unit.model, {{"x", Seq({3, 1, 4}, 1, 100, 5, 1)}}), {1, 3, 4}, want);
  // Two axes of size > 1 swap: a real transpose stays.
  EXPECT_EQ(OpsAfter(TransposeBetween(ShapeFromDims({3, 1, 4}), {2, 1, 0}).model), (Ops{"Relu", "Transpose", "Abs"}));
  // A symbolic dim might not be 1: the Transpose stays.
  const Shape symbolic{Dim::Known(3), Dim::Symbol("n"), Dim::Known(4)};
  EXPECT_EQ(OpsAfter(TransposeBetween(symbolic, {1, 0, 2}).model), (Ops{"Relu", "Transpose", "Abs"}));
}

TEST(EliminateNoOps, KeepsATransposeOfAnEmptyTensorAndTheRestOfThePass) {
  // Reshape would read the 0 of [1, 0, 4] as "copy the input's dim" (here 1): the checker would refuse
  // that graph and the whole pass would be undone, the identity Transpose after it kept too.
  ModelBuilder b;
  b.Input("x", ShapeFromDims({0, 1, 4}))
      .Op("Relu", {"x"}, {"r"})
      .Op("Transpose", {"r"}, {"t"}, {IntsAttr("perm", {1, 0, 2})})
      .Op("Transpose", {"t"}, {"u"}, {IntsAttr("perm", {0, 1, 2})})
      .Op("Abs", {"u"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Relu", "Transpose", "Abs"}));
  ExpectNear(RunAt(b.model, {{"x", Seq({0, 1, 4}, 1, 100, 5, 1)}}), {1, 0, 4}, {});
}

TEST(EliminateNoOps, CancelsUnsqueezeSqueezeOnTheSameAxes) {
  ModelBuilder same;
  same.Input("x", ShapeFromDims({2, 3}))
      .Init("axes", Ints({0, -1}))
      .Op("Relu", {"x"}, {"r"})
      .Op("Unsqueeze", {"r", "axes"}, {"u"})
      .Op("Squeeze", {"u", "axes"}, {"s"})
      .Op("Abs", {"s"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(same.model), (Ops{"Relu", "Abs"}));
  ModelBuilder other;
  other.Input("x", ShapeFromDims({2, 3}))
      .Init("a1", Ints({0}))
      .Init("a2", Ints({1}))
      .Op("Unsqueeze", {"x", "a1"}, {"u"})
      .Op("Unsqueeze", {"u", "a1"}, {"u2"})
      .Op("Squeeze", {"u2", "a2"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(other.model), (Ops{"Unsqueeze", "Unsqueeze", "Squeeze"}));
}

TEST(EliminateNoOps, RemovesReshapeToTheSameShapeOnly) {
  ModelBuilder same;
  same.Input("x", Shape{Dim::Symbol("n"), Dim::Known(3)})
      .Init("shape", Ints({-1, 3}))
      .Op("Relu", {"x"}, {"r"})
      .Op("Reshape", {"r", "shape"}, {"s"})
      .Op("Abs", {"s"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(same.model), (Ops{"Relu", "Abs"}));
  ModelBuilder other = same;
  other.model.graph.initializers[0].tensor = Ints({3, -1});
  EXPECT_EQ(OpsAfter(other.model), (Ops{"Relu", "Reshape", "Abs"}));
  // -1 standing for a symbolic dim next to another symbolic dim is not provably the same.
  ModelBuilder symbolic;
  symbolic.Input("x", Shape{Dim::Symbol("n"), Dim::Symbol("m")})
      .Init("shape", Ints({0, -1}))
      .Op("Reshape", {"x", "shape"}, {"s"})
      .Op("Abs", {"s"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(symbolic.model), (Ops{"Reshape", "Abs"}));
}

TEST(EliminateNoOps, CollapsesReshapeChains) {
  ModelBuilder chain;
  chain.Input("x", ShapeFromDims({2, 3, 4}))
      .Init("axes", Ints({0}))
      .Init("s1", Ints({6, 4}))
      .Init("s2", Ints({4, -1}))
      .Op("Unsqueeze", {"x", "axes"}, {"u"})
      .Op("Flatten", {"u"}, {"f"}, {IntAttr("axis", 2)})
      .Op("Reshape", {"f", "s1"}, {"r1"})
      .Op("Reshape", {"r1", "s2"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(chain.model), (Ops{"Reshape"}));
  // numpy: np.arange(24).reshape(4, -1) is the input order unchanged.
  std::vector<float> want(24);
  for (int i = 0; i < 24; ++i) want[i] = static_cast<float>(i);
  ExpectNear(RunAt(chain.model, {{"x", Seq({2, 3, 4}, 1, 100, 0, 1)}}), {4, 6}, want);
  // A 0 entry copies a dim of the middle value: the chain stays.
  ModelBuilder copy;
  copy.Input("x", ShapeFromDims({2, 3, 4}))
      .Init("s1", Ints({6, 4}))
      .Init("s2", Ints({0, 2, 2}))
      .Op("Reshape", {"x", "s1"}, {"r1"})
      .Op("Reshape", {"r1", "s2"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(copy.model), (Ops{"Reshape", "Reshape"}));
}

TEST(EliminateNoOps, KeepsNamesThatASubgraphCaptures) {
  // The Identity's output is read inside an If branch.
  auto branch = std::make_shared<Graph>();
  branch->name = "then";
  Node neg;
  neg.name = "neg";
  neg.op_type = "Neg";
  neg.inputs = {"i"};
  neg.outputs = {"bo"};
  branch->nodes.push_back(neg);
  branch->outputs.push_back({"bo", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({3})), "", {}});
  Attribute then_attr, else_attr;
  then_attr.name = "then_branch";
  then_attr.type = AttrType::kGraph;
  then_attr.g = branch;
  else_attr = then_attr;
  else_attr.name = "else_branch";
  ModelBuilder b;
  b.Input("x", ShapeFromDims({3}))
      .Input("cond", Shape{}, DataType::kBool)
      .Op("Identity", {"x"}, {"i"})
      .Op("If", {"cond"}, {"y"}, {then_attr, else_attr})
      .Output("y");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Identity", "If"}));
}

}  // namespace
}  // namespace nee
