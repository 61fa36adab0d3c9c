// Operator family: Resize. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterResizeOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
