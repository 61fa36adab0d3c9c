// Operator family: Softmax. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterSoftmaxOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
