/*===- mlart.h - C API of the MLA runtime ---------------------------------===*
 *
 * Pure C (C99) interface for embedding the runtime: devices, buffers, paged
 * KV caches, the block manager, every kernel of the kernel library, and
 * artifacts with the executor that runs them.
 * Handles are opaque. Every fallible call returns an mlart_status: NULL means
 * success; anything else carries a code and a message and must be released
 * with mlart_status_free. No call lets a C++ exception escape.
 *
 *===----------------------------------------------------------------------===*/
#ifndef MLART_MLART_H
#define MLART_MLART_H

#include "mlart/Version.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*---- Version ------------------------------------------------------------*/

/** The library's version, MLART_VERSION of its build (major * 10000 +
 *  minor * 100 + patch): compare it with the MLART_VERSION a program was
 *  compiled against. 0.x releases may break the ABI in any minor version;
 *  the shared library's SONAME (libmlart.so.MAJOR.MINOR) says which. */
int32_t mlart_version(void);
/** "MAJOR.MINOR.PATCH". */
const char *mlart_version_string(void);

/*---- Status -------------------------------------------------------------*/

/** Status codes (same values as mlart::StatusCode). */
typedef enum mlart_status_code {
  MLART_STATUS_OK = 0,
  MLART_STATUS_INVALID_ARGUMENT = 1,
  MLART_STATUS_OUT_OF_RANGE = 2,
  MLART_STATUS_FAILED_PRECONDITION = 3,
  MLART_STATUS_PERMISSION_DENIED = 4,
  MLART_STATUS_RESOURCE_EXHAUSTED = 5,
  MLART_STATUS_UNIMPLEMENTED = 6,
  MLART_STATUS_DATA_LOSS = 7,
  MLART_STATUS_UNAVAILABLE = 8,
  MLART_STATUS_INTERNAL = 9
} mlart_status_code;

/** Result of a call; NULL is success. */
typedef struct mlart_status_s *mlart_status;

/** The code of a status (MLART_STATUS_OK for NULL). */
mlart_status_code mlart_status_get_code(mlart_status status);
/** The message of a status ("" for NULL); valid until mlart_status_free. */
const char *mlart_status_message(mlart_status status);
/** Releases a status; NULL is a no-op. */
void mlart_status_free(mlart_status status);

/*---- Element types and tensor views -------------------------------------*/

/** Element types (same values as mlart::DType). */
typedef enum mlart_dtype {
  MLART_DTYPE_F32 = 0,
  MLART_DTYPE_F16 = 1,
  MLART_DTYPE_BF16 = 2,
  MLART_DTYPE_F8E4M3FN = 3,
  MLART_DTYPE_I32 = 4,
  MLART_DTYPE_I64 = 5,
  MLART_DTYPE_F64 = 6,
  MLART_DTYPE_F8E5M2 = 7
} mlart_dtype;

/** Maximum tensor rank. */
#define MLART_MAX_RANK 4

/** Non-owning strided view of device memory; strides count elements.
 *  A view with data == NULL is "absent" (for optional kernel operands). */
typedef struct mlart_tensor {
  void *data;
  mlart_dtype dtype;
  int32_t rank;
  int64_t sizes[MLART_MAX_RANK];
  int64_t strides[MLART_MAX_RANK];
} mlart_tensor;

/** A contiguous row-major view of `rank` (<= 4) dimensions. */
mlart_tensor mlart_tensor_contiguous(void *data, mlart_dtype dtype,
                                     int32_t rank, const int64_t *sizes);

/*---- Devices and buffers ------------------------------------------------*/

typedef struct mlart_device_s mlart_device;
typedef struct mlart_stream_s mlart_stream;
typedef struct mlart_buffer_s mlart_buffer;

/** Creates the CPU reference device. */
mlart_status mlart_device_create_cpu(mlart_device **out_device);
/** Creates CUDA device `ordinal` (>= 0). MLART_STATUS_UNAVAILABLE when there
 *  is no GPU or driver, or when the program was linked with
 *  mlart_capi_nocuda instead of mlart_capi_cuda (see docs/runtime.md); an
 *  ordinal past the last GPU is MLART_STATUS_INVALID_ARGUMENT. */
