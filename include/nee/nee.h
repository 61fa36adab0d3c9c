/* nee — the Neural Execution Engine: C API.
 *
 * Conventions (after IREE's runtime API):
 * - Fallible functions return nee_status_t: NULL means success; otherwise an
 *   owned status carrying a code and a message, freed with nee_status_free.
 * - nee_<object>_create returns an owned object through an out_ parameter;
 *   nee_<object>_release frees it. Accessors return borrowed pointers valid
 *   while the owning object lives.
 * - Computed strings are returned by query-size-then-fill: call with a NULL
 *   buffer to learn *out_length (excluding the NUL), then again with a buffer
 *   of at least *out_length + 1 bytes. A short buffer receives a truncated,
 *   NUL-terminated prefix.
 * - No C++ exception ever crosses this boundary; bad input never aborts.
 */
#ifndef NEE_NEE_H_
#define NEE_NEE_H_

#include <stddef.h>
#include <stdint.h>

#include "nee/custom_op.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define NEE_API __attribute__((visibility("default")))
#else
#define NEE_API
#endif

/* ---- Status ------------------------------------------------------------ */

typedef struct nee_status_impl* nee_status_t;

typedef enum nee_status_code_e {
  NEE_STATUS_OK = 0,
  NEE_STATUS_INVALID_MODEL = 1,
  NEE_STATUS_INVALID_ARGUMENT = 2,
  NEE_STATUS_NOT_IMPLEMENTED = 3,
  NEE_STATUS_OUT_OF_MEMORY = 4,
  NEE_STATUS_RUNTIME_ERROR = 5,
  NEE_STATUS_IO_ERROR = 6,
  NEE_STATUS_CANCELLED = 7, /* a run stopped: terminated by the caller or over its time limit */
} nee_status_code_t;

NEE_API nee_status_code_t nee_status_code(nee_status_t status);
/* Borrowed; valid until nee_status_free. "" for NULL. */
NEE_API const char* nee_status_message(nee_status_t status);
NEE_API void nee_status_free(nee_status_t status);

/* ---- Element types (ONNX TensorProto.DataType numbering) ---------------- */

typedef enum nee_dtype_e {
  NEE_DTYPE_UNDEFINED = 0,
  NEE_DTYPE_FLOAT32 = 1,
  NEE_DTYPE_UINT8 = 2,
  NEE_DTYPE_INT8 = 3,
  NEE_DTYPE_UINT16 = 4,
  NEE_DTYPE_INT16 = 5,
  NEE_DTYPE_INT32 = 6,
  NEE_DTYPE_INT64 = 7,
  NEE_DTYPE_STRING = 8,
  NEE_DTYPE_BOOL = 9,
  NEE_DTYPE_FLOAT16 = 10,
  NEE_DTYPE_FLOAT64 = 11,
  NEE_DTYPE_UINT32 = 12,
  NEE_DTYPE_UINT64 = 13,
  NEE_DTYPE_COMPLEX64 = 14,
  NEE_DTYPE_COMPLEX128 = 15,
  NEE_DTYPE_BFLOAT16 = 16,
  NEE_DTYPE_FLOAT8E4M3FN = 17,
  NEE_DTYPE_FLOAT8E4M3FNUZ = 18,
  NEE_DTYPE_FLOAT8E5M2 = 19,
  NEE_DTYPE_FLOAT8E5M2FNUZ = 20,
  NEE_DTYPE_UINT4 = 21,
  NEE_DTYPE_INT4 = 22,
  NEE_DTYPE_FLOAT4E2M1 = 23,
} nee_dtype_t;

/* "float", "int64", ... (ONNX spelling); "undefined" for unknown values. */
NEE_API const char* nee_dtype_name(nee_dtype_t dtype);

/* ---- Values ------------------------------------------------------------ */

typedef struct nee_value_impl nee_value_t;

