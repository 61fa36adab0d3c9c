// ai.nee ConvIntegerToFloat: a ConvInteger with the dequantizing tail that
// ONNX Runtime's quantize_dynamic writes after it, as one node (written by
// opt/fuse_quant_conv.cc; activation and residual by opt/fuse_conv_activation.cc):
//
//   Y = act(float(ConvInteger(X, W, x_zero_point, w_zero_point) + B) * scale + bias + Z)
//
// Inputs: X, W, x_zero_point?, w_zero_point? (as ConvInteger's), scale
// (float32), B? (int32: the bias quantized at run time, as older
// quantize_dynamic writes it), bias? (float32: the bias as newer releases
// add it), Z? (float32, the output's shape). scale, B and bias hold one value,
// or one per output channel shaped to broadcast along the channel axis only
// ([1, M, 1, ...], [M, 1, ...]). Attributes: ConvInteger's, and FusedConv's
// activation / activation_params. Each step rounds as the unfused nodes do:
// the int32 sum plus B wraps as int32 addition, the cast rounds to nearest,
// then one float multiply, a float add for bias and one for Z, the activation.
//
// What the reference kernel (ops/quant_conv.cc) and the fast CPU kernel
// (ep/cpu/quant_conv_fast.cc) share.
#pragma once
#include <cstdint>

#include "ops/fused_conv.h"
#include "ops/op_schema.h"

namespace nee {

// Everything after the integer convolution, read from the node's inputs and
// attributes and checked against the output y (the scale and bias indexed by
// channel with stride 0 when they are one value).
struct ConvIntegerEpilogue {
  FusedActivation activation;
  const float* scale = nullptr;
  int64_t scale_stride = 0;
  const int32_t* sum_bias = nullptr;  // B; null when absent
  int64_t sum_bias_stride = 0;
  const float* bias = nullptr;  // null when absent
  int64_t bias_stride = 0;
  const float* z = nullptr;  // null when absent; y's shape
};

// Input indices after ConvInteger's four.
constexpr size_t kConvIntegerScaleInput = 4;
constexpr size_t kConvIntegerSumBiasInput = 5;
constexpr size_t kConvIntegerBiasInput = 6;
constexpr size_t kConvIntegerResidualInput = 7;

Result<ConvIntegerEpilogue> ReadConvIntegerEpilogue(const KernelContext& ctx, const Tensor& y);

// Runs `conv_integer` (a ConvInteger kernel: the reference or a fast one) on
// the node of ctx with its int32 sums written into the bytes of the node's
// float32 output 0; returns that output (holding the sums' bits until the
// caller converts them in place).
Result<Tensor> RunConvIntegerIntoFloatOutput(KernelContext& ctx, KernelFn conv_integer);

// ONNX ConvInteger's shape rule and reference kernel (ops/conv.cc).
Status InferConvIntegerOutput(InferenceContext& ctx);
Status ConvIntegerReference(KernelContext& ctx);

}  // namespace nee
