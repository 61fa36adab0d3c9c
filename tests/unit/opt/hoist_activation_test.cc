// The hoist-activation-to-conv pass (src/opt/hoist_activation.cc): an
// activation reading a Conv through Reshape/Transpose-like moves is applied
// before them and fused into the Conv; the outputs are those of the graph as
// written, run unoptimized (level 0: Conv, moves and activation node by node).
#include <gtest/gtest.h>

#include <cstring>

#include "opt/pass_manager.h"
#include "opt_test_util.h"

namespace nee {
namespace {
using namespace opt_test;

// A YOLO head in small: x [1, 8, 5, 6] -> 1x1 Conv to 3 * 7 channels ->
// Reshape [1, 3, 7, 5, 6] -> Transpose(0, 1, 3, 4, 2) -> `activation`.
ModelBuilder Head(const std::string& activation, std::vector<Attribute> attrs = {}) {
  ModelBuilder b;
  b.Input("x", ShapeFromDims({1, 8, 5, 6}))
      .Init("W", Random({21, 8, 1, 1}, 2))
      .Init("B", Random({21}, 3))
      .Init("shape", Tensor::FromVector<int64_t>({1, 3, 7, 5, 6}, {5}))
      .Op("Conv", {"x", "W", "B"}, {"c"})
      .Op("Reshape", {"c", "shape"}, {"r"})
      .Op("Transpose", {"r"}, {"t"}, {IntsAttr("perm", {0, 1, 3, 4, 2})})
      .Op(activation, {"t"}, {"y"}, std::move(attrs))
      .Output("y");
  return b;
}

// Level 0 and full optimization give the same bits: the fused activation is
// the standalone kernel's, applied to the same conv sums.
void ExpectSameBits(const Model& model) {
  const std::vector<NamedValue> inputs = {{"x", Random({1, 8, 5, 6}, 7)}};
  const Tensor off = RunAt(model, inputs, 0);
  const Tensor on = RunAt(model, inputs, 99);
  ASSERT_TRUE(off.defined() && on.defined());
  ASSERT_EQ(off.dims(), on.dims());
  EXPECT_EQ(std::memcmp(off.raw_data(), on.raw_data(), static_cast<size_t>(off.num_elements()) * sizeof(float)), 0);
  ExpectSameResults(model, inputs);
}

TEST(HoistActivation, SigmoidThroughReshapeAndTransposeFusesIntoTheConv) {
  ModelBuilder b = Head("Sigmoid");
  EXPECT_EQ(OpsAfter(b.model), (Ops{"FusedConv", "Reshape", "Transpose"}));
  ExpectSameBits(b.model);
}

TEST(HoistActivation, ActivationsWithAttributesKeepThem) {
  ModelBuilder leaky = Head("LeakyRelu", {FloatAttr("alpha", 0.3f)});
  EXPECT_EQ(OpsAfter(leaky.model), (Ops{"FusedConv", "Reshape", "Transpose"}));
  ExpectSameBits(leaky.model);
  ModelBuilder clip = Head("Clip");
  clip.model.graph.nodes.back().inputs = {"t", "lo", "hi"};
  clip.Init("lo", Scalar(-0.5f)).Init("hi", Scalar(0.75f));
  EXPECT_EQ(OpsAfter(clip.model), (Ops{"FusedConv", "Reshape", "Transpose"}));
  ExpectSameBits(clip.model);
}

TEST(HoistActivation, StaysWhereAnotherReaderSeesAValueOnTheWay) {
  // The Transpose's output is also a graph output: it must stay un-activated.
  ModelBuilder out = Head("Sigmoid");
  out.Output("t");
  EXPECT_EQ(OpsAfter(out.model), (Ops{"Conv", "Reshape", "Transpose", "Sigmoid"}));
  ExpectSameBits(out.model);
  // Another node reads the Conv's output.
  ModelBuilder shared = Head("Sigmoid");
  shared.Op("Relu", {"c"}, {"z"}).Output("z");
  EXPECT_EQ(OpsAfter(shared.model), (Ops{"Conv", "Reshape", "Transpose", "Sigmoid", "Relu"}));
  ExpectSameBits(shared.model);
}

TEST(HoistActivation, StaysWithoutAConvOrAMove) {
  // A Sigmoid through a Transpose of a graph input: nothing to fuse into.
  ModelBuilder input;
  input.Input("x", ShapeFromDims({2, 3}))
      .Op("Transpose", {"x"}, {"t"}, {IntsAttr("perm", {1, 0})})
      .Op("Sigmoid", {"t"}, {"y"})
      .Output("y");
  EXPECT_EQ(OpsAfter(input.model), (Ops{"Transpose", "Sigmoid"}));
  // A node that is not a move (Neg) between the Conv and the activation.
  ModelBuilder neg = Head("Sigmoid");
  neg.model.graph.nodes[2].op_type = "Neg";
  neg.model.graph.nodes[2].attributes.clear();
  EXPECT_EQ(OpsAfter(neg.model), (Ops{"Conv", "Reshape", "Neg", "Sigmoid"}));
}

}  // namespace
}  // namespace nee
