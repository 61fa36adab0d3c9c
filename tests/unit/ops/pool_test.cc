// MaxPool, AveragePool, LpPool, global pools, MaxUnpool, MaxRoiPool. Expected
// values were computed with onnx.reference (numpy where noted) by
// nn_expected_gen.py; the case name is given beside each.
#include "nn_test_util.h"

namespace nee::testing {
namespace {

TEST(NnMaxPool, PadsStridesAndIndices) {
  // maxpool_2d_pads_indices
  Node node = MakeNode("MaxPool", 1, 2, {IntsAttr("kernel_shape", {3, 2}), IntsAttr("pads", {1, 0, 1, 1}),
                                         IntsAttr("strides", {2, 2})});
  for (int threads : {1, 2}) {
    auto r = RunOp(node, 22, {Pattern({1, 2, 4, 5}, 11)}, threads);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 2, 2, 3}, {1.5, 2.5, 3, 3.5, 2.5, 3, 3.5, 1.5, 2, 3, 3.5, 2});
    ExpectTensorNear<int64_t>(r->outputs[1].tensor(), {1, 2, 2, 3}, {6, 8, 9, 10, 8, 9, 21, 28, 29, 31, 32, 29});
  }
}

TEST(NnMaxPool, ColumnMajorIndices) {
  // maxpool_2d_indices_col_major
  Node node = MakeNode("MaxPool", 1, 2, {IntsAttr("kernel_shape", {2, 2}), IntAttr("storage_order", 1),
                                         IntsAttr("strides", {1, 2})});
  auto r = RunOp(node, 12, {Pattern({1, 1, 3, 4}, 11)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 1, 2, 2}, {1, 2, 3, 3.5});
  ExpectTensorNear<int64_t>(r->outputs[1].tensor(), {1, 1, 2, 2}, {4, 10, 5, 8});
}

TEST(NnMaxPool, CeilModeDilationsAndSameUpper3D) {
  // maxpool_1d_ceil_dilated
  auto r = RunOp(MakeNode("MaxPool", 1, 1, {IntsAttr("kernel_shape", {2}), IntsAttr("strides", {3}),
                                            IntsAttr("dilations", {2}), IntAttr("ceil_mode", 1)}),
                 22, {Pattern({1, 2, 8}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 2, 3}, {-0.5, 0, -1, 0, 0, 0.5});
  // maxpool_3d_same_upper
  r = RunOp(MakeNode("MaxPool", 1, 1, {IntsAttr("kernel_shape", {2, 2, 2}), StringAttr("auto_pad", "SAME_UPPER"),
                                       IntsAttr("strides", {2, 2, 2})}),
            22, {Pattern({1, 1, 3, 3, 3}, 13)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 1, 2, 2, 2}, {4.5, 4, 2, 2.5, 3, 3.5, 4.5, -1.5});
}

TEST(NnMaxPool, Int8) {
  // By hand: input rows {-3,-2,-1,0}, {1,2,3,4}, {5,6,7,-3}; 2x2 windows, stride 1.
  auto r = RunOp(MakeNode("MaxPool", 1, 1, {IntsAttr("kernel_shape", {2, 2})}), 12, {Pattern<int8_t>({1, 1, 3, 4}, 11, 3, 1)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int8_t>(r->outputs[0].tensor(), {1, 1, 2, 3}, {2, 3, 4, 6, 7, 7});
}

TEST(NnAveragePool, ExcludeAndIncludePadWithCeilMode) {
  // avgpool_exclude_pad
  auto r = RunOp(MakeNode("AveragePool", 1, 1, {IntsAttr("kernel_shape", {3, 3}), IntsAttr("pads", {1, 1, 1, 1}),
                                                IntsAttr("strides", {2, 2})}),
                 22, {Pattern({1, 1, 4, 4}, 9)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 1, 2, 2}, {-0.25, 0.5, 0.5, 0.5});
  // avgpool_include_pad_ceil: the ceil_mode overhang is never counted
  r = RunOp(MakeNode("AveragePool", 1, 1, {IntsAttr("kernel_shape", {2, 2}), IntsAttr("pads", {1, 1, 0, 0}),
                                           IntsAttr("strides", {2, 2}), IntAttr("ceil_mode", 1),
                                           IntAttr("count_include_pad", 1)}),
            22, {Pattern({1, 1, 5, 5}, 9)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 1, 3, 3}, {-0.375, -0.375, 0.125, 0, 0.75, 0.625, 0.25, 1.25, 0});
}

TEST(NnAveragePool, SameLowerDilated) {
  // avgpool_same_lower_dilated (numpy; dilations exist from opset 19)
  auto r = RunOp(MakeNode("AveragePool", 1, 1, {IntsAttr("kernel_shape", {2}), StringAttr("auto_pad", "SAME_LOWER"),
                                                IntsAttr("dilations", {2})}),
                 19, {Pattern<double>({1, 2, 5}, 9)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<double>(r->outputs[0].tensor(), {1, 2, 5}, {-1, -1, -0.5, 0, 0, 1.5, 1.5, 2, 0.25, 2.5});
}

TEST(NnLpPool, PEqualsThree) {
  // lppool_2d
  auto r = RunOp(MakeNode("LpPool", 1, 1, {IntsAttr("kernel_shape", {2, 2}), IntAttr("p", 3), IntsAttr("pads", {0, 0, 1, 1})}),
                 22, {Pattern({1, 2, 3, 3}, 9)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 2, 3, 3}, {1.65096366, 1.31037068, 1.04004192, 2.25717878, 2.91423845, 2.55223441, 2.24897075, 2.86939669, 2.5, 1.65096366, 1.31037068, 1.04004192, 2.25717878, 2.91423845, 2.55223441, 2.24897075, 2.86939669, 2.5});
}

TEST(NnGlobalPool, AverageMaxLp) {
  // global_pools (GlobalLpPool: numpy)
  Tensor x = Pattern({2, 3, 2, 3}, 11);
  auto r = RunOp(MakeNode("GlobalAveragePool", 1, 1), 22, {x});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 1, 1}, {-0.25, 1.83333337, 0.25, 1.41666663, 0.75, 1});
  r = RunOp(MakeNode("GlobalMaxPool", 1, 1), 22, {x});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 1, 1}, {1, 3.5, 1.5, 3.5, 2, 3.5});
  r = RunOp(MakeNode("GlobalLpPool", 1, 1), 22, {x});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 1, 1}, {2.17944947, 6, 2.17944947, 5.89491306, 2.78388218, 5.56776436});
}

