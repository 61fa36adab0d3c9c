// Operator family: Normalization. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterNormalizationOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
