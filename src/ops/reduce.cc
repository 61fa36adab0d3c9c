// Operator family: Reduce. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterReduceOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
