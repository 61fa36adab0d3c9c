// Attention, RotaryEmbedding, SwiGLU, LinearAttention, CausalConvWithState
// and FlexAttention. Expected values were computed with onnx.reference
// (onnx 1.23.2) by attention_expected_gen.py on the same Pattern() inputs.
#include <cmath>
#include <limits>

#include "nn_test_util.h"

namespace nee::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Like ExpectTensorNear, but infinities must match exactly.
void ExpectFloats(const Tensor& actual, const std::vector<int64_t>& dims, const std::vector<float>& expected,
                  double tol = 1e-5) {
  ASSERT_EQ(actual.dtype(), DataType::kFloat);
  ASSERT_EQ(actual.dims(), dims);
  ASSERT_EQ(static_cast<size_t>(actual.num_elements()), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const float a = actual.data<float>()[i];
    if (std::isinf(expected[i])) EXPECT_EQ(a, expected[i]) << "at " << i;
    else EXPECT_NEAR(a, expected[i], tol * (1 + std::fabs(expected[i]))) << "at " << i;
  }
}

Tensor Int64s(const std::vector<int64_t>& v, std::vector<int64_t> dims) { return Tensor::FromVector<int64_t>(v, std::move(dims)); }

// ---- Attention ----------------------------------------------------------------------

