/* tessel's C API: load a compiled artifact and run it, with the runtime
 * library alone (libtessel_runtime: no compiler, no LLVM, no protobuf).
 *
 *   tessel compile model.onnx --dim batch=1 -o model.tsl     (once, anywhere)
 *
 *   #include <tessel/tessel.h>
 *   tessel_model* m = NULL;
 *   if (tessel_load("model.tsl", NULL, &m) != TESSEL_OK) {
 *     fprintf(stderr, "%s\n", tessel_last_error());
 *     return 1;
 *   }
 *   int64_t shape[4] = {1, 3, 224, 224};
 *   tessel_tensor in = {TESSEL_F32, 4, shape, x, sizeof x};
 *   int64_t out_shape[TESSEL_MAX_RANK];
 *   tessel_tensor out = {TESSEL_F32, 0, out_shape, y, sizeof y};
 *   tessel_status s = tessel_run(m, &in, 1, &out, 1);
 *   tessel_free(m);
 *
 * Conventions. Every function that can fail returns a tessel_status; on
 * failure tessel_last_error() has a message for the calling thread (valid
 * until that thread's next call into tessel). No C++ exception crosses this
 * interface. Handles are opaque. Tensors are dense, row-major, in the
 * caller's memory: inputs are read in place, outputs written into the
 * caller's buffers. One loaded model may be run from several threads at
 * once. Dtypes are numbered as ONNX numbers them.
 *
 * Versioning: TESSEL_C_API_VERSION grows when functions are added; a
 * program compiled against version N runs with a library of version >= N
 * (tessel_api_version() tells which is loaded). Artifacts carry their own
 * format version; tessel_load refuses one this library cannot read.
 */
#ifndef TESSEL_TESSEL_H
#define TESSEL_TESSEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TESSEL_C_API_VERSION 2
#define TESSEL_MAX_RANK 16

typedef enum tessel_status {
  TESSEL_OK = 0,
  TESSEL_ERROR_INVALID_ARGUMENT = 1, /* a null handle or pointer, an index out of range */
  TESSEL_ERROR_LOAD = 2,             /* the artifact is missing, damaged, foreign or for another CPU */
  TESSEL_ERROR_INPUT = 3,            /* wrong number, dtype, rank or shape of inputs */
  TESSEL_ERROR_OUTPUT = 4,           /* an output buffer of the wrong dtype or too small */
  TESSEL_ERROR_RUN = 5,              /* the model failed while running (a kernel's assertion) */
  TESSEL_ERROR_UNSUPPORTED = 6,      /* valid, but not supported by this library */
  TESSEL_ERROR_OUT_OF_MEMORY = 7
} tessel_status;

typedef enum tessel_dtype {
  TESSEL_DTYPE_UNDEFINED = 0,
  TESSEL_F32 = 1,
  TESSEL_U8 = 2,
  TESSEL_I8 = 3,
  TESSEL_U16 = 4,
  TESSEL_I16 = 5,
  TESSEL_I32 = 6,
  TESSEL_I64 = 7,
  TESSEL_BOOL = 9, /* one byte per element, 0 or 1 */
  TESSEL_F16 = 10,
  TESSEL_F64 = 11,
  TESSEL_U32 = 12,
  TESSEL_U64 = 13,
  TESSEL_BF16 = 16
} tessel_dtype;

/* Where a model runs: what its artifact was compiled for (`tessel compile
 * --target cuda` makes CUDA artifacts; they run on device 0 through the
 * CUDA driver, which this library opens at run time, so it links no CUDA
 * library itself). */
typedef enum tessel_device {
  TESSEL_DEVICE_CPU = 0,
  TESSEL_DEVICE_CUDA = 1
} tessel_device;

/* A dense row-major tensor in the caller's memory. For an input, `shape`
 * (rank entries) and `data` (nbytes) are read. For an output, the caller
 * provides `data` with `nbytes` of room and `shape` with TESSEL_MAX_RANK
 * entries of room; tessel_run writes the output's rank and shape there. */
typedef struct tessel_tensor {
  tessel_dtype dtype;
  size_t rank;
  int64_t* shape;
  void* data;
  size_t nbytes;
} tessel_tensor;

