#include "ep/cpu/cpu_provider.h"

namespace nee {

const CpuProvider& CpuProvider::Default() {
  static const CpuProvider provider;
  return provider;
}

Result<KernelFn> CpuProvider::SelectKernel(const OpSchema& schema, const Node& node) const {
  if (!schema.kernel)
    return NotImplemented(node.Describe() + ": no CPU kernel for " + schema.name + " (opset " +
                          std::to_string(schema.since_version) + " entry)");
  return schema.kernel;
}

}  // namespace nee
