// The widen-narrow-float pass (src/opt/widen_narrow_float.cc): what it
// rewrites (float16 / bfloat16 nodes of ops with a fast float32 kernel: Casts
// around them, narrow weights widened once), what it leaves (data movement,
// ops without a fast kernel, float32 nodes, the rounding Cast pairs between
// widened nodes), the exact Cast pair it bypasses, and that its op list only
// names ops ep/cpu has a float32 kernel for. That the widened graph computes
// what the reference kernels compute is in tests/python/test_quantize_bf16.py
// (against onnx.reference and numpy).
#include <gtest/gtest.h>

#include "base/cpu_isa.h"

#include <cmath>
#include <cstring>

#include "ep/cpu/cpu_kernels.h"
#include "ir/float_formats.h"
#include "ops/attr_spec.h"
#include "ops/op_registry.h"
#include "opt_test_util.h"

namespace nee {
namespace {

using namespace opt_test;

Tensor Narrow(const Tensor& f, DataType type) {
  Tensor t = Tensor::Allocate(type, f.dims()).value();
  for (int64_t i = 0; i < f.num_elements(); ++i)
    t.data<uint16_t>()[i] = type == DataType::kFloat16 ? FloatToHalf(f.data<float>()[i])
                                                       : FloatToBFloat16(f.data<float>()[i]);
  return t;
}

// Runs the pass alone; whether it changed the graph.
bool Widen(Model& m) {
  BindAttrDeclarations(m);
  auto checked = CheckModel(m, OpRegistry::Global());
  EXPECT_TRUE(checked.ok()) << checked.status().ToString();
  if (!checked.ok()) return false;
  bool changed = false;
  Status st = WidenNarrowFloat(m.graph, *checked, &changed);
  EXPECT_TRUE(st.ok()) << st.ToString();
  // What the pass leaves must check.
  BindAttrDeclarations(m);
  auto again = CheckModel(m, OpRegistry::Global());
  EXPECT_TRUE(again.ok()) << again.status().ToString();
  return changed;
}

const Initializer* FindInit(const Model& m, const std::string& name) {
  for (const Initializer& i : m.graph.initializers)
    if (i.name == name) return &i;
  return nullptr;
}

// x (narrow) -> MatMul(W) -> Relu -> Reshape -> ReduceMean -> y, all narrow.
ModelBuilder NarrowMlp(DataType type) {
  ModelBuilder b(17);
  b.Input("x", ShapeFromDims({2, 3}), type)
      .Init("W", Narrow(Random({3, 4}, 3), type))
      .Init("shape", Ints({4, 2}))
      .Op("MatMul", {"x", "W"}, {"h"})
      .Op("Relu", {"h"}, {"r"})
      .Op("Reshape", {"r", "shape"}, {"s"})
      .Op("ReduceMean", {"s"}, {"y"}, {IntsAttr("axes", {1})})
      .Output("y");
  return b;
}

// Whether ep/cpu computes a MatMul of `type` in that type, so the pass keeps
// it: bfloat16 with AVX512-BF16, float16 at the AVX2 level (F16C).
bool MatMulRunsNarrow(DataType type) {
  return type == DataType::kBFloat16 ? HostHasAvx512Bf16() : HostIsaLevel() >= CpuIsaLevel::kAvx2;
}

TEST(WidenNarrowFloat, WidensComputeOpsAndTheirWeightsOnly) {
  for (DataType type : {DataType::kFloat16, DataType::kBFloat16}) {
    // A MatMul stays narrow where ep/cpu computes it so (next tests; this
    // one then runs under NEE_MAX_ISA=portable).
    if (MatMulRunsNarrow(type)) continue;
    Model m = NarrowMlp(type).model;
    ASSERT_TRUE(Widen(m));
    // MatMul and Relu compute in float32; Relu, which commutes with the
    // rounding, reads MatMul's float32 output, and its own output is cast back
    // to the narrow type; Reshape (data movement) and ReduceMean (no fast
    // kernel) stay narrow.
    EXPECT_EQ(OpTypes(m), (Ops{"Cast", "MatMul", "Relu", "Cast", "Reshape", "ReduceMean"})) << DataTypeName(type);
    const Initializer* w = FindInit(m, "W_fp32");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->tensor.dtype(), DataType::kFloat);
    EXPECT_EQ(FindInit(m, "W"), nullptr) << "the narrow weight nothing reads any more is dropped";
    const Tensor original = NarrowMlp(type).model.graph.initializers[0].tensor;
    for (int64_t i = 0; i < original.num_elements(); ++i) {
      const uint16_t bits = original.data<uint16_t>()[i];
      EXPECT_EQ(w->tensor.data<float>()[i], type == DataType::kFloat16 ? HalfToFloat(bits) : BFloat16ToFloat(bits));
    }
    const Node& matmul = m.graph.nodes[1];
    EXPECT_EQ(matmul.inputs, (std::vector<std::string>{"x_fp32", "W_fp32"}));
    EXPECT_EQ(m.graph.nodes[2].inputs[0], matmul.outputs[0]);
    EXPECT_EQ(m.graph.nodes[3].outputs[0], "r");  // the narrow name is written by the Cast back
    EXPECT_EQ(m.graph.nodes[3].GetInt("to").value(), static_cast<int64_t>(type));
    EXPECT_EQ(m.graph.nodes[4].inputs[0], "r");
    // A second run finds nothing left to widen.
    EXPECT_FALSE(Widen(m));
  }
}

// On a CPU with AVX512-BF16 (HostHasAvx512Bf16), bfloat16 MatMul
// and Gemm run ep/cpu's bfloat16 kernel: they keep their bfloat16 inputs and
// weights; the rest of the graph is widened as elsewhere.
TEST(WidenNarrowFloat, KeepsBFloat16MatMulAndGemmWhereTheCpuComputesThem) {
  if (!HostHasAvx512Bf16()) GTEST_SKIP() << "this CPU lacks avx512bf16: MatMul is widened";
  Model m = NarrowMlp(DataType::kBFloat16).model;
  ASSERT_TRUE(Widen(m));
  // Relu reads MatMul's bfloat16 output through a Cast and is cast back.
  EXPECT_EQ(OpTypes(m), (Ops{"MatMul", "Cast", "Relu", "Cast", "Reshape", "ReduceMean"}));
  EXPECT_EQ(m.graph.nodes[0].inputs, (std::vector<std::string>{"x", "W"}));
  ASSERT_NE(FindInit(m, "W"), nullptr);
  EXPECT_EQ(FindInit(m, "W")->tensor.dtype(), DataType::kBFloat16);
  EXPECT_EQ(FindInit(m, "W_fp32"), nullptr);
  EXPECT_FALSE(Widen(m));

  ModelBuilder b(17);
  b.Input("x", ShapeFromDims({2, 3}), DataType::kBFloat16)
      .Init("W", Narrow(Random({4, 3}, 4), DataType::kBFloat16))
      .Init("C", Narrow(Random({4}, 5), DataType::kBFloat16))
      .Op("Gemm", {"x", "W", "C"}, {"y"}, {IntAttr("transB", 1)})
      .Output("y");
  Model gemm = b.model;
  EXPECT_FALSE(Widen(gemm));
  EXPECT_EQ(OpTypes(gemm), (Ops{"Gemm"}));
}

// At the AVX2 level float16 MatMul and Gemm run ep/cpu's float16-weight
// kernel (f16_matmul_fast.cc): they keep their float16 inputs and weights,
// which are never widened into float32 initializers.
TEST(WidenNarrowFloat, KeepsFloat16MatMulAndGemmWhereTheCpuComputesThem) {
  if (!MatMulRunsNarrow(DataType::kFloat16)) GTEST_SKIP() << "below the AVX2 level: MatMul is widened";
  Model m = NarrowMlp(DataType::kFloat16).model;
  ASSERT_TRUE(Widen(m));
  EXPECT_EQ(OpTypes(m), (Ops{"MatMul", "Cast", "Relu", "Cast", "Reshape", "ReduceMean"}));
  EXPECT_EQ(m.graph.nodes[0].inputs, (std::vector<std::string>{"x", "W"}));
  ASSERT_NE(FindInit(m, "W"), nullptr);
  EXPECT_EQ(FindInit(m, "W")->tensor.dtype(), DataType::kFloat16);
  EXPECT_EQ(FindInit(m, "W_fp32"), nullptr);
  EXPECT_FALSE(Widen(m));

  ModelBuilder b(17);
  b.Input("x", ShapeFromDims({2, 3}), DataType::kFloat16)
      .Init("W", Narrow(Random({4, 3}, 4), DataType::kFloat16))
      .Init("C", Narrow(Random({4}, 5), DataType::kFloat16))
      .Op("Gemm", {"x", "W", "C"}, {"y"}, {IntAttr("transB", 1)})
      .Output("y");
  Model gemm = b.model;
  EXPECT_FALSE(Widen(gemm));
  EXPECT_EQ(OpTypes(gemm), (Ops{"Gemm"}));

  // A product of two activations (attention's) is widened: SGEMM reads B in place.
  ModelBuilder c(17);
  c.Input("x", ShapeFromDims({2, 3, 4}), DataType::kFloat16)
      .Input("y", ShapeFromDims({2, 4, 5}), DataType::kFloat16)
      .Op("MatMul", {"x", "y"}, {"z"})
      .Output("z");
  Model activations = c.model;
  ASSERT_TRUE(Widen(activations));
  EXPECT_EQ(OpTypes(activations), (Ops{"Cast", "Cast", "MatMul", "Cast"}));

  // So is a MatMul by a constant B that is not a matrix (the kernel packs 2-D weights only).
  ModelBuilder d(17);
  d.Input("x", ShapeFromDims({2, 3, 4}), DataType::kFloat16)
      .Init("B3", Narrow(Random({2, 4, 5}, 6), DataType::kFloat16))
      .Op("MatMul", {"x", "B3"}, {"z"})
      .Output("z");
  Model batched = d.model;
  ASSERT_TRUE(Widen(batched));
  EXPECT_EQ(OpTypes(batched), (Ops{"Cast", "MatMul", "Cast"}));
}

// x -> Conv -> Relu -> Conv -> Add(r) -> Relu -> Neg, all bfloat16: on a CPU
// with AVX512-BF16 the Convs (ep/cpu/conv_bf16.cc) and the Add and Relus
// fuse-conv-activation folds into them stay bfloat16, then become two ai.nee
// FusedConv (the second with Z = r) with no Cast between them; Neg (no such
// kernel) is widened. Elsewhere every node is widened.
ModelBuilder Bf16ResidualBlock() {
  ModelBuilder b(22);
  b.Input("x", ShapeFromDims({1, 4, 6, 5}), DataType::kBFloat16)
      .Init("W1", Narrow(Random({4, 4, 3, 3}, 6), DataType::kBFloat16))
      .Init("W2", Narrow(Random({4, 4, 1, 1}, 7), DataType::kBFloat16))
      .Op("Conv", {"x", "W1"}, {"c1"}, {IntsAttr("pads", {1, 1, 1, 1})})
      .Op("Relu", {"c1"}, {"r"})
      .Op("Conv", {"r", "W2"}, {"c2"})
      .Op("Add", {"c2", "r"}, {"s"})
      .Op("Relu", {"s"}, {"t"})
      .Op("Neg", {"t"}, {"y"})
      .Output("y");
  return b;
}

TEST(WidenNarrowFloat, KeepsBFloat16ConvsAndTheirResidualChain) {
  ModelBuilder b = Bf16ResidualBlock();
  Model m = b.model;
  if (!HostHasAvx512Bf16()) {
    ASSERT_TRUE(Widen(m));
    for (const Node& n : m.graph.nodes)
      if (n.op_type != "Cast") EXPECT_NE(n.inputs[0], "x") << n.op_type;  // every compute node reads a Cast
    return;
  }
  ASSERT_TRUE(Widen(m));
  EXPECT_EQ(OpTypes(m), (Ops{"Conv", "Relu", "Conv", "Add", "Relu", "Cast", "Neg", "Cast"}));
  EXPECT_EQ(FindInit(m, "W1")->tensor.dtype(), DataType::kBFloat16);
  EXPECT_EQ(OpsAfter(b.model, 2), (Ops{"FusedConv", "FusedConv", "Cast", "Neg", "Cast"}));
  Model fused = b.model;
  ASSERT_TRUE(OptimizeModel(fused, 2).ok());
  EXPECT_EQ(fused.graph.nodes[0].domain, "ai.nee");
  ASSERT_EQ(fused.graph.nodes[1].inputs.size(), 4u);
  EXPECT_EQ(fused.graph.nodes[1].inputs[3], fused.graph.nodes[0].outputs[0]);  // Z: the first block's output
  // The fused graph computes the unfused one's per-op-rounded values (float32 summation order aside).
  Tensor x = Narrow(Random({1, 4, 6, 5}, 8), DataType::kBFloat16);
  const Tensor want = RunAt(b.model, {{"x", Value(x)}}, 0);
  const Tensor got = RunAt(b.model, {{"x", Value(x)}}, 99);
  ASSERT_EQ(got.dims(), want.dims());
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const float g = BFloat16ToFloat(got.data<uint16_t>()[i]), w = BFloat16ToFloat(want.data<uint16_t>()[i]);
    EXPECT_LE(std::abs(g - w), std::abs(w) * 0x1p-6 + 1e-6f) << i;  // two bfloat16 ulps
  }
}

