// MatMul, Gemm, MatMulInteger, Einsum. Expected values were computed with
// onnx.reference (numpy where noted) by nn_expected_gen.py; the case name is
// given beside each.
#include "nn_test_util.h"

namespace nee::testing {
namespace {

TEST(NnMatMul, TwoD) {
  // matmul_2d
  auto r = RunOp(MakeNode("MatMul", 2, 1), 13, {Pattern({2, 3}), Pattern({3, 4}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 4}, {1.75, 2.75, 2.5, 1, 0.25, -0.25, -2, -1.25});
}

TEST(NnMatMul, BatchedBroadcastIsThreadCountIndependent) {
  // matmul_batched_bcast
  const std::vector<float> expected = {2.5, 2.25, 0.25, -1.5, 2.25, 0.75, -1.5, -0.75, 0.75, 1.75, -0.75, -1.25,
                                       -2, 0, 1, -0.25, 0, -0.5, -0.25, -0.25, -0.5, 2.75, -0.25, -0.25};
  for (int threads : {1, 3}) {
    auto r = RunOp(MakeNode("MatMul", 2, 1), 13, {Pattern({2, 1, 2, 3}), Pattern({3, 3, 2}, 5)}, threads);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 2, 2}, expected);
  }
}

TEST(NnMatMul, OneDOperands) {
  // matmul_vec_mat, matmul_mat_vec
  auto r = RunOp(MakeNode("MatMul", 2, 1), 13, {Pattern({3}), Pattern({2, 3, 2}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 2}, {2.5, 2.25, 2.25, 0.75});
  r = RunOp(MakeNode("MatMul", 2, 1), 13, {Pattern({2, 2, 3}), Pattern({3}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 2}, {3.5, -1, -0.25, 0.5});
}

TEST(NnMatMul, Int32AndDoubleAndHalf) {
  // matmul_int32
  auto r = RunOp(MakeNode("MatMul", 2, 1), 13, {Pattern<int32_t>({2, 3}, 7, 3, 1), Pattern<int32_t>({3, 2}, 5, 3, 1)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int32_t>(r->outputs[0].tensor(), {2, 2}, {10, 9, 1, -6});
  // matmul_2d in double
  r = RunOp(MakeNode("MatMul", 2, 1), 13, {Pattern<double>({2, 3}), Pattern<double>({3, 4}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<double>(r->outputs[0].tensor(), {2, 4}, {1.75, 2.75, 2.5, 1, 0.25, -0.25, -2, -1.25});
  // matmul_2d in float16 (all values exact in half precision)
  r = RunOp(MakeNode("MatMul", 2, 1), 13,
            {HalfTensor(PatternValues(6), {2, 3}), HalfTensor(PatternValues(12, 5), {3, 4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outputs[0].tensor().dtype(), DataType::kFloat16);
  EXPECT_EQ(HalfValues(r->outputs[0].tensor()), (std::vector<float>{1.75, 2.75, 2.5, 1, 0.25, -0.25, -2, -1.25}));
}

TEST(NnMatMul, RejectsMismatchedK) {
  ExpectOpError(MakeNode("MatMul", 2, 1), 13, {Pattern({2, 3}), Pattern({4, 2})}, "K=");
  ExpectOpError(MakeNode("MatMul", 2, 1), 13, {Pattern({2, 2, 3}), Pattern({3, 3, 2})}, "broadcast");
}

TEST(NnGemm, TransposesAlphaBetaAndRowBias) {
  // gemm_trans
  Node node = MakeNode("Gemm", 3, 1, {IntAttr("transA", 1), IntAttr("transB", 1), FloatAttr("alpha", 0.5f),
                                      FloatAttr("beta", 2.0f)});
  auto r = RunOp(node, 13, {Pattern({3, 2}), Pattern({4, 3}, 5), Pattern({1, 4}, 3)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 4}, {-1.75, -2.5, -0.125, -3.25, -2.5, -2.75, -0.5, -3.75});
}

TEST(NnGemm, OptionalAndScalarC) {
  // gemm_no_c, gemm_scalar_c
  auto r = RunOp(MakeNode("Gemm", 2, 1), 13, {Pattern({2, 3}), Pattern({3, 2}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 2}, {2.5, 2.25, 0.25, -1.5});
  r = RunOp(MakeNode("Gemm", 3, 1, {FloatAttr("beta", 0.5f)}), 13,
            {Pattern({2, 3}), Pattern({3, 2}, 5), Tensor::Scalar<float>(1.5f)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 2}, {3.25, 3, 1, -0.75});
}

TEST(NnGemm, RejectsBadShapes) {
  ExpectOpError(MakeNode("Gemm", 2, 1), 13, {Pattern({2, 3}), Pattern({2, 2})}, "K=");
  ExpectOpError(MakeNode("Gemm", 3, 1), 13, {Pattern({2, 3}), Pattern({3, 2}), Pattern({3})}, "broadcast");
  ExpectOpError(MakeNode("Gemm", 2, 1), 13, {Pattern({2, 3, 1}), Pattern({3, 2})}, "2-D");
}

TEST(NnMatMulInteger, PerRowAndScalarZeroPoints) {
  // matmul_integer (numpy: (a - [[1],[2]]) @ (b + 1))
  auto r = RunOp(MakeNode("MatMulInteger", 4, 1), 10,
                 {Pattern<uint8_t>({2, 3}, 9, 0, 1), Pattern<int8_t>({3, 2}, 5, 2, 3),
                  Tensor::FromVector<uint8_t>({1, 2}, {2}), Tensor::Scalar<int8_t>(-1)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int32_t>(r->outputs[0].tensor(), {2, 2}, {12, -3, 18, -9});
}

TEST(NnEinsum, MatMulAndBatchEllipsis) {
  // einsum_matmul, einsum_batch_ellipsis
  auto r = RunOp(MakeNode("Einsum", 2, 1, {StringAttr("equation", "ij,jk->ik")}), 12, {Pattern({2, 3}), Pattern({3, 4}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 4}, {1.75, 2.75, 2.5, 1, 0.25, -0.25, -2, -1.25});
  r = RunOp(MakeNode("Einsum", 2, 1, {StringAttr("equation", "...ij,...jk->...ik")}), 12,
            {Pattern({2, 2, 3}), Pattern({2, 3, 2}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 2, 2}, {2.5, 2.25, 0.25, -1.5, 0, -0.5, -0.25, -0.25});
}

TEST(NnEinsum, DiagonalAndImplicitOutput) {
  // einsum_diag_implicit: "ii" is the trace
  auto r = RunOp(MakeNode("Einsum", 1, 1, {StringAttr("equation", "ii")}), 12, {Pattern({3, 3})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {}, {-2});
  // einsum_transpose_implicit: implicit output sorts the labels -> "ijk"
  r = RunOp(MakeNode("Einsum", 1, 1, {StringAttr("equation", "kij")}), 12, {Pattern({2, 3, 4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {3, 4, 2},
                          {-1.5, 1, -1, 1.5, -0.5, -1.5, 0, -1, 0.5, -0.5, 1, 0,
                           1.5, 0.5, -1.5, 1, -1, 1.5, -0.5, -1.5, 0, -1, 0.5, -0.5});
  // einsum_diag_extract
  r = RunOp(MakeNode("Einsum", 1, 1, {StringAttr("equation", "bii->bi")}), 12, {Pattern({2, 3, 3})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3}, {-1.5, 0.5, -1, -0.5, 1.5, 0});
  // einsum_outer_sum
  r = RunOp(MakeNode("Einsum", 2, 1, {StringAttr("equation", "i,j->")}), 12, {Pattern({3}), Pattern({4}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {}, {9});
}

TEST(NnEinsum, RejectsBadEquations) {
  ExpectOpError(MakeNode("Einsum", 1, 1, {StringAttr("equation", "ij->ik")}), 12, {Pattern({2, 3})}, "output label");
  ExpectOpError(MakeNode("Einsum", 1, 1, {StringAttr("equation", "ijk->i")}), 12, {Pattern({2, 3})}, "rank");
  ExpectOpError(MakeNode("Einsum", 2, 1, {StringAttr("equation", "ij,jk")}), 12, {Pattern({2, 3}), Pattern({4, 2})},
                "label");
  ExpectOpError(MakeNode("Einsum", 1, 1, {StringAttr("equation", "i$->i")}), 12, {Pattern({2, 3})}, "invalid");
}

}  // namespace
}  // namespace nee::testing

namespace nee::testing {
namespace {

TEST(NnMatMulShape, SymbolicBatchAndUnknownRank) {
  auto r = InferOnly(MakeNode("MatMul", 2, 1), 13,
                     {FloatType({Dim::Symbol("batch"), Dim::Known(1), Dim::Known(4), Dim::Unknown()}),
                      FloatType({Dim::Known(3), Dim::Known(5), Dim::Known(6)})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ShapeToString(*(*r)[0].shape), "[batch,3,4,6]");
  r = InferOnly(MakeNode("MatMul", 2, 1), 13, {TypeInfo::Tensor(DataType::kFloat), FloatType({Dim::Known(3), Dim::Known(5)})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE((*r)[0].shape.has_value());
  r = InferOnly(MakeNode("MatMul", 2, 1), 13, {FloatType({Dim::Known(2), Dim::Known(4)}), FloatType({Dim::Known(3), Dim::Known(5)})});
  EXPECT_FALSE(r.ok());
}

TEST(NnGemmShape, TransposedSymbolic) {
  auto r = InferOnly(MakeNode("Gemm", 3, 1, {IntAttr("transA", 1)}), 13,
                     {FloatType({Dim::Known(3), Dim::Symbol("m")}), FloatType({Dim::Known(3), Dim::Known(7)}),
                      FloatType({Dim::Known(7)})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ShapeToString(*(*r)[0].shape), "[m,7]");
}

TEST(NnEinsumShape, SymbolicDimsFollowLabels) {
  auto r = InferOnly(MakeNode("Einsum", 2, 1, {StringAttr("equation", "bij,bjk->bik")}), 12,
                     {FloatType({Dim::Symbol("b"), Dim::Known(2), Dim::Unknown()}),
                      FloatType({Dim::Unknown(), Dim::Known(3), Dim::Known(5)})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ShapeToString(*(*r)[0].shape), "[b,2,5]");
}

}  // namespace
}  // namespace nee::testing

namespace nee::testing {
namespace {

TEST(NnMatMul, EmptyInnerDimGivesZeros) {
  // numpy: np.zeros((2, 0)) @ np.zeros((0, 3)) == np.zeros((2, 3))
  auto r = RunOp(MakeNode("MatMul", 2, 1), 13, {Pattern({2, 0}), Pattern({0, 3})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3}, {0, 0, 0, 0, 0, 0});
}

}  // namespace
}  // namespace nee::testing
