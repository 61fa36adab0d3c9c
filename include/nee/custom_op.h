/* nee — custom operators: the C ABI between nee and code that adds operators.
 *
 * A custom operator is (domain, op type, since-version) with an arity, an
 * optional shape/type rule and a compute function. Operators are registered
 * per session, in one of two ways:
 *
 * 1. A shared library loaded when a session is created
 *    (nee_session_options_add_custom_ops_library, Python's
 *    SessionOptions.register_custom_ops_library, `nee run --custom-ops LIB`).
 *    It exports two C functions:
 *
 *      uint32_t nee_custom_ops_abi_version(void);   // return NEE_CUSTOM_OP_ABI_VERSION
 *      int32_t nee_register_custom_ops(nee_custom_op_registry* registry,
 *                                      const nee_custom_op_api* api);
 *
 *    nee checks the version first (it must equal the one nee implements),
 *    then calls nee_register_custom_ops once per session, which calls
 *    api->register_op for each operator and returns NEE_CUSTOM_OP_OK (or
 *    NEE_CUSTOM_OP_FAIL after api->registry_error). The library stays loaded
 *    while any session created with it lives.
 *
 * 2. In-process, with nee_session_options_add_custom_op (include/nee/nee.h):
 *    the same nee_custom_op_def, no library.
 *
 * The library needs only this header: it does not link against nee. Every
 * service nee offers comes through the nee_custom_op_api table handed to each
 * callback, so a library works with whichever copy of nee loaded it (the
 * shared library, the CLI, the Python extension).
 *
 * Callbacks may run concurrently (several runs of one session on several
 * threads, several sessions): they must be thread-safe. Everything nee hands
 * them (contexts, names, dims, data, attribute values) is borrowed and valid
 * only during the call. A callback reports a failure by calling
 * api->set_error and returning NEE_CUSTOM_OP_FAIL; nee turns it into an error
 * naming the node, domain and op, and the session stays usable. Callbacks
 * must not let a C++ exception escape (nee catches one, but it is undefined
 * behaviour across a C ABI) and must not abort the process.
 */
#ifndef NEE_CUSTOM_OP_H_
#define NEE_CUSTOM_OP_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes. A change that moves or alters any field or
 * callback signature bumps it; nee refuses a library built for another one. */
#define NEE_CUSTOM_OP_ABI_VERSION 1u

/* The symbols a custom-op library exports. */
#define NEE_CUSTOM_OPS_ABI_VERSION_SYMBOL "nee_custom_ops_abi_version"
#define NEE_CUSTOM_OPS_REGISTER_SYMBOL "nee_register_custom_ops"

#if defined(__GNUC__)
#define NEE_CUSTOM_OPS_EXPORT __attribute__((visibility("default")))
#else
#define NEE_CUSTOM_OPS_EXPORT
#endif

/* Return codes of callbacks and of the api's functions. */
#define NEE_CUSTOM_OP_OK 0
#define NEE_CUSTOM_OP_FAIL 1       /* a callback failed (its message set with api->set_error) */
#define NEE_CUSTOM_OP_ABSENT 2     /* no such attribute; an omitted optional input */
#define NEE_CUSTOM_OP_WRONG_TYPE 3 /* an attribute of another type; an input that is not a tensor */
#define NEE_CUSTOM_OP_INVALID 4    /* a bad argument: index out of range, NULL pointer, wrong phase */

/* max_inputs / max_outputs of a variadic operator. */
#define NEE_CUSTOM_OP_VARIADIC (-1)

/* Attribute types (ONNX AttributeProto.AttributeType numbering). Tensor,
 * graph and type attributes exist in a node but have no accessor here. */
#define NEE_CUSTOM_ATTR_FLOAT 1
#define NEE_CUSTOM_ATTR_INT 2
#define NEE_CUSTOM_ATTR_STRING 3
#define NEE_CUSTOM_ATTR_FLOATS 6
#define NEE_CUSTOM_ATTR_INTS 7
#define NEE_CUSTOM_ATTR_STRINGS 8

typedef struct nee_custom_op_registry nee_custom_op_registry; /* opaque: registration */
typedef struct nee_custom_op_context nee_custom_op_context;   /* opaque: one call of a callback */
typedef struct nee_custom_op_api nee_custom_op_api;

/* infer and compute. `user_data` is the def's. */
typedef int32_t (*nee_custom_op_callback)(const nee_custom_op_api* api, nee_custom_op_context* ctx, void* user_data);

typedef struct nee_custom_op_def {
  uint32_t struct_size;  /* sizeof(nee_custom_op_def) */
  const char* domain;    /* e.g. "com.example"; not a domain nee implements ("", ai.onnx, ai.onnx.ml, ai.nee) */
  const char* op_type;   /* e.g. "Swish"; copied at registration */
  int32_t since_version; /* the domain's opset version the op exists from (>= 1); the model imports the domain */
  int32_t min_inputs, max_inputs;   /* max NEE_CUSTOM_OP_VARIADIC: no upper bound; inputs past min are optional */
  int32_t min_outputs, max_outputs; /* likewise */
  /* Shape/type rule, called when the session is checked (types as declared;
   * more than once when the optimizer rewrites the graph) and for each new
   * input-shape signature at run time (shapes as fed). It
   * reads input types with api->input_type (and constant inputs' values with
   * api->input_data) and sets each output with api->set_output_type. NULL:
   * outputs have unknown types (the model's value_info may still declare them). */
  nee_custom_op_callback infer;
  /* Computes the outputs (required): reads inputs with api->input_type and
   * api->input_data, allocates each output with api->allocate_output and
   * writes all of its elements. */
  nee_custom_op_callback compute;
  void* user_data;
  /* Called once with user_data when no options object and no session needs
   * the op any more (may be NULL). For a library op: before the library is
   * unloaded. */
  void (*release)(void* user_data);
} nee_custom_op_def;