// Clip with constant bounds (Relu6) commutes with rounding as Relu does: a
// widened float16 Conv + Clip fuse into FusedConv; a bfloat16 one stays
// bfloat16 with the Clip (AVX512-BF16) and becomes ai.nee FusedConv.
TEST(WidenNarrowFloat, ClipFusesLikeRelu) {
  for (DataType type : {DataType::kFloat16, DataType::kBFloat16}) {
    ModelBuilder b(22);
    b.Input("x", ShapeFromDims({1, 2, 5, 5}), type)
        .Init("W", Narrow(Random({3, 2, 3, 3}, 10), type))
        .Init("lo", Narrow(Floats({0.f}, {}), type))
        .Init("hi", Narrow(Floats({0.5f}, {}), type))
        .Op("Conv", {"x", "W"}, {"c"}, {IntsAttr("pads", {1, 1, 1, 1})})
        .Op("Clip", {"c", "lo", "hi"}, {"y"})
        .Output("y");
    Model m = b.model;
    ASSERT_TRUE(OptimizeModel(m, 2).ok());
    const bool narrow = type == DataType::kBFloat16 && HostHasAvx512Bf16();
    EXPECT_EQ(OpTypes(m), (narrow ? Ops{"FusedConv"} : Ops{"Cast", "FusedConv", "Cast"}));
    const Node& conv = m.graph.nodes[narrow ? 0 : 1];
    EXPECT_EQ(conv.domain, narrow ? "ai.nee" : "com.microsoft");
    ASSERT_NE(conv.FindAttr("activation"), nullptr);
    EXPECT_EQ(conv.FindAttr("activation")->s, "Clip");
    // The values of the unfused per-op-rounded graph (the reference kernels).
    const Tensor x = Narrow(Random({1, 2, 5, 5}, 11), type);
    const Tensor want = RunAt(b.model, {{"x", Value(x)}}, 0);
    const Tensor got = RunAt(b.model, {{"x", Value(x)}}, 99);
    for (int64_t i = 0; i < want.num_elements(); ++i) {
      auto value = [type](const Tensor& t, int64_t k) {
        const uint16_t bits = t.data<uint16_t>()[k];
        return type == DataType::kFloat16 ? HalfToFloat(bits) : BFloat16ToFloat(bits);
      };
      EXPECT_LE(std::abs(value(got, i) - value(want, i)), std::abs(value(want, i)) * 0x1p-6 + 1e-6f) << i;
    }
  }
}

