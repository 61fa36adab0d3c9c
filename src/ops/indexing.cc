// Operator family: Indexing. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterIndexingOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
