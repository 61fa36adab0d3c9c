// Operator family: Cast. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterCastOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
