// Compiling the tree ensembles of the ai.onnx.ml domain (ml_tree.cc) into
// one flat Forest (ml_tree.h): reading and checking their attributes, every
// id, index and feature against the input, so that evaluation cannot go out
// of bounds. Split from ml_tree.cc, which keeps the shape rules, the scoring
// and the kernels: a forest is compiled once per session and scored on every
// run, and the two read best apart.
#include "ops/ml_tree_compile.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ops/ml_util.h"
#include "ops/op_util.h"

namespace nee::ml_tree {

namespace {

using ml::AttrError;

constexpr int64_t kMaxNodes = int64_t{1} << 30;
constexpr Ref LeafRef(int64_t leaf) { return static_cast<Ref>(~leaf); }

// Groups (leaf, weight) pairs by leaf into Forest::leaf_begin/leaf_weights.
void SetLeafWeights(Forest& f, int64_t leaf_count, const std::vector<std::pair<int64_t, LeafWeight>>& weights) {
  f.leaf_begin.assign(static_cast<size_t>(leaf_count + 1), 0);
  for (const auto& [leaf, w] : weights) ++f.leaf_begin[static_cast<size_t>(leaf + 1)];
  for (int64_t l = 0; l < leaf_count; ++l) f.leaf_begin[l + 1] += f.leaf_begin[l];
  f.leaf_weights.resize(weights.size());
  std::vector<int64_t> next(f.leaf_begin.begin(), f.leaf_begin.end() - 1);
  for (const auto& [leaf, w] : weights) f.leaf_weights[static_cast<size_t>(next[leaf]++)] = w;  // keeps order
}

// (tree id, node id) -> position in the nodes_* arrays. Exporters number the
// nodes of a tree 0..n-1, so each tree gets a dense table when its ids are
// compact, and a hash table otherwise.
class NodeIndex {
 public:
  Status Build(const Node& node, const std::vector<int64_t>& tree_ids, const std::vector<int64_t>& node_ids) {
    for (size_t i = 0; i < tree_ids.size(); ++i) {
      auto [it, added] = slot_of_tree_.emplace(tree_ids[i], trees_.size());
      if (added) trees_.push_back(Tree{node_ids[i], node_ids[i], 0, {}, {}});
      Tree& t = trees_[it->second];
      t.min_id = std::min(t.min_id, node_ids[i]);
      t.max_id = std::max(t.max_id, node_ids[i]);
      ++t.count;
    }
    for (Tree& t : trees_) {
      // Dense when the id range is at most about twice the node count.
      uint64_t range = static_cast<uint64_t>(t.max_id) - static_cast<uint64_t>(t.min_id);
      if (range <= static_cast<uint64_t>(2 * t.count + 64)) t.dense.assign(range + 1, -1);
    }
    for (size_t i = 0; i < tree_ids.size(); ++i) {
      Tree& t = trees_[slot_of_tree_[tree_ids[i]]];
      int64_t* slot = nullptr;
      if (!t.dense.empty()) slot = &t.dense[static_cast<size_t>(node_ids[i] - t.min_id)];
      else slot = &t.sparse.emplace(node_ids[i], -1).first->second;
      if (*slot != -1)
        return AttrError(node, "nodes_nodeids", "has node " + std::to_string(node_ids[i]) + " twice in tree " +
                         std::to_string(tree_ids[i]));
      *slot = static_cast<int64_t>(i);
    }
    return Status::Ok();
  }

  // The position of the node, or -1.
  int64_t Find(int64_t tree_id, int64_t node_id) const {
    auto it = slot_of_tree_.find(tree_id);
    if (it == slot_of_tree_.end()) return -1;
    const Tree& t = trees_[it->second];
    if (!t.dense.empty()) {
      if (node_id < t.min_id || node_id > t.max_id) return -1;
      return t.dense[static_cast<size_t>(node_id - t.min_id)];
    }
    auto found = t.sparse.find(node_id);
    return found == t.sparse.end() ? -1 : found->second;
  }

