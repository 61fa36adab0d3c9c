// Operator family: MlPreprocess — the ai.onnx.ml feature preprocessing and
// conversion ops: Scaler, Normalizer, Binarizer, Imputer, OneHotEncoder,
// LabelEncoder, CategoryMapper, ArrayFeatureExtractor, FeatureVectorizer, the
// map converters DictVectorizer and CastMap, and ZipMap, which turns class
// probabilities into a sequence of label->probability maps.
//
// Where the ONNX text is vague, behaviour follows ONNX Runtime, since that is
// what exporters (skl2onnx, onnxmltools) test their output against.
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

// ---- Scaler: Y = (X - offset) * scale, per feature (last axis) ---------------

Status InferFloatSameShape(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat, x->shape);
  return Status::Ok();
}

// A per-feature attribute holding one value for all features or one per feature.
Result<std::vector<float>> PerFeature(const Node& node, const char* name, int64_t width, float fill) {
  NEE_ASSIGN_OR_RETURN(std::vector<float> v, node.GetFloats(name, {}));
  if (v.empty()) return std::vector<float>(static_cast<size_t>(width), fill);
  if (v.size() == 1) return std::vector<float>(static_cast<size_t>(width), v[0]);
  if (static_cast<int64_t>(v.size()) != width)
    return AttrError(node, name, "has " + std::to_string(v.size()) + " values, expected 1 or " +
                     std::to_string(width) + " (the input's last dimension)");
  return v;
}

Status RunScaler(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(ml::RequireNumericInput(ctx, 0, *x));
  if (x->rank() == 0) return ctx.InputError(0, "must have at least one dimension");
  int64_t width = x->dim(x->rank() - 1);
  NEE_ASSIGN_OR_RETURN(std::vector<float> offset, PerFeature(ctx.node(), "offset", width, 0.f));
  NEE_ASSIGN_OR_RETURN(std::vector<float> scale, PerFeature(ctx.node(), "scale", width, 1.f));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kFloat, x->dims()));
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    int64_t c = i % width;
    y.data<float>()[i] = static_cast<float>((ReadAsDouble(*x, i) - offset[c]) * scale[c]);
  }
  return Status::Ok();
}

// ---- Normalizer: per row, divide by the max, L1 or L2 norm -------------------

Status RunNormalizer(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(ml::RequireNumericInput(ctx, 0, *x));
  NEE_ASSIGN_OR_RETURN(Rows rows, FeatureRows(ctx, 0, *x));
  NEE_ASSIGN_OR_RETURN(std::string norm, ctx.node().GetString("norm", "MAX"));
  if (norm != "MAX" && norm != "L1" && norm != "L2")
    return AttrError(ctx.node(), "norm", "has unknown value '" + norm + "' (expected MAX, L1 or L2)");
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kFloat, x->dims()));
  std::vector<double> row(static_cast<size_t>(rows.width));
  for (int64_t r = 0; r < rows.count; ++r) {
    for (int64_t c = 0; c < rows.width; ++c) row[c] = ReadAsDouble(*x, r * rows.width + c);
    double divisor = 0;
    if (norm == "MAX") {
      // As ONNX Runtime: divide by the row's maximum (not its maximum magnitude).
      divisor = rows.width ? *std::max_element(row.begin(), row.end()) : 0;
    } else if (norm == "L1") {
      for (double v : row) divisor += std::fabs(v);
    } else {
      for (double v : row) divisor += v * v;
      divisor = std::sqrt(divisor);
    }
    for (int64_t c = 0; c < rows.width; ++c)
      y.data<float>()[r * rows.width + c] = static_cast<float>(divisor == 0 ? row[c] : row[c] / divisor);
  }
  return Status::Ok();
}

// ---- Binarizer: 1 where X > threshold, else 0, in X's type -------------------

Status RunBinarizer(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(ml::RequireNumericInput(ctx, 0, *x));
  NEE_ASSIGN_OR_RETURN(float threshold, ctx.node().GetFloat("threshold", 0.f));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
  for (int64_t i = 0; i < x->num_elements(); ++i)
    WriteFromDouble(y, i, ReadAsDouble(*x, i) > threshold ? 1.0 : 0.0);
  return Status::Ok();
}

// ---- Imputer: replaces a marker value (or NaN) by a per-feature value --------

