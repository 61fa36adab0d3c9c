// Quantize family tests. Expected values come from onnx.reference
// (ReferenceEvaluator on a single node, onnx 1.23.2 in /work/main/.venv) with
// the inputs written below; see the comment on each test.
#include "ir/float_formats.h"
#include "op_test_util.h"

namespace nee {
namespace {

using testing::ExpectTensorNear;
using testing::IntAttr;
using testing::MakeNode;
using testing::RunOp;

const std::vector<float> kX = {0, 2, 3, 1000, -254, -1000, 2.5f, -2.5f, 3.5f};  // shape [3,3]

TEST(QuantizeLinear, PerTensorUint8RoundsHalfToEven) {
  // QuantizeLinear(x, 2.0f, uint8 128)
  auto run = RunOp(MakeNode("QuantizeLinear", 3, 1), 13,
                   {Tensor::FromVector(kX, {3, 3}), Tensor::Scalar(2.0f), Tensor::Scalar<uint8_t>(128)});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<uint8_t>(run->outputs[0].tensor(), {3, 3}, {128, 129, 130, 255, 1, 0, 129, 127, 130});
}

TEST(QuantizeLinear, PerAxisInt8) {
  // axis=0, scale [1,2,4], zero point int8 [0,-1,1]
  auto run = RunOp(MakeNode("QuantizeLinear", 3, 1, {IntAttr("axis", 0)}), 13,
                   {Tensor::FromVector(kX, {3, 3}), Tensor::FromVector<float>({1, 2, 4}, {3}),
                    Tensor::FromVector<int8_t>({0, -1, 1}, {3})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int8_t>(run->outputs[0].tensor(), {3, 3}, {0, 2, 3, 127, -128, -128, 2, 0, 2});
}

TEST(QuantizeLinear, BlockedInt8) {
  // x = arange(12).reshape(2,6) - 5.5, scale [[0.5,2],[1,4]], zp [[1,-1],[0,2]], axis=1, block_size=3
  std::vector<float> x;
  for (int i = 0; i < 12; ++i) x.push_back(static_cast<float>(i) - 5.5f);
  auto run = RunOp(MakeNode("QuantizeLinear", 3, 1, {IntAttr("axis", 1), IntAttr("block_size", 3)}), 21,
                   {Tensor::FromVector(x, {2, 6}), Tensor::FromVector<float>({0.5f, 2, 1, 4}, {2, 2}),
                    Tensor::FromVector<int8_t>({1, -1, 0, 2}, {2, 2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int8_t>(run->outputs[0].tensor(), {2, 6}, {-10, -8, -6, -2, -2, -1, 0, 2, 2, 3, 3, 3});
  // A block size that does not cover the axis is an error, not a read past the scale.
  auto bad = RunOp(MakeNode("QuantizeLinear", 3, 1, {IntAttr("axis", 1), IntAttr("block_size", 2)}), 21,
                   {Tensor::FromVector(x, {2, 6}), Tensor::FromVector<float>({0.5f, 2, 1, 4}, {2, 2}),
                    Tensor::FromVector<int8_t>({1, -1, 0, 2}, {2, 2})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("input 1"), std::string::npos);
}

TEST(QuantizeLinear, OutputDtypeUint16AndInt4) {
  std::vector<float> x = {-20, -3.5f, 0, 2.5f, 7.4f, 30};
  // output_dtype=UINT16, scale 1 -> [0,0,0,2,7,30]
  auto u16 = RunOp(MakeNode("QuantizeLinear", 2, 1, {IntAttr("output_dtype", 4)}), 21,
                   {Tensor::FromVector(x, {6}), Tensor::Scalar(1.0f)});
  ASSERT_TRUE(u16.ok()) << u16.status().ToString();
  ExpectTensorNear<uint16_t>(u16->outputs[0].tensor(), {6}, {0, 0, 0, 2, 7, 30});
  // output_dtype=INT4 -> [-8,-4,0,2,7,7]
  auto i4 = RunOp(MakeNode("QuantizeLinear", 2, 1, {IntAttr("output_dtype", 22)}), 21,
                  {Tensor::FromVector(x, {6}), Tensor::Scalar(1.0f)});
  ASSERT_TRUE(i4.ok()) << i4.status().ToString();
  const Tensor& y = i4->outputs[0].tensor();
  ASSERT_EQ(y.dtype(), DataType::kInt4);
  std::vector<int> expected = {-8, -4, 0, 2, 7, 7};
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(Int4FromNibble(GetNibble(y.data<uint8_t>(), i)), expected[i]) << i;
}

TEST(QuantizeLinear, Float8SaturatingAndNot) {
  // onnx.reference with x = [0,0.3,-1.7,500,-1000,3.14159]:
  //   output_dtype=FLOAT8E4M3FN, scale 0.5           -> bytes [0,50,198,126,254,77]
  //   output_dtype=FLOAT8E5M2, saturate=0, scale 0.01 -> bytes [0,80,217,122,252,93] (252 is -inf)
  auto x = Tensor::FromVector<float>({0, 0.3f, -1.7f, 500, -1000, 3.14159f}, {6});
  auto e4 = RunOp(MakeNode("QuantizeLinear", 2, 1, {IntAttr("output_dtype", 17)}), 21, {x, Tensor::Scalar(0.5f)});
  ASSERT_TRUE(e4.ok()) << e4.status().ToString();
  ASSERT_EQ(e4->outputs[0].tensor().dtype(), DataType::kFloat8E4M3FN);
  std::vector<uint8_t> want_e4 = {0, 50, 198, 126, 254, 77};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(e4->outputs[0].tensor().data<uint8_t>()[i], want_e4[i]) << i;
  auto e5 = RunOp(MakeNode("QuantizeLinear", 2, 1, {IntAttr("output_dtype", 19), IntAttr("saturate", 0)}), 21,
                  {x, Tensor::Scalar(0.01f)});
  ASSERT_TRUE(e5.ok()) << e5.status().ToString();
  std::vector<uint8_t> want_e5 = {0, 80, 217, 122, 252, 93};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(e5->outputs[0].tensor().data<uint8_t>()[i], want_e5[i]) << i;
  // And back: DequantizeLinear of the e4m3fn bytes with scale 0.5 -> [0,0.625,-3.5,448,-448,6.5] * 0.5
  auto back = RunOp(MakeNode("DequantizeLinear", 2, 1), 21, {e4->outputs[0], Tensor::Scalar(0.5f)});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectTensorNear<float>(back->outputs[0].tensor(), {6}, {0, 0.3125f, -1.75f, 224, -224, 3.25f});
}

TEST(DequantizeLinear, PerTensorPerAxisAndInt32) {
  // uint8 [0,3,128,255], scale 0.5, zp 128 -> [-64,-62.5,0,63.5]
  auto a = RunOp(MakeNode("DequantizeLinear", 3, 1), 13,
                 {Tensor::FromVector<uint8_t>({0, 3, 128, 255}, {4}), Tensor::Scalar(0.5f),
                  Tensor::Scalar<uint8_t>(128)});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ExpectTensorNear<float>(a->outputs[0].tensor(), {4}, {-64, -62.5, 0, 63.5});
  // int8 [[0,3],[-128,127]], axis=1, scale [0.5,2], zp [1,-1] -> [-0.5,8,-64.5,256]
  auto b = RunOp(MakeNode("DequantizeLinear", 3, 1, {IntAttr("axis", 1)}), 13,
                 {Tensor::FromVector<int8_t>({0, 3, -128, 127}, {2, 2}), Tensor::FromVector<float>({0.5f, 2}, {2}),
                  Tensor::FromVector<int8_t>({1, -1}, {2})});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ExpectTensorNear<float>(b->outputs[0].tensor(), {2, 2}, {-0.5, 8, -64.5, 256});
  // int32 [-5,7], scale 0.25 -> [-1.25,1.75]
  auto c = RunOp(MakeNode("DequantizeLinear", 2, 1), 13,
                 {Tensor::FromVector<int32_t>({-5, 7}, {2}), Tensor::Scalar(0.25f)});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ExpectTensorNear<float>(c->outputs[0].tensor(), {2}, {-1.25, 1.75});
  // Per-axis scale of the wrong length is an error naming the input.
  auto bad = RunOp(MakeNode("DequantizeLinear", 2, 1, {IntAttr("axis", 0)}), 13,
                   {Tensor::FromVector<int8_t>({0, 3, -128, 127}, {2, 2}),
                    Tensor::FromVector<float>({0.5f, 2, 3}, {3})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("input 1"), std::string::npos);
}

TEST(DynamicQuantizeLinear, MatchesReference) {
  // x = [0,2,-3,-2.5,1.34,0.5] -> y [153,255,0,26,221,179], scale 0.019607843831181526, zp 153
  auto run = RunOp(MakeNode("DynamicQuantizeLinear", 1, 3), 11,
                   {Tensor::FromVector<float>({0, 2, -3, -2.5f, 1.34f, 0.5f}, {6})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<uint8_t>(run->outputs[0].tensor(), {6}, {153, 255, 0, 26, 221, 179});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {}, {0.019607843831181526f}, 1e-7);
  ExpectTensorNear<uint8_t>(run->outputs[2].tensor(), {}, {153});
}

TEST(QLinearMatMul, Uint8TwoD) {
  // The ONNX example: a [2,4], b [4,3], scales 0.0066 / 0.00705 / 0.0107, zps 113 / 114 / 118.
  std::vector<Value> in = {Tensor::FromVector<uint8_t>({208, 236, 0, 238, 3, 214, 255, 29}, {2, 4}),
                           Tensor::Scalar(0.0066f),
                           Tensor::Scalar<uint8_t>(113),
                           Tensor::FromVector<uint8_t>({152, 51, 244, 60, 26, 255, 0, 127, 246, 127, 254, 247}, {4, 3}),
                           Tensor::Scalar(0.00705f),
                           Tensor::Scalar<uint8_t>(114),
                           Tensor::Scalar(0.0107f),
                           Tensor::Scalar<uint8_t>(118)};
  auto run = RunOp(MakeNode("QLinearMatMul", 8, 1), 10, in);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<uint8_t>(run->outputs[0].tensor(), {2, 3}, {168, 115, 255, 1, 66, 151});
  // Inner dims that differ are an error.
  in[3] = Tensor::FromVector<uint8_t>({1, 2, 3}, {3, 1});
  EXPECT_FALSE(RunOp(MakeNode("QLinearMatMul", 8, 1), 10, in).ok());
}

TEST(QLinearConv, PadsStridesPerChannelScaleAndBias) {
  // x uint8 [1,1,4,4], w int8 [2,1,2,2], pads [1,0,0,1], strides [2,1], x_scale 0.00369, x_zp 132,
  // w_scale [0.5,1], w_zp [0,0], y_scale 0.1, y_zp 100, B [10,-20] -> y [1,2,2,4]
  std::vector<Value> in = {
      Tensor::FromVector<uint8_t>({255, 174, 162, 25, 203, 168, 58, 15, 59, 237, 95, 129, 0, 64, 56, 242},
                                  {1, 1, 4, 4}),
      Tensor::Scalar(0.00369f),
      Tensor::Scalar<uint8_t>(132),
      Tensor::FromVector<int8_t>({0, 2, 1, 3, 5, 1, 2, 4}, {2, 1, 2, 2}),
      Tensor::FromVector<float>({0.5f, 1.0f}, {2}),
      Tensor::FromVector<int8_t>({0, 0}, {2}),
      Tensor::Scalar(0.1f),
      Tensor::Scalar<uint8_t>(100),
      Tensor::FromVector<int32_t>({10, -20}, {2})};
  Node node = MakeNode("QLinearConv", 9, 1,
                       {testing::IntsAttr("pads", {1, 0, 0, 1}), testing::IntsAttr("strides", {2, 1})});
  auto run = RunOp(node, 10, in);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<uint8_t>(run->outputs[0].tensor(), {1, 2, 2, 4},
                            {105, 103, 95, 98, 106, 97, 95, 100, 115, 107, 86, 91, 124, 105, 78, 77});
}

}  // namespace
}  // namespace nee