mlart_status mlart_device_create_cuda(int ordinal, mlart_device **out_device);
/** Destroys a device; every buffer, cache, stream and executor of it must be
 *  gone. */
void mlart_device_destroy(mlart_device *device);
/** "cpu" or "cuda". */
const char *mlart_device_kind_name(const mlart_device *device);
/** Waits for the work queued on `stream` (NULL: everything on the device). */
mlart_status mlart_device_synchronize(mlart_device *device,
                                      mlart_stream *stream);

/*---- Streams ------------------------------------------------------------*/

/* Every call that takes an `mlart_stream *` accepts NULL for the device's
 * default stream, which on CUDA waits for the work queued on every stream
 * of this API (they are created blocking). A stream must belong to the
 * device of the call, else MLART_STATUS_INVALID_ARGUMENT. Kernels and the
 * executor only queue work; use mlart_stream_synchronize before reading
 * their results on the host other than through the blocking copies below. */

/** Creates an execution stream of `device` (the CPU runs everything at call
 *  time; its streams only name an order). */
mlart_status mlart_stream_create(mlart_device *device,
                                 mlart_stream **out_stream);
/** Destroys a stream; queued work still completes. NULL is a no-op. Must
 *  happen before the device is destroyed. */
void mlart_stream_destroy(mlart_stream *stream);
/** Blocks until the work queued on `stream` is done. */
mlart_status mlart_stream_synchronize(mlart_stream *stream);
/** The native handle (cudaStream_t on CUDA, NULL on the CPU), to order the
 *  caller's own work against this stream. */
void *mlart_stream_native_handle(const mlart_stream *stream);

/** Allocates `bytes` of device memory. */
mlart_status mlart_buffer_allocate(mlart_device *device, size_t bytes,
                                   mlart_buffer **out_buffer);
/** Frees a buffer; NULL is a no-op. */
void mlart_buffer_free(mlart_buffer *buffer);
/** Device address of the buffer (for mlart_tensor.data). */
void *mlart_buffer_data(const mlart_buffer *buffer);
size_t mlart_buffer_size(const mlart_buffer *buffer);
/** Bounds-checked, blocking copies between host memory and the buffer on
 *  the default stream: they return once the bytes have arrived, and are
 *  ordered after the work queued on every stream of the device. */
mlart_status mlart_buffer_write(mlart_buffer *buffer, size_t offset,
                                const void *src, size_t bytes);
mlart_status mlart_buffer_read(const mlart_buffer *buffer, size_t offset,
                               void *dst, size_t bytes);
/** Same, ordered on `stream` only (NULL: as above); still blocking. */
mlart_status mlart_buffer_write_on(mlart_buffer *buffer, size_t offset,
                                   const void *src, size_t bytes,
                                   mlart_stream *stream);
mlart_status mlart_buffer_read_on(const mlart_buffer *buffer, size_t offset,
                                  void *dst, size_t bytes,
                                  mlart_stream *stream);

/*---- Paged KV cache -----------------------------------------------------*/

/** Row encodings (same values as mlart::CacheLayout). */
typedef enum mlart_cache_layout {
  MLART_CACHE_PLAIN = 0,
  MLART_CACHE_FP8_PER_TENSOR = 1,
  MLART_CACHE_FP8_DS_MLA = 2
} mlart_cache_layout;

/** Layout of one layer's cache (mirrors mlart::KVCacheDesc). */
typedef struct mlart_kv_cache_desc {
  int64_t num_blocks;
  int64_t block_size;
  int64_t latent_rank;
  int64_t rope_dim;
  mlart_dtype dtype;
  mlart_cache_layout layout;
} mlart_kv_cache_desc;

typedef struct mlart_kv_cache_s mlart_kv_cache;
typedef struct mlart_block_manager_s mlart_block_manager;

/** Creates a zeroed cache; `scale` is the fp8 per-tensor scale (> 0). */
mlart_status mlart_kv_cache_create(mlart_device *device,
                                   const mlart_kv_cache_desc *desc, float scale,
                                   mlart_kv_cache **out_cache);
