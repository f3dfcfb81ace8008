//===- L2Prefetch.cu - The executor's start-of-program L2 hint ------------===//
//
// One kernel on a side stream, forked at the start of a run or capture
// (mlart/PrefetchPlan.h): every thread asks L2 for its share of the weight
// ranges, in order, then warp w takes (sequence, split) pairs of the first
// decode and asks for the first tiles that split will stream. It reads only
// the sequence lengths and block table (step data, complete before the run
// starts) and writes nothing; bad lengths and block ids are skipped, as a
// hint must never fail a run.
//
//===----------------------------------------------------------------------===//
#include "cuda/CudaCommon.h"
#include "cuda/DecodeCommon.h"
#include "cuda/Knobs.h"
#include "cuda/L2Prefetch.h"
#include "cuda/Launch.h"

#include <algorithm>

namespace mlart::cuda {

bool l2PrefetchEnabled() { return knobValue(Knob::L2Prefetch) != 0; }

PrefetchSpans makePrefetchSpans(const PrefetchRange *ranges, int n) {
  PrefetchSpans s{};
  if (!l2PrefetchEnabled())
    return s;
  for (int i = 0; i < std::min(n, kMaxPrefetchRanges); ++i) {
    const uintptr_t lo = reinterpret_cast<uintptr_t>(ranges[i].data);
    const uintptr_t first = (lo + 15) & ~uintptr_t(15);
    const uintptr_t last = (lo + ranges[i].bytes) & ~uintptr_t(15);
    if (!ranges[i].data || last <= first)
      continue;
    s.data[s.count] = reinterpret_cast<const uint8_t *>(first);
    s.bytes[s.count] = int64_t(last - first);
    ++s.count;
  }
  return s;
}

namespace {

constexpr int kPrefetchThreads = 128;

struct StartPrefetchParams {
  PrefetchSpans weights;
  // The first decode's splits (tilesAhead 0: none).
  const uint8_t *cache;
  int64_t rowBytes, numBlocks;
  int bsLog2;
  const int32_t *table;
  int64_t tableS0, tableS1, maxBlocks;
  const int32_t *seqLens;
  int64_t seqStride;
  int batch, splits, tilesAhead;
};

__global__ void __launch_bounds__(kPrefetchThreads)
    l2PrefetchKernel(StartPrefetchParams p) {
  pdlPrologue();
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t threads = int64_t(gridDim.x) * blockDim.x;
  prefetchShare(p.weights, tid, threads);
  if (p.tilesAhead <= 0)
    return;
  const int lane = threadIdx.x & 31;
  const int64_t pairs = int64_t(p.batch) * p.splits;
  const int64_t maxLen = p.maxBlocks << p.bsLog2;
  for (int64_t pair = tid / 32; pair < pairs; pair += threads / 32) {
    const int b = int(pair / p.splits), split = int(pair % p.splits);
    const int64_t len = min(int64_t(p.seqLens[b * p.seqStride]), maxLen);
    if (len <= 0)
      continue;
    const int64_t tiles = (len + kTile - 1) / kTile;
    const int64_t perSplit = (tiles + p.splits - 1) / p.splits;
    const int64_t t0 = split * perSplit;
    const int64_t t1 = min(min(tiles, t0 + perSplit), t0 + p.tilesAhead);
    if (t0 >= t1)
      continue;
    const int64_t row0 = t0 * kTile, row1 = min(len, t1 * kTile);
    for (int64_t blk = row0 >> p.bsLog2; blk <= (row1 - 1) >> p.bsLog2; ++blk) {
      const int64_t id = p.table[b * p.tableS0 + blk * p.tableS1];
      if (id < 0 || id >= p.numBlocks)
        continue;
      const int64_t lo = max(row0, blk << p.bsLog2);
      const int64_t hi = min(row1, (blk + 1) << p.bsLog2);
      const uint8_t *base =
          p.cache + ((id << p.bsLog2) + (lo - (blk << p.bsLog2))) * p.rowBytes;
      const int64_t bytes = (hi - lo) * p.rowBytes;
      for (int64_t off = lane * kPrefetchPiece; off < bytes;
           off += 32 * kPrefetchPiece)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(
                         base + off),
                     "r"(uint32_t(min(kPrefetchPiece, bytes - off)))
                     : "memory");
    }
  }
}

/// Fills the KV part of `p` for `decode` within `budget` bytes; leaves
/// tilesAhead 0 when the decode is not the tensor-core path's or its
/// operands do not check out (a hint does not report errors).
void planDecodeTiles(CudaContext &ctx, const DecodeAttentionArgs &d,
                     size_t budget, StartPrefetchParams &p) {
  const KVCacheDesc &desc = d.cache.desc;
  if (!desc.validate().ok() || !d.cache.data || d.q.rank != 3 ||
      d.out.rank != 3 || d.blockTable.rank != 2 || d.seqLens.rank != 1 ||
      d.blockTable.dtype != DType::I32 || d.seqLens.dtype != DType::I32 ||
      !d.blockTable.data || !d.seqLens.data || d.q.sizes[0] <= 0 ||
      d.blockTable.sizes[0] != d.q.sizes[0] ||
      d.seqLens.sizes[0] != d.q.sizes[0] || d.blockTable.sizes[1] <= 0)
    return;
  const DecodeChoice choice = chooseDecode(ctx, d);
  if (!choice.fast || choice.splits <= 0)
    return;
  const int64_t pairs = d.q.sizes[0] * choice.splits;
  const int64_t rowBytes = desc.rowBytes();
  const int64_t tileBytes = int64_t(kTile) * rowBytes;
  const int64_t ahead = int64_t(budget) / (pairs * tileBytes);
  if (ahead <= 0)
    return;
  int bsLog2 = 0;
  while ((int64_t(1) << bsLog2) < desc.blockSize)
    ++bsLog2;
  p.cache = static_cast<const uint8_t *>(d.cache.data);
  p.rowBytes = rowBytes;
  p.numBlocks = desc.numBlocks;
  p.bsLog2 = bsLog2;
  p.table = static_cast<const int32_t *>(d.blockTable.data);
  p.tableS0 = d.blockTable.strides[0];
  p.tableS1 = d.blockTable.strides[1];
  p.maxBlocks = d.blockTable.sizes[1];
  p.seqLens = static_cast<const int32_t *>(d.seqLens.data);
  p.seqStride = d.seqLens.strides[0];
  p.batch = int(d.q.sizes[0]);
  p.splits = choice.splits;
  p.tilesAhead = int(std::min<int64_t>(ahead, 1 << 20));
}

} // namespace