Status RunImputer(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(ml::RequireNumericInput(ctx, 0, *x));
  if (x->rank() == 0) return ctx.InputError(0, "must have at least one dimension");
  int64_t width = x->dim(x->rank() - 1);
  NEE_ASSIGN_OR_RETURN(std::vector<float> floats, node.GetFloats("imputed_value_floats", {}));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> ints, node.GetInts("imputed_value_int64s", {}));
  NEE_ASSIGN_OR_RETURN(float replaced_float, node.GetFloat("replaced_value_float", 0.f));
  NEE_ASSIGN_OR_RETURN(int64_t replaced_int, node.GetInt("replaced_value_int64", 0));
  const bool use_floats = !floats.empty();
  if (use_floats == !ints.empty())
    return AttrError(node, "imputed_value_floats", "or 'imputed_value_int64s' must be set (exactly one)");
  std::vector<double> imputed;
  for (float f : floats) imputed.push_back(f);
  for (int64_t v : ints) imputed.push_back(static_cast<double>(v));
  if (imputed.size() != 1 && static_cast<int64_t>(imputed.size()) != width)
    return AttrError(node, use_floats ? "imputed_value_floats" : "imputed_value_int64s",
                     "has " + std::to_string(imputed.size()) + " values, expected 1 or " + std::to_string(width));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
  const bool integer_input = !IsFloatingPoint(x->dtype());
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    if (integer_input && x->dtype() == DataType::kInt64) {
      // Exact for large int64 values: compare and copy without going through double.
      int64_t v = x->data<int64_t>()[i];
      y.data<int64_t>()[i] = (!use_floats && v == replaced_int) ? ints[imputed.size() == 1 ? 0 : i % width] : v;
      continue;
    }
    double v = ReadAsDouble(*x, i);
    bool replace = use_floats ? (std::isnan(replaced_float) ? std::isnan(v) : v == replaced_float)
                              : v == static_cast<double>(replaced_int);
    WriteFromDouble(y, i, replace ? imputed[imputed.size() == 1 ? 0 : i % width] : v);
  }
  return Status::Ok();
}

// ---- OneHotEncoder: X.shape + [categories], float ---------------------------

Status InferOneHotEncoder(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> ints, ctx.node.GetInts("cats_int64s", {}));
  NEE_ASSIGN_OR_RETURN(std::vector<std::string> strings, ctx.node.GetStrings("cats_strings", {}));
  std::optional<Shape> shape;
  if (x->shape) {
    shape = *x->shape;
    shape->push_back(Dim::Known(static_cast<int64_t>(ints.empty() ? strings.size() : ints.size())));
  }
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat, shape);
  return Status::Ok();
}

Status RunOneHotEncoder(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> ints, node.GetInts("cats_int64s", {}));
  NEE_ASSIGN_OR_RETURN(std::vector<std::string> strings, node.GetStrings("cats_strings", {}));
  NEE_ASSIGN_OR_RETURN(int64_t zeros, node.GetInt("zeros", 1));
  if (ints.empty() == strings.empty())
    return AttrError(node, "cats_int64s", "or 'cats_strings' must be set (exactly one)");
  const bool string_input = x->dtype() == DataType::kString;
  if (string_input != !strings.empty())
    return ctx.InputError(0, std::string("has type ") + DataTypeName(x->dtype()) + " but the categories are " +
                             (strings.empty() ? "int64" : "strings"));
  if (!string_input) NEE_RETURN_IF_ERROR(ml::RequireNumericInput(ctx, 0, *x));
  std::map<std::string, int64_t> string_index;
  std::map<int64_t, int64_t> int_index;
  for (size_t i = strings.size(); i-- > 0;) string_index[strings[i]] = static_cast<int64_t>(i);
  for (size_t i = ints.size(); i-- > 0;) int_index[ints[i]] = static_cast<int64_t>(i);
  const int64_t depth = static_cast<int64_t>(string_input ? strings.size() : ints.size());
  std::vector<int64_t> dims = x->dims();
  dims.push_back(depth);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kFloat, dims));
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    int64_t category = -1;
    if (string_input) {
      auto it = string_index.find(x->data<std::string>()[i]);
      if (it != string_index.end()) category = it->second;
    } else {
      double v = ReadAsDouble(*x, i);
      int64_t key = x->dtype() == DataType::kInt64 ? x->data<int64_t>()[i]
                    : std::isfinite(v) && std::fabs(v) < 9.2e18 ? static_cast<int64_t>(v) : INT64_MIN;
      auto it = int_index.find(key);
      if (it != int_index.end()) category = it->second;
    }
    if (category >= 0) y.data<float>()[i * depth + category] = 1.f;
    else if (zeros == 0) return ctx.InputError(0, "element " + std::to_string(i) + " is not a known category (zeros=0)");
  }
  return Status::Ok();
}

