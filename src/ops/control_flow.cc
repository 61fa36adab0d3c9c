// Operator family: ControlFlow. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterControlFlowOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