/** Wraps an engine's cache: `data` is device memory of `device` that the
 *  caller owns and keeps alive until the cache is destroyed, laid out as
 *  [num_blocks, block_size, row] with dense rows within a block and blocks
 *  `block_stride_bytes` apart (0: dense; e.g. one layer's view of a
 *  layer-interleaved allocation). Nothing is written at wrap time; kernels
 *  write only the rows of the slots they are given. */
mlart_status mlart_kv_cache_wrap(mlart_device *device,
                                 const mlart_kv_cache_desc *desc, void *data,
                                 int64_t block_stride_bytes, float scale,
                                 mlart_kv_cache **out_cache);
/** Makes kernels read the fp8 per-tensor scale from `device_scale`, one
 *  float in the cache's device memory that the caller keeps alive (vLLM's
 *  k_scale tensor), when they run: a new value needs no rebind and no new
 *  graph. NULL returns to the scale given at creation. Executors take it
 *  at mlart_executor_bind_cache. */
mlart_status mlart_kv_cache_set_scale_tensor(mlart_kv_cache *cache,
                                             const float *device_scale);
/** Frees the cache's memory, or only the handle of a wrapped cache. */
void mlart_kv_cache_destroy(mlart_kv_cache *cache);
/** Bytes of the cache's rows (num_blocks * block_size * row bytes). */
size_t mlart_kv_cache_size_bytes(const mlart_kv_cache *cache);
/** Bytes of one token row. */
int64_t mlart_kv_cache_row_bytes(const mlart_kv_cache *cache);
/** Bytes from one block to the next. */
int64_t mlart_kv_cache_block_stride(const mlart_kv_cache *cache);
/** Raw byte access (tests, checkpoints); blocking, like mlart_buffer_write
 *  and mlart_buffer_read. Offsets number the rows as if dense, so a
 *  strided cache's gaps are never touched. */
mlart_status mlart_kv_cache_write_bytes(mlart_kv_cache *cache, size_t offset,
                                        const void *src, size_t bytes);
mlart_status mlart_kv_cache_read_bytes(const mlart_kv_cache *cache,
                                       size_t offset, void *dst, size_t bytes);
/** Same, ordered on `stream` (NULL: the default stream); still blocking. */
mlart_status mlart_kv_cache_write_bytes_on(mlart_kv_cache *cache, size_t offset,
                                           const void *src, size_t bytes,
                                           mlart_stream *stream);
mlart_status mlart_kv_cache_read_bytes_on(const mlart_kv_cache *cache,
                                          size_t offset, void *dst,
                                          size_t bytes, mlart_stream *stream);
/** Makes kernels writing this cache honour `manager`'s checked mode (its
 *  write-protect flags and refused-write counter); NULL detaches. The
 *  manager must outlive the attachment. */
mlart_status mlart_kv_cache_set_guard(mlart_kv_cache *cache,
                                      mlart_block_manager *manager);

/*---- Block manager ------------------------------------------------------*/

/** Tokens [start, start + count) of one request scheduled in a step. */
typedef struct mlart_scheduled_chunk {
  int64_t request;
  int64_t start;
  int64_t count;
} mlart_scheduled_chunk;

/** Prefix-cache and checked-mode counters. */
typedef struct mlart_prefix_cache_stats {
  int64_t queried_tokens;
  int64_t hit_tokens;
  int64_t cached_blocks;
  int64_t evictions;
  int64_t free_blocks;
  uint64_t refused_writes;
} mlart_prefix_cache_stats;

/** Creates a manager of `num_blocks` (block 0 is the null block). */
mlart_status mlart_block_manager_create(int64_t num_blocks, int64_t block_size,
                                        int enable_prefix_caching,
                                        mlart_block_manager **out_manager);
void mlart_block_manager_destroy(mlart_block_manager *manager);
/** Adds a request with its prompt; `out_num_cached_tokens` (nullable)
 *  receives the length of the prefix found in the cache. */
mlart_status mlart_block_manager_add_request(mlart_block_manager *manager,
                                             int64_t request,
                                             const int32_t *tokens,
                                             int64_t num_tokens,
                                             int64_t *out_num_cached_tokens);
