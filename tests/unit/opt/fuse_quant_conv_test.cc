// fuse-quant-conv (src/opt/fuse_quant_conv.cc): quantize_dynamic's ConvInteger -> [int32 bias Add] -> Cast ->
// Mul(x_scale * w_scale) [-> float bias Add] becomes ai.nee ConvIntegerToFloat, and fuse-conv-activation then
// takes the residual Add and the activation after it. The optimized model's results equal the unfused graph
// run by the reference kernels: bitwise without an activation or with an exact one (Clip), within float
// rounding of the exponential with SiLU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "opt_test_util.h"

namespace nee {
namespace {
using namespace opt_test;

Tensor Int8Weights(const std::vector<int64_t>& dims, int seed) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<int8_t> v(static_cast<size_t>(n));
  uint32_t s = static_cast<uint32_t>(seed) * 2654435761u + 7u;
  for (auto& e : v) {
    s = s * 1664525u + 1013904223u;
    e = static_cast<int8_t>(static_cast<int>(s >> 24) - 128);
  }
  return Tensor::FromVector(v, dims);
}

struct Options {
  bool bias = true;
  bool bias_first = false;    // Add(bias, sums)
  bool scale_first = false;   // Mul(s, cast)
  bool per_channel = false;   // the weights' scale per output channel ([M] for the bias, [M, 1, 1] after)
  bool float_bias = false;    // the bias as newer quantize_dynamic adds it: a float Add after the scale
  bool silu = false;          // Sigmoid and Mul after it
  bool relu6 = false;         // Clip(0, 6) after it
  bool residual = false;      // Add(z, y) before the activation
  bool cast_read_twice = false;
};

constexpr int64_t kChannelsIn = 5, kChannelsOut = 7, kHeight = 9, kWidth = 11;

// x -> DynamicQuantizeLinear -> ConvInteger(W 3x3, pads 1, int8 weights) [+ bias quantized at run time as
// quantize_dynamic does: Div by the product of the scales, Floor, Cast to int32, Reshape to [1, M, 1, 1]]
// -> Cast -> Mul(x_scale * w_scale) [-> Add z] [-> SiLU].
ModelBuilder QuantizedConv(const Options& o) {
  const int64_t m = kChannelsOut;
  ModelBuilder b(13);
  b.Input("x", Shape{Dim::Known(1), Dim::Known(kChannelsIn), Dim::Known(kHeight), Dim::Known(kWidth)})
      .Init("W", Int8Weights({m, kChannelsIn, 3, 3}, 3))
      .Init("wz", Tensor::FromVector(std::vector<int8_t>{0}, {}))
      .Init("ws", o.per_channel ? Random({m}, 5) : Scalar(0.0123f))
      .Init("ws_channels", o.per_channel ? Random({m, 1, 1}, 5) : Scalar(0.0123f))  // the same values
      .Init("bias", Random({m}, 6))
      .Init("bias_shape", Tensor::FromVector(std::vector<int64_t>{1, m, 1, 1}, {4}))
      .Op("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"})
      .Op("ConvInteger", {"xq", "W", "xz", "wz"}, {"c"}, {IntsAttr("pads", {1, 1, 1, 1})});
  std::string sums = "c";
  if (o.bias) {
    b.Op("Mul", {"xs", "ws"}, {"bs"})
        .Op("Div", {"bias", "bs"}, {"bd"})
        .Op("Floor", {"bd"}, {"bf"})
        .Op("Cast", {"bf"}, {"bq"}, {IntAttr("to", 6)})
        .Op("Reshape", {"bq", "bias_shape"}, {"br"})
        .Op("Add", o.bias_first ? std::vector<std::string>{"br", "c"} : std::vector<std::string>{"c", "br"}, {"a"});
    sums = "a";
  }
  b.Op("Cast", {sums}, {"f"}, {IntAttr("to", 1)})
      .Op("Mul", {"xs", "ws_channels"}, {"s"})
      .Op("Mul", o.scale_first ? std::vector<std::string>{"s", "f"} : std::vector<std::string>{"f", "s"}, {"y0"});
  std::string y = "y0";
  if (o.float_bias) {
    b.Init("bias_f", Random({1, m, 1, 1}, 7)).Op("Add", {y, "bias_f"}, {"yb"});
    y = "yb";
  }
  if (o.residual) {
    b.Input("z", Shape{Dim::Known(1), Dim::Known(m), Dim::Known(kHeight), Dim::Known(kWidth)})
        .Op("Add", {"z", y}, {"yr"});
    y = "yr";
  }
  if (o.silu) {
    b.Op("Sigmoid", {y}, {"g"}).Op("Mul", {y, "g"}, {"ys"});
    y = "ys";
  }
  if (o.relu6) {
    b.Init("lo", Scalar(0.f)).Init("hi", Scalar(6.f)).Op("Clip", {y, "lo", "hi"}, {"yc"});
    y = "yc";
  }
  b.Op("Identity", {y}, {"y"}).Output("y");
  if (o.cast_read_twice) b.Op("Neg", {"f"}, {"f2"}).Output("f2");
  return b;
}

