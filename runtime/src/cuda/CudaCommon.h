//===- CudaCommon.h - Internal helpers of the CUDA backend ----------------===//
//
// Error checking (every CUDA call and every launch becomes a Status with the
// call, the CUDA error name and its message), the per-device state the
// kernel library needs (device error record, cuBLAS handle), and device-side
// scalar conversions that round exactly like mlart/DType.h.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_CUDACOMMON_H
#define MLART_CUDA_CUDACOMMON_H

#include "Fp8Codec.h"
#include "mlart/CudaDevice.h"
#include "mlart/Kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <climits>
#include <cstdint>
#include <mutex>
#include <string>

namespace mlart::cuda {

/// A readable Status for a failed CUDA call ("cudaMalloc(1024 bytes):
/// cudaErrorMemoryAllocation: out of memory").
Status cudaError(cudaError_t e, const std::string &what);

#define MLART_CUDA_CHECK(expr, what)                                           \
  do {                                                                         \
    cudaError_t mlart_cuda_err_ = (expr);                                      \
    if (mlart_cuda_err_ != cudaSuccess)                                        \
      return ::mlart::cuda::cudaError(mlart_cuda_err_, (what));               \
  } while (0)

/// Call after every launch: configuration errors show up here at once,
/// asynchronous faults at the next synchronising call.
#define MLART_CUDA_CHECK_LAUNCH(name)                                          \
  MLART_CUDA_CHECK(cudaGetLastError(), std::string("launch of ") + (name))

/// Device-side error record of the cache-writing and paged-reading kernels.
/// Index fields hold the smallest offending index (INT_MAX: none).
struct DeviceErrorRecord {
  int callFailed;     ///< set by the separate validation kernel of this call
  int badSlotIndex;   ///< slot_mapping index with slot >= numSlots
  int refusedIndex;   ///< first slot_mapping index into a protected block
  int badPosIndex;    ///< positions index outside the cos/sin table
  int badSeqIndex;    ///< paged read: sequence with a bad length / block id
  int badScale;      // quantize: the scale is not finite and > 0
  unsigned long long refusedRows; ///< rows refused by checked mode
  /// The separate validation kernel's own state: blocks OR their verdict
  /// into validateBad and count themselves in validateDone; the last block
  /// publishes callFailed and resets both, so no memset precedes a call.
  int validateBad;
  unsigned validateDone;
};

class Blas;
class BlasLt;

/// What the kernel library needs from its device.
struct CudaContext {
  int ordinal = 0;
  int smCount = 0;
  DeviceErrorRecord *deviceRecord = nullptr; ///< device memory
  DeviceErrorRecord *hostRecord = nullptr;   ///< pinned host memory
  std::mutex recordMutex;
  bool synchronousChecks = true;
  Blas *blas = nullptr;
  BlasLt *blasLt = nullptr;
  /// Stream-ordered scratch (Scratch.h); null: the default pool.
  cudaMemPool_t scratchPool = nullptr;
};

/// Resets the device record on `stream` (stream-ordered).
Status resetRecord(CudaContext &ctx, cudaStream_t stream);
/// Copies the record back, synchronises and turns it into a Status. `slots`,
/// `positions` (may be absent) let the message quote the offending values.
/// Refused rows are added to `refusedWrites` (host counter) when non-null.
Status readRecord(CudaContext &ctx, cudaStream_t stream,
                  const TensorRef *slots, const TensorRef *positions,
                  int64_t blockSize, int64_t numSlots,
                  uint64_t *refusedWrites);
/// The end of a call that checks paged reads: with synchronousChecks, reads
/// the record (no slots to quote), then releases `lock` (which holds
/// ctx.recordMutex).
inline Status finishChecked(CudaContext &ctx, cudaStream_t stream,
                            std::unique_lock<std::mutex> &lock) {
  if (!ctx.synchronousChecks)
    return Status::success();
  Status s = readRecord(ctx, stream, nullptr, nullptr, 1, 0, nullptr);
  lock.unlock();
  return s;
}

/// Host-side checks that need no device data.
bool isFloatType(DType t);
/// True when the pointer can be read by kernels (device, managed, or mapped
/// host memory).
bool isDeviceAccessible(const void *p);

// --- Kernel entry points, one per KernelLibrary member. --------------------
Status cacheUpdate(CudaContext &, const CacheUpdateArgs &, cudaStream_t);
Status rope(CudaContext &, const RopeArgs &, cudaStream_t);
Status ropeCacheUpdate(CudaContext &, const RopeCacheUpdateArgs &,
                       cudaStream_t);
Status decodeAttention(CudaContext &, const DecodeAttentionArgs &,
                       cudaStream_t);
/// The host checks of cacheUpdate and decodeAttention (no device data):
/// what decodeAttentionWithUpdate checks before it writes.
Status checkCacheUpdate(const CacheUpdateArgs &);
Status checkDecodeAttention(const DecodeAttentionArgs &);
Status decodeAttentionWithUpdate(CudaContext &,
                                 const DecodeAttentionWithUpdateArgs &,
                                 cudaStream_t);
Status prefillAttention(CudaContext &, const PrefillAttentionArgs &,
                        cudaStream_t);
Status qAbsorb(CudaContext &, const QAbsorbArgs &, cudaStream_t);
Status vUp(CudaContext &, const VUpArgs &, cudaStream_t);
Status linear(CudaContext &, const LinearArgs &, cudaStream_t);
/// The algorithms linear may run for `a` (cuBLASLt's candidates; 1 where
/// the call takes the skinny kernel or plain cuBLAS) and a fixed choice.
StatusOr<int> linearAlgorithmCount(CudaContext &, const LinearArgs &);
Status chooseLinearAlgorithm(CudaContext &, const LinearArgs &, int index);
StatusOr<int> perHeadAlgorithmCount(CudaContext &, const PerHeadGemmArgs &);
Status choosePerHeadAlgorithm(CudaContext &, const PerHeadGemmArgs &,
                              int index);
Status qConcat(CudaContext &, const QConcatArgs &, cudaStream_t);
Status quantize(CudaContext &, const QuantizeArgs &, cudaStream_t);
Status rmsNorm(CudaContext &, const RmsNormArgs &, cudaStream_t);
Status add(CudaContext &, const AddArgs &, cudaStream_t);

/// Cache writes are all-or-nothing. A call with at most this many slots or
/// positions is validated by every block of the write kernel itself before
/// it writes; a larger call by a separate kernel launched first.
constexpr int64_t kInlineValidationLimit = 1024;
/// The separate validation of a large cache write, for write kernels that
/// are not the library's (docs/codegen.md): when `slots` (or `positions`,
/// with `cosSin`'s row count as the bound) has more than
/// kInlineValidationLimit entries, launches on `stream` the kernel that
/// records bad indices as the write kernels do and publishes its verdict
/// in DeviceErrorRecord::callFailed; the write kernel launched after it
/// must then write nothing when callFailed is set. Returns whether it ran.
StatusOr<bool> prevalidateCacheWrite(CudaContext &ctx, const TensorRef &slots,
                                     const KVCacheRef &cache,
                                     const TensorRef *positions,
                                     const TensorRef *cosSin,
                                     cudaStream_t stream);

/// Device::copyView (MiscKernels.cu).
Status copyView(CudaContext &, const TensorRef &src, const TensorRef &dst,
                cudaStream_t);

/// The KernelLibrary of one CudaDevice.
class CudaKernelLibrary final : public KernelLibrary {
public:
  explicit CudaKernelLibrary(CudaContext *ctx) : ctx_(ctx) {}
  const char *name() const override { return "cuda-sm90a"; }
#define MLART_CUDA_FORWARD(fn, Args)                                           \
  Status fn(const Args &a, StreamHandle s) const override {                    \
    return cuda::fn(*ctx_, a, static_cast<cudaStream_t>(s));                   \
  }
#define MLART_KERNEL_OPCODE(Enum, Value, name, ArgsType, Flags, Fields,        \
                            method)                                            \
  MLART_CUDA_FORWARD(method, ArgsType)
#include "mlart/Opcodes.def"
#undef MLART_CUDA_FORWARD
private:
  CudaContext *ctx_;
};

