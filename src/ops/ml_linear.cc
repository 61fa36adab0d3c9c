// Operator family: MlLinear — the ai.onnx.ml models that score features
// without trees: LinearClassifier, LinearRegressor and the kernel machines
// SVMClassifier and SVMRegressor. (Feature preprocessing is ml_preprocess.cc,
// tree ensembles ml_tree.cc, what they share ml_util.h.)
//
// Where the ONNX text is vague, behaviour follows ONNX Runtime, since that is
// what exporters (skl2onnx, onnxmltools) test their output against. Scores are
// accumulated in double and written as float.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "ops/ml_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

using namespace ml;  // NOLINT: the family's shared vocabulary

// ---- LinearClassifier -------------------------------------------------------
// Scores = X * coefficients^T + intercepts. With one coefficient row and two
// class labels (the binary form), the label is labels[1] when the raw score is
// positive and the scores output holds [1 - p, p] (p the post-transformed
// score for LOGISTIC, the raw score otherwise), as ONNX Runtime does.

struct LinearModel {
  std::vector<float> coefficients;
  std::vector<float> intercepts;
  int64_t targets = 0;
};

Result<LinearModel> ReadLinearModel(const Node& node, int64_t width, int64_t declared_targets) {
  LinearModel m;
  NEE_ASSIGN_OR_RETURN(m.coefficients, node.GetFloats("coefficients"));
  NEE_ASSIGN_OR_RETURN(m.intercepts, node.GetFloats("intercepts", {}));
  if (width <= 0) return InvalidArgument(node.Describe() + ": input has no features");
  int64_t n = static_cast<int64_t>(m.coefficients.size());
  if (n % width != 0)
    return AttrError(node, "coefficients", "has " + std::to_string(n) +
                     " values, not a multiple of the input width " + std::to_string(width));
  m.targets = n / width;
  if (declared_targets > 0 && declared_targets != m.targets)
    return AttrError(node, "coefficients", "has " + std::to_string(n) + " values, expected targets (" +
                     std::to_string(declared_targets) + ") x input width (" + std::to_string(width) + ")");
  if (!m.intercepts.empty() && static_cast<int64_t>(m.intercepts.size()) != m.targets)
    return AttrError(node, "intercepts", "has " + std::to_string(m.intercepts.size()) +
                     " values, expected " + std::to_string(m.targets));
  return m;
}

// scores[r * targets + t] for every row r.
void LinearScores(const LinearModel& m, const Tensor& x, Rows rows, std::vector<double>& scores) {
  scores.assign(static_cast<size_t>(rows.count * m.targets), 0.0);
  std::vector<double> row(static_cast<size_t>(rows.width));
  for (int64_t r = 0; r < rows.count; ++r) {
    for (int64_t c = 0; c < rows.width; ++c) row[c] = ReadAsDouble(x, r * rows.width + c);
    for (int64_t t = 0; t < m.targets; ++t) {
      double s = m.intercepts.empty() ? 0.0 : m.intercepts[t];
      const float* w = m.coefficients.data() + t * rows.width;
      for (int64_t c = 0; c < rows.width; ++c) s += w[c] * row[c];
      scores[r * m.targets + t] = s;
    }
  }
}

Status InferLinearClassifier(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(ClassLabels labels, ReadClassLabels(ctx.node, "classlabels_ints", "classlabels_strings"));
  Dim n = OrUnknown(ml::RowsDim(*x));
  ctx.output_types[0] = TypeInfo::Tensor(labels.use_strings ? DataType::kString : DataType::kInt64, Shape{n});
  if (ctx.num_outputs() > 1) {
    Dim classes = Dim::Unknown();
    NEE_ASSIGN_OR_RETURN(std::vector<float> coefficients, ctx.node.GetFloats("coefficients", {}));
    std::optional<Dim> width = ml::WidthDim(*x);
    if (width && width->known() && width->value > 0 && coefficients.size() % width->value == 0) {
      int64_t targets = static_cast<int64_t>(coefficients.size()) / width->value;
      classes = Dim::Known(targets == 1 && labels.size() == 2 ? 2 : targets);
    }
    ctx.output_types[1] = TypeInfo::Tensor(DataType::kFloat, Shape{n, classes});
  }
  return Status::Ok();
}