mlart_status mlart_block_manager_append_tokens(mlart_block_manager *manager,
                                               int64_t request,
                                               const int32_t *tokens,
                                               int64_t num_tokens);
/** Tokens [0, num_computed) are in the cache; full blocks become cached. */
mlart_status mlart_block_manager_commit_computed(mlart_block_manager *manager,
                                                 int64_t request,
                                                 int64_t num_computed);
mlart_status mlart_block_manager_free_request(mlart_block_manager *manager,
                                              int64_t request);
/** Copies the request's block ids into `out[capacity]`; the count goes to
 *  `out_num_blocks` (an error if it exceeds capacity). */
mlart_status mlart_block_manager_get_block_table(
    const mlart_block_manager *manager, int64_t request, int32_t *out,
    int64_t capacity, int64_t *out_num_blocks);
/** Writes [num_requests, max_blocks] i32, padded with the null block 0. */
mlart_status mlart_block_manager_build_block_table(
    const mlart_block_manager *manager, const int64_t *requests,
    int64_t num_requests, int64_t max_blocks, int32_t *out);
/** Writes the i64 slot of each scheduled token into out[padded_length];
 *  padding entries are -1. */
mlart_status mlart_block_manager_build_slot_mapping(
    const mlart_block_manager *manager, const mlart_scheduled_chunk *chunks,
    int64_t num_chunks, int64_t padded_length, int64_t *out);
mlart_status mlart_block_manager_get_stats(const mlart_block_manager *manager,
                                           mlart_prefix_cache_stats *out);
int64_t mlart_block_manager_num_free_blocks(const mlart_block_manager *manager);
/** Turns checked mode on (non-zero) or off. */
void mlart_block_manager_set_checked_mode(mlart_block_manager *manager,
                                          int enabled);
/** Rows refused so far by checked mode. */
uint64_t mlart_block_manager_refused_writes(const mlart_block_manager *manager);

/*---- Kernels (mirror mlart/Kernels.h; see there for shapes) --------------*/

/** Rotary style (same values as mlart::RopeStyle). */
typedef enum mlart_rope_style {
  MLART_ROPE_GPTJ = 0,
  MLART_ROPE_NEOX = 1
} mlart_rope_style;

typedef struct mlart_cache_update_args {
  mlart_tensor kv_c;
  mlart_tensor k_pe;
  mlart_tensor slot_mapping;
  mlart_kv_cache *cache;
} mlart_cache_update_args;

typedef struct mlart_rope_args {
  mlart_tensor x;
  mlart_tensor positions;
  mlart_tensor cos_sin;
  mlart_rope_style style;
} mlart_rope_args;

typedef struct mlart_rope_cache_update_args {
  mlart_tensor kv_c;
  mlart_tensor k_pe;
  mlart_tensor slot_mapping;
  mlart_kv_cache *cache;
  mlart_tensor positions;
  mlart_tensor cos_sin;
  mlart_rope_style style;
  mlart_tensor q_pe;     /**< optional */
  mlart_tensor k_pe_out; /**< optional */
} mlart_rope_cache_update_args;

/** mlart_rope_cache_update_args (never grown, see docs/runtime.md) plus the
 *  kernel's later operands, for mlart_rope_cache_update_full. */
typedef struct mlart_rope_cache_update_full_args {
  mlart_rope_cache_update_args base;
  /** Optional source of q_pe's rotation (absent: q_pe rotates in place). */
  mlart_tensor q_pe_in;
  /** Optional [latent]: kv_c is RMS-normalised with this weight before it
   *  is written (the fused kv_a norm, mla-fuse-kv-norm); then
   *  latent_norm_epsilon must be > 0 and finite, else it must be 0. */
  mlart_tensor latent_norm_weight;
  float latent_norm_epsilon;
} mlart_rope_cache_update_full_args;

typedef struct mlart_decode_attention_args {
  mlart_tensor q;
  mlart_kv_cache *cache;
  mlart_tensor block_table;
  mlart_tensor seq_lens;
  float softmax_scale;
  mlart_tensor out;
  mlart_tensor lse; /**< optional */
  int32_t num_splits;
} mlart_decode_attention_args;

