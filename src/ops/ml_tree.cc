// Operator family: MlTree. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterMlTreeOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