Status RunLinearClassifier(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(ml::RequireNumericInput(ctx, 0, *x));
  NEE_ASSIGN_OR_RETURN(Rows rows, FeatureRows(ctx, 0, *x));
  NEE_ASSIGN_OR_RETURN(LinearModel model, ReadLinearModel(node, rows.width, 0));
  NEE_ASSIGN_OR_RETURN(ClassLabels labels, ReadClassLabels(node, "classlabels_ints", "classlabels_strings"));
  NEE_ASSIGN_OR_RETURN(PostTransform transform, ml::ParsePostTransform(node));
  const int64_t targets = model.targets;
  const bool binary = targets == 1 && labels.size() == 2;
  if (targets > 1 && labels.size() != 0 && static_cast<int64_t>(labels.size()) != targets)
    return AttrError(node, labels.use_strings ? "classlabels_strings" : "classlabels_ints",
                     "has " + std::to_string(labels.size()) + " labels but the coefficients define " +
                         std::to_string(targets) + " classes");

  std::vector<double> scores;
  LinearScores(model, *x, rows, scores);

  DataType label_type = labels.use_strings ? DataType::kString : DataType::kInt64;
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, label_type, {rows.count}));
  auto write_label = [&](int64_t r, int64_t cls) {
    // Without labels, the class index is the label (int64).
    if (labels.use_strings) y.data<std::string>()[r] = labels.strings[cls];
    else y.data<int64_t>()[r] = labels.ints.empty() ? cls : labels.ints[cls];
  };
  for (int64_t r = 0; r < rows.count; ++r) {
    const double* s = scores.data() + r * targets;
    if (targets == 1) {
      bool positive = s[0] > 0;
      if (binary) write_label(r, positive ? 1 : 0);
      else if (labels.use_strings) y.data<std::string>()[r] = positive ? "1" : "0";
      else y.data<int64_t>()[r] = positive ? 1 : 0;
    } else {
      write_label(r, std::max_element(s, s + targets) - s);
    }
  }

  if (ctx.num_outputs() > 1 && ctx.wants_output(1)) {
    int64_t out_classes = binary ? 2 : targets;
    NEE_ASSIGN_OR_RETURN(Tensor z, ctx.AllocateOutput(1, DataType::kFloat, {rows.count, out_classes}));
    float* out = z.data<float>();
    for (int64_t r = 0; r < rows.count; ++r) {
      double* s = scores.data() + r * targets;
      if (binary) {
        double p = s[0];
        if (transform == PostTransform::kLogistic || transform == PostTransform::kProbit)
          ml::ApplyPostTransform(transform, &p, 1);
        out[r * 2] = static_cast<float>(1 - p);
        out[r * 2 + 1] = static_cast<float>(p);
      } else {
        ml::ApplyPostTransform(transform, s, targets);
        for (int64_t t = 0; t < targets; ++t) out[r * targets + t] = static_cast<float>(s[t]);
      }
    }
  }
  return Status::Ok();
}

// ---- LinearRegressor --------------------------------------------------------

Status InferLinearRegressor(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(int64_t targets, ctx.node.GetInt("targets", 1));
  ctx.output_types[0] = TypeInfo::Tensor(
      DataType::kFloat, Shape{OrUnknown(ml::RowsDim(*x)), targets > 0 ? Dim::Known(targets) : Dim::Unknown()});
  return Status::Ok();
}

Status RunLinearRegressor(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(ml::RequireNumericInput(ctx, 0, *x));
  NEE_ASSIGN_OR_RETURN(Rows rows, FeatureRows(ctx, 0, *x));
  NEE_ASSIGN_OR_RETURN(int64_t declared, node.GetInt("targets", 1));
  if (declared <= 0) return AttrError(node, "targets", "must be positive, got " + std::to_string(declared));
  NEE_ASSIGN_OR_RETURN(LinearModel model, ReadLinearModel(node, rows.width, declared));
  NEE_ASSIGN_OR_RETURN(PostTransform transform, ml::ParsePostTransform(node));
  std::vector<double> scores;
  LinearScores(model, *x, rows, scores);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kFloat, {rows.count, model.targets}));
  for (int64_t r = 0; r < rows.count; ++r) {
    double* s = scores.data() + r * model.targets;
    ml::ApplyPostTransform(transform, s, model.targets);
    for (int64_t t = 0; t < model.targets; ++t) y.data<float>()[r * model.targets + t] = static_cast<float>(s[t]);
  }
  return Status::Ok();
}

// ---- SVMRegressor and SVMClassifier ------------------------------------------
// Kernel machines as libsvm/scikit-learn export them. Scores, labels and the
// binary and probability forms follow ONNX Runtime.

enum class SvmKernel { kLinear, kPoly, kRbf, kSigmoid };

