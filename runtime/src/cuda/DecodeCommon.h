//===- DecodeCommon.h - Types shared by the decode kernels ----------------===//
//
// The paged-cache view and the launch parameters of the tensor-core decode
// paths: DecodeKernels.cu (16-head groups, mma.sync, the split combine and
// the dispatch) and DecodeManyHeads.cu (64-head groups, wgmma).
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_DECODECOMMON_H
#define MLART_CUDA_DECODECOMMON_H

#include "cuda/CudaCommon.h"
#include "cuda/DecodeSchedule.h"
#include "cuda/DecodeStepWrite.h"
#include "mlart/StatusOr.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace mlart::cuda {

/// Query/key width (latent 512 + rope 64), value width, tokens a KV tile.
constexpr int kD = 576, kDv = 512, kTile = 64;
/// Most splits of one sequence (the combine kernel's shared array).
constexpr int kMaxSplits = 128;
/// Most splits the 16-head kernel merges inside one thread-block cluster
/// (the portable cluster size); more go through the combine kernel.
constexpr int kMaxClusterSplits = 8;

/// Time model of a split-KV decode launch with one CTA per SM, in a unit of
/// the caller's choice: waves x (tiles a split x tileCost + ctaCost), plus
/// for more than one split combineCost and the f32 partials
/// (partialBytesPerCta per CTA and split, at bytesPerCost).
struct SplitCostModel {
  double tileCost, ctaCost, combineCost;
  int64_t partialBytesPerCta = 0;
  double bytesPerCost = 1.0;
};

/// The split count (1..kMaxSplits, at least two tiles a split) that
/// minimises `model` for `ctas` CTAs a split over sequences of maxLen tokens.
inline int chooseDecodeSplits(int smCount, int64_t ctas, int64_t maxLen,
                              const SplitCostModel &model) {
  const int64_t base = std::max<int64_t>(1, ctas);
  const int64_t tiles = std::max<int64_t>(1, (maxLen + kTile - 1) / kTile);
  const int64_t maxS = std::min<int64_t>(kMaxSplits,
                                         std::max<int64_t>(1, tiles / 2));
  const int64_t sms = std::max(1, smCount);
  int64_t best = 1;
  double bestCost = 1e30;
  for (int64_t s = 1; s <= maxS; ++s) {
    const double waves = double((base * s + sms - 1) / sms);
    double cost =
        waves * (double((tiles + s - 1) / s) * model.tileCost + model.ctaCost);
    if (s > 1)
      cost += model.combineCost +
              double(base * s * model.partialBytesPerCta) / model.bytesPerCost;
    if (cost < bestCost) {
      bestCost = cost;
      best = s;
    }
  }
  return int(best);
}

/// Whether merging splits inside clusters of `size` CTAs costs no extra
/// wave: `capacity` clusters fit on the device at once (the occupancy
/// query), and the grid of `ctas` CTAs (one an SM without clusters) must
/// not need more cluster waves than plain waves. Clusters of 3..8 lose
/// 12..30 of the H200's 132 CTA slots, so e.g. 32 sequences x 4 splits
/// (32 clusters of 4, 30 a wave) would run in two waves instead of one:
/// 166 us instead of 87 us at B=32, L=8192 (2026-12-03).
inline bool clusterMergeKeepsWaves(int64_t ctas, int size, int capacity,
                                   int smCount) {
  if (capacity <= 0 || size <= 0 || smCount <= 0)
    return false;
  const int64_t clusters = (ctas + size - 1) / size;
  const int64_t clusterWaves = (clusters + capacity - 1) / capacity;
  const int64_t plainWaves = (ctas + smCount - 1) / smCount;
  return clusterWaves <= plainWaves;
}

struct CacheView {
  const uint8_t *data;
  int64_t rowBytes, numBlocks;
  int64_t blockStride; ///< bytes between blocks (KVCacheRef::blockBytes)
  int blockSize, layout, dtype, latent, rope;
  float scale;
  const float *scalePtr; ///< KVCacheRef::scaleTensor: overrides scale
  const int32_t *table;
  int64_t tableS0, tableS1, maxBlocks;
};

/// The kernels' view of a paged cache through a block table.
CacheView makeView(const KVCacheRef &cache, const TensorRef &table);

/// What every decode kernel addresses besides its typed query pointer: the
/// paged cache, the query and output strides, the optional LSE, the
/// sequence lengths and the error record (filled by decodeIo on the host).
struct DecodeIo {
  CacheView c;
  int64_t qS0, qS1;
  void *out;
  int outType;
  int64_t oS0, oS1;
  float *lse;
  int64_t lS0, lS1;
  const int32_t *seqLens;
  int64_t seqStride;
  DeviceErrorRecord *rec;
  /// The rows this launch stores first (decode_attention_with_update in
  /// one launch; tokens 0 otherwise). 16-head kernels only.
  StepWrite w;
};

