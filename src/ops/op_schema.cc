#include "ops/op_schema.h"

#include "base/mapped_file.h"

namespace nee {

Status InferenceContext::Error(const std::string& message) const {
  return InvalidModel(node.Describe() + ": " + message);
}

Status InferenceContext::InputError(size_t index, const std::string& message) const {
  std::string name = index < node.inputs.size() ? " '" + node.inputs[index] + "'" : "";
  return InvalidModel(node.Describe() + ": input " + std::to_string(index) + name + " " + message);
}

Result<const Tensor*> KernelContext::InputTensor(size_t i) const {
  const Value* v = input(i);
  if (!v) return InputError(i, "is required but missing");
  if (!v->is_tensor()) return InputError(i, "expected a tensor, got " + v->Describe());
  return &v->tensor();
}

Result<Tensor> KernelContext::AllocateOutput(size_t i, DataType type, std::vector<int64_t> dims) {
  return AllocateOutputImpl(i, type, std::move(dims), /*zero_fill=*/true);
}

Result<Tensor> KernelContext::AllocateOutputForOverwrite(size_t i, DataType type, std::vector<int64_t> dims) {
  return AllocateOutputImpl(i, type, std::move(dims), /*zero_fill=*/type == DataType::kString);
}

Result<Tensor> KernelContext::AllocateOutputImpl(size_t i, DataType type, std::vector<int64_t> dims, bool zero_fill) {
  if (i >= outputs_->size()) return Error("output index " + std::to_string(i) + " out of range");
  Result<Tensor> t = allocator_ ? allocator_->Allocate(i, type, std::move(dims), zero_fill)
                   : zero_fill  ? Tensor::Allocate(type, std::move(dims))
                                : Tensor::AllocateUninitialized(type, std::move(dims));
  if (!t.ok()) return t.status().WithContext(node_.Describe() + ": output " + std::to_string(i) + ": ");
  (*outputs_)[i] = Value(t.value());
  return t;
}

Status KernelContext::SetOutput(size_t i, Value value) {
  if (i >= outputs_->size()) return Error("output index " + std::to_string(i) + " out of range");
  (*outputs_)[i] = std::move(value);
  return Status::Ok();
}

void KernelContext::ParallelFor(int64_t n, int64_t min_chunk,
                                const std::function<void(int64_t, int64_t)>& fn) const {
  if (pool_) pool_->ParallelFor(n, min_chunk, fn);
  else if (n > 0) fn(0, n);
}

void KernelContext::ReleaseConstantInput(size_t i) const {
  if (!input_is_constant(i) || i >= inputs_.size() || !inputs_[i] || !inputs_[i]->is_tensor()) return;
  const Tensor& t = inputs_[i]->tensor();
  ReleaseFileBackedPages(t.raw_data(), t.byte_size());
}

void KernelContext::DropConstantInput(size_t i) const {
  if (!input_is_constant(i)) return;
  ReleaseConstantInput(i);
  if (drop_hook_) drop_hook_->Dropped(node_index_, i);
}

Tensor KernelContext::TakeConstantInput(size_t i) const {
  if (!input_is_constant(i)) return Tensor();
  return drop_hook_ ? drop_hook_->Take(node_index_, i) : Tensor();
}

Status KernelContext::Error(const std::string& message) const {
  return RuntimeError(node_.Describe() + ": " + message);
}

Status KernelContext::InputError(size_t index, const std::string& message) const {
  std::string name = index < node_.inputs.size() ? " '" + node_.inputs[index] + "'" : "";
  return InvalidArgument(node_.Describe() + ": input " + std::to_string(index) + name + " " + message);
}

}  // namespace nee