/** mlart_cache_update then mlart_decode_attention over the rows it wrote,
 *  in one call; a call refused on its arguments writes nothing. */
typedef struct mlart_decode_attention_with_update_args {
  mlart_tensor kv_c;
  mlart_tensor k_pe;
  mlart_tensor slot_mapping;
  mlart_tensor q;
  mlart_kv_cache *cache;
  mlart_tensor block_table;
  mlart_tensor seq_lens;
  float softmax_scale;
  mlart_tensor out;
  mlart_tensor lse; /**< optional */
  int32_t num_splits;
} mlart_decode_attention_with_update_args;

typedef struct mlart_prefill_attention_args {
  mlart_tensor q;
  mlart_tensor k;
  mlart_tensor v;
  mlart_tensor query_start_loc;
  float softmax_scale;
  mlart_tensor out;
  mlart_tensor lse;      /**< optional */
  mlart_kv_cache *cache; /**< NULL: no cached context */
  mlart_tensor block_table;
  mlart_tensor context_lens;
  mlart_tensor w_uk;
  mlart_tensor w_uv;
} mlart_prefill_attention_args;

/** mlart_prefill_attention_args (never grown, see docs/runtime.md) plus
 *  the later fields of the C++ PrefillAttentionArgs, for
 *  mlart_prefill_attention_full. */
typedef struct mlart_prefill_attention_full_args {
  mlart_prefill_attention_args base;
  /** Non-zero: context_lens holds each request's total length after this
   *  step (context + new tokens), as compiled artifacts pass it. */
  int32_t lens_include_new_tokens;
  /** An upper bound, known on the host, on every request's cached context
   *  (0: none). The CUDA device sizes its context expansion by it instead
   *  of the block table's capacity; a longer context is
   *  MLART_STATUS_OUT_OF_RANGE on every device. */
  int64_t context_len_bound;
} mlart_prefill_attention_full_args;

typedef struct mlart_q_absorb_args {
  mlart_tensor q_nope;
  mlart_tensor w_uk;
  mlart_tensor out;
} mlart_q_absorb_args;

typedef struct mlart_v_up_args {
  mlart_tensor o_latent;
  mlart_tensor w_uv;
  mlart_tensor out;
} mlart_v_up_args;

typedef struct mlart_q_concat_args {
  mlart_tensor q_latent;
  mlart_tensor q_pe;
  mlart_tensor out;
} mlart_q_concat_args;

typedef struct mlart_quantize_args {
  mlart_tensor x;
  mlart_tensor scale;
  mlart_tensor out;
} mlart_quantize_args;

typedef struct mlart_rms_norm_args {
  mlart_tensor x;
  mlart_tensor weight;
  float epsilon;
  mlart_tensor out;
} mlart_rms_norm_args;

typedef struct mlart_linear_args {
  mlart_tensor x;
  mlart_tensor weight;
  mlart_tensor out;
} mlart_linear_args;

/** mlart_linear with the residual in the GEMM epilogue: out = x @ weight^T
 *  + addend, rounded once to out's dtype. The addend [T, N] has out's dtype;
 *  it is only read, and may be the very view of out (in place) but must not
 *  otherwise overlap it. An absent addend (data == NULL) is mlart_linear.
 *  A struct of its own (not a field appended to mlart_linear_args) so that
 *  programs built against the older header keep working unchanged. */
typedef struct mlart_linear_addend_args {
  mlart_tensor x;
  mlart_tensor weight;
  mlart_tensor out;
  mlart_tensor addend; /**< optional */
} mlart_linear_addend_args;

typedef struct mlart_add_args {
  mlart_tensor a;
  mlart_tensor b;
  mlart_tensor out;
} mlart_add_args;

/* Each kernel runs on `device`'s kernel library and is queued on `stream`
 * (NULL: the default stream). */
mlart_status mlart_cache_update(mlart_device *device,
                                const mlart_cache_update_args *args,
                                mlart_stream *stream);
mlart_status mlart_rope(mlart_device *device, const mlart_rope_args *args,
                        mlart_stream *stream);