struct SvmKernelParams {
  SvmKernel type = SvmKernel::kLinear;
  double gamma = 0, coef0 = 0, degree = 0;
};

Result<SvmKernelParams> ReadSvmKernel(const Node& node) {
  SvmKernelParams k;
  NEE_ASSIGN_OR_RETURN(std::string type, node.GetString("kernel_type", "LINEAR"));
  if (type == "LINEAR") k.type = SvmKernel::kLinear;
  else if (type == "POLY") k.type = SvmKernel::kPoly;
  else if (type == "RBF") k.type = SvmKernel::kRbf;
  else if (type == "SIGMOID") k.type = SvmKernel::kSigmoid;
  else return AttrError(node, "kernel_type", "has unknown value '" + type + "'");
  NEE_ASSIGN_OR_RETURN(std::vector<float> params, node.GetFloats("kernel_params", {}));
  if (!params.empty() && params.size() != 3)
    return AttrError(node, "kernel_params", "must hold [gamma, coef0, degree], got " + std::to_string(params.size()) + " values");
  if (params.size() == 3) k.gamma = params[0], k.coef0 = params[1], k.degree = params[2];
  return k;
}

double SvmKernelValue(const SvmKernelParams& k, const double* x, const float* v, int64_t width) {
  double acc = 0;
  if (k.type == SvmKernel::kRbf) {
    for (int64_t c = 0; c < width; ++c) acc += (x[c] - v[c]) * (x[c] - v[c]);
    return std::exp(-k.gamma * acc);
  }
  for (int64_t c = 0; c < width; ++c) acc += x[c] * v[c];
  switch (k.type) {
    case SvmKernel::kPoly: return std::pow(k.gamma * acc + k.coef0, k.degree);
    case SvmKernel::kSigmoid: return std::tanh(k.gamma * acc + k.coef0);
    default: return acc;
  }
}

Status InferSvmRegressor(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat, Shape{OrUnknown(ml::RowsDim(*x)), Dim::Known(1)});
  return Status::Ok();
}

Status RunSvmRegressor(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(ml::RequireNumericInput(ctx, 0, *x));
  NEE_ASSIGN_OR_RETURN(Rows rows, FeatureRows(ctx, 0, *x));
  NEE_ASSIGN_OR_RETURN(SvmKernelParams kernel, ReadSvmKernel(node));
  NEE_ASSIGN_OR_RETURN(std::vector<float> coefficients, node.GetFloats("coefficients"));
  NEE_ASSIGN_OR_RETURN(std::vector<float> support_vectors, node.GetFloats("support_vectors", {}));
  NEE_ASSIGN_OR_RETURN(std::vector<float> rho, node.GetFloats("rho"));
  NEE_ASSIGN_OR_RETURN(int64_t n_supports, node.GetInt("n_supports", 0));
  NEE_ASSIGN_OR_RETURN(int64_t one_class, node.GetInt("one_class", 0));
  NEE_ASSIGN_OR_RETURN(PostTransform transform, ml::ParsePostTransform(node));
  if (rho.empty()) return AttrError(node, "rho", "must hold at least one value");
  if (n_supports < 0) return AttrError(node, "n_supports", "must not be negative");
  if (n_supports > 0) {
    if (static_cast<int64_t>(support_vectors.size()) != n_supports * rows.width)
      return AttrError(node, "support_vectors", "has " + std::to_string(support_vectors.size()) + " values, expected n_supports (" +
                       std::to_string(n_supports) + ") x input width (" + std::to_string(rows.width) + ")");
    if (static_cast<int64_t>(coefficients.size()) != n_supports)
      return AttrError(node, "coefficients", "has " + std::to_string(coefficients.size()) + " values, expected n_supports (" +
                       std::to_string(n_supports) + ")");
  } else {
    // Linear form: the coefficients are one weight per feature.
    if (static_cast<int64_t>(coefficients.size()) != rows.width)
      return AttrError(node, "coefficients", "has " + std::to_string(coefficients.size()) + " values, expected the input width " +
                       std::to_string(rows.width));
    kernel.type = SvmKernel::kLinear;
  }
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kFloat, {rows.count, 1}));
  std::vector<double> row(static_cast<size_t>(rows.width));
  for (int64_t r = 0; r < rows.count; ++r) {
    for (int64_t c = 0; c < rows.width; ++c) row[c] = ReadAsDouble(*x, r * rows.width + c);
    double score = rho[0];
    if (n_supports > 0) {
      for (int64_t j = 0; j < n_supports; ++j)
        score += coefficients[j] * SvmKernelValue(kernel, row.data(), support_vectors.data() + j * rows.width, rows.width);
    } else {
      score += SvmKernelValue(kernel, row.data(), coefficients.data(), rows.width);
    }
    if (transform == PostTransform::kProbit) score = ml::Probit(score);
    if (one_class) score = score > 0 ? 1 : -1;
    y.data<float>()[r] = static_cast<float>(score);
  }
  return Status::Ok();
}

