// Operator family: ShapeOps. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterShapeOpsOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
