// Tests of the ai.onnx.ml tree ensembles (ops/ml_tree.cc). Unless stated
// otherwise, expected values come from running the same single-node model with
// onnxruntime 1.32 (python), printed with 9 digits.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "op_test_util.h"

namespace nee::testing {
namespace {

const char* kMl = "ai.onnx.ml";
const float kNaN = std::numeric_limits<float>::quiet_NaN();

void SetAttr(std::vector<Attribute>& attrs, Attribute a) {
  for (Attribute& existing : attrs)
    if (existing.name == a.name) {
      existing = std::move(a);
      return;
    }
  attrs.push_back(std::move(a));
}

void RemoveAttr(std::vector<Attribute>& attrs, const std::string& name) {
  for (size_t i = 0; i < attrs.size(); ++i)
    if (attrs[i].name == name) {
      attrs.erase(attrs.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
}

// Three trees over 3 features, each with two branches and three leaves:
//   tree 0: f0 <= 0.5 ? (f1 < 2 ? leaf 3 : leaf 4) : leaf 2
//   tree 1: f2 >= 1 (NaN goes true) ? (f0 == 3 ? leaf 3 : leaf 4) : leaf 2
//   tree 2: f1 > 0 ? (f2 != 5 ? leaf 3 : leaf 4) : leaf 2
std::vector<Attribute> ForestNodes() {
  return {
      IntsAttr("nodes_treeids", {0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2}),
      IntsAttr("nodes_nodeids", {0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4}),
      IntsAttr("nodes_featureids", {0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 1, 2, 0, 0, 0}),
      StringsAttr("nodes_modes", {"BRANCH_LEQ", "BRANCH_LT", "LEAF", "LEAF", "LEAF", "BRANCH_GTE", "BRANCH_EQ", "LEAF",
                                  "LEAF", "LEAF", "BRANCH_GT", "BRANCH_NEQ", "LEAF", "LEAF", "LEAF"}),
      FloatsAttr("nodes_values", {0.5f, 2, 0, 0, 0, 1, 3, 0, 0, 0, 0, 5, 0, 0, 0}),
      IntsAttr("nodes_truenodeids", {1, 3, 0, 0, 0, 1, 3, 0, 0, 0, 1, 3, 0, 0, 0}),
      IntsAttr("nodes_falsenodeids", {2, 4, 0, 0, 0, 2, 4, 0, 0, 0, 2, 4, 0, 0, 0}),
      IntsAttr("nodes_missing_value_tracks_true", {0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}),
  };
}

Tensor ForestInput() {
  return Tensor::FromVector<float>({0.2f, 1.0f, 2.0f, 0.7f, 3.0f, 0.5f, 3.0f, -1.0f, kNaN, kNaN, 2.0f, 5.0f, 0.5f,
                                    kNaN, 1.0f, 3.0f, 0.5f, 5.0f},
                                   {6, 3});
}

// Leaves in order (tree, node): (0,2) (0,3) (0,4) (1,2) (1,3) (1,4) (2,2) (2,3) (2,4).
void AddLeafWeights(std::vector<Attribute>& attrs, const std::string& prefix,
                    const std::vector<std::vector<std::pair<int64_t, float>>>& per_leaf) {
  const int64_t leaf_tree[] = {0, 0, 0, 1, 1, 1, 2, 2, 2};
  const int64_t leaf_node[] = {2, 3, 4, 2, 3, 4, 2, 3, 4};
  std::vector<int64_t> trees, nodes, ids;
  std::vector<float> weights;
  for (size_t l = 0; l < per_leaf.size(); ++l)
    for (auto [id, w] : per_leaf[l]) {
      trees.push_back(leaf_tree[l]);
      nodes.push_back(leaf_node[l]);
      ids.push_back(id);
      weights.push_back(w);
    }
  attrs.push_back(IntsAttr(prefix + "_treeids", trees));
  attrs.push_back(IntsAttr(prefix + "_nodeids", nodes));
  attrs.push_back(IntsAttr(prefix + "_ids", ids));
  attrs.push_back(FloatsAttr(prefix + "_weights", weights));
}

// ---- TreeEnsembleRegressor ----

std::vector<Attribute> TwoTargetRegressor(const std::string& aggregate) {
  std::vector<Attribute> attrs = ForestNodes();
  AddLeafWeights(attrs, "target",
                 {{{0, 1}, {1, -1}}, {{0, 2}}, {{0, 4}, {1, 0.5f}}, {{0, 8}}, {{0, 16}, {1, 2}}, {{1, 3}}, {{0, 32}},
                  {{0, 64}, {1, -4}}, {{1, 7}}});
  attrs.push_back(IntAttr("n_targets", 2));
  attrs.push_back(StringAttr("aggregate_function", aggregate));
  attrs.push_back(FloatsAttr("base_values", {0.5f, -0.5f}));
  return attrs;
}

Result<OpRun> RunRegressor(std::vector<Attribute> attrs, int64_t opset = 1, Tensor x = ForestInput()) {
  return RunOp(MakeNode("TreeEnsembleRegressor", 1, 1, std::move(attrs), kMl), opset, {x});
}

TEST(MlTreeEnsembleRegressorTest, Sum) {
  auto run = RunRegressor(TwoTargetRegressor("SUM"));
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {6, 2}, {66.5f, -1.5f, 73.5f, -5.5f, 49.5f, 0.5f, 1.5f, 8.5f, 36.5f, 3,
                                                             17.5f, 7.5f});
}

TEST(MlTreeEnsembleRegressorTest, Average) {
  auto run = RunRegressor(TwoTargetRegressor("AVERAGE"));
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {6, 2},
                          {22.5f, -0.833333373f, 24.833334f, -2.16666651f, 16.833334f, -0.166666657f, 0.833333373f, 2.5f,
                           12.5f, 0.666666627f, 6.16666651f, 2.16666675f});
}

TEST(MlTreeEnsembleRegressorTest, Min) {
  auto run = RunRegressor(TwoTargetRegressor("MIN"));
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {6, 2},
                          {2.5f, -4.5f, 1.5f, -4.5f, 1.5f, -1.5f, 1.5f, -1.5f, 4.5f, 0, 1.5f, -1.5f});
}

TEST(MlTreeEnsembleRegressorTest, Max) {
  auto run = RunRegressor(TwoTargetRegressor("MAX"));
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {6, 2},
                          {64.5f, 2.5f, 64.5f, -1.5f, 32.5f, 1.5f, 1.5f, 6.5f, 32.5f, 2.5f, 16.5f, 6.5f});
}

