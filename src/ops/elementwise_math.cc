// Operator family: ElementwiseMath. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterElementwiseMathOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