typedef enum nee_value_kind_e {
  NEE_VALUE_TENSOR = 0,
  NEE_VALUE_SEQUENCE = 1,
  NEE_VALUE_MAP = 2,
  NEE_VALUE_NONE = 3, /* an empty optional */
} nee_value_kind_t;

/* A tensor holding a copy of `data` (data_size must equal the tensor's byte size). */
NEE_API nee_status_t nee_value_create_tensor(nee_dtype_t dtype, const int64_t* dims, size_t rank,
                                             const void* data, size_t data_size, nee_value_t** out_value);
/* A tensor over the caller's bytes, without copying them. nee only reads them (no
 * kernel writes an input; an output that would share them is copied). They must
 * stay valid and unchanged until `release(release_context)` is called, which nee
 * does once, from any thread, when its last reference to them goes (release may
 * be NULL for bytes that outlive every value). data must be 64-byte aligned for
 * nee's vector kernels to take their fast path; any alignment of the element
 * size is accepted. */
NEE_API nee_status_t nee_value_create_tensor_view(nee_dtype_t dtype, const int64_t* dims, size_t rank, void* data,
                                                  size_t data_size, void (*release)(void*), void* release_context,
                                                  nee_value_t** out_value);
/* A string tensor; strings[i] has lengths[i] bytes (need not be NUL-terminated). */
NEE_API nee_status_t nee_value_create_string_tensor(const int64_t* dims, size_t rank, const char* const* strings,
                                                    const size_t* lengths, nee_value_t** out_value);
/* A sequence of the given values (each borrowed; the sequence keeps its own references). */
NEE_API nee_status_t nee_value_create_sequence(const nee_value_t* const* elements, size_t count,
                                               nee_dtype_t element_dtype, nee_value_t** out_value);
/* An empty optional. */
NEE_API nee_status_t nee_value_create_none(nee_value_t** out_value);
/* Reads a value from a .npy file or an ONNX .pb file (TensorProto, SequenceProto,
 * MapProto, OptionalProto). */
NEE_API nee_status_t nee_value_load_file(const char* path, nee_value_t** out_value);
/* Writes a value, format chosen by the path's extension: .npy (tensors only) or
 * .pb (TensorProto, or SequenceProto/MapProto/OptionalProto for other values). */
NEE_API nee_status_t nee_value_save_file(const nee_value_t* value, const char* path);
/* The value as ONNX protobuf bytes, as nee_value_save_file writes a .pb file. When
 * capacity >= *out_size the bytes are written to buffer; *out_size is always the size
 * needed (query with capacity 0, then fill). */
NEE_API nee_status_t nee_value_serialize(const nee_value_t* value, void* buffer, size_t capacity, size_t* out_size);
/* Reads bytes nee_value_serialize wrote; `kind` (a nee_value_kind_t) chooses the
 * message: TensorProto, SequenceProto, MapProto or OptionalProto (NEE_VALUE_NONE). */
NEE_API nee_status_t nee_value_deserialize(const void* data, size_t size, int32_t kind, nee_value_t** out_value);
NEE_API void nee_value_release(nee_value_t* value);

NEE_API nee_value_kind_t nee_value_kind(const nee_value_t* value);
NEE_API nee_dtype_t nee_value_dtype(const nee_value_t* value);
NEE_API size_t nee_value_rank(const nee_value_t* value);
/* Borrowed array of nee_value_rank(value) dims. */
NEE_API const int64_t* nee_value_dims(const nee_value_t* value);
NEE_API int64_t nee_value_element_count(const nee_value_t* value);
/* Borrowed pointer to the elements (not for string tensors). */
NEE_API const void* nee_value_data(const nee_value_t* value);
NEE_API size_t nee_value_data_size(const nee_value_t* value);
/* Element i of a string tensor: borrowed bytes and their length. */
NEE_API nee_status_t nee_value_string_at(const nee_value_t* value, int64_t index, const char** out_bytes,
                                         size_t* out_length);