std::vector<Attribute> OneTargetRegressor() {
  std::vector<Attribute> attrs = ForestNodes();
  AddLeafWeights(attrs, "target", {{{0, 1}}, {{0, 2}}, {{0, 4}}, {{0, 8}}, {{0, 16}}, {{0, 32}}, {{0, 64}}, {{0, 128}}, {{0, 256}}});
  attrs.push_back(IntAttr("n_targets", 1));
  return attrs;
}

TEST(MlTreeEnsembleRegressorTest, PowersOfTwoShowEveryPath) {
  // Each weight is a distinct power of two, so the sum names the leaf reached in every tree.
  auto run = RunRegressor(OneTargetRegressor());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {6, 1}, {162, 137, 81, 289, 100, 273});
}

TEST(MlTreeEnsembleRegressorTest, DoubleAndInt64Inputs) {
  Tensor x = ForestInput();
  Tensor xd = Tensor::Allocate(DataType::kDouble, x.dims()).value();
  for (int64_t i = 0; i < x.num_elements(); ++i) xd.data<double>()[i] = x.data<float>()[i];
  auto run = RunRegressor(OneTargetRegressor(), 1, xd);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {6, 1}, {162, 137, 81, 289, 100, 273});
  // int64 input: by hand from the tree description, row [0,3,5] takes leaves
  // (0,4)=4, (1,3)? f2=5>=1 true, f0==3 false -> (1,4)=32, f1>0 true, f2!=5 false -> (2,4)=256.
  auto run_int = RunRegressor(OneTargetRegressor(), 1, Tensor::FromVector<int64_t>({0, 3, 5}, {1, 3}));
  ASSERT_TRUE(run_int.ok()) << run_int.status().ToString();
  ExpectTensorNear<float>(run_int->outputs[0].tensor(), {1, 1}, {292});
}

