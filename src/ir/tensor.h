// A dense tensor: element type, dims and a pointer to its elements. The bytes
// are either owned (heap or a session arena) or a view into a mapped model
// file; `owner_` keeps whatever backs them alive. Copying a Tensor is cheap and
// shares the bytes.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "ir/data_type.h"

namespace nee {

// Product of dims with overflow and negative checks; used wherever a count
// comes from a file or a caller.
Result<int64_t> CheckedElementCount(std::span<const int64_t> dims);
// Upper bound on a single tensor's bytes; protects against hostile shapes.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 40;

std::string DimsToString(std::span<const int64_t> dims);  // "[2,3,4]"

class Tensor {
 public:
  Tensor() = default;

  // Zero-filled heap tensor (strings are empty). Fails on negative dims,
  // overflow, or a size beyond kMaxTensorBytes.
  static Result<Tensor> Allocate(DataType type, std::vector<int64_t> dims);
  // Like Allocate, but the bytes of a non-string tensor are left as they are:
  // for a producer that writes every element anyway (saves a pass over memory).
  static Result<Tensor> AllocateUninitialized(DataType type, std::vector<int64_t> dims);
  // A tensor over existing bytes; `owner` keeps them alive (may be null for
  // memory the caller guarantees outlives the tensor, e.g. a session arena).
  static Tensor View(DataType type, std::vector<int64_t> dims, void* data,
                     std::shared_ptr<void> owner);
  // Scalar and 1-D helpers for tests and shape computations.
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values, std::vector<int64_t> dims);
  template <typename T>
  static Tensor Scalar(T value) { return FromVector<T>({value}, {}); }

  bool defined() const { return type_ != DataType::kUndefined; }
  DataType dtype() const { return type_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t dim(int64_t i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t num_elements() const { return num_elements_; }
  size_t byte_size() const { return StorageBytes(type_, num_elements_); }

  void* raw_data() { return data_; }
  const void* raw_data() const { return data_; }
  template <typename T>
  T* data() { return static_cast<T*>(data_); }
  template <typename T>
  const T* data() const { return static_cast<const T*>(data_); }
  template <typename T>
  std::span<const T> span() const { return {data<T>(), static_cast<size_t>(num_elements_)}; }
  template <typename T>
  std::span<T> mutable_span() { return {data<T>(), static_cast<size_t>(num_elements_)}; }

  // A deep copy with its own heap bytes.
  Result<Tensor> Clone() const;
  // True when no other Tensor shares these bytes and they are owned (not a
  // view of an arena or a mapped file), so a caller may write to them.
  bool exclusively_owned() const { return owned_by_at_most(1); }
  // True when the bytes are owned and at most `tensors` Tensors (this one
  // included) share them: for a holder that knows who the others are.
  bool owned_by_at_most(long tensors) const { return owner_ && owner_.use_count() <= tensors; }
  // Same bytes, new dims (the element count must match).
  Result<Tensor> Reshaped(std::vector<int64_t> dims) const;
  // Reads an integer tensor (any int type) as int64 values; for shape inputs.
  Result<std::vector<int64_t>> ToInt64Vector() const;
  // "tensor(float)[2,3]"
  std::string Describe() const;

 private:
  DataType type_ = DataType::kUndefined;
  std::vector<int64_t> dims_;
  int64_t num_elements_ = 0;
  void* data_ = nullptr;
  std::shared_ptr<void> owner_;
};

template <typename T>
Tensor Tensor::FromVector(const std::vector<T>& values, std::vector<int64_t> dims) {
  Tensor t = Allocate(DataTypeOf<T>::value, std::move(dims)).value();
  for (size_t i = 0; i < values.size() && i < static_cast<size_t>(t.num_elements()); ++i)
    t.data<T>()[i] = values[i];
  return t;
}

}  // namespace nee
