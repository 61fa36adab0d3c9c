// ai.nee ConvIntegerToFloat (ops/quant_conv.h): ConvInteger, its bias,
// cast, scale, residual and activation as one node. The reference kernel runs
// ConvInteger's reference into the output's bytes and converts them in place,
// one element at a time, in the order the unfused nodes compute.
#include "ops/quant_conv.h"

#include <cstring>
#include <memory>
#include <string>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

namespace {

constexpr int64_t kConvIntegerOpset = 10;  // ConvInteger's only version

// An optional input of `type` that holds one value or one per output channel
// of y (M = y's dim 1), shaped to broadcast along the channel axis only.
// Sets *data (null when absent) and *stride (0: one value, 1: per channel).
template <typename T>
Status ReadChannelOperand(const KernelContext& ctx, size_t index, DataType type, const char* what, const Tensor& y,
                          const T** data, int64_t* stride) {
  *data = nullptr;
  *stride = 0;
  if (!ctx.has_input(index)) return Status::Ok();
  NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(index));
  const int64_t m = y.dim(1);
  // The dims right-aligned with y's: 1 everywhere but the channel axis, which is 1 or M.
  bool broadcasts = t->dtype() == type && t->rank() <= y.rank();
  for (int64_t d = 0; broadcasts && d < t->rank(); ++d) {
    const int64_t axis = y.rank() - t->rank() + d;
    broadcasts = t->dim(d) == 1 || (axis == 1 && t->dim(d) == m);
  }
  if (!broadcasts)
    return ctx.InputError(index, std::string("(") + what + ") must be " + DataTypeName(type) +
                                     " with one value or one per output channel (" + std::to_string(m) +
                                     ") along the channel axis, got " + t->Describe());
  *data = t->data<T>();
  *stride = t->num_elements() == 1 ? 0 : 1;
  return Status::Ok();
}

Status InferConvIntegerToFloat(InferenceContext& ctx) {
  NEE_RETURN_IF_ERROR(ReadFusedActivation(ctx.node).status());
  NEE_ASSIGN_OR_RETURN(const TypeInfo* s, InputTensorType(ctx, kConvIntegerScaleInput));
  if (s->elem_type != DataType::kUndefined && s->elem_type != DataType::kFloat)
    return ctx.InputError(kConvIntegerScaleInput, std::string("(scale) must be float32, got ") +
                                                      DataTypeName(s->elem_type));
  if (ctx.has_input(kConvIntegerSumBiasInput)) {
    NEE_ASSIGN_OR_RETURN(const TypeInfo* b, InputTensorType(ctx, kConvIntegerSumBiasInput));
    if (b->elem_type != DataType::kUndefined && b->elem_type != DataType::kInt32)
      return ctx.InputError(kConvIntegerSumBiasInput, std::string("(B) must be int32, got ") +
                                                          DataTypeName(b->elem_type));
  }
  NEE_RETURN_IF_ERROR(InferConvIntegerOutput(ctx));
  ctx.output_types[0].elem_type = DataType::kFloat;
  return Status::Ok();
}

// Converts y's int32 sums in place (reference order, one element at a time).
Status ConvIntegerToFloatKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(Tensor y, RunConvIntegerIntoFloatOutput(ctx, ConvIntegerReference));
  NEE_ASSIGN_OR_RETURN(ConvIntegerEpilogue e, ReadConvIntegerEpilogue(ctx, y));
  const int64_t channels = y.dim(1), images = y.dim(0);
  const int64_t pixels = channels * images == 0 ? 0 : y.num_elements() / (channels * images);
  auto* bytes = static_cast<uint8_t*>(y.raw_data());
  for (int64_t n = 0; n < images; ++n)
    for (int64_t m = 0; m < channels; ++m)
      for (int64_t p = 0; p < pixels; ++p) {
        const int64_t i = (n * channels + m) * pixels + p;
        int32_t sum;
        std::memcpy(&sum, bytes + 4 * i, 4);
        // ConvInteger's sum plus B as an int32 Add (wrapping), then Cast, Mul, the Adds, the activation.
        const int32_t sum_bias = e.sum_bias ? e.sum_bias[m * e.sum_bias_stride] : 0;
        const uint32_t biased = static_cast<uint32_t>(sum) + static_cast<uint32_t>(sum_bias);
        float v = static_cast<float>(static_cast<int32_t>(biased));
        v = v * e.scale[m * e.scale_stride];
        if (e.bias) v = v + e.bias[m * e.bias_stride];
        if (e.z) v = v + e.z[i];
        v = ApplyFusedActivation<float>(e.activation, v);
        std::memcpy(bytes + 4 * i, &v, 4);
      }
  return Status::Ok();
}