// ---- ArrayFeatureExtractor: X[..., indices] ---------------------------------

std::vector<int64_t> ExtractorDims(const std::vector<int64_t>& x_dims, int64_t count) {
  if (x_dims.size() <= 1) return {1, count};
  std::vector<int64_t> dims = x_dims;
  dims.back() = count;
  return dims;
}

Status InferArrayFeatureExtractor(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* idx, InputTensorType(ctx, 1));
  std::optional<Shape> shape;
  if (x->shape && idx->shape) {
    Dim count = Dim::Known(1);
    for (const Dim& d : *idx->shape) count = (count.known() && d.known()) ? Dim::Known(count.value * d.value) : Dim::Unknown();
    if (x->shape->size() <= 1) {
      shape = Shape{Dim::Known(1), count};
    } else {
      shape = *x->shape;
      shape->back() = count;
    }
  }
  ctx.output_types[0] = TypeInfo::Tensor(x->elem_type, shape);
  return Status::Ok();
}

Status RunArrayFeatureExtractor(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* indices_tensor, ctx.InputTensor(1));
  if (x->rank() == 0) return ctx.InputError(0, "must have at least one dimension");
  if (indices_tensor->dtype() != DataType::kInt64)
    return ctx.InputError(1, std::string("must be int64, got ") + DataTypeName(indices_tensor->dtype()));
  if (x->dtype() == DataType::kUndefined || IsSubByte(x->dtype()))
    return NotImplemented(ctx.node().Describe() + ": unsupported element type " + DataTypeName(x->dtype()));
  const int64_t width = x->dim(x->rank() - 1);
  const int64_t count = indices_tensor->num_elements();
  const int64_t* indices = indices_tensor->data<int64_t>();
  for (int64_t k = 0; k < count; ++k)
    if (indices[k] < 0 || indices[k] >= width)
      return ctx.InputError(1, "index " + std::to_string(indices[k]) + " is out of range for the last dimension " +
                               std::to_string(width));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x->dtype(), ExtractorDims(x->dims(), count)));
  const int64_t outer = width == 0 ? 0 : x->num_elements() / width;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < count; ++k) CopyElement(*x, o * width + indices[k], y, o * count + k);
  return Status::Ok();
}

// ---- FeatureVectorizer: concatenates inputs (each cut or zero-padded) --------

Status InferFeatureVectorizer(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.node.GetInts("inputdimensions", {}));
  int64_t total = 0;
  for (int64_t d : dims) total += std::max<int64_t>(d, 0);
  Dim n = Dim::Unknown();
  if (ctx.has_input(0) && ctx.input_type(0).is_tensor()) n = OrUnknown(ml::RowsDim(ctx.input_type(0)));
  // A 1-D input is one column per row: its length is the row count.
  if (ctx.has_input(0) && ctx.input_type(0).shape && ctx.input_type(0).shape->size() == 1)
    n = (*ctx.input_type(0).shape)[0];
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat, Shape{n, Dim::Known(total)});
  return Status::Ok();
}

Status RunFeatureVectorizer(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> widths, node.GetInts("inputdimensions", {}));
  if (widths.size() != ctx.num_inputs())
    return AttrError(node, "inputdimensions", "has " + std::to_string(widths.size()) + " entries for " +
                     std::to_string(ctx.num_inputs()) + " inputs");
  int64_t total = 0;
  for (int64_t w : widths) {
    if (w < 0 || w > kMaxColumns) return AttrError(node, "inputdimensions", "has entry " + std::to_string(w) + " outside 0..2^24");
    total += w;
  }
  int64_t n = -1;
  std::vector<const Tensor*> inputs;
  std::vector<Rows> shapes;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(i));
    NEE_RETURN_IF_ERROR(ml::RequireNumericInput(ctx, i, *t));
    Rows r;
    if (t->rank() == 1) r = Rows{t->dim(0), 1};  // a column
    else if (t->rank() == 2) r = Rows{t->dim(0), t->dim(1)};
    else return ctx.InputError(i, "must be 1-D or 2-D, got " + t->Describe());
    if (n >= 0 && r.count != n)
      return ctx.InputError(i, "has " + std::to_string(r.count) + " rows, input 0 has " + std::to_string(n));
    n = r.count;
    inputs.push_back(t);
    shapes.push_back(r);
  }
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kFloat, {std::max<int64_t>(n, 0), total}));
  for (int64_t r = 0; r < n; ++r) {
    int64_t col = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      int64_t copy = std::min(widths[i], shapes[i].width);
      for (int64_t c = 0; c < copy; ++c)
        y.data<float>()[r * total + col + c] = static_cast<float>(ReadAsDouble(*inputs[i], r * shapes[i].width + c));
      col += widths[i];  // the rest stays zero
    }
  }
  return Status::Ok();
}