TEST(MlTreeEnsembleRegressorTest, AsTensorAttributes) {
  // ml opset 3 form with double thresholds/weights/base: the values are
  // exactly those of PowersOfTwoShowEveryPath, so the result is that + 0.25.
  std::vector<Attribute> attrs = OneTargetRegressor();
  RemoveAttr(attrs, "nodes_values");
  RemoveAttr(attrs, "target_weights");
  attrs.push_back(TensorAttr("nodes_values_as_tensor",
                             Tensor::FromVector<double>({0.5, 2, 0, 0, 0, 1, 3, 0, 0, 0, 0, 5, 0, 0, 0}, {15})));
  attrs.push_back(TensorAttr("target_weights_as_tensor",
                             Tensor::FromVector<double>({1, 2, 4, 8, 16, 32, 64, 128, 256}, {9})));
  attrs.push_back(TensorAttr("base_values_as_tensor", Tensor::FromVector<double>({0.25}, {1})));
  auto run = RunRegressor(attrs, 3);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {6, 1}, {162.25f, 137.25f, 81.25f, 289.25f, 100.25f, 273.25f});
}

TEST(MlTreeEnsembleRegressorTest, ChangedAttributesOfTheSameNodeAreNotServedFromCache) {
  // Compiled forests are cached per node; editing the node's attributes in
  // place (same address) must still give the new model's result.
  Node node = MakeNode("TreeEnsembleRegressor", 1, 1, OneTargetRegressor(), kMl);
  auto first = RunOp(node, 1, {ForestInput()});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ExpectTensorNear<float>(first->outputs[0].tensor(), {6, 1}, {162, 137, 81, 289, 100, 273});
  for (Attribute& a : node.attributes)
    if (a.name == "target_weights") a.floats[8] = 512;  // leaf (2,4): 256 -> 512
  auto second = RunOp(node, 1, {ForestInput()});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  // Rows 3 and 5 end in leaf (2,4): +256.
  ExpectTensorNear<float>(second->outputs[0].tensor(), {6, 1}, {162, 137, 81, 545, 100, 529});
}

TEST(MlTreeEnsembleRegressorTest, ParallelRowsGiveIdenticalResults) {
  std::vector<float> x(3 * 1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 11) * 0.5f - 1.0f;
  Tensor input = Tensor::FromVector<float>(x, {1000, 3});
  Node node = MakeNode("TreeEnsembleRegressor", 1, 1, TwoTargetRegressor("SUM"), kMl);
  auto one = RunOp(node, 1, {input}, 1);
  auto four = RunOp(node, 1, {input}, 4);
  ASSERT_TRUE(one.ok() && four.ok());
  const Tensor& a = one->outputs[0].tensor();
  const Tensor& b = four->outputs[0].tensor();
  ASSERT_EQ(a.num_elements(), b.num_elements());
  for (int64_t i = 0; i < a.num_elements(); ++i) ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]) << i;
}

// Hostile attributes must give errors, never out-of-bounds reads.

TEST(MlTreeEnsembleRegressorTest, RejectsFeatureOutOfRange) {
  std::vector<Attribute> attrs = OneTargetRegressor();
  SetAttr(attrs, IntsAttr("nodes_featureids", {0, 1, 0, 0, 0, 3, 0, 0, 0, 0, 1, 2, 0, 0, 0}));
  auto run = RunRegressor(attrs);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), StatusCode::kInvalidModel);
  EXPECT_NE(run.status().message().find("feature 3"), std::string::npos) << run.status().message();
  SetAttr(attrs, IntsAttr("nodes_featureids", {0, 1, 0, 0, 0, -1, 0, 0, 0, 0, 1, 2, 0, 0, 0}));
  EXPECT_FALSE(RunRegressor(attrs).ok());
}

TEST(MlTreeEnsembleRegressorTest, RejectsMissingChild) {
  std::vector<Attribute> attrs = OneTargetRegressor();
  SetAttr(attrs, IntsAttr("nodes_truenodeids", {1, 3, 0, 0, 0, 1, 9, 0, 0, 0, 1, 3, 0, 0, 0}));
  auto run = RunRegressor(attrs);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("node 9"), std::string::npos) << run.status().message();
}

