// Static types of graph values: tensors with (possibly symbolic) shapes,
// sequences, maps, optionals and sparse tensors, mirroring ONNX TypeProto.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/data_type.h"

namespace nee {

// One dimension: a known size, a named symbol ("batch"), or unknown.
struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string symbol;  // non-empty for a named symbolic dim
  // The ONNX dim denotation (e.g. DATA_BATCH), kept for ONNX Runtime's
  // free-dimension overrides by denotation; not part of a dim's identity.
  std::string denotation;

  static Dim Known(int64_t v) { return Dim{v, {}, {}}; }
  static Dim Symbol(std::string s) { return Dim{-1, std::move(s), {}}; }
  static Dim Unknown() { return Dim{}; }
  bool known() const { return value >= 0; }
  bool operator==(const Dim& o) const { return value == o.value && symbol == o.symbol; }
  std::string ToString() const;  // "3", "batch" or "?"
};

using Shape = std::vector<Dim>;
std::string ShapeToString(const Shape& shape);  // "[batch,3,?]"
Shape ShapeFromDims(const std::vector<int64_t>& dims);
// All dims known: fills `dims` and returns true.
bool ShapeIsStatic(const Shape& shape, std::vector<int64_t>* dims = nullptr);

struct TypeInfo {
  enum class Kind { kUnknown, kTensor, kSparseTensor, kSequence, kMap, kOptional };
  Kind kind = Kind::kUnknown;
  // Tensor / sparse tensor element type; a map's key type.
  DataType elem_type = DataType::kUndefined;
  // Tensor shape; nullopt when even the rank is unknown.
  std::optional<Shape> shape;
  // Sequence element, map value, optional contents.
  std::shared_ptr<TypeInfo> inner;
  std::string denotation;

  static TypeInfo Tensor(DataType t, std::optional<Shape> s = std::nullopt) {
    TypeInfo info;
    info.kind = Kind::kTensor;
    info.elem_type = t;
    info.shape = std::move(s);
    return info;
  }
  static TypeInfo Sequence(TypeInfo element);
  static TypeInfo Optional(TypeInfo contents);
  static TypeInfo Map(DataType key, TypeInfo value);

  bool is_tensor() const { return kind == Kind::kTensor; }
  // ONNX Runtime's spelling: "tensor(float)", "seq(tensor(int64))",
  // "map(int64,tensor(float))", "optional(tensor(float))".
  std::string ToString() const;
  bool SameKindAndElemType(const TypeInfo& other) const;
};

}  // namespace nee
