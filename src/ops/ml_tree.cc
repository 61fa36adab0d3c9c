// Operator family: MlTree — tree ensembles of the ai.onnx.ml domain:
// TreeEnsembleClassifier and TreeEnsembleRegressor (ml opsets 1 and 3; 3 adds
// the *_as_tensor attributes) and TreeEnsemble (ml opset 5, leaves in their
// own arrays, set-membership splits).
//
// Every form is first compiled into one flat representation (Forest): branch
// nodes with child references that are either another branch or a leaf, and
// leaves holding (target, weight) pairs. Compiling checks every id, index and
// feature against the input, so evaluation cannot go out of bounds; a step
// limit per tree turns a cyclic "tree" into an error instead of a hang.
//
// Where ONNX leaves the binary-classifier case open, behaviour follows ONNX
// Runtime, which is what exporters (skl2onnx) test against. Scores are
// accumulated in double.
//
// The compiling is in ml_tree_compile.cc; this file holds the shape rules,
// the scoring of rows (the reference walk and the block driver that the CPU
// provider's fast scorer plugs into) and the kernels.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/parallel_chains.h"
#include "base/thread_pool.h"
#include "ops/op_registry.h"
#include "ops/ml_tree.h"
#include "ops/ml_tree_cache.h"
#include "ops/ml_tree_compile.h"
#include "ops/ml_util.h"
#include "ops/op_util.h"

namespace nee {

namespace {

using ml::AttrError;
using ml::PostTransform;

using ml_tree::Aggregate;
using ml_tree::Branch;
using ml_tree::BlockScorer;
using ml_tree::CompileForest5;
using ml_tree::CompileLegacyForest;
using ml_tree::Forest;
using ml_tree::IntsRef;
using ml_tree::LeafWeight;
using ml_tree::Mode;
using ml_tree::ParseAggregate;
using ml_tree::ReadReals;
using ml_tree::Ref;
using ml_tree::ScorerFactory;

bool TakesTrueBranch(const Forest& f, const Branch& b, size_t index, double x) {
  if (std::isnan(x) && b.missing_tracks_true) return true;
  switch (b.mode) {
    case Mode::kLeq: return x <= b.threshold;
    case Mode::kLt: return x < b.threshold;
    case Mode::kGte: return x >= b.threshold;
    case Mode::kGt: return x > b.threshold;
    case Mode::kEq: return x == b.threshold;
    case Mode::kNeq: return x != b.threshold;
    case Mode::kMember: {
      auto [begin, end] = f.member_range[index];
      return std::binary_search(f.members.begin() + begin, f.members.begin() + end, x);
    }
    case Mode::kLeaf: break;
  }
  return false;
}

// Walks one tree for one row; returns the leaf index or -1 on a cycle.
int64_t FindLeaf(const Forest& f, Ref ref, const double* row) {
  size_t steps = 0;
  while (ref >= 0) {
    const Branch& b = f.branches[static_cast<size_t>(ref)];
    ref = TakesTrueBranch(f, b, static_cast<size_t>(ref), row[b.feature]) ? b.true_ref : b.false_ref;
    if (++steps > f.branches.size()) return -1;
  }
  return ~static_cast<int64_t>(ref);
}

// Adds one leaf's weights to a row's scores.
void AddLeaf(const Forest& f, int64_t leaf, double* scores, bool* has_score) {
  for (int64_t k = f.leaf_begin[leaf]; k < f.leaf_begin[leaf + 1]; ++k) {
    const LeafWeight& w = f.leaf_weights[static_cast<size_t>(k)];
    double& s = scores[w.target];
    switch (f.aggregate) {
      case Aggregate::kSum:
      case Aggregate::kAverage: s += w.weight; break;
      case Aggregate::kMin: s = has_score[w.target] ? std::min(s, w.weight) : w.weight; break;
      case Aggregate::kMax: s = has_score[w.target] ? std::max(s, w.weight) : w.weight; break;
    }
    has_score[w.target] = true;
  }
}

// Tree ranges a block of rows adds one at a time (a link each, see
// ForEachScoredRow): 500 trees in ranges of 31 or 32.
constexpr int64_t kTreeRangesPerBlock = 16;

// Adds trees [first_tree, last_tree) to the aggregated (not yet averaged nor
// post-transformed) scores of `count` rows. Trees are the outer loop so that
// one tree's nodes stay in cache across the block; each row still sees the
// trees in the same order, so results do not depend on the block size nor
// on how the trees are cut into ranges. Returns false on a cycle.
bool AddTreesToBlock(const Forest& f, const double* rows, int64_t width, int64_t count, int64_t first_tree,
                     int64_t last_tree, double* scores, bool* has_score) {
  for (int64_t t = first_tree; t < last_tree; ++t) {
    const Ref root = f.roots[static_cast<size_t>(t)];
    for (int64_t r = 0; r < count; ++r) {
      int64_t leaf = FindLeaf(f, root, rows + r * width);
      if (leaf < 0) return false;
      AddLeaf(f, leaf, scores + r * f.targets, has_score + r * f.targets);
    }
  }
  return true;
}

// The reference scorer: AddTreesToBlock over the forest's branches.
class ReferenceScorer final : public BlockScorer {
 public:
  explicit ReferenceScorer(const Forest& f) : f_(f) {}
  bool AddTrees(const double* rows, int64_t width, int64_t count, int64_t first_tree, int64_t last_tree,
                double* scores, bool* has_score) const override {
    return AddTreesToBlock(f_, rows, width, count, first_tree, last_tree, scores, has_score);
  }