// Pairwise coupling of one-vs-one probabilities into class probabilities
// (Wu, Lin and Weng 2004, as in libsvm). r[i * k + j] = P(i | i or j).
void CoupleProbabilities(int64_t k, const std::vector<double>& r, double* p) {
  std::vector<double> q(static_cast<size_t>(k * k), 0.0), qp(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) {
    p[i] = 1.0 / static_cast<double>(k);
    for (int64_t j = 0; j < i; ++j) {
      q[i * k + i] += r[j * k + i] * r[j * k + i];
      q[i * k + j] = q[j * k + i];
    }
    for (int64_t j = i + 1; j < k; ++j) {
      q[i * k + i] += r[j * k + i] * r[j * k + i];
      q[i * k + j] = -r[j * k + i] * r[i * k + j];
    }
  }
  const double eps = 0.005 / static_cast<double>(k);
  for (int iteration = 0; iteration < 100; ++iteration) {
    double pqp = 0;
    for (int64_t i = 0; i < k; ++i) {
      qp[i] = 0;
      for (int64_t j = 0; j < k; ++j) qp[i] += q[i * k + j] * p[j];
      pqp += p[i] * qp[i];
    }
    double max_error = 0;
    for (int64_t i = 0; i < k; ++i) max_error = std::max(max_error, std::fabs(qp[i] - pqp));
    if (max_error < eps) break;
    for (int64_t i = 0; i < k; ++i) {
      double diff = (-qp[i] + pqp) / q[i * k + i];
      p[i] += diff;
      pqp = (pqp + diff * (diff * q[i * k + i] + 2 * qp[i])) / (1 + diff) / (1 + diff);
      for (int64_t j = 0; j < k; ++j) {
        qp[j] = (qp[j] + diff * q[i * k + j]) / (1 + diff);
        p[j] /= (1 + diff);
      }
    }
  }
}

struct SvmClassifierModel {
  ClassLabels labels;
  SvmKernelParams kernel;
  std::vector<float> coefficients, support_vectors, rho, prob_a, prob_b;
  std::vector<int64_t> vectors_per_class, first_vector;
  int64_t vectors = 0;
  bool svc = false;  // support vectors (one-vs-one) rather than one linear row per class
};

Result<SvmClassifierModel> ReadSvmClassifier(const Node& node, int64_t width) {
  SvmClassifierModel m;
  NEE_ASSIGN_OR_RETURN(m.labels, ReadClassLabels(node, "classlabels_ints", "classlabels_strings"));
  NEE_ASSIGN_OR_RETURN(m.kernel, ReadSvmKernel(node));
  NEE_ASSIGN_OR_RETURN(m.coefficients, node.GetFloats("coefficients"));
  NEE_ASSIGN_OR_RETURN(m.support_vectors, node.GetFloats("support_vectors", {}));
  NEE_ASSIGN_OR_RETURN(m.rho, node.GetFloats("rho"));
  NEE_ASSIGN_OR_RETURN(m.prob_a, node.GetFloats("prob_a", {}));
  NEE_ASSIGN_OR_RETURN(m.prob_b, node.GetFloats("prob_b", {}));
  NEE_ASSIGN_OR_RETURN(m.vectors_per_class, node.GetInts("vectors_per_class", {}));
  const int64_t classes = static_cast<int64_t>(m.labels.size());
  if (classes < 2 || classes >= 65536)
    return AttrError(node, "classlabels_ints", "must list 2..65535 class labels, got " + std::to_string(classes));
  if (m.rho.empty()) return AttrError(node, "rho", "must hold at least one value");
  if (m.prob_a.size() != m.prob_b.size()) return AttrError(node, "prob_a", "and 'prob_b' differ in length");
  for (int64_t count : m.vectors_per_class) {
    if (count < 0 || count > kMaxTensorBytes) return AttrError(node, "vectors_per_class", "has a negative or huge count");
    m.first_vector.push_back(m.vectors);
    m.vectors += count;
  }
  m.svc = m.vectors > 0;
  const int64_t pairs = classes * (classes - 1) / 2;
  if (m.svc) {
    if (static_cast<int64_t>(m.vectors_per_class.size()) != classes)
      return AttrError(node, "vectors_per_class", "has " + std::to_string(m.vectors_per_class.size()) + " entries for " +
                       std::to_string(classes) + " classes");
    if (static_cast<int64_t>(m.support_vectors.size()) != m.vectors * width)
      return AttrError(node, "support_vectors", "has " + std::to_string(m.support_vectors.size()) + " values, expected " +
                       std::to_string(m.vectors) + " vectors x input width " + std::to_string(width));
    if (static_cast<int64_t>(m.coefficients.size()) < (classes - 1) * m.vectors)
      return AttrError(node, "coefficients", "has " + std::to_string(m.coefficients.size()) + " values, expected " +
                       std::to_string((classes - 1) * m.vectors));
    if (static_cast<int64_t>(m.rho.size()) < pairs)
      return AttrError(node, "rho", "has " + std::to_string(m.rho.size()) + " values, expected " + std::to_string(pairs));
    if (!m.prob_a.empty() && static_cast<int64_t>(m.prob_a.size()) < pairs)
      return AttrError(node, "prob_a", "has " + std::to_string(m.prob_a.size()) + " values, expected " + std::to_string(pairs));
  } else {
    if (static_cast<int64_t>(m.coefficients.size()) != classes * width)
      return AttrError(node, "coefficients", "has " + std::to_string(m.coefficients.size()) + " values, expected classes (" +
                       std::to_string(classes) + ") x input width (" + std::to_string(width) + ")");
    m.kernel.type = SvmKernel::kLinear;
  }
  return m;
}