NEE_API size_t nee_value_sequence_length(const nee_value_t* value);
/* A new owned handle to element i of a sequence. */
NEE_API nee_status_t nee_value_sequence_at(const nee_value_t* value, size_t index, nee_value_t** out_value);
/* For maps: new owned handles to the keys tensor and the values tensor. */
NEE_API nee_status_t nee_value_map_keys(const nee_value_t* value, nee_value_t** out_keys);
NEE_API nee_status_t nee_value_map_values(const nee_value_t* value, nee_value_t** out_values);
/* A one-line description, e.g. "tensor(float)[1,10]". */
NEE_API nee_status_t nee_value_describe(const nee_value_t* value, char* buffer, size_t capacity,
                                        size_t* out_length);

/* ---- Session options ----------------------------------------------------- */

typedef struct nee_session_options_impl nee_session_options_t;

NEE_API nee_status_t nee_session_options_create(nee_session_options_t** out_options);
/* 0 (default): one thread per available core. */
NEE_API void nee_session_options_set_intra_op_threads(nee_session_options_t* options, int32_t threads);
/* 0 none, 1 basic, 2 extended, 3 or more: all. */
NEE_API void nee_session_options_set_optimization_level(nee_session_options_t* options, int32_t level);
/* Time limit of runs whose run options set none; 0 (default): no limit. A run
 * over its limit stops before its next node (or loop iteration) with
 * NEE_STATUS_CANCELLED. */
NEE_API void nee_session_options_set_run_timeout_ms(nee_session_options_t* options, int64_t timeout_ms);
/* Most bytes of tensors one run may hold at once; a run needing more fails
 * with NEE_STATUS_OUT_OF_MEMORY. -1 (default): the machine's physical memory;
 * 0: unlimited. */
NEE_API void nee_session_options_set_run_memory_limit(nee_session_options_t* options, int64_t bytes);
// Nonzero: run every node with its op's reference kernel instead of an optimized
// one (a slower configuration for checking the optimized kernels against).
NEE_API void nee_session_options_set_reference_kernels_only(nee_session_options_t* options, int32_t enabled);
/* Nonzero (default): idle thread-pool workers poll for the next parallel loop
 * (~1 ms, then between yields for up to 250 ms) before sleeping. 0 (ONNX
 * Runtime's session.intra_op.allow_spinning=0): they sleep at once, so an idle
 * session uses no CPU. */
NEE_API void nee_session_options_set_allow_spinning(nee_session_options_t* options, int32_t allow);
/* Profiling: time every node of every run. `file_prefix` non-NULL turns it on
 * (the trace goes to "<file_prefix>_<date>_<time>.json"), NULL turns it off. */
NEE_API nee_status_t nee_session_options_set_profiling(nee_session_options_t* options, const char* file_prefix);
/* ONNX Runtime's free dimension override: every free (symbolic or unknown) dim
 * of a model input whose dim_param is `name` (by_denotation nonzero: whose
 * denotation is `name`, e.g. "DATA_BATCH") becomes `value` (>= 0) before the
 * model is checked. */
NEE_API nee_status_t nee_session_options_add_free_dimension_override(nee_session_options_t* options,
                                                                     const char* name, int by_denotation,
                                                                     int64_t value);
/* Replaces the model's initializer `name` by a copy of the tensor `value` (same
 * element type) when a session is created (ONNX Runtime's add_initializer). A
 * name that is not an initializer of the main graph fails session creation. */
NEE_API nee_status_t nee_session_options_add_initializer(nee_session_options_t* options, const char* name,
                                                         const nee_value_t* value);
/* Supplies a copy of the tensor `value` for the model's tensor `name` stored as
 * external data (ONNX Runtime's add_external_initializers): it is used instead
 * of the external file, which need not exist. Session creation fails when the
 * model stores no such tensor externally, or one of another type or shape. */
NEE_API nee_status_t nee_session_options_add_external_initializer(nee_session_options_t* options,
                                                                  const char* name, const nee_value_t* value);