TEST(MlTreeEnsembleRegressorTest, RejectsCycle) {
  // Tree 0's node 1 points back to node 0 on its true side.
  std::vector<Attribute> attrs = OneTargetRegressor();
  SetAttr(attrs, IntsAttr("nodes_truenodeids", {1, 0, 0, 0, 0, 1, 3, 0, 0, 0, 1, 3, 0, 0, 0}));
  auto run = RunRegressor(attrs);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("cycle"), std::string::npos) << run.status().message();
}

TEST(MlTreeEnsembleRegressorTest, RejectsTargetIdOutOfRange) {
  std::vector<Attribute> attrs = ForestNodes();
  AddLeafWeights(attrs, "target", {{{0, 1}}, {{2, 2}}, {}, {}, {}, {}, {}, {}, {}});
  attrs.push_back(IntAttr("n_targets", 2));
  EXPECT_FALSE(RunRegressor(attrs).ok());
}

TEST(MlTreeEnsembleRegressorTest, RejectsMismatchedArrayLengths) {
  std::vector<Attribute> attrs = OneTargetRegressor();
  SetAttr(attrs, FloatsAttr("nodes_values", {0.5f, 2}));
  EXPECT_FALSE(RunRegressor(attrs).ok());
  attrs = OneTargetRegressor();
  SetAttr(attrs, IntsAttr("target_ids", {0}));
  EXPECT_FALSE(RunRegressor(attrs).ok());
}

TEST(MlTreeEnsembleRegressorTest, RejectsDuplicateNodeAndBadMode) {
  std::vector<Attribute> attrs = OneTargetRegressor();
  SetAttr(attrs, IntsAttr("nodes_nodeids", {0, 1, 2, 3, 3, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4}));
  EXPECT_FALSE(RunRegressor(attrs).ok());
  attrs = OneTargetRegressor();
  SetAttr(attrs, StringsAttr("nodes_modes", {"BRANCH_XX", "BRANCH_LT", "LEAF", "LEAF", "LEAF", "BRANCH_GTE", "BRANCH_EQ",
                                             "LEAF", "LEAF", "LEAF", "BRANCH_GT", "BRANCH_NEQ", "LEAF", "LEAF", "LEAF"}));
  EXPECT_FALSE(RunRegressor(attrs).ok());
}

TEST(MlTreeEnsembleRegressorTest, RejectsBadInputRank) {
  EXPECT_FALSE(RunRegressor(OneTargetRegressor(), 1, Tensor::FromVector<float>({1, 2, 3}, {1, 1, 3})).ok());
}

TEST(MlTreeEnsembleRegressorTest, CorruptedIntegerAttributesGiveErrorsNotCrashes) {
  // Deterministic pseudo-random corruption of every integer list; each run
  // must either succeed or return an error (run under ASan/UBSan to check
  // memory safety). Some corruptions stay valid, most do not.
  uint64_t state = 12345;
  auto next = [&state]() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int64_t>(state >> 33);
  };
  int ok = 0, failed = 0;
  for (int iteration = 0; iteration < 400; ++iteration) {
    std::vector<Attribute> attrs = TwoTargetRegressor("SUM");
    for (Attribute& a : attrs) {
      if (a.type != AttrType::kInts || next() % 3 != 0) continue;
      if (!a.ints.empty() && next() % 4 == 0) a.ints.pop_back();
      for (int64_t& v : a.ints)
        if (next() % 4 == 0) v = next() % 12 - 3;
    }
    auto run = RunRegressor(attrs);
    (run.ok() ? ok : failed)++;
  }
  EXPECT_EQ(ok + failed, 400);
  EXPECT_GT(failed, 0);
}

// ---- TreeEnsembleClassifier ----

std::vector<Attribute> ThreeClassClassifier(const std::string& post_transform) {
  std::vector<Attribute> attrs = ForestNodes();
  AddLeafWeights(attrs, "class",
                 {{{0, 0.5f}, {1, 0.25f}}, {{2, 1.0f}}, {{1, 0.75f}}, {{0, 0.2f}, {2, 0.1f}}, {{1, 0.3f}}, {{0, 0.6f}},
                  {{2, 0.9f}}, {{0, 0.1f}, {1, 0.1f}}, {{1, 0.4f}}});
  attrs.push_back(IntsAttr("classlabels_int64s", {10, 20, 30}));
  attrs.push_back(StringAttr("post_transform", post_transform));
  return attrs;
}

