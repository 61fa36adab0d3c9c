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
// accesses overlap: on x86-64 sixteen rows by compare and conditional move
// (WalkX86). A block of only a few rows walks several trees at once instead
// (one row per lane would leave most lanes idle). Comparisons are the
// reference's (double x <= double threshold) and each row adds its leaves in
// tree order whatever the lanes hold, so scores are bitwise the reference's
// and do not depend on how rows are split between threads.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ops/ml_tree.h"

#if defined(__x86_64__)
#define NEE_TREE_X86 1
#endif

namespace nee::cpu {
namespace {

// Which walk to use instead of the best one the CPU has (TreeForceWalk);
// -1 for the best.
std::atomic<int> forced_walk{-1};

using ml_tree::Aggregate;
using ml_tree::BlockScorer;
using ml_tree::Forest;
using ml_tree::Mode;
using ml_tree::Ref;

// 16 bytes, four to a cache line. A leaf leads to itself whatever the row:
// its threshold is NaN (x <= NaN is false for every x, NaN included) and its
// false child is itself, so a walk can step past the leaf without testing
// for it. The NaN's payload locates the leaf's weights (LeafNaN), so adding
// a leaf reads only the node the walk ended on and the weights.
struct Node {
  double threshold;
  int32_t feature;
  int32_t false_next;  // the true child is the next node
};

// A leaf's threshold: a quiet NaN whose low 32 bits are the index of its
// first weight and the next 19 bits the count of its weights.
constexpr uint64_t kQuietNaN = 0x7FF8000000000000;
constexpr int64_t kMaxLeafWeights = int64_t{1} << 19;
double LeafNaN(int64_t first, int64_t count) {
  const uint64_t bits = kQuietNaN | static_cast<uint64_t>(count) << 32 | static_cast<uint64_t>(first);
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

// Rows walked through a tree together by the portable walk: enough
// independent loads to hide the latency of each step, few enough to stay in
// registers.
constexpr int kGroup = 8;
// The x86-64 walk: sixteen scalar rows, sixteen chains of loads in flight
// (24 measured the same, 32 slower). A walk of four vectors of eight rows
// stepping by AVX-512 gathers was 1.7x slower than this one on the AMD EPYC
// (AVX-512) this was measured on, whose gathers cost about two cycles an
// element (a forest of 500 trees of depth 10 over 1000 rows: 16.3 against
// 9.3 ms), so there is none.
constexpr int kGroupX86 = 16;
constexpr int kMaxLanes = kGroupX86;

// Which walk a block uses.
enum class WalkKind { kPortable, kX86 };

static_assert(sizeof(Node) == 16, "a node is one threshold and two 32-bit indices");

// What a walk's lanes start from: a root node and the offset of a row in
// the block (lanes may differ in both: rows of one tree, or trees of one row).
struct Lanes {
  int32_t root[kMaxLanes];
  int32_t row_start[kMaxLanes];
  int32_t steps;  // the deepest leaf of the lanes' trees: every lane is on its leaf after this many steps
};

#if NEE_TREE_X86
// The walk on x86-64: kGroupX86 rows step as scalars, each
// step a compare and a conditional move. `ucomisd x, threshold` sets CF
// when threshold < x or either is NaN, so cmovae (CF clear) takes the true
// child exactly when x <= threshold, as in C++. Compilers turn `?:` here
// into a branch (unpredictable: half the steps mispredict) and the mask
// select of WalkPortable into twice the instructions. AVX2 gathers (four
// vectors of four rows stepping together) were 1.4x slower than this on Zen 3.
// Every lane is on its leaf after lanes.steps steps.
void WalkX86(const Node* nodes, const Lanes& lanes, const double* rows, int32_t* at) {
  const double* row[kGroupX86];
  int64_t index[kGroupX86];
  for (int g = 0; g < kGroupX86; ++g) {
    row[g] = rows + lanes.row_start[g];
    index[g] = lanes.root[g];
  }
  for (int32_t step = 0; step < lanes.steps; ++step) {
#pragma GCC unroll 16
    for (int g = 0; g < kGroupX86; ++g) {
      const Node& node = nodes[index[g]];
      int64_t next = node.false_next;
      asm("ucomisd %[x], %[threshold]\n\tcmovae %[true_next], %[next]"
          : [next] "+r"(next)
          : [x] "m"(row[g][node.feature]), [threshold] "x"(node.threshold), [true_next] "r"(index[g] + 1)
          : "cc");
      index[g] = next;
    }
  }
  for (int g = 0; g < kGroupX86; ++g) at[g] = static_cast<int32_t>(index[g]);
}

bool Supports(WalkKind kind) {
  return kind == WalkKind::kPortable || kind == WalkKind::kX86;
}
#else
bool Supports(WalkKind kind) { return kind == WalkKind::kPortable; }
#endif

WalkKind ChooseWalk() {
  int forced = forced_walk.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<WalkKind>(forced);
  static const WalkKind best = Supports(WalkKind::kX86) ? WalkKind::kX86 : WalkKind::kPortable;
  return best;
}

int LanesOf(WalkKind kind) {
  return kind == WalkKind::kX86 ? kGroupX86 : kGroup;
}

// Trees [first, last) of a forest.
struct TreeRange {
  size_t first, last;
};

class LeqForest final : public BlockScorer {
 public:
  // The compact layout of `forest`, or null when a forest is outside what
  // this scorer handles (modes, missing-value tracking, aggregation, a node
  // reached twice).
  static std::shared_ptr<const LeqForest> Build(const std::shared_ptr<const Forest>& forest, int64_t width) {
    const Forest& f = *forest;
    // Walks address rows and nodes with int32 offsets: (kMaxLanes - 1) *
    // width plus a feature, and twice the node count (at most a branch and its two children per branch, plus
    // single-leaf trees) must fit.
    if (width >= (int64_t{1} << 24) || 3 * f.branches.size() + f.roots.size() >= (size_t{1} << 30)) return nullptr;
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

  bool AddTrees(const double* rows, int64_t width, int64_t count, int64_t first_tree, int64_t last_tree,
                double* scores, bool* has_score) const override {
    const WalkKind kind = ChooseWalk();
    const int lanes = LanesOf(kind);
    const TreeRange trees{static_cast<size_t>(first_tree), static_cast<size_t>(last_tree)};
    // Each row adds its leaves in tree order either way.
    if (2 * count <= lanes) ScoreByTrees(rows, width, count, trees, lanes, kind, scores, has_score);
    else ScoreByRows(rows, width, count, trees, lanes, kind, scores, has_score);
    return true;
  }

 private:
  // Lanes are rows walking one tree; trees are the outer loop, so a tree's
  // nodes stay in L1 across the block. Lanes past the last row repeat it.
  void ScoreByRows(const double* rows, int64_t width, int64_t count, TreeRange trees, int lanes, WalkKind kind,
                   double* scores, bool* has_score) const {
    const int64_t targets = forest_->targets;
    Lanes start;
    for (size_t t = trees.first; t < trees.last; ++t) {
      std::fill(start.root, start.root + lanes, roots_[t]);
      start.steps = depths_[t];
      for (int64_t first = 0; first < count; first += lanes) {
        const int n = static_cast<int>(std::min<int64_t>(lanes, count - first));
        for (int l = 0; l < lanes; ++l) start.row_start[l] = static_cast<int32_t>(std::min(l, n - 1) * width);
        int32_t at[kMaxLanes];
        Walk(kind, start, rows + first * width, at);
        for (int l = 0; l < n; ++l) AddLeaf(at[l], scores + (first + l) * targets, has_score + (first + l) * targets);
      }
    }
  }

  // Lanes are trees one row walks (a few rows would leave most row lanes
  // idle). Lanes past the last tree repeat it.
  void ScoreByTrees(const double* rows, int64_t width, int64_t count, TreeRange trees, int lanes, WalkKind kind,
                    double* scores, bool* has_score) const {
    const int64_t targets = forest_->targets, last = static_cast<int64_t>(trees.last);
    Lanes start;
    std::fill(start.row_start, start.row_start + lanes, 0);
    for (int64_t r = 0; r < count; ++r) {
      for (int64_t first = static_cast<int64_t>(trees.first); first < last; first += lanes) {
        const int n = static_cast<int>(std::min<int64_t>(lanes, last - first));
        start.steps = 0;
        for (int l = 0; l < lanes; ++l) {
          const size_t t = static_cast<size_t>(first + std::min(l, n - 1));
          start.root[l] = roots_[t];
          start.steps = std::max(start.steps, depths_[t]);
        }
        int32_t at[kMaxLanes];
        Walk(kind, start, rows + r * width, at);
        for (int l = 0; l < n; ++l) AddLeaf(at[l], scores + r * targets, has_score + r * targets);
      }
    }
  }

  void Walk(WalkKind kind, const Lanes& lanes, const double* rows, int32_t* at) const {
#if NEE_TREE_X86
    if (kind == WalkKind::kX86) return WalkX86(nodes_.data(), lanes, rows, at);
#endif
    WalkPortable(lanes, rows, at);
  }

  // Appends one tree in preorder, true child first; false when a branch is
  // reached twice (a cycle, or a node shared between trees or parents) or
  // the leaves' weights do not fit LeafNaN.
  bool AddTree(Ref root, std::vector<uint8_t>& seen) {
    const Forest& f = *forest_;
    struct Pending {
      Ref ref;
      int64_t parent;  // the node whose false child this is, or -1
      int32_t depth;
    };
    std::vector<Pending> stack{{root, -1, 0}};
    roots_.push_back(static_cast<int32_t>(nodes_.size()));
    depths_.push_back(0);
    while (!stack.empty()) {
      Pending p = stack.back();
      stack.pop_back();
      if (nodes_.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) return false;
      const int32_t index = static_cast<int32_t>(nodes_.size());
      if (p.parent >= 0) nodes_[static_cast<size_t>(p.parent)].false_next = index;
      if (p.ref < 0) {
        depths_.back() = std::max(depths_.back(), p.depth);
        const int64_t leaf = ~static_cast<int64_t>(p.ref);
        const int64_t first = static_cast<int64_t>(leaf_weights_.size());
        const int64_t count = f.leaf_begin[leaf + 1] - f.leaf_begin[leaf];
        if (count >= kMaxLeafWeights || first + count >= (int64_t{1} << 32)) return false;
        nodes_.push_back({LeafNaN(first, count), 0, index});
        for (int64_t k = f.leaf_begin[leaf]; k < f.leaf_begin[leaf + 1]; ++k) {
          const ml_tree::LeafWeight& w = f.leaf_weights[static_cast<size_t>(k)];
          leaf_weights_.push_back({w.weight, w.target});
        }
        continue;
      }
      if (seen[static_cast<size_t>(p.ref)]++) return false;
      const ml_tree::Branch& b = f.branches[static_cast<size_t>(p.ref)];
      nodes_.push_back({b.threshold, b.feature, -1});
      stack.push_back({b.false_ref, index, p.depth + 1});
      stack.push_back({b.true_ref, -1, p.depth + 1});
    }
    return true;
  }

  // Walks kGroup lanes until each stands on its leaf; at[l] is lane l's leaf
  // node. Each step is a select, not a branch, and the lanes' steps are
  // independent; the loop ends when no lane moved.
  void WalkPortable(const Lanes& lanes, const double* rows, int32_t* at) const {
    const Node* nodes = nodes_.data();
    const double* row[kGroup];
    for (int g = 0; g < kGroup; ++g) {
      row[g] = rows + lanes.row_start[g];
      at[g] = lanes.root[g];
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

  // As the reference adds a leaf for SUM and AVERAGE (its weights in the
  // same order).
  void AddLeaf(int32_t node, double* scores, bool* has_score) const {
    uint64_t bits;
    std::memcpy(&bits, &nodes_[static_cast<size_t>(node)].threshold, sizeof bits);
    const LeafWeight* weights = leaf_weights_.data() + (bits & 0xFFFFFFFF);
    const int64_t count = static_cast<int64_t>(bits >> 32) & (kMaxLeafWeights - 1);
    for (int64_t k = 0; k < count; ++k) {
      const LeafWeight& w = weights[k];
      scores[w.target] += w.weight;
      has_score[w.target] = true;
    }
  }

  std::shared_ptr<const Forest> forest_;
  std::vector<Node> nodes_;
  std::vector<int32_t> roots_;    // per tree, its root node
  std::vector<int32_t> depths_;   // per tree, its deepest leaf's depth (a lone leaf: 0)
  // The leaves' weights in node order, so that a tree's leaves lie together
  // (where each leaf's are: its threshold's NaN payload).
  struct LeafWeight {
    double weight;
    int64_t target;
  };
  std::vector<LeafWeight> leaf_weights_;
};

// The compact forest, built once per session (null when it does not apply).
Result<std::shared_ptr<const BlockScorer>> LeqScorer(KernelContext& ctx, const std::shared_ptr<const Forest>& forest,
                                                     int64_t width) {
  if (PreparedCache* prepared = ctx.prepared()) {
    NEE_ASSIGN_OR_RETURN(std::shared_ptr<const LeqForest> built,
                         prepared->GetOrBuild<LeqForest>({width}, [&]() -> Result<std::shared_ptr<const LeqForest>> {
                           return LeqForest::Build(forest, width);
                         }));
    return std::shared_ptr<const BlockScorer>(built);
  }
  return std::shared_ptr<const BlockScorer>(LeqForest::Build(forest, width));
}

}  // namespace

void TreeForcePortable(bool on) { forced_walk.store(on ? static_cast<int>(WalkKind::kPortable) : -1); }

// For tests: "portable" or "x86" instead of the best walk, or the
// best again for null; false (and no change) for a walk this CPU lacks.
bool TreeForceWalk(const char* name) {
  if (!name) {
    forced_walk.store(-1);
    return true;
  }
  const std::string n = name;
  const WalkKind kind = n == "x86" ? WalkKind::kX86 : WalkKind::kPortable;
  if ((n != "portable" && kind == WalkKind::kPortable) || !Supports(kind)) return false;
  forced_walk.store(static_cast<int>(kind));
  return true;
}

Status TreeEnsembleClassifierFast(KernelContext& ctx) { return ml_tree::RunTreeEnsembleClassifier(ctx, LeqScorer); }
Status TreeEnsembleRegressorFast(KernelContext& ctx) { return ml_tree::RunTreeEnsembleRegressor(ctx, LeqScorer); }
Status TreeEnsembleFast(KernelContext& ctx) { return ml_tree::RunTreeEnsemble(ctx, LeqScorer); }

}  // namespace nee::cpu
