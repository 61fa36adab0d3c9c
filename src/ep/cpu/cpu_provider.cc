#include "ep/cpu/cpu_provider.h"

#include "ep/cpu/cpu_kernels.h"
#include "ir/graph.h"

namespace nee {

const CpuProvider& CpuProvider::Default() {
  static const CpuProvider provider(/*use_optimized=*/true);
  return provider;
}

const CpuProvider& CpuProvider::ReferenceOnly() {
  static const CpuProvider provider(/*use_optimized=*/false);
  return provider;
}

Result<KernelFn> CpuProvider::SelectKernel(const OpSchema& schema, const Node& node) const {
  if (use_optimized_)
    if (const cpu::OptimizedKernel* k = cpu::FindOptimizedKernel(schema)) return k->kernel;
  if (!schema.kernel)
    return NotImplemented(node.Describe() + ": no CPU kernel for " + schema.name + " (opset " +
                          std::to_string(schema.since_version) + " entry)");
  return schema.kernel;
}

}  // namespace nee
