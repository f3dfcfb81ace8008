//===- CacheBulkKernel.cu - Large plain cache updates on the copy engine --===//
//
// cache[slot[t]] = concat(kv_c[t], k_pe[t]) for a pre-validated call with
// 1152-byte rows, moved by Hopper's bulk-copy (TMA) engine instead of by
// threads: the streaming kernel (CacheCopyKernel.cu) stops at ~81 % of the
// copy ceiling at T=65536 because every byte passes through registers and
// a warp's load -> store turn-around leaves DRAM idle; a device-to-device
// memcpy of the same bytes reaches ~96 %. Here registers carry no data:
//  * a CTA is one warp, lane r owns row r of a 32-row chunk; it issues
//    two bulk loads (kv_c row, k_pe row) into its row of a shared-memory
//    stage, counted on the stage's mbarrier, and later one 1152-byte bulk
//    store from that row to cache[slot];
//  * a ring of `Stages` chunk stages: the next chunks' loads are in flight
//    while this chunk's stores drain (bulk async-groups, per thread);
//  * a stage is refilled once its store has finished READING shared
//    memory (cp.async.bulk.wait_group.read), not once it is in DRAM.
// All-or-nothing like the other kernels: nothing is stored when the
// validation kernel's verdict (callFailed) is set, and every store is
// range-checked (slot in [0, numSlots)).
//
//===----------------------------------------------------------------------===//
#include "cuda/CacheBulkKernel.h"

#include "cuda/Launch.h"
#include "cuda/Sm90Ptx.h"

#include <algorithm>
#include <climits>

namespace mlart::cuda {
namespace {

constexpr int kBulkRows = 32; // a lane a row
constexpr uint32_t kRowBytes = uint32_t(kCacheCopyChunks) * 16;
constexpr uint32_t kStageBytes = kBulkRows * kRowBytes; // 36 KB

__device__ __forceinline__ uint32_t smemAddr(const void *p) {
  return uint32_t(__cvta_generic_to_shared(p));
}

/// An L2 policy that evicts these lines first: every byte is touched once.
__device__ __forceinline__ uint64_t evictFirstPolicy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;"
               : "=l"(policy));
  return policy;
}

/// Bulk copy global -> shared, `bytes` counted on mbarrier `bar`.
template <bool Hint>
__device__ __forceinline__ void bulkLoad(uint32_t dst, const uint8_t *src,
                                         uint32_t bytes, uint32_t bar,
                                         uint64_t policy) {
  if constexpr (Hint)
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx"
                 "::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar), "l"(policy)
                 : "memory");
  else
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx"
                 "::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

/// Bulk copy shared -> global, in this thread's current bulk async-group.
template <bool Hint>
__device__ __forceinline__ void bulkStore(uint8_t *dst, uint32_t src,
                                          uint32_t bytes, uint64_t policy) {
  if constexpr (Hint)
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint"
                 " [%0], [%1], %2, %3;" ::"l"(dst),
                 "r"(src), "r"(bytes), "l"(policy)
                 : "memory");
  else
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::
                     "l"(dst),
                 "r"(src), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void bulkCommit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
/// Waits until at most N of this thread's groups still read shared memory.
template <int N> __device__ __forceinline__ void bulkWaitRead() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
/// Waits until all of this thread's groups are complete (writes performed).
__device__ __forceinline__ void bulkWaitAll() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

/// The ring: `Stages` stages of 32 rows, their mbarriers, and each lane's
/// checked destination row per stage (-1: store nothing).
template <int Stages> struct Ring {
  uint64_t full[Stages];
  int rows[Stages][kBulkRows];
};

/// Issues local chunk `j` (global chunk blockIdx.x + j * gridDim.x) into
/// stage j % Stages: lane r loads row r's two source pieces and its slot.
/// Source rows t < T always exist, so the loads wait for nothing; the slot
/// is loaded at L2 (ld.cg) since this may run before the dependent-launch
/// wait (CacheCopyKernel.cu argues why that is safe).
template <int Stages, bool Hint>
__device__ __forceinline__ void issueChunk(const CacheCopyParams &p,
                                           Ring<Stages> &ring, uint8_t *stages,
                                           int64_t j, uint64_t policy) {
  const int s = int(j % Stages);
  const int64_t first = (int64_t(blockIdx.x) + j * gridDim.x) * kBulkRows;
  const int n = int(min(int64_t(kBulkRows), p.T - first));
  const int lane = int(threadIdx.x);
  const uint32_t bar = smemAddr(&ring.full[s]);
  if (lane == 0)
    sm90::mbarArriveExpectTx(bar, uint32_t(n) * kRowBytes);
  __syncwarp(); // the phase's byte count is set before any byte lands
  int row = -1;
  if (lane < n) {
    const int64_t t = first + lane;
    const uint32_t dst = smemAddr(stages + size_t(s) * kStageBytes +
                                  size_t(lane) * kRowBytes);
    const uint32_t kvBytes = uint32_t(p.kvChunks) * 16;
    bulkLoad<Hint>(dst, p.kv + t * p.kvStride, kvBytes, bar, policy);
    bulkLoad<Hint>(dst + kvBytes, p.kp + t * p.kpStride, kRowBytes - kvBytes,
                   bar, policy);
    const int64_t slot = loadSlotL2(p, t);
    // Validated already; checked again so that even a racing misuse can
    // never write outside the cache (numSlots <= INT_MAX: host).
    if (uint64_t(slot) < uint64_t(p.numSlots))
      row = int(slot);
  }
  ring.rows[s][lane] = row; // read back by this lane only
}