std::vector<NamedValue> Inputs(const Options& o) {
  std::vector<NamedValue> inputs = {{"x", Value(Random({1, kChannelsIn, kHeight, kWidth}, 9))}};
  if (o.residual) inputs.push_back({"z", Value(Random({1, kChannelsOut, kHeight, kWidth}, 10))});
  return inputs;
}

bool Has(const Ops& ops, const std::string& op) { return std::find(ops.begin(), ops.end(), op) != ops.end(); }

TEST(FuseQuantConv, QuantizedConvBecomesConvIntegerToFloat) {
  const Options variants[] = {
      {},
      {.bias_first = true, .scale_first = true},
      {.bias = false},
      {.per_channel = true},
      {.silu = true},
      {.bias_first = true, .per_channel = true, .residual = true},
      {.silu = true, .residual = true},
      {.bias = false, .float_bias = true, .relu6 = true},
      {.bias = false, .per_channel = true, .float_bias = true, .residual = true},
  };
  for (const Options& o : variants) {
    SCOPED_TRACE(::testing::Message() << "bias " << o.bias << " per_channel " << o.per_channel << " float_bias "
                                      << o.float_bias << " silu " << o.silu << " relu6 " << o.relu6 << " residual "
                                      << o.residual);
    ModelBuilder b = QuantizedConv(o);
    const Ops ops = OpsAfter(b.model);
    EXPECT_TRUE(Has(ops, "ConvIntegerToFloat"));
    for (const char* gone : {"ConvInteger", "Sigmoid", "Add", "Clip"}) EXPECT_FALSE(Has(ops, gone)) << gone;
    // What is left of the chain: the scale's and the bias's own small nodes.
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "Cast"), o.bias ? 1 : 0);
    const std::vector<NamedValue> inputs = Inputs(o);
    const Tensor want = RunAt(b.model, inputs, 0, 1, true);
    ASSERT_TRUE(want.defined());
    for (int threads : {1, 2}) {
      const Tensor got = RunAt(b.model, inputs, 99, threads);
      ASSERT_TRUE(got.defined());
      ASSERT_EQ(got.dims(), want.dims());
      if (!o.silu) {
        EXPECT_EQ(0, std::memcmp(got.raw_data(), want.raw_data(), got.byte_size()));
        continue;
      }
      for (int64_t i = 0; i < want.num_elements(); ++i) {
        const float w = want.data<float>()[i];
        EXPECT_NEAR(got.data<float>()[i], w, 1e-6f + 1e-6f * std::fabs(w)) << "element " << i;
      }
    }
  }
}

TEST(FuseQuantConv, LeavesNearMissesAlone) {
  // The cast is read by another node too: nothing fused, results unchanged.
  Options o;
  o.cast_read_twice = true;
  ModelBuilder b = QuantizedConv(o);
  Ops ops = OpsAfter(b.model);
  EXPECT_TRUE(Has(ops, "ConvInteger"));
  EXPECT_FALSE(Has(ops, "ConvIntegerToFloat"));
  const std::vector<NamedValue> inputs = Inputs(o);
  const Tensor want = RunAt(b.model, inputs, 0, 1, true), got = RunAt(b.model, inputs, 99, 1);
  ASSERT_TRUE(want.defined() && got.defined());
  EXPECT_EQ(0, std::memcmp(got.raw_data(), want.raw_data(), got.byte_size()));

  // A bias that broadcasts along a spatial axis ([1, 1, 1, W]) would widen the sums: left alone.
  ModelBuilder c(13);
  c.Input("x", Shape{Dim::Known(1), Dim::Known(2), Dim::Known(4), Dim::Known(6)})
      .Init("W", Int8Weights({3, 2, 1, 1}, 1))
      .Init("b", Tensor::FromVector(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {1, 1, 1, 6}))
      .Init("s", Scalar(0.5f))
      .Op("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"})
      .Op("ConvInteger", {"xq", "W", "xz"}, {"m"})
      .Op("Add", {"m", "b"}, {"a"})
      .Op("Cast", {"a"}, {"f"}, {IntAttr("to", 1)})
      .Op("Mul", {"f", "s"}, {"y"})
      .Output("y");
  ops = OpsAfter(c.model);
  EXPECT_TRUE(Has(ops, "ConvInteger"));
  EXPECT_FALSE(Has(ops, "ConvIntegerToFloat"));
}

}  // namespace
}  // namespace nee
