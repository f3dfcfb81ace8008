//===- CacheCopyKernel.cu - Streaming kernel for large plain cache updates -===//
//
// cache[slot[t]] = concat(kv_c[t], k_pe[t]) for a pre-validated call with
// 1152-byte rows (72 16-byte chunks: kvChunks from kv_c, the rest from
// k_pe). The general kernel (CacheKernels.cu) reaches 78 % of the copy
// ceiling here: 80 registers, 3 CTAs an SM, a warp per token that loads
// ~6 chunks a lane, stores them and exits. This one is built for bytes in
// flight with few registers:
//  * 288 threads = 4 tokens x 72 chunks, so a thread keeps ONE chunk
//    column for the whole kernel (no division anywhere); a CTA step takes
//    a tile of 4U consecutive tokens, U chunks a thread, coalesced
//    (a warp reads 512 contiguous bytes of a source row, writes 512 of a
//    cache row);
//  * every thread issues its U 16-byte loads before any store; the first
//    4U threads also load the tile's slots and leave them, range-checked,
//    as row indices in shared memory (one barrier a tile), so the other
//    threads neither load slots nor keep them in registers;
//  * a persistent grid of a few CTAs an SM walks the tiles grid-stride,
//    sized so that every CTA gets the same number of tiles (no tail
//    round with a few CTAs in flight).
// All-or-nothing as the general kernel: nothing is stored when the
// validation kernel's verdict (callFailed) is set, and every store is
// range-checked (slot in [0, numSlots)) all the same.
//
//===----------------------------------------------------------------------===//
#include "cuda/CacheCopyKernel.h"
#include "cuda/CacheBulkKernel.h"
#include "cuda/Knobs.h"

#include "cuda/Launch.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