// A depthwise bfloat16 Conv (W [C, 1, kh, kw], group C) stays bfloat16 with
// its Clip where the CPU computes it (conv_bf16.cc); a grouped conv that is
// not depthwise (two channels a group) is widened.
TEST(WidenNarrowFloat, KeepsDepthwiseBFloat16ConvsOnly) {
  for (int64_t channels_per_group : {1, 2}) {
    ModelBuilder b(22);
    b.Input("x", ShapeFromDims({1, 4, 6, 6}), DataType::kBFloat16)
        .Init("W", Narrow(Random({4, channels_per_group, 3, 3}, 12), DataType::kBFloat16))
        .Init("lo", Narrow(Floats({0.f}, {}), DataType::kBFloat16))
        .Init("hi", Narrow(Floats({6.f}, {}), DataType::kBFloat16))
        .Op("Conv", {"x", "W"}, {"c"}, {IntsAttr("pads", {1, 1, 1, 1}), IntAttr("group", 4 / channels_per_group)})
        .Op("Clip", {"c", "lo", "hi"}, {"y"})
        .Output("y");
    Model m = b.model;
    const bool kept = channels_per_group == 1 && HostHasAvx512Bf16();
    EXPECT_EQ(Widen(m), !kept);  // changed: something was widened
    EXPECT_EQ(OpTypes(m), (kept ? Ops{"Conv", "Clip"} : Ops{"Cast", "Conv", "Clip", "Cast"})) << channels_per_group;
  }
}