struct DecodeParams : DecodeIo {
  const uint16_t *q;
  float scaleLog2;
  int heads, splits, bsLog2;
  float *partOut; // [B, S, H, 512]
  float *partLse; // [B, S, H]
  /// 16-head kernel only: the `splits` CTAs of a (sequence, head group) form
  /// one cluster and merge their partials through distributed shared memory
  /// (partOut/partLse unused).
  int clusterMerge;
  /// The cluster merge's barriers: 0 cooperative_groups' cluster.sync(),
  /// 1 a cluster-scope fence and relaxed arrives (MLART_DECODE_BARRIER).
  int relaxedBarrier;
  /// The balanced schedule (DecodeSchedule.h, 16-head kernel): work items
  /// (head groups x sequences), the batch, one merge record per CTA; the
  /// pieces go to partOut [2 x CTAs][16][512] and partLse [2 x CTAs][16].
  int items, batch;
  BalancedMerge *merges;
  /// Optional per-CTA timeline of the 16-head kernel (setDecodeTraceBuffer):
  /// kDecodeTraceFields values per CTA, null when not tracing.
  unsigned long long *trace;
};

/// The 16-head kernel's trace record of one CTA, in this order (the order
/// of mla-bench's DecodeCtaTrace): the SM it ran on, then %globaltimer (ns)
/// at entry, after the dependent-launch wait, when the first tile is in
/// shared memory, after the last tile, at exit; then inside the epilogue:
/// once thread 0's accumulators are final (the last tile's MMAs drained),
/// once its output (or cluster partial) stores are issued, and after the
/// cluster barrier that publishes the partials (= the previous mark
/// without a cluster merge).
enum DecodeTraceField : int {
  kTraceSm,
  kTraceEntry,
  kTraceWaited,
  kTraceFirstTile,
  kTraceLoopEnd,
  kTraceExit,
  kTraceDrained,
  kTraceStored,
  kTraceSynced,
  kDecodeTraceFields
};
/// Tests and mla-bench --decode-trace: the decode launches that follow
/// record into `buffer` (device memory of at least kDecodeTraceFields x
/// CTAs values; null stops). A graph captured meanwhile keeps the pointer.
void setDecodeTraceBuffer(unsigned long long *buffer);

/// Whether the 16-head kernel merges 2..kMaxClusterSplits splits inside a
/// thread-block cluster instead of the workspace + combine kernel. Starts
/// from MLART_DECODE_CLUSTER (default on; =0 off, for A/B) read once; tests
/// flip it here. Returns the previous setting.
bool setDecodeClusterMerge(bool on);
/// How many decode launches merged inside a cluster so far (tests check
/// that the path they mean to cover was taken).
uint64_t decodeClusterLaunchCount();
/// How many decode launches took the balanced schedule so far (callers
/// choose it with DecodeAttentionArgs::schedule; MLART_DECODE_BALANCE makes
/// it the default).
uint64_t decodeBalancedLaunchCount();
/// How many decode launches stored decode_attention_with_update's rows
/// themselves (DecodeStepWrite.h) so far.
uint64_t decodeStepWriteLaunchCount();
/// cudaOccupancyMaxActiveClusters of the 16-head kernel on the current
/// device for clusters of `size` (1..kMaxClusterSplits) CTAs: how many CTAs
/// (x size) one wave holds with the cluster merge.
StatusOr<int> decodeMaxActiveClusters(int size);

/// Heads per CTA of the many-heads path (DecodeManyHeads.cu).
constexpr int kManyHeads = 64;
/// When the many-heads path is chosen over the 16-head kernel, by the
/// (sequence, 64-head group) pairs and the 64-token tiles per sequence.
/// Measured on the H200 at H=128 (docs/cuda.md, "Decode attention"): from 8
/// groups on it wins or ties at every length; with 4 groups (B=2) it wins
/// only on long sequences (L=8192: 30 vs 45 us; L=1024: 16 vs 13 us); with
/// 2 (B=1) the 16-head kernel, spread over more SMs, is as fast or faster.
/// Tests force either path with MLART_DECODE_MANY=force / =0.
constexpr int64_t kManyMinGroups = 8;
constexpr int64_t kManyMinGroupsLong = 4;
constexpr int64_t kManyMinGroupTiles = 384;
inline bool preferManyHeads(int64_t groups, int64_t tilesPerSeq) {
  return groups >= kManyMinGroups ||
         (groups >= kManyMinGroupsLong &&
          groups * tilesPerSeq >= kManyMinGroupTiles);
}

