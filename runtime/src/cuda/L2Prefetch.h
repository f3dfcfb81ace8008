//===- L2Prefetch.h - L2 prefetch hints shared by the CUDA kernels --------===//
//
// The executor's prefetch plan (mlart/PrefetchPlan.h) reaches the device in
// two ways: the start hint (prefetchL2, L2Prefetch.cu), a kernel of its own
// on a side stream, and DecodeAttentionArgs::prefetchAfter, which the
// 16-head decode kernel issues when each CTA reaches its last tile. Both
// only ask L2 for bytes (cp.async.bulk.prefetch.L2): nothing lands in
// registers or shared memory and nothing is written, so a hint is safe
// before griddepcontrol.wait and beside any kernel (L2 is the point of
// coherence). Off with MLART_L2_PREFETCH=0.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_L2PREFETCH_H
#define MLART_CUDA_L2PREFETCH_H

#include "cuda/CudaCommon.h"
#include "mlart/Kernels.h"

#include <cstdint>

namespace mlart::cuda {

/// Ranges as the kernels take them: 16-byte aligned starts and lengths (a
/// range's partial 16-byte units at either end are left out, so a hint
/// never reaches outside the caller's bytes).
struct PrefetchSpans {
  const uint8_t *data[kMaxPrefetchRanges];
  int64_t bytes[kMaxPrefetchRanges];
  int count;
};

/// Bytes one prefetch instruction asks for.
constexpr int64_t kPrefetchPiece = 4096;

/// Host: `n` ranges (n <= kMaxPrefetchRanges) rounded inward to 16 bytes;
/// empty ones dropped. Spans of nothing when MLART_L2_PREFETCH=0.
PrefetchSpans makePrefetchSpans(const PrefetchRange *ranges, int n);

#ifdef __CUDACC__
/// Prefetches share `worker` of `workers` of the spans: the spans are cut
/// into kPrefetchPiece pieces, numbered in order across the spans, and
/// piece k goes to worker k % workers, so every worker asks for the first
/// span's bytes before the next span's.
__device__ __forceinline__ void prefetchShare(const PrefetchSpans &s,
                                              int64_t worker,
                                              int64_t workers) {
  int64_t first = 0; // number of the span's first piece
  for (int r = 0; r < s.count; ++r) {
    const int64_t pieces = (s.bytes[r] + kPrefetchPiece - 1) / kPrefetchPiece;
    int64_t k = ((worker - first) % workers + workers) % workers;
    for (; k < pieces; k += workers) {
      const int64_t off = k * kPrefetchPiece;
      const int64_t len = s.bytes[r] - off < kPrefetchPiece
                              ? s.bytes[r] - off
                              : kPrefetchPiece;
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(
                       s.data[r] + off),
                   "r"(uint32_t(len))
                   : "memory");
    }
    first += pieces;
  }
}
#endif

} // namespace mlart::cuda

#endif // MLART_CUDA_L2PREFETCH_H
