//===- PrefillFlash.h - Tensor-core causal prefill over the new tokens ----===//
//
// The new-token part of prefillAttention (MHA form, causal within each
// request) as a flash-attention kernel on the tensor cores. It covers the
// DeepSeek head shape (q/k 192 = nope 128 + rope 64, v 128) in bf16 or f16;
// other shapes and dtypes keep the CUDA-core kernel (DecodeKernels.cu).
// In its context mode the same kernel attends a request's cached context,
// expanded to MHA form (PrefillContext.h), and a second, causal launch
// merges the two parts by LSE (PrefillKernels.cu). It can also write
// normalised f32 partials and their LSE for the CUDA-core context kernel.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_PREFILLFLASH_H
#define MLART_CUDA_PREFILLFLASH_H

#include "cuda/CudaCommon.h"

#include <cstdint>

namespace mlart::cuda {

/// The head dimensions the flash kernel is built for.
constexpr int kFlashQkDim = 192, kFlashVDim = 128;

struct PrefillFlashParams {
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  int dtype = 0; ///< DType::BF16 or DType::F16, all of q, k, v
  int64_t qS0 = 0, qS1 = 0, kS0 = 0, kS1 = 0, vS0 = 0, vS1 = 0; ///< elements
  /// The result: `out` (bf16, f16 or f32, element strides oS0, oS1, last
  /// dim contiguous) or, when `partial` is set, f32 [T, H, vDim] there.
  void *out = nullptr;
  int outType = 0;
  int64_t oS0 = 0, oS1 = 0;
  float *partial = nullptr;
  float *lse = nullptr; ///< [T, H] (lS0, lS1), or null
  int64_t lS0 = 0, lS1 = 0;
  const int32_t *qsl = nullptr; ///< [R + 1], device
  int R = 0, T = 0, H = 0;
  float scale = 1.0f; ///< softmax scale (natural)
  /// Context mode, when set: k and v hold each request's expanded cached
  /// context (PrefillContext.h), request r's in rows [r * ctxPad,
  /// r * ctxPad + ctxLens[r * ctxStride]), and every new token of request
  /// r sees all of them (no causal mask). Lengths outside [0, ctxPad] are
  /// recorded (badSeqIndex) and read as 0.
  const int32_t *ctxLens = nullptr;
  int64_t ctxStride = 0;
  int ctxPad = 0;
  /// ctxLens holds total lengths (PrefillAttentionArgs::lensIncludeNewTokens).
  bool lensIncludeNew = false;
  /// When set, an earlier launch's normalised f32 rows [T, H, vDim] and
  /// their LSEs [T, H] (natural log, -inf for none): this launch merges its
  /// own rows with them by LSE before writing `out` and `lse`.
  const float *prior = nullptr, *priorLse = nullptr;
};

/// Whether the flash kernel can run these operands: dtypes, head dims, a
/// contiguous last dim, 16-byte aligned rows (cp.async).
bool prefillFlashSupports(const TensorRef &q, const TensorRef &k,
                          const TensorRef &v, const TensorRef &out);

/// Launches it (grid: 64-token chunks of the packed tokens x heads). The
/// caller validated shapes; queryStartLoc's contents are checked by the
/// kernel, malformed bounds recorded in `rec` (badSeqIndex).
Status launchPrefillFlash(const PrefillFlashParams &p, DeviceErrorRecord *rec,
                          cudaStream_t stream);

/// How many times it was launched in this process (tests: the fast path ran).
uint64_t prefillFlashLaunchCount();

#ifdef __CUDACC__
/// Records (badSeqIndex) the first request whose bounds are negative or
/// decrease; run by one CTA of each prefill kernel. Rows are still only
/// read inside [0, T): the kernels clamp what they derive from the bounds.
__device__ __forceinline__ void reportUnorderedBounds(const int32_t *qsl,
                                                      int R,
                                                      DeviceErrorRecord *rec) {
  for (int r = int(threadIdx.x); r < R; r += int(blockDim.x))
    if (qsl[r] < 0 || qsl[r] > qsl[r + 1])
      atomicMin(&rec->badSeqIndex, r);
}

/// The cached context length of request r from `lens` (total lengths when
/// `includeNew`: minus the request's new tokens), or -1 when it lies
/// outside [0, capacity] (the caller records it).
__device__ __forceinline__ int prefillContextLength(const int32_t *lens,
                                                    int64_t stride,
                                                    bool includeNew,
                                                    const int32_t *qsl, int r,
                                                    int64_t capacity) {
  int64_t len = lens[int64_t(r) * stride];
  if (includeNew)
    len -= int64_t(qsl[r + 1]) - qsl[r];
  return len < 0 || len > capacity ? -1 : int(len);
}
#endif

} // namespace mlart::cuda

#endif // MLART_CUDA_PREFILLFLASH_H