// Columns of the scores output: probabilities or linear scores per class,
// else one-vs-one decision values (2 columns for two classes).
int64_t SvmScoreColumns(int64_t classes, bool svc, bool probabilities) {
  if (!svc || probabilities) return classes;
  return classes > 2 ? classes * (classes - 1) / 2 : 2;
}

Status InferSvmClassifier(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  Result<ClassLabels> labels = ReadClassLabels(ctx.node, "classlabels_ints", "classlabels_strings");
  if (!labels.ok()) return Status::Ok();  // the kernel reports it
  Dim n = OrUnknown(ml::RowsDim(*x));
  ctx.output_types[0] = TypeInfo::Tensor(labels->use_strings ? DataType::kString : DataType::kInt64, Shape{n});
  if (ctx.num_outputs() > 1) {
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> per_class, ctx.node.GetInts("vectors_per_class", {}));
    bool svc = std::any_of(per_class.begin(), per_class.end(), [](int64_t v) { return v > 0; });
    bool probabilities = ctx.node.HasAttr("prob_a");
    int64_t classes = static_cast<int64_t>(labels->size());
    ctx.output_types[1] = TypeInfo::Tensor(DataType::kFloat, Shape{n, Dim::Known(SvmScoreColumns(classes, svc, probabilities))});
  }
  return Status::Ok();
}

