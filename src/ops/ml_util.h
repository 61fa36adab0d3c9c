// What the ai.onnx.ml op families share: attribute errors, post transforms,
// feature rows, class labels. Defined in ml_util.cc.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ops/op_schema.h"

namespace nee::ml {

enum class PostTransform { kNone, kSoftmax, kLogistic, kSoftmaxZero, kProbit };

// InvalidModel naming the node and attribute.
Status AttrError(const Node& node, const std::string& attr, const std::string& message);
Result<PostTransform> ParsePostTransform(const Node& node);
// Applies the transform to one row of n scores, in place.
void ApplyPostTransform(PostTransform transform, double* scores, int64_t n);
double Logistic(double v);
double Probit(double p);

// A tensor viewed as rows of features: rank 1 is one row, rank 2 is [N, C].
struct Rows {
  int64_t count = 0;
  int64_t width = 0;
};
Result<Rows> FeatureRows(const KernelContext& ctx, size_t index, const Tensor& x);
// The same on a static type: the row count / width as a Dim, nullopt when unknown.
std::optional<Dim> RowsDim(const TypeInfo& t);
std::optional<Dim> WidthDim(const TypeInfo& t);
Dim OrUnknown(const std::optional<Dim>& d);

bool IsRealNumeric(DataType t);
Status RequireNumericInput(const KernelContext& ctx, size_t index, const Tensor& x);

// Upper bound on an output width taken from an attribute (max_map,
// inputdimensions): far above any real model, low enough that a hostile value
// cannot request terabytes.
constexpr int64_t kMaxColumns = int64_t{1} << 24;

// Copies element `from` of `src` into element `to` of `dst` (same dtype).
void CopyElement(const Tensor& src, int64_t from, Tensor& dst, int64_t to);

// A classifier's labels: int64 or string, never both.
struct ClassLabels {
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  bool use_strings = false;
  size_t size() const { return use_strings ? strings.size() : ints.size(); }
};
Result<ClassLabels> ReadClassLabels(const Node& node, const char* ints_name, const char* strings_name);

}  // namespace nee::ml
