//===- DecodeManyHeadsTma.cu - Many-heads decode fed by a TMA producer ----===//
//
// The many-heads decode of DecodeManyHeads.cu (same math, shared-memory
// layout and outputs: DecodeManyHeadsTile.h) with the KV copies taken off
// the MMA warps. There, each MMA thread issued 18 cp.async a tile plus the
// index math, and three CTA barriers a tile guarded the copies; the copies
// and the math overlapped only partly (H200, H=128 B=128 L=8192: 828 us,
// 644 us without KV copies after the first two tiles, MLART_DECODE_MANY=2;
// docs/cuda.md, "Many-heads kernels").
//
// 384 threads: warps 0-7 (two warpgroups) compute; warp 8 (of the third
// warpgroup, which gives its registers to the others) is the producer. It
// reads a tile's block ids and issues TMA loads
// (cp.async.bulk.tensor.3d) into a two-stage ring guarded by mbarriers:
//   full[s]   1 arrival (the producer's arrive.expect_tx with the tile's
//             bytes) + the TMA bytes; the MMA warps wait on its phase;
//   empty[s]  8 arrivals, one per MMA warp once its PV wgmma of the tile
//             completed; the producer waits on it before reloading s.
// The cache is viewed as a 3D tensor [numBlocks, blockSize rows, 576
// columns] (row pitch = the cache's row bytes, plane pitch = its block
// stride, so an engine's strided view loads like a dense cache) with boxes
// of {64 columns, min(blockSize, 64) rows, 1 block} and the 128-byte
// swizzle, which is exactly the K-major layout the wgmma descriptors
// read: a 64-token tile is 9 boxes
// (block size >= 64) or 9 per block (16, 32). Blocks past the sequence's
// last block are never loaded (their table entries may be anything); rows
// past seq_len in the last tile (other tokens or garbage from the cache,
// stale shared memory for unloaded blocks) are zeroed in shared memory
// before the tensor cores read them, so P = 0 times V can never give NaN.
// Q (once per CTA) still comes by cp.async from the MMA warps.
//
//===----------------------------------------------------------------------===//
#include "cuda/DecodeManyHeadsTile.h"
#include "cuda/Launch.h"
#include "cuda/TensorMap.h"

#include <climits>

namespace mlart::cuda {
namespace {
using namespace sm90;

constexpr int kMmaWarps = 8, kMmaThreads = 32 * kMmaWarps;
/// + a producer warpgroup: ptxas budgets registers per whole warpgroup
/// (288 threads get the 384-thread cap of 168 and spill), so the producer
/// is a warpgroup that hands its registers to the MMA warps (setmaxnreg):
/// 128 x kProducerRegs + 256 x kMmaRegs <= 64K. One warp of it issues.
constexpr int kThreadsTma = kMmaThreads + 128;
constexpr int kProducerRegs = 24, kMmaRegs = 240;
static_assert(128 * kProducerRegs + kMmaThreads * kMmaRegs <= 65536, "");
constexpr int kStages = 2;
constexpr int kChunks = kD * 2 / 16; // 72 16-byte units per row
/// Named barrier of the MMA warps (0 is __syncthreads).
constexpr uint32_t kMmaBarrier = 1;
/// Smallest block size taken: 9 boxes per block, at most 36 loads a tile.
constexpr int kMinTmaBlockSize = 16;

constexpr uint32_t kOffQ = 0, kOffK = kTileBytes;
constexpr uint32_t kOffP = kOffK + kStages * kTileBytes;
constexpr uint32_t kOffRed = kOffP + kChunkBytes;
constexpr uint32_t kOffBar = kOffRed + 4 * 64 * sizeof(float);
constexpr size_t kSmemTma = kOffBar + 2 * kStages * 8 + 1024; // + align
static_assert(kSmemTma <= 227 * 1024, "one CTA per SM must fit");

/// kOverlap: S of tile n+1 is issued before PV of tile n completed
/// (MLART_DECODE_MANY_VARIANT=2); else each tile's wgmma finish in turn.
template <bool kOverlap>
__global__ void __launch_bounds__(kThreadsTma, 1)
    decodeManyHeadsTmaKernel(DecodeParams p,
                             const __grid_constant__ CUtensorMap kvMap) {
  pdlPrologue();
  extern __shared__ __align__(1024) uint8_t smemRaw[];
  const uint32_t rawAddr = smemU32(smemRaw);
  const uint32_t pad = (1024u - (rawAddr & 1023u)) & 1023u;
  uint8_t *sm = smemRaw + pad;
  const uint32_t sBase = rawAddr + pad;
  float *redMax = reinterpret_cast<float *>(sm + kOffRed); // [2 wg][64 rows]
  float *redSum = redMax + 128;                             // [2 wg][64 rows]
  const uint32_t fullBar = sBase + kOffBar;            // [kStages] x 8 bytes
  const uint32_t emptyBar = fullBar + kStages * 8;     // [kStages] x 8 bytes

  const int h0 = blockIdx.x * kManyHeads, split = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  int len = p.seqLens[b * p.seqStride];
  if (len < 0 || int64_t(len) > p.c.maxBlocks * p.c.blockSize) {
    if (tid == 0 && blockIdx.x == 0 && blockIdx.y == 0)
      atomicMin(&p.rec->badSeqIndex, b);
    len = 0;
  }
  const int tiles = (len + kTile - 1) / kTile;
  const int perSplit = (tiles + p.splits - 1) / p.splits;
  const int t0 = split * perSplit;
  const int t1 = min(tiles, t0 + perSplit);

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      mbarInit(fullBar + 8 * s, 1);
      mbarInit(emptyBar + 8 * s, kMmaWarps);
    }
    fenceMbarInit();
  }
  __syncthreads(); // the last CTA-wide barrier: the producer may exit early

