// Operator family: Conv. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterConvOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