/// Whether `t` can be moved in 16-byte pieces: absent, or a 16-byte
/// aligned base, a contiguous last dim and 16-byte aligned outer strides.
inline bool rowsAligned16(const TensorRef &t) {
  if (!t.present())
    return true;
  const int64_t es = int64_t(dtypeSize(t.dtype));
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0 ||
      t.strides[t.rank - 1] != 1)
    return false;
  for (int d = 0; d + 1 < t.rank; ++d)
    if ((t.strides[d] * es) % 16 != 0)
      return false;
  return true;
}

// --- Device-side scalar conversions (bit-identical to DType.cpp). ----------
#ifdef __CUDACC__
__device__ __forceinline__ float bf16BitsToFloat(uint16_t h) {
  return __uint_as_float(uint32_t(h) << 16);
}
__device__ __forceinline__ uint16_t floatToBf16Bits(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40);
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return uint16_t((u + rounding) >> 16);
}
/// Two bf16 values in one 32-bit word, `lo` at the lower address.
__device__ __forceinline__ uint32_t packBf16(float lo, float hi) {
  return uint32_t(floatToBf16Bits(lo)) | (uint32_t(floatToBf16Bits(hi)) << 16);
}
__device__ __forceinline__ float f16BitsToFloat(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ uint16_t floatToF16Bits(float f) {
  // __float2half_rn rounds to nearest even, with overflow to inf and NaN kept.
  return __half_as_ushort(__float2half_rn(f));
}
__device__ __forceinline__ float fp8BitsToFloat(uint8_t v) {
  return fp8::decode(v, fp8::e4m3());
}
__device__ __forceinline__ uint8_t floatToFp8Bits(float f) {
  return fp8::encode(f, fp8::e4m3());
}
/// fp8 code `v` of DType `dtype` (e4m3fn or e5m2) as float.
__device__ __forceinline__ float fp8ToFloat(uint8_t v, int dtype) {
  return fp8::decode(v,
                     dtype == int(DType::F8E5M2) ? fp8::e5m2() : fp8::e4m3());
}
/// `f` as an fp8 code of DType `dtype` (e4m3fn or e5m2).
__device__ __forceinline__ uint8_t floatToFp8(float f, int dtype) {
  return fp8::encode(f,
                     dtype == int(DType::F8E5M2) ? fp8::e5m2() : fp8::e4m3());
}
/// Element i of a float-typed buffer as float.
__device__ __forceinline__ float loadF(const void *base, int dtype,
                                       int64_t i) {
  switch (dtype) {
  case int(DType::F32):
    return static_cast<const float *>(base)[i];
  case int(DType::F16):
    return f16BitsToFloat(static_cast<const uint16_t *>(base)[i]);
  case int(DType::BF16):
    return bf16BitsToFloat(static_cast<const uint16_t *>(base)[i]);
  case int(DType::F8E4M3FN):
  case int(DType::F8E5M2):
    return fp8ToFloat(static_cast<const uint8_t *>(base)[i], dtype);
  case int(DType::F64):
    return float(static_cast<const double *>(base)[i]);
  default:
    return 0.0f;
  }
}
__device__ __forceinline__ void storeF(void *base, int dtype, int64_t i,
                                       float v) {
  switch (dtype) {
  case int(DType::F32):
    static_cast<float *>(base)[i] = v;
    return;
  case int(DType::F16):
    static_cast<uint16_t *>(base)[i] = floatToF16Bits(v);
    return;
  case int(DType::BF16):
    static_cast<uint16_t *>(base)[i] = floatToBf16Bits(v);
    return;
  case int(DType::F8E4M3FN):
  case int(DType::F8E5M2):
    static_cast<uint8_t *>(base)[i] = floatToFp8(v, dtype);
    return;
  case int(DType::F64):
    static_cast<double *>(base)[i] = double(v);
    return;
  default:
    return;
  }
}
__device__ __forceinline__ int64_t loadIdx(const void *p, int is64,
                                           int64_t stride, int64_t i) {
  return is64 ? static_cast<const int64_t *>(p)[i * stride]
              : int64_t(static_cast<const int32_t *>(p)[i * stride]);
}
#endif

/// Blocks of `threads` covering `n` items, at most `cap` blocks.
inline unsigned gridFor(int64_t n, int threads, int64_t cap = 65535LL * 32) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1)
    b = 1;
  if (b > cap)
    b = cap;
  return unsigned(b);
}

} // namespace mlart::cuda

#endif // MLART_CUDA_CUDACOMMON_H