/* Custom operators (include/nee/custom_op.h documents the ABI). The library
 * at `path` is loaded when a session is created with these options (each
 * session loads it and registers its ops for itself; it stays loaded while
 * the session lives). A path that cannot be loaded, a library without the
 * entry points or built for another ABI version, or a failed registration
 * fails session creation with NEE_STATUS_INVALID_ARGUMENT naming the path.
 * Libraries are loaded in the order added. */
NEE_API nee_status_t nee_session_options_add_custom_ops_library(nee_session_options_t* options, const char* path);
/* Registers one op defined in-process (the def and its strings are copied).
 * On success the options own def->user_data: def->release(user_data) is
 * called once neither the options nor any session made with them needs it.
 * On failure (a bad def) the caller keeps it. */
NEE_API nee_status_t nee_session_options_add_custom_op(nee_session_options_t* options, const nee_custom_op_def* def);
/* Nonzero: sessions made with these options are sandboxed (docs/SECURITY.md,
 * "Sandboxed sessions"; Linux with libseccomp). Creating one forks a child
 * process that lives as long as the session: it applies resource limits and
 * a seccomp filter (no new processes, exec, sockets, writing or creating
 * files, executable memory), then reads, checks and optimizes the model,
 * then enters a second filter under which it opens no file at all. This
 * process never parses the model: the child describes the session (inputs,
 * outputs, metadata, op counts: every query answers as for an unsandboxed
 * session), and each run sends the inputs to it and gets back the outputs or
 * the error, with the message and code an unsandboxed run would give. Runs
 * of one session are serialized on its socket (concurrent callers wait for
 * each other). If the child dies (a crash, a forbidden system call, its
 * address-space limit, a run far past its time limit), that run fails with
 * an error saying so, and so does every later run of the session; nothing
 * is raised in this process. nee_session_release kills and reaps the child.
 * Custom operators and profiling are refused (NEE_STATUS_INVALID_ARGUMENT);
 * nee_session_plan_report is NEE_STATUS_NOT_IMPLEMENTED; inputs are copied
 * to the child and outputs back (a view is never shared); a run's terminate
 * flag reaches the child (as a signal) and stops the run as it would
 * unsandboxed. The child is a fork of this
 * process: it starts with a copy of its memory (see docs/SECURITY.md). Where
 * the sandbox is not available, session creation fails with
 * NEE_STATUS_NOT_IMPLEMENTED saying why. 0 (default): no sandbox. */
NEE_API void nee_session_options_set_sandbox(nee_session_options_t* options, int32_t enabled);
NEE_API int32_t nee_session_options_get_sandbox(const nee_session_options_t* options);
/* Limits of a sandboxed session's child. address_space_bytes: its RLIMIT_AS
 * beyond what it inherits mapped from this process; 0 (default): the run
 * memory limit (physical memory when that is -1 or 0) + the model file's
 * size + 1 GiB + 160 MiB per thread. wall_ms: creating the session and each
 * run must answer within it or the child is killed; 0 (default): no limit
 * for creation, and 60 s + twice the run's time limit for a run that has one
 * (none otherwise). Negative values are NEE_STATUS_INVALID_ARGUMENT. */
NEE_API nee_status_t nee_session_options_set_sandbox_limits(nee_session_options_t* options,
                                                            int64_t address_space_bytes, int64_t wall_ms);
NEE_API void nee_session_options_release(nee_session_options_t* options);

/* ---- Session limits (docs/SECURITY.md) ----------------------------------- */

/* What an untrusted model may make a session do. Each has a default; a
 * session that would exceed one fails with an error naming the limit. */
