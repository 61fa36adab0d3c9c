// Fast scoring of the ai.onnx.ml tree ensembles (TreeEnsembleClassifier,
// TreeEnsembleRegressor, TreeEnsemble). The kernels of ops/ml_tree.cc do the
// attributes, the compiled forest and the per-row post-processing; this file
// only replaces the tree walk (ml_tree::BlockScorer), for the forests
// exporters write: BRANCH_LEQ everywhere, no missing-value tracking, SUM or
// AVERAGE aggregation. Other forests keep the reference walk.
//
// Why it is faster: the reference walks one row at a time over 24-byte
// branches with a switch on the mode, so nearly every step is a mispredicted
// branch. Here the forest is laid out once per session as 16-byte nodes in
// preorder (the true child right after its parent) and a group of rows walks
// each tree together with selects instead of branches, so the rows' memory
// accesses overlap. Comparisons are the reference's (double x <= double
// threshold) and each row adds its leaves in tree order, so scores are
// bitwise the reference's.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ops/ml_tree.h"

namespace nee::cpu {
namespace {

using ml_tree::Aggregate;
using ml_tree::BlockScorer;
using ml_tree::Forest;
using ml_tree::Mode;
using ml_tree::Ref;

// 16 bytes, four to a cache line. A leaf leads to itself whatever the row:
// its threshold is NaN (x <= NaN is false for every x, NaN included) and its
// false child is itself, so a walk can step past the leaf without testing
// for it.
struct Node {
  double threshold;
  int32_t feature;
  int32_t false_next;  // the true child is the next node
};

// Rows walked through a tree together: enough independent loads to hide
// the latency of each step, few enough to stay in registers.
constexpr int kGroup = 8;

class LeqForest final : public BlockScorer {
 public:
  // The compact layout of `forest`, or null when a forest is outside what
  // this scorer handles (modes, missing-value tracking, aggregation, a node
  // reached twice).
  static std::shared_ptr<const LeqForest> Build(const std::shared_ptr<const Forest>& forest) {
    const Forest& f = *forest;
    if (f.aggregate != Aggregate::kSum && f.aggregate != Aggregate::kAverage) return nullptr;
    for (const ml_tree::Branch& b : f.branches)
      if (b.mode != Mode::kLeq || b.missing_tracks_true) return nullptr;
    auto out = std::make_shared<LeqForest>(forest);
    std::vector<uint8_t> seen(f.branches.size(), 0);
    for (Ref root : f.roots)
      if (!out->AddTree(root, seen)) return nullptr;
    return out;
  }

  explicit LeqForest(std::shared_ptr<const Forest> forest) : forest_(std::move(forest)) {}

  bool Score(const double* rows, int64_t width, int64_t count, double* scores, bool* has_score) const override {
    const Forest& f = *forest_;
    std::fill(scores, scores + count * f.targets, 0.0);
    std::fill(has_score, has_score + count * f.targets, false);
    for (int32_t root : roots_) {
      for (int64_t first = 0; first < count; first += kGroup) {
        const int n = static_cast<int>(std::min<int64_t>(kGroup, count - first));
        int32_t at[kGroup];
        Walk(root, rows + first * width, width, n, at);
        for (int g = 0; g < n; ++g)
          AddLeaf(leaf_of_[static_cast<size_t>(at[g])], scores + (first + g) * f.targets,
                  has_score + (first + g) * f.targets);
      }
    }
    if (f.aggregate == Aggregate::kAverage && !f.roots.empty())
      for (int64_t i = 0; i < count * f.targets; ++i) scores[i] /= static_cast<double>(f.roots.size());
    return true;
  }

