// Operator family: Loss. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterLossOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