typedef enum nee_limit_e {
  NEE_LIMIT_GRAPH_NODES = 0,         /* nodes in all graphs, subgraphs and expanded functions; 1000000 */
  NEE_LIMIT_SUBGRAPH_DEPTH = 1,      /* nesting of subgraphs (bodies in bodies); 32 */
  NEE_LIMIT_TENSOR_BYTES = 2,        /* bytes any one tensor in the model file may claim; 16 GiB */
  NEE_LIMIT_EXTERNAL_DATA_BYTES = 3, /* bytes of external data, all tensors together; 64 GiB */
  NEE_LIMIT_SESSION_MEMORY = 4,      /* bytes of tensors all concurrent runs hold at once; physical memory */
} nee_limit_t;
/* 0: no limit (for NEE_LIMIT_TENSOR_BYTES, the hard cap of 2^40 bytes); -1
 * for NEE_LIMIT_SESSION_MEMORY: the machine's physical memory. Other values
 * below 0 and unknown limits are NEE_STATUS_INVALID_ARGUMENT. `limit` is a
 * nee_limit_t, passed as an int so that an unknown value is not undefined. */
NEE_API nee_status_t nee_session_options_set_limit(nee_session_options_t* options, int32_t limit,
                                                   int64_t value);
NEE_API nee_status_t nee_session_options_get_limit(const nee_session_options_t* options, int32_t limit,
                                                   int64_t* out_value);

/* ---- Sessions ------------------------------------------------------------ */

typedef struct nee_session_impl nee_session_t;

/* `options` may be NULL for defaults. */
NEE_API nee_status_t nee_session_create_from_file(const char* path, const nee_session_options_t* options,
                                                  nee_session_t** out_session);
NEE_API nee_status_t nee_session_create_from_memory(const void* data, size_t size,
                                                    const nee_session_options_t* options,
                                                    nee_session_t** out_session);
NEE_API void nee_session_release(nee_session_t* session);

/* Like nee_value_load_file, for the session's input `input_index`: its declared
 * type decides between the .pb message kinds whose bytes can coincide (an
 * OptionalProto holding a tensor vs a one-element SequenceProto). */
NEE_API nee_status_t nee_session_load_input_file(const nee_session_t* session, size_t input_index,
                                                 const char* path, nee_value_t** out_value);
/* Inputs a caller feeds (initializer-backed graph inputs excluded) and outputs. */
NEE_API size_t nee_session_input_count(const nee_session_t* session);
NEE_API size_t nee_session_output_count(const nee_session_t* session);
/* Initializers that are also graph inputs (ONNX Runtime's overridable
 * initializers): a run may feed one by name, replacing its value for that run
 * (same element type and shape). */
NEE_API size_t nee_session_overridable_initializer_count(const nee_session_t* session);

/* The lists nee_session_value_info and nee_session_value_dim describe. */
#define NEE_LIST_INPUTS 0
#define NEE_LIST_OUTPUTS 1
#define NEE_LIST_OVERRIDABLE_INITIALIZERS 2

/* Describes entry `index` of a list (is_output: one of NEE_LIST_*; any other
 * nonzero value means the outputs). Inputs and overridable initializers have
 * their declared types; outputs the declared type merged with what checking
 * inferred, as ONNX Runtime lists them (a dim the model leaves symbolic or
 * unknown takes an inferred size; a missing shape or type, the inferred one). */
typedef struct nee_value_info_s {
  const char* name;          /* borrowed from the session */
  const char* type;          /* "tensor(float)", "seq(tensor(int64))", ... borrowed */
  nee_dtype_t element_type;  /* tensors; NEE_DTYPE_UNDEFINED otherwise */
  int64_t rank;              /* -1 when unknown */
} nee_value_info_t;
NEE_API nee_status_t nee_session_value_info(const nee_session_t* session, int is_output, size_t index,
                                            nee_value_info_t* out_info);
/* Dimension `axis` of entry `index` of a list (NEE_LIST_*): *out_size is the size, or -1 when
 * symbolic/unknown, in which case *out_symbol is its name ("" if unnamed). */
NEE_API nee_status_t nee_session_value_dim(const nee_session_t* session, int is_output, size_t index, size_t axis,
                                           int64_t* out_size, const char** out_symbol);

