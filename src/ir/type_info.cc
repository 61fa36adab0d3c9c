#include "ir/type_info.h"

namespace nee {

std::string Dim::ToString() const {
  if (known()) return std::to_string(value);
  return symbol.empty() ? "?" : symbol;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += shape[i].ToString();
  }
  return s + "]";
}

Shape ShapeFromDims(const std::vector<int64_t>& dims) {
  Shape s;
  s.reserve(dims.size());
  for (int64_t d : dims) s.push_back(Dim::Known(d));
  return s;
}

bool ShapeIsStatic(const Shape& shape, std::vector<int64_t>* dims) {
  if (dims) dims->clear();
  for (const Dim& d : shape) {
    if (!d.known()) return false;
    if (dims) dims->push_back(d.value);
  }
  return true;
}

TypeInfo TypeInfo::Sequence(TypeInfo element) {
  TypeInfo info;
  info.kind = Kind::kSequence;
  info.inner = std::make_shared<TypeInfo>(std::move(element));
  return info;
}

TypeInfo TypeInfo::Optional(TypeInfo contents) {
  TypeInfo info;
  info.kind = Kind::kOptional;
  info.inner = std::make_shared<TypeInfo>(std::move(contents));
  return info;
}

TypeInfo TypeInfo::Map(DataType key, TypeInfo value) {
  TypeInfo info;
  info.kind = Kind::kMap;
  info.elem_type = key;
  info.inner = std::make_shared<TypeInfo>(std::move(value));
  return info;
}

std::string TypeInfo::ToString() const {
  auto inner_str = [&] { return inner ? inner->ToString() : std::string("?"); };
  switch (kind) {
    case Kind::kTensor: return std::string("tensor(") + DataTypeName(elem_type) + ")";
    case Kind::kSparseTensor: return std::string("sparse_tensor(") + DataTypeName(elem_type) + ")";
    case Kind::kSequence: return "seq(" + inner_str() + ")";
    case Kind::kMap: return std::string("map(") + DataTypeName(elem_type) + "," + inner_str() + ")";
    case Kind::kOptional: return "optional(" + inner_str() + ")";
    case Kind::kUnknown: break;
  }
  return "unknown";
}

bool TypeInfo::SameKindAndElemType(const TypeInfo& other) const {
  if (kind != other.kind || elem_type != other.elem_type) return false;
  if (!inner || !other.inner) return !inner == !other.inner || kind == Kind::kUnknown;
  return inner->SameKindAndElemType(*other.inner);
}

}  // namespace nee
