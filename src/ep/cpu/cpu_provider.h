// The CPU execution provider: picks, per node, an optimized kernel when one
// is registered for the op, version and types, and the op's reference kernel
// otherwise.
#pragma once
#include "ops/op_schema.h"

namespace nee {

class CpuProvider {
 public:
  // Optimized kernels where registered, reference kernels for the rest.
  static const CpuProvider& Default();
  // Reference kernels only: the oracle configuration the tests run beside the
  // default one, so an optimized kernel can never hide a reference bug or
  // the other way round.
  static const CpuProvider& ReferenceOnly();
  Result<KernelFn> SelectKernel(const OpSchema& schema, const Node& node) const;

 private:
  explicit CpuProvider(bool use_optimized) : use_optimized_(use_optimized) {}
  bool use_optimized_;
};

}  // namespace nee