/* Optimizes the model at in_path up to `level` (as a session would) and writes
 * it to out_path as standard ONNX (fused ops in the com.microsoft domain and
 * nee's own ai.nee domain, which ONNX Runtime cannot run), recording the level
 * so that nee loads it without optimizing it again. Fills
 * `report` with a table of what each pass changed (truncated to `capacity`;
 * out_length gets its full length). */
NEE_API nee_status_t nee_model_optimize_file(const char* in_path, const char* out_path, int32_t level, char* report,
                                             size_t capacity, size_t* out_length);

/* Converts the model at in_path to default-domain (ai.onnx) opset `opset`, up or (where the
 * spec allows) down, checks the result, appends a lineage record and writes it to out_path
 * (src/opt/opset_convert.h). A node that cannot be converted fails with NEE_STATUS_INVALID_ARGUMENT
 * naming the node, its op and both versions, and nothing is written. Fills `report` with a one-line
 * summary (truncated to `capacity`; out_length gets its full length). */
NEE_API nee_status_t nee_model_convert_opset(const char* in_path, const char* out_path, int64_t opset, char* report,
                                             size_t capacity, size_t* out_length);

/* Quantizes the model at in_path and writes it to out_path as a standard ONNX model that ONNX
 * Runtime also runs (src/opt/quantize.h, docs/quantization.md): mode "dynamic" (MatMul/Gemm weights
 * int8, activations quantized at run time: DynamicQuantizeLinear + MatMulInteger), "fp16" (float16
 * weights and computation, float32 inputs and outputs) or "bf16" (the same in bfloat16). `exclude` holds `num_exclude` node names left
 * as they are (each must name a node); `flags` is a bitwise or of nee_quantize_flag_t. Appends a
 * lineage record (mode, parameters, excluded nodes, the source file's sha256). A bad mode, an
 * unknown node or an unreadable model fail (NEE_STATUS_INVALID_ARGUMENT / _INVALID_MODEL /
 * _IO_ERROR) and nothing is written. Fills `report` with a summary (nodes rewritten, weight bytes
 * before and after; truncated to `capacity`; out_length gets its full length). */
typedef enum nee_quantize_flag_e {
  NEE_QUANTIZE_PER_CHANNEL = 1, /* dynamic: one weight scale per output column */
  NEE_QUANTIZE_REDUCE_RANGE = 2, /* dynamic: 7-bit weights (no int16 saturation in u8s8 kernels without VNNI) */
  NEE_QUANTIZE_SYMMETRIC_ACTIVATIONS = 4, /* static: activation ranges symmetric around 0 (zero point 128) */
  NEE_QUANTIZE_PROGRESS = 8 /* static: a progress bar over the calibration samples on stderr (when a terminal) */
} nee_quantize_flag_t;
NEE_API nee_status_t nee_model_quantize(const char* in_path, const char* out_path, const char* mode,
                                        const char* const* exclude, size_t num_exclude, int32_t flags, char* report,
                                        size_t capacity, size_t* out_length);

/* Weight-only int4 (docs/quantization.md, mode "int4"; nee_model_quantize with mode "int4" uses
 * block_size 32): every MatMul whose B is a constant float32 matrix becomes com.microsoft MatMulNBits
 * with 4-bit weights, a scale and a zero point per `block_size` weights along K (a power of two >= 16),
 * as ONNX Runtime's MatMulNBitsQuantizer (asymmetric) writes it. Excluded nodes, the lineage record
 * (with the block size) and the report as nee_model_quantize; a bad block size is
 * NEE_STATUS_INVALID_ARGUMENT and nothing is written. */
NEE_API nee_status_t nee_model_quantize_int4(const char* in_path, const char* out_path, int64_t block_size,
                                             const char* const* exclude, size_t num_exclude, char* report,
                                             size_t capacity, size_t* out_length);