// A bfloat16 Conv whose output is also a graph output stays bfloat16, but
// the Relu after it is widened: no fusion could take it.
TEST(WidenNarrowFloat, WidensWhatCannotFuseIntoABFloat16Conv) {
  if (!HostHasAvx512Bf16()) GTEST_SKIP() << "this CPU lacks avx512bf16: every Conv is widened";
  ModelBuilder b(22);
  b.Input("x", ShapeFromDims({1, 2, 4, 4}), DataType::kBFloat16)
      .Init("W", Narrow(Random({3, 2, 3, 3}, 9), DataType::kBFloat16))
      .Op("Conv", {"x", "W"}, {"c"}, {IntsAttr("pads", {1, 1, 1, 1}), IntAttr("group", 1)})
      .Op("Relu", {"c"}, {"y"})
      .Output("y")
      .Output("c");
  Model m = b.model;
  ASSERT_TRUE(Widen(m));
  EXPECT_EQ(OpTypes(m), (Ops{"Conv", "Cast", "Relu", "Cast"}));
}

TEST(WidenNarrowFloat, LeavesFloat32AndCastsAlone) {
  ModelBuilder b(17);
  b.Input("x", ShapeFromDims({2, 3}))
      .Init("W", Random({3, 4}, 3))
      .Op("MatMul", {"x", "W"}, {"h"})
      .Op("Cast", {"h"}, {"h16"}, {IntAttr("to", static_cast<int64_t>(DataType::kFloat16))})
      .Op("Cast", {"h16"}, {"y"}, {IntAttr("to", static_cast<int64_t>(DataType::kFloat))})
      .Output("y");
  Model m = b.model;
  // float -> float16 -> float rounds: it is the model's meaning and stays.
  EXPECT_FALSE(Widen(m));
  EXPECT_EQ(OpTypes(m), (Ops{"MatMul", "Cast", "Cast"}));
}