typedef struct tessel_load_options {
  size_t struct_size; /* sizeof(tessel_load_options): lets the struct grow */
  int threads;        /* CPU models: worker threads, the caller's included; 0: one per core */
  /* The artifact decides where the model runs; TESSEL_DEVICE_CUDA also
   * refuses (TESSEL_ERROR_LOAD) an artifact compiled for the CPU. */
  tessel_device device;
} tessel_load_options;

/* The declared type of an input or output. A dim is >= 0 when fixed, -1
 * when symbolic (dim_names[i] then names it, "batch" or an expression of
 * input symbols such as "seq*2"; NULL for fixed dims). rank is -1 when the
 * model does not declare it. Strings and arrays live as long as the model. */
typedef struct tessel_value_info {
  const char* name;
  tessel_dtype dtype;
  int64_t rank;
  const int64_t* dims;
  const char* const* dim_names;
} tessel_value_info;

typedef struct tessel_model tessel_model;

uint32_t tessel_api_version(void);
const char* tessel_version(void); /* "0.1.0" */
const char* tessel_last_error(void);
const char* tessel_status_name(tessel_status s);
/* Bytes per element (0 for TESSEL_DTYPE_UNDEFINED or an unknown value). */
size_t tessel_dtype_size(tessel_dtype d);

/* Loads an artifact from `tessel compile -o`. `options` may be NULL. */
tessel_status tessel_load(const char* path, const tessel_load_options* options, tessel_model** model);
void tessel_free(tessel_model* model); /* NULL is ignored */

size_t tessel_num_inputs(const tessel_model* model);
size_t tessel_num_outputs(const tessel_model* model);
tessel_status tessel_input_info(const tessel_model* model, size_t index, tessel_value_info* info);
tessel_status tessel_output_info(const tessel_model* model, size_t index, tessel_value_info* info);

/* The device the model runs on (TESSEL_DEVICE_CPU for a null model). */
tessel_device tessel_model_device(const tessel_model* model);

/* Runs the model: inputs in the order of tessel_input_info, outputs in the
 * order of tessel_output_info, all in host memory (a CUDA model copies them
 * to and from the device and waits). Symbolic dims are bound from the
 * inputs' shapes. On TESSEL_ERROR_OUTPUT (a buffer too small) the outputs'
 * shapes are still written, so the caller can size the buffers and run
 * again. */
tessel_status tessel_run(const tessel_model* model, const tessel_tensor* inputs, size_t num_inputs,
                         tessel_tensor* outputs, size_t num_outputs);

/* CUDA models only: one run whose tensors' `data` are device addresses
 * (the caller's memory on device 0, read and written in place: no copies),
 * issued on `stream` (a CUstream / cudaStream_t; NULL is the legacy default
 * stream) and not waited for. Output buffers must hold the outputs' sizes
 * (tessel_output_shape tells them); their shapes are written before the
 * call returns. Runs of one model stay in order whichever streams they use.
 * A kernel's failed assertion is reported (TESSEL_ERROR_RUN) by the model's
 * next call, or by tessel_synchronize; so a model with assertions (a
 * Gather's index check, say) makes each call wait for the previous device
 * run's end. Buffers are device 0's (its primary context) and must not
 * overlap. TESSEL_ERROR_UNSUPPORTED for a CPU model. */
tessel_status tessel_run_device(const tessel_model* model, const tessel_tensor* inputs, size_t num_inputs,
                                tessel_tensor* outputs, size_t num_outputs, void* stream);

/* Waits until the model's last tessel_run_device is done; TESSEL_ERROR_RUN
 * with its failed assertion, if any. TESSEL_OK at once for a CPU model. */
tessel_status tessel_synchronize(const tessel_model* model);

/* The shape output `index` will have for these inputs (their data is not
 * read), written to `shape` (TESSEL_MAX_RANK entries of room) and `*rank`:
 * for sizing output buffers of a model compiled with symbolic dims.
 * TESSEL_ERROR_UNSUPPORTED when the model does not declare it in terms of
 * the inputs' dims (then only tessel_run tells it). */
tessel_status tessel_output_shape(const tessel_model* model, const tessel_tensor* inputs, size_t num_inputs,
                                  size_t index, int64_t* shape, size_t* rank);

#ifdef __cplusplus
}
#endif

#endif /* TESSEL_TESSEL_H */