 private:
  const Forest& f_;
};

// A block of rows being scored: its features as doubles and its scores so far.
struct ScoredBlock {
  std::vector<double> features, scores;
  std::unique_ptr<bool[]> has_score;
};

// Runs `per_row(row_index, scores, has_score)` for every row of X in parallel,
// after scoring it with `make_scorer`'s scorer (the reference's when it has
// none). Rows are independent, so results do not depend on chunking.
template <typename PerRow>
Status ForEachScoredRow(KernelContext& ctx, const std::shared_ptr<const Forest>& forest, ScorerFactory make_scorer,
                        const Tensor& x, int64_t rows, int64_t width, const PerRow& per_row) {
  const Forest& f = *forest;
  std::shared_ptr<const BlockScorer> scorer;
  if (make_scorer) {
    NEE_ASSIGN_OR_RETURN(scorer, make_scorer(ctx, forest, width));
  }
  const ReferenceScorer reference(f);
  const BlockScorer& score = scorer ? *scorer : reference;
  // Trees are the scorers' outer loop, so a block is as many rows as fit in
  // L2 (about 256 KiB of features): the forest, often larger than L2, is
  // then read once per block, not once per 64 rows (4x faster on 500 trees
  // of depth 10 and 1000 rows). For the same reason each thread takes one
  // block of rows (up to that size) rather than several smaller ones.
  const int64_t rows_per_block =
      std::clamp<int64_t>((int64_t{256} << 10) / (8 * std::max<int64_t>(width, 1)), 64, 1024);
  const int64_t threads = ctx.pool() ? ctx.pool()->num_threads() : 1;
  const int64_t block_rows = std::max<int64_t>(16, std::min(rows_per_block, (rows + threads - 1) / threads));
  const int64_t blocks = (rows + block_rows - 1) / block_rows;
  // Each block adds the trees in ranges, one link of its chain each
  // (ParallelChains): a thread that finishes its blocks first takes over
  // another's between two ranges, so a thread whose core is busy with other
  // work holds the rest up by one range, not by its whole block. (Smaller
  // blocks would do that too, but each re-reads the whole forest.)
  const int64_t trees = static_cast<int64_t>(f.roots.size());
  const int64_t ranges = std::clamp<int64_t>(trees, 1, kTreeRangesPerBlock);
  std::vector<ScoredBlock> scored(static_cast<size_t>(blocks));
  std::atomic<bool> any_cycle{false};
  ParallelChains(ctx.pool(), blocks, ranges, [&](int64_t block, int64_t range) {
    const int64_t first = block * block_rows, count = std::min(block_rows, rows - first);
    ScoredBlock& b = scored[static_cast<size_t>(block)];
    const int64_t cells = count * f.targets;
    if (range == 0) {
      b.features.resize(static_cast<size_t>(count * width));
      for (int64_t i = 0; i < count * width; ++i) b.features[i] = ReadAsDouble(x, first * width + i);
      b.scores.assign(static_cast<size_t>(cells), 0.0);
      b.has_score.reset(new bool[static_cast<size_t>(std::max<int64_t>(cells, 1))]());
    }
    if (any_cycle.load(std::memory_order_relaxed)) return;
    if (!score.AddTrees(b.features.data(), width, count, trees * range / ranges, trees * (range + 1) / ranges,
                        b.scores.data(), b.has_score.get())) {
      any_cycle = true;
      return;
    }
    if (range < ranges - 1) return;
    if (f.aggregate == Aggregate::kAverage && trees > 0)
      for (double& s : b.scores) s /= static_cast<double>(trees);
    for (int64_t r = 0; r < count; ++r)
      per_row(first + r, b.scores.data() + r * f.targets, b.has_score.get() + r * f.targets);
    b = ScoredBlock();
  });
  if (any_cycle) return InvalidModel(ctx.node().Describe() + ": a tree contains a cycle");
  return Status::Ok();
}

// ---- Compiled-forest cache -------------------------------------------------------
// (ml_tree_cache.cc: the process-wide cache for kernels run outside a session.)

// State read from the node's attributes alone (no input): once per session
// in the node's prepared state, else on every call.
template <typename T, typename Read>
Result<std::shared_ptr<const T>> Prepared(const KernelContext& ctx, const Read& read) {
  auto build = [&]() -> Result<std::shared_ptr<const T>> {
    NEE_ASSIGN_OR_RETURN(T value, read());
    return std::shared_ptr<const T>(std::make_shared<const T>(std::move(value)));
  };
  if (PreparedCache* prepared = ctx.prepared()) return prepared->GetOrBuild<T>({}, build);
  return build();
}

// The node's compiled forest: in a session, compiled once and kept in the
// node's prepared state (its attributes cannot change); outside one (constant
// folding, a kernel run alone), from the process-wide cache above, which has
// to hash every attribute on each call to know the node is the same.
template <typename Compile>
Result<std::shared_ptr<const Forest>> CachedForest(const KernelContext& ctx, int64_t width, const Compile& compile) {
  if (PreparedCache* prepared = ctx.prepared()) {
    return prepared->GetOrBuild<Forest>({width}, [&]() -> Result<std::shared_ptr<const Forest>> {
      NEE_ASSIGN_OR_RETURN(Forest compiled, compile());
      return std::shared_ptr<const Forest>(std::make_shared<const Forest>(std::move(compiled)));
    });
  }
  const Node& node = ctx.node();
  static ml_tree::ForestCache* cache = new ml_tree::ForestCache();  // never destroyed: kernels may run during exit
  const uint64_t hash = ml_tree::HashAttributes(node);
  if (auto forest = cache->Find(&node, width, hash)) return forest;
  NEE_ASSIGN_OR_RETURN(Forest compiled, compile());
  auto forest = std::make_shared<const Forest>(std::move(compiled));
  cache->Insert(&node, width, hash, forest);
  return forest;
}

Result<int64_t> FeatureWidth(const KernelContext& ctx, const Tensor& x, int64_t* rows) {
  if (x.dtype() == DataType::kString || x.dtype() == DataType::kBool || x.dtype() == DataType::kUndefined)
    return NotImplemented(ctx.node().Describe() + ": unsupported input type " + DataTypeName(x.dtype()));
  if (x.rank() == 1) {
    *rows = 1;
    return x.dim(0);
  }
  if (x.rank() == 2) {
    *rows = x.dim(0);
    return x.dim(1);
  }
  return ctx.InputError(0, "must be a 1-D or 2-D tensor of features, got " + x.Describe());
}

Dim RowsDim(const InferenceContext& ctx) {
  if (!ctx.has_input(0) || !ctx.input_type(0).shape) return Dim::Unknown();
  const Shape& s = *ctx.input_type(0).shape;
  if (s.size() == 1) return Dim::Known(1);
  if (s.size() == 2) return s[0];
  return Dim::Unknown();
}

// ---- TreeEnsembleRegressor ---------------------------------------------------

Result<int64_t> RegressorTargets(const Node& node) {
  NEE_ASSIGN_OR_RETURN(int64_t targets, node.GetInt("n_targets", -1));
  if (targets == -1) {
    // Absent: one more than the largest target id.
    NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* ids, IntsRef(node, "target_ids", false));
    targets = ids->empty() ? 1 : *std::max_element(ids->begin(), ids->end()) + 1;
  }
  if (targets <= 0 || targets > (int64_t{1} << 24))
    return AttrError(node, "n_targets", "must be in 1..2^24, got " + std::to_string(targets));
  return targets;
}

Status InferTreeEnsembleRegressor(InferenceContext& ctx) {
  Result<int64_t> targets = RegressorTargets(ctx.node);
  Dim t = targets.ok() ? Dim::Known(targets.value()) : Dim::Unknown();
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat, Shape{RowsDim(ctx), t});
  return Status::Ok();
}

