#include "ir/tensor.h"

#include <cstring>

#include "base/buffer_pool.h"
#include <sstream>

namespace nee {

Result<int64_t> CheckedElementCount(std::span<const int64_t> dims) {
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) return InvalidArgument("negative dimension " + std::to_string(d) + " in shape " + DimsToString(dims));
    if (d != 0 && count > INT64_MAX / d)
      return OutOfMemory("shape " + DimsToString(dims) + " has too many elements");
    count *= d;
  }
  return count;
}

std::string DimsToString(std::span<const int64_t> dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

namespace {
struct StringArray {
  explicit StringArray(int64_t n) : values(static_cast<size_t>(n)) {}
  std::vector<std::string> values;
};
}  // namespace

Result<Tensor> Tensor::Allocate(DataType type, std::vector<int64_t> dims) {
  NEE_ASSIGN_OR_RETURN(Tensor t, AllocateUninitialized(type, std::move(dims)));
  if (t.dtype() != DataType::kString) std::memset(t.raw_data(), 0, t.byte_size());
  return t;
}

Result<Tensor> Tensor::AllocateUninitialized(DataType type, std::vector<int64_t> dims) {
  if (!IsValidDataType(static_cast<int32_t>(type)))
    return InvalidArgument("cannot allocate a tensor of undefined element type");
  NEE_ASSIGN_OR_RETURN(int64_t count, CheckedElementCount(dims));
  Tensor t;
  t.type_ = type;
  t.dims_ = std::move(dims);
  t.num_elements_ = count;
  if (type == DataType::kString) {
    if (count > kMaxTensorBytes / static_cast<int64_t>(sizeof(std::string)))
      return OutOfMemory("string tensor " + DimsToString(t.dims_) + " is too large");
    auto arr = std::make_shared<StringArray>(count);
    t.data_ = arr->values.data();
    t.owner_ = std::move(arr);
    return t;
  }
  if (count > kMaxTensorBytes * 8 / std::max(1, ElementBits(type)))
    return OutOfMemory("tensor " + DimsToString(t.dims_) + " of " + DataTypeName(type) +
                       " exceeds the size limit");
  size_t bytes = t.byte_size();
  // 64-byte aligned (SIMD kernels' fast path), large blocks reused across runs.
  std::shared_ptr<void> block = BufferPool::Global().Acquire(bytes);
  if (!block) return OutOfMemory("cannot allocate " + std::to_string(bytes) + " bytes for tensor " + DimsToString(t.dims_));
  t.data_ = block.get();
  t.owner_ = std::move(block);
  return t;
}

Tensor Tensor::View(DataType type, std::vector<int64_t> dims, void* data, std::shared_ptr<void> owner) {
  Tensor t;
  t.type_ = type;
  t.dims_ = std::move(dims);
  auto count = CheckedElementCount(t.dims_);
  t.num_elements_ = count.ok() ? count.value() : 0;
  t.data_ = data;
  t.owner_ = std::move(owner);
  return t;
}

Result<Tensor> Tensor::Clone() const {
  NEE_ASSIGN_OR_RETURN(Tensor copy, Allocate(type_, dims_));
  if (type_ == DataType::kString) {
    for (int64_t i = 0; i < num_elements_; ++i) copy.data<std::string>()[i] = data<std::string>()[i];
  } else if (byte_size() > 0) {
    std::memcpy(copy.data_, data_, byte_size());
  }
  return copy;
}

Result<Tensor> Tensor::Reshaped(std::vector<int64_t> dims) const {
  NEE_ASSIGN_OR_RETURN(int64_t count, CheckedElementCount(dims));
  if (count != num_elements_)
    return InvalidArgument("cannot reshape " + DimsToString(dims_) + " to " + DimsToString(dims));
  Tensor t = *this;
  t.dims_ = std::move(dims);
  return t;
}

Result<std::vector<int64_t>> Tensor::ToInt64Vector() const {
  std::vector<int64_t> out(static_cast<size_t>(num_elements_));
  for (int64_t i = 0; i < num_elements_; ++i) {
    switch (type_) {
      case DataType::kInt64: out[i] = data<int64_t>()[i]; break;
      case DataType::kInt32: out[i] = data<int32_t>()[i]; break;
      case DataType::kInt16: out[i] = data<int16_t>()[i]; break;
      case DataType::kInt8: out[i] = data<int8_t>()[i]; break;
      case DataType::kUint8: out[i] = data<uint8_t>()[i]; break;
      case DataType::kUint16: out[i] = data<uint16_t>()[i]; break;
      case DataType::kUint32: out[i] = data<uint32_t>()[i]; break;
      case DataType::kUint64: out[i] = static_cast<int64_t>(data<uint64_t>()[i]); break;
      default:
        return InvalidArgument(std::string("expected an integer tensor, got ") + DataTypeName(type_));
    }
  }
  return out;
}

std::string Tensor::Describe() const {
  return std::string("tensor(") + DataTypeName(type_) + ")" + DimsToString(dims_);
}

}  // namespace nee
