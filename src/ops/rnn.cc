// Operator family: Rnn. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterRnnOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