// ---- ZipMap: [N, C] scores -> sequence of N maps label -> score --------------

Status InferZipMap(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(ClassLabels labels, ReadClassLabels(ctx.node, "classlabels_int64s", "classlabels_strings"));
  DataType key = labels.use_strings ? DataType::kString : DataType::kInt64;
  ctx.output_types[0] = TypeInfo::Sequence(TypeInfo::Map(key, TypeInfo::Tensor(DataType::kFloat)));
  return Status::Ok();
}

Status RunZipMap(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->dtype() != DataType::kFloat) return ctx.InputError(0, std::string("must be float, got ") + DataTypeName(x->dtype()));
  NEE_ASSIGN_OR_RETURN(Rows rows, FeatureRows(ctx, 0, *x));
  NEE_ASSIGN_OR_RETURN(ClassLabels labels, ReadClassLabels(ctx.node(), "classlabels_int64s", "classlabels_strings"));
  if (static_cast<int64_t>(labels.size()) != rows.width)
    return ctx.InputError(0, "has " + std::to_string(rows.width) + " columns but there are " +
                             std::to_string(labels.size()) + " class labels");
  // One keys tensor, shared by every map of the output.
  Tensor keys;
  if (labels.use_strings) keys = Tensor::FromVector<std::string>(labels.strings, {rows.width});
  else keys = Tensor::FromVector<int64_t>(labels.ints, {rows.width});
  std::vector<Value> maps;
  maps.reserve(static_cast<size_t>(rows.count));
  for (int64_t r = 0; r < rows.count; ++r) {
    NEE_ASSIGN_OR_RETURN(Tensor values, Tensor::Allocate(DataType::kFloat, {rows.width}));
    std::copy_n(x->data<float>() + r * rows.width, rows.width, values.data<float>());
    maps.push_back(Value::Map(keys, std::move(values)));
  }
  TypeInfo element = TypeInfo::Map(keys.dtype(), TypeInfo::Tensor(DataType::kFloat));
  return ctx.SetOutput(0, Value::Sequence(std::move(maps), std::move(element)));
}

// ---- LabelEncoder -----------------------------------------------------------
// Maps each element through a key -> value table; unknown keys get the default.
// v1: classes_strings (string <-> int64 by position); v2: keys_*/values_*
// lists; v4: also keys_tensor/values_tensor/default_tensor of more types.

enum class KeyKind { kString, kInteger, kReal };

KeyKind KindOf(DataType t) {
  if (t == DataType::kString) return KeyKind::kString;
  return IsFloatingPoint(t) ? KeyKind::kReal : KeyKind::kInteger;
}

struct LabelTable {
  Tensor keys;           // 1-D
  Tensor values;         // 1-D, the output type
  Tensor default_value;  // one element of the output type
};

// Reads a key or value list from `<prefix>_strings/_int64s/_floats` or
// `<prefix>_tensor`. Returns an undefined tensor when none is set.
Result<Tensor> ReadLabelList(const Node& node, const std::string& prefix, const std::string& tensor_name) {
  const Attribute* s = node.FindAttr(prefix + "_strings");
  const Attribute* i = node.FindAttr(prefix + "_int64s");
  const Attribute* f = node.FindAttr(prefix + "_floats");
  const Attribute* t = node.FindAttr(tensor_name);
  int set = (s != nullptr) + (i != nullptr) + (f != nullptr) + (t != nullptr);
  if (set > 1) return AttrError(node, prefix + "_*", "is given in more than one form");
  if (s) {
    NEE_ASSIGN_OR_RETURN(auto v, node.GetStrings(prefix + "_strings"));
    return Tensor::FromVector<std::string>(v, {static_cast<int64_t>(v.size())});
  }
  if (i) {
    NEE_ASSIGN_OR_RETURN(auto v, node.GetInts(prefix + "_int64s"));
    return Tensor::FromVector<int64_t>(v, {static_cast<int64_t>(v.size())});
  }
  if (f) {
    NEE_ASSIGN_OR_RETURN(auto v, node.GetFloats(prefix + "_floats"));
    return Tensor::FromVector<float>(v, {static_cast<int64_t>(v.size())});
  }
  if (t) {
    NEE_ASSIGN_OR_RETURN(Tensor v, node.GetTensor(tensor_name));
    return v.Reshaped({v.num_elements()});
  }
  return Tensor();
}