Status RunTreeEnsembleRegressorWith(KernelContext& ctx, ScorerFactory make_scorer) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  int64_t rows = 0;
  NEE_ASSIGN_OR_RETURN(int64_t width, FeatureWidth(ctx, *x, &rows));
  NEE_ASSIGN_OR_RETURN(int64_t targets, RegressorTargets(node));
  NEE_ASSIGN_OR_RETURN(auto forest, CachedForest(ctx, width, [&]() -> Result<Forest> {
    NEE_ASSIGN_OR_RETURN(Forest compiled, CompileLegacyForest(node, width, targets, "target"));
    NEE_ASSIGN_OR_RETURN(compiled.aggregate, ParseAggregate(node));
    NEE_ASSIGN_OR_RETURN(compiled.base_values, ReadReals(node, "base_values"));
    if (!compiled.base_values.empty() && static_cast<int64_t>(compiled.base_values.size()) != targets)
      return AttrError(node, "base_values", "has " + std::to_string(compiled.base_values.size()) + " values for " +
                       std::to_string(targets) + " targets");
    return compiled;
  }));
  const Forest& f = *forest;
  NEE_ASSIGN_OR_RETURN(PostTransform transform, ml::ParsePostTransform(node));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kFloat, {rows, targets}));
  float* out = y.data<float>();
  return ForEachScoredRow(ctx, forest, make_scorer, *x, rows, width, [&](int64_t r, double* scores, const bool*) {
    if (!f.base_values.empty())
      for (int64_t t = 0; t < targets; ++t) scores[t] += f.base_values[t];
    ml::ApplyPostTransform(transform, scores, targets);
    for (int64_t t = 0; t < targets; ++t) out[r * targets + t] = static_cast<float>(scores[t]);
  });
}

