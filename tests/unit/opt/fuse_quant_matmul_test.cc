// fuse-quant-matmul (src/opt/fuse_quant_matmul.cc): quantize_dynamic's
// MatMulInteger -> Cast -> Mul(scale) [-> Add(bias)] becomes com.microsoft
// MatMulIntegerToFloat, and the optimized model's results equal the unfused
// graph run by the reference kernels (bitwise: the fused op rounds as the chain does).
#include <gtest/gtest.h>

#include <cstring>

#include "opt_test_util.h"

namespace nee {
namespace {
using namespace opt_test;

Tensor Int8Weights(int64_t k, int64_t n, int seed) {
  std::vector<int8_t> v(static_cast<size_t>(k * n));
  uint32_t s = static_cast<uint32_t>(seed) * 2654435761u + 7u;
  for (auto& e : v) {
    s = s * 1664525u + 1013904223u;
    e = static_cast<int8_t>(static_cast<int>(s >> 24) - 128);
  }
  return Tensor::FromVector(v, {k, n});
}

struct Options {
  bool bias = true;
  bool bias_first = true;     // Add(bias, y) as quantize_dynamic writes it
  bool scale_first = false;   // Mul(s, cast)
  bool per_column = false;    // the weight's scale per column
  bool cast_read_twice = false;
};

// x [rows, k] -> DynamicQuantizeLinear -> MatMulInteger(W [k, n]) -> Cast -> Mul(x_scale * w_scale) [-> Add bias]
ModelBuilder QuantizedLinear(int64_t rows, int64_t k, int64_t n, const Options& o) {
  ModelBuilder b(13);
  b.Input("x", Shape{Dim::Known(rows), Dim::Known(k)})
      .Init("W", Int8Weights(k, n, 3))
      .Init("wz", Tensor::FromVector(std::vector<int8_t>{0}, {}))
      .Init("ws", o.per_column ? Random({n}, 5) : Scalar(0.0123f))
      .Init("bias", Random({n}, 6))
      .Op("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"})
      .Op("MatMulInteger", {"xq", "W", "xz", "wz"}, {"m"})
      .Op("Cast", {"m"}, {"c"}, {IntAttr("to", 1)})
      .Op("Mul", {"xs", "ws"}, {"s"})
      .Op("Mul", o.scale_first ? std::vector<std::string>{"s", "c"} : std::vector<std::string>{"c", "s"}, {"y0"});
  if (o.bias) {
    b.Op("Add", o.bias_first ? std::vector<std::string>{"bias", "y0"} : std::vector<std::string>{"y0", "bias"}, {"y"});
  } else {
    b.Op("Identity", {"y0"}, {"y"});
  }
  b.Output("y");
  if (o.cast_read_twice) b.Op("Neg", {"c"}, {"c2"}).Output("c2");
  return b;
}

void ExpectSameBits(const Tensor& a, const Tensor& b) {
  ASSERT_TRUE(a.defined() && b.defined());
  ASSERT_EQ(a.dims(), b.dims());
  ASSERT_EQ(0, std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()));
}

bool Has(const Ops& ops, const std::string& op) { return std::find(ops.begin(), ops.end(), op) != ops.end(); }

TEST(FuseQuantMatMul, QuantizedLinearBecomesMatMulIntegerToFloat) {
  for (Options o : {Options{}, Options{true, false, true}, Options{false}, Options{true, true, false, true}}) {
    for (auto [rows, k, n] : {std::array<int64_t, 3>{1, 24, 20}, {13, 33, 17}, {64, 96, 48}}) {
      ModelBuilder b = QuantizedLinear(rows, k, n, o);
      const Ops ops = OpsAfter(b.model);
      EXPECT_TRUE(Has(ops, "MatMulIntegerToFloat"));
      EXPECT_FALSE(Has(ops, "MatMulInteger"));
      EXPECT_FALSE(Has(ops, "Cast"));
      EXPECT_EQ(Has(ops, "Add"), false);
      const std::vector<NamedValue> inputs = {{"x", Value(Random({rows, k}, 9))}};
      const Tensor want = RunAt(b.model, inputs, 0, 1, true);
      for (int threads : {1, 2}) ExpectSameBits(RunAt(b.model, inputs, 99, threads), want);
    }
  }
}

TEST(FuseQuantMatMul, LeavesNearMissesAlone) {
  // The cast is read by another node too: nothing fused, results unchanged.
  Options o;
  o.cast_read_twice = true;
  ModelBuilder b = QuantizedLinear(5, 16, 8, o);
  const Ops ops = OpsAfter(b.model);
  EXPECT_TRUE(Has(ops, "MatMulInteger"));
  EXPECT_FALSE(Has(ops, "MatMulIntegerToFloat"));
  const std::vector<NamedValue> inputs = {{"x", Value(Random({5, 16}, 2))}};
  ExpectSameBits(RunAt(b.model, inputs, 99, 1), RunAt(b.model, inputs, 0, 1, true));

  // A scale that is not a product of two scales (a plain constant): left alone.
  ModelBuilder c(13);
  c.Input("x", Shape{Dim::Known(4), Dim::Known(8)})
      .Init("W", Int8Weights(8, 6, 1))
      .Init("s", Scalar(0.5f))
      .Op("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"})
      .Op("MatMulInteger", {"xq", "W", "xz"}, {"m"})
      .Op("Cast", {"m"}, {"c"}, {IntAttr("to", 1)})
      .Op("Mul", {"c", "s"}, {"y"})
      .Output("y");
  EXPECT_TRUE(Has(OpsAfter(c.model), "MatMulInteger"));
}

}  // namespace
}  // namespace nee