TEST(WidenNarrowFloat, BypassesTheExactCastPair) {
  // float16 -> float -> float16 gives its input back bit for bit.
  ModelBuilder b(17);
  b.Input("x", ShapeFromDims({2, 3}), DataType::kFloat16)
      .Op("Cast", {"x"}, {"xf"}, {IntAttr("to", static_cast<int64_t>(DataType::kFloat))})
      .Op("Cast", {"xf"}, {"x16"}, {IntAttr("to", static_cast<int64_t>(DataType::kFloat16))})
      .Op("Transpose", {"x16"}, {"y"})
      .Output("y");
  Model m = b.model;
  ASSERT_TRUE(Widen(m));
  EXPECT_EQ(m.graph.nodes.back().inputs[0], "x");
  // Bypassing a Cast to bfloat16 of a float16 value's float would not be exact.
  ModelBuilder c(17);
  c.Input("x", ShapeFromDims({2, 3}), DataType::kFloat16)
      .Op("Cast", {"x"}, {"xf"}, {IntAttr("to", static_cast<int64_t>(DataType::kFloat))})
      .Op("Cast", {"xf"}, {"xb"}, {IntAttr("to", static_cast<int64_t>(DataType::kBFloat16))})
      .Op("Transpose", {"xb"}, {"y"})
      .Output("y");
  Model n = c.model;
  EXPECT_FALSE(Widen(n));
  EXPECT_EQ(OpTypes(n), (Ops{"Cast", "Cast", "Transpose"}));
}

