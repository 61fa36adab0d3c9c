// fuse-qdq-conv (src/opt/fuse_qdq_conv.cc) on a static int8 Gemm: Gemm(DQ a, DQ W, DQ C) -> Q into
// com.microsoft QGemm (a transposed W stored transposed once), and the near misses it must leave float (alpha
// not 1, transA, a bias whose scale is not a_scale * w_scale, the Gemm's output read by another node).
//
// Expected outputs: the same model with the optimizer off (DequantizeLinear, the float Gemm and
// QuantizeLinear as the spec states them, by the reference kernels). The values are chosen so that every
// float product and sum is exact and the requantization multiplies by a power of two, so the fused integer
// result must equal the float graph's bitwise.
#include <gtest/gtest.h>

#include <algorithm>

#include "opt_test_util.h"

namespace nee {
namespace {

using namespace opt_test;

struct GemmCase {
  float alpha = 1.0f, bias_scale = 0.0078125f;  // x_scale * w_scale = 1/32 * 1/4
  bool trans_a = false, trans_b = true, extra_reader = false;
};

// aq uint8 [2, 4] (or [4, 2] with transA) -> DQ(1/32, 128); Wq int8 [3, 4] (or [4, 3]) -> DQ(1/4);
// Cq int32 [3] -> DQ(bias_scale) -> Gemm -> c -> Q(1/4, 100) -> yq.
ModelBuilder GemmModel(const GemmCase& g) {
  std::vector<int8_t> w(12);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>((i * 29) % 23) - 11);
  ModelBuilder b(13);
  const std::vector<int64_t> a_dims = g.trans_a ? std::vector<int64_t>{4, 2} : std::vector<int64_t>{2, 4};
  const std::vector<int64_t> w_dims = g.trans_b ? std::vector<int64_t>{3, 4} : std::vector<int64_t>{4, 3};
  b.Input("aq", ShapeFromDims(a_dims), DataType::kUint8)
      .Init("as", Tensor::Scalar<float>(0.03125f))
      .Init("az", Tensor::Scalar<uint8_t>(128))
      .Init("Wq", Tensor::FromVector(w, w_dims))
      .Init("ws", Tensor::Scalar<float>(0.25f))
      .Init("wz", Tensor::Scalar<int8_t>(0))
      .Init("Cq", Tensor::FromVector(std::vector<int32_t>{-40, 24, 300}, {3}))
      .Init("cs", Tensor::Scalar<float>(g.bias_scale))
      .Init("cz", Tensor::Scalar<int32_t>(0))
      .Init("ys", Tensor::Scalar<float>(0.25f))
      .Init("yz", Tensor::Scalar<uint8_t>(100))
      .Op("DequantizeLinear", {"aq", "as", "az"}, {"a"})
      .Op("DequantizeLinear", {"Wq", "ws", "wz"}, {"W"})
      .Op("DequantizeLinear", {"Cq", "cs", "cz"}, {"C"})
      .Op("Gemm", {"a", "W", "C"}, {"c"},
          {FloatAttr("alpha", g.alpha), IntAttr("transA", g.trans_a ? 1 : 0), IntAttr("transB", g.trans_b ? 1 : 0)})
      .Op("QuantizeLinear", {"c", "ys", "yz"}, {"yq"})
      .Output("yq");
  if (g.extra_reader) b.Op("Relu", {"c"}, {"r"}).Output("r");
  return b;
}

Tensor GemmInput(bool trans_a) {
  std::vector<uint8_t> v(8);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  return Tensor::FromVector(v, trans_a ? std::vector<int64_t>{4, 2} : std::vector<int64_t>{2, 4});
}

std::vector<uint8_t> Bytes(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw_data());
  return std::vector<uint8_t>(p, p + t.byte_size());
}

int QGemms(const ModelBuilder& b) {
  const Ops ops = OpsAfter(b.model);
  return static_cast<int>(std::count(ops.begin(), ops.end(), "QGemm"));
}

// The optimized model's output equals the unoptimized float graph's, bitwise.
void ExpectAsFloatGraph(const ModelBuilder& b, bool trans_a) {
  const std::vector<NamedValue> feeds = {{"aq", GemmInput(trans_a)}};
  const Tensor off = RunAt(b.model, feeds, 0), on = RunAt(b.model, feeds, 99);
  ASSERT_TRUE(off.defined() && on.defined());
  EXPECT_EQ(Bytes(on), Bytes(off));
}

TEST(FuseQdqGemm, GemmThenQBecomesQGemm) {
  for (bool trans_b : {true, false}) {
    GemmCase g;
    g.trans_b = trans_b;
    const ModelBuilder b = GemmModel(g);
    const Model m = Optimized(b.model);
    ASSERT_EQ(OpTypes(m), Ops{"QGemm"}) << "transB " << trans_b;
    EXPECT_EQ(m.graph.nodes[0].inputs[7], "ys");
    EXPECT_EQ(m.graph.nodes[0].inputs[8], "yz");
    // transB's W stored transposed: the original initializer is gone.
    const bool has_wq = std::any_of(m.graph.initializers.begin(), m.graph.initializers.end(),
                                    [](const auto& init) { return init.name == "Wq"; });
    EXPECT_EQ(has_wq, !trans_b);
    ExpectAsFloatGraph(b, false);
  }
}

TEST(FuseQdqGemm, RefusesWhatQGemmDoesNotComputeSo) {
  GemmCase alpha;
  alpha.alpha = 0.5f;
  GemmCase trans_a;
  trans_a.trans_a = true;
  GemmCase bias;
  bias.bias_scale = 0.0078125f * 1.5f;  // not the product of the scales
  GemmCase reader;
  reader.extra_reader = true;
  for (const GemmCase& g : {alpha, trans_a, bias, reader}) {
    const ModelBuilder b = GemmModel(g);
    EXPECT_EQ(QGemms(b), 0);
    ExpectAsFloatGraph(b, g.trans_a);
  }
}

}  // namespace
}  // namespace nee