template <int Stages, bool Early, int Hints>
__global__ void __launch_bounds__(kBulkRows)
    cacheBulkKernel(CacheCopyParams p) {
  extern __shared__ __align__(128) uint8_t stages[]; // Stages * kStageBytes
  __shared__ Ring<Stages> ring;
  constexpr bool kLoadHint = Hints >= 1, kStoreHint = Hints == 1;
  const uint64_t policy = Hints ? evictFirstPolicy() : 0;
  const int lane = int(threadIdx.x);
  const int64_t chunks = (p.T + kBulkRows - 1) / kBulkRows;
  // Local chunks j = 0 .. mine - 1 (the host sizes the grid: mine >= 1).
  const int64_t mine =
      (chunks - int64_t(blockIdx.x) + gridDim.x - 1) / gridDim.x;
  if (lane == 0) {
    for (int s = 0; s < Stages; ++s)
      sm90::mbarInit(smemAddr(&ring.full[s]), 1);
    sm90::fenceMbarInit();
  }
  __syncwarp();
  const int64_t primed = min(int64_t(Stages), mine);
  if constexpr (Early)
    for (int64_t j = 0; j < primed; ++j)
      issueChunk<Stages, kLoadHint>(p, ring, stages, j, policy);
  pdlPrologue();
  const bool failed = *reinterpret_cast<const volatile int *>(p.callFailed);
  if constexpr (!Early)
    if (!failed)
      for (int64_t j = 0; j < primed; ++j)
        issueChunk<Stages, kLoadHint>(p, ring, stages, j, policy);
  if (failed) {
    // Nothing of a failed call is written; the loads already issued must
    // land before the CTA's shared memory goes away.
    if constexpr (Early)
      for (int64_t j = 0; j < primed; ++j)
        sm90::mbarWait(smemAddr(&ring.full[j % Stages]), 0);
    return;
  }
  for (int64_t j = 0; j < mine; ++j) {
    const int s = int(j % Stages);
    sm90::mbarWait(smemAddr(&ring.full[s]), uint32_t(j / Stages) & 1);
    // The stage was written by the async proxy; the store reads it there.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    const int row = ring.rows[s][lane];
    if (row >= 0)
      bulkStore<kStoreHint>(p.cache + int64_t(row) * kRowBytes,
                            smemAddr(stages + size_t(s) * kStageBytes +
                                     size_t(lane) * kRowBytes),
                            kRowBytes, policy);
    bulkCommit(); // one group a chunk, empty or not: the counts below hold
    if constexpr (Stages == 1) {
      if (j + 1 < mine) {
        bulkWaitRead<0>();
        __syncwarp(); // every lane's store has read the stage
        issueChunk<Stages, kLoadHint>(p, ring, stages, j + 1, policy);
      }
    } else if (j >= 1 && j - 1 + Stages < mine) {
      // Refill chunk j - 1's stage: its store (the group before this one)
      // has read it; this chunk's store may still be reading its own.
      bulkWaitRead<1>();
      __syncwarp();
      issueChunk<Stages, kLoadHint>(p, ring, stages, j - 1 + Stages, policy);
    }
  }
  // The writes are performed before the grid counts as complete for the
  // kernels that wait on it (and before shared memory goes away).
  bulkWaitAll();
}

using KernelFn = void (*)(CacheCopyParams);

template <int Stages, bool Early> KernelFn pickHints(int hints) {
  switch (hints) {
  case 0:
    return cacheBulkKernel<Stages, Early, 0>;
  case 1:
    return cacheBulkKernel<Stages, Early, 1>;
  default:
    return cacheBulkKernel<Stages, Early, 2>;
  }
}
template <int Stages> KernelFn pickEarly(const CacheCopyConfig &c) {
  return c.early ? pickHints<Stages, true>(c.hints)
                 : pickHints<Stages, false>(c.hints);
}
KernelFn pickKernel(const CacheCopyConfig &c) {
  switch (c.stages) {
  case 1:
    return pickEarly<1>(c);
  case 3:
    return pickEarly<3>(c);
  case 4:
    return pickEarly<4>(c);
  case 6:
    return pickEarly<6>(c);
  default:
    return pickEarly<2>(c);
  }
}

} // namespace

Status launchCacheBulk(CudaContext &ctx, const CacheCopyParams &p,
                       const CacheCopyConfig &cfg, cudaStream_t stream) {
  const KernelFn kernel = pickKernel(cfg);
  const size_t smem = size_t(kStageBytes) * size_t(std::max(cfg.stages, 1));
  MLART_RETURN_IF_ERROR(allowDynamicSmem(kernel, smem, "cacheBulkKernel"));
  MLART_ASSIGN_OR_RETURN(
      const int64_t grid,
      cacheCopyGrid(ctx, reinterpret_cast<const void *>(kernel), kBulkRows,
                    smem, (p.T + kBulkRows - 1) / kBulkRows, cfg.ctasPerSm));
  return launchKernel("cacheBulkKernel", kernel, dim3(unsigned(grid)),
                      dim3(kBulkRows), smem, stream, p);
}

} // namespace mlart::cuda