// ---- TreeEnsembleClassifier --------------------------------------------------

struct Labels {
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  bool use_strings = false;
  int64_t size() const { return static_cast<int64_t>(use_strings ? strings.size() : ints.size()); }
};

Result<Labels> ReadLabels(const Node& node) {
  Labels l;
  NEE_ASSIGN_OR_RETURN(l.ints, node.GetInts("classlabels_int64s", {}));
  NEE_ASSIGN_OR_RETURN(l.strings, node.GetStrings("classlabels_strings", {}));
  if (l.ints.empty() == l.strings.empty())
    return AttrError(node, "classlabels_int64s", "or 'classlabels_strings' must be set (exactly one)");
  l.use_strings = !l.strings.empty();
  return l;
}

Status InferTreeEnsembleClassifier(InferenceContext& ctx) {
  Result<Labels> labels = ReadLabels(ctx.node);
  if (!labels.ok()) return Status::Ok();  // the kernel reports it
  Dim n = RowsDim(ctx);
  ctx.output_types[0] = TypeInfo::Tensor(labels->use_strings ? DataType::kString : DataType::kInt64, Shape{n});
  if (ctx.num_outputs() > 1)
    ctx.output_types[1] = TypeInfo::Tensor(DataType::kFloat, Shape{n, Dim::Known(labels->size())});
  return Status::Ok();
}

// The binary form: two labels but every leaf weight is for one class. The
// weight sum s is either a probability (all weights >= 0: label 1 when
// s > 0.5) or a margin (label 1 when s > 0). Under LOGISTIC the scores are
// [logistic(-s), logistic(s)] either way, as in ONNX Runtime and
// onnx.reference: weights that are all >= 0 do not make s a probability when
// a base value (a GradientBoostingClassifier's prior log-odds) is added, e.g.
// trees that are single leaves of weight 0. Otherwise [1-s, s] for a
// probability and [-s, s] for a margin.
void FinalizeBinary(double s, bool all_positive, PostTransform transform, double out[2], int64_t* cls) {
  *cls = s > (all_positive ? 0.5 : 0.0) ? 1 : 0;
  if (transform == PostTransform::kLogistic) {
    out[0] = ml::Logistic(-s);
    out[1] = ml::Logistic(s);
  } else if (all_positive) {
    double p = transform == PostTransform::kProbit ? ml::Probit(s) : s;
    out[0] = 1 - p;
    out[1] = p;
  } else {
    double p = transform == PostTransform::kProbit ? ml::Probit(s) : s;
    out[0] = -p;
    out[1] = p;
  }
}