/* nee precision (src/exec/precision.h, docs/precision.md): runs the model and a reference model on the
 * same inputs and compares every output and every float intermediate value both compute. Inputs, in
 * this order of precedence: `num_samples` samples of `num_inputs` values each (`input_values` sample by
 * sample, named by `input_names`); a folder `inputs_dir` (input_<i>.pb/.npy or <name>.npy, or
 * subfolders of them, one sample each); else `random_samples` random samples (0: 8), symbolic dims
 * from `dim_symbols`/`dim_values` (else 1). Gates are off when negative. A NULL options is all defaults.
 * reference_path may be NULL when options->variant is set. */
typedef struct nee_precision_options_t {
  const char* inputs_dir;
  const char* const* input_names;
  const nee_value_t* const* input_values;
  size_t num_inputs, num_samples;
  int64_t random_samples;
  const char* const* dim_symbols;
  const int64_t* dim_values;
  size_t num_dims;
  uint64_t seed;          /* random inputs; 0: 12345 */
  int32_t threads;        /* 0: one per core */
  int32_t no_layers;      /* 1: outputs only */
  double max_top1_drop;   /* percent, 100 - top-1 agreement of any output; < 0: no gate */
  double max_abs;         /* max abs error of any output; < 0: no gate */
  const char* variant;    /* with reference_path NULL: "int8", "fp16", "bf16" or "int4", the model against the variant
                             nee_model_quantize makes of it (in memory); NULL: none */
  int32_t fp64_reference; /* 1: the reference (or, with a variant, the model itself) computed in float64 where
                             its ops allow double, its outputs rounded once to float32 */
} nee_precision_options_t;

/* Fills out_report with a string scalar (nee_value_string_at(…, 0, …)) holding the report as JSON
 * (the same as `nee precision --json`); release it with nee_value_release. A failed gate is not an
 * error: the report's "gates" say so. Models whose inputs differ, no float outputs, missing input
 * files: NEE_STATUS_INVALID_ARGUMENT / NEE_STATUS_IO_ERROR naming what. */
NEE_API nee_status_t nee_model_compare_precision(const char* model_path, const char* reference_path,
                                                 const nee_precision_options_t* options, nee_value_t** out_report);

/* Static int8 quantization in QDQ form (docs/quantization.md): runs the model on every sample of
 * `calibration_dir` (one subfolder per sample holding, per graph input NAME at index i, NAME.npy,
 * NAME.pb, input_<i>.pb or input_<i>.npy), computes each quantized activation's range with
 * `calibrator` ("minmax", "percentile" or "entropy"; `percentile` in (50, 100] is used by
 * "percentile" only) and
 * writes Conv/MatMul/Gemm with QuantizeLinear/DequantizeLinear pairs (uint8 activations, int8
 * symmetric weights, int32 biases), as ONNX Runtime's quantize_static(QDQ) does. `flags`:
 * NEE_QUANTIZE_PER_CHANNEL, NEE_QUANTIZE_SYMMETRIC_ACTIVATIONS, NEE_QUANTIZE_PROGRESS. Excluded nodes,
 * the lineage record and the report as nee_model_quantize. A missing or empty folder, a sample
 * missing an input, or an input of the wrong type or shape fail with NEE_STATUS_INVALID_ARGUMENT
 * naming the sample and the input; nothing is written. */
NEE_API nee_status_t nee_model_quantize_static(const char* in_path, const char* out_path, const char* calibration_dir,
                                               const char* calibrator, double percentile, const char* const* exclude,
                                               size_t num_exclude, int32_t flags, char* report, size_t capacity,
                                               size_t* out_length);

/* Profiling (see nee_session_options_set_profiling). end_profiling writes the
 * Chrome trace of the runs so far, stops profiling, and fills the trace's path
 * (every later call fills the same path; "" when profiling was never on).
 * profile_summary fills a table of the time per op type. */
NEE_API nee_status_t nee_session_end_profiling(nee_session_t* session, char* buffer, size_t capacity,
                                               size_t* out_length);
NEE_API nee_status_t nee_session_profile_summary(const nee_session_t* session, char* buffer, size_t capacity,
                                                 size_t* out_length);