Result<Tensor> DefaultFor(const Node& node, DataType type) {
  if (node.HasAttr("default_tensor")) {
    NEE_ASSIGN_OR_RETURN(Tensor d, node.GetTensor("default_tensor"));
    if (d.dtype() != type || d.num_elements() != 1)
      return AttrError(node, "default_tensor", "must hold one " + std::string(DataTypeName(type)) +
                       " value, got " + d.Describe());
    return d;
  }
  NEE_ASSIGN_OR_RETURN(Tensor d, Tensor::Allocate(type, {1}));
  switch (type) {
    case DataType::kString: {
      NEE_ASSIGN_OR_RETURN(std::string s, node.GetString("default_string", "_Unused"));
      d.data<std::string>()[0] = s;
      break;
    }
    case DataType::kInt64: {
      NEE_ASSIGN_OR_RETURN(int64_t v, node.GetInt("default_int64", -1));
      d.data<int64_t>()[0] = v;
      break;
    }
    case DataType::kFloat: {
      NEE_ASSIGN_OR_RETURN(float v, node.GetFloat("default_float", -0.f));
      d.data<float>()[0] = v;
      break;
    }
    default:
      // Other types only come through values_tensor; ONNX's default is -1 / -0.0.
      WriteFromDouble(d, 0, IsFloatingPoint(type) ? -0.0 : -1.0);
  }
  return d;
}

Result<LabelTable> ReadLabelTable(const Node& node, int64_t opset, DataType input_type) {
  LabelTable table;
  if (opset < 2) {
    NEE_ASSIGN_OR_RETURN(std::vector<std::string> classes, node.GetStrings("classes_strings", {}));
    std::vector<int64_t> positions(classes.size());
    for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int64_t>(i);
    Tensor strings = Tensor::FromVector<std::string>(classes, {static_cast<int64_t>(classes.size())});
    Tensor ints = Tensor::FromVector<int64_t>(positions, {static_cast<int64_t>(positions.size())});
    bool from_strings = input_type == DataType::kString;
    table.keys = from_strings ? strings : ints;
    table.values = from_strings ? ints : strings;
    NEE_ASSIGN_OR_RETURN(table.default_value, DefaultFor(node, table.values.dtype()));
    return table;
  }
  NEE_ASSIGN_OR_RETURN(table.keys, ReadLabelList(node, "keys", "keys_tensor"));
  NEE_ASSIGN_OR_RETURN(table.values, ReadLabelList(node, "values", "values_tensor"));
  if (!table.keys.defined()) return AttrError(node, "keys_*", "is required");
  if (!table.values.defined()) return AttrError(node, "values_*", "is required");
  if (table.keys.num_elements() != table.values.num_elements())
    return AttrError(node, "keys_*", "has " + std::to_string(table.keys.num_elements()) + " entries but values_* has " +
                     std::to_string(table.values.num_elements()));
  NEE_ASSIGN_OR_RETURN(table.default_value, DefaultFor(node, table.values.dtype()));
  return table;
}

// The output element type from the attributes alone (for the shape rule).
DataType LabelEncoderOutputType(const Node& node, int64_t opset, const TypeInfo& input) {
  if (opset < 2) return input.elem_type == DataType::kString ? DataType::kInt64 : DataType::kString;
  if (node.HasAttr("values_strings")) return DataType::kString;
  if (node.HasAttr("values_int64s")) return DataType::kInt64;
  if (node.HasAttr("values_floats")) return DataType::kFloat;
  if (const Attribute* t = node.FindAttr("values_tensor"); t && t->type == AttrType::kTensor) return t->t.dtype();
  return DataType::kUndefined;
}

Status InferLabelEncoder(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  DataType out = LabelEncoderOutputType(ctx.node, ctx.opset, *x);
  if (out == DataType::kUndefined) return Status::Ok();  // the kernel reports what is missing
  ctx.output_types[0] = TypeInfo::Tensor(out, x->shape);
  return Status::Ok();
}