// What the classifier derives from its attributes besides the forest: read
// once per session (the class ids and weights are as long as the forest).
struct ClassifierSetup {
  std::vector<double> base;
  PostTransform transform = PostTransform::kNone;
  bool binary = false, all_positive = false;
  int64_t used_class = 0;
  double binary_base = 0;
};

Result<ClassifierSetup> ReadClassifierSetup(const Node& node, int64_t classes) {
  ClassifierSetup s;
  NEE_ASSIGN_OR_RETURN(s.base, ReadReals(node, "base_values"));
  NEE_ASSIGN_OR_RETURN(s.transform, ml::ParsePostTransform(node));
  NEE_ASSIGN_OR_RETURN(const std::vector<int64_t>* class_ids_ref, IntsRef(node, "class_ids", false));
  NEE_ASSIGN_OR_RETURN(std::vector<double> class_weights, ReadReals(node, "class_weights"));
  const std::vector<int64_t>& class_ids = *class_ids_ref;
  const bool one_class_used = !class_ids.empty() &&
      std::all_of(class_ids.begin(), class_ids.end(), [&](int64_t c) { return c == class_ids[0]; });
  s.binary = classes == 2 && one_class_used;
  s.used_class = s.binary ? class_ids[0] : 0;
  s.all_positive = std::all_of(class_weights.begin(), class_weights.end(), [](double w) { return w >= 0; });
  if (s.binary) {
    if (s.base.size() == 1) s.binary_base = s.base[0];
    else if (s.base.size() == 2) s.binary_base = s.base[static_cast<size_t>(s.used_class)];
    else if (!s.base.empty())
      return AttrError(node, "base_values", "has " + std::to_string(s.base.size()) + " values for 2 classes");
  } else if (!s.base.empty() && static_cast<int64_t>(s.base.size()) != classes) {
    return AttrError(node, "base_values", "has " + std::to_string(s.base.size()) + " values for " +
                     std::to_string(classes) + " classes");
  }
  return s;
}

Status RunTreeEnsembleClassifierWith(KernelContext& ctx, ScorerFactory make_scorer) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  int64_t rows = 0;
  NEE_ASSIGN_OR_RETURN(int64_t width, FeatureWidth(ctx, *x, &rows));
  NEE_ASSIGN_OR_RETURN(Labels labels, ReadLabels(node));
  const int64_t classes = labels.size();
  NEE_ASSIGN_OR_RETURN(auto forest, CachedForest(ctx, width, [&] { return CompileLegacyForest(node, width, classes, "class"); }));
  NEE_ASSIGN_OR_RETURN(std::shared_ptr<const ClassifierSetup> setup,
                       Prepared<ClassifierSetup>(ctx, [&] { return ReadClassifierSetup(node, classes); }));
  const std::vector<double>& base = setup->base;
  const PostTransform transform = setup->transform;
  const bool binary = setup->binary, all_positive = setup->all_positive;
  const int64_t used_class = setup->used_class;
  const double binary_base = setup->binary_base;

  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, labels.use_strings ? DataType::kString : DataType::kInt64, {rows}));
  Tensor z;
  if (ctx.num_outputs() > 1 && ctx.wants_output(1)) {
    NEE_ASSIGN_OR_RETURN(z, ctx.AllocateOutput(1, DataType::kFloat, {rows, classes}));
  }
  return ForEachScoredRow(ctx, forest, make_scorer, *x, rows, width, [&](int64_t r, double* scores, const bool* has_score) {
    int64_t cls = 0;
    double binary_scores[2];
    double* final_scores = scores;
    if (binary && used_class == 0) {
      FinalizeBinary(scores[0] + binary_base, all_positive, transform, binary_scores, &cls);
      final_scores = binary_scores;
    } else if (binary) {
      // Only class 1 has weights: ONNX Runtime keeps [0, s] and transforms
      // both, with the binary thresholds for the label.
      double s = scores[1] + binary_base;
      cls = s > (all_positive ? 0.5 : 0.0) ? 1 : 0;
      binary_scores[0] = base.size() == 2 ? base[0] : 0.0;
      binary_scores[1] = s;
      ml::ApplyPostTransform(transform, binary_scores, 2);
      final_scores = binary_scores;
    } else {
      // Argmax over the classes that received a score (or have a base value).
      int64_t best = -1;
      for (int64_t c = 0; c < classes; ++c) {
        if (!base.empty()) scores[c] += base[c];
        bool scored = has_score[c] || !base.empty();
        if (scored && (best < 0 || scores[c] > scores[best])) best = c;
      }
      cls = best < 0 ? 0 : best;
      ml::ApplyPostTransform(transform, scores, classes);
    }
    if (labels.use_strings) y.data<std::string>()[r] = labels.strings[cls];
    else y.data<int64_t>()[r] = labels.ints[cls];
    if (z.defined())
      for (int64_t c = 0; c < classes; ++c) z.data<float>()[r * classes + c] = static_cast<float>(final_scores[c]);
  });
}