Result<OpRun> RunClassifier(std::vector<Attribute> attrs, int64_t opset = 1) {
  return RunOp(MakeNode("TreeEnsembleClassifier", 1, 2, std::move(attrs), kMl), opset, {ForestInput()});
}

TEST(MlTreeEnsembleClassifierTest, ThreeClassesNone) {
  auto run = RunClassifier(ThreeClassClassifier("NONE"));
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {6}, {30, 10, 30, 10, 30, 20});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {6, 3},
                          {0.700000048f, 0.100000001f, 1, 0.800000012f, 0.349999994f, 0.100000001f, 0.5f, 0.550000012f,
                           0.899999976f, 1.10000002f, 0.649999976f, 0, 0.600000024f, 0.75f, 0.899999976f, 0.5f,
                           0.950000048f, 0});
}

TEST(MlTreeEnsembleClassifierTest, ThreeClassesSoftmaxWithBaseValues) {
  std::vector<Attribute> attrs = ThreeClassClassifier("SOFTMAX");
  attrs.push_back(FloatsAttr("base_values", {0.1f, 0.2f, 0.3f}));
  auto run = RunClassifier(attrs);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {6}, {30, 10, 30, 10, 30, 20});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {6, 3},
                          {0.307195902f, 0.186323717f, 0.506480396f, 0.432672173f, 0.304898918f, 0.262428939f,
                           0.251006961f, 0.29162851f, 0.457364529f, 0.47365129f, 0.333776385f, 0.192572251f,
                           0.254275233f, 0.326495826f, 0.419228971f, 0.287846714f, 0.498911202f, 0.213242069f});
}

TEST(MlTreeEnsembleClassifierTest, ThreeClassesLogistic) {
  auto run = RunClassifier(ThreeClassClassifier("LOGISTIC"));
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[1].tensor(), {6, 3},
                          {0.668187797f, 0.524979174f, 0.731058598f, 0.689974487f, 0.586617589f, 0.524979174f,
                           0.622459352f, 0.634135604f, 0.710949481f, 0.750260115f, 0.657010436f, 0.5f, 0.645656288f,
                           0.679178715f, 0.710949481f, 0.622459352f, 0.721115172f, 0.5f});
}

TEST(MlTreeEnsembleClassifierTest, StringLabels) {
  std::vector<Attribute> attrs = ThreeClassClassifier("NONE");
  RemoveAttr(attrs, "classlabels_int64s");
  attrs.push_back(StringsAttr("classlabels_strings", {"x", "y", "z"}));
  auto run = RunClassifier(attrs);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const Tensor& y = run->outputs[0].tensor();
  ASSERT_EQ(y.dtype(), DataType::kString);
  EXPECT_EQ(std::vector<std::string>(y.data<std::string>(), y.data<std::string>() + 6),
            (std::vector<std::string>{"z", "x", "z", "x", "z", "y"}));
}

TEST(MlTreeEnsembleClassifierTest, BinaryProbabilityWeights) {
  // skl2onnx's RandomForestClassifier export: only class 0 ids, weights >= 0
  // summing to P(class 1); label 1 when the sum exceeds 0.5.
  std::vector<Attribute> attrs = ForestNodes();
  std::vector<std::vector<std::pair<int64_t, float>>> leaves;
  for (float w : {0.9f, 0.2f, 0.6f, 0.1f, 0.5f, 0.7f, 0.3f, 0.8f, 0.4f}) leaves.push_back({{0, w / 3}});
  AddLeafWeights(attrs, "class", leaves);
  attrs.push_back(IntsAttr("classlabels_int64s", {0, 1}));
  auto run = RunClassifier(attrs);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {6}, {1, 1, 1, 1, 1, 1});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {6, 2},
                          {0.433333278f, 0.566666722f, 0.399999976f, 0.600000024f, 0.433333278f, 0.566666722f,
                           0.333333313f, 0.666666687f, 0.466666639f, 0.533333361f, 0.399999976f, 0.600000024f});
}