 private:
  struct Tree {
    int64_t min_id, max_id, count;
    std::vector<int64_t> dense;
    std::unordered_map<int64_t, int64_t> sparse;
  };
  std::unordered_map<int64_t, size_t> slot_of_tree_;
  std::vector<Tree> trees_;
};

Status CheckSize(const Node& node, const std::string& name, size_t actual, size_t expected) {
  if (actual != expected)
    return AttrError(node, name, "has " + std::to_string(actual) + " entries, expected " + std::to_string(expected));
  return Status::Ok();
}

// Called once per tree node (a 500-tree forest has 214,000): compared as
// string_views, which check the length before the bytes, where comparing
// with C strings measured each one's length every time (a fifth of such a
// forest's preparation was memcmp).
Result<Mode> ParseMode(const Node& node, const std::string& mode) {
  using namespace std::string_view_literals;
  const std::string_view m = mode;
  if (m == "LEAF"sv) return Mode::kLeaf;
  if (m == "BRANCH_LEQ"sv) return Mode::kLeq;
  if (m == "BRANCH_LT"sv) return Mode::kLt;
  if (m == "BRANCH_GTE"sv) return Mode::kGte;
  if (m == "BRANCH_GT"sv) return Mode::kGt;
  if (m == "BRANCH_EQ"sv) return Mode::kEq;
  if (m == "BRANCH_NEQ"sv) return Mode::kNeq;
  return AttrError(node, "nodes_modes", "has unknown mode '" + mode + "'");
}

Status CheckFeature(const Node& node, const char* attr, int64_t feature, int64_t width) {
  if (feature < 0 || feature >= width)
    return AttrError(node, attr, "refers to feature " + std::to_string(feature) + " but the input has " +
                     std::to_string(width) + " features");
  return Status::Ok();
}

}  // namespace

// ---- Attribute reading -------------------------------------------------------

// A real-valued list given either as `name` (floats) or `name_as_tensor`.
Result<std::vector<double>> ReadReals(const Node& node, const std::string& name) {
  const Attribute* list = node.FindAttr(name);
  const Attribute* tensor = node.FindAttr(name + "_as_tensor");
  if (list && tensor) return AttrError(node, name, "and '" + name + "_as_tensor' are both set");
  std::vector<double> out;
  if (list) {
    NEE_ASSIGN_OR_RETURN(std::vector<float> v, node.GetFloats(name));
    out.assign(v.begin(), v.end());
  } else if (tensor) {
    NEE_ASSIGN_OR_RETURN(Tensor t, node.GetTensor(name + "_as_tensor"));
    if (!IsFloatingPoint(t.dtype()))
      return AttrError(node, name + "_as_tensor", std::string("must be a floating-point tensor, got ") +
                       DataTypeName(t.dtype()));
    for (int64_t i = 0; i < t.num_elements(); ++i) out.push_back(ReadAsDouble(t, i));
  }
  return out;
}

// A tensor attribute of ml opset 5 read as doubles.
Result<std::vector<double>> ReadRealTensor(const Node& node, const std::string& name, bool required) {
  std::vector<double> out;
  if (!node.HasAttr(name)) {
    if (required) return AttrError(node, name, "is required");
    return out;
  }
  NEE_ASSIGN_OR_RETURN(Tensor t, node.GetTensor(name));
  if (!IsFloatingPoint(t.dtype()))
    return AttrError(node, name, std::string("must be a floating-point tensor, got ") + DataTypeName(t.dtype()));
  for (int64_t i = 0; i < t.num_elements(); ++i) out.push_back(ReadAsDouble(t, i));
  return out;
}

// Integer and string list attributes by reference (forests can be large).
// An absent optional list reads as empty.
Result<const std::vector<int64_t>*> IntsRef(const Node& node, const std::string& name, bool required) {
  static const std::vector<int64_t> kEmpty;
  const Attribute* a = node.FindAttr(name);
  if (!a) {
    if (required) return AttrError(node, name, "is required");
    return &kEmpty;
  }
  if (a->type != AttrType::kInts) return AttrError(node, name, std::string("must be ints, got ") + AttrTypeName(a->type));
  return &a->ints;
}

Result<const std::vector<std::string>*> StringsRef(const Node& node, const std::string& name) {
  const Attribute* a = node.FindAttr(name);
  if (!a) return AttrError(node, name, "is required");
  if (a->type != AttrType::kStrings)
    return AttrError(node, name, std::string("must be strings, got ") + AttrTypeName(a->type));
  return &a->strings;
}

Result<Aggregate> ParseAggregate(const Node& node) {
  NEE_ASSIGN_OR_RETURN(std::string name, node.GetString("aggregate_function", "SUM"));
  if (name == "SUM") return Aggregate::kSum;
  if (name == "AVERAGE") return Aggregate::kAverage;
  if (name == "MIN") return Aggregate::kMin;
  if (name == "MAX") return Aggregate::kMax;
  return AttrError(node, "aggregate_function", "has unknown value '" + name + "'");
}

// Compiles the nodes_* attributes of TreeEnsembleClassifier/Regressor (ml
// opsets 1 and 3) plus their (tree, node, target, weight) leaf lists.
// `weights_prefix` is "class" or "target".
Result<Forest> CompileLegacyForest(const Node& node, int64_t width, int64_t targets, const std::string& weights_prefix) {
  NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* tree_ids, IntsRef(node, "nodes_treeids", true));
  NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* node_ids, IntsRef(node, "nodes_nodeids", true));
  NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* features, IntsRef(node, "nodes_featureids", true));
  NEE_ASSIGN_OR_RETURN(const std::vector<std::string>* modes, StringsRef(node, "nodes_modes"));
  NEE_ASSIGN_OR_RETURN(std::vector<double> values, ReadReals(node, "nodes_values"));
  NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* true_ids, IntsRef(node, "nodes_truenodeids", true));
  NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* false_ids, IntsRef(node, "nodes_falsenodeids", true));
  NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* tracks, IntsRef(node, "nodes_missing_value_tracks_true", false));
  const size_t n = node_ids->size();
  if (static_cast<int64_t>(n) > kMaxNodes) return AttrError(node, "nodes_nodeids", "has more than 2^30 nodes");
  NEE_RETURN_IF_ERROR(CheckSize(node, "nodes_treeids", tree_ids->size(), n));
  NEE_RETURN_IF_ERROR(CheckSize(node, "nodes_featureids", features->size(), n));
  NEE_RETURN_IF_ERROR(CheckSize(node, "nodes_modes", modes->size(), n));
  NEE_RETURN_IF_ERROR(CheckSize(node, "nodes_values", values.size(), n));
  NEE_RETURN_IF_ERROR(CheckSize(node, "nodes_truenodeids", true_ids->size(), n));
  NEE_RETURN_IF_ERROR(CheckSize(node, "nodes_falsenodeids", false_ids->size(), n));
  if (!tracks->empty()) NEE_RETURN_IF_ERROR(CheckSize(node, "nodes_missing_value_tracks_true", tracks->size(), n));

  Forest f;
  f.targets = targets;
  NodeIndex index;
  NEE_RETURN_IF_ERROR(index.Build(node, *tree_ids, *node_ids));
  // Each node becomes a branch or a leaf.
  std::vector<Ref> ref_of(n);
  std::vector<Mode> mode_of(n);
  int64_t leaf_count = 0;
  for (size_t i = 0; i < n; ++i) {
    NEE_ASSIGN_OR_RETURN(mode_of[i], ParseMode(node, (*modes)[i]));
    if (mode_of[i] == Mode::kLeaf) {
      ref_of[i] = LeafRef(leaf_count++);
    } else {
      ref_of[i] = static_cast<Ref>(f.branches.size());
      f.branches.emplace_back();
    }
  }
  auto child = [&](size_t i, int64_t child_id, const char* attr) -> Result<Ref> {
    int64_t position = index.Find((*tree_ids)[i], child_id);
    if (position < 0)
      return AttrError(node, attr, "refers to node " + std::to_string(child_id) + " missing from tree " +
                       std::to_string((*tree_ids)[i]));
    return ref_of[static_cast<size_t>(position)];
  };
  for (size_t i = 0; i < n; ++i) {
    if (mode_of[i] == Mode::kLeaf) continue;
    Branch& b = f.branches[static_cast<size_t>(ref_of[i])];
    NEE_RETURN_IF_ERROR(CheckFeature(node, "nodes_featureids", (*features)[i], width));
    b.feature = static_cast<int32_t>((*features)[i]);
    b.threshold = values[i];
    b.mode = mode_of[i];
    b.missing_tracks_true = !tracks->empty() && (*tracks)[i] != 0;
    NEE_ASSIGN_OR_RETURN(b.true_ref, child(i, (*true_ids)[i], "nodes_truenodeids"));
    NEE_ASSIGN_OR_RETURN(b.false_ref, child(i, (*false_ids)[i], "nodes_falsenodeids"));
  }
  // The root of each tree is its first node, trees in order of first appearance.
  std::unordered_map<int64_t, bool> seen;
  for (size_t i = 0; i < n; ++i)
    if (seen.emplace((*tree_ids)[i], true).second) f.roots.push_back(ref_of[i]);

  const std::string p = weights_prefix;
  NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* w_trees, IntsRef(node, p + "_treeids", false));
  NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* w_nodes, IntsRef(node, p + "_nodeids", false));
  NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* w_ids, IntsRef(node, p + "_ids", false));
  NEE_ASSIGN_OR_RETURN(std::vector<double> w_values, ReadReals(node, p + "_weights"));
  NEE_RETURN_IF_ERROR(CheckSize(node, p + "_nodeids", w_nodes->size(), w_trees->size()));
  NEE_RETURN_IF_ERROR(CheckSize(node, p + "_ids", w_ids->size(), w_trees->size()));
  NEE_RETURN_IF_ERROR(CheckSize(node, p + "_weights", w_values.size(), w_trees->size()));
  std::vector<std::pair<int64_t, LeafWeight>> weights;
  weights.reserve(w_trees->size());
  for (size_t k = 0; k < w_trees->size(); ++k) {
    int64_t position = index.Find((*w_trees)[k], (*w_nodes)[k]);
    if (position < 0)
      return AttrError(node, p + "_nodeids", "refers to node " + std::to_string((*w_nodes)[k]) +
                       " missing from tree " + std::to_string((*w_trees)[k]));
    int64_t id = (*w_ids)[k];
    if (id < 0 || id >= targets)
      return AttrError(node, p + "_ids", "has id " + std::to_string(id) + ", expected 0.." + std::to_string(targets - 1));
    Ref r = ref_of[static_cast<size_t>(position)];
    if (r >= 0) continue;  // a weight on a branch node is never reached
    weights.push_back({~static_cast<int64_t>(r), LeafWeight{id, w_values[k]}});
  }
  SetLeafWeights(f, leaf_count, weights);
  return f;
}

