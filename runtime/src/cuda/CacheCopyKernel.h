//===- CacheCopyKernel.h - Streaming kernel for large plain cache updates -===//
//
// The common large cacheUpdate (pre-validated, plain bf16/f16 rows of 72
// 16-byte chunks, no rope, no checked mode) as a dedicated copy kernel;
// CacheKernels.cu falls back to its general kernel for everything else.
// The variants are chosen at run time (docs/cuda.md, "Large plain
// updates") so that one GPU session can time all of them.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_CACHECOPYKERNEL_H
#define MLART_CUDA_CACHECOPYKERNEL_H

#include "cuda/CudaCommon.h"

#include <optional>
#include <string>

namespace mlart::cuda {

/// Which kernel writes a large plain update (MLART_UPDATE_KERNEL's values).
enum class UpdateKernel : int {
  General = 0,   ///< CacheKernels.cu's general kernel
  Streaming = 1, ///< this file's streaming copy kernel
  Bulk = 2,      ///< the bulk-copy (TMA engine) kernel, CacheBulkKernel.h
};

/// Which kernel writes a large plain update, and its compiled-in variant.
struct CacheCopyConfig {
  /// MLART_UPDATE_KERNEL. Defaults: the fastest of the H200 sweep (T=65536,
  /// random slots): the bulk kernel, one 32-row chunk a CTA, early loads,
  /// hints 1: 43.9 us against 44.6 us for the streaming kernel (U=8, one
  /// tile a CTA) and 45.6 us for the general one in the same run
  /// (docs/results/h200.md, the `update65536` rows).
  UpdateKernel kernel = UpdateKernel::Bulk;
  /// MLART_UPDATE_STAGES: the bulk kernel's ring of 32-row stages (36 KB
  /// each) when persistent; one chunk a CTA (ctasPerSm 0) uses one stage.
  int stages = 2;
  int unroll = 8;       ///< MLART_UPDATE_UNROLL: 16-byte loads a thread, 4/8/16
  /// MLART_UPDATE_CTAS_PER_SM: 0 = one tile (bulk: one 32-row chunk) per
  /// CTA (no persistence), else a persistent grid of that many CTAs an SM
  /// (1/2/4/8), capped by what fits on an SM.
  int ctasPerSm = 0;
  bool early = true; ///< MLART_UPDATE_EARLY: first tile loaded before the PDL wait
  /// MLART_UPDATE_HINTS: 0 plain loads/stores; 1 ld.global.nc.L1::no_allocate
  /// sources, st.global.cs rows; 2 = 1 plus the L2::256B prefetch hint.
  int hints = 1;
};

/// The configuration from the knob table (Knobs.h: MLART_UPDATE_*), unless
/// a test or the bench overrides it.
CacheCopyConfig cacheCopyConfig();
/// Tests and mla-bench: use `c` for the calls that follow (as knob
/// overrides, Knobs.h); nullopt goes back to the environment. Calls
/// already captured in a graph keep theirs.
void setCacheCopyConfigForTesting(std::optional<CacheCopyConfig> c);
/// Launches of the copy kernel so far (tests: which kernel a call took).
uint64_t cacheCopyLaunchCount();
/// "U=8 ctas/SM=4 early hints=1", "bulk S=3 ctas/SM=2 early hints=1"
/// (bench row names, messages).
std::string describe(const CacheCopyConfig &c);

/// One large plain update. Byte strides; slots as in WriteParams.
struct CacheCopyParams {
  const uint8_t *kv = nullptr; ///< kv_c row 0
  int64_t kvStride = 0;        ///< bytes between kv_c rows
  const uint8_t *kp = nullptr; ///< k_pe row 0
  int64_t kpStride = 0;        ///< bytes between k_pe rows
  const void *slots = nullptr;
  int slot64 = 0;
  int64_t slotStride = 0; ///< elements
  int64_t T = 0;          ///< tokens written (min of tokens and slots)
  uint8_t *cache = nullptr;
  int64_t numSlots = 0;
  int kvChunks = 0; ///< 16-byte chunks of a row from kv_c; the rest from k_pe
  const int *callFailed = nullptr; ///< the validation kernel's verdict
};

/// 16-byte chunks in a row this kernel writes (bf16/f16 512 + 64).
constexpr int kCacheCopyChunks = 72;

/// The grid of a large-update kernel over `work` items (tiles or chunks):
/// one item a CTA when `ctasPerSm` is 0; else a persistent grid of that
/// many CTAs an SM, capped by what fits (`kernel` with `threads` threads and
/// `smem` dynamic bytes, asked once per kernel) and shrunk so that every
/// CTA gets the same number of items (2048 items on a cap of 396 CTAs
/// would leave a sixth round with 68 CTAs in flight; 342 CTAs do 6 each).
StatusOr<int64_t> cacheCopyGrid(const CudaContext &ctx, const void *kernel,
                                int threads, size_t smem, int64_t work,
                                int ctasPerSm);

#ifdef __CUDACC__
/// slot_mapping[t] read at L2 (ld.global.cg): the large-update kernels
/// load slots before the dependent-launch wait (CacheCopyKernel.cu argues
/// why that is safe), where no L1 line may be trusted.
__device__ __forceinline__ int64_t loadSlotL2(const CacheCopyParams &p,
                                              int64_t t) {
  if (p.slot64) {
    int64_t s;
    asm volatile("ld.global.cg.s64 %0, [%1];"
                 : "=l"(s)
                 : "l"(static_cast<const int64_t *>(p.slots) + t * p.slotStride));
    return s;
  }
  int s;
  asm volatile("ld.global.cg.s32 %0, [%1];"
               : "=r"(s)
               : "l"(static_cast<const int32_t *>(p.slots) + t * p.slotStride));
  return s;
}
#endif

/// Launches the kernel of `cfg` for a call that the validation kernel,
/// launched just before on `stream`, checks. The caller has established
/// that the call qualifies (CacheKernels.cu: plain, 16-byte aligned,
/// kCacheCopyChunks chunks a row, no rope, no write protection).
Status launchCacheCopy(CudaContext &ctx, const CacheCopyParams &p,
                       const CacheCopyConfig &cfg, cudaStream_t stream);

} // namespace mlart::cuda

#endif // MLART_CUDA_CACHECOPYKERNEL_H
