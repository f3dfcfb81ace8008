//===- DecodeStepWrite.h - The cache write inside the decode kernel -------===//
//
// decode_attention_with_update in one launch (the 16-head kernels of
// DecodeKernels.cu). No CTA waits for another: each one
//  * checks all of the step's slots first (a bad one means no row is stored
//    and none is substituted, as cacheUpdate's all-or-nothing rule);
//  * stores its share of the rows, a warp a token, spread over the grid;
//  * attends with every row the step writes taken from the inputs instead
//    of the cache: once a tile is in shared memory, the rows whose slot is
//    written this step are overwritten with the input rows, so a row is never
//    read back and a torn read of a row being stored is never used.
// Plain caches only, where a stored row is the input bytes: the
// substitution is then exact. Duplicate slots: the last token stores its
// row and is the one substituted, as on the CPU.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_DECODESTEPWRITE_H
#define MLART_CUDA_DECODESTEPWRITE_H

#include "cuda/CudaCommon.h"

#include <cstdint>

namespace mlart::cuda {

/// The rows a decode launch stores (tokens == 0: none; the plain decode).
struct StepWrite {
  const uint8_t *kvC = nullptr, *kPe = nullptr;
  int64_t kvStride = 0,
          kpStride = 0; ///< bytes from one token's row to the next
  int latentChunks = 0, ropeChunks = 0; ///< 16-byte chunks of each part
  const void *slots = nullptr;
  int slot64 = 0;
  int64_t slotStride = 0;
  int tokens = 0;           ///< slot_mapping entries
  uint8_t *cache = nullptr; ///< the cache, writable
  int64_t numSlots = 0;
};

/// Most slots a fused launch takes: every CTA reads all of them first.
constexpr int kMaxStepWriteTokens = 1024;

#ifdef __CUDACC__
__device__ __forceinline__ int64_t stepSlot(const StepWrite &w, int t) {
  return loadIdx(w.slots, w.slot64, w.slotStride, t);
}

/// Whether every slot is negative (not stored) or inside the cache. Every
/// thread of the CTA calls it; `record`: this CTA reports the first bad
/// index in the error record, as cacheUpdate does.
__device__ __forceinline__ bool
stepSlotsValid(const StepWrite &w, DeviceErrorRecord *rec, bool record) {
  bool bad = false;
  for (int t = threadIdx.x; t < w.tokens; t += blockDim.x) {
    if (stepSlot(w, t) >= w.numSlots) {
      bad = true;
      if (record)
        atomicMin(&rec->badSlotIndex, t);
    }
  }
  return !__syncthreads_or(bad);
}

/// Copies token t's row (latent then rope, 16-byte chunks over the warp's
/// lanes) to dst, which is 16-byte aligned.
__device__ __forceinline__ void copyStepRow(const StepWrite &w, int t,
                                            uint8_t *dst, int lane) {
  const uint8_t *kv = w.kvC + t * w.kvStride, *kp = w.kPe + t * w.kpStride;
  const int n = w.latentChunks + w.ropeChunks;
  for (int c = lane; c < n; c += 32) {
    const uint4 v =
        c < w.latentChunks
            ? __ldg(reinterpret_cast<const uint4 *>(kv) + c)
            : __ldg(reinterpret_cast<const uint4 *>(kp) + (c - w.latentChunks));
    *reinterpret_cast<uint4 *>(dst + 16 * c) = v;
  }
}

/// Whether no later token writes slot s (warp-wide; token t's warp).
__device__ __forceinline__ bool lastWriterOf(const StepWrite &w, int t,
                                             int64_t s, int lane) {
  bool later = false;
  for (int u = t + 1 + lane; u < w.tokens; u += 32)
    later |= stepSlot(w, u) == s;
  return !__any_sync(0xffffffffu, later);
}

/// This CTA's share of the rows: warp `warp` of CTA `cta` (of `ctas`, with
/// `warps` warps each) stores tokens gw, gw + ctas * warps, ...
__device__ __forceinline__ void
storeStepRows(const StepWrite &w, int64_t blockSize, int64_t blockStride,
              int64_t rowBytes, int64_t cta, int64_t ctas, int warps) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t t = cta * warps + warp; t < w.tokens; t += ctas * warps) {
    const int64_t s = stepSlot(w, int(t));
    if (s < 0 || !lastWriterOf(w, int(t), s, lane))
      continue;
    copyStepRow(w, int(t),
                w.cache + (s / blockSize) * blockStride +
                    (s % blockSize) * rowBytes,
                lane);
  }
}
#endif // __CUDACC__

} // namespace mlart::cuda

#endif // MLART_CUDA_DECODESTEPWRITE_H
