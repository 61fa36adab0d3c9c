// Fusions into ONNX Runtime's com.microsoft ops (src/opt/fuse_conv_activation.cc,
// fuse_gelu.cc, fuse_skip_layer_norm.cc): each pattern is found in the forms
// exporters write, near misses (a wrong constant, an intermediate with another
// reader, a graph output in the middle) are left alone, and the model gives
// the same results with the optimizer off and on.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <tuple>
#include <limits>

#include "opt_test_util.h"

namespace nee {
namespace {

using namespace opt_test;

constexpr float kSqrt2 = 1.41421356f;

const Node* FindOp(const Model& model, const std::string& op) {
  for (const Node& n : model.graph.nodes)
    if (n.op_type == op) return &n;
  return nullptr;
}

// ---- Conv + activation -> FusedConv ---------------------------------------------------

// x[1,3,6,6] -> Conv (3x3, pad 1, bias) -> c -> `activation` -> y.
ModelBuilder ConvThen(const std::function<void(ModelBuilder&)>& activation, int64_t opset = 17) {
  ModelBuilder b(opset);
  b.Input("x", ShapeFromDims({1, 3, 6, 6}))
      .Init("W", Random({4, 3, 3, 3}, 2))
      .Init("B", Random({4}, 3))
      .Op("Conv", {"x", "W", "B"}, {"c"}, {IntsAttr("pads", {1, 1, 1, 1})});
  activation(b);
  b.Output("y");
  return b;
}

std::vector<NamedValue> ConvInput() { return {{"x", Random({1, 3, 6, 6}, 4)}}; }

void ExpectFusedConv(const ModelBuilder& b, const std::string& activation, const std::vector<float>& params) {
  Model m = Optimized(b.model);
  ASSERT_EQ(m.graph.nodes.size(), 1u) << activation;
  const Node& n = m.graph.nodes[0];
  EXPECT_EQ(n.op_type, "FusedConv");
  EXPECT_EQ(n.domain, "com.microsoft");
  EXPECT_EQ(n.outputs, std::vector<std::string>{"y"});
  EXPECT_EQ(n.GetString("activation").value(), activation);
  EXPECT_EQ(n.GetFloats("activation_params", {}).value(), params) << activation;
  EXPECT_EQ(m.OpsetVersion("com.microsoft"), 1);
  ExpectSameResults(b.model, ConvInput());
}

TEST(FuseConvActivation, EachActivationBecomesOneFusedConv) {
  const float inf = std::numeric_limits<float>::infinity();
  auto unary = [](const std::string& op, std::vector<Attribute> attrs = {}) {
    return [op, attrs](ModelBuilder& b) { b.Op(op, {"c"}, {"y"}, attrs); };
  };
  ExpectFusedConv(ConvThen(unary("Relu")), "Relu", {});
  ExpectFusedConv(ConvThen(unary("Tanh")), "Tanh", {});
  ExpectFusedConv(ConvThen(unary("Sigmoid")), "Sigmoid", {});
  ExpectFusedConv(ConvThen(unary("LeakyRelu", {FloatAttr("alpha", 0.2f)})), "LeakyRelu", {0.2f});
  ExpectFusedConv(ConvThen(unary("LeakyRelu")), "LeakyRelu", {0.01f});
  ExpectFusedConv(ConvThen(unary("HardSigmoid", {FloatAttr("alpha", 0.3f), FloatAttr("beta", 0.4f)})), "HardSigmoid",
                  {0.3f, 0.4f});
  ExpectFusedConv(ConvThen(unary("HardSwish")), "HardSwish", {});
  // Relu6 as MobileNetV2 exports it, and a Clip with only a lower bound.
  ExpectFusedConv(ConvThen([](ModelBuilder& b) {
                    b.Init("lo", Scalar(0.f)).Init("hi", Scalar(6.f)).Op("Clip", {"c", "lo", "hi"}, {"y"});
                  }),
                  "Clip", {0.f, 6.f});
  ExpectFusedConv(ConvThen([](ModelBuilder& b) { b.Init("lo", Scalar(-0.5f)).Op("Clip", {"c", "lo"}, {"y"}); }),
                  "Clip", {-0.5f, inf});
  ExpectFusedConv(ConvThen(unary("Clip", {FloatAttr("min", 0.f), FloatAttr("max", 6.f)}), 6), "Clip", {0.f, 6.f});
  // SiLU: x * Sigmoid(x), in both operand orders.
  ExpectFusedConv(ConvThen([](ModelBuilder& b) { b.Op("Sigmoid", {"c"}, {"s"}).Op("Mul", {"c", "s"}, {"y"}); }),
                  "Silu", {});
  ExpectFusedConv(ConvThen([](ModelBuilder& b) { b.Op("Sigmoid", {"c"}, {"s"}).Op("Mul", {"s", "c"}, {"y"}); }),
                  "Silu", {});
}

// HardSwish written out as x * Clip(x + 3, 0, 6) / 6 (PaddlePaddle's hard_swish,
// PyTorch's before opset 14), with `rest` reading "cl" = Clip(c + 3, 0, 6) and
// writing y; "three", "zero", "six", "sixth" are the constants. Opset 12, as
// the PP-OCR models (no HardSwish op before 14).
ModelBuilder ConvThenWrittenOutHardSwish(const std::function<void(ModelBuilder&)>& rest, float three = 3.f) {
  return ConvThen(
      [&](ModelBuilder& b) {
        b.Init("three", Scalar(three))
            .Init("zero", Scalar(0.f))
            .Init("six", Scalar(6.f))
            .Init("sixth", Floats({1.f / 6.f}, {1}))
            .Op("Add", {"c", "three"}, {"s"})
            .Op("Clip", {"s", "zero", "six"}, {"cl"});
        rest(b);
      },
      12);
}

TEST(FuseConvActivation, WrittenOutHardSwishBecomesOneFusedConv) {
  // (x * clip) / 6, as PP-OCR writes it; the operands in either order.
  ExpectFusedConv(ConvThenWrittenOutHardSwish([](ModelBuilder& b) {
                    b.Op("Mul", {"c", "cl"}, {"m"}).Op("Div", {"m", "six"}, {"y"});
                  }),
                  "HardSwish", {});
  ExpectFusedConv(ConvThenWrittenOutHardSwish([](ModelBuilder& b) {
                    b.Op("Mul", {"cl", "c"}, {"m"}).Op("Mul", {"sixth", "m"}, {"y"});
                  }),
                  "HardSwish", {});
  // x * (clip / 6).
  ExpectFusedConv(ConvThenWrittenOutHardSwish([](ModelBuilder& b) {
                    b.Op("Div", {"cl", "six"}, {"d"}).Op("Mul", {"c", "d"}, {"y"});
                  }),
                  "HardSwish", {});
  // Three added on the left, and after a residual Add.
  ModelBuilder left(12);
  left.Input("x", ShapeFromDims({1, 3, 6, 6}))
      .Input("z", ShapeFromDims({1, 4, 6, 6}))
      .Init("W", Random({4, 3, 3, 3}, 2))
      .Init("three", Scalar(3.f))
      .Init("zero", Scalar(0.f))
      .Init("six", Scalar(6.f))
      .Op("Conv", {"x", "W"}, {"c"}, {IntsAttr("pads", {1, 1, 1, 1})})
      .Op("Add", {"c", "z"}, {"r"})
      .Op("Add", {"three", "r"}, {"s"})
      .Op("Clip", {"s", "zero", "six"}, {"cl"})
      .Op("Mul", {"r", "cl"}, {"m"})
      .Op("Div", {"m", "six"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(left.model), (Ops{"FusedConv"}));
  // Inputs that reach the flat parts of the clip and its corners: outputs near -3, 0 and 3.
  std::vector<float> z(4 * 36);
  for (size_t i = 0; i < z.size(); ++i) z[i] = -4.f + 8.f * static_cast<float>(i) / static_cast<float>(z.size());
  ExpectSameResults(left.model, {{"x", Random({1, 3, 6, 6}, 4)}, {"z", Floats(z, {1, 4, 6, 6})}});
}

TEST(FuseConvActivation, HardSigmoidTimesItsInputBecomesHardSwish) {
  // PyTorch's nn.Hardswish before opset 14: x * HardSigmoid(x, alpha = 1/6, beta = 0.5), either operand order.
  for (bool gate_first : {false, true}) {
    ModelBuilder b = ConvThen(
        [&](ModelBuilder& b) {
          b.Op("HardSigmoid", {"c"}, {"g"}, {FloatAttr("alpha", 1.f / 6.f)});
          b.Op("Mul", gate_first ? std::vector<std::string>{"g", "c"} : std::vector<std::string>{"c", "g"}, {"y"});
        },
        13);
    Model m = Optimized(b.model);
    ASSERT_EQ(m.graph.nodes.size(), 1u);
    EXPECT_EQ(m.graph.nodes[0].GetString("activation").value(), "HardSwish");
    ExpectSameResults(b.model, ConvInput());
  }
  // Another slope, or the gate also a graph output: left alone.
  ModelBuilder slope = ConvThen([](ModelBuilder& b) {
    b.Op("HardSigmoid", {"c"}, {"g"}, {FloatAttr("alpha", 0.2f)}).Op("Mul", {"c", "g"}, {"y"});
  });
  EXPECT_EQ(OpsAfter(slope.model), (Ops{"Conv", "HardSigmoid", "Mul"}));
  ModelBuilder seen = ConvThen([](ModelBuilder& b) {
    b.Op("HardSigmoid", {"c"}, {"g"}, {FloatAttr("alpha", 1.f / 6.f)}).Op("Mul", {"c", "g"}, {"y"}).Output("g");
  });
  EXPECT_EQ(OpsAfter(seen.model), (Ops{"Conv", "HardSigmoid", "Mul"}));
}

TEST(FuseConvActivation, LeavesWrittenOutHardSwishNearMissesAlone) {
  const Ops unfused{"Conv", "Add", "Clip", "Mul", "Div"};
  auto mul_div = [](ModelBuilder& b) { b.Op("Mul", {"c", "cl"}, {"m"}).Op("Div", {"m", "six"}, {"y"}); };
  // A different offset.
  EXPECT_EQ(OpsAfter(ConvThenWrittenOutHardSwish(mul_div, 2.5f).model), unfused);
  // The clipped value also a graph output; the product read twice.
  ModelBuilder clip_out = ConvThenWrittenOutHardSwish([&](ModelBuilder& b) {
    mul_div(b);
    b.Output("cl");
  });
  EXPECT_EQ(OpsAfter(clip_out.model), unfused);
  ModelBuilder twice = ConvThenWrittenOutHardSwish([](ModelBuilder& b) {
    b.Op("Mul", {"c", "cl"}, {"m"}).Op("Div", {"m", "six"}, {"y"}).Op("Neg", {"m"}, {"n"}).Output("n");
  });
  EXPECT_EQ(OpsAfter(twice.model), (Ops{"Conv", "Add", "Clip", "Mul", "Div", "Neg"}));
  // Clip(0, 6) of x + 3 times something other than x; divided by 5; 6 over the product.
  ModelBuilder other = ConvThenWrittenOutHardSwish([](ModelBuilder& b) {
    b.Op("Neg", {"c"}, {"n"}).Op("Mul", {"n", "cl"}, {"m"}).Op("Div", {"m", "six"}, {"y"});
  });
  EXPECT_EQ(OpsAfter(other.model), (Ops{"Conv", "Add", "Clip", "Neg", "Mul", "Div"}));
  ModelBuilder five = ConvThenWrittenOutHardSwish([](ModelBuilder& b) {
    b.Init("five", Scalar(5.f)).Op("Mul", {"c", "cl"}, {"m"}).Op("Div", {"m", "five"}, {"y"});
  });
  EXPECT_EQ(OpsAfter(five.model), unfused);
  ModelBuilder inverted = ConvThenWrittenOutHardSwish([](ModelBuilder& b) {
    b.Op("Mul", {"c", "cl"}, {"m"}).Op("Div", {"six", "m"}, {"y"});
  });
  EXPECT_EQ(OpsAfter(inverted.model), unfused);
  // Clip bounds other than 0 and 6.
  ModelBuilder relu = ConvThen(
      [](ModelBuilder& b) {
        b.Init("three", Scalar(3.f))
            .Init("zero", Scalar(0.f))
            .Init("six", Scalar(6.f))
            .Op("Add", {"c", "three"}, {"s"})
            .Op("Clip", {"s", "zero"}, {"cl"})
            .Op("Mul", {"c", "cl"}, {"m"})
            .Op("Div", {"m", "six"}, {"y"});
      },
      12);
  EXPECT_EQ(OpsAfter(relu.model), unfused);
  // A constant of higher rank than the Conv's output broadcasts it: not the same shape.
  ModelBuilder wide = ConvThen(
      [](ModelBuilder& b) {
        b.Init("three", Floats({3.f}, {1, 1, 1, 1, 1}))
            .Init("zero", Scalar(0.f))
            .Init("six", Scalar(6.f))
            .Op("Add", {"c", "three"}, {"s"})
            .Op("Clip", {"s", "zero", "six"}, {"cl"})
            .Op("Mul", {"c", "cl"}, {"m"})
            .Op("Div", {"m", "six"}, {"y"});
      },
      12);
  EXPECT_EQ(OpsAfter(wide.model), unfused);
}

TEST(FuseConvActivation, ConvBatchNormReluBecomesOneNode) {
  ModelBuilder b = ConvThen([](ModelBuilder& b) {
    b.Init("scale", Random({4}, 5))
        .Init("shift", Random({4}, 6))
        .Init("mean", Random({4}, 7))
        .Init("var", Floats({0.5f, 1.5f, 0.25f, 2.f}, {4}))
        .Op("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"n"})
        .Op("Relu", {"n"}, {"y"});
  });
  EXPECT_EQ(OpsAfter(b.model), (Ops{"FusedConv"}));
  ExpectSameResults(b.model, ConvInput());
}

TEST(FuseConvActivation, LeavesNearMissesAlone) {
  // The Conv's output is also a graph output.
  ModelBuilder out = ConvThen([](ModelBuilder& b) { b.Op("Relu", {"c"}, {"y"}).Output("c"); });
  EXPECT_EQ(OpsAfter(out.model), (Ops{"Conv", "Relu"}));
  // ... or read by another node.
  ModelBuilder shared = ConvThen([](ModelBuilder& b) { b.Op("Relu", {"c"}, {"y"}).Op("Neg", {"c"}, {"z"}).Output("z"); });
  EXPECT_EQ(OpsAfter(shared.model), (Ops{"Conv", "Relu", "Neg"}));
  // ... or by a subgraph.
  ModelBuilder captured = ConvThen([](ModelBuilder& b) { b.Op("Relu", {"c"}, {"y"}); });
  AddIfReading(captured, "c", "branch_y");
  EXPECT_EQ(OpsAfter(captured.model), (Ops{"Conv", "Relu", "If"}));
  // A Clip bound the caller sets.
  ModelBuilder bound = ConvThen([](ModelBuilder& b) { b.Input("hi", Shape{}).Op("Clip", {"c", "", "hi"}, {"y"}); });
  EXPECT_EQ(OpsAfter(bound.model), (Ops{"Conv", "Clip"}));
  // SiLU whose Sigmoid is also a graph output; Mul by something else.
  ModelBuilder silu =
      ConvThen([](ModelBuilder& b) { b.Op("Sigmoid", {"c"}, {"s"}).Op("Mul", {"c", "s"}, {"y"}).Output("s"); });
  EXPECT_EQ(OpsAfter(silu.model), (Ops{"Conv", "Sigmoid", "Mul"}));
  ModelBuilder not_silu = ConvThen([](ModelBuilder& b) {
    b.Op("Sigmoid", {"c"}, {"s"}).Op("Neg", {"c"}, {"n"}).Op("Mul", {"n", "s"}, {"y"});
  });
  EXPECT_EQ(OpsAfter(not_silu.model), (Ops{"Conv", "Sigmoid", "Neg", "Mul"}));
  // An activation FusedConv does not take.
  ModelBuilder elu = ConvThen([](ModelBuilder& b) { b.Op("Elu", {"c"}, {"y"}); });
  EXPECT_EQ(OpsAfter(elu.model), (Ops{"Conv", "Elu"}));
}

// x -> Conv -> c; c + z -> `rest` (z a graph input of shape `z_shape`).
ModelBuilder ConvResidual(Shape z_shape, const std::function<void(ModelBuilder&)>& rest) {
  return ConvThen([&](ModelBuilder& b) {
    b.Input("z", z_shape).Op("Add", {"z", "c"}, {"r"});
    rest(b);
  });
}

std::vector<NamedValue> ResidualInputs() { return {{"x", Random({1, 3, 6, 6}, 4)}, {"z", Random({1, 4, 6, 6}, 21)}}; }

TEST(FuseConvActivation, TakesAResidualAddAsZ) {
  const Shape z_shape = ShapeFromDims({1, 4, 6, 6});
  ModelBuilder relu = ConvResidual(z_shape, [](ModelBuilder& b) { b.Op("Relu", {"r"}, {"y"}); });
  ModelBuilder silu = ConvResidual(z_shape, [](ModelBuilder& b) {
    b.Op("Sigmoid", {"r"}, {"s"}).Op("Mul", {"r", "s"}, {"y"});
  });
  ModelBuilder alone = ConvResidual(z_shape, [](ModelBuilder& b) { b.Op("Identity", {"r"}, {"y"}); });
  for (auto [label, b, act] : {std::tuple{"relu", relu, "Relu"}, {"silu", silu, "Silu"}, {"no activation", alone, ""}}) {
    Model m = Optimized(b.model);
    ASSERT_EQ(m.graph.nodes.size(), 1u) << label;
    const Node& n = m.graph.nodes[0];
    EXPECT_EQ(n.op_type, "FusedConv") << label;
    EXPECT_EQ(n.inputs, (std::vector<std::string>{"x", "W", "B", "z"})) << label;
    EXPECT_EQ(n.GetString("activation", "").value(), act) << label;
    ExpectSameResults(b.model, ResidualInputs());
  }
  // The sum is also a graph output: Conv + Add fuse, the Relu stays.
  ModelBuilder shared = ConvResidual(z_shape, [](ModelBuilder& b) { b.Op("Relu", {"r"}, {"y"}).Output("r"); });
  EXPECT_EQ(OpsAfter(shared.model), (Ops{"FusedConv", "Relu"}));
  ExpectSameResults(shared.model, ResidualInputs());
}

TEST(FuseConvActivation, LeavesResidualsThatMightBroadcastAlone) {
  // z per channel (not a constant, so not folded into the bias either).
  ModelBuilder channel = ConvResidual(ShapeFromDims({1, 4, 1, 1}), [](ModelBuilder& b) { b.Op("Relu", {"r"}, {"y"}); });
  EXPECT_EQ(OpsAfter(channel.model), (Ops{"Conv", "Add", "Relu"}));
  // z with an unnamed unknown dim.
  ModelBuilder unknown = ConvResidual(Shape{Dim::Known(1), Dim::Unknown(), Dim::Known(6), Dim::Known(6)},
                                      [](ModelBuilder& b) { b.Op("Relu", {"r"}, {"y"}); });
  EXPECT_EQ(OpsAfter(unknown.model), (Ops{"Conv", "Add", "Relu"}));
}

TEST(FuseConvActivation, LeavesDoubleConvsAlone) {
  ModelBuilder b;
  Tensor w = Tensor::Allocate(DataType::kDouble, {2, 1, 1, 1}).value();
  b.Input("x", ShapeFromDims({1, 1, 2, 2}), DataType::kDouble)
      .Init("W", w)
      .Op("Conv", {"x", "W"}, {"c"})
      .Op("Relu", {"c"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"Conv", "Relu"}));
}

// ---- GELU -> Gelu / BiasGelu / FastGelu --------------------------------------------------

ModelBuilder WithGeluConstants(ModelBuilder b) {
  b.Init("sqrt2", Scalar(kSqrt2))
      .Init("inv_sqrt2", Scalar(1.f / kSqrt2))
      .Init("one", Scalar(1.f))
      .Init("half", Scalar(0.5f))
      .Init("three", Scalar(3.f))
      .Init("cubic", Scalar(0.044715f))
      .Init("sqrt_2_pi", Scalar(0.7978845608f));
  return b;
}

// x[2,3,8] -> `gelu` -> y.
ModelBuilder Gelu(const std::function<void(ModelBuilder&)>& gelu) {
  ModelBuilder b;
  b.Input("x", ShapeFromDims({2, 3, 8}));
  b = WithGeluConstants(b);
  gelu(b);
  b.Output("y");
  return b;
}

// torch's nn.GELU before opset 20: (x * (1 + erf(x / sqrt(2)))) * 0.5.
void ErfGeluTorch(ModelBuilder& b) {
  b.Op("Div", {"x", "sqrt2"}, {"d"})
      .Op("Erf", {"d"}, {"e"})
      .Op("Add", {"e", "one"}, {"a"})
      .Op("Mul", {"x", "a"}, {"m"})
      .Op("Mul", {"m", "half"}, {"y"});
}

std::vector<NamedValue> GeluInput() { return {{"x", Random({2, 3, 8}, 9)}}; }

void ExpectFusedTo(const ModelBuilder& b, const std::string& op, size_t inputs, const char* label) {
  Model m = Optimized(b.model);
  std::vector<std::string> ops;
  for (const Node& n : m.graph.nodes) ops.push_back(n.op_type);
  ASSERT_EQ(ops, (Ops{op})) << label;
  EXPECT_EQ(m.graph.nodes[0].domain, "com.microsoft");
  EXPECT_EQ(m.graph.nodes[0].inputs.size(), inputs) << label;
  EXPECT_EQ(m.graph.nodes[0].outputs, std::vector<std::string>{"y"}) << label;
}

TEST(FuseGelu, ErfFormsBecomeGelu) {
  ModelBuilder torch = Gelu(ErfGeluTorch);
  // (x * 0.5) * (1 + erf(x * (1/sqrt(2)))), constants on the left.
  ModelBuilder half_first = Gelu([](ModelBuilder& b) {
    b.Op("Mul", {"half", "x"}, {"h"})
        .Op("Mul", {"inv_sqrt2", "x"}, {"d"})
        .Op("Erf", {"d"}, {"e"})
        .Op("Add", {"one", "e"}, {"a"})
        .Op("Mul", {"h", "a"}, {"y"});
  });
  // x * ((1 + erf(x / sqrt(2))) * 0.5).
  ModelBuilder half_last = Gelu([](ModelBuilder& b) {
    b.Op("Div", {"x", "sqrt2"}, {"d"})
        .Op("Erf", {"d"}, {"e"})
        .Op("Add", {"e", "one"}, {"a"})
        .Op("Mul", {"a", "half"}, {"m"})
        .Op("Mul", {"x", "m"}, {"y"});
  });
  for (auto [label, b] : {std::pair{"torch", torch}, {"half first", half_first}, {"half last", half_last}}) {
    ExpectFusedTo(b, "Gelu", 1, label);
    ExpectSameResults(b.model, GeluInput());
  }
}

TEST(FuseGelu, AbsorbsABiasAddIntoBiasGelu) {
  ModelBuilder b;
  b.Input("p", ShapeFromDims({2, 3, 8})).Init("bias", Random({8}, 10)).Op("Add", {"p", "bias"}, {"x"});
  b = WithGeluConstants(b);
  ErfGeluTorch(b);
  b.Output("y");
  ExpectFusedTo(b, "BiasGelu", 2, "bias");
  ExpectSameResults(b.model, {{"p", Random({2, 3, 8}, 11)}});
  // When the biased sum has another reader, the Add stays.
  ModelBuilder shared = b;
  shared.Output("x");
  EXPECT_EQ(OpsAfter(shared.model), (Ops{"Add", "Gelu"}));
}

TEST(FuseGelu, LeavesNearMissesAlone) {
  const Ops unfused{"Div", "Erf", "Add", "Mul", "Mul"};
  // A constant that is not sqrt(2).
  ModelBuilder wrong = Gelu(ErfGeluTorch);
  wrong.model.graph.initializers[0].tensor = Scalar(1.5f);
  EXPECT_EQ(OpsAfter(wrong.model), unfused);
  // An intermediate with another reader.
  ModelBuilder shared = Gelu([](ModelBuilder& b) { ErfGeluTorch(b); b.Op("Neg", {"e"}, {"z"}).Output("z"); });
  EXPECT_EQ(OpsAfter(shared.model), (Ops{"Div", "Erf", "Add", "Mul", "Mul", "Neg"}));
  // A graph output in the middle.
  ModelBuilder output = Gelu([](ModelBuilder& b) { ErfGeluTorch(b); b.Output("m"); });
  EXPECT_EQ(OpsAfter(output.model), unfused);
  // 0.5 * x * (1 + erf(x)) (no scaling inside the erf) is not GELU.
  ModelBuilder unscaled = Gelu([](ModelBuilder& b) {
    b.Op("Erf", {"x"}, {"e"}).Op("Add", {"e", "one"}, {"a"}).Op("Mul", {"x", "a"}, {"m"}).Op("Mul", {"m", "half"}, {"y"});
  });
  EXPECT_EQ(OpsAfter(unscaled.model), (Ops{"Erf", "Add", "Mul", "Mul"}));
}

// GPT-2's gelu_new: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * cube))).
void TanhGelu(ModelBuilder& b, const std::function<void(ModelBuilder&)>& cube) {
  cube(b);
  b.Op("Mul", {"cube", "cubic"}, {"k"})
      .Op("Add", {"x", "k"}, {"s"})
      .Op("Mul", {"s", "sqrt_2_pi"}, {"u"})
      .Op("Tanh", {"u"}, {"t"})
      .Op("Add", {"t", "one"}, {"a"})
      .Op("Mul", {"x", "half"}, {"h"})
      .Op("Mul", {"h", "a"}, {"y"});
}

void PowCube(ModelBuilder& b) { b.Op("Pow", {"x", "three"}, {"cube"}); }
void MulCube(ModelBuilder& b) { b.Op("Mul", {"x", "x"}, {"sq"}).Op("Mul", {"sq", "x"}, {"cube"}); }

TEST(FuseGelu, TanhFormsBecomeFastGelu) {
  ModelBuilder pow = Gelu([](ModelBuilder& b) { TanhGelu(b, PowCube); });
  ModelBuilder mul = Gelu([](ModelBuilder& b) { TanhGelu(b, MulCube); });
  for (auto [label, b] : {std::pair{"pow", pow}, {"x*x*x", mul}}) {
    ExpectFusedTo(b, "FastGelu", 1, label);
    ExpectSameResults(b.model, GeluInput());
  }
  ModelBuilder bias;
  bias.Input("p", ShapeFromDims({2, 3, 8})).Init("bias", Random({8}, 12)).Op("Add", {"bias", "p"}, {"x"});
  bias = WithGeluConstants(bias);
  TanhGelu(bias, PowCube);
  bias.Output("y");
  ExpectFusedTo(bias, "FastGelu", 2, "bias");
  ExpectSameResults(bias.model, {{"p", Random({2, 3, 8}, 13)}});
}

TEST(FuseGelu, LeavesTanhNearMissesAlone) {
  // 0.05 instead of 0.044715.
  ModelBuilder wrong = Gelu([](ModelBuilder& b) { TanhGelu(b, PowCube); });
  for (Initializer& init : wrong.model.graph.initializers)
    if (init.name == "cubic") init.tensor = Scalar(0.05f);
  EXPECT_EQ(OpsAfter(wrong.model).size(), 8u);
  // x^2 instead of x^3.
  ModelBuilder square = Gelu([](ModelBuilder& b) { TanhGelu(b, [](ModelBuilder& b) { b.Op("Mul", {"x", "x"}, {"cube"}); }); });
  EXPECT_EQ(OpsAfter(square.model).size(), 8u);
  // The tanh also a graph output.
  ModelBuilder output = Gelu([](ModelBuilder& b) { TanhGelu(b, PowCube); b.Output("t"); });
  EXPECT_EQ(OpsAfter(output.model).size(), 8u);
}

// ---- Add + LayerNormalization -> SkipLayerNormalization ------------------------------------

// a, b [2,3,8] -> Add -> s -> LayerNormalization(gamma, beta) -> y.
ModelBuilder AddLayerNorm(Shape b_shape = ShapeFromDims({2, 3, 8}), std::vector<Attribute> ln_attrs = {
                                                                         FloatAttr("epsilon", 1e-3f)}) {
  ModelBuilder b;
  b.Input("a", ShapeFromDims({2, 3, 8}))
      .Input("b", b_shape)
      .Init("gamma", Random({8}, 14))
      .Init("beta", Random({8}, 15))
      .Op("Add", {"a", "b"}, {"s"})
      .Op("LayerNormalization", {"s", "gamma", "beta"}, {"y"}, std::move(ln_attrs))
      .Output("y");
  return b;
}

std::vector<NamedValue> SkipInputs() { return {{"a", Random({2, 3, 8}, 16)}, {"b", Random({2, 3, 8}, 17)}}; }

TEST(FuseSkipLayerNorm, AddAndLayerNormBecomeOneNode) {
  ModelBuilder b = AddLayerNorm();
  Model m = Optimized(b.model);
  ASSERT_EQ(m.graph.nodes.size(), 1u);
  const Node& n = m.graph.nodes[0];
  EXPECT_EQ(n.op_type, "SkipLayerNormalization");
  EXPECT_EQ(n.domain, "com.microsoft");
  EXPECT_EQ(n.inputs, (std::vector<std::string>{"a", "b", "gamma", "beta"}));
  EXPECT_EQ(n.outputs, std::vector<std::string>{"y"});
  EXPECT_FLOAT_EQ(n.GetFloat("epsilon").value(), 1e-3f);
  ExpectSameResults(b.model, SkipInputs());
}

TEST(FuseSkipLayerNorm, KeepsASharedSumAsTheFourthOutput) {
  ModelBuilder b = AddLayerNorm();
  b.model.graph.outputs.clear();
  b.Op("Add", {"s", "y"}, {"z"}).Output("z").Output("s");
  Model m = Optimized(b.model);
  const Node* n = FindOp(m, "SkipLayerNormalization");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->outputs, (std::vector<std::string>{"y", "", "", "s"}));
  EXPECT_EQ(m.graph.nodes.size(), 2u);
  ExpectSameResults(b.model, SkipInputs());
}

TEST(FuseSkipLayerNorm, TakesALinearLayersBiasAsTheFifthInput) {
  // s = (p + bias) + b, as torch exports x + Linear(h); without beta.
  ModelBuilder b;
  b.Input("p", ShapeFromDims({2, 3, 8}))
      .Input("b", ShapeFromDims({2, 3, 8}))
      .Init("bias", Random({8}, 18))
      .Init("gamma", Random({8}, 14))
      .Op("Add", {"bias", "p"}, {"a"})
      .Op("Add", {"b", "a"}, {"s"})
      .Op("LayerNormalization", {"s", "gamma"}, {"y"})
      .Output("y");
  Model m = Optimized(b.model);
  ASSERT_EQ(m.graph.nodes.size(), 1u);
  EXPECT_EQ(m.graph.nodes[0].inputs, (std::vector<std::string>{"b", "p", "gamma", "", "bias"}));
  ExpectSameResults(b.model, {{"p", Random({2, 3, 8}, 19)}, {"b", Random({2, 3, 8}, 20)}});
  // A biased operand someone else reads keeps its Add.
  ModelBuilder shared = b;
  shared.Output("a");
  EXPECT_EQ(OpsAfter(shared.model), (Ops{"Add", "SkipLayerNormalization"}));
}

TEST(FuseSkipLayerNorm, LeavesNearMissesAlone) {
  // b broadcasts over the leading dims: the sum has a's shape, but the fused op would need b's.
  ModelBuilder broadcast = AddLayerNorm(ShapeFromDims({8}));
  EXPECT_EQ(OpsAfter(broadcast.model), (Ops{"Add", "LayerNormalization"}));
  // Normalization over the last two axes.
  ModelBuilder two_axes = AddLayerNorm(ShapeFromDims({2, 3, 8}), {IntAttr("axis", 1)});
  EXPECT_EQ(OpsAfter(two_axes.model), (Ops{"Add", "LayerNormalization"}));
  // The LayerNormalization's Mean output is read.
  ModelBuilder mean = AddLayerNorm();
  mean.model.graph.nodes[1].outputs = {"y", "mean"};
  mean.Output("mean");
  EXPECT_EQ(OpsAfter(mean.model), (Ops{"Add", "LayerNormalization"}));
  // Unknown (unnamed) dims: the two operands might broadcast.
  ModelBuilder unknown = AddLayerNorm(Shape{Dim::Unknown(), Dim::Known(3), Dim::Known(8)});
  EXPECT_EQ(OpsAfter(unknown.model), (Ops{"Add", "LayerNormalization"}));
}

}  // namespace
}  // namespace nee
