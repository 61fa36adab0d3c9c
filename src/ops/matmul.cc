// Operator family: MatMul. (Not yet written.)
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

void RegisterMatMulOps(OpRegistry& registry) { (void)registry; }

}  // namespace nee
