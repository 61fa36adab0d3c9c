// RNN family tests. Expected values come from onnx.reference
// (ReferenceEvaluator, onnx 1.23.2 in /work/main/.venv) on inputs drawn with
// np.random.default_rng(1).uniform(-0.5, 0.5) as float32 (script: RNN/GRU/LSTM
// nodes with the attributes named in each test). onnx.reference ignores
// sequence_lens and activations, so those expectations were derived
// independently: sequence_lens by running the reference on each batch entry's
// truncated sequence, Relu+clip with the numpy recurrence
// h = max(0, clip(x W^T + h R^T, -0.1, 0.1)).
#include "op_test_util.h"

namespace nee {
namespace {

using testing::ExpectTensorNear;
using testing::FloatAttr;
using testing::IntAttr;
using testing::MakeNode;
using testing::RunOp;
using testing::StringAttr;

// X shape [3, 2, 2]
const std::vector<float> kX = {0.0118216248f, 0.450463682f, -0.355840385f, 0.448649436f, -0.188168541f, -0.0766735524f, 0.327702582f, -0.0908008665f, 0.0495936871f, -0.472440898f, 0.253513098f, 0.0381433144f};
// RnnW shape [1, 3, 2]
const std::vector<float> kRnnW = {-0.170268282f, 0.288428694f, -0.196805164f, -0.0465021096f, -0.365958303f, -0.0968870148f};
// RnnR shape [1, 3, 3]
const std::vector<float> kRnnR = {-0.29654476f, -0.237686664f, 0.250364661f, -0.219591245f, -0.0148090255f, 0.480737209f, 0.461657196f, 0.224789947f, 0.0412268564f};
// RnnB shape [1, 6]
const std::vector<float> kRnnB = {-0.223108798f, -0.339347988f, 0.469925404f, 0.0160685852f, -0.384134382f, 0.123489752f};
// RnnH0 shape [1, 2, 3]
const std::vector<float> kRnnH0 = {0.276683122f, 0.113003299f, 0.417297691f, -0.460407138f, 0.0285892636f, -0.0406641178f};
// RnnY shape [3, 1, 2, 3]
const std::vector<float> kRnnY = {-0.083364211f, -0.543124318f, 0.614290714f, 0.102149136f, -0.532182515f, 0.440111786f, 0.110047884f, -0.346290618f, 0.4887802f, -0.0824502334f, -0.527536392f, 0.403615147f, -0.177792445f, -0.458440959f, 0.547043204f, 0.0116851376f, -0.504406095f, 0.342511892f};
// RnnYh shape [1, 2, 3]
const std::vector<float> kRnnYh = {-0.177792445f, -0.458440959f, 0.547043204f, 0.0116851376f, -0.504406095f, 0.342511892f};
// GruW shape [2, 9, 2]
const std::vector<float> kGruW = {-0.437650412f, 0.141328171f, 0.35263285f, 0.092941016f, -0.239902556f, 0.33988151f, 0.00949588139f, 0.0108888848f, 0.253030211f, -0.352077961f, 0.319626719f, 0.183286905f, 0.287096947f, -0.308383733f, 0.302364171f, -0.308676064f, -0.418447375f, 0.355226964f, 0.361283511f, 0.376537085f, -0.0280902814f, -0.225951612f, -0.49290818f, 0.145720899f, 0.219909385f, 0.335569203f, -0.218122169f, -0.284781843f, 0.139331385f, 0.305054843f, 0.46367088f, -0.349475175f, -0.0177876111f, 0.394715875f, -0.0772830918f, 0.0895020589f};
// GruR shape [2, 9, 3]
const std::vector<float> kGruR = {-0.475509316f, 0.173459888f, 0.419088632f, 0.326825321f, 0.385520279f, 0.160355374f, -0.254447728f, 0.268516988f, -0.28832525f, 0.331274837f, -0.437282085f, 0.325487822f, -0.33549273f, -0.124853f, -0.183261827f, 0.191337034f, -0.32142812f, -0.103743836f, -0.494175404f, -0.237505287f, -0.0788111836f, -0.394078761f, 0.13315995f, -0.119575731f, 0.225293934f, 0.153866008f, -0.0687732548f, 0.367320508f, 0.132135123f, 0.310274363f, -0.158205271f, 0.0436692908f, -0.303703129f, 0.496141195f, -0.256784528f, -0.243132532f, -0.426809937f, -0.242196888f, 0.263128519f, 0.197893575f, -0.371326774f, -0.123761497f, -0.0790786073f, 0.164984241f, -0.0440710373f, 0.0865183249f, 0.339684606f, 0.226473615f, -0.134992734f, -0.0516036898f, -0.132300436f, -0.390265346f, -0.296758443f, -0.216193512f};
// GruB shape [2, 18]
const std::vector<float> kGruB = {-0.185866103f, -0.186952144f, 0.0766997188f, 0.471689969f, 0.274664134f, 0.29113394f, 0.259268492f, 0.0969877318f, 0.417692244f, 0.189630151f, 0.000356430741f, -0.422916204f, -0.0115507729f, -0.287169009f, -0.367303699f, 0.00606492255f, 0.285085291f, -0.204993561f, 0.268771768f, 0.0256295223f, -0.35095197f, 0.464967757f, -0.0983637795f, -0.204765737f, 0.346998364f, -0.37553966f, 0.233590454f, -0.312175244f, -0.107508227f, -0.268100113f, 0.341227978f, -0.109925449f, 0.474692822f, 0.125261486f, 0.193622828f, 0.0215251222f};
// GruY shape [3, 2, 2, 3]
const std::vector<float> kGruY = {0.0614204668f, 0.0491443463f, 0.240383908f, 0.0099871438f, -0.0141837448f, 0.293759227f, 0.296410352f, -0.192303658f, 0.209198982f, 0.253353715f, -0.179247364f, 0.206238136f, 0.121585935f, 0.117843583f, 0.312586159f, 0.184889913f, 0.16369009f, 0.193575665f, 0.323385298f, -0.271532655f, 0.175296679f, 0.383337796f, -0.247473225f, 0.160222277f, 0.229240194f, 0.239796162f, 0.204928845f, 0.207754791f, 0.209019259f, 0.225189f, 0.302583396f, -0.216600224f, 0.131744906f, 0.238646686f, -0.143778831f, 0.152857542f};
// GruYh shape [2, 2, 3]
const std::vector<float> kGruYh = {0.229240194f, 0.239796162f, 0.204928845f, 0.207754791f, 0.209019259f, 0.225189f, 0.296410352f, -0.192303658f, 0.209198982f, 0.253353715f, -0.179247364f, 0.206238136f};
// GruFwdY shape [3, 1, 2, 3]
const std::vector<float> kGruFwdY = {0.0625353232f, 0.129340142f, 0.193209663f, 0.011028775f, 0.0766609013f, 0.252173513f, 0.122462496f, 0.232079834f, 0.238243088f, 0.183578387f, 0.268723488f, 0.121049598f, 0.230174899f, 0.356237978f, 0.119940057f, 0.208627582f, 0.327134371f, 0.144281656f};
// LstmW shape [1, 12, 2]
const std::vector<float> kLstmW = {-0.191031799f, -0.10444358f, 0.440934181f, -0.298796803f, 0.488218904f, 0.258305848f, -0.140213072f, 0.141513586f, -0.119018458f, -0.118507065f, 0.00380295026f, -0.483277172f, -0.0064284401f, 0.471598417f, -0.214534774f, 0.248217955f, -0.0572111085f, -0.290718943f, 0.405002564f, -0.483172715f, -0.196491078f, 0.499025881f, -0.237853199f, 0.349044532f};
// LstmR shape [1, 12, 3]
const std::vector<float> kLstmR = {0.105683148f, 0.306035697f, 0.130317762f, -0.137303144f, 0.260788798f, -0.473515451f, -0.0531870499f, -0.128145427f, -0.0229259953f, -0.372379303f, -0.277493119f, 0.0620515905f, -0.112230882f, 0.291656196f, 0.105136588f, 0.361266673f, 0.23236084f, 0.101823449f, -0.212384403f, 0.282760471f, -0.248732418f, -0.424788892f, 0.462864578f, 0.0400112048f, 0.27389431f, 0.0292228069f, 0.111579731f, -0.466107756f, -0.313206315f, 0.174689397f, 0.0705645978f, -0.341444969f, 0.452029258f, -0.345646381f, 0.0103032496f, -0.355997115f};
// LstmB shape [1, 24]
const std::vector<float> kLstmB = {0.217371732f, -0.223686993f, -0.365866035f, -0.454012811f, -0.325164467f, -0.308201283f, 0.0369720794f, -0.0489611141f, 0.457294375f, 0.454151332f, 0.296546102f, 0.171587631f, 0.345023096f, 0.438751817f, -0.477382272f, -0.381894767f, -0.139736116f, -0.406413138f, 0.0995244756f, -0.23963578f, -0.23566027f, -0.211672008f, -0.402284354f, 0.24094446f};
// LstmP shape [1, 9]
const std::vector<float> kLstmP = {0.150672436f, 0.106508091f, -0.465954423f, -0.0705358535f, 0.185203597f, -0.343653351f, -0.114342153f, -0.480165869f, -0.418141991f};
// LstmH0 shape [1, 2, 3]
const std::vector<float> kLstmH0 = {0.326223344f, -0.438153058f, -0.407008022f, 0.463181704f, 0.253365427f, -0.162145793f};
// LstmC0 shape [1, 2, 3]
const std::vector<float> kLstmC0 = {-0.283546418f, -0.0853498355f, -0.0367599651f, 0.384521544f, -0.183341563f, -0.478536129f};
// LstmY shape [3, 1, 2, 3]
const std::vector<float> kLstmY = {-0.0602184124f, 0.00754239969f, 0.0429051444f, -0.0161859747f, -0.0217285547f, -0.0421890579f, 0.0140007176f, -0.0159515478f, 0.0617306754f, 0.0619774647f, -0.0578621961f, 0.0119832158f, 0.087909162f, -0.0750238523f, 0.0607764088f, 0.086704798f, -0.0463691354f, 0.0399835855f};
// LstmYh shape [1, 2, 3]
const std::vector<float> kLstmYh = {0.087909162f, -0.0750238523f, 0.0607764088f, 0.086704798f, -0.0463691354f, 0.0399835855f};
// LstmYc shape [1, 2, 3]
const std::vector<float> kLstmYc = {0.321171999f, -0.195209756f, 0.166117996f, 0.308094412f, -0.127073303f, 0.126617447f};
// LstmYhLayout1 shape [2, 1, 3]
const std::vector<float> kLstmYhLayout1 = {0.087909162f, -0.0750238523f, 0.0607764088f, 0.086704798f, -0.0463691354f, 0.0399835855f};
// SeqW shape [1, 3, 2]
const std::vector<float> kSeqW = {-0.367821157f, -0.113269426f, -0.160805106f, 0.374441206f, -0.0812469795f, -0.417954981f};
// SeqR shape [1, 3, 3]
const std::vector<float> kSeqR = {0.426805198f, 0.122313365f, -0.383290142f, -0.38682583f, -0.034066759f, -0.407911032f, 0.131752193f, 0.116383791f, -0.467918664f};
// SeqYh0 shape [1, 1, 3]
const std::vector<float> kSeqYh0 = {-0.0401104242f, 0.116817094f, -0.19828178f};
// SeqYh1 shape [1, 1, 3]
const std::vector<float> kSeqYh1 = {0.0114155961f, 0.268665105f, -0.184646025f};
// SeqY0 shape [2, 1, 1, 3]
const std::vector<float> kSeqY0 = {-0.0401104242f, 0.116817094f, -0.19828178f, 0.0777399614f, 0.00154872308f, 0.0472989008f};
// ReluClipYh shape [2, 3]
const std::vector<float> kReluClipYh = {0.0511351898f, 0.0f, 0.100000001f, 0.0f, 0.0f, 0.0f};

Tensor T(const std::vector<float>& v, std::vector<int64_t> dims) { return Tensor::FromVector(v, std::move(dims)); }

TEST(Rnn, ForwardWithBiasAndInitialState) {
  auto run = RunOp(MakeNode("RNN", 6, 2, {IntAttr("hidden_size", 3)}), 14,
                   {T(kX, {3, 2, 2}), T(kRnnW, {1, 3, 2}), T(kRnnR, {1, 3, 3}), T(kRnnB, {1, 6}), Value(),
                    T(kRnnH0, {1, 2, 3})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {3, 1, 2, 3}, kRnnY);
  ExpectTensorNear<float>(run->outputs[1].tensor(), {1, 2, 3}, kRnnYh);
}

TEST(Rnn, GruBidirectionalLinearBeforeReset) {
  Node node = MakeNode("GRU", 4, 2,
                       {IntAttr("hidden_size", 3), StringAttr("direction", "bidirectional"),
                        IntAttr("linear_before_reset", 1)});
  auto run = RunOp(node, 14, {T(kX, {3, 2, 2}), T(kGruW, {2, 9, 2}), T(kGruR, {2, 9, 3}), T(kGruB, {2, 18})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {3, 2, 2, 3}, kGruY);
  ExpectTensorNear<float>(run->outputs[1].tensor(), {2, 2, 3}, kGruYh);
}

TEST(Rnn, GruForwardDefaultReset) {
  // The first direction's weights alone, linear_before_reset=0.
  std::vector<float> w(kGruW.begin(), kGruW.begin() + 18), r(kGruR.begin(), kGruR.begin() + 27),
      b(kGruB.begin(), kGruB.begin() + 18);
  auto run = RunOp(MakeNode("GRU", 4, 1, {IntAttr("hidden_size", 3)}), 7,
                   {T(kX, {3, 2, 2}), T(w, {1, 9, 2}), T(r, {1, 9, 3}), T(b, {1, 18})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {3, 1, 2, 3}, kGruFwdY);
}

TEST(Rnn, LstmPeepholesInitialStatesAndLayout) {
  std::vector<Value> in = {T(kX, {3, 2, 2}), T(kLstmW, {1, 12, 2}), T(kLstmR, {1, 12, 3}), T(kLstmB, {1, 24}),
                           Value(), T(kLstmH0, {1, 2, 3}), T(kLstmC0, {1, 2, 3}), T(kLstmP, {1, 9})};
  auto run = RunOp(MakeNode("LSTM", 8, 3, {IntAttr("hidden_size", 3)}), 14, in);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {3, 1, 2, 3}, kLstmY);
  ExpectTensorNear<float>(run->outputs[1].tensor(), {1, 2, 3}, kLstmYh);
  ExpectTensorNear<float>(run->outputs[2].tensor(), {1, 2, 3}, kLstmYc);

  // layout=1: batch-major X / states; Y_h is [batch, dirs, hidden].
  auto swap01 = [](const std::vector<float>& v, int64_t a, int64_t b, int64_t c) {
    std::vector<float> out(v.size());
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        for (int64_t k = 0; k < c; ++k) out[static_cast<size_t>((j * a + i) * c + k)] = v[static_cast<size_t>((i * b + j) * c + k)];
    return out;
  };
  in[0] = T(swap01(kX, 3, 2, 2), {2, 3, 2});
  in[5] = T(swap01(kLstmH0, 1, 2, 3), {2, 1, 3});
  in[6] = T(swap01(kLstmC0, 1, 2, 3), {2, 1, 3});
  Node node1 = MakeNode("LSTM", 8, 3, {IntAttr("hidden_size", 3), IntAttr("layout", 1)});
  // Only Y_h is wanted here: the other outputs are omitted.
  node1.outputs = {"", "yh", ""};
  auto run1 = RunOp(node1, 14, in);
  ASSERT_TRUE(run1.ok()) << run1.status().ToString();
  EXPECT_TRUE(run1->outputs[0].empty());
  ExpectTensorNear<float>(run1->outputs[1].tensor(), {2, 1, 3}, kLstmYhLayout1);
}

TEST(Rnn, SequenceLensReverse) {
  auto run = RunOp(MakeNode("RNN", 5, 2, {StringAttr("direction", "reverse")}), 14,
                   {T(kX, {3, 2, 2}), T(kSeqW, {1, 3, 2}), T(kSeqR, {1, 3, 3}), Value(),
                    Tensor::FromVector<int32_t>({2, 3}, {2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const Tensor& yh = run->outputs[1].tensor();
  for (size_t j = 0; j < 3; ++j) {
    EXPECT_NEAR(yh.data<float>()[j], kSeqYh0[j], 1e-5);
    EXPECT_NEAR(yh.data<float>()[3 + j], kSeqYh1[j], 1e-5);
  }
  const Tensor& y = run->outputs[0].tensor();  // [3,1,2,3]; entry 0 has zeros at t=2
  for (size_t j = 0; j < 3; ++j) {
    EXPECT_NEAR(y.data<float>()[j], kSeqY0[j], 1e-5);          // t=0, batch 0
    EXPECT_NEAR(y.data<float>()[6 + j], kSeqY0[3 + j], 1e-5);  // t=1, batch 0
    EXPECT_EQ(y.data<float>()[12 + j], 0.0f);                  // t=2, batch 0: past its length
  }
  // A length beyond the sequence is an error naming the input.
  auto bad = RunOp(MakeNode("RNN", 5, 2), 14,
                   {T(kX, {3, 2, 2}), T(kSeqW, {1, 3, 2}), T(kSeqR, {1, 3, 3}), Value(),
                    Tensor::FromVector<int32_t>({4, 1}, {2})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("input 4"), std::string::npos);
}

TEST(Rnn, ReluActivationWithClip) {
  Node node = MakeNode("RNN", 3, 2, {Attribute(), FloatAttr("clip", 0.1f)});
  node.attributes[0].name = "activations";
  node.attributes[0].type = AttrType::kStrings;
  node.attributes[0].strings = {"Relu"};
  auto run = RunOp(node, 7, {T(kX, {3, 2, 2}), T(kSeqW, {1, 3, 2}), T(kSeqR, {1, 3, 3})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[1].tensor(), {1, 2, 3}, kReluClipYh);
}

TEST(Rnn, BadWeightShapeIsAnError) {
  auto run = RunOp(MakeNode("LSTM", 3, 1, {IntAttr("hidden_size", 3)}), 14,
                   {T(kX, {3, 2, 2}), T(kRnnW, {1, 3, 2}), T(kLstmR, {1, 12, 3})});
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("input 1"), std::string::npos);
}

}  // namespace
}  // namespace nee
