// Operator family: Generator. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterGeneratorOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
