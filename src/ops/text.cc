// Operator family: Text. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterTextOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
