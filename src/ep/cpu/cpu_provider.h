// The CPU execution provider: picks, per node, an optimized kernel when one
// is registered for the op, version and types, and the op's reference kernel
// otherwise.
#pragma once
#include "ops/op_schema.h"

namespace nee {

class CpuProvider {
 public:
  static const CpuProvider& Default();
  Result<KernelFn> SelectKernel(const OpSchema& schema, const Node& node) const;
};

}  // namespace nee
