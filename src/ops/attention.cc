// Operator family: Attention. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterAttentionOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