mlart_status mlart_rope_cache_update(mlart_device *device,
                                     const mlart_rope_cache_update_args *args,
                                     mlart_stream *stream);
/** mlart_rope_cache_update with the out-of-place q_pe source and the
 *  latent norm. */
mlart_status
mlart_rope_cache_update_full(mlart_device *device,
                             const mlart_rope_cache_update_full_args *args,
                             mlart_stream *stream);
mlart_status mlart_decode_attention(mlart_device *device,
                                    const mlart_decode_attention_args *args,
                                    mlart_stream *stream);
mlart_status mlart_decode_attention_with_update(
    mlart_device *device, const mlart_decode_attention_with_update_args *args,
    mlart_stream *stream);
mlart_status mlart_prefill_attention(mlart_device *device,
                                     const mlart_prefill_attention_args *args,
                                     mlart_stream *stream);
/** mlart_prefill_attention with total lengths and the context bound. */
mlart_status
mlart_prefill_attention_full(mlart_device *device,
                             const mlart_prefill_attention_full_args *args,
                             mlart_stream *stream);
mlart_status mlart_q_absorb(mlart_device *device,
                            const mlart_q_absorb_args *args,
                            mlart_stream *stream);
mlart_status mlart_v_up(mlart_device *device, const mlart_v_up_args *args,
                        mlart_stream *stream);
mlart_status mlart_q_concat(mlart_device *device,
                            const mlart_q_concat_args *args,
                            mlart_stream *stream);
mlart_status mlart_quantize(mlart_device *device,
                            const mlart_quantize_args *args,
                            mlart_stream *stream);
mlart_status mlart_rms_norm(mlart_device *device,
                            const mlart_rms_norm_args *args,
                            mlart_stream *stream);
mlart_status mlart_linear(mlart_device *device, const mlart_linear_args *args,
                          mlart_stream *stream);
mlart_status mlart_linear_addend(mlart_device *device,
                                 const mlart_linear_addend_args *args,
                                 mlart_stream *stream);
mlart_status mlart_add(mlart_device *device, const mlart_add_args *args,
                       mlart_stream *stream);

/*---- Artifacts and the executor (see docs/artifact.md) -------------------*/

typedef struct mlart_artifact_s mlart_artifact;
typedef struct mlart_executor_s mlart_executor;

/** Loads and fully validates an MLAA artifact; a truncated or corrupted one
 *  is MLART_STATUS_DATA_LOSS, an unsupported version or inconsistent
 *  program MLART_STATUS_INVALID_ARGUMENT. */
mlart_status mlart_artifact_load_file(const char *path,
                                      mlart_artifact **out_artifact);
/** Same from memory; the bytes are not referenced after the call. */
mlart_status mlart_artifact_load_memory(const void *data, size_t size,
                                        mlart_artifact **out_artifact);
/** Frees an artifact; NULL is a no-op. Executors keep their own copy. */
void mlart_artifact_free(mlart_artifact *artifact);
/** Number of instructions of the step program. */
int64_t mlart_artifact_num_instructions(const mlart_artifact *artifact);

/** Creates an executor for `artifact` on `device` (allocates its scratch
 *  arena there). The device must outlive the executor. */
mlart_status mlart_executor_create(mlart_device *device,
                                   const mlart_artifact *artifact,
                                   mlart_executor **out_executor);
void mlart_executor_free(mlart_executor *executor);
/** Binds buffer `name` to contiguous device memory of the declared dtype and
 *  shape. Bindings persist across runs. */
mlart_status mlart_executor_bind(mlart_executor *executor, const char *name,
                                 const mlart_tensor *tensor);
/** Binds cache `name` (its desc must equal the declared one). The cache's
 *  checked-mode guard (mlart_kv_cache_set_guard) at the time of the call is
 *  kept; rebind after changing it. */
mlart_status mlart_executor_bind_cache(mlart_executor *executor,
                                       const char *name, mlart_kv_cache *cache);
/** Queues the step on `stream` (NULL: default), a stream of the executor's
 *  device. Errors name the failing instruction:
 *  "instruction #6 cache_update (layer0.kv_update): ...". */