Status RunLabelEncoder(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(LabelTable table, ReadLabelTable(ctx.node(), ctx.opset(), x->dtype()));
  const KeyKind kind = KindOf(table.keys.dtype());
  if (KindOf(x->dtype()) != kind || (kind != KeyKind::kString && !ml::IsRealNumeric(x->dtype())))
    return ctx.InputError(0, std::string("has type ") + DataTypeName(x->dtype()) + " but the keys are " +
                             DataTypeName(table.keys.dtype()));
  // Key -> first position. Real keys compare by value with NaN matching NaN.
  std::map<std::string, int64_t> by_string;
  std::map<int64_t, int64_t> by_int;
  std::map<double, int64_t> by_real;
  int64_t nan_position = -1;
  for (int64_t i = table.keys.num_elements(); i-- > 0;) {
    if (kind == KeyKind::kString) {
      by_string[table.keys.data<std::string>()[i]] = i;
    } else if (kind == KeyKind::kInteger) {
      by_int[table.keys.dtype() == DataType::kInt64 ? table.keys.data<int64_t>()[i]
                                                    : static_cast<int64_t>(ReadAsDouble(table.keys, i))] = i;
    } else {
      double k = ReadAsDouble(table.keys, i);
      if (std::isnan(k)) nan_position = i;
      else by_real[k] = i;
    }
  }
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, table.values.dtype(), x->dims()));
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    int64_t position = -1;
    if (kind == KeyKind::kString) {
      auto it = by_string.find(x->data<std::string>()[i]);
      if (it != by_string.end()) position = it->second;
    } else if (kind == KeyKind::kInteger) {
      int64_t k = x->dtype() == DataType::kInt64 ? x->data<int64_t>()[i] : static_cast<int64_t>(ReadAsDouble(*x, i));
      auto it = by_int.find(k);
      if (it != by_int.end()) position = it->second;
    } else {
      double k = ReadAsDouble(*x, i);
      if (std::isnan(k)) {
        // NaN keys match NaN inputs from version 4 on (as in ONNX Runtime).
        position = ctx.opset() >= 4 ? nan_position : -1;
      } else {
        auto it = by_real.find(k);
        if (it != by_real.end()) position = it->second;
      }
    }
    if (position >= 0) CopyElement(table.values, position, y, i);
    else CopyElement(table.default_value, 0, y, i);
  }
  return Status::Ok();
}

// ---- CategoryMapper: string <-> int64 through two parallel lists -------------

Status InferCategoryMapper(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  if (x->elem_type == DataType::kUndefined) return Status::Ok();
  DataType out = x->elem_type == DataType::kString ? DataType::kInt64 : DataType::kString;
  ctx.output_types[0] = TypeInfo::Tensor(out, x->shape);
  return Status::Ok();
}

Status RunCategoryMapper(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> ints, node.GetInts("cats_int64s"));
  NEE_ASSIGN_OR_RETURN(std::vector<std::string> strings, node.GetStrings("cats_strings"));
  if (ints.size() != strings.size())
    return AttrError(node, "cats_int64s", "has " + std::to_string(ints.size()) + " entries but 'cats_strings' has " +
                     std::to_string(strings.size()));
  if (x->dtype() == DataType::kString) {
    NEE_ASSIGN_OR_RETURN(int64_t fallback, node.GetInt("default_int64", -1));
    std::map<std::string, int64_t> table;
    for (size_t i = strings.size(); i-- > 0;) table[strings[i]] = ints[i];
    NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kInt64, x->dims()));
    for (int64_t i = 0; i < x->num_elements(); ++i) {
      auto it = table.find(x->data<std::string>()[i]);
      y.data<int64_t>()[i] = it == table.end() ? fallback : it->second;
    }
    return Status::Ok();
  }
  if (x->dtype() != DataType::kInt64)
    return ctx.InputError(0, std::string("must be string or int64, got ") + DataTypeName(x->dtype()));
  NEE_ASSIGN_OR_RETURN(std::string fallback, node.GetString("default_string", "_Unused"));
  std::map<int64_t, std::string> table;
  for (size_t i = ints.size(); i-- > 0;) table[ints[i]] = strings[i];
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kString, x->dims()));
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    auto it = table.find(x->data<int64_t>()[i]);
    y.data<std::string>()[i] = it == table.end() ? fallback : it->second;
  }
  return Status::Ok();
}

// ---- DictVectorizer: one map -> [1, vocabulary] tensor of its value type ------

