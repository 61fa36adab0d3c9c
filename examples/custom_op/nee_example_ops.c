/* An example custom-op library for nee (include/nee/custom_op.h), in plain C.
 *
 * Domain "nee.example", version 1:
 *   Swish(X) -> Y              Y = X * sigmoid(alpha * X), float32;
 *                              attribute alpha (float, default 1). A NaN in X
 *                              is refused at run time (to show how a compute
 *                              error comes back to the caller).
 *   WeightedSum(X1, ..., Xn) -> Y
 *                              Y = sum_i weights[i] * Xi, float32, every Xi of
 *                              one shape; n >= 1; attribute weights (floats,
 *                              default all 1, else exactly n of them).
 *
 * Built by CMake as build/lib/libnee_example_ops.so; use it with
 *   nee run model.onnx --custom-ops build/lib/libnee_example_ops.so
 * or SessionOptions.register_custom_ops_library(path) in Python. It links
 * against nothing of nee's: everything comes through the api table. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nee/custom_op.h"

#define FLOAT32 1 /* nee_dtype_t NEE_DTYPE_FLOAT32 */

static int32_t fail(const nee_custom_op_api* api, nee_custom_op_context* ctx, const char* message) {
  api->set_error(ctx, message);
  return NEE_CUSTOM_OP_FAIL;
}

/* Elements of a shape; -1 if a dim is unknown. */
static int64_t element_count(int64_t rank, const int64_t* dims) {
  int64_t n = 1;
  for (int64_t k = 0; k < rank; ++k) {
    if (dims[k] < 0) return -1;
    n *= dims[k];
  }
  return n;
}

/* Output 0 gets input 0's type and shape, named dims (e.g. "batch") kept. */
static int32_t same_as_input0(const nee_custom_op_api* api, nee_custom_op_context* ctx) {
  int32_t type = 0;
  int64_t rank = -1;
  const int64_t* dims = NULL;
  if (api->input_type(ctx, 0, &type, &rank, &dims) != NEE_CUSTOM_OP_OK) return fail(api, ctx, "input 0 is not a tensor");
  if (type != 0 && type != FLOAT32) return fail(api, ctx, "input 0 must be float32");
  if (api->set_output_type(ctx, 0, FLOAT32, rank, dims) != NEE_CUSTOM_OP_OK)
    return fail(api, ctx, "cannot set the output type");
  for (int64_t k = 0; k < rank; ++k) {
    const char* symbol = api->input_dim_symbol(ctx, 0, (size_t)k);
    if (symbol) api->set_output_dim_symbol(ctx, 0, (size_t)k, symbol);
  }
  return NEE_CUSTOM_OP_OK;
}

/* ---- Swish ---- */

static int32_t swish_infer(const nee_custom_op_api* api, nee_custom_op_context* ctx, void* user_data) {
  (void)user_data;
  return same_as_input0(api, ctx);
}

static int32_t swish_compute(const nee_custom_op_api* api, nee_custom_op_context* ctx, void* user_data) {
  (void)user_data;
  float alpha = 1.0f;
  if (api->attr_float(ctx, "alpha", &alpha) == NEE_CUSTOM_OP_WRONG_TYPE) return fail(api, ctx, "alpha must be a float");
  int32_t type = 0;
  int64_t rank = 0;
  const int64_t* dims = NULL;
  if (api->input_type(ctx, 0, &type, &rank, &dims) != NEE_CUSTOM_OP_OK || type != FLOAT32)
    return fail(api, ctx, "input 0 must be a float32 tensor");
  const float* x = (const float*)api->input_data(ctx, 0);
  int64_t n = element_count(rank, dims);
  void* out = NULL;
  if (api->allocate_output(ctx, 0, FLOAT32, (size_t)rank, dims, &out) != NEE_CUSTOM_OP_OK) return NEE_CUSTOM_OP_FAIL;
  float* y = (float*)out;
  for (int64_t i = 0; i < n; ++i) {
    if (isnan(x[i])) {
      char message[96];
      snprintf(message, sizeof message, "Swish: input element %lld is NaN", (long long)i);
      return fail(api, ctx, message);
    }
    y[i] = x[i] / (1.0f + expf(-alpha * x[i]));
  }
  return NEE_CUSTOM_OP_OK;
}

/* ---- WeightedSum ---- */

/* The weights: the attribute (exactly n of them) or all ones (NULL). */
static int32_t weights_of(const nee_custom_op_api* api, nee_custom_op_context* ctx, size_t n, const float** weights) {
  size_t count = 0;
  *weights = NULL;
  int32_t rc = api->attr_floats(ctx, "weights", weights, &count);
  if (rc == NEE_CUSTOM_OP_ABSENT) return NEE_CUSTOM_OP_OK;
  if (rc != NEE_CUSTOM_OP_OK) return fail(api, ctx, "weights must be a list of floats");
  if (count != n) {
    char message[128];
    snprintf(message, sizeof message, "WeightedSum: %zu weights for %zu inputs", count, n);
    return fail(api, ctx, message);
  }
  return NEE_CUSTOM_OP_OK;
}

