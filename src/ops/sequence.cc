// Operator family: Sequence. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterSequenceOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