struct nee_custom_op_api {
  uint32_t abi_version; /* NEE_CUSTOM_OP_ABI_VERSION */
  uint32_t struct_size; /* sizeof(nee_custom_op_api) in nee; fields are only ever appended */

  /* ---- Registration (only inside nee_register_custom_ops) ---- */
  /* Copies the def (and its strings). Fails for a bad def, a domain nee
   * implements, or an op already registered at that since-version. */
  int32_t (*register_op)(nee_custom_op_registry* registry, const nee_custom_op_def* def);
  /* Why registration failed; nee reports it with the library's path. */
  void (*registry_error)(nee_custom_op_registry* registry, const char* message);

  /* ---- Both callbacks ---- */
  /* The failure message of this call (copied; the last one set counts). */
  void (*set_error)(nee_custom_op_context* ctx, const char* message);
  const char* (*node_name)(const nee_custom_op_context* ctx);
  /* The model's opset version of the op's domain. */
  int64_t (*opset)(const nee_custom_op_context* ctx);
  /* As the node lists them, omitted optional ones included. */
  size_t (*num_inputs)(const nee_custom_op_context* ctx);
  size_t (*num_outputs)(const nee_custom_op_context* ctx);
  /* 1 when the node gives input i (has output i), else 0. */
  int32_t (*has_input)(const nee_custom_op_context* ctx, size_t i);
  int32_t (*has_output)(const nee_custom_op_context* ctx, size_t i);
  /* Input i's element type (nee_dtype_t numbering; 0 unknown), rank (-1
   * unknown) and dims (rank entries; -1 for a dim not known, e.g. symbolic,
   * during infer; always known in compute). Any out pointer may be NULL.
   * ABSENT for an omitted input, WRONG_TYPE for a sequence/map/optional. */
  int32_t (*input_type)(const nee_custom_op_context* ctx, size_t i, int32_t* elem_type, int64_t* rank,
                        const int64_t** dims);
  /* Input i's elements (row-major), or NULL: in infer, unless its value is
   * known before running (an initializer, a constant); for string tensors. */
  const void* (*input_data)(const nee_custom_op_context* ctx, size_t i);

  /* Attributes by name: OK, ABSENT or WRONG_TYPE. Strings are not
   * NUL-terminated (use the length); arrays are borrowed. */
  int32_t (*attr_int)(const nee_custom_op_context* ctx, const char* name, int64_t* out);
  int32_t (*attr_float)(const nee_custom_op_context* ctx, const char* name, float* out);
  int32_t (*attr_string)(const nee_custom_op_context* ctx, const char* name, const char** out, size_t* length);
  int32_t (*attr_ints)(const nee_custom_op_context* ctx, const char* name, const int64_t** out, size_t* count);
  int32_t (*attr_floats)(const nee_custom_op_context* ctx, const char* name, const float** out, size_t* count);
  /* count gets the number of strings; when index < count, out and length get that one. */
  int32_t (*attr_strings)(const nee_custom_op_context* ctx, const char* name, size_t index, const char** out,
                          size_t* length, size_t* count);
  /* Enumeration: how many attributes the node has, the name of attribute i
   * (NULL when out of range), the type of one by name (NEE_CUSTOM_ATTR_*, or
   * 0 when absent). */
  size_t (*attr_count)(const nee_custom_op_context* ctx);
  const char* (*attr_name)(const nee_custom_op_context* ctx, size_t i);
  int32_t (*attr_type)(const nee_custom_op_context* ctx, const char* name);

  /* ---- infer only ---- */
  /* Output i's element type (0: unknown), rank (-1: unknown) and dims (-1:
   * unknown). INVALID outside infer. */
  int32_t (*set_output_type)(nee_custom_op_context* ctx, size_t i, int32_t elem_type, int64_t rank,
                             const int64_t* dims);
  /* The name of input i's dim `axis` when it is a named symbolic dim (e.g.
   * "batch"; its size then reads -1), else NULL. */
  const char* (*input_dim_symbol)(const nee_custom_op_context* ctx, size_t i, size_t axis);
  /* Names dim `axis` of output i (already set, that dim -1): it then equals
   * every other dim of that name, e.g. the input's batch dim. */
  int32_t (*set_output_dim_symbol)(nee_custom_op_context* ctx, size_t i, size_t axis, const char* symbol);

  /* ---- compute only ---- */
  /* Allocates output i (not strings) and gives its bytes to fill; their
   * contents are undefined until written. Fails (with the error already set
   * on ctx: just return NEE_CUSTOM_OP_FAIL) for a bad type or shape, or when
   * the run's memory limit is reached. INVALID outside compute. */
  int32_t (*allocate_output)(nee_custom_op_context* ctx, size_t i, int32_t elem_type, size_t rank,
                             const int64_t* dims, void** out_data);
  /* Runs fn(arg, begin, end) over chunks of [0, n) (each at least
   * min_chunk long) on the session's threads and returns when all are done.
   * fn must be thread-safe and must not call back into the api with ctx. */
  void (*parallel_for)(nee_custom_op_context* ctx, int64_t n, int64_t min_chunk,
                       void (*fn)(void* arg, int64_t begin, int64_t end), void* arg);
};

/* The entry points' types, for a loader or a library that wants to check its
 * definitions against them. */
typedef uint32_t (*nee_custom_ops_abi_version_fn)(void);
typedef int32_t (*nee_register_custom_ops_fn)(nee_custom_op_registry* registry, const nee_custom_op_api* api);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* NEE_CUSTOM_OP_H_ */