Status InferDictVectorizer(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(std::vector<std::string> strings, ctx.node.GetStrings("string_vocabulary", {}));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> ints, ctx.node.GetInts("int64_vocabulary", {}));
  Dim width = Dim::Known(static_cast<int64_t>(strings.empty() ? ints.size() : strings.size()));
  DataType value_type = DataType::kUndefined;
  if (ctx.has_input(0) && ctx.input_type(0).kind == TypeInfo::Kind::kMap && ctx.input_type(0).inner)
    value_type = ctx.input_type(0).inner->elem_type;
  if (value_type != DataType::kUndefined)
    ctx.output_types[0] = TypeInfo::Tensor(value_type, Shape{Dim::Known(1), width});
  return Status::Ok();
}

Status RunDictVectorizer(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Value* in = ctx.input(0);
  if (!in || !in->is_map()) return ctx.InputError(0, "must be a map");
  const Tensor& keys = in->map_keys();
  const Tensor& values = in->map_values();
  if (keys.num_elements() != values.num_elements())
    return ctx.InputError(0, "has " + std::to_string(keys.num_elements()) + " keys but " +
                             std::to_string(values.num_elements()) + " values");
  NEE_ASSIGN_OR_RETURN(std::vector<std::string> strings, node.GetStrings("string_vocabulary", {}));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> ints, node.GetInts("int64_vocabulary", {}));
  if (strings.empty() == ints.empty())
    return AttrError(node, "string_vocabulary", "or 'int64_vocabulary' must be set (exactly one)");
  const bool string_keys = keys.dtype() == DataType::kString;
  if (string_keys != !strings.empty() || (!string_keys && keys.dtype() != DataType::kInt64))
    return ctx.InputError(0, std::string("has ") + DataTypeName(keys.dtype()) + " keys but the vocabulary is " +
                             (strings.empty() ? "int64" : "strings"));
  if (values.dtype() == DataType::kUndefined || IsSubByte(values.dtype()))
    return ctx.InputError(0, "has unsupported value type");
  std::map<std::string, int64_t> by_string;
  std::map<int64_t, int64_t> by_int;
  for (size_t i = strings.size(); i-- > 0;) by_string[strings[i]] = static_cast<int64_t>(i);
  for (size_t i = ints.size(); i-- > 0;) by_int[ints[i]] = static_cast<int64_t>(i);
  const int64_t width = static_cast<int64_t>(string_keys ? strings.size() : ints.size());
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, values.dtype(), {1, width}));
  for (int64_t k = 0; k < keys.num_elements(); ++k) {
    int64_t column = -1;
    if (string_keys) {
      auto it = by_string.find(keys.data<std::string>()[k]);
      if (it != by_string.end()) column = it->second;
    } else {
      auto it = by_int.find(keys.data<int64_t>()[k]);
      if (it != by_int.end()) column = it->second;
    }
    if (column >= 0) CopyElement(values, k, y, column);  // keys outside the vocabulary are dropped
  }
  return Status::Ok();
}

// ---- CastMap: map(int64 -> string|float) -> [1, n] tensor ---------------------
// DENSE lists the values in key order; SPARSE places value k at column k of
// max_map columns. Number formatting and the sparse string padding ("0.f")
// follow ONNX Runtime.

Result<DataType> CastMapTarget(const Node& node) {
  NEE_ASSIGN_OR_RETURN(std::string cast_to, node.GetString("cast_to", "TO_FLOAT"));
  if (cast_to == "TO_FLOAT") return DataType::kFloat;
  if (cast_to == "TO_STRING") return DataType::kString;
  if (cast_to == "TO_INT64") return DataType::kInt64;
  return AttrError(node, "cast_to", "has unknown value '" + cast_to + "' (expected TO_FLOAT, TO_STRING or TO_INT64)");
}

Status InferCastMap(InferenceContext& ctx) {
  Result<DataType> target = CastMapTarget(ctx.node);
  if (!target.ok()) return Status::Ok();  // the kernel reports it
  NEE_ASSIGN_OR_RETURN(std::string form, ctx.node.GetString("map_form", "DENSE"));
  NEE_ASSIGN_OR_RETURN(int64_t max_map, ctx.node.GetInt("max_map", 1));
  Dim width = form == "SPARSE" && max_map >= 0 ? Dim::Known(max_map) : Dim::Unknown();
  ctx.output_types[0] = TypeInfo::Tensor(target.value(), Shape{Dim::Known(1), width});
  return Status::Ok();
}

