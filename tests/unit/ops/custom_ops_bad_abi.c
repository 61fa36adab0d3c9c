/* A custom-op library built for an ABI version nee does not implement (99):
 * loading it must fail with an error naming its path and both versions. */
#include "nee/custom_op.h"

NEE_CUSTOM_OPS_EXPORT uint32_t nee_custom_ops_abi_version(void) { return 99; }

NEE_CUSTOM_OPS_EXPORT int32_t nee_register_custom_ops(nee_custom_op_registry* registry, const nee_custom_op_api* api) {
  (void)registry;
  (void)api;
  return NEE_CUSTOM_OP_FAIL;  /* never called */
}
