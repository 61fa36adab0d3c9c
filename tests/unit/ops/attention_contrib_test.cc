// ONNX Runtime's com.microsoft Attention, MultiHeadAttention and RotaryEmbedding (attention_contrib.cc).
//
// Expected values: onnxruntime 1.32 (the reference implementation of these contrib ops) running one-node
// models on its CPU provider, printed by attention_contrib_expected_gen.py (venv python). Inputs are the
// exact pattern Pattern(dims, seed) (multiples of 1/16) which that script builds with the same formula.
#include <gtest/gtest.h>

#include <cmath>

#include "nn_test_util.h"
#include "op_test_util.h"

namespace nee::testing {
namespace {

constexpr const char* kMs = "com.microsoft";

// ((i * 7 + seed * 5) % 23 - 11) / 16, as Pattern() in attention_contrib_expected_gen.py.
Tensor Pattern(std::vector<int64_t> dims, int seed) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(((i * 7 + seed * 5) % 23 - 11) / 16.0);
  return Tensor::FromVector<float>(v, std::move(dims));
}

Tensor Ints(std::vector<int32_t> v, std::vector<int64_t> dims) { return Tensor::FromVector<int32_t>(v, std::move(dims)); }

Node AttentionNode(size_t inputs, size_t outputs, std::vector<Attribute> extra = {}) {
  extra.push_back(IntAttr("num_heads", 2));
  return MakeNode("Attention", inputs, outputs, extra, kMs);
}

// B = 2, S = 3, input hidden 4, 2 heads of 2.
struct AttentionInputs {
  Tensor x = Pattern({2, 3, 4}, 1), w = Pattern({4, 12}, 2), bias = Pattern({12}, 3);
};

TEST(AttentionContrib, PlainWithBias) {
  AttentionInputs a;
  auto r = RunOp(AttentionNode(3, 1), 1, {a.x, a.w, a.bias});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Attention plain
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {-0.6323493f, 0.1880573f, 0.1042361f, -0.7673596f, -0.4595164f, 0.1484622f, 0.05896439f, -0.7083926f, -0.4559139f, 0.1481669f, 0.03597089f, -0.678449f, -0.5367584f, -0.3490702f, 0.5186355f, -0.7594226f, -0.8093624f, -0.09169488f, 0.5260944f, -1.029146f, -0.8202345f, -0.08166467f, 0.5246573f, -0.9725809f}, 1e-5);
}

TEST(AttentionContrib, NoBias) {
  AttentionInputs a;
  auto r = RunOp(AttentionNode(2, 1), 1, {a.x, a.w});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Attention no bias
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {-0.1659519f, 0.3368017f, -0.2118847f, -0.075145f, 0.02837235f, 0.2936961f, -0.2568394f, -0.01659256f, 0.03344674f, 0.293073f, -0.2796189f, 0.01307127f, -0.1781649f, -0.03189356f, 0.2079848f, -0.1348493f, -0.4258617f, 0.200376f, 0.2150011f, -0.3895267f, -0.4348961f, 0.2085703f, 0.2137323f, -0.3385118f}, 1e-5);
}

