// ONNX Runtime's com.microsoft FusedConv: Conv followed by one activation,
// written by the optimizer (opt/fuse_conv_activation.cc). What its reference
// kernel (ops/conv.cc) and the fast CPU kernel (ep/cpu/fused_conv_fast.cc)
// share: reading the activation and running Conv while keeping hold of its
// output.
#pragma once
#include <cmath>
#include <string>

#include "ops/op_schema.h"

namespace nee {

// ORT's attributes: `activation` (absent = none) and `activation_params`
// (LeakyRelu: alpha; Clip: min, max; HardSigmoid: alpha, beta; the others
// take none). ORT's CPU provider accepts Relu, Tanh, Sigmoid, Silu, LeakyRelu,
// Clip and HardSigmoid; HardSwish is a nee extension (no parameters, ONNX
// HardSwish: x * max(0, min(1, x/6 + 1/2))).
struct FusedActivation {
  enum class Kind { kNone, kRelu, kTanh, kSigmoid, kSilu, kLeakyRelu, kClip, kHardSigmoid, kHardSwish };
  Kind kind = Kind::kNone;
  float a = 0.f;  // LeakyRelu alpha, Clip min, HardSigmoid alpha
  float b = 0.f;  // Clip max, HardSigmoid beta
};

// Reads and validates the node's activation attributes: `activation` and
// `activation_params`, or with a prefix (ai.nee BlockedExpandDepthwise's
// "expand_" for its first conv) prefix + those names.
Result<FusedActivation> ReadFusedActivation(const Node& node, const std::string& prefix = "");

// max(0, min(1, v)), keeping NaN.
template <typename T>
T HardSigmoidOf(T v) {
  return v < T(0) ? T(0) : (v > T(1) ? T(1) : v);
}

// The activation of one value, computed in T (float or double).
template <typename T>
T ApplyFusedActivation(const FusedActivation& act, T x) {
  using K = FusedActivation::Kind;
  // Comparisons are written so that NaN stays NaN, as in the standalone ops.
  switch (act.kind) {
    case K::kNone: return x;
    case K::kRelu: return x < T(0) ? T(0) : x;
    case K::kTanh: return std::tanh(x);
    case K::kSigmoid: return T(1) / (T(1) + std::exp(-x));
    case K::kSilu: return x / (T(1) + std::exp(-x));
    case K::kLeakyRelu: return x < T(0) ? T(act.a) * x : x;
    case K::kClip: {
      const T v = x < T(act.a) ? T(act.a) : x;  // then max, as Clip does (min > max gives max)
      return v > T(act.b) ? T(act.b) : v;
    }
    case K::kHardSigmoid: return HardSigmoidOf(T(act.a) * x + T(act.b));
    case K::kHardSwish: return x * HardSigmoidOf(x / T(6) + T(0.5));
  }
  return x;
}

// Runs `kernel` (a Conv kernel) on the node of `ctx` and returns the output 0
// it allocated, which is the node's output: the caller may rewrite it in place.
Result<Tensor> RunKeepingOutput(KernelContext& ctx, KernelFn kernel);

}  // namespace nee