// ---- TreeEnsemble (ml opset 5) ------------------------------------------------

Result<PostTransform> PostTransform5(const Node& node) {
  NEE_ASSIGN_OR_RETURN(int64_t v, node.GetInt("post_transform", 0));
  switch (v) {
    case 0: return PostTransform::kNone;
    case 1: return PostTransform::kSoftmax;
    case 2: return PostTransform::kLogistic;
    case 3: return PostTransform::kSoftmaxZero;
    case 4: return PostTransform::kProbit;
  }
  return AttrError(node, "post_transform", "must be 0..4, got " + std::to_string(v));
}

Status InferTreeEnsemble(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  Result<int64_t> targets = ctx.node.GetInt("n_targets");
  Dim t = targets.ok() && targets.value() > 0 ? Dim::Known(targets.value()) : Dim::Unknown();
  ctx.output_types[0] = TypeInfo::Tensor(x->elem_type, Shape{RowsDim(ctx), t});
  return Status::Ok();
}

Status RunTreeEnsembleWith(KernelContext& ctx, ScorerFactory make_scorer) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  DataType type = x->dtype();
  if (type != DataType::kFloat && type != DataType::kDouble && type != DataType::kFloat16)
    return NotImplemented(ctx.node().Describe() + ": unsupported input type " + DataTypeName(type));
  int64_t rows = 0;
  NEE_ASSIGN_OR_RETURN(int64_t width, FeatureWidth(ctx, *x, &rows));
  NEE_ASSIGN_OR_RETURN(auto forest, CachedForest(ctx, width, [&] { return CompileForest5(ctx.node(), width); }));
  const Forest& f = *forest;
  NEE_ASSIGN_OR_RETURN(PostTransform transform, PostTransform5(ctx.node()));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, type, {rows, f.targets}));
  return ForEachScoredRow(ctx, forest, make_scorer, *x, rows, width, [&](int64_t r, double* scores, const bool*) {
    ml::ApplyPostTransform(transform, scores, f.targets);
    for (int64_t t = 0; t < f.targets; ++t) WriteFromDouble(y, r * f.targets + t, scores[t]);
  });
}

Status RunTreeEnsembleClassifierRef(KernelContext& ctx) { return RunTreeEnsembleClassifierWith(ctx, nullptr); }
Status RunTreeEnsembleRegressorRef(KernelContext& ctx) { return RunTreeEnsembleRegressorWith(ctx, nullptr); }
Status RunTreeEnsembleRef(KernelContext& ctx) { return RunTreeEnsembleWith(ctx, nullptr); }

}  // namespace

namespace ml_tree {
Status RunTreeEnsembleClassifier(KernelContext& ctx, ScorerFactory scorer) {
  return RunTreeEnsembleClassifierWith(ctx, scorer);
}
Status RunTreeEnsembleRegressor(KernelContext& ctx, ScorerFactory scorer) {
  return RunTreeEnsembleRegressorWith(ctx, scorer);
}
Status RunTreeEnsemble(KernelContext& ctx, ScorerFactory scorer) { return RunTreeEnsembleWith(ctx, scorer); }
}  // namespace ml_tree

void RegisterMlTreeOps(OpRegistry& registry) {
  const char* ml = "ai.onnx.ml";
  // ml opset 3 added the *_as_tensor attributes; 5 deprecated both in favour
  // of TreeEnsemble, but models importing ml opset 5 may still use them.
  registry.RegisterVersions(ml, "TreeEnsembleClassifier", {1, 3, 5}, InferTreeEnsembleClassifier,
                            RunTreeEnsembleClassifierRef);
  registry.RegisterVersions(ml, "TreeEnsembleRegressor", {1, 3, 5}, InferTreeEnsembleRegressor,
                            RunTreeEnsembleRegressorRef);
  registry.RegisterVersions(ml, "TreeEnsemble", {5}, InferTreeEnsemble, RunTreeEnsembleRef);
}

}  // namespace nee