 private:
  // Appends one tree in preorder, true child first; false when a branch is
  // reached twice (a cycle, or a node shared between trees or parents).
  bool AddTree(Ref root, std::vector<uint8_t>& seen) {
    const Forest& f = *forest_;
    struct Pending {
      Ref ref;
      int64_t parent;  // the node whose false child this is, or -1
    };
    std::vector<Pending> stack{{root, -1}};
    roots_.push_back(static_cast<int32_t>(nodes_.size()));
    while (!stack.empty()) {
      Pending p = stack.back();
      stack.pop_back();
      if (nodes_.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) return false;
      const int32_t index = static_cast<int32_t>(nodes_.size());
      if (p.parent >= 0) nodes_[static_cast<size_t>(p.parent)].false_next = index;
      if (p.ref < 0) {
        nodes_.push_back({std::numeric_limits<double>::quiet_NaN(), 0, index});
        leaf_of_.push_back(~p.ref);
        continue;
      }
      if (seen[static_cast<size_t>(p.ref)]++) return false;
      const ml_tree::Branch& b = f.branches[static_cast<size_t>(p.ref)];
      nodes_.push_back({b.threshold, b.feature, -1});
      leaf_of_.push_back(-1);
      stack.push_back({b.false_ref, index});
      stack.push_back({b.true_ref, -1});
    }
    return true;
  }

  // Walks `n` rows (n <= kGroup) from `root` until each stands on its leaf;
  // at[g] is row g's leaf node. Each step is a select, not a branch, and the
  // rows' steps are independent; the loop ends when no row moved.
  void Walk(int32_t root, const double* rows, int64_t width, int n, int32_t* at) const {
    const Node* nodes = nodes_.data();
    const double* row[kGroup];
    for (int g = 0; g < kGroup; ++g) {
      row[g] = rows + std::min(g, n - 1) * width;  // missing rows repeat the last one
      at[g] = root;
    }
    int32_t moved = 1;
    while (moved) {
      moved = 0;
#pragma GCC unroll 8
      for (int g = 0; g < kGroup; ++g) {
        const Node& node = nodes[at[g]];
        // A mask rather than `?:`, which compilers turn back into a branch.
        const int32_t go_true = -static_cast<int32_t>(row[g][node.feature] <= node.threshold);
        const int32_t next = (go_true & (at[g] + 1)) | (~go_true & node.false_next);
        moved |= next ^ at[g];
        at[g] = next;
      }
    }
  }

  // As the reference adds a leaf for SUM and AVERAGE.
  void AddLeaf(int64_t leaf, double* scores, bool* has_score) const {
    const Forest& f = *forest_;
    for (int64_t k = f.leaf_begin[leaf]; k < f.leaf_begin[leaf + 1]; ++k) {
      const ml_tree::LeafWeight& w = f.leaf_weights[static_cast<size_t>(k)];
      scores[w.target] += w.weight;
      has_score[w.target] = true;
    }
  }

  std::shared_ptr<const Forest> forest_;
  std::vector<Node> nodes_;
  std::vector<int32_t> roots_;    // per tree, its root node
  std::vector<int64_t> leaf_of_;  // per node, the forest's leaf index (-1 for branches)
};

// The compact forest, built once per session (null when it does not apply).
Result<std::shared_ptr<const BlockScorer>> LeqScorer(KernelContext& ctx, const std::shared_ptr<const Forest>& forest,
                                                     int64_t width) {
  if (PreparedCache* prepared = ctx.prepared()) {
    NEE_ASSIGN_OR_RETURN(std::shared_ptr<const LeqForest> built,
                         prepared->GetOrBuild<LeqForest>({width}, [&]() -> Result<std::shared_ptr<const LeqForest>> {
                           return LeqForest::Build(forest);
                         }));
    return std::shared_ptr<const BlockScorer>(built);
  }
  return std::shared_ptr<const BlockScorer>(LeqForest::Build(forest));
}

}  // namespace

Status TreeEnsembleClassifierFast(KernelContext& ctx) { return ml_tree::RunTreeEnsembleClassifier(ctx, LeqScorer); }
Status TreeEnsembleRegressorFast(KernelContext& ctx) { return ml_tree::RunTreeEnsembleRegressor(ctx, LeqScorer); }
Status TreeEnsembleFast(KernelContext& ctx) { return ml_tree::RunTreeEnsemble(ctx, LeqScorer); }

}  // namespace nee::cpu
