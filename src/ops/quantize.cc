// Operator family: Quantize. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterQuantizeOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
