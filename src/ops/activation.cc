// Operator family: Activation. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterActivationOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