TEST(MlTreeEnsembleClassifierTest, BinaryMarginWeightsLogistic) {
  // skl2onnx's GradientBoostingClassifier export: class 0 ids, signed
  // weights, one base value, LOGISTIC.
  std::vector<Attribute> attrs = ForestNodes();
  std::vector<std::vector<std::pair<int64_t, float>>> leaves;
  for (float w : {0.9f, -0.2f, 0.6f, -0.1f, 0.5f, -0.7f, 0.3f, -0.8f, 0.4f}) leaves.push_back({{0, w}});
  AddLeafWeights(attrs, "class", leaves);
  attrs.push_back(IntsAttr("classlabels_int64s", {4, 9}));
  attrs.push_back(StringAttr("post_transform", "LOGISTIC"));
  attrs.push_back(FloatsAttr("base_values", {-0.3f}));
  auto run = RunClassifier(attrs);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {6}, {4, 4, 9, 9, 4, 9});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {6, 2},
                          {0.880797029f, 0.119202971f, 0.574442565f, 0.425557435f, 0.197816074f, 0.802183926f,
                           0.425557494f, 0.574442506f, 0.524979174f, 0.475020826f, 0.182425559f, 0.817574441f});
}

TEST(MlTreeEnsembleClassifierTest, TwoClassesBothWeightedUseArgmax) {
  // Scores from onnxruntime; the labels are numpy.argmax of those scores
  // (first maximum on ties). onnxruntime itself returns the literal label 1
  // here, which is not even one of the class labels; nee takes the argmax.
  std::vector<Attribute> attrs = ForestNodes();
  AddLeafWeights(attrs, "class",
                 {{{0, 0.7f}, {1, 0.3f}}, {{0, 0.2f}, {1, 0.8f}}, {{0, 0.6f}, {1, 0.4f}}, {{0, 0.1f}, {1, 0.9f}},
                  {{0, 0.5f}, {1, 0.5f}}, {{0, 0.7f}, {1, 0.3f}}, {{0, 0.3f}, {1, 0.7f}}, {{0, 0.8f}, {1, 0.2f}},
                  {{0, 0.4f}, {1, 0.6f}}});
  attrs.push_back(IntsAttr("classlabels_int64s", {5, 6}));
  auto run = RunClassifier(attrs);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {6}, {5, 5, 5, 5, 5, 5});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {6, 2},
                          {1.70000005f, 1.30000007f, 1.60000002f, 1.4000001f, 1.5f, 1.5f, 1.79999995f, 1.20000005f,
                           1.5999999f, 1.4000001f, 1.60000002f, 1.4000001f});
}

TEST(MlTreeEnsembleClassifierTest, BinaryOnlyClassOneWeighted) {
  std::vector<Attribute> attrs = ForestNodes();
  std::vector<std::vector<std::pair<int64_t, float>>> leaves;
  for (float w : {0.9f, 0.2f, 0.6f, 0.1f, 0.5f, 0.7f, 0.3f, 0.8f, 0.4f}) leaves.push_back({{1, w}});
  AddLeafWeights(attrs, "class", leaves);
  attrs.push_back(IntsAttr("classlabels_int64s", {5, 6}));
  auto run = RunClassifier(attrs);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {6}, {6, 6, 6, 6, 6, 6});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {6, 2},
                          {0, 1.70000005f, 0, 1.79999995f, 0, 1.70000005f, 0, 1.99999988f, 0, 1.5999999f, 0, 1.79999995f});
}

TEST(MlTreeEnsembleClassifierTest, RejectsClassIdOutOfRange) {
  std::vector<Attribute> attrs = ForestNodes();
  AddLeafWeights(attrs, "class", {{{3, 1.0f}}, {}, {}, {}, {}, {}, {}, {}, {}});
  attrs.push_back(IntsAttr("classlabels_int64s", {0, 1, 2}));
  auto run = RunClassifier(attrs);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("class_ids"), std::string::npos) << run.status().message();
}

TEST(MlTreeEnsembleClassifierTest, RejectsMissingLabelsAndBadBaseValues) {
  std::vector<Attribute> attrs = ThreeClassClassifier("NONE");
  RemoveAttr(attrs, "classlabels_int64s");
  EXPECT_FALSE(RunClassifier(attrs).ok());
  attrs = ThreeClassClassifier("NONE");
  attrs.push_back(FloatsAttr("base_values", {0.1f, 0.2f}));
  EXPECT_FALSE(RunClassifier(attrs).ok());
}

