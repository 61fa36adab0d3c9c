// Helpers shared by the ai.onnx.ml families (ml_linear.cc, ml_preprocess.cc,
// ml_tree.cc); declared in ml_util.h.
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
#include "ops/op_util.h"

namespace nee {
namespace ml {

Status AttrError(const Node& node, const std::string& attr, const std::string& message) {
  return InvalidModel(node.Describe() + ": attribute '" + attr + "' " + message);
}

Result<PostTransform> ParsePostTransform(const Node& node) {
  NEE_ASSIGN_OR_RETURN(std::string name, node.GetString("post_transform", "NONE"));
  if (name == "NONE") return PostTransform::kNone;
  if (name == "SOFTMAX") return PostTransform::kSoftmax;
  if (name == "LOGISTIC") return PostTransform::kLogistic;
  if (name == "SOFTMAX_ZERO") return PostTransform::kSoftmaxZero;
  if (name == "PROBIT") return PostTransform::kProbit;
  return AttrError(node, "post_transform", "has unknown value '" + name +
                   "' (expected NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO or PROBIT)");
}

double Logistic(double v) {
  // Written so that exp never overflows.
  double e = std::exp(-std::fabs(v));
  return v >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

// sqrt(2) * erfinv(2p - 1) with the closed-form erfinv approximation (a =
// 0.147) that ONNX Runtime and onnx.reference use, so results agree with them.
double Probit(double p) {
  double x = 2 * p - 1;
  double sign = x < 0 ? -1.0 : 1.0;
  double w = (1 - x) * (1 + x);
  if (w == 0) return sign * std::numeric_limits<double>::infinity();
  double ln = std::log(w);
  double a = 2 / (M_PI * 0.147) + 0.5 * ln;
  double b = ln / 0.147;
  return M_SQRT2 * sign * std::sqrt(-a + std::sqrt(a * a - b));
}

// Applies the transform to one row of scores in place.
void ApplyPostTransform(PostTransform transform, double* scores, int64_t n) {
  switch (transform) {
    case PostTransform::kNone: return;
    case PostTransform::kLogistic:
      for (int64_t i = 0; i < n; ++i) scores[i] = Logistic(scores[i]);
      return;
    case PostTransform::kProbit:
      for (int64_t i = 0; i < n; ++i) scores[i] = Probit(scores[i]);
      return;
    case PostTransform::kSoftmax: {
      if (n == 0) return;
      double max = *std::max_element(scores, scores + n);
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += (scores[i] = std::exp(scores[i] - max));
      for (int64_t i = 0; i < n; ++i) scores[i] /= sum;
      return;
    }
    case PostTransform::kSoftmaxZero: {
      // Softmax over the non-zero scores; exact zeros stay (near) zero.
      if (n == 0) return;
      double max = *std::max_element(scores, scores + n);
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (std::fabs(scores[i]) > 1e-7) {
          scores[i] = std::exp(scores[i] - max);
          sum += scores[i];
        } else {
          scores[i] *= std::exp(-max);
        }
      }
      for (int64_t i = 0; i < n; ++i) scores[i] = sum == 0 ? 0.5 : scores[i] / sum;
      return;
    }
  }
}

Result<Rows> FeatureRows(const KernelContext& ctx, size_t index, const Tensor& x) {
  if (x.rank() == 1) return Rows{1, x.dim(0)};
  if (x.rank() == 2) return Rows{x.dim(0), x.dim(1)};
  return ctx.InputError(index, "must be a 1-D or 2-D tensor of features, got " + x.Describe());
}

// The same on a static type: the row count as a Dim, or nullopt when unknown.
std::optional<Dim> RowsDim(const TypeInfo& t) {
  if (!t.shape) return std::nullopt;
  if (t.shape->size() == 1) return Dim::Known(1);
  if (t.shape->size() == 2) return (*t.shape)[0];
  return std::nullopt;
}
std::optional<Dim> WidthDim(const TypeInfo& t) {
  if (!t.shape || t.shape->empty() || t.shape->size() > 2) return std::nullopt;
  return t.shape->back();
}

bool IsRealNumeric(DataType t) {
  return t != DataType::kString && t != DataType::kBool && t != DataType::kUndefined &&
         t != DataType::kComplex64 && t != DataType::kComplex128;
}

Status RequireNumericInput(const KernelContext& ctx, size_t index, const Tensor& x) {
  if (!IsRealNumeric(x.dtype()))
    return NotImplemented(ctx.node().Describe() + ": input " + std::to_string(index) +
                          " has unsupported element type " + DataTypeName(x.dtype()));
  return Status::Ok();
}

Dim OrUnknown(const std::optional<Dim>& d) { return d ? *d : Dim::Unknown(); }

// Copies element `from` of `src` into element `to` of `dst` (same dtype).
void CopyElement(const Tensor& src, int64_t from, Tensor& dst, int64_t to) {
  if (src.dtype() == DataType::kString) {
    dst.data<std::string>()[to] = src.data<std::string>()[from];
    return;
  }
  size_t bytes = static_cast<size_t>(ElementBits(src.dtype()) / 8);
  std::memcpy(static_cast<char*>(dst.raw_data()) + to * bytes,
              static_cast<const char*>(src.raw_data()) + from * bytes, bytes);
}

Result<ClassLabels> ReadClassLabels(const Node& node, const char* ints_name, const char* strings_name) {
  ClassLabels labels;
  NEE_ASSIGN_OR_RETURN(labels.ints, node.GetInts(ints_name, {}));
  NEE_ASSIGN_OR_RETURN(labels.strings, node.GetStrings(strings_name, {}));
  if (!labels.ints.empty() && !labels.strings.empty())
    return AttrError(node, ints_name, std::string("and '") + strings_name + "' are both set; only one may be");
  labels.use_strings = !labels.strings.empty();
  return labels;
}

}  // namespace ml
}  // namespace nee
