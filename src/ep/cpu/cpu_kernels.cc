#include "ep/cpu/cpu_kernels.h"

#include "ops/op_registry.h"

namespace nee::cpu {

const std::vector<OptimizedKernel>& OptimizedKernels() {
  static const std::vector<OptimizedKernel> kTable = {
      {"", "MatMul", 1, 1000, MatMulFloat},
      {"", "Gemm", 1, 1000, GemmFloat},
      {"", "Conv", 1, 1000, ConvFloat},
      {"", "ConvTranspose", 1, 1000, ConvTransposeFloat},
      {"", "MaxPool", 1, 1000, MaxPoolFloat},
      {"", "AveragePool", 1, 1000, AveragePoolFloat},
      {"", "GlobalAveragePool", 1, 1000, GlobalAveragePoolFloat},
      {"", "Exp", 1, 1000, ExpFloat},
      {"", "Sigmoid", 1, 1000, SigmoidFloat},
      {"", "Tanh", 1, 1000, TanhFloat},
      {"", "Softmax", 1, 1000, SoftmaxFloat},
  };
  return kTable;
}

Status RunReference(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(const OpSchema* schema, OpRegistry::Global().Resolve(node.domain, node.op_type, ctx.opset()));
  if (!schema->kernel) return NotImplemented(node.Describe() + ": no reference kernel");
  return schema->kernel(ctx);
}

}  // namespace nee::cpu