TEST(Attention, FourDWithBroadcastFloatMaskAndRawScores) {
  Node node = MakeNode("Attention", 4, 4);
  node.outputs[1] = node.outputs[2] = "";
  auto r = RunOp(node, 23, {Pattern({1, 2, 2, 3}), Pattern({1, 2, 3, 3}, 5, 2, 0.25), Pattern({1, 2, 3, 2}, 4, 1, 0.5),
                            Pattern({2, 3}, 3, 1, 0.5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectFloats(r->outputs[0].tensor(), {1, 2, 2, 2},
               {-0.310688823, 0.189311177, -0.240421593, 0.259578407, 0.332252651, 0.832252622, 0.17442897, 0.674428999});
  ExpectFloats(r->outputs[3].tensor(), {1, 2, 2, 3},
               {0.577350199, -0.360843867, 0.14433755, -0.0721687824, -0.14433755, 0.144337565, 1.01036286, -0.505181432,
                -0.216506332, -0.216506347, 0.144337565, 0.144337565});
}

TEST(Attention, ThreeDGroupedQueryCausalWithPastAndProbabilities) {
  Node node = MakeNode("Attention", 6, 4,
                       {IntAttr("q_num_heads", 4), IntAttr("kv_num_heads", 2), IntAttr("is_causal", 1),
                        IntAttr("qk_matmul_output_mode", 3)});
  node.inputs[3] = "";
  auto r = RunOp(node, 23, {Pattern({1, 2, 8}), Pattern({1, 2, 4}, 5, 2, 0.25), Pattern({1, 2, 6}, 4, 1, 0.5), Value(),
                            Pattern({1, 2, 1, 2}, 3, 1, 0.5), Pattern({1, 2, 1, 3}, 6, 2, 0.25)},
                 /*num_threads=*/3);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectFloats(r->outputs[0].tensor(), {1, 2, 12},
               {-0.5, -0.113980137, 0.272039711, -0.5, -0.125, 0.25, 0.690609217, -0.0874789953, 0.309390754, 0.407388031,
                0.290149242, 0.592611909, -0.280511171, 0.126233876, 0.0940012857, -0.195657969, 0.213544279, 0.0140624791,
                0.507835984, 0.0624731779, 0.492164016, 0.351545751, 0.218763411, 0.648454249});
  ExpectFloats(r->outputs[1].tensor(), {1, 2, 3, 2}, {-0.5, 0, -0.5, -0.25, 0.5, -0.5, 0.5, -0.5, 0, 0.25, -0.25, 0});
  ExpectFloats(r->outputs[2].tensor(), {1, 2, 3, 3},
               {-0.5, -0.25, 0, -0.5, 0, 0.5, 0.5, 1, -0.5, 0.25, 0.5, 0.75, 1, -0.5, 0, 0, 0.5, 1});
  ExpectFloats(r->outputs[3].tensor(), {1, 4, 2, 3},
               {0.455920547, 0.544079423, 0, 0.373019785, 0.407491386, 0.219488814, 0.5, 0.5, 0, 0.363191009, 0.33246699,
                0.304342031, 0.412521005, 0.587478995, 0, 0.281236589, 0.437526822, 0.281236589, 0.790149212, 0.209850743,
                0, 0.281236589, 0.281236589, 0.437526822});
}

TEST(Attention, BoolMaskFullyMaskedRowIsZeroWithSoftcapAndScale) {
  Tensor mask = Tensor::FromVector<bool>({true, false, true, false, false, false}, {2, 3});
  auto r = RunOp(MakeNode("Attention", 4, 1, {FloatAttr("softcap", 1.5), FloatAttr("scale", 0.7)}), 23,
                 {Pattern({1, 1, 2, 2}), Pattern({1, 1, 3, 2}, 5, 2, 0.75), Pattern({1, 1, 3, 2}, 4, 1, 0.5), mask});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectFloats(r->outputs[0].tensor(), {1, 1, 2, 2}, {-0.5, 0, 0, 0});
}

TEST(Attention, Opset24NonpadKvSeqlenShiftsTheCausalFrontierPerBatch) {
  Node node = MakeNode("Attention", 7, 1, {IntAttr("is_causal", 1)});
  node.inputs[3] = node.inputs[4] = node.inputs[5] = "";
  auto r = RunOp(node, 24, {Pattern({2, 1, 2, 2}), Pattern({2, 1, 4, 2}, 5, 2, 0.5), Pattern({2, 1, 4, 2}, 4, 1, 0.5),
                            Value(), Value(), Value(), Int64s({3, 1}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Batch 1 has offset 1 - 2 = -1: its first query sees no key and is zero.
  ExpectFloats(r->outputs[0].tensor(), {2, 1, 2, 2},
               {-0.35417974, 0.145820245, -0.18013382, 0.319866151, 0, 0, -0.5, 0});
}

TEST(Attention, ExtremeNonpadLengthsDoNotOverflow) {
  // INT64_MAX: every key valid and the causal frontier beyond all keys, so
  // batch 0 equals the plain (unmasked) run; INT64_MIN: no valid key, zeros.
  Node node = MakeNode("Attention", 7, 1, {IntAttr("is_causal", 1)});
  node.inputs[3] = node.inputs[4] = node.inputs[5] = "";
  auto r = RunOp(node, 24, {Pattern({2, 1, 2, 2}), Pattern({2, 1, 4, 2}, 5, 2, 0.5), Pattern({2, 1, 4, 2}, 4, 1, 0.5),
                            Value(), Value(), Value(),
                            Int64s({std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectFloats(r->outputs[0].tensor(), {2, 1, 2, 2}, {-0.167224392, 0.332775593, 0.00776183605, 0.507761836, 0, 0, 0, 0});
}

TEST(Attention, Opset25SlidingWindowWithShortMask) {
  Node node = MakeNode("Attention", 4, 4,
                       {IntAttr("left_window_size", 1), IntAttr("right_window_size", 1), IntAttr("qk_matmul_output_mode", 2)});
  node.outputs[1] = node.outputs[2] = "";
  auto r = RunOp(node, 25, {Pattern({1, 1, 4, 2}), Pattern({1, 1, 5, 2}, 5, 2, 0.5), Pattern({1, 1, 5, 2}, 4, 1, 0.5),
                            Pattern({4, 4}, 3, 1, 0.5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectFloats(r->outputs[0].tensor(), {1, 1, 4, 2},
               {-0.280360281, 0.219639733, -0.0287670381, 0.471232951, 0.261770844, 0.761770844, -0.474708021, 0.0252919775});
  ExpectFloats(r->outputs[3].tensor(), {1, 1, 4, 5},
               {0.914213657, -0.353553414, -kInf, -kInf, -kInf, 0.353553414, 0.5, -0.853553414, -kInf, -kInf, -kInf,
                -0.146446586, -0.353553385, 0.323223293, -kInf, -kInf, -kInf, 2.62132049, -1.03033018, -kInf});
}

TEST(Attention, Float16FollowsFloatWithinHalfPrecision) {
  // The float case of FourDWithBroadcastFloatMaskAndRawScores run in float16:
  // the inputs are exact in float16, so only rounding of intermediates differs.
  auto half_of = [](const Tensor& t) {
    std::vector<float> v(t.data<float>(), t.data<float>() + t.num_elements());
    return HalfTensor(v, t.dims());
  };
  auto r = RunOp(MakeNode("Attention", 4, 1), 23,
                 {half_of(Pattern({1, 2, 2, 3})), half_of(Pattern({1, 2, 3, 3}, 5, 2, 0.25)),
                  half_of(Pattern({1, 2, 3, 2}, 4, 1, 0.5)), half_of(Pattern({2, 3}, 3, 1, 0.5))});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->outputs[0].tensor().dtype(), DataType::kFloat16);
  const std::vector<float> expected = {-0.310688823, 0.189311177, -0.240421593, 0.259578407,
                                       0.332252651, 0.832252622, 0.17442897, 0.674428999};
  std::vector<float> got = HalfValues(r->outputs[0].tensor());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(got[i], expected[i], 3e-3) << "at " << i;
}

TEST(Attention, ResultsDoNotDependOnThreadCount) {
  Node node = MakeNode("Attention", 3, 1, {IntAttr("q_num_heads", 6), IntAttr("kv_num_heads", 3), IntAttr("is_causal", 1)});
  std::vector<Value> in = {Pattern({3, 5, 24}, 11, 5, 0.2), Pattern({3, 7, 12}, 13, 6, 0.15), Pattern({3, 7, 9}, 9, 4, 0.3)};
  auto one = RunOp(node, 23, in, 1);
  auto four = RunOp(node, 23, in, 4);
  ASSERT_TRUE(one.ok() && four.ok());
  const Tensor& a = one->outputs[0].tensor();
  const Tensor& b = four->outputs[0].tensor();
  ASSERT_EQ(a.dims(), (std::vector<int64_t>{3, 5, 18}));
  for (int64_t i = 0; i < a.num_elements(); ++i) ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]) << "at " << i;
}

TEST(Attention, ShapeRuleHandlesSymbolicDims) {
  Node node = MakeNode("Attention", 6, 4, {IntAttr("q_num_heads", 8), IntAttr("kv_num_heads", 2)});
  node.inputs[3] = "";
  auto types = InferOnly(node, 23,
                         {FloatType({Dim::Symbol("b"), Dim::Symbol("s"), Dim::Known(64)}),
                          FloatType({Dim::Symbol("b"), Dim::Symbol("s"), Dim::Known(16)}),
                          FloatType({Dim::Symbol("b"), Dim::Symbol("s"), Dim::Known(32)}), TypeInfo{},
                          FloatType({Dim::Symbol("b"), Dim::Known(2), Dim::Known(5), Dim::Known(8)}),
                          FloatType({Dim::Symbol("b"), Dim::Known(2), Dim::Known(5), Dim::Known(16)})});
  ASSERT_TRUE(types.ok()) << types.status().ToString();
  EXPECT_EQ(ShapeToString(*(*types)[0].shape), "[b,s,128]");
  EXPECT_EQ(ShapeToString(*(*types)[1].shape), "[b,2,?,8]");
  EXPECT_EQ(ShapeToString(*(*types)[2].shape), "[b,2,?,16]");
  EXPECT_EQ(ShapeToString(*(*types)[3].shape), "[b,8,s,?]");
}

TEST(Attention, RejectsInconsistentShapes) {
  // 3-D inputs without the head counts.
  ExpectOpError(MakeNode("Attention", 3, 1), 23, {Pattern({1, 2, 8}), Pattern({1, 2, 8}), Pattern({1, 2, 8})},
                "q_num_heads");
  // Head sizes of Q and K differ.
  ExpectOpError(MakeNode("Attention", 3, 1), 23, {Pattern({1, 2, 2, 4}), Pattern({1, 2, 3, 3}), Pattern({1, 2, 3, 4})},
                "head size");
  // q heads not a multiple of kv heads.
  ExpectOpError(MakeNode("Attention", 3, 1), 23, {Pattern({1, 3, 2, 4}), Pattern({1, 2, 3, 4}), Pattern({1, 2, 3, 4})},
                "multiple");
  // K and V sequence lengths differ.
  ExpectOpError(MakeNode("Attention", 3, 1), 23, {Pattern({1, 2, 2, 4}), Pattern({1, 2, 3, 4}), Pattern({1, 2, 4, 4})},
                "sequence length");
  // A mask that does not broadcast, and one longer than the keys.
  ExpectOpError(MakeNode("Attention", 4, 1), 23,
                {Pattern({1, 2, 2, 4}), Pattern({1, 2, 3, 4}), Pattern({1, 2, 3, 4}), Pattern({3, 3})}, "broadcast");
  ExpectOpError(MakeNode("Attention", 4, 1), 23,
                {Pattern({1, 2, 2, 4}), Pattern({1, 2, 3, 4}), Pattern({1, 2, 3, 4}), Pattern({2, 4})}, "exceeds");
  // past_key without past_value.
  Node node = MakeNode("Attention", 5, 1);
  node.inputs[3] = "";
  ExpectOpError(node, 23, {Pattern({1, 2, 2, 4}), Pattern({1, 2, 3, 4}), Pattern({1, 2, 3, 4}), Value(), Pattern({1, 2, 1, 4})},
                "together");
  // nonpad_kv_seqlen of the wrong length.
  Node np = MakeNode("Attention", 7, 1);
  np.inputs[3] = np.inputs[4] = np.inputs[5] = "";
  ExpectOpError(np, 24, {Pattern({2, 1, 2, 2}), Pattern({2, 1, 4, 2}), Pattern({2, 1, 4, 2}), Value(), Value(), Value(),
                         Int64s({3}, {1})},
                "nonpad_kv_seqlen");
  // Opset 25 forbids head-count attributes on 4-D inputs.
  ExpectOpError(MakeNode("Attention", 3, 1, {IntAttr("q_num_heads", 2), IntAttr("kv_num_heads", 2)}), 25,
                {Pattern({1, 2, 2, 4}), Pattern({1, 2, 3, 4}), Pattern({1, 2, 3, 4})}, "4-D");
}

// ---- RotaryEmbedding -------------------------------------------------------------------

TEST(RotaryEmbedding, ThreeDInterleavedPartialWithPositionIds) {
  auto r = RunOp(MakeNode("RotaryEmbedding", 4, 1,
                          {IntAttr("num_heads", 2), IntAttr("interleaved", 1), IntAttr("rotary_embedding_dim", 2)}),
                 23, {Pattern({1, 2, 8}), Pattern({4, 1}, 5, 2, 0.3), Pattern({4, 1}, 3, 1, 0.4), Int64s({3, 1}, {1, 2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectFloats(r->outputs[0].tensor(), {1, 2, 8},
               {-0.850000024, 0.300000012, -0.5, 0, 0.550000012, 0.100000009, 1.5, -1.5, 0.300000012, 0.150000006, 0, 0.5,
                -0.300000012, -0.450000018, -1.5, -1});
}

TEST(RotaryEmbedding, FourDHalvesWithoutPositionIds) {
  auto r = RunOp(MakeNode("RotaryEmbedding", 3, 1), 23,
                 {Pattern({1, 2, 2, 4}), Pattern({1, 2, 2}, 5, 2, 0.3), Pattern({1, 2, 2}, 3, 1, 0.4)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectFloats(r->outputs[0].tensor(), {1, 2, 2, 4},
               {0.700000048, 0.300000012, 0.900000036, -0, -0.600000024, -0.300000012, 0.200000003, -0.850000024,
                0.600000024, 0.150000006, 0.400000006, -0.150000006, 0.600000024, 0.0500000119, 0.400000006, -0.900000036});
}

TEST(RotaryEmbedding, RejectsBadPositionsAndCaches) {
  ExpectOpError(MakeNode("RotaryEmbedding", 4, 1, {IntAttr("num_heads", 2)}), 23,
                {Pattern({1, 2, 8}), Pattern({4, 2}), Pattern({4, 2}), Int64s({3, 4}, {1, 2})}, "position id 4");
  ExpectOpError(MakeNode("RotaryEmbedding", 4, 1, {IntAttr("num_heads", 2)}), 23,
                {Pattern({1, 2, 8}), Pattern({4, 3}), Pattern({4, 3}), Int64s({0, 1}, {1, 2})}, "cache");
  ExpectOpError(MakeNode("RotaryEmbedding", 3, 1), 23, {Pattern({1, 2, 8}), Pattern({1, 2, 2}), Pattern({1, 2, 2})},
                "num_heads");
  ExpectOpError(MakeNode("RotaryEmbedding", 3, 1, {IntAttr("rotary_embedding_dim", 3)}), 23,
                {Pattern({1, 1, 2, 4}), Pattern({1, 2, 1}), Pattern({1, 2, 1})}, "even");
}

// ---- SwiGLU ----------------------------------------------------------------------------

TEST(SwiGLU, AlphaScalesTheGate) {
  auto r = RunOp(MakeNode("SwiGLU", 2, 1, {FloatAttr("alpha", 1.5)}), 28, {Pattern({2, 3}), Pattern({2, 3}, 5, 2, 0.25)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectFloats(r->outputs[0].tensor(), {2, 3}, {0.0715121031, 0.0456063822, -0, 0, 0.169794679, -0.408787251});
  ExpectOpError(MakeNode("SwiGLU", 2, 1), 28, {Pattern({2, 3}), Pattern({3})}, "broadcast");
}

// ---- LinearAttention -------------------------------------------------------------------

TEST(LinearAttention, GatedDeltaWithGroupedHeadsAndPastState) {
  auto r = RunOp(MakeNode("LinearAttention", 6, 2,
                          {IntAttr("q_num_heads", 2), IntAttr("kv_num_heads", 1), StringAttr("update_rule", "gated_delta")}),
                 27,
                 {Pattern({1, 3, 4}), Pattern({1, 3, 2}, 5, 2, 0.25), Pattern({1, 3, 3}, 4, 1, 0.5),
                  Pattern({1, 1, 2, 3}, 3, 1, 0.1), Pattern({1, 3, 1}, 3, 2, 0.2), Pattern({1, 3, 1}, 4, 0, 0.25)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectFloats(r->outputs[0].tensor(), {1, 3, 6},
               {0.118496962, 0, -0.118496962, 0.0236993916, 0, -0.0236993916, -0.01340973, -0.0220970865, 0.0576039031,
                -0.0672007948, 0.0331456289, 0.000909534283, -0.0111842146, -0.0759587362, -0.0136750089, -0.0439973585,
                -0.0980558246, 0.0633323118});
  ExpectFloats(r->outputs[1].tensor(), {1, 1, 2, 3},
               {0.0780385286, 0.24609375, -0.0702260286, -0.124443322, -0.27734375, 0.179130822});
}

TEST(LinearAttention, UpdateRuleDecidesRequiredInputs) {
  Node node = MakeNode("LinearAttention", 3, 2, {IntAttr("q_num_heads", 1), IntAttr("kv_num_heads", 1)});
  ExpectOpError(node, 27, {Pattern({1, 2, 2}), Pattern({1, 2, 2}), Pattern({1, 2, 2})}, "decay is required");
  Node bad = MakeNode("LinearAttention", 3, 2,
                      {IntAttr("q_num_heads", 3), IntAttr("kv_num_heads", 2), StringAttr("update_rule", "linear")});
  ExpectOpError(bad, 27, {Pattern({1, 2, 6}), Pattern({1, 2, 4}), Pattern({1, 2, 4})}, "multiple");
}

// ---- CausalConvWithState ---------------------------------------------------------------

TEST(CausalConvWithState, BiasPastStateAndSilu) {
  auto r = RunOp(MakeNode("CausalConvWithState", 4, 2, {StringAttr("activation", "silu")}), 27,
                 {Pattern({1, 2, 3}), Pattern({2, 1, 3}, 5, 2, 0.5), Pattern({2}, 3, 1, 0.5), Pattern({1, 2, 2}, 4, 1, 0.5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectFloats(r->outputs[0].tensor(), {1, 2, 3}, {0, 0.140544131, 1.22636175, 0.971624851, 0, -0.188770339});
  ExpectFloats(r->outputs[1].tensor(), {1, 2, 2}, {-1, -0.5, 0.5, 1});
  ExpectOpError(MakeNode("CausalConvWithState", 4, 2), 27,
                {Pattern({1, 2, 3}), Pattern({2, 1, 3}), Value(), Pattern({1, 2, 3})}, "past_state");
}

// ---- FlexAttention ---------------------------------------------------------------------

TEST(FlexAttention, GroupedHeadsWithScale) {
  auto r = RunOp(MakeNode("FlexAttention", 3, 1, {FloatAttr("scale", 0.5)}, "ai.onnx.preview"), 1,
                 {Pattern({1, 2, 2, 2}), Pattern({1, 1, 3, 2}, 5, 2, 0.5), Pattern({1, 1, 3, 3}, 4, 1, 0.5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectFloats(r->outputs[0].tensor(), {1, 2, 2, 3},
               {-0.0446549803, 0.091068998, 0.226792976, 0.244018987, 0.0910273045, 0.0824768692, 0.513292372,
                0.0512438416, -0.0322680995, 0.441320181, 0.706600904, -0.323960543});
}

}  // namespace
}  // namespace nee::testing