  if (warp >= kMmaWarps) {
    setMaxNRegDec<kProducerRegs>();
    if (warp != kMmaWarps)
      return;
    // Producer. Lane j < boxes-per-tile resolves box j of the tile (a whole
    // block, or 64 rows of one): its block id, and the cache row it starts.
    if (lane == 0 && t0 < t1)
      prefetchTensorMap(&kvMap);
    const int boxRows = min(p.c.blockSize, kTile);
    const uint32_t boxBytes = uint32_t(boxRows) * 128u;
    for (int tile = t0; tile < t1; ++tile) {
      const int n = tile - t0, s = n % kStages;
      const int valid = min(kTile, len - tile * kTile);
      // Box j: rows [row, row + boxRows) of cache block `block`.
      int block = -1, row = 0;
      if (lane * boxRows < valid) {
        const int pos = tile * kTile + lane * boxRows;
        const int64_t id =
            p.c.table[b * p.c.tableS0 + int64_t(pos >> p.bsLog2) * p.c.tableS1];
        if (id >= 0 && id < p.c.numBlocks) {
          block = int(id);
          row = pos & (p.c.blockSize - 1);
        } else
          atomicMin(&p.rec->badSeqIndex, b); // reported; the box stays unloaded
      }
      const uint32_t boxes = __popc(__ballot_sync(0xffffffffu, block >= 0));
      // The MMA warps are done with this stage's previous tile.
      mbarWait(emptyBar + 8 * s, ((n / kStages) & 1) ^ 1);
      if (lane == 0)
        mbarArriveExpectTx(fullBar + 8 * s, boxes * 9u * boxBytes);
      __syncwarp(); // the bytes are announced before any can complete
      if (block >= 0) {
        const uint32_t dst = sBase + kOffK + uint32_t(s) * kTileBytes +
                             uint32_t(lane) * boxBytes;
#pragma unroll
        for (int c = 0; c < 9; ++c)
          tmaLoad3d(dst + uint32_t(c) * kChunkBytes, &kvMap, c * 64, row, block,
                    fullBar + 8 * s);
      }
    }
    return;
  }

  // MMA warps.
  setMaxNRegInc<kMmaRegs>();
  const int wg = tid >> 7, wl = warp & 3;
  const int g = lane >> 2, q4 = lane & 3;
  auto sync = [] { namedBarrier(kMmaBarrier, kMmaThreads); };