Status RunSvmClassifier(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(ml::RequireNumericInput(ctx, 0, *x));
  NEE_ASSIGN_OR_RETURN(Rows rows, FeatureRows(ctx, 0, *x));
  NEE_ASSIGN_OR_RETURN(SvmClassifierModel m, ReadSvmClassifier(node, rows.width));
  NEE_ASSIGN_OR_RETURN(PostTransform transform, ml::ParsePostTransform(node));
  const int64_t classes = static_cast<int64_t>(m.labels.size());
  const int64_t pairs = classes * (classes - 1) / 2;
  const bool probabilities = m.svc && !m.prob_a.empty();
  const int64_t columns = SvmScoreColumns(classes, m.svc, !m.prob_a.empty());
  const bool all_positive = std::all_of(m.coefficients.begin(), m.coefficients.end(), [](float w) { return w >= 0; });

  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, m.labels.use_strings ? DataType::kString : DataType::kInt64, {rows.count}));
  Tensor z;
  if (ctx.num_outputs() > 1 && ctx.wants_output(1)) {
    NEE_ASSIGN_OR_RETURN(z, ctx.AllocateOutput(1, DataType::kFloat, {rows.count, columns}));
  }
  std::vector<double> row(static_cast<size_t>(rows.width)), kernels(static_cast<size_t>(m.vectors));
  std::vector<double> scores(static_cast<size_t>(std::max(pairs, classes) + 1)), pairwise(static_cast<size_t>(classes * classes));
  std::vector<int64_t> votes(static_cast<size_t>(classes));
  for (int64_t r = 0; r < rows.count; ++r) {
    for (int64_t c = 0; c < rows.width; ++c) row[c] = ReadAsDouble(*x, r * rows.width + c);
    int64_t best = 0;
    double best_score = 0;
    int64_t n_scores = classes;
    if (!m.svc) {
      for (int64_t c = 0; c < classes; ++c)
        scores[c] = m.rho[0] + SvmKernelValue(m.kernel, row.data(), m.coefficients.data() + c * rows.width, rows.width);
      best = std::max_element(scores.begin(), scores.begin() + classes) - scores.begin();
      best_score = scores[best];
    } else {
      for (int64_t v = 0; v < m.vectors; ++v)
        kernels[v] = SvmKernelValue(m.kernel, row.data(), m.support_vectors.data() + v * rows.width, rows.width);
      std::fill(votes.begin(), votes.end(), 0);
      int64_t pair = 0;
      for (int64_t i = 0; i < classes - 1; ++i) {
        for (int64_t j = i + 1; j < classes; ++j, ++pair) {
          double sum = m.rho[pair];
          for (int64_t v = 0; v < m.vectors_per_class[i]; ++v)
            sum += m.coefficients[(j - 1) * m.vectors + m.first_vector[i] + v] * kernels[m.first_vector[i] + v];
          for (int64_t v = 0; v < m.vectors_per_class[j]; ++v)
            sum += m.coefficients[i * m.vectors + m.first_vector[j] + v] * kernels[m.first_vector[j] + v];
          scores[pair] = sum;
          ++votes[sum > 0 ? i : j];
        }
      }
      best = std::max_element(votes.begin(), votes.end()) - votes.begin();
      n_scores = pairs;
      if (probabilities) {
        pair = 0;
        for (int64_t i = 0; i < classes - 1; ++i) {
          for (int64_t j = i + 1; j < classes; ++j, ++pair) {
            double p = 1 - ml::Logistic(scores[pair] * m.prob_a[pair] + m.prob_b[pair]);
            p = std::min(std::max(p, 1e-7), 1 - 1e-7);
            pairwise[i * classes + j] = p;
            pairwise[j * classes + i] = 1 - p;
          }
        }
        // Two classes are coupled too: scikit-learn's bundled libsvm, ONNX Runtime and
        // onnx.reference all run the iterative coupling, whose early stop (eps 0.005 / k)
        // leaves the result up to ~3e-3 away from the plain pairwise probability.
        CoupleProbabilities(classes, pairwise, scores.data());
        n_scores = classes;
      }
    }
    // Two classes without one-vs-one votes: the winning score decides.
    int64_t label_index = best;
    if (classes == 2 && !m.svc && !probabilities) {
      if ((all_positive && best_score >= 0.5) || (!all_positive && best_score > 0)) label_index = 1;
    }
    if (m.labels.use_strings) y.data<std::string>()[r] = m.labels.strings[label_index];
    else y.data<int64_t>()[r] = m.labels.ints[label_index];
    if (!z.defined()) continue;
    float* out = z.data<float>() + r * columns;
    if (m.svc && !probabilities && classes == 2) {
      // One decision value s: written as [-s, s] (ONNX Runtime's layout).
      double s = scores[0];
      if (transform == PostTransform::kLogistic) {
        out[0] = static_cast<float>(1 - ml::Logistic(s));
        out[1] = static_cast<float>(ml::Logistic(s));
      } else {
        out[0] = static_cast<float>(-s);
        out[1] = static_cast<float>(s);
      }
      continue;
    }
    ml::ApplyPostTransform(transform, scores.data(), n_scores);
    for (int64_t c = 0; c < n_scores; ++c) out[c] = static_cast<float>(scores[c]);
  }
  return Status::Ok();
}

}  // namespace

void RegisterMlLinearOps(OpRegistry& registry) {
  const char* ml = "ai.onnx.ml";
  registry.RegisterVersions(ml, "LinearClassifier", {1}, InferLinearClassifier, RunLinearClassifier);
  registry.RegisterVersions(ml, "LinearRegressor", {1}, InferLinearRegressor, RunLinearRegressor);
  registry.RegisterVersions(ml, "SVMRegressor", {1}, InferSvmRegressor, RunSvmRegressor);
  registry.RegisterVersions(ml, "SVMClassifier", {1}, InferSvmClassifier, RunSvmClassifier);
}

}  // namespace nee