Status prefetchL2(CudaContext &ctx, const PrefetchL2Args &a,
                  cudaStream_t stream) {
  const int mode = knobValue(Knob::L2Prefetch);
  if (mode == 0)
    return Status::success();
  if (a.numRanges < 0 || a.numRanges > kMaxPrefetchRanges)
    return invalidArgument("prefetchL2: numRanges must be 0.." +
                           std::to_string(kMaxPrefetchRanges));
  StartPrefetchParams p{};
  p.weights = makePrefetchSpans(a.ranges, a.numRanges);
  const int kvMb = knobValue(Knob::L2PrefetchKvMb);
  const size_t kvBudget =
      kvMb > 0 ? size_t(kvMb) << 20 : a.decodeBudgetBytes;
  if (a.decode && mode != kL2PrefetchNoKv && kvBudget > 0)
    planDecodeTiles(ctx, *a.decode, kvBudget, p);
  if (p.weights.count == 0 && p.tilesAhead == 0)
    return Status::success();
  const int64_t warpsWanted = int64_t(p.batch) * p.splits;
  const int64_t blocks = std::clamp<int64_t>(
      (warpsWanted * 32 + kPrefetchThreads - 1) / kPrefetchThreads,
      int64_t(ctx.smCount), int64_t(ctx.smCount) * 8);
  return launchKernel("l2PrefetchKernel", l2PrefetchKernel, unsigned(blocks),
                      kPrefetchThreads, 0, stream, p);
}

} // namespace mlart::cuda
