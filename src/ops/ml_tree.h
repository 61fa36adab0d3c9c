// The compiled form of the ai.onnx.ml tree ensembles (ops/ml_tree.cc), shared
// with the CPU provider's fast scorer (ep/cpu/tree_fast.cc).
//
// The kernels in ops/ do everything but the tree walk the same way for both:
// attributes, compiling the forest (once per session), the row loop and the
// per-row post-processing. Only "aggregated scores of a block of rows" is
// pluggable: the reference walks `Forest::branches`; a fast scorer may lay the
// forest out its own way, and must give bitwise the same scores.
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "base/status.h"

namespace nee {

class KernelContext;

namespace ml_tree {

enum class Mode : uint8_t { kLeq, kLt, kGte, kGt, kEq, kNeq, kMember, kLeaf };
enum class Aggregate { kAverage, kSum, kMin, kMax };

// A child reference: >= 0 is a branch index, < 0 is leaf ~ref. 32 bits keep
// a branch at 24 bytes; forests are limited to 2^30 nodes and leaves.
using Ref = int32_t;

struct Branch {
  double threshold = 0;
  int32_t feature = 0;
  Ref true_ref = 0;
  Ref false_ref = 0;
  Mode mode = Mode::kLeq;
  bool missing_tracks_true = false;
};

struct LeafWeight {
  int64_t target;
  double weight;
};

struct Forest {
  std::vector<Branch> branches;
  std::vector<Ref> roots;
  // Leaf l holds leaf_weights[leaf_begin[l] .. leaf_begin[l + 1]).
  std::vector<int64_t> leaf_begin;
  std::vector<LeafWeight> leaf_weights;
  // Per branch (only when a BRANCH_MEMBER node exists): its sorted range in members.
  std::vector<std::pair<int64_t, int64_t>> member_range;
  std::vector<double> members;
  int64_t targets = 0;
  Aggregate aggregate = Aggregate::kSum;
  std::vector<double> base_values;

  int64_t leaf_count() const { return static_cast<int64_t>(leaf_begin.size()) - 1; }
};

// Aggregated (not yet post-transformed) scores of blocks of rows.
class BlockScorer {
 public:
  virtual ~BlockScorer() = default;
  // `rows`: `count` rows of `width` features (row-major, as doubles); adds
  // trees [first_tree, last_tree) to scores and has_score (count x targets
  // each), which hold the earlier trees' (zeros and false before the first).
  // Each row must see the trees in forest order, so results do not depend on
  // how rows are blocked nor on how the trees are cut into ranges.
  // Returns false when a tree has a cycle.
  virtual bool AddTrees(const double* rows, int64_t width, int64_t count, int64_t first_tree, int64_t last_tree,
                        double* scores, bool* has_score) const = 0;
};

// Picks a scorer for a compiled forest; null means the reference's. Called
// on every run, so it should cache what it builds (ctx.prepared()).
using ScorerFactory = Result<std::shared_ptr<const BlockScorer>> (*)(KernelContext& ctx,
                                                                     const std::shared_ptr<const Forest>& forest,
                                                                     int64_t width);

// The three kernels with a chosen scorer (the registered reference kernels
// pass none).
Status RunTreeEnsembleClassifier(KernelContext& ctx, ScorerFactory scorer);
Status RunTreeEnsembleRegressor(KernelContext& ctx, ScorerFactory scorer);
Status RunTreeEnsemble(KernelContext& ctx, ScorerFactory scorer);

}  // namespace ml_tree
}  // namespace nee
