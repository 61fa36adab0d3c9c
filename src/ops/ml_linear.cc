// Operator family: MlLinear. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterMlLinearOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