mlart_status mlart_executor_run(mlart_executor *executor, mlart_stream *stream);
/** Runs the artifact's prepare program (weights -> the prepared arena,
 *  e.g. two projections' weights concatenated) on `stream`. Runs also do
 *  this themselves after a weight is bound to a new address; call it after
 *  changing a bound weight's contents in place. */
mlart_status mlart_executor_prepare(mlart_executor *executor,
                                    mlart_stream *stream);

/** Per-instruction timing: index, opcode name, location ("" if none) and
 *  host wall seconds including a device synchronize. */
typedef void (*mlart_instruction_timing_fn)(void *user_data, int64_t index,
                                            const char *opcode,
                                            const char *location,
                                            double seconds);
/** Turns timing on (fn != NULL) or off. */
mlart_status mlart_executor_set_timing_callback(mlart_executor *executor,
                                                mlart_instruction_timing_fn fn,
                                                void *user_data);

/** Most streams a run may spread independent instructions over (default
 *  2; 1: program order on the caller's stream). Side streams start after
 *  the work already queued on the caller's stream and join it at the end.
 *  No effect on the CPU device. InvalidArgument for a count < 1. */
mlart_status mlart_executor_set_max_streams(mlart_executor *executor,
                                            int streams);

/** How decode attention spreads over the device (docs/cuda.md, "The
 *  balanced decode schedule"); the results agree up to rounding. */
typedef enum mlart_decode_schedule {
  /** The device's default (CUDA: per-sequence, unless the environment
   *  knob MLART_DECODE_BALANCE=1). */
  MLART_DECODE_SCHEDULE_DEFAULT = 0,
  /** Every sequence split alike: best for alike lengths. */
  MLART_DECODE_SCHEDULE_PER_SEQUENCE = 1,
  /** All sequences' KV tiles cut evenly over the GPU, from the device-side
   *  lengths: best for mixed lengths, as a serving engine's are. */
  MLART_DECODE_SCHEDULE_BALANCED = 2
} mlart_decode_schedule;

/** The schedule of every decode-attention instruction from the next run or
 *  capture on (a captured graph keeps its own). No effect on the CPU
 *  device. InvalidArgument for a value not in mlart_decode_schedule. */
mlart_status mlart_executor_set_decode_schedule(mlart_executor *executor,
                                                int schedule);

/** The host-side bound on every request's cached context that each
 *  prefill-attention instruction passes from the next run or capture on
 *  (PrefillAttentionArgs::contextLenBound; 0, the default: none). A graph
 *  captured with a bound keeps it: a later step with a longer context is
 *  reported, never read past the bound. InvalidArgument when negative. */
mlart_status mlart_executor_set_prefill_context_bound(mlart_executor *executor,
                                                      int64_t bound);

/*---- The step as a CUDA graph (CUDA device; see docs/runtime.md) ---------*/

/** Records one step into a device graph on `stream` (a created stream, not
 *  NULL), replacing any earlier one; nothing runs. The graph holds the
 *  bound addresses: write each new step's data into the same buffers and
 *  replay. Run one eager step first. InvalidArgument for a NULL stream
 *  (also on the CPU device, whose streams are NULL). */
mlart_status mlart_executor_capture_graph(mlart_executor *executor,
                                          mlart_stream *stream);
/** Replays the captured step on `stream` and waits for it; returns the
 *  errors the replay recorded on the device (OutOfRange for a bad slot,
 *  nothing written). FailedPrecondition when no graph was captured. */
mlart_status mlart_executor_run_graph(mlart_executor *executor,
                                      mlart_stream *stream);
/** Chooses each GEMM's algorithm (linear, q_absorb, v_up) by replaying
 *  the whole step with every candidate, `replays` replays each (0: 20), and leaves the step
 *  captured with the choices (Executor::tuneGraph). The replays write the
 *  bound step's cache slots, as mlart_executor_run_graph does. When
 *  `out_num_tuned` is not NULL it receives how many GEMM shapes were
 *  tuned (0: nothing to choose, and no capture was made). */
mlart_status mlart_executor_tune_graph(mlart_executor *executor,
                                       mlart_stream *stream, int replays,
                                       int *out_num_tuned);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLART_MLART_H */
