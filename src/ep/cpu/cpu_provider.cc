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
  for (const cpu::OptimizedKernel& k : cpu::OptimizedKernels()) {
    if (!use_optimized_) break;
    if (NormalizeDomain(schema.domain) == k.domain && node.op_type == k.op &&
        schema.since_version >= k.min_since_version && schema.since_version <= k.max_since_version && schema.kernel)
      return k.kernel;
  }
  if (!schema.kernel)
    return NotImplemented(node.Describe() + ": no CPU kernel for " + schema.name + " (opset " +
                          std::to_string(schema.since_version) + " entry)");
  return schema.kernel;
}

}  // namespace nee