static int32_t weighted_sum_infer(const nee_custom_op_api* api, nee_custom_op_context* ctx, void* user_data) {
  (void)user_data;
  const float* weights;
  size_t n = api->num_inputs(ctx);
  if (weights_of(api, ctx, n, &weights) != NEE_CUSTOM_OP_OK) return NEE_CUSTOM_OP_FAIL;
  int64_t rank0 = -1;
  const int64_t* dims0 = NULL;
  for (size_t i = 0; i < n; ++i) {
    int32_t type = 0;
    int64_t rank = -1;
    const int64_t* dims = NULL;
    if (api->input_type(ctx, i, &type, &rank, &dims) != NEE_CUSTOM_OP_OK) return fail(api, ctx, "every input is a tensor");
    if (type != 0 && type != FLOAT32) return fail(api, ctx, "WeightedSum: every input must be float32");
    if (i == 0) {
      rank0 = rank;
      dims0 = dims;
      continue;
    }
    if (rank >= 0 && rank0 >= 0) {  /* known ranks and dims must agree */
      int same = rank == rank0;
      for (int64_t k = 0; same && k < rank; ++k) same = dims[k] < 0 || dims0[k] < 0 || dims[k] == dims0[k];
      if (!same) return fail(api, ctx, "WeightedSum: the inputs have different shapes");
    }
  }
  return same_as_input0(api, ctx);
}

static int32_t weighted_sum_compute(const nee_custom_op_api* api, nee_custom_op_context* ctx, void* user_data) {
  (void)user_data;
  size_t n = api->num_inputs(ctx);
  const float* weights;
  if (weights_of(api, ctx, n, &weights) != NEE_CUSTOM_OP_OK) return NEE_CUSTOM_OP_FAIL;
  int32_t type = 0;
  int64_t rank = 0;
  const int64_t* dims = NULL;
  if (api->input_type(ctx, 0, &type, &rank, &dims) != NEE_CUSTOM_OP_OK || type != FLOAT32)
    return fail(api, ctx, "input 0 must be a float32 tensor");
  int64_t count = element_count(rank, dims);
  void* out = NULL;
  if (api->allocate_output(ctx, 0, FLOAT32, (size_t)rank, dims, &out) != NEE_CUSTOM_OP_OK) return NEE_CUSTOM_OP_FAIL;
  float* y = (float*)out;
  if (count > 0) memset(y, 0, (size_t)count * sizeof(float));
  for (size_t i = 0; i < n; ++i) {
    int32_t t = 0;
    int64_t r = 0;
    const int64_t* d = NULL;
    if (api->input_type(ctx, i, &t, &r, &d) != NEE_CUSTOM_OP_OK || t != FLOAT32 || r != rank ||
        element_count(r, d) != count || (r > 0 && memcmp(d, dims, (size_t)r * sizeof(int64_t)) != 0))
      return fail(api, ctx, "WeightedSum: every input must be float32 of input 0's shape");
    const float* x = (const float*)api->input_data(ctx, i);
    float w = weights ? weights[i] : 1.0f;
    for (int64_t k = 0; k < count; ++k) y[k] += w * x[k];
  }
  return NEE_CUSTOM_OP_OK;
}

/* ---- Entry points ---- */

NEE_CUSTOM_OPS_EXPORT uint32_t nee_custom_ops_abi_version(void) { return NEE_CUSTOM_OP_ABI_VERSION; }

NEE_CUSTOM_OPS_EXPORT int32_t nee_register_custom_ops(nee_custom_op_registry* registry, const nee_custom_op_api* api) {
  nee_custom_op_def swish = {sizeof(nee_custom_op_def), "nee.example", "Swish", 1, 1, 1, 1, 1,
                             swish_infer, swish_compute, NULL, NULL};
  nee_custom_op_def weighted_sum = {sizeof(nee_custom_op_def), "nee.example", "WeightedSum", 1,
                                    1, NEE_CUSTOM_OP_VARIADIC, 1, 1,
                                    weighted_sum_infer, weighted_sum_compute, NULL, NULL};
  if (api->register_op(registry, &swish) != NEE_CUSTOM_OP_OK) return NEE_CUSTOM_OP_FAIL;
  if (api->register_op(registry, &weighted_sum) != NEE_CUSTOM_OP_OK) return NEE_CUSTOM_OP_FAIL;
  return NEE_CUSTOM_OP_OK;
}