TEST(NnMaxUnpool, DefaultAndExplicitOutputShape) {
  // maxunpool_2d
  Tensor x = Tensor::FromVector<float>({5, 6, 7, 8}, {1, 1, 2, 2});
  Tensor i = Tensor::FromVector<int64_t>({5, 7, 13, 15}, {1, 1, 2, 2});
  Node node = MakeNode("MaxUnpool", 2, 1, {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {2, 2})});
  auto r = RunOp(node, 22, {x, i});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 1, 4, 4}, {0, 0, 0, 0, 0, 5, 0, 6, 0, 0, 0, 0, 0, 7, 0, 8});
  Node node3 = MakeNode("MaxUnpool", 3, 1, {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {2, 2})});
  r = RunOp(node3, 22, {x, i, Tensor::FromVector<int64_t>({1, 1, 5, 5}, {4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 1, 5, 5}, {0, 0, 0, 0, 0, 0, 5, 0, 6, 0, 0, 0, 0, 0, 0, 0, 7, 0, 8, 0, 0, 0, 0, 0, 0});
  ExpectOpError(node, 22, {x, Tensor::FromVector<int64_t>({5, 7, 13, 16}, {1, 1, 2, 2})}, "outside");
}

TEST(NnMaxRoiPool, TwoRois) {
  // Hand-computed (Caffe's RoI pooling): x = 0..15 as a 4x4 plane.
  std::vector<float> xv(16);
  for (int k = 0; k < 16; ++k) xv[k] = static_cast<float>(k);
  Tensor x = Tensor::FromVector<float>(xv, {1, 1, 4, 4});
  // roi 0 covers the whole plane -> 2x2 bins of 2x2; roi 1 = rows 1..2, cols 0..1.
  Tensor rois = Tensor::FromVector<float>({0, 0, 0, 3, 3, 0, 0, 1, 1, 2}, {2, 5});
  auto r = RunOp(MakeNode("MaxRoiPool", 2, 1, {IntsAttr("pooled_shape", {2, 2})}), 22, {x, rois});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 1, 2, 2}, {5, 7, 13, 15, 4, 5, 8, 9});
}

TEST(NnPool, RejectsBadAttributes) {
  ExpectOpError(MakeNode("MaxPool", 1, 1, {IntsAttr("kernel_shape", {5, 5})}), 22, {Pattern({1, 1, 3, 3})},
                "bigger than the padded input");
  ExpectOpError(MakeNode("MaxPool", 1, 1, {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {1, 0})}), 22,
                {Pattern({1, 1, 3, 3})}, "strides must be positive");
  ExpectOpError(MakeNode("AveragePool", 1, 1, {IntsAttr("kernel_shape", {2})}), 22, {Pattern({1, 1, 3, 3})},
                "kernel_shape");
  ExpectOpError(MakeNode("AveragePool", 1, 1), 22, {Pattern({1, 1, 3, 3})}, "kernel_shape");
  ExpectOpError(MakeNode("MaxPool", 1, 1, {IntsAttr("kernel_shape", {2})}), 22, {Pattern({3, 3})}, "rank");
}

}  // namespace
}  // namespace nee::testing