/// Launches the many-heads decode kernel (bf16, latent 512 + rope 64, H a
/// multiple of 64, power-of-two block size) over a (H/64, splits, B) grid.
/// With p.splits > 1 it writes partials that the caller combines. Takes the
/// TMA-producer kernel where it applies; MLART_DECODE_MANY_VARIANT=0 the
/// cp.async kernel, =1 the TMA kernel without S/PV overlap.
Status launchDecodeManyHeads(const DecodeParams &p, int64_t batch,
                             cudaStream_t stream);

/// True when the cache can be read by the TMA-producer kernel
/// (DecodeManyHeadsTma.cu): block size >= 16, a 16-byte aligned base and
/// row pitch, fewer than 2^31 cache rows.
bool decodeManyHeadsTmaApplies(const DecodeParams &p);
/// The TMA-producer kernel; same contract as launchDecodeManyHeads. With
/// `overlap`, S of the next tile is queued behind PV of the current one.
Status launchDecodeManyHeadsTma(const DecodeParams &p, int64_t batch,
                                bool overlap, cudaStream_t stream);

/// Split count of the many-heads path (one CTA per SM).
int decodeSplitHeuristicMany(int smCount, int64_t batch, int64_t headGroups,
                             int64_t maxLen);

#ifdef __CUDACC__
/// The per-tensor fp8 scale of the cache, read once per kernel (after the
/// PDL wait): a device tensor is the engine's and may change between graph
/// replays, so it is never folded into the launch parameters.
__device__ __forceinline__ float cacheTensorScale(const CacheView &c) {
  return c.scalePtr ? __ldg(c.scalePtr) : c.scale;
}

/// Value i of a paged cache row (latent channels, then rope), dequantised;
/// `tensorScale` is cacheTensorScale(c).
__device__ __forceinline__ float
decodeVal(const CacheView &c, const uint8_t *row, int i, float tensorScale) {
  if (c.layout == int(CacheLayout::Plain))
    return loadF(row, c.dtype, i);
  if (c.layout == int(CacheLayout::Fp8PerTensor))
    return fp8ToFloat(row[i], c.dtype) * tensorScale;
  if (i < c.latent)
    return fp8BitsToFloat(row[i]) *
           reinterpret_cast<const float *>(row + c.latent)[i / 128];
  return bf16BitsToFloat(reinterpret_cast<const uint16_t *>(
      row + c.latent + 4 * (c.latent / 128))[i - c.latent]);
}

/// Row `row` of cache block `id` (both in range).
__device__ __forceinline__ const uint8_t *blockRow(const CacheView &c,
                                                   int64_t id, int row) {
  return c.data + id * c.blockStride + int64_t(row) * c.rowBytes;
}

/// Row pointer of token pos of sequence b, or nullptr when the block id is
/// outside the cache.
__device__ __forceinline__ const uint8_t *pagedRow(const CacheView &c, int b,
                                                   int64_t pos) {
  const int64_t id = c.table[b * c.tableS0 + (pos / c.blockSize) * c.tableS1];
  if (id < 0 || id >= c.numBlocks)
    return nullptr;
  return blockRow(c, id, pos % c.blockSize);
}

/// Sum and maximum over the 32 lanes of a warp (every lane gets it).
__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// Calls `body(std::true_type{})` when the decode output is bf16, else
/// `body(std::false_type{})`: the type test is made once, and each side is
/// its own contiguous unrolled block. With the test inside the epilogues'
/// unrolled store loops, every bf16 store was followed by ~180 instructions
/// of the other types' stores; the epilogue runs once per CTA from a cold
/// instruction cache, and on the H200 73 % of its warp samples were
/// instruction-fetch stalls (ncu; docs/cuda.md, "The 16-head kernel").
template <class Body>
__device__ __forceinline__ void withOutputType(const DecodeIo &p, Body &&body) {
  if (p.outType == int(DType::BF16))
    body(std::true_type{});
  else
    body(std::false_type{});
}

/// Stores the adjacent output values out[off], out[off + 1]; kBf16 as
/// withOutputType chose it (bf16: one 4-byte store, the offset even).
template <bool kBf16>
__device__ __forceinline__ void storeOutPair(const DecodeIo &p, int64_t off,
                                             float v0, float v1) {
  if constexpr (kBf16) {
    *reinterpret_cast<uint32_t *>(static_cast<uint16_t *>(p.out) + off) =
        packBf16(v0, v1);
  } else {
    storeF(p.out, p.outType, off, v0);
    storeF(p.out, p.outType, off + 1, v1);
  }
}
#endif

} // namespace mlart::cuda

#endif