  if (t0 < t1) {
    // Q (64 heads x 576) into the swizzled layout, while the first tile
    // streams in.
#pragma unroll 6
    for (int k = 0; k < 18; ++k) {
      const int idx = tid + k * kMmaThreads;
      const int h = idx / kChunks, u = idx - h * kChunks;
      const uint32_t dst = sBase + kOffQ + uint32_t(u >> 3) * kChunkBytes +
                           uint32_t(h) * 128u +
                           (uint32_t((u & 7) ^ (h & 7)) << 4);
      cpAsync16(dst, p.q + b * p.qS0 + (h0 + h) * p.qS1 + u * 8, true);
    }
    cpCommit();
    cpWaitAll();
    fenceProxyAsync();
    sync(); // Q visible to wgmma
  }

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i)
    o[i] = 0.0f;
  const int r0 = wl * 16 + g;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  // Waits for tile `tile`, zeroes its rows past seq_len (the sequence's last
  // tile: other tokens or garbage from the cache, stale shared memory for
  // blocks not loaded; whole 128-byte rows of all nine chunks, so the
  // swizzle does not matter) and issues its S.
  auto beginTile = [&](int tile, float(&sc)[16]) {
    const int n = tile - t0, s = n % kStages;
    mbarWait(fullBar + 8 * s, (n / kStages) & 1);
    const int valid = len - tile * kTile;
    if (valid < kTile) {
      uint8_t *tileP = sm + kOffK + s * kTileBytes;
      const int units = (kTile - valid) * kChunks;
      for (int i = tid; i < units; i += kMmaThreads) {
        const int r = valid + i / kChunks, u = i % kChunks;
        *reinterpret_cast<uint4 *>(tileP + (u >> 3) * kChunkBytes + r * 128 +
                                   (u & 7) * 16) = make_uint4(0, 0, 0, 0);
      }
      fenceProxyAsync();
      sync(); // zeros visible to wgmma
    }
    manyheads::issueScores<true, true>(
        sc, sBase + kOffQ, sBase + kOffK + uint32_t(s) * kTileBytes, wg);
  };

  if constexpr (kOverlap) {
    // S of the next tile is queued behind PV of this one, so the tensor
    // pipe does not drain between them; one wait covers both.
    // (The first S is issued inside the loop: issued before it, ptxas finds
    // the loop-entry copies of o inside its wgmma stage and serialises.)
    float sc[16];
    for (int tile = t0; tile < t1; ++tile) {
      const int n = tile - t0, s = n % kStages;
      if (tile == t0)
        beginTile(tile, sc);
      wgWaitAll(); // S(tile) and PV(tile - 1)
      fenceRegs(sc);
      fenceRegs(o);
      if (tile > t0 && lane == 0)
        mbarArrive(emptyBar + 8 * ((n - 1) % kStages));
      manyheads::softmaxTile(sc, o, m, l, tile, len, p.scaleLog2, wg, r0, q4,
                             redMax, sm + kOffP, sync);
      manyheads::issuePV(o, sBase + kOffP,
                         sBase + kOffK + uint32_t(s) * kTileBytes, wg);
      if (tile + 1 < t1)
        beginTile(tile + 1, sc);
    }
    wgWaitAll();
    fenceRegs(o);
  } else {
    for (int tile = t0; tile < t1; ++tile) {
      const int n = tile - t0, s = n % kStages;
      float sc[16];
      beginTile(tile, sc);
      wgWaitAll();
      fenceRegs(sc);
      manyheads::softmaxTile(sc, o, m, l, tile, len, p.scaleLog2, wg, r0, q4,
                             redMax, sm + kOffP, sync);
      manyheads::accumulatePV(o, sBase + kOffP,
                              sBase + kOffK + uint32_t(s) * kTileBytes, wg);
      if (lane == 0)
        mbarArrive(emptyBar + 8 * s); // this warp is done with the stage
    }
  }

  float inv[2], lseV[2];
  manyheads::rowTotals(l, m, wg, r0, q4, redSum, sync, inv, lseV);
  manyheads::storeOutput(p, o, inv, lseV, b, split, h0, wg, r0, q4);
}

} // namespace

bool decodeManyHeadsTmaApplies(const DecodeParams &p) {
  // TMA coordinates are int32; the global address must be 16-byte aligned
  // and the pitches multiples of 16 below 2^40 (cuTensorMapEncodeTiled).
  return p.c.blockSize >= kMinTmaBlockSize && p.c.numBlocks > 0 &&
         p.c.rowBytes % 16 == 0 && p.c.blockStride % 16 == 0 &&
         p.c.blockStride < (int64_t(1) << 40) &&
         reinterpret_cast<uintptr_t>(p.c.data) % 16 == 0 &&
         p.c.numBlocks <= INT_MAX;
}

Status launchDecodeManyHeadsTma(const DecodeParams &p, int64_t batch,
                                bool overlap, cudaStream_t stream) {
  CUtensorMap map;
  // One plane per cache block: the block stride is the plane pitch.
  MLART_RETURN_IF_ERROR(encodeBf16TensorMap3d(
      &map, p.c.data, uint64_t(kD), uint64_t(p.c.blockSize),
      uint64_t(p.c.numBlocks), uint64_t(p.c.rowBytes),
      uint64_t(p.c.blockStride), 64, uint32_t(std::min(p.c.blockSize, kTile))));
  auto kernel = overlap ? decodeManyHeadsTmaKernel<true>
                        : decodeManyHeadsTmaKernel<false>;
  MLART_RETURN_IF_ERROR(
      allowDynamicSmem(kernel, kSmemTma, "decodeManyHeadsTmaKernel"));
  return launchKernel("decodeManyHeadsTmaKernel", kernel,
                      dim3(unsigned(p.heads / kManyHeads), unsigned(p.splits),
                           unsigned(batch)),
                      kThreadsTma, kSmemTma, stream, p, map);
}

} // namespace mlart::cuda
