// The fast tree-ensemble walk (ep/cpu/tree_fast.cc) against the reference
// kernels of ops/ml_tree.cc: random forests (shuffled node ids, uneven
// depths, single-leaf trees, leaves with zero, one or two weights), inputs
// that tie with thresholds, NaN and infinities, row counts around the walk's
// group size, 1 and 2 threads. Outputs must be bitwise the reference's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep_test_util.h"

namespace nee::cpu {
// tree_fast.cc's test hook: "portable" or "x86" instead of the
// best walk (null: the best again); false for a walk this CPU lacks.
bool TreeForceWalk(const char* name);
}  // namespace nee::cpu

namespace nee::testing {
namespace {

const char* kMl = "ai.onnx.ml";

// Thresholds and inputs come from one small set, so ties are common.
const float kValues[] = {-2.f, -0.5f, 0.f, 0.25f, 0.5f, 1.f, 3.f};

struct RandomForest {
  std::vector<int64_t> tree_ids, node_ids, features, true_ids, false_ids;
  std::vector<std::string> modes;
  std::vector<float> thresholds;
  // One entry per (leaf, weight): tree, node, target, weight.
  std::vector<int64_t> w_trees, w_nodes, w_targets;
  std::vector<float> w_values;
};

// Builds one tree of at most `depth` levels; node ids are a permutation, so
// the reference's id lookup and the fast layout's preorder both get tested.
void AddTree(RandomForest& f, int64_t tree, int depth, int64_t width, int64_t targets, const std::string& mode,
             std::mt19937& rng) {
  struct Pending {
    int64_t slot;
    int depth;
  };
  // Shapes first (slots in creation order), ids shuffled afterwards.
  std::vector<int64_t> feature, true_slot, false_slot;
  std::vector<float> threshold;
  std::vector<bool> leaf;
  std::vector<Pending> stack{{0, 0}};
  feature.push_back(0), true_slot.push_back(0), false_slot.push_back(0), threshold.push_back(0), leaf.push_back(false);
  while (!stack.empty()) {
    Pending p = stack.back();
    stack.pop_back();
    const bool is_leaf = p.depth >= depth || rng() % 5 == 0;
    leaf[static_cast<size_t>(p.slot)] = is_leaf;
    if (is_leaf) continue;
    feature[static_cast<size_t>(p.slot)] = static_cast<int64_t>(rng() % width);
    threshold[static_cast<size_t>(p.slot)] = kValues[rng() % 7];
    for (int side = 0; side < 2; ++side) {
      int64_t child = static_cast<int64_t>(leaf.size());
      feature.push_back(0), true_slot.push_back(0), false_slot.push_back(0), threshold.push_back(0), leaf.push_back(false);
      (side == 0 ? true_slot : false_slot)[static_cast<size_t>(p.slot)] = child;
      stack.push_back({child, p.depth + 1});
    }
  }
  std::vector<int64_t> id(leaf.size());
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<int64_t>(i) * 3 + 1;
  std::shuffle(id.begin() + 1, id.end(), rng);  // the root stays first: the tree's first node is its root
  for (size_t i = 0; i < leaf.size(); ++i) {
    f.tree_ids.push_back(tree);
    f.node_ids.push_back(id[i]);
    f.features.push_back(feature[i]);
    f.modes.push_back(leaf[i] ? "LEAF" : mode);
    f.thresholds.push_back(threshold[i]);
    f.true_ids.push_back(leaf[i] ? 0 : id[static_cast<size_t>(true_slot[i])]);
    f.false_ids.push_back(leaf[i] ? 0 : id[static_cast<size_t>(false_slot[i])]);
    if (!leaf[i]) continue;
    const int weights = static_cast<int>(rng() % 4) % 3;  // 0, 1 or 2 weights, mostly 1
    for (int k = 0; k < weights; ++k) {
      f.w_trees.push_back(tree);
      f.w_nodes.push_back(id[i]);
      f.w_targets.push_back(static_cast<int64_t>(rng() % targets));
      f.w_values.push_back(std::uniform_real_distribution<float>(-1.f, 1.f)(rng));
    }
  }
}

RandomForest MakeForest(int64_t trees, int depth, int64_t width, int64_t targets, const std::string& mode,
                        std::mt19937& rng) {
  RandomForest f;
  for (int64_t t = 0; t < trees; ++t) AddTree(f, t, t == 1 ? 0 : depth, width, targets, mode, rng);  // tree 1: a leaf
  return f;
}

std::vector<Attribute> NodeAttrs(const RandomForest& f) {
  return {IntsAttr("nodes_treeids", f.tree_ids),     IntsAttr("nodes_nodeids", f.node_ids),
          IntsAttr("nodes_featureids", f.features),  StringsAttr("nodes_modes", f.modes),
          FloatsAttr("nodes_values", f.thresholds),  IntsAttr("nodes_truenodeids", f.true_ids),
          IntsAttr("nodes_falsenodeids", f.false_ids)};
}

std::vector<Attribute> WeightAttrs(const RandomForest& f, const std::string& prefix) {
  return {IntsAttr(prefix + "_treeids", f.w_trees), IntsAttr(prefix + "_nodeids", f.w_nodes),
          IntsAttr(prefix + "_ids", f.w_targets), FloatsAttr(prefix + "_weights", f.w_values)};
}

// rows x width features from kValues, with NaN and infinities mixed in.
Tensor MakeRows(int64_t rows, int64_t width, std::mt19937& rng) {
  std::vector<float> x(static_cast<size_t>(rows * width));
  for (float& v : x) {
    uint32_t pick = rng() % 20;
    v = pick == 0   ? std::numeric_limits<float>::quiet_NaN()
        : pick == 1 ? std::numeric_limits<float>::infinity()
        : pick == 2 ? -std::numeric_limits<float>::infinity()
        : pick < 10 ? kValues[rng() % 7]
                    : std::uniform_real_distribution<float>(-3.f, 3.f)(rng);
  }
  return Tensor::FromVector(x, {rows, width});
}

Result<std::vector<Value>> RunTree(KernelFn kernel, const Node& node, int64_t opset, const Tensor& x, int threads) {
  std::vector<Value> inputs{Value(x)};
  std::vector<const Value*> ptrs{&inputs[0]};
  std::vector<Value> outputs(node.outputs.size());
  ThreadPool pool(threads);
  KernelContext ctx(node, opset, ptrs, &outputs, nullptr, &pool, nullptr);
  NEE_RETURN_IF_ERROR(kernel(ctx));
  return outputs;
}

void ExpectSameAsReferenceOnce(KernelFn fast, const Node& node, int64_t opset, int64_t width, std::mt19937& rng) {
  for (int64_t rows : {1, 3, 7, 8, 9, 16, 17, 31, 33, 64, 130, 1000, 2100}) {
    Tensor x = MakeRows(rows, width, rng);
    auto want = RunTree(cpu::RunReference, node, opset, x, 1);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    for (int threads : {1, 2}) {
      auto got = RunTree(fast, node, opset, x, threads);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      for (size_t o = 0; o < want->size(); ++o) {
        const Tensor& w = (*want)[o].tensor();
        const Tensor& g = (*got)[o].tensor();
        ASSERT_EQ(w.dims(), g.dims()) << node.op_type << " output " << o;
        ASSERT_EQ(w.dtype(), g.dtype());
        EXPECT_EQ(0, std::memcmp(w.raw_data(), g.raw_data(), w.byte_size()))
            << node.op_type << " output " << o << ", rows " << rows << ", threads " << threads;
      }
    }
  }
}

// Every output of the fast kernel is bitwise the reference's, on several row
// counts (around the walks' group sizes, 8 and 16) at 1 and 2 threads,
// with each walk the CPU has: x86-64 (scalar compare and cmov) and the
// portable one.
void ExpectSameAsReference(KernelFn fast, const Node& node, int64_t opset, int64_t width, std::mt19937& rng) {
  for (const char* walk : {"x86", "portable"}) {
    if (!cpu::TreeForceWalk(walk)) continue;
    SCOPED_TRACE(std::string("walk ") + walk);
    ExpectSameAsReferenceOnce(fast, node, opset, width, rng);
    cpu::TreeForceWalk(nullptr);
  }
  // The best walk, as sessions choose it.
  ExpectSameAsReferenceOnce(fast, node, opset, width, rng);
}

#if defined(__x86_64__)
// The x86 walk is there on every x86-64 CPU, so the tests above run it; the
// AVX-512 gather walk is gone (slower than the scalar one where measured).
TEST(TreeFast, WalksFollowTheCpu) {
  EXPECT_TRUE(cpu::TreeForceWalk("x86"));
  EXPECT_FALSE(cpu::TreeForceWalk("avx512"));
  EXPECT_TRUE(cpu::TreeForceWalk("portable"));
  EXPECT_FALSE(cpu::TreeForceWalk("sse9"));
  EXPECT_TRUE(cpu::TreeForceWalk(nullptr));
}
#endif

TEST(TreeFast, RegressorMatchesReference) {
  std::mt19937 rng(11);
  for (const char* aggregate : {"SUM", "AVERAGE", "MAX"}) {
    for (const char* mode : {"BRANCH_LEQ", "BRANCH_LT"}) {  // LT: the fallback to the reference walk
      SCOPED_TRACE(std::string(aggregate) + " " + mode);
      // SUM with 70 trees: several chunks of trees when few rows walk trees as lanes.
      RandomForest f = MakeForest(std::string(aggregate) == "SUM" ? 70 : 9, 7, 5, 3, mode, rng);
      std::vector<Attribute> attrs = NodeAttrs(f);
      for (Attribute& a : WeightAttrs(f, "target")) attrs.push_back(a);
      attrs.push_back(IntAttr("n_targets", 3));
      attrs.push_back(StringAttr("aggregate_function", aggregate));
      attrs.push_back(FloatsAttr("base_values", {0.5f, -1.f, 2.f}));
      Node node = MakeNode("TreeEnsembleRegressor", 1, 1, attrs, kMl);
      ExpectSameAsReference(cpu::TreeEnsembleRegressorFast, node, 3, 5, rng);
    }
  }
}

TEST(TreeFast, ClassifierMatchesReference) {
  std::mt19937 rng(12);
  for (int64_t classes : {2, 4}) {
    for (const char* transform : {"NONE", "LOGISTIC", "SOFTMAX"}) {
      SCOPED_TRACE(std::to_string(classes) + " classes, " + transform);
      RandomForest f = MakeForest(12, 9, 6, classes, "BRANCH_LEQ", rng);
      if (classes == 2)  // the binary form: every weight on one class
        std::fill(f.w_targets.begin(), f.w_targets.end(), 1);
      std::vector<Attribute> attrs = NodeAttrs(f);
      for (Attribute& a : WeightAttrs(f, "class")) attrs.push_back(a);
      std::vector<int64_t> labels;
      for (int64_t c = 0; c < classes; ++c) labels.push_back(10 + c);
      attrs.push_back(IntsAttr("classlabels_int64s", labels));
      attrs.push_back(StringAttr("post_transform", transform));
      Node node = MakeNode("TreeEnsembleClassifier", 1, 2, attrs, kMl);
      ExpectSameAsReference(cpu::TreeEnsembleClassifierFast, node, 3, 6, rng);
    }
  }
}

// ml opset 5: the same random trees as TreeEnsemble (branches and leaves in
// their own arrays; mode 0 = BRANCH_LEQ, 1 = BRANCH_LT: the fallback).
TEST(TreeFast, TreeEnsembleMatchesReference) {
  std::mt19937 rng(13);
  for (int64_t mode : {0, 1}) {
    RandomForest f = MakeForest(6, 8, 4, 2, "BRANCH_LEQ", rng);
    // Branch i of the legacy forest -> branch index; leaf -> leaf index.
    std::vector<int64_t> index(f.node_ids.size());
    std::vector<int64_t> features, true_ids, false_ids, true_leafs, false_leafs, roots, leaf_targets;
    std::vector<float> splits, leaf_weights;
    std::vector<uint8_t> modes;
    int64_t branches = 0, leaves = 0;
    for (size_t i = 0; i < f.modes.size(); ++i) index[i] = f.modes[i] == "LEAF" ? leaves++ : branches++;
    auto find = [&](int64_t tree, int64_t id) {
      for (size_t i = 0; i < f.node_ids.size(); ++i)
        if (f.tree_ids[i] == tree && f.node_ids[i] == id) return i;
      return size_t{0};
    };
    for (size_t i = 0; i < f.modes.size(); ++i) {
      if (f.modes[i] == "LEAF") {
        leaf_targets.push_back(static_cast<int64_t>(rng() % 2));
        leaf_weights.push_back(std::uniform_real_distribution<float>(-1.f, 1.f)(rng));
        continue;
      }
      size_t t = find(f.tree_ids[i], f.true_ids[i]), e = find(f.tree_ids[i], f.false_ids[i]);
      features.push_back(f.features[i]);
      splits.push_back(f.thresholds[i]);
      modes.push_back(static_cast<uint8_t>(mode));
      true_ids.push_back(index[t]), true_leafs.push_back(f.modes[t] == "LEAF");
      false_ids.push_back(index[e]), false_leafs.push_back(f.modes[e] == "LEAF");
    }
    for (size_t i = 0; i < f.modes.size(); ++i)
      if (f.node_ids[i] == 1 && f.modes[i] != "LEAF") roots.push_back(index[i]);  // id 1 is each root
    const int64_t n = static_cast<int64_t>(modes.size());
    const int64_t l = static_cast<int64_t>(leaf_weights.size());
    Node node = MakeNode("TreeEnsemble", 1, 1,
                         {IntsAttr("nodes_featureids", features),
                          TensorAttr("nodes_splits", Tensor::FromVector(splits, {n})),
                          TensorAttr("nodes_modes", Tensor::FromVector(modes, {n})),
                          IntsAttr("nodes_truenodeids", true_ids), IntsAttr("nodes_trueleafs", true_leafs),
                          IntsAttr("nodes_falsenodeids", false_ids), IntsAttr("nodes_falseleafs", false_leafs),
                          IntsAttr("leaf_targetids", leaf_targets),
                          TensorAttr("leaf_weights", Tensor::FromVector(leaf_weights, {l})),
                          IntsAttr("tree_roots", roots), IntAttr("n_targets", 2), IntAttr("aggregate_function", 1)},
                         kMl);
    ExpectSameAsReference(cpu::TreeEnsembleFast, node, 5, 4, rng);
  }
}

// The regressor's sums (SUM, no base values, no transform) computed here,
// independently of ops/ml_tree.cc: each row walks every tree in order and
// adds its leaf's weights in double, as the reference documents.
std::vector<float> OracleSums(const RandomForest& f, const Tensor& x, int64_t targets) {
  const int64_t rows = x.dims()[0], width = x.dims()[1];
  const float* in = x.data<float>();
  std::vector<float> out(static_cast<size_t>(rows * targets));
  const size_t nodes = f.node_ids.size();
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> sums(static_cast<size_t>(targets), 0.0);
    for (size_t root = 0; root < nodes; ++root) {
      if (root > 0 && f.tree_ids[root] == f.tree_ids[root - 1]) continue;  // a tree's first node is its root
      const int64_t tree = f.tree_ids[root];
      size_t at = root;
      while (f.modes[at] != "LEAF") {
        const bool go_true = in[r * width + f.features[at]] <= f.thresholds[at];
        const int64_t next = go_true ? f.true_ids[at] : f.false_ids[at];
        at = root;
        while (f.tree_ids[at] != tree || f.node_ids[at] != next) ++at;
      }
      for (size_t k = 0; k < f.w_trees.size(); ++k)
        if (f.w_trees[k] == tree && f.w_nodes[k] == f.node_ids[at])
          sums[static_cast<size_t>(f.w_targets[k])] += f.w_values[k];
    }
    for (int64_t t = 0; t < targets; ++t) out[static_cast<size_t>(r * targets + t)] = static_cast<float>(sums[t]);
  }
  return out;
}

// Enough rows for several blocks per thread and more trees than a block's
// tree ranges (ops/ml_tree.cc scores a block a range of trees at a time, and
// a thread may take another's block over between two ranges): both kernels
// give the independently computed sums, bitwise, at 1 to 4 threads.
TEST(TreeFast, TreeRangesAndBlocksAtAnyThreadCount) {
  std::mt19937 rng(13);
  constexpr int64_t kTargets = 2, kWidth = 5;
  RandomForest f = MakeForest(53, 6, kWidth, kTargets, "BRANCH_LEQ", rng);
  std::vector<Attribute> attrs = NodeAttrs(f);
  for (Attribute& a : WeightAttrs(f, "target")) attrs.push_back(a);
  attrs.push_back(IntAttr("n_targets", kTargets));
  Node node = MakeNode("TreeEnsembleRegressor", 1, 1, attrs, kMl);
  for (int64_t rows : {1, 17, 300, 5000}) {
    Tensor x = MakeRows(rows, kWidth, rng);
    const std::vector<float> want = OracleSums(f, x, kTargets);
    for (KernelFn kernel : {KernelFn(cpu::TreeEnsembleRegressorFast), KernelFn(cpu::RunReference)}) {
      for (int threads : {1, 2, 3, 4}) {
        auto got = RunTree(kernel, node, 3, x, threads);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        const Tensor& y = (*got)[0].tensor();
        ASSERT_EQ(y.num_elements(), rows * kTargets);
        EXPECT_EQ(0, std::memcmp(y.data<float>(), want.data(), want.size() * sizeof(float)))
            << "rows " << rows << ", threads " << threads;
      }
    }
  }
}

// A "tree" whose branch leads back to its root: both kernels report the
// same error instead of hanging.
TEST(TreeFast, CycleIsTheReferenceError) {
  Node node = MakeNode("TreeEnsembleRegressor", 1, 1,
                       {IntsAttr("nodes_treeids", {0, 0, 0}), IntsAttr("nodes_nodeids", {0, 1, 2}),
                        IntsAttr("nodes_featureids", {0, 0, 0}),
                        StringsAttr("nodes_modes", {"BRANCH_LEQ", "BRANCH_LEQ", "LEAF"}),
                        FloatsAttr("nodes_values", {0.f, 1.f, 0.f}), IntsAttr("nodes_truenodeids", {1, 0, 0}),
                        IntsAttr("nodes_falsenodeids", {2, 2, 0}), IntsAttr("target_treeids", {0}),
                        IntsAttr("target_nodeids", {2}), IntsAttr("target_ids", {0}),
                        FloatsAttr("target_weights", {1.f})},
                       kMl);
  Tensor x = Tensor::FromVector<float>({-1.f}, {1, 1});
  auto want = RunTree(cpu::RunReference, node, 3, x, 1);
  auto got = RunTree(cpu::TreeEnsembleRegressorFast, node, 3, x, 2);
  ASSERT_FALSE(want.ok());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(want.status().ToString(), got.status().ToString());
}

}  // namespace
}  // namespace nee::testing