namespace mlart::cuda {
namespace {

constexpr int kTokensPerPass = 4;
constexpr int kCopyThreads = kCacheCopyChunks * kTokensPerPass; // 288
constexpr int64_t kRowBytes = int64_t(kCacheCopyChunks) * 16;
static_assert(kCopyThreads % 32 == 0, "whole warps");

/// 16-byte source load with the variant's cache hints.
template <int Hints>
__device__ __forceinline__ uint4 loadChunk(const uint8_t *p) {
  uint4 v;
  if constexpr (Hints == 0) {
    v = *reinterpret_cast<const uint4 *>(p);
  } else if constexpr (Hints == 1) {
    // Read once: no L1 allocation.
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  } else {
    asm volatile(
        "ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
  }
  return v;
}

/// The loads issued before the dependent-launch wait read at L2, the point
/// of coherence (see cacheCopyKernel: no L1 line can be stale).
__device__ __forceinline__ uint4 loadChunkL2(const uint8_t *p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

template <int Hints>
__device__ __forceinline__ void storeChunk(uint8_t *p, uint4 v) {
  if constexpr (Hints == 0) {
    *reinterpret_cast<uint4 *>(p) = v;
  } else {
    // Written once here, read by a later decode kernel: evict-first.
    // volatile keeps it in order with the (volatile) loads; no "memory"
    // clobber, so the row indices need not be re-read around it.
    asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p),
                 "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w));
  }
}

/// This thread's chunk column, fixed for the whole kernel.
struct Column {
  const uint8_t *src; ///< chunk `col` of source row 0
  int64_t srcStride;  ///< bytes between source rows
  uint8_t *dst;       ///< chunk `col` of cache row 0
  int row;            ///< 0..3: token within a pass
};

/// Issues a tile's loads: this thread's U chunks (tokens row, row + 4, ...
/// of the tile), then, on the first 4U threads, one slot each, turned into
/// a checked row index in `rows` (-1: write nothing). The slot's compare
/// waits for its load, but only after every chunk load is in flight, and
/// only on those few threads.
template <int U, int Hints, bool L2Only>
__device__ __forceinline__ void loadTile(const CacheCopyParams &p,
                                         const Column &c, int64_t tile,
                                         uint4 (&v)[U], int *rows) {
  constexpr int kTile = U * kTokensPerPass;
  const int64_t first = tile * kTile;
#pragma unroll
  for (int j = 0; j < U; ++j) {
    const int64_t t = first + c.row + j * kTokensPerPass;
    // Source rows t < T always exist: no wait on the slot.
    if (t < p.T)
      v[j] = L2Only ? loadChunkL2(c.src + t * c.srcStride)
                    : loadChunk<Hints>(c.src + t * c.srcStride);
  }
  if (threadIdx.x < kTile) {
    const int64_t t = first + threadIdx.x;
    int row = -1;
    if (t < p.T) {
      const int64_t s = L2Only ? loadSlotL2(p, t)
                               : loadIdx(p.slots, p.slot64, p.slotStride, t);
      // Validated already; checked again so that even a racing misuse can
      // never write outside the cache (numSlots <= INT_MAX: host).
      if (uint64_t(s) < uint64_t(p.numSlots))
        row = int(s);
    }
    rows[threadIdx.x] = row;
  }
}

template <int U, int Hints>
__device__ __forceinline__ void storeTile(const Column &c, const uint4 (&v)[U],
                                          const int *rows) {
  // All row indices first: one shared-memory round trip, not U.
  int row[U];
#pragma unroll
  for (int j = 0; j < U; ++j)
    row[j] = rows[c.row + j * kTokensPerPass];
#pragma unroll
  for (int j = 0; j < U; ++j)
    if (row[j] >= 0)
      storeChunk<Hints>(c.dst + int64_t(row[j]) * kRowBytes, v[j]);
}

/// CTAs an SM the register budget is sized for (4U registers of chunks a
/// thread plus addresses): U=4 five (<= 40 registers; ptxas spills 8 bytes
/// in three of its six variants), U=8 three (72), U=16 two (96).
template <int U> constexpr int minCtasPerSm() {
  return U <= 4 ? 5 : U <= 8 ? 3 : 2;
}

/// Early (the first tile loaded before the dependent-launch wait): safe
/// because of what precedes this kernel. Its only prerequisite grid is the
/// validation kernel that the same call launched just before on the same
/// stream; that kernel writes nothing but the device error record, which
/// is read here only after the wait. Everything read early (kv_c, k_pe,
/// slot_mapping) was written by grids before the validation kernel, and
/// those have completed with their writes performed before this grid
/// starts: the validation kernel runs griddepcontrol.wait before its
/// launch_dependents, and this grid is launched only once every CTA of it
/// has triggered; a prerequisite without PDL, or reached through an event
/// (side streams, graph edges), is even complete before the validation
/// kernel starts. The early loads use ld.global.cg (L2, the point of
/// coherence), so no L1 line left by an older kernel can be read stale.
/// Nothing global is stored before the wait, and this kernel never writes
/// its sources.
template <int U, bool Early, int Hints>
__global__ void __launch_bounds__(kCopyThreads, minCtasPerSm<U>())
    cacheCopyKernel(CacheCopyParams p) {
  constexpr int kTile = U * kTokensPerPass;
  // Checked row indices of a tile's tokens, double-buffered: tile k + 1's
  // are written while a slower warp may still read tile k's.
  __shared__ int rows[2][kTile];
  __shared__ int failed;
  const int col = int(threadIdx.x) % kCacheCopyChunks;
  Column c;
  c.row = int(threadIdx.x) / kCacheCopyChunks;
  const bool fromKv = col < p.kvChunks;
  c.src = fromKv ? p.kv + col * 16 : p.kp + (col - p.kvChunks) * 16;
  c.srcStride = fromKv ? p.kvStride : p.kpStride;
  c.dst = p.cache + col * 16;
  const int64_t tiles = (p.T + kTile - 1) / kTile;
  const int64_t step = gridDim.x;
  int64_t tile = blockIdx.x; // < tiles: the host sizes the grid
  uint4 v[U];
  if constexpr (Early)
    loadTile<U, Hints, true>(p, c, tile, v, rows[0]);
  pdlPrologue();
  if (threadIdx.x == 0)
    failed = *reinterpret_cast<const volatile int *>(p.callFailed);
  if constexpr (!Early)
    loadTile<U, Hints, false>(p, c, tile, v, rows[0]);
  __syncthreads(); // rows[0] and the verdict
  if (failed)
    return; // the whole CTA: nothing of a failed call is written
  for (int buf = 0;; buf ^= 1) {
    storeTile<U, Hints>(c, v, rows[buf]);
    tile += step;
    if (tile >= tiles)
      break;
    loadTile<U, Hints, false>(p, c, tile, v, rows[buf ^ 1]);
    // rows[buf ^ 1] written before anyone reads it. Its previous readers
    // (tile - 2 step) all passed the barrier before this one's loads.
    __syncthreads();
  }
}

using KernelFn = void (*)(CacheCopyParams);

template <int U, bool Early> KernelFn pickHints(int hints) {
  switch (hints) {
  case 0:
    return cacheCopyKernel<U, Early, 0>;
  case 1:
    return cacheCopyKernel<U, Early, 1>;
  default:
    return cacheCopyKernel<U, Early, 2>;
  }
}
template <int U> KernelFn pickEarly(const CacheCopyConfig &c) {
  return c.early ? pickHints<U, true>(c.hints) : pickHints<U, false>(c.hints);
}
KernelFn pickKernel(const CacheCopyConfig &c) {
  switch (c.unroll) {
  case 4:
    return pickEarly<4>(c);
  case 16:
    return pickEarly<16>(c);
  default:
    return pickEarly<8>(c);
  }
}

std::atomic<uint64_t> launches{0};


} // namespace

StatusOr<int64_t> cacheCopyGrid(const CudaContext &ctx, const void *kernel,
                                int threads, size_t smem, int64_t work,
                                int ctasPerSm) {
  work = std::max<int64_t>(1, work);
  if (ctasPerSm <= 0)
    return std::min<int64_t>(work, INT_MAX);
  int fit = 0;
  {
    static std::mutex mu;
    static std::vector<std::pair<const void *, int>> known;
    std::lock_guard<std::mutex> lock(mu);
    for (const auto &k : known)
      if (k.first == kernel)
        fit = k.second;
    if (fit == 0) {
      MLART_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                           &fit, kernel, threads, smem),
                       "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
      fit = std::max(fit, 1);
      known.emplace_back(kernel, fit);
    }
  }
  const int64_t cap =
      std::max<int64_t>(1, int64_t(ctx.smCount) * std::min(ctasPerSm, fit));
  const int64_t rounds = (work + cap - 1) / cap;
  return (work + rounds - 1) / rounds;
}

CacheCopyConfig cacheCopyConfig() {
  // The knob table (Knobs.h) reads and checks the environment once and
  // holds the overrides of tests and the bench.
  CacheCopyConfig c;
  c.kernel = static_cast<UpdateKernel>(knobValue(Knob::UpdateKernel));
  c.stages = knobValue(Knob::UpdateStages);
  c.unroll = knobValue(Knob::UpdateUnroll);
  c.ctasPerSm = knobValue(Knob::UpdateCtasPerSm);
  c.early = knobValue(Knob::UpdateEarly) == 1;
  c.hints = knobValue(Knob::UpdateHints);
  return c;
}

void setCacheCopyConfigForTesting(std::optional<CacheCopyConfig> c) {
  auto set = [&](Knob k, int v) {
    setKnobOverride(k, c ? std::optional<int>(v) : std::nullopt);
  };
  const CacheCopyConfig v = c.value_or(CacheCopyConfig());
  set(Knob::UpdateKernel, int(v.kernel));
  set(Knob::UpdateStages, v.stages);
  set(Knob::UpdateUnroll, v.unroll);
  set(Knob::UpdateCtasPerSm, v.ctasPerSm);
  set(Knob::UpdateEarly, v.early ? 1 : 0);
  set(Knob::UpdateHints, v.hints);
}

std::string describe(const CacheCopyConfig &c) {
  const bool bulk = c.kernel == UpdateKernel::Bulk;
  std::string s =
      (bulk ? "bulk S=" + std::to_string(c.ctasPerSm ? c.stages : 1)
            : "U=" + std::to_string(c.unroll)) +
      (c.ctasPerSm ? " ctas/SM=" + std::to_string(c.ctasPerSm)
                   : std::string(bulk ? " chunk/CTA" : " tile/CTA"));
  s += c.early ? " early" : " wait";
  s += " hints=" + std::to_string(c.hints);
  return s;
}

Status launchCacheCopy(CudaContext &ctx, const CacheCopyParams &p,
                       const CacheCopyConfig &cfg, cudaStream_t stream) {
  if (cfg.kernel == UpdateKernel::Bulk) {
    CacheCopyConfig b = cfg;
    if (b.ctasPerSm == 0)
      b.stages = 1; // one chunk a CTA: a ring would be idle shared memory
    launches.fetch_add(1, std::memory_order_relaxed);
    return launchCacheBulk(ctx, p, b, stream);
  }
  const KernelFn kernel = pickKernel(cfg);
  const int64_t tileTokens = int64_t(kTokensPerPass) * cfg.unroll;
  MLART_ASSIGN_OR_RETURN(
      const int64_t grid,
      cacheCopyGrid(ctx, reinterpret_cast<const void *>(kernel), kCopyThreads,
                    0, (p.T + tileTokens - 1) / tileTokens, cfg.ctasPerSm));
  launches.fetch_add(1, std::memory_order_relaxed);
  return launchKernel("cacheCopyKernel", kernel, dim3(unsigned(grid)),
                      dim3(kCopyThreads), 0, stream, p);
}

uint64_t cacheCopyLaunchCount() {
  return launches.load(std::memory_order_relaxed);
}

} // namespace mlart::cuda
