// ONNX Runtime's com.microsoft DynamicQuantizeLSTM, as onnxruntime.quantization.quantize_dynamic writes it.
#include <gtest/gtest.h>

#include "op_test_util.h"

namespace nee::testing {
namespace {

constexpr const char* kMs = "com.microsoft";

// DynamicQuantizeLSTM: expected values are onnxruntime 1.32's (rnn_contrib_expected.py), which defines the op: it
// quantizes X and h to uint8 on the fly. The float LSTM on the dequantized weights is up to 3.7e-4 away from them.
TEST(QuantizeContrib, DynamicQuantizeLstmQuantizesActivationsAsOnnxRuntime) {
  Tensor x = Tensor::FromVector<float>({0.0f, 0.3f, -0.27f, -0.89f, -0.45f, -0.99f}, {2, 1, 3});
  Tensor w = Tensor::FromVector<int8_t>({82, -99, -1, 64, -74, 59, -77, -7, 63, -40, -32, -45,
                                         43, -50, 98, -11, -5, 0, 16, 10, 1, 99, 61, 58}, {1, 3, 8});
  Tensor r = Tensor::FromVector<int8_t>({40, 24, -32, 97, -7, -57, 69, -68, 71, 22, -78, -92, -12, -93, -72, 2},
                                        {1, 2, 8});
  Tensor b = Tensor::FromVector<float>({-0.25f, -0.05f, -0.0f, 0.01f, -0.15f, -0.05f, -0.1f, -0.08f, 0.11f, -0.08f,
                                        -0.0f, 0.09f, -0.06f, -0.01f, 0.01f, 0.01f}, {1, 16});
  Tensor w_scale = Tensor::FromVector<float>({0.01f}, {1});
  Tensor w_zp = Tensor::FromVector<int8_t>({0}, {1});
  Tensor r_scale = Tensor::FromVector<float>({0.02f, 0.01f, 0.015f, 0.02f, 0.01f, 0.01f, 0.02f, 0.03f}, {1, 8});
  Tensor r_zp = Tensor::FromVector<int8_t>(std::vector<int8_t>(8, 0), {1, 8});
  auto run = RunOp(MakeNode("DynamicQuantizeLSTM", 12, 3, {IntAttr("hidden_size", 2)}, kMs), 1,
                   {x, w, r, b, Value(), Value(), Value(), Value(), w_scale, w_zp, r_scale, r_zp});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {2, 1, 1, 2}, {0.009337f, -0.0534382f, -0.0360922f, -0.1606336f});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {1, 1, 2}, {-0.0360922f, -0.1606336f});
  ExpectTensorNear<float>(run->outputs[2].tensor(), {1, 1, 2}, {-0.0704602f, -0.3848095f});
  // Weights of the wrong layout are refused.
  auto bad = RunOp(MakeNode("DynamicQuantizeLSTM", 12, 3, {IntAttr("hidden_size", 2)}, kMs), 1,
                   {x, Tensor::FromVector<int8_t>(std::vector<int8_t>(24, 1), {1, 8, 3}), r, b, Value(), Value(),
                    Value(), Value(), w_scale, w_zp, r_scale, r_zp});
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace nee::testing