TEST(AttentionContrib, KeyLengthMask) {
  AttentionInputs a;
  auto r = RunOp(AttentionNode(4, 1), 1, {a.x, a.w, a.bias, Ints({2, 3}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Attention 1-D key lengths [2, 3]
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {-0.8597122f, 0.2589703f, 0.2335894f, -0.9377821f, -0.6866925f, 0.2309347f, 0.1801637f, -0.8684224f, -0.6776114f, 0.2294632f, 0.1511042f, -0.830696f, -0.5367584f, -0.3490702f, 0.5186355f, -0.7594226f, -0.8093624f, -0.09169488f, 0.5260944f, -1.029146f, -0.8202345f, -0.08166467f, 0.5246573f, -0.9725809f}, 1e-5);
}

TEST(AttentionContrib, EndStartMask) {
  AttentionInputs a;
  auto r = RunOp(AttentionNode(4, 1), 1, {a.x, a.w, a.bias, Ints({3, 2, 1, 0}, {4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Attention 1-D end/start [3, 2, 1, 0]
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {-0.281054f, 0.111381f, -0.1566014f, -0.4272074f, -0.2755208f, 0.1078598f, -0.1560756f, -0.4279959f, -0.2769978f, 0.1087997f, -0.1558044f, -0.4284028f, -0.3424385f, -0.5431093f, 0.5195659f, -0.5921028f, -0.6363443f, -0.2719462f, 0.5322549f, -0.8693075f, -0.6527074f, -0.2568492f, 0.529285f, -0.8044271f}, 1e-5);
}

TEST(AttentionContrib, KeyLengthsBeyondTheSequenceAreClamped) {
  AttentionInputs a;
  auto r = RunOp(AttentionNode(4, 1), 1, {a.x, a.w, a.bias, Ints({9, 3}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Attention 1-D too long [9, 3]
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {-0.6323493f, 0.1880573f, 0.1042361f, -0.7673596f, -0.4595164f, 0.1484622f, 0.05896439f, -0.7083926f, -0.4559139f, 0.1481669f, 0.03597089f, -0.678449f, -0.5367584f, -0.3490702f, 0.5186355f, -0.7594226f, -0.8093624f, -0.09169488f, 0.5260944f, -1.029146f, -0.8202345f, -0.08166467f, 0.5246573f, -0.9725809f}, 1e-5);
}

TEST(AttentionContrib, StartPastEndMasksEverything) {
  AttentionInputs a;
  auto r = RunOp(AttentionNode(4, 1), 1, {a.x, a.w, a.bias, Ints({3, 2, 5, 1}, {4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Attention 1-D end/start start past end [3, 2, 5, 1]
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {-0.6322914f, 0.1880387f, 0.1042825f, -0.7674199f, -0.4594553f, 0.1484452f, 0.05893653f, -0.7083558f, -0.4559279f, 0.1481762f, 0.03597488f, -0.6784546f, -1.367188f, 0.4023438f, 0.5546875f, -1.359375f, -1.367188f, 0.4023438f, 0.5546875f, -1.359375f, -1.367188f, 0.4023438f, 0.5546875f, -1.359375f}, 1e-5);
}

TEST(AttentionContrib, ZeroLengthsMaskEverything) {
  AttentionInputs a;
  auto r = RunOp(AttentionNode(4, 1), 1, {a.x, a.w, a.bias, Ints({0, 0}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Attention 1-D zero lengths [0, 0]
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {-0.6322914f, 0.1880387f, 0.1042825f, -0.7674199f, -0.4594553f, 0.1484452f, 0.05893653f, -0.7083558f, -0.4559279f, 0.1481762f, 0.03597488f, -0.6784546f, -0.5368837f, -0.3489526f, 0.5186366f, -0.7594131f, -0.809348f, -0.09170479f, 0.5260997f, -1.029124f, -0.8202686f, -0.08163426f, 0.5246554f, -0.9726296f}, 1e-5);
}

TEST(AttentionContrib, KeyPaddingMask2D) {
  AttentionInputs a;
  auto r = RunOp(AttentionNode(4, 1), 1, {a.x, a.w, a.bias, Ints({1, 1, 0, 0, 1, 1}, {2, 3})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Attention 2-D mask
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {-0.8597122f, 0.2589703f, 0.2335894f, -0.9377821f, -0.6866925f, 0.2309347f, 0.1801637f, -0.8684224f, -0.6776114f, 0.2294632f, 0.1511042f, -0.830696f, -1.240401f, 0.3216611f, 0.5351342f, -1.330045f, -1.252818f, 0.3295633f, 0.5346422f, -1.329307f, -1.254305f, 0.3305097f, 0.5349134f, -1.329714f}, 1e-5);
}

TEST(AttentionContrib, DummyMask2DIsNoMask) {
  AttentionInputs a;
  auto r = RunOp(AttentionNode(4, 1), 1, {a.x, a.w, a.bias, Ints({0, 0}, {2, 1})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Attention 2-D dummy mask [2,1] zeros
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {-0.6323493f, 0.1880573f, 0.1042361f, -0.7673596f, -0.4595164f, 0.1484622f, 0.05896439f, -0.7083926f, -0.4559139f, 0.1481669f, 0.03597089f, -0.678449f, -0.5367584f, -0.3490702f, 0.5186355f, -0.7594226f, -0.8093624f, -0.09169488f, 0.5260944f, -1.029146f, -0.8202345f, -0.08166467f, 0.5246573f, -0.9725809f}, 1e-5);
}

TEST(AttentionContrib, Mask3D) {
  AttentionInputs a;
  auto r = RunOp(AttentionNode(4, 1), 1, {a.x, a.w, a.bias, Ints({1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0}, {2, 3, 3})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Attention 3-D mask
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {-0.7336233f, 0.1899581f, 0.2098856f, -0.9034266f, -0.6866925f, 0.2309347f, 0.1801637f, -0.8684224f, -0.2769978f, 0.1087997f, -0.1558044f, -0.4284028f, -0.5367584f, -0.3490702f, 0.5186355f, -0.7594226f, -1.152344f, 0.265625f, 0.515625f, -1.300781f, -0.0546875f, -0.8085938f, 0.5039062f, -0.25f}, 1e-5);
}

TEST(AttentionContrib, Mask3DUnidirectionalFilterValue) {
  AttentionInputs a;
  auto r = RunOp(AttentionNode(4, 1, {IntAttr("unidirectional", 1), FloatAttr("mask_filter_value", -50.0f)}), 1, {a.x, a.w, a.bias, Ints({1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0}, {2, 3, 3})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Attention 3-D mask mask_filter_value=-50 unidirectional
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {-1.238281f, 0.3203125f, 0.53125f, -1.324219f, -0.6866925f, 0.2309347f, 0.1801637f, -0.8684224f, -0.2769978f, 0.1087997f, -0.1558044f, -0.4284028f, -0.0546875f, -0.8085938f, 0.5039062f, -0.25f, -0.6363435f, -0.2719469f, 0.5322548f, -0.8693074f, -0.0546875f, -0.8085938f, 0.5039062f, -0.25f}, 1e-5);
}

TEST(AttentionContrib, PastUnidirectionalMaskAndPresent) {
  AttentionInputs a;
  auto r = RunOp(AttentionNode(5, 2, {IntAttr("unidirectional", 1)}), 1, {a.x, a.w, a.bias, Ints({1, 0, 1, 1, 1, 1, 1, 1, 1, 0}, {2, 5}), Pattern({2, 2, 2, 2, 2}, 4)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Attention past + unidirectional + 2-D mask [B, P+S], present
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {-0.4368887f, -0.1492686f, 0.5961342f, -0.9040937f, -0.3017102f, -0.07943748f, 0.3500483f, -0.6822685f, -0.2610637f, -0.03314151f, 0.2353263f, -0.5664756f, -0.04604619f, -0.4891613f, -0.05421526f, -0.115074f, -0.3146012f, -0.2961419f, 0.1301834f, -0.4352444f, -0.3237439f, -0.2843736f, 0.09033336f, -0.3953209f}, 1e-5);
  ExpectTensorNear<float>(r->outputs[1].tensor(), {2, 2, 2, 5, 2},
                          {0.5625f, -0.4375f, 0.0f, 0.4375f, 0.703125f, -1.152344f, -0.01171875f, -0.3320312f, 0.2617188f, 0.0390625f, -0.5625f, -0.125f, 0.3125f, -0.6875f, 0.40625f, 0.6171875f, 0.2460938f, -0.07421875f, 0.265625f, 0.04296875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.8945312f, 0.140625f, 0.5390625f, -1.375f, 0.8125f, -1.003906f, 0.0625f, 0.5f, -0.5f, -0.0625f, -0.6132812f, 0.6992188f, 0.3945312f, 0.546875f, 0.4140625f, 0.6640625f, 0.375f, -0.625f, -0.1875f, 0.25f, -1.238281f, 0.3203125f, -0.3945312f, 0.1835938f, -0.1796875f, 0.046875f, 0.6875f, -0.3125f, 0.125f, 0.5625f, 0.53125f, -1.324219f, -0.1367188f, -0.4570312f, -0.1757812f, -0.3984375f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.0546875f, -0.8085938f, -1.367188f, 0.4023438f, -1.152344f, 0.265625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.5039062f, -0.25f, 0.5546875f, -1.359375f, 0.515625f, -1.300781f}, 1e-5);
}

TEST(AttentionContrib, AttentionBiasBroadcastWithMask) {
  AttentionInputs a;
  auto r = RunOp(AttentionNode(6, 1), 1, {a.x, a.w, a.bias, Ints({2, 3}, {2}), Value(), Pattern({1, 2, 3, 3}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Attention attention_bias [1,N,S,T] + 1-D mask
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {-0.7677968f, 0.2440766f, 0.3788052f, -1.126308f, -0.6095473f, 0.2184343f, 0.3378298f, -1.073112f, -0.8826363f, 0.2626849f, 0.08260106f, -0.7417622f, -0.734754f, -0.1563477f, 0.5118809f, -0.5668653f, -0.9633183f, 0.06006157f, 0.5185214f, -0.840529f, -0.5904929f, -0.2965627f, 0.5311875f, -0.9941294f}, 1e-5);
}

TEST(AttentionContrib, QkvHiddenSizesAndScale) {
  AttentionInputs a;
  auto r = RunOp(AttentionNode(3, 1, {IntsAttr("qkv_hidden_sizes", {4, 4, 6}), FloatAttr("scale", 0.3f)}), 1,
                 {a.x, Pattern({4, 14}, 6), Pattern({14}, 7)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Attention qkv_hidden_sizes [4,4,6] scale 0.3
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 6},
                          {0.4477421f, -0.4897397f, 0.1899659f, 0.8454893f, -0.6956536f, 0.1080218f, 0.4425194f, -0.482837f, 0.2089942f, 0.8710827f, -0.6863808f, 0.08158541f, 0.4420641f, -0.4822204f, 0.2106825f, 0.8772619f, -0.6841506f, 0.07520349f, 0.6520864f, -0.2958794f, 0.3733424f, 0.3427145f, -0.4838297f, 0.2448582f, 0.6436769f, -0.2947211f, 0.3840683f, 0.3358045f, -0.5813617f, 0.3377835f, 0.6463708f, -0.2949386f, 0.3809396f, 0.3368001f, -0.5666668f, 0.3237523f}, 1e-5);
}

TEST(AttentionContrib, Float16ViaFloat) {
  AttentionInputs a;
  auto half_of = [](const Tensor& t) {
    return HalfTensor(std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements()), t.dims());
  };
  auto r = RunOp(AttentionNode(4, 1), 1, {half_of(a.x), half_of(a.w), half_of(a.bias), Ints({2, 3}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->outputs[0].tensor().dtype(), DataType::kFloat16);
  // ORT (float16 kernel): Attention float16
  const std::vector<float> expected = {-0.8598633f, 0.2590332f, 0.2336426f, -0.9379883f, -0.6865234f, 0.230957f, 0.1801758f, -0.8686523f, -0.6777344f, 0.2294922f, 0.151123f, -0.8305664f, -0.5366211f, -0.3491211f, 0.5185547f, -0.7592773f, -0.8095703f, -0.0916748f, 0.5258789f, -1.029297f, -0.8203125f, -0.08166504f, 0.5244141f, -0.9726562f};
  std::vector<float> got = HalfValues(r->outputs[0].tensor());
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(got[i], expected[i], 3e-3) << "at " << i;
}

TEST(AttentionContrib, RejectsBadShapesAndHostileMasks) {
  AttentionInputs a;
  // ORT errors on each of these too (see attention_contrib_expected_gen.py).
  EXPECT_FALSE(RunOp(AttentionNode(2, 1), 1, {a.x, Pattern({4, 11}, 2)}).ok());                         // width not 3 * D
  EXPECT_FALSE(RunOp(AttentionNode(4, 1), 1, {a.x, a.w, a.bias, Ints({-1, 7}, {2})}).ok());            // negative length
  EXPECT_FALSE(RunOp(AttentionNode(4, 1), 1, {a.x, a.w, a.bias, Ints({9, -4, 5, 2}, {4})}).ok());      // negative end
  EXPECT_FALSE(RunOp(AttentionNode(4, 1), 1, {a.x, a.w, a.bias, Ints(std::vector<int32_t>(10, 1), {2, 5})}).ok());
  EXPECT_FALSE(RunOp(AttentionNode(4, 1), 1, {a.x, a.w, a.bias, Ints({1, 1, 1}, {3})}).ok());          // neither B nor 2B
  EXPECT_FALSE(RunOp(AttentionNode(3, 1), 1, {a.x, a.w, Pattern({11}, 3)}).ok());                       // bias width
  EXPECT_FALSE(RunOp(AttentionNode(6, 1), 1, {a.x, a.w, a.bias, Value(), Value(), Pattern({1, 2, 3, 4}, 5)}).ok());
  EXPECT_FALSE(RunOp(AttentionNode(5, 2), 1, {a.x, a.w, a.bias, Value(), Pattern({2, 2, 2, 2, 3}, 4)}).ok());  // past head
  EXPECT_FALSE(RunOp(AttentionNode(2, 1, {IntsAttr("qkv_hidden_sizes", {4, 2, 6})}), 1, {a.x, a.w}).ok());
  EXPECT_FALSE(RunOp(MakeNode("Attention", 2, 1, {IntAttr("num_heads", 0)}, kMs), 1, {a.x, a.w}).ok());
}

TEST(AttentionContrib, ResultsDoNotDependOnThreadCount) {
  Node node = AttentionNode(4, 1, {IntAttr("unidirectional", 1)});
  std::vector<Value> in = {Pattern({3, 7, 8}, 1), Pattern({8, 24}, 2), Pattern({24}, 3), Ints({7, 5, 6}, {3})};
  auto one = RunOp(node, 1, in, 1);
  auto four = RunOp(node, 1, in, 4);
  ASSERT_TRUE(one.ok() && four.ok());
  const Tensor& a = one->outputs[0].tensor();
  const Tensor& b = four->outputs[0].tensor();
  ASSERT_EQ(a.dims(), b.dims());
  for (int64_t i = 0; i < a.num_elements(); ++i) EXPECT_EQ(a.data<float>()[i], b.data<float>()[i]) << "at " << i;
}

// ---- MultiHeadAttention: B = 2, S = 3, L = 4, D = 4, 2 heads ----

Node MhaNode(size_t inputs, size_t outputs, std::vector<Attribute> extra = {}) {
  extra.push_back(IntAttr("num_heads", 2));
  return MakeNode("MultiHeadAttention", inputs, outputs, extra, kMs);
}

TEST(MultiHeadAttentionContrib, QkvWithBiasAndWiderValue) {
  auto r = RunOp(MhaNode(4, 1), 1, {Pattern({2, 3, 4}, 8), Pattern({2, 4, 4}, 9), Pattern({2, 4, 6}, 10), Pattern({14}, 11)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: MHA q/k/v 3-D + bias (Dv 6)
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 6},
                          {0.3773897f, -0.5174324f, 0.02980345f, 0.5284911f, -0.7698123f, -0.299501f, 0.4025551f, -0.4868746f, 0.01792613f, 0.4861484f, -0.7495887f, -0.2735971f, 0.426843f, -0.5312778f, -0.030636f, 0.6107285f, -0.8108127f, -0.2787367f, 0.5045788f, -0.4841448f, 0.1330368f, 0.4362517f, -0.770881f, -0.2280914f, 0.5420664f, -0.5006123f, 0.1106975f, 0.3825684f, -0.737519f, -0.220929f, 0.4946495f, -0.4123451f, 0.01726183f, 0.330734f, -0.7052934f, -0.2099393f}, 1e-5);
}

TEST(MultiHeadAttentionContrib, KeyPaddingMaskAndScores) {
  auto r = RunOp(MhaNode(5, 4), 1, {Pattern({2, 3, 4}, 8), Pattern({2, 4, 4}, 9), Pattern({2, 4, 4}, 10), Value(),
                                    Ints({1, 1, 0, 1, 0, 1, 1, 1}, {2, 4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: MHA qk output (outputs: output, present_key, present_value, qk)
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {-0.102883f, -0.03927309f, -0.05942249f, -0.1419019f, -0.08554077f, -0.06886118f, -0.02592953f, -0.1772389f, -0.00862056f, -0.03936214f, -0.2156069f, -0.1595774f, 0.008629208f, -0.05302166f, -0.1210756f, -0.0657156f, 0.03720436f, -0.09258601f, -0.07463672f, -0.1049974f, -1.862645e-09f, -0.04166667f, -0.02262996f, -0.1450026f}, 1e-5);
  ExpectTensorNear<float>(r->outputs[1].tensor(), {2, 2, 4, 2},
                          {0.6875f, -0.3125f, -0.4375f, 0.0f, -0.125f, 0.3125f, 0.1875f, 0.625f, 0.125f, 0.5625f, 0.4375f, -0.5625f, -0.6875f, -0.25f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.625f, -0.1875f, -0.3125f, 0.125f, 0.0f, 0.4375f, -0.0625f, 0.375f, 0.25f, 0.6875f, 0.5625f, -0.4375f, -0.5625f, -0.125f}, 1e-5);
  ExpectTensorNear<float>(r->outputs[2].tensor(), {2, 2, 4, 2},
                          {-0.4375f, 0.0f, -0.125f, 0.3125f, 0.1875f, 0.625f, 0.5f, -0.5f, 0.4375f, -0.5625f, -0.6875f, -0.25f, -0.375f, 0.0625f, -0.0625f, 0.375f, -0.625f, -0.1875f, -0.3125f, 0.125f, 0.0f, 0.4375f, 0.3125f, -0.6875f, 0.25f, 0.6875f, 0.5625f, -0.4375f, -0.5625f, -0.125f, -0.25f, 0.1875f}, 1e-5);
  ExpectTensorNear<float>(r->outputs[3].tensor(), {2, 2, 3, 4},
                          {0.3204077f, -0.1160097f, -10000.17f, -0.2264951f, 0.4032718f, -0.2126845f, -10000.13f, -0.04695631f, -0.2126845f, 0.1353447f, -9999.961f, -0.05800485f, 0.08286408f, -0.1574417f, -9999.953f, 0.06076699f, 0.2347815f, -0.1850631f, -10000.16f, -0.008286407f, -0.1850631f, 0.3590777f, -10000.11f, -0.1408689f, -10000.15f, 0.01381068f, 0.05524272f, 0.09667476f, -10000.15f, -0.1657282f, 0.01381068f, 0.1933495f, -9999.646f, -0.1546796f, -0.1546796f, -0.1546796f, -10000.04f, -0.243068f, -0.1961116f, 0.2955485f, -9999.967f, -0.03590776f, -0.1684903f, 0.1436311f, -9999.897f, 0.1712524f, -0.1408689f, -0.008286407f}, 1e-5);
}

TEST(MultiHeadAttentionContrib, KeyLengths) {
  auto r = RunOp(MhaNode(5, 1), 1, {Pattern({2, 3, 4}, 8), Pattern({2, 4, 4}, 9), Pattern({2, 4, 4}, 10), Value(),
                                    Ints({3, 1}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: MHA 1-D key lengths [3, 1]
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {-0.1787529f, 0.2587471f, -0.1689913f, -0.2540064f, -0.1857119f, 0.2517881f, -0.1145183f, -0.293749f, -0.1008777f, 0.3366223f, -0.3028429f, -0.243873f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.625f, -0.1875f, 0.25f, 0.6875f}, 1e-5);
}

TEST(MultiHeadAttentionContrib, PastAttentionBiasUnidirectionalPresents) {
  auto r = RunOp(MhaNode(8, 3, {IntAttr("unidirectional", 1)}), 1,
                 {Pattern({2, 3, 4}, 8), Pattern({2, 3, 4}, 9), Pattern({2, 3, 4}, 10), Pattern({12}, 11), Value(),
                  Pattern({2, 1, 3, 5}, 14), Pattern({2, 2, 2, 2}, 12), Pattern({2, 2, 2, 2}, 13)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: MHA self-attn past_key/past_value + attention_bias [B,1,S,T] + unidirectional, presents
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {0.106035f, -0.2469494f, 0.1932043f, 0.0863461f, 0.2004624f, -0.1472711f, -0.08465535f, 0.2553459f, 0.2786615f, -0.1020323f, -0.2027184f, 0.1741833f, 0.4377877f, -0.4230875f, -0.2101415f, 0.3697436f, 0.6647496f, -0.73092f, -0.1189107f, 0.6229405f, 0.2345361f, -0.4374931f, 0.04563157f, 0.3674822f}, 1e-5);
  ExpectTensorNear<float>(r->outputs[1].tensor(), {2, 2, 5, 2},
                          {0.1875f, 0.625f, -0.375f, 0.0625f, 0.875f, 0.3125f, -0.25f, 0.625f, 0.0625f, 0.9375f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.25f, 0.625f, 0.0625f, -0.5f, -1.0625f, -0.1875f, -0.625f, -0.1875f, 0.25f, 0.6875f, 0.375f, 1.25f, 0.6875f, 0.125f, -0.4375f, 0.4375f, -0.3125f, 0.125f, 0.5625f, -0.4375f, -0.75f, 0.125f, -0.4375f, 0.4375f, -0.125f, 0.75f}, 1e-5);
  ExpectTensorNear<float>(r->outputs[2].tensor(), {2, 2, 5, 2},
                          {0.5f, -0.5f, -0.0625f, 0.375f, 0.0625f, -0.5f, 0.375f, -0.1875f, 0.6875f, 0.125f, -0.625f, -0.1875f, 0.25f, 0.6875f, 0.375f, -0.1875f, -0.75f, 0.125f, -0.4375f, 0.4375f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 1.0f, -1.0f, -0.125f, -0.6875f, 0.1875f, -0.375f, 0.0f, 0.4375f, -0.5625f, -0.125f, -0.125f, 0.75f, 0.1875f, 1.0625f, 0.5f, -0.0625f}, 1e-5);
}

TEST(MultiHeadAttentionContrib, CrossAttentionWithBnshKeyValue) {
  auto r = RunOp(MhaNode(3, 3, {FloatAttr("scale", 0.5f)}), 1,
                 {Pattern({2, 3, 4}, 8), Pattern({2, 2, 4, 2}, 15), Pattern({2, 2, 4, 2}, 16)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: MHA cross-attn key/value 4-D BNLH, scale 0.5, presents
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {-0.1699726f, -0.0467926f, 0.1460937f, -0.1354402f, -0.1641344f, -0.06614231f, 0.1399611f, -0.1453416f, -0.1144444f, -0.02876321f, 0.128991f, -0.1535399f, 0.03871433f, 0.1473048f, -0.05047569f, 0.06469987f, 0.03140627f, 0.1480789f, -0.03215819f, 0.0497199f, 0.06076393f, 0.07499985f, -0.01304783f, 0.03377478f}, 1e-5);
  ExpectTensorNear<float>(r->outputs[1].tensor(), {2, 2, 4, 2},
                          {-0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f}, 1e-5);
  ExpectTensorNear<float>(r->outputs[2].tensor(), {2, 2, 4, 2},
                          {0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f}, 1e-5);

  auto with_bias = RunOp(MhaNode(4, 1), 1,
                         {Pattern({2, 3, 4}, 8), Pattern({2, 2, 4, 2}, 15), Pattern({2, 2, 4, 2}, 16), Pattern({12}, 11)});
  ASSERT_TRUE(with_bias.ok()) << with_bias.status().ToString();
  // ORT: MHA cross-attn key/value 4-D BNLH with bias
  ExpectTensorNear<float>(with_bias->outputs[0].tensor(), {2, 3, 4},
                          {-0.1593043f, -0.05005807f, 0.1676936f, -0.1016227f, -0.1502324f, -0.07819381f, 0.1602543f, -0.1169156f, -0.08750747f, -0.02628561f, 0.157173f, -0.1407864f, 0.02588175f, 0.1874239f, -0.05715062f, 0.1236317f, 0.01813579f, 0.1887603f, -0.03435551f, 0.1042451f, 0.05341891f, 0.0854558f, -0.009779057f, 0.08267556f}, 1e-5);
}

TEST(MultiHeadAttentionContrib, Float16ViaFloat) {
  auto half_of = [](const Tensor& t) {
    return HalfTensor(std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements()), t.dims());
  };
  auto r = RunOp(MhaNode(5, 1), 1, {half_of(Pattern({2, 3, 4}, 8)), half_of(Pattern({2, 4, 4}, 9)), half_of(Pattern({2, 4, 4}, 10)),
                                    half_of(Pattern({12}, 11)), Ints({3, 1}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->outputs[0].tensor().dtype(), DataType::kFloat16);
  // ORT (float16 kernel): MHA float16 with bias and key lengths [3, 1]
  const std::vector<float> expected = {0.3444824f, -0.2178955f, -0.277832f, 0.1837158f, 0.3383789f, -0.223999f, -0.227417f, 0.1419678f, 0.4179688f, -0.1445312f, -0.3840332f, 0.1815186f, -0.125f, -0.6875f, 0.1875f, 1.0625f, -0.125f, -0.6875f, 0.1875f, 1.0625f, -0.125f, -0.6875f, 0.1875f, 1.0625f};
  std::vector<float> got = HalfValues(r->outputs[0].tensor());
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(got[i], expected[i], 3e-3) << "at " << i;
}

TEST(MultiHeadAttentionContrib, RejectsBadShapes) {
  Tensor q = Pattern({2, 3, 4}, 8), k = Pattern({2, 4, 4}, 9), v = Pattern({2, 4, 4}, 10);
  EXPECT_FALSE(RunOp(MhaNode(5, 1), 1, {q, k, v, Value(), Ints({1, 1, 1, 1, 1, 1}, {2, 3})}).ok());  // mask width
  EXPECT_FALSE(RunOp(MhaNode(5, 1), 1, {q, k, v, Value(), Ints({-2, 1}, {2})}).ok());                // negative length
  EXPECT_FALSE(RunOp(MhaNode(3, 1), 1, {q, Pattern({2, 4, 3}, 9), v}).ok());                          // key width
  EXPECT_FALSE(RunOp(MhaNode(3, 1), 1, {q, k, Pattern({2, 5, 4}, 10)}).ok());                         // value length
  EXPECT_FALSE(RunOp(MhaNode(4, 1), 1, {q, k, v, Pattern({11}, 11)}).ok());                          // bias width
  EXPECT_FALSE(RunOp(MhaNode(1, 1), 1, {q}).ok());                                                    // no key
  auto packed = RunOp(MhaNode(1, 1), 1, {Pattern({2, 3, 2, 3, 2}, 17)});
  EXPECT_FALSE(packed.ok());  // packed QKV: not implemented (nor by ORT's CPU kernel)
}

// ---- RotaryEmbedding: caches of 8 positions x 2 frequencies (1 and 0.1 radians per position) ----

struct RotaryCaches {
  Tensor cos, sin;
  RotaryCaches() {
    std::vector<float> c, s;
    for (int p = 0; p < 8; ++p)
      for (double f : {1.0, 0.1}) {
        c.push_back(static_cast<float>(std::cos(p * f)));
        s.push_back(static_cast<float>(std::sin(p * f)));
      }
    cos = Tensor::FromVector<float>(c, {8, 2});
    sin = Tensor::FromVector<float>(s, {8, 2});
  }
};

Tensor Positions(std::vector<int64_t> v, std::vector<int64_t> dims) { return Tensor::FromVector<int64_t>(v, std::move(dims)); }

TEST(RotaryEmbeddingContrib, HeadsSideBySide) {
  RotaryCaches c;
  auto r = RunOp(MakeNode("RotaryEmbedding", 4, 1, {IntAttr("num_heads", 2)}, kMs), 1, {Pattern({2, 3, 8}, 19), Positions({0, 1, 2, 2, 3, 4}, {2, 3}), c.cos, c.sin});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Rotary [B,S,D] num_heads 2
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 8},
                          {-0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.4356813f, 0.5596899f, -0.1311984f, 0.0561563f, 0.3415661f, -0.5908878f, 0.3006058f, 0.2547825f, 0.1156077f, -0.369185f, -0.7031695f, 0.5628743f, -0.2985936f, 0.1605888f, -0.5490599f, -0.4776165f, 0.5943201f, 0.4047755f, 0.2032607f, -0.1092615f, 0.1801187f, 0.6489621f, 0.3573703f, 0.2590935f, -0.5568708f, -0.5472498f, 0.07938f, 0.2886696f, 0.5127708f, 0.08375309f, -0.3887527f, -0.6937339f, 0.6364125f, 0.3187308f, -0.2193266f, -0.2723819f, -0.419254f, 0.4848691f, 0.2795216f, 0.1371429f}, 1e-5);
}

TEST(RotaryEmbeddingContrib, Interleaved) {
  RotaryCaches c;
  auto r = RunOp(MakeNode("RotaryEmbedding", 4, 1, {IntAttr("num_heads", 2), IntAttr("interleaved", 1)}, kMs), 1, {Pattern({2, 3, 8}, 19), Positions({0, 1, 2, 2, 3, 4}, {2, 3}), c.cos, c.sin});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Rotary [B,S,D] interleaved
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 8},
                          {-0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, -0.4057896f, 0.4091039f, -0.4353143f, -0.04367712f, 0.7097096f, 0.06422351f, -0.1555735f, 0.2984596f, 0.5134253f, -0.5211052f, 0.05959416f, 0.6497921f, 0.09922398f, -0.3669957f, 0.589368f, -0.3906986f, -0.3149773f, -0.2128862f, -0.5752911f, -0.3079308f, -0.7291787f, -0.0587766f, -0.3311045f, 0.06042416f, -0.4951308f, 0.5125017f, -0.1292901f, 0.4179597f, 0.5745108f, 0.04436906f, 0.5017128f, -0.5644438f, 0.3053114f, 0.06664245f, 0.7216949f, -0.1020114f, 0.3375485f, -0.374122f, -0.4361919f, -0.2522755f}, 1e-5);
}

TEST(RotaryEmbeddingContrib, BnshInput) {
  RotaryCaches c;
  auto r = RunOp(MakeNode("RotaryEmbedding", 4, 1, {}, kMs), 1, {Pattern({2, 2, 3, 4}, 20), Positions({0, 1, 2, 2, 3, 4}, {2, 3}), c.cos, c.sin});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Rotary [B,N,S,H]
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 2, 3, 4},
                          {-0.1875f, 0.25f, 0.6875f, -0.3125f, 0.4356813f, 0.5596899f, -0.1311984f, 0.0561563f, -0.06840207f, -0.6133716f, 0.449836f, 0.1945193f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.6233488f, 0.1121045f, -0.04540047f, -0.4912625f, 0.5943201f, 0.4047755f, 0.2032607f, -0.1092615f, 0.1801187f, 0.6489621f, 0.3573703f, 0.2590935f, -0.5568708f, -0.5472498f, 0.07938f, 0.2886696f, 0.6041753f, 0.1525925f, 0.2214378f, -0.6819067f, -0.4642741f, 0.2582635f, -0.4874161f, -0.3302745f, 0.00868547f, 0.4961383f, 0.5038162f, 0.08805157f, -0.3870168f, -0.6730177f, -0.1612428f, -0.01312121f}, 1e-5);
}

TEST(RotaryEmbeddingContrib, PartialRotaryDim) {
  RotaryCaches c;
  auto r = RunOp(MakeNode("RotaryEmbedding", 4, 1, {IntAttr("num_heads", 2), IntAttr("rotary_embedding_dim", 4)}, kMs), 1, {Pattern({2, 3, 12}, 21), Positions({0, 1, 2, 2, 3, 4}, {2, 3}), c.cos, c.sin});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Rotary partial rotary_embedding_dim 4 of head 6
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 12},
                          {0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.6233488f, 0.1121045f, -0.04540047f, -0.4912625f, -0.0625f, 0.375f, -0.5480567f, -0.2551987f, -0.3908438f, 0.6653466f, -0.3125f, 0.125f, -0.2340826f, -0.5156969f, 0.5114798f, 0.3418613f, -0.5625f, -0.125f, 0.09727846f, -0.7110463f, 0.3881921f, 0.04717733f, 0.625f, -0.375f, 0.4286395f, 0.5024501f, 0.2649045f, 0.0380805f, 0.375f, -0.625f, -0.5471144f, 0.3071008f, -0.4565942f, -0.2566035f, 0.125f, 0.5625f, 0.3713817f, 0.1662301f, -0.4948617f, -0.5373768f, -0.125f, 0.3125f, 0.6541598f, -0.4235343f, -0.2826436f, 0.5232052f, -0.375f, 0.0625f, -0.374122f, -0.6065624f, -0.3375485f, 0.1506887f, -0.625f, -0.1875f, -0.3999117f, 0.5845521f, 0.015063f, 0.3828577f, 0.5625f, -0.4375f}, 1e-5);
}

TEST(RotaryEmbeddingContrib, SinglePositionOffset) {
  RotaryCaches c;
  auto r = RunOp(MakeNode("RotaryEmbedding", 4, 1, {IntAttr("num_heads", 2)}, kMs), 1, {Pattern({2, 3, 8}, 19), Positions({3}, {1}), c.cos, c.sin});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: Rotary position_ids [1] offset 3
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 8},
                          {0.4420763f, 0.1249916f, -0.4418072f, -0.6155553f, 0.08860359f, 0.3311842f, -0.7070798f, -0.2246626f, -0.4128065f, 0.5180968f, 0.1913688f, 0.2190478f, -0.3805694f, -0.6397901f, -0.2493956f, 0.06878373f, -0.01521946f, -0.5190366f, 0.7124471f, 0.4286327f, 0.3730888f, 0.2945617f, 0.5014277f, -0.4088272f, 0.1500745f, 0.4136612f, 0.6099253f, -0.06830551f, -0.2033981f, 0.6198539f, 0.3446527f, 0.3225872f, -0.3676745f, -0.5733347f, -0.4257014f, 0.2325937f, 0.6041753f, 0.1525925f, 0.2214378f, -0.6819067f, 0.5284121f, 0.3443313f, 0.41702f, -0.2392012f, -0.4617333f, 0.4687554f, -0.2017639f, 0.1848639f}, 1e-5);
}

TEST(RotaryEmbeddingContrib, RejectsPositionsOutsideTheCache) {
  RotaryCaches c;
  Node node = MakeNode("RotaryEmbedding", 4, 1, {IntAttr("num_heads", 2)}, kMs);
  // ORT: "position_ids value 9 at index 2 is out of range [0, 8)".
  EXPECT_FALSE(RunOp(node, 1, {Pattern({2, 3, 8}, 19), Positions({0, 1, 9, 0, 1, 2}, {2, 3}), c.cos, c.sin}).ok());
  EXPECT_FALSE(RunOp(node, 1, {Pattern({2, 3, 8}, 19), Positions({-1, 1, 2, 0, 1, 2}, {2, 3}), c.cos, c.sin}).ok());
  EXPECT_FALSE(RunOp(node, 1, {Pattern({2, 3, 8}, 19), Positions({6}, {1}), c.cos, c.sin}).ok());  // 6 + 2 >= 8
  EXPECT_FALSE(RunOp(node, 1, {Pattern({2, 3, 8}, 19), Positions({0, 1}, {2}), c.cos, c.sin}).ok());
}

// ---- GroupQueryAttention: 2 query heads sharing 1 kv head ----

Node GqaNode(size_t inputs, size_t outputs, std::vector<Attribute> extra = {}) {
  extra.push_back(IntAttr("num_heads", 2));
  extra.push_back(IntAttr("kv_num_heads", 1));
  return MakeNode("GroupQueryAttention", inputs, outputs, extra, kMs);
}

Tensor Scalar32(int32_t v) { return Tensor::FromVector<int32_t>({v}, {}); }

struct GqaRotaryCaches {
  Tensor cos, sin;
  GqaRotaryCaches() {
    std::vector<float> c, s;
    for (int p = 0; p < 8; ++p)
      for (double f : {1.0, 0.5, 0.25, 0.1, 0.05, 0.02, 0.01, 0.005}) {
        c.push_back(static_cast<float>(std::cos(p * f)));
        s.push_back(static_cast<float>(std::sin(p * f)));
      }
    cos = Tensor::FromVector<float>(c, {8, 8});
    sin = Tensor::FromVector<float>(s, {8, 8});
  }
};

TEST(GroupQueryAttentionContrib, Prompt) {
  auto r = RunOp(GqaNode(7, 3), 1, {Pattern({2, 3, 16}, 22), Pattern({2, 3, 8}, 23), Pattern({2, 3, 8}, 24), Value(), Value(), Ints({2, 2}, {2}), Scalar32(3)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: GQA prompt S=3 total 3
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 16},
                          {-0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, -0.003028061f, 0.4344719f, 0.01643649f, -0.1280281f, 0.3094719f, -0.1085635f, -0.2530281f, 0.1844719f, -0.1121398f, 0.3253602f, 0.1582817f, -0.2371398f, 0.2003602f, 0.03328169f, -0.3621398f, 0.07536024f, -0.1773365f, 0.2601636f, 0.1123806f, -0.3023365f, 0.1351636f, -0.01261945f, 0.008186285f, 0.01016356f, -0.3294374f, 0.1080625f, 0.243707f, -0.4544374f, -0.01693747f, 0.118707f, 0.07743479f, -0.1419375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.2781639f, 0.2196369f, -0.2843361f, 0.1531639f, 0.09463693f, -0.4093361f, 0.02816389f, -0.03036306f, 0.4869757f, -0.0518185f, -0.07552423f, 0.3619758f, -0.1768185f, -0.2005242f, 0.2369757f, -0.3018185f, 0.1508517f, 0.2224111f, -0.4116483f, 0.02585171f, 0.0974111f, 0.005790588f, -0.09914828f, -0.0275889f, 0.2592525f, 0.1169062f, -0.3032475f, 0.1342525f, -0.008093785f, -0.003862302f, 0.00925247f, -0.1330938f}, 1e-5);
  ExpectTensorNear<float>(r->outputs[1].tensor(), {2, 1, 3, 8},
                          {-0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f}, 1e-5);
  ExpectTensorNear<float>(r->outputs[2].tensor(), {2, 1, 3, 8},
                          {-0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f}, 1e-5);
}

TEST(GroupQueryAttentionContrib, DecodeWithRaggedPast) {
  auto r = RunOp(GqaNode(7, 3), 1, {Pattern({2, 1, 16}, 27), Pattern({2, 1, 8}, 28), Pattern({2, 1, 8}, 29), Pattern({2, 1, 3, 8}, 25), Pattern({2, 1, 3, 8}, 26), Ints({3, 2}, {2}), Scalar32(4)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: GQA decode S=1 past 3 total 4, seqlens [3, 2]
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 1, 16},
                          {-0.2284173f, 0.2090827f, 0.1211237f, -0.3534173f, 0.08408271f, -0.00387628f, 0.1027867f, -0.04091728f, -0.08157375f, 0.3559263f, -0.02838233f, -0.2065737f, 0.2309263f, -0.1533823f, -0.07531836f, 0.1059263f, 0.4192743f, -0.2801564f, -0.1432257f, 0.2942743f, 0.04720173f, 0.03234355f, 0.1692743f, -0.07779826f, 0.1990945f, -0.08577552f, -0.3634055f, 0.07409453f, 0.1765518f, 0.2267245f, -0.05090548f, 0.05155181f}, 1e-5);
  ExpectTensorNear<float>(r->outputs[1].tensor(), {2, 1, 4, 8},
                          {-0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, 1e-5);
  ExpectTensorNear<float>(r->outputs[2].tensor(), {2, 1, 4, 8},
                          {0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, 1e-5);
}

TEST(GroupQueryAttentionContrib, DecodeWithLocalWindowAndSoftcap) {
  auto r = RunOp(GqaNode(7, 3, {IntAttr("local_window_size", 2), FloatAttr("softcap", 0.8f)}), 1, {Pattern({2, 1, 16}, 27), Pattern({2, 1, 8}, 28), Pattern({2, 1, 8}, 29), Pattern({2, 1, 3, 8}, 25), Pattern({2, 1, 3, 8}, 26), Ints({3, 3}, {2}), Scalar32(4)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: GQA decode local_window_size 2 softcap 0.8
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 1, 16},
                          {-0.110041f, 0.327459f, 0.1211475f, -0.235041f, 0.202459f, -0.003852487f, -0.360041f, 0.07745902f, -0.07469081f, 0.3628092f, -0.006113082f, -0.1996908f, 0.2378092f, -0.1311131f, -0.3246908f, 0.1128092f, 0.4386685f, -0.5613315f, -0.1238315f, 0.3136685f, 0.01898059f, -0.2488315f, 0.1886685f, 0.6261685f, 0.435764f, -0.5642359f, -0.1267359f, 0.3107641f, 0.04947719f, -0.2517359f, 0.1857641f, 0.6232641f}, 1e-5);
  ExpectTensorNear<float>(r->outputs[1].tensor(), {2, 1, 4, 8},
                          {-0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f}, 1e-5);
  ExpectTensorNear<float>(r->outputs[2].tensor(), {2, 1, 4, 8},
                          {0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f}, 1e-5);
}

TEST(GroupQueryAttentionContrib, ContinueWithSoftcap) {
  auto r = RunOp(GqaNode(7, 3, {FloatAttr("softcap", 0.8f)}), 1, {Pattern({1, 3, 16}, 22), Pattern({1, 3, 8}, 23), Pattern({1, 3, 8}, 24), Pattern({1, 1, 3, 8}, 25), Pattern({1, 1, 3, 8}, 26), Ints({5}, {1}), Scalar32(6)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: GQA continue B=1 S=3 past 3 total 6, softcap 0.8
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 3, 16},
                          {-0.2143709f, 0.223129f, 0.0642185f, -0.3393709f, 0.09812906f, -0.0607815f, 0.002172645f, -0.02687093f, -0.1069372f, 0.3305627f, -0.07574201f, -0.2319372f, 0.2055627f, -0.200742f, -0.07985271f, 0.08056276f, -0.02632396f, 0.411176f, -0.1075335f, -0.151324f, 0.2861761f, -0.2325335f, -0.03132311f, 0.161176f, -0.09684143f, 0.3406586f, -0.03823757f, -0.2218414f, 0.2156586f, -0.1632376f, -0.07057262f, 0.09065857f, -0.1122013f, 0.3252987f, -0.03848154f, -0.2372013f, 0.2002987f, -0.1634815f, 0.06768268f, 0.07529867f, -0.2654633f, 0.1720368f, 0.1047036f, -0.3904633f, 0.04703674f, -0.02029641f, 0.156073f, -0.07796326f}, 1e-5);
  ExpectTensorNear<float>(r->outputs[1].tensor(), {1, 1, 6, 8},
                          {-0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f}, 1e-5);
  ExpectTensorNear<float>(r->outputs[2].tensor(), {1, 1, 6, 8},
                          {0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f}, 1e-5);
}

TEST(GroupQueryAttentionContrib, PackedQkvMatchesSeparateInputs) {
  // The packed form concatenates q, k and v of the Prompt test along the last axis.
  std::vector<float> packed;
  Tensor q = Pattern({2, 3, 16}, 22), k = Pattern({2, 3, 8}, 23), v = Pattern({2, 3, 8}, 24);
  for (int64_t r = 0; r < 6; ++r) {
    packed.insert(packed.end(), q.data<float>() + r * 16, q.data<float>() + (r + 1) * 16);
    packed.insert(packed.end(), k.data<float>() + r * 8, k.data<float>() + (r + 1) * 8);
    packed.insert(packed.end(), v.data<float>() + r * 8, v.data<float>() + (r + 1) * 8);
  }
  auto r = RunOp(GqaNode(7, 3), 1, {Tensor::FromVector<float>(packed, {2, 3, 32}), Value(), Value(), Value(), Value(),
                                    Ints({2, 2}, {2}), Scalar32(3)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: GQA packed qkv prompt
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 16},
                          {-0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, -0.003028061f, 0.4344719f, 0.01643649f, -0.1280281f, 0.3094719f, -0.1085635f, -0.2530281f, 0.1844719f, -0.1121398f, 0.3253602f, 0.1582817f, -0.2371398f, 0.2003602f, 0.03328169f, -0.3621398f, 0.07536024f, -0.1773365f, 0.2601636f, 0.1123806f, -0.3023365f, 0.1351636f, -0.01261945f, 0.008186285f, 0.01016356f, -0.3294374f, 0.1080625f, 0.243707f, -0.4544374f, -0.01693747f, 0.118707f, 0.07743479f, -0.1419375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.2781639f, 0.2196369f, -0.2843361f, 0.1531639f, 0.09463693f, -0.4093361f, 0.02816389f, -0.03036306f, 0.4869757f, -0.0518185f, -0.07552423f, 0.3619758f, -0.1768185f, -0.2005242f, 0.2369757f, -0.3018185f, 0.1508517f, 0.2224111f, -0.4116483f, 0.02585171f, 0.0974111f, 0.005790588f, -0.09914828f, -0.0275889f, 0.2592525f, 0.1169062f, -0.3032475f, 0.1342525f, -0.008093785f, -0.003862302f, 0.00925247f, -0.1330938f}, 1e-5);
  ExpectTensorNear<float>(r->outputs[1].tensor(), {2, 1, 3, 8},
                          {-0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f}, 1e-5);
  ExpectTensorNear<float>(r->outputs[2].tensor(), {2, 1, 3, 8},
                          {-0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5f, -0.5f, -0.0625f, 0.375f, -0.625f, -0.1875f, 0.25f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f}, 1e-5);
}

TEST(GroupQueryAttentionContrib, RotaryPrompt) {
  GqaRotaryCaches c;
  auto r = RunOp(GqaNode(9, 3, {IntAttr("do_rotary", 1)}), 1,
                 {Pattern({1, 3, 32}, 30), Pattern({1, 3, 16}, 31), Pattern({1, 3, 16}, 32), Value(), Value(),
                  Ints({2}, {1}), Scalar32(3), c.cos, c.sin});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: GQA rotary prompt B=1 S=3 head 16
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 3, 32},
                          {0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.6875f, -0.3125f, 0.125f, 0.5625f, -0.4375f, 0.0f, 0.4375f, -0.5625f, -0.125f, 0.3125f, -0.6875f, -0.25f, 0.1875f, 0.625f, -0.375f, 0.0625f, 0.5875238f, -0.4124762f, 0.02502377f, 0.4625238f, -0.5374762f, -0.09997623f, 0.3375238f, 0.1040082f, -0.2249762f, 0.2125238f, -0.02099177f, -0.3499762f, 0.08752377f, 0.5250238f, -0.4749762f, -0.03747623f, 0.6021793f, -0.3978207f, 0.03967933f, 0.4771793f, -0.5228207f, -0.08532067f, 0.3521793f, 0.006304468f, -0.2103207f, 0.2271793f, -0.1186955f, -0.3353207f, 0.1021793f, 0.5396793f, -0.4603207f, -0.02282067f, 0.5288268f, -0.4711732f, -0.03367317f, 0.4038269f, -0.2051377f, -0.1586732f, 0.2788268f, 0.1042856f, -0.2836732f, 0.1538268f, -0.0207144f, -0.4086732f, 0.02882684f, 0.4663269f, -0.1426377f, -0.09617317f, 0.5246752f, -0.4753248f, -0.03782482f, 0.3996752f, -0.1858499f, -0.1628248f, 0.2746752f, 0.1085238f, -0.2878248f, 0.1496752f, -0.01647616f, -0.4128248f, 0.02467518f, 0.4621752f, -0.1233499f, -0.1003248f}, 1e-5);
}

TEST(GroupQueryAttentionContrib, RotaryInterleavedDecode) {
  GqaRotaryCaches c;
  auto r = RunOp(GqaNode(9, 3, {IntAttr("do_rotary", 1), IntAttr("rotary_interleaved", 1)}), 1,
                 {Pattern({1, 1, 32}, 30), Pattern({1, 1, 16}, 31), Pattern({1, 1, 16}, 32), Pattern({1, 1, 3, 16}, 33),
                  Pattern({1, 1, 3, 16}, 34), Ints({3}, {1}), Scalar32(4), c.cos, c.sin});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // ORT: GQA rotary interleaved decode B=1 past 3 head 16
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 1, 32},
                          {-0.02446557f, 0.01839114f, 0.04109817f, -0.1494656f, -0.1066089f, 0.3308912f, 0.03682766f, -0.2316089f, 0.2058912f, -0.08817235f, -0.3566089f, 0.08089115f, 0.1035982f, -0.0869656f, -0.04410885f, 0.3933911f, -0.08066031f, 0.05554176f, 0.007130377f, -0.2056603f, -0.06945825f, 0.3680418f, -0.01526427f, -0.1944582f, 0.2430418f, -0.1402643f, -0.3194582f, 0.1180418f, 0.06963038f, -0.1431603f, -0.006958242f, 0.4305418f}, 1e-5);
}

TEST(GroupQueryAttentionContrib, RejectsInconsistentLengths) {
  Tensor q = Pattern({2, 1, 16}, 27), k = Pattern({2, 1, 8}, 28), v = Pattern({2, 1, 8}, 29);
  Tensor pk = Pattern({2, 1, 3, 8}, 25), pv = Pattern({2, 1, 3, 8}, 26);
  EXPECT_FALSE(RunOp(GqaNode(7, 3), 1, {q, k, v, pk, pv, Ints({9, 2}, {2}), Scalar32(4)}).ok());    // past the cache
  EXPECT_FALSE(RunOp(GqaNode(7, 3), 1, {q, k, v, pk, pv, Ints({-5, 2}, {2}), Scalar32(4)}).ok());   // negative
  EXPECT_FALSE(RunOp(GqaNode(7, 3), 1, {q, k, v, pk, pv, Ints({3}, {1}), Scalar32(4)}).ok());       // not B values
  EXPECT_FALSE(RunOp(GqaNode(7, 3), 1, {q, k, v, pk, pv, Ints({3, 3}, {2}), Scalar32(1 << 30)}).ok());  // huge total
  EXPECT_FALSE(RunOp(GqaNode(7, 3), 1, {q, k, v, pk, pv, Ints({3, 3}, {2}), Scalar32(0)}).ok());
  EXPECT_FALSE(RunOp(GqaNode(7, 3), 1, {q, Pattern({2, 1, 16}, 28), v, pk, pv, Ints({3, 3}, {2}), Scalar32(4)}).ok());
}

}  // namespace
}  // namespace nee::testing
