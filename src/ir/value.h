// A runtime value flowing between kernels: a tensor, a sequence of values,
// a map (keys tensor + values tensor, as ai.onnx.ml uses them), or an empty
// optional. An optional that holds something is represented by that thing.
#pragma once
#include <memory>
#include <vector>

#include "ir/tensor.h"
#include "ir/type_info.h"

namespace nee {

class Value {
 public:
  enum class Kind { kEmpty, kTensor, kSequence, kMap, kNone };

  Value() = default;
  Value(Tensor t) : kind_(Kind::kTensor), tensor_(std::move(t)) {}  // NOLINT
  static Value Sequence(std::vector<Value> elements, TypeInfo element_type);
  static Value Map(Tensor keys, Tensor values);
  // The empty optional; `type` is what it would have held.
  static Value None(TypeInfo type);

  Kind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  bool is_sequence() const { return kind_ == Kind::kSequence; }
  bool is_map() const { return kind_ == Kind::kMap; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool empty() const { return kind_ == Kind::kEmpty; }

  const Tensor& tensor() const { return tensor_; }
  Tensor& tensor() { return tensor_; }
  const std::vector<Value>& elements() const { return *elements_; }
  // Sequence element type / type held by a None.
  const TypeInfo& element_type() const { return element_type_; }
  const Tensor& map_keys() const { return tensor_; }
  const Tensor& map_values() const { return map_values_; }

  std::string Describe() const;

 private:
  Kind kind_ = Kind::kEmpty;
  Tensor tensor_;  // the tensor, or a map's keys
  Tensor map_values_;
  std::shared_ptr<const std::vector<Value>> elements_;
  TypeInfo element_type_;
};

}  // namespace nee
