#include "ir/value.h"

namespace nee {

Value Value::Sequence(std::vector<Value> elements, TypeInfo element_type) {
  Value v;
  v.kind_ = Kind::kSequence;
  v.elements_ = std::make_shared<const std::vector<Value>>(std::move(elements));
  v.element_type_ = std::move(element_type);
  return v;
}

Value Value::Map(Tensor keys, Tensor values) {
  Value v;
  v.kind_ = Kind::kMap;
  v.tensor_ = std::move(keys);
  v.map_values_ = std::move(values);
  return v;
}

Value Value::None(TypeInfo type) {
  Value v;
  v.kind_ = Kind::kNone;
  v.element_type_ = std::move(type);
  return v;
}

std::string Value::Describe() const {
  switch (kind_) {
    case Kind::kTensor: return tensor_.Describe();
    case Kind::kSequence: return "sequence of " + std::to_string(elements_->size()) + " values";
    case Kind::kMap: return "map(" + std::string(DataTypeName(tensor_.dtype())) + "," +
                            DataTypeName(map_values_.dtype()) + ") with " +
                            std::to_string(tensor_.num_elements()) + " entries";
    case Kind::kNone: return "empty optional";
    case Kind::kEmpty: break;
  }
  return "no value";
}

}  // namespace nee