/* Model metadata by key: "producer_name", "producer_version", "domain",
 * "doc_string", "graph_name", "graph_doc_string", "model_version", "ir_version",
 * "opsets" (e.g. "ai.onnx:17,ai.onnx.ml:3"), or "custom:<key>" for metadata_props. */
NEE_API nee_status_t nee_session_metadata(const nee_session_t* session, const char* key, char* buffer,
                                          size_t capacity, size_t* out_length);
NEE_API size_t nee_session_custom_metadata_count(const nee_session_t* session);
NEE_API const char* nee_session_custom_metadata_key(const nee_session_t* session, size_t index);

/* What the model holds (main graph and subgraphs, as loaded). */
typedef struct nee_model_stats_s {
  size_t node_count;
  size_t initializer_count;
  int64_t parameter_count; /* elements in all initializers */
  int64_t parameter_bytes;
} nee_model_stats_t;
NEE_API nee_status_t nee_session_model_stats(const nee_session_t* session, nee_model_stats_t* out_stats);
/* The op histogram: distinct "domain.op" names (sorted) and how many nodes use each. */
NEE_API size_t nee_session_op_type_count(const nee_session_t* session);
NEE_API nee_status_t nee_session_op_type_at(const nee_session_t* session, size_t index, const char** out_op_type,
                                            size_t* out_node_count);

/* Runs the model. Inputs by name; `output_names` may be NULL with
 * output_count 0 to get every output in graph order, in which case
 * `out_values` must have room for nee_session_output_count(session) entries.
 * Each returned value is owned by the caller. Safe to call concurrently. */
NEE_API nee_status_t nee_session_run(const nee_session_t* session, const char* const* input_names,
                                     const nee_value_t* const* inputs, size_t input_count,
                                     const char* const* output_names, size_t output_count,
                                     nee_value_t** out_values);

/* Per-run options (ONNX Runtime's RunOptions). One object may be used by
 * several runs at once. */
typedef struct nee_run_options_impl nee_run_options_t;
NEE_API nee_status_t nee_run_options_create(nee_run_options_t** out_options);
/* Asks every run using these options to stop; safe to call from any thread
 * while they run. They end with NEE_STATUS_CANCELLED before their next node
 * (or loop iteration). The flag stays set until cleared with terminate = 0. */
NEE_API void nee_run_options_set_terminate(nee_run_options_t* options, int terminate);
/* This run's time limit in milliseconds; 0 (default): the session's. */
NEE_API void nee_run_options_set_timeout_ms(nee_run_options_t* options, int64_t timeout_ms);
/* Nonzero: run only the nodes the requested outputs depend on (ONNX Runtime's
 * only_execute_path_to_fetches); 0 (default): every node of the graph. */
NEE_API void nee_run_options_set_only_execute_path_to_fetches(nee_run_options_t* options, int32_t enabled);
NEE_API void nee_run_options_release(nee_run_options_t* options);

/* nee_session_run with run options (`run_options` may be NULL). */
NEE_API nee_status_t nee_session_run_with_options(const nee_session_t* session, const nee_run_options_t* run_options,
                                                  const char* const* input_names, const nee_value_t* const* inputs,
                                                  size_t input_count, const char* const* output_names,
                                                  size_t output_count, nee_value_t** out_values);

/* The static memory plan for the given input values' shapes. */
typedef struct nee_plan_report_s {
  size_t node_count;
  size_t value_count;
  size_t planned_value_count;
  size_t arena_bytes;   /* one arena holding every planned intermediate */
  size_t planned_bytes; /* the sum of all planned intermediate sizes */
} nee_plan_report_t;
NEE_API nee_status_t nee_session_plan_report(const nee_session_t* session, const char* const* input_names,
                                             const nee_value_t* const* inputs, size_t input_count,
                                             nee_plan_report_t* out_report);

/* ---- Library ------------------------------------------------------------- */

NEE_API const char* nee_version(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* NEE_NEE_H_ */
