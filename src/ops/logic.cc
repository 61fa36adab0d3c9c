// Operator family: Logic. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterLogicOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