TEST(WidenNarrowFloat, GraphOutputsAndSharedInputsKeepOneCastEach) {
  // x is read by two widened nodes (one Cast up), and h is a graph output
  // written by the Cast back under its own name.
  ModelBuilder b(17);
  b.Input("x", ShapeFromDims({2, 3}), DataType::kFloat16)
      .Op("Relu", {"x"}, {"h"})
      .Op("Sigmoid", {"x"}, {"s"})
      .Op("Add", {"h", "s"}, {"y"})
      .Output("h")
      .Output("y");
  Model m = b.model;
  ASSERT_TRUE(Widen(m));
  EXPECT_EQ(OpTypes(m), (Ops{"Cast", "Relu", "Cast", "Cast", "Sigmoid", "Cast", "Cast", "Add", "Cast"}));
  EXPECT_EQ(m.graph.nodes[2].outputs[0], "h");
  EXPECT_EQ(m.graph.nodes.back().outputs[0], "y");
  const Tensor x = Narrow(Floats({-1, 0.5f, 2, -3, 0.25f, 7}, {2, 3}), DataType::kFloat16);
  const Tensor want = RunAt(b.model, {{"x", Value(x)}}, 0);
  const Tensor got = RunAt(m, {{"x", Value(x)}}, 0);
  ASSERT_EQ(got.dtype(), DataType::kFloat16);
  // Relu, Sigmoid and Add round once each either way: the values agree bit for bit.
  EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), want.byte_size()), 0);
}

TEST(WidenNarrowFloat, EveryWidenedOpHasAFloat32Kernel) {
  for (const auto& [domain, op] : WidenedOps()) {
    bool found = false;
    for (const cpu::OptimizedKernel& k : cpu::OptimizedKernels())
      found |= std::string(k.domain) == domain && std::string(k.op) == op && k.types &&
               std::string(k.types).find("float32") != std::string::npos;
    EXPECT_TRUE(found) << domain << "." << op << " has no fast float32 kernel in ep/cpu/cpu_kernels.cc";
  }
}

TEST(WidenNarrowFloat, RoundingBetweenWidenedNodesStaysExceptBeforeRelu) {
  // Neg -> Tanh: the Cast pair between them is Neg's rounding and
  // stays; Tanh -> Relu: Relu reads Tanh's float32 output (it commutes with
  // the rounding), unless something else reads Tanh's narrow output too.
  for (bool shared : {false, true}) {
    ModelBuilder b(17);
    b.Input("x", ShapeFromDims({2, 3}), DataType::kFloat16)
        .Op("Neg", {"x"}, {"s"})
        .Op("Tanh", {"s"}, {"t"})
        .Op("Relu", {"t"}, {"y"})
        .Output("y");
    if (shared) b.Output("t");
    Model m = b.model;
    ASSERT_TRUE(Widen(m));
    if (shared)
      EXPECT_EQ(OpTypes(m), (Ops{"Cast", "Neg", "Cast", "Cast", "Tanh", "Cast", "Cast", "Relu", "Cast"}));
    else
      EXPECT_EQ(OpTypes(m), (Ops{"Cast", "Neg", "Cast", "Cast", "Tanh", "Relu", "Cast"}));
    // Against the reference kernels on the narrow graph, with values around
    // zero where Relu meets rounding (6e-8: float16's smallest subnormal):
    // equal as numbers (a zero's sign may differ).
    const std::vector<float> xs = {-1e-4f, 3.f, 0.f, 6e-8f, -0.f, -2.f};
    const Tensor x = Narrow(Floats(xs, {2, 3}), DataType::kFloat16);
    const Tensor want = RunAt(b.model, {{"x", Value(x)}}, 0);
    const Tensor got = RunAt(m, {{"x", Value(x)}}, 0);
    for (int64_t i = 0; i < want.num_elements(); ++i)
      EXPECT_EQ(HalfToFloat(got.data<uint16_t>()[i]), HalfToFloat(want.data<uint16_t>()[i])) << i;
  }
}

TEST(WidenNarrowFloat, RunsAtLevelTwoBeforeTheFusions) {
  // float16 Conv + Relu: widened, Relu reads Conv's float32 output, and
  // FusedConv takes the pair; one Cast in, one out.
  ModelBuilder b(17);
  b.Input("x", ShapeFromDims({1, 2, 4, 4}), DataType::kFloat16)
      .Init("W", Narrow(Random({3, 2, 3, 3}, 5), DataType::kFloat16))
      .Op("Conv", {"x", "W"}, {"c"}, {IntsAttr("pads", {1, 1, 1, 1})})
      .Op("Relu", {"c"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(b.model, 1), (Ops{"Conv", "Relu"}));
  EXPECT_EQ(OpsAfter(b.model, 2), (Ops{"Cast", "FusedConv", "Cast"}));
}

}  // namespace
}  // namespace nee