namespace nee::testing {
namespace {

TEST(NnPoolShape, MaxPoolIndicesAndGlobal) {
  // ceil((5 + 0 - 2) / 2) + 1 = 3 with ceil_mode; the last window starts inside the input.
  auto r = InferOnly(MakeNode("MaxPool", 1, 2, {IntsAttr("kernel_shape", {2}), IntsAttr("strides", {2}), IntAttr("ceil_mode", 1)}),
                     22, {FloatType({Dim::Symbol("N"), Dim::Known(3), Dim::Known(5)})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ShapeToString(*(*r)[0].shape), "[N,3,3]");
  EXPECT_EQ((*r)[1].elem_type, DataType::kInt64);
  r = InferOnly(MakeNode("GlobalAveragePool", 1, 1), 22, {FloatType({Dim::Symbol("N"), Dim::Known(3), Dim::Unknown(), Dim::Known(5)})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ShapeToString(*(*r)[0].shape), "[N,3,1,1]");
}

}  // namespace
}  // namespace nee::testing

namespace nee::testing {
namespace {

// Random (often invalid) window attributes: every run must either fail with
// an error naming the node or produce outputs whose shapes match the shape
// rule (RunOp checks that). Under the sanitizer build this also shows that
// no combination reads out of bounds.
TEST(NnWindowOps, RandomAttributesNeverCrash) {
  uint64_t state = 12345;
  auto next = [&](int64_t lo, int64_t hi) {  // inclusive
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(hi - lo + 1));
  };
  const char* pads_modes[] = {"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"};
  int ok = 0, failed = 0;
  for (int iter = 0; iter < 300; ++iter) {
    const int64_t rank = next(1, 2);
    std::vector<int64_t> x_dims{next(1, 2), next(1, 4)}, kernel, strides, dilations, pads, out_pad;
    for (int64_t d = 0; d < rank; ++d) {
      x_dims.push_back(next(1, 6));
      kernel.push_back(next(1, 4));
      strides.push_back(next(0, 3));
      dilations.push_back(next(0, 2));
      out_pad.push_back(next(0, 1));
    }
    for (int64_t d = 0; d < 2 * rank; ++d) pads.push_back(next(-1, 3));
    std::vector<Attribute> attrs = {IntsAttr("strides", strides), IntsAttr("dilations", dilations),
                                    StringAttr("auto_pad", pads_modes[next(0, 3)])};
    if (attrs[2].s == "NOTSET") attrs.push_back(IntsAttr("pads", pads));
    const int op = static_cast<int>(next(0, 3));
    Result<OpRun> r = InvalidArgument("unset");
    Node node;
    if (op == 0 || op == 1) {
      const int64_t group = next(1, 2);
      attrs.push_back(IntAttr("group", group));
      std::vector<int64_t> w_dims{next(1, 4), op == 0 ? x_dims[1] / group : x_dims[1]};
      w_dims.insert(w_dims.end(), kernel.begin(), kernel.end());
      if (op == 1) {
        attrs.push_back(IntsAttr("output_padding", out_pad));
        std::swap(w_dims[0], w_dims[1]);
      }
      node = MakeNode(op == 0 ? "Conv" : "ConvTranspose", 2, 1, attrs);
      r = RunOp(node, 22, {Pattern(x_dims), Pattern(w_dims, 5)});
    } else {
      attrs.push_back(IntsAttr("kernel_shape", kernel));
      attrs.push_back(IntAttr("ceil_mode", next(0, 1)));
      node = MakeNode(op == 2 ? "MaxPool" : "AveragePool", 1, op == 2 ? 2 : 1, attrs);
      r = RunOp(node, 22, {Pattern(x_dims)});
    }
    if (r.ok()) {
      ++ok;
      EXPECT_EQ(r->outputs[0].tensor().rank(), static_cast<int64_t>(x_dims.size()));
    } else {
      ++failed;
      EXPECT_NE(r.status().message().find("'test'"), std::string::npos) << r.status().message();
    }
  }
  // The generator must exercise both outcomes.
  EXPECT_GT(ok, 20);
  EXPECT_GT(failed, 20);
}

}  // namespace
}  // namespace nee::testing