Status RunCastMap(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Value* in = ctx.input(0);
  if (!in || !in->is_map()) return ctx.InputError(0, "must be a map");
  const Tensor& keys = in->map_keys();
  const Tensor& values = in->map_values();
  if (keys.dtype() != DataType::kInt64 || keys.num_elements() != values.num_elements() ||
      (values.dtype() != DataType::kFloat && values.dtype() != DataType::kString))
    return ctx.InputError(0, "must be a map from int64 to float or string, got " + in->Describe());
  NEE_ASSIGN_OR_RETURN(DataType target, CastMapTarget(node));
  NEE_ASSIGN_OR_RETURN(std::string form, node.GetString("map_form", "DENSE"));
  NEE_ASSIGN_OR_RETURN(int64_t max_map, node.GetInt("max_map", 1));
  if (form != "DENSE" && form != "SPARSE")
    return AttrError(node, "map_form", "has unknown value '" + form + "' (expected DENSE or SPARSE)");
  if (form == "SPARSE" && (max_map < 0 || max_map > kMaxColumns))
    return AttrError(node, "max_map", "must be in 0..2^24, got " + std::to_string(max_map));
  std::map<int64_t, int64_t> position_of_key;  // sorted by key; a repeated key keeps its last value
  for (int64_t k = 0; k < keys.num_elements(); ++k) position_of_key[keys.data<int64_t>()[k]] = k;

  // Converts value k of the map into element i of y.
  auto convert = [&](int64_t k, Tensor& y, int64_t i) -> Status {
    if (values.dtype() == DataType::kFloat) {
      float v = values.data<float>()[k];
      if (target == DataType::kFloat) y.data<float>()[i] = v;
      else if (target == DataType::kInt64) y.data<int64_t>()[i] = std::isfinite(v) && std::fabs(v) < 9.2e18f ? static_cast<int64_t>(v) : 0;
      else {
        char text[64];
        std::snprintf(text, sizeof(text), "%f", static_cast<double>(v));
        y.data<std::string>()[i] = text;
      }
      return Status::Ok();
    }
    const std::string& text = values.data<std::string>()[k];
    if (target == DataType::kString) {
      y.data<std::string>()[i] = text;
      return Status::Ok();
    }
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (text.empty() || end == text.c_str())
      return ctx.InputError(0, "value '" + text + "' is not a number");
    if (target == DataType::kFloat) y.data<float>()[i] = static_cast<float>(v);
    else y.data<int64_t>()[i] = std::isfinite(v) && std::fabs(v) < 9.2e18 ? static_cast<int64_t>(v) : 0;
    return Status::Ok();
  };

  if (form == "DENSE") {
    NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, target, {1, static_cast<int64_t>(position_of_key.size())}));
    int64_t i = 0;
    for (const auto& [key, k] : position_of_key) NEE_RETURN_IF_ERROR(convert(k, y, i++));
    return Status::Ok();
  }
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, target, {1, max_map}));
  if (target == DataType::kString)
    for (int64_t i = 0; i < max_map; ++i) y.data<std::string>()[i] = "0.f";
  for (const auto& [key, k] : position_of_key)
    if (key >= 0 && key < max_map) NEE_RETURN_IF_ERROR(convert(k, y, key));  // keys outside are dropped
  return Status::Ok();
}

}  // namespace

void RegisterMlPreprocessOps(OpRegistry& registry) {
  const char* ml = "ai.onnx.ml";
  registry.RegisterVersions(ml, "Scaler", {1}, InferFloatSameShape, RunScaler);
  registry.RegisterVersions(ml, "Normalizer", {1}, InferFloatSameShape, RunNormalizer);
  registry.RegisterVersions(ml, "Binarizer", {1}, InferSameAsInput0, RunBinarizer);
  registry.RegisterVersions(ml, "Imputer", {1}, InferSameAsInput0, RunImputer);
  registry.RegisterVersions(ml, "OneHotEncoder", {1}, InferOneHotEncoder, RunOneHotEncoder);
  registry.RegisterVersions(ml, "ArrayFeatureExtractor", {1}, InferArrayFeatureExtractor, RunArrayFeatureExtractor);
  registry.RegisterVersions(ml, "FeatureVectorizer", {1}, InferFeatureVectorizer, RunFeatureVectorizer);
  registry.RegisterVersions(ml, "ZipMap", {1}, InferZipMap, RunZipMap);
  registry.RegisterVersions(ml, "LabelEncoder", {1, 2, 4}, InferLabelEncoder, RunLabelEncoder);
  registry.RegisterVersions(ml, "CategoryMapper", {1}, InferCategoryMapper, RunCategoryMapper);
  registry.RegisterVersions(ml, "DictVectorizer", {1}, InferDictVectorizer, RunDictVectorizer);
  registry.RegisterVersions(ml, "CastMap", {1}, InferCastMap, RunCastMap);
}

}  // namespace nee