// ---- TreeEnsemble (ml opset 5) ----

TEST(MlTreeEnsembleTest, SingleTreeNodeTest) {
  // The ONNX node test test_ai_onnx_ml_tree_ensemble_single_tree.
  std::vector<Attribute> attrs = {
      IntAttr("n_targets", 2),
      IntAttr("aggregate_function", 1),
      IntAttr("post_transform", 0),
      IntsAttr("tree_roots", {0}),
      TensorAttr("nodes_modes", Tensor::FromVector<uint8_t>({0, 0, 0}, {3})),
      IntsAttr("nodes_featureids", {0, 0, 0}),
      TensorAttr("nodes_splits", Tensor::FromVector<double>({3.14, 1.2, 4.2}, {3})),
      IntsAttr("nodes_truenodeids", {1, 0, 1}),
      IntsAttr("nodes_trueleafs", {0, 1, 1}),
      IntsAttr("nodes_falsenodeids", {2, 2, 3}),
      IntsAttr("nodes_falseleafs", {0, 1, 1}),
      IntsAttr("leaf_targetids", {0, 1, 0, 1}),
      TensorAttr("leaf_weights", Tensor::FromVector<double>({5.23, 12.12, -12.23, 7.21}, {4})),
  };
  Node node = MakeNode("TreeEnsemble", 1, 1, attrs, kMl);
  auto run = RunOp(node, 5, {Tensor::FromVector<double>({1.2, 3.4, -0.12, 1.66, 4.14, 1.77}, {3, 2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<double>(run->outputs[0].tensor(), {3, 2}, {5.23, 0, 5.23, 0, 0, 12.12});
}

std::vector<Attribute> MembershipTree() {
  // The ONNX node test test_ai_onnx_ml_tree_ensemble_set_membership.
  return {
      IntAttr("n_targets", 4),
      IntAttr("aggregate_function", 1),
      TensorAttr("membership_values", Tensor::FromVector<float>({1.2f, 3.7f, 8, 9, kNaN, 12, 7, kNaN}, {8})),
      IntAttr("post_transform", 0),
      IntsAttr("tree_roots", {0}),
      TensorAttr("nodes_modes", Tensor::FromVector<uint8_t>({0, 6, 6}, {3})),
      IntsAttr("nodes_featureids", {0, 0, 0}),
      TensorAttr("nodes_splits", Tensor::FromVector<float>({11, 232344.0f, kNaN}, {3})),
      IntsAttr("nodes_trueleafs", {0, 1, 1}),
      IntsAttr("nodes_truenodeids", {1, 0, 1}),
      IntsAttr("nodes_falseleafs", {1, 0, 1}),
      IntsAttr("nodes_falsenodeids", {2, 2, 3}),
      IntsAttr("leaf_targetids", {0, 1, 2, 3}),
      TensorAttr("leaf_weights", Tensor::FromVector<float>({1, 10, 1000, 100}, {4})),
  };
}

TEST(MlTreeEnsembleTest, SetMembershipNodeTest) {
  Node node = MakeNode("TreeEnsemble", 1, 1, MembershipTree(), kMl);
  auto run = RunOp(node, 5, {Tensor::FromVector<float>({1.2f, 3.4f, -0.12f, kNaN, 12, 7}, {6, 1})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {6, 4},
                          {1, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 100, 0, 0, 1000, 0, 0, 0, 1000, 0, 0, 10, 0, 0});
}

TEST(MlTreeEnsembleTest, SingleLeafTree) {
  // Tree 1's root has both sides on leaf 2: the tree is that leaf (as in
  // onnxruntime, which gives 101 and 110; onnx.reference reads leaf 1 instead).
  std::vector<Attribute> attrs = {
      IntAttr("n_targets", 1),
      IntsAttr("tree_roots", {0, 1}),
      TensorAttr("nodes_modes", Tensor::FromVector<uint8_t>({0, 0}, {2})),
      IntsAttr("nodes_featureids", {0, 0}),
      TensorAttr("nodes_splits", Tensor::FromVector<float>({0.5f, 0}, {2})),
      IntsAttr("nodes_truenodeids", {0, 2}),
      IntsAttr("nodes_trueleafs", {1, 1}),
      IntsAttr("nodes_falsenodeids", {1, 2}),
      IntsAttr("nodes_falseleafs", {1, 1}),
      IntsAttr("leaf_targetids", {0, 0, 0}),
      TensorAttr("leaf_weights", Tensor::FromVector<float>({1, 10, 100}, {3})),
  };
  auto run = RunOp(MakeNode("TreeEnsemble", 1, 1, attrs, kMl), 5, {Tensor::FromVector<float>({0, 1}, {2, 1})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {2, 1}, {101, 110});
}

TEST(MlTreeEnsembleTest, RejectsHostileIndices) {
  Tensor x = Tensor::FromVector<float>({1.2f}, {1, 1});
  auto expect_error = [&](Attribute changed) {
    std::vector<Attribute> attrs = MembershipTree();
    SetAttr(attrs, changed);
    auto run = RunOp(MakeNode("TreeEnsemble", 1, 1, attrs, kMl), 5, {x});
    EXPECT_FALSE(run.ok()) << "accepted hostile " << changed.name;
  };
  expect_error(IntsAttr("nodes_truenodeids", {1, 7, 1}));     // leaf index out of range
  expect_error(IntsAttr("nodes_falsenodeids", {5, 2, 3}));    // node index out of range
  expect_error(IntsAttr("nodes_featureids", {0, 1, 0}));      // feature beyond the input width
  expect_error(IntsAttr("tree_roots", {3}));                  // root out of range
  expect_error(IntsAttr("leaf_targetids", {0, 1, 2, 4}));     // target out of range
  expect_error(IntsAttr("nodes_trueleafs", {0, 1}));          // wrong length
  expect_error(TensorAttr("nodes_modes", Tensor::FromVector<uint8_t>({0, 6, 9}, {3})));  // unknown mode
  expect_error(TensorAttr("membership_values", Tensor::FromVector<float>({1.2f, kNaN}, {2})));  // too few sets
  expect_error(IntAttr("aggregate_function", 7));
}

TEST(MlTreeEnsembleTest, CorruptedIntegerAttributesGiveErrorsNotCrashes) {
  uint64_t state = 987;
  auto next = [&state]() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int64_t>(state >> 33);
  };
  Tensor x = Tensor::FromVector<float>({1.2f, 3.4f, kNaN, 12}, {4, 1});
  int ok = 0, failed = 0;
  for (int iteration = 0; iteration < 400; ++iteration) {
    std::vector<Attribute> attrs = MembershipTree();
    for (Attribute& a : attrs) {
      if (a.type == AttrType::kInts && next() % 2 == 0) {
        if (!a.ints.empty() && next() % 4 == 0) a.ints.pop_back();
        for (int64_t& v : a.ints)
          if (next() % 3 == 0) v = next() % 8 - 2;
      } else if (a.type == AttrType::kInt && next() % 4 == 0) {
        a.i = next() % 8 - 2;
      }
    }
    auto run = RunOp(MakeNode("TreeEnsemble", 1, 1, attrs, kMl), 5, {x});
    (run.ok() ? ok : failed)++;
  }
  EXPECT_EQ(ok + failed, 400);
  EXPECT_GT(failed, 0);
}

TEST(MlTreeEnsembleTest, RejectsCycle) {
  std::vector<Attribute> attrs = MembershipTree();
  // Node 1 (a member test) goes back to node 0 when its value is not a member.
  SetAttr(attrs, IntsAttr("nodes_falsenodeids", {2, 0, 3}));
  SetAttr(attrs, IntsAttr("nodes_falseleafs", {0, 0, 1}));
  SetAttr(attrs, IntsAttr("nodes_truenodeids", {1, 0, 1}));
  auto run = RunOp(MakeNode("TreeEnsemble", 1, 1, attrs, kMl), 5, {Tensor::FromVector<float>({3.4f}, {1, 1})});
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("cycle"), std::string::npos) << run.status().message();
}

}  // namespace
}  // namespace nee::testing