// Hands the ConvInteger kernel an int32 view of the node's float output.
class Int32ViewOfFloatOutput : public KernelContext::OutputAllocator {
 public:
  explicit Int32ViewOfFloatOutput(KernelContext& outer) : outer_(outer) {}
  Result<Tensor> Allocate(size_t index, DataType type, std::vector<int64_t> dims, bool zero_fill) override {
    if (index != 0 || type != DataType::kInt32) return outer_.Error("the convolution gave an unexpected output");
    NEE_ASSIGN_OR_RETURN(Tensor t, zero_fill ? outer_.AllocateOutput(0, DataType::kFloat, dims)
                                             : outer_.AllocateOutputForOverwrite(0, DataType::kFloat, dims));
    kept_ = t;
    return Tensor::View(DataType::kInt32, std::move(dims), t.raw_data(), std::make_shared<Tensor>(t));
  }
  const Tensor& kept() const { return kept_; }

 private:
  KernelContext& outer_;
  Tensor kept_;
};

}  // namespace

Result<ConvIntegerEpilogue> ReadConvIntegerEpilogue(const KernelContext& ctx, const Tensor& y) {
  ConvIntegerEpilogue e;
  NEE_ASSIGN_OR_RETURN(e.activation, ReadFusedActivation(ctx.node()));
  if (y.rank() < 3) return ctx.Error("the convolution's output has rank < 3");
  if (!ctx.has_input(kConvIntegerScaleInput)) return ctx.InputError(kConvIntegerScaleInput, "(scale) is required");
  NEE_RETURN_IF_ERROR(ReadChannelOperand<float>(ctx, kConvIntegerScaleInput, DataType::kFloat, "scale", y,
                                                &e.scale, &e.scale_stride));
  NEE_RETURN_IF_ERROR(ReadChannelOperand<int32_t>(ctx, kConvIntegerSumBiasInput, DataType::kInt32, "B", y,
                                                  &e.sum_bias, &e.sum_bias_stride));
  NEE_RETURN_IF_ERROR(ReadChannelOperand<float>(ctx, kConvIntegerBiasInput, DataType::kFloat, "bias", y, &e.bias,
                                                &e.bias_stride));
  if (ctx.has_input(kConvIntegerResidualInput)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* z, ctx.InputTensor(kConvIntegerResidualInput));
    if (z->dtype() != DataType::kFloat || z->dims() != y.dims())
      return ctx.InputError(kConvIntegerResidualInput, "(Z) must be float32 of the output's shape " +
                                                           DimsToString(y.dims()) + ", got " + z->Describe());
    e.z = z->data<float>();
  }
  return e;
}

Result<Tensor> RunConvIntegerIntoFloatOutput(KernelContext& ctx, KernelFn conv_integer) {
  std::vector<const Value*> inputs;
  std::vector<bool> constant;
  for (size_t i = 0; i < 4; ++i) {  // X, W and the zero points: ConvInteger's inputs
    inputs.push_back(ctx.input(i));
    constant.push_back(ctx.input_is_constant(i));
  }
  // The node as an ONNX ConvInteger, so that a fast kernel's fallback to the
  // reference (which looks the node's op up) runs ConvInteger's. Kept with the
  // node's prepared state when there is one, not copied on every run.
  std::shared_ptr<const Node> conv_node;
  auto build = [&]() -> Result<std::shared_ptr<const Node>> {
    auto node = std::make_shared<Node>(ctx.node());
    node->domain = "";
    node->op_type = "ConvInteger";
    return std::shared_ptr<const Node>(std::move(node));
  };
  if (ctx.prepared()) {
    NEE_ASSIGN_OR_RETURN(conv_node, ctx.prepared()->GetOrBuild<Node>({}, build));
  } else {
    NEE_ASSIGN_OR_RETURN(conv_node, build());
  }
  std::vector<Value> outputs(1);
  Int32ViewOfFloatOutput allocator(ctx);
  KernelContext inner(*conv_node, kConvIntegerOpset, std::move(inputs), &outputs, &allocator, ctx.pool(),
                      ctx.subgraphs());
  inner.SetPrepared(ctx.prepared(), &constant);
  NEE_RETURN_IF_ERROR(conv_integer(inner));
  if (!allocator.kept().defined()) return ctx.Error("the convolution produced no output");
  return allocator.kept();
}

void RegisterQuantConvOps(OpRegistry& registry) {
  registry.RegisterVersions("ai.nee", "ConvIntegerToFloat", {1}, InferConvIntegerToFloat, ConvIntegerToFloatKernel);
}

}  // namespace nee
