// Operator family: Vision. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterVisionOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
