// Operator family: Signal. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterSignalOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