// ---- TreeEnsemble (ml opset 5) ------------------------------------------------

Result<Forest> CompileForest5(const Node& node, int64_t width) {
  NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* features_ref, IntsRef(node, "nodes_featureids", true));
  NEE_ASSIGN_OR_RETURN(std::vector<double> splits, ReadRealTensor(node, "nodes_splits", true));
  NEE_ASSIGN_OR_RETURN(Tensor modes, node.GetTensor("nodes_modes"));
  NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* true_ids_ref, IntsRef(node, "nodes_truenodeids", true));
  NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* true_leafs_ref, IntsRef(node, "nodes_trueleafs", true));
  NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* false_ids_ref, IntsRef(node, "nodes_falsenodeids", true));
  NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* false_leafs_ref, IntsRef(node, "nodes_falseleafs", true));
  NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* tracks_ref, IntsRef(node, "nodes_missing_value_tracks_true", false));
  NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* leaf_targets_ref, IntsRef(node, "leaf_targetids", true));
  NEE_ASSIGN_OR_RETURN(std::vector<double> leaf_weights, ReadRealTensor(node, "leaf_weights", true));
  NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* roots_ref, IntsRef(node, "tree_roots", true));
  const auto& features = *features_ref;
  const auto& true_ids = *true_ids_ref;
  const auto& true_leafs = *true_leafs_ref;
  const auto& false_ids = *false_ids_ref;
  const auto& false_leafs = *false_leafs_ref;
  const auto& tracks = *tracks_ref;
  const auto& leaf_targets = *leaf_targets_ref;
  const auto& roots = *roots_ref;
  NEE_ASSIGN_OR_RETURN(std::vector<double> membership, ReadRealTensor(node, "membership_values", false));
  NEE_ASSIGN_OR_RETURN(int64_t targets, node.GetInt("n_targets"));
  NEE_ASSIGN_OR_RETURN(int64_t aggregate, node.GetInt("aggregate_function", 1));
  if (targets <= 0 || targets > (int64_t{1} << 24))
    return AttrError(node, "n_targets", "must be in 1..2^24, got " + std::to_string(targets));
  if (aggregate < 0 || aggregate > 3)
    return AttrError(node, "aggregate_function", "must be 0..3 (AVERAGE, SUM, MIN, MAX), got " + std::to_string(aggregate));
  if (modes.dtype() != DataType::kUint8)
    return AttrError(node, "nodes_modes", std::string("must be a uint8 tensor, got ") + DataTypeName(modes.dtype()));

  const size_t n = features.size();
  if (static_cast<int64_t>(n) > kMaxNodes || static_cast<int64_t>(leaf_targets.size()) > kMaxNodes)
    return AttrError(node, "nodes_featureids", "has more than 2^30 nodes or leaves");
  NEE_RETURN_IF_ERROR(CheckSize(node, "nodes_splits", splits.size(), n));
  NEE_RETURN_IF_ERROR(CheckSize(node, "nodes_modes", static_cast<size_t>(modes.num_elements()), n));
  NEE_RETURN_IF_ERROR(CheckSize(node, "nodes_truenodeids", true_ids.size(), n));
  NEE_RETURN_IF_ERROR(CheckSize(node, "nodes_trueleafs", true_leafs.size(), n));
  NEE_RETURN_IF_ERROR(CheckSize(node, "nodes_falsenodeids", false_ids.size(), n));
  NEE_RETURN_IF_ERROR(CheckSize(node, "nodes_falseleafs", false_leafs.size(), n));
  if (!tracks.empty()) NEE_RETURN_IF_ERROR(CheckSize(node, "nodes_missing_value_tracks_true", tracks.size(), n));
  NEE_RETURN_IF_ERROR(CheckSize(node, "leaf_weights", leaf_weights.size(), leaf_targets.size()));

  Forest f;
  f.targets = targets;
  f.aggregate = static_cast<Aggregate>(aggregate);  // same numbering as the enum
  const int64_t leaf_count = static_cast<int64_t>(leaf_targets.size());
  std::vector<std::pair<int64_t, LeafWeight>> weights;
  weights.reserve(leaf_targets.size());
  for (int64_t k = 0; k < leaf_count; ++k) {
    if (leaf_targets[k] < 0 || leaf_targets[k] >= targets)
      return AttrError(node, "leaf_targetids", "has target " + std::to_string(leaf_targets[k]) + ", expected 0.." +
                       std::to_string(targets - 1));
    weights.push_back({k, LeafWeight{leaf_targets[k], leaf_weights[k]}});
  }
  SetLeafWeights(f, leaf_count, weights);
  auto child = [&](int64_t id, bool is_leaf, const char* attr) -> Result<Ref> {
    int64_t limit = is_leaf ? leaf_count : static_cast<int64_t>(n);
    if (id < 0 || id >= limit)
      return AttrError(node, attr, "has " + std::string(is_leaf ? "leaf" : "node") + " index " + std::to_string(id) +
                       " out of range 0.." + std::to_string(limit - 1));
    return is_leaf ? LeafRef(id) : static_cast<Ref>(id);
  };
  size_t next_member = 0;  // membership sets are listed in node order, NaN-terminated
  f.branches.resize(n);
  for (size_t i = 0; i < n; ++i) {
    Branch& b = f.branches[i];
    uint8_t mode = modes.data<uint8_t>()[i];
    if (mode > 6) return AttrError(node, "nodes_modes", "has unknown mode " + std::to_string(mode));
    b.mode = static_cast<Mode>(mode);
    NEE_RETURN_IF_ERROR(CheckFeature(node, "nodes_featureids", features[i], width));
    b.feature = static_cast<int32_t>(features[i]);
    b.threshold = splits[i];
    b.missing_tracks_true = !tracks.empty() && tracks[i] != 0;
    NEE_ASSIGN_OR_RETURN(b.true_ref, child(true_ids[i], true_leafs[i] != 0, "nodes_truenodeids"));
    NEE_ASSIGN_OR_RETURN(b.false_ref, child(false_ids[i], false_leafs[i] != 0, "nodes_falsenodeids"));
    if (b.mode == Mode::kMember) {
      if (f.member_range.empty()) f.member_range.resize(n);
      int64_t begin = static_cast<int64_t>(f.members.size());
      while (next_member < membership.size() && !std::isnan(membership[next_member]))
        f.members.push_back(membership[next_member++]);
      if (next_member >= membership.size())
        return AttrError(node, "membership_values", "has fewer NaN-terminated sets than BRANCH_MEMBER nodes");
      ++next_member;  // the NaN
      f.member_range[i] = {begin, static_cast<int64_t>(f.members.size())};
      std::sort(f.members.begin() + begin, f.members.end());
    }
  }
  for (int64_t r : roots) {
    if (r < 0 || r >= static_cast<int64_t>(n))
      return AttrError(node, "tree_roots", "has node index " + std::to_string(r) + " out of range");
    // A tree that is a single leaf: both branches point to the same leaf.
    const Branch& b = f.branches[static_cast<size_t>(r)];
    bool single_leaf = b.true_ref < 0 && b.true_ref == b.false_ref;
    f.roots.push_back(single_leaf ? b.true_ref : static_cast<Ref>(r));
  }
  return f;
}

}  // namespace nee::ml_tree
