// Operator family: Pool. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterPoolOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
