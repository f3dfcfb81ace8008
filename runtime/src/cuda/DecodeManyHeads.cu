//===- DecodeManyHeads.cu - Paged MLA decode for H >= 64 (wgmma) ----------===//
//
// decodeAttention for many heads (bf16 q, plain bf16 cache, latent 512 +
// rope 64, H a multiple of 64): one CTA of two warpgroups (256 threads) per
// (split, sequence, 64-head group), so each KV tile is read once per 64
// heads instead of once per 16.
//
// Shared memory (1024-byte aligned, 225 KB): Q [64 heads x 576], two KV
// tiles [64 tokens x 576] and P [64 x 64], all in the 128-byte-swizzled
// K-major layout of wgmma: a 64-row operand is stored as nine 8 KB column
// chunks of 64 bf16 (128 bytes) per row, 16-byte unit u of row r at
// ((u ^ (r & 7)) << 4). The same tile is the K-major B operand of S = Q K^T
// (N = tokens, K = 576 channels) and, read as MN-major (transposed), the B
// operand of O += P V (K = tokens, N = the 512 latent channels): V is never
// copied.
//
// KV tiles stream in with cp.async (16-byte, double-buffered; rows past
// seq_len are zero-filled with src-size 0, i.e. never read), issued while
// the tensor cores compute S of the current tile. Per tile:
//   warpgroup w: S[:, 32w..32w+31] = Q K[32w..32w+31]^T   (wgmma m64n32k16 x36)
//   row max exchanged between the warpgroups in shared memory,
//   P = exp2(S*scale*log2e - m) -> shared memory (bf16, swizzled),
//   warpgroup w: O[:, 256w..256w+255] += P V[:, 256w..]  (wgmma m64n256k16 x4)
// Splits cover whole tiles and reuse the combine kernel of DecodeKernels.cu.
//
//===----------------------------------------------------------------------===//
#include "cuda/DecodeManyHeadsTile.h"
#include "cuda/Knobs.h"
#include "cuda/Launch.h"

#include <algorithm>

namespace mlart::cuda {
namespace {
using namespace sm90;

constexpr int kThreads = 256;
constexpr int kChunks = kD * 2 / 16;          // 72 16-byte units per row
constexpr uint32_t kOffQ = 0, kOffK = kTileBytes, kOffP = 3 * kTileBytes;
constexpr uint32_t kOffRed = kOffP + kChunkBytes;
constexpr size_t kSmem = kOffRed + 4 * 64 * sizeof(float) + 1024; // + align

/// kVariant (timing experiments, MLART_DECODE_MANY=2..5): 1 = the kernel;
/// 2 = no KV copies after the first two tiles; 3 = no S wgmma; 4 = no PV
/// wgmma; 5 = neither wgmma; 6 = S computed by warpgroup 0 alone (N = 64).
/// Variants 1 and 6 compute attention.
template <int kVariant>
__global__ void __launch_bounds__(kThreads, 1)
    decodeManyHeadsKernel(DecodeParams p) {
  pdlPrologue();
  extern __shared__ __align__(1024) uint8_t smemRaw[];
  const uint32_t rawAddr = smemU32(smemRaw);
  const uint32_t pad = (1024u - (rawAddr & 1023u)) & 1023u;
  uint8_t *sm = smemRaw + pad;
  const uint32_t sBase = rawAddr + pad;
  float *redMax = reinterpret_cast<float *>(sm + kOffRed); // [2 wg][64 rows]
  float *redSum = redMax + 128;                             // [2 wg][64 rows]

  // Head groups fastest: the CTAs sharing a sequence's KV run together and
  // the second read of each tile hits L2.
  const int h0 = blockIdx.x * kManyHeads, split = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wg = tid >> 7, wl = warp & 3;
  const int g = lane >> 2, q4 = lane & 3;

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

  // Warp w copies tile rows 8w..8w+7: lane (l & 7) resolves the page of one
  // row (shifts: power-of-two block size), the pointers are broadcast, and
  // the warp's 8 x 72 16-byte units go out 18 per lane, consecutive lanes
  // on consecutive bytes of a row (coalesced), into the swizzled layout.
  // The block ids are loaded one tile ahead (fetchId), so the copies of a
  // tile never wait on the block table.
  constexpr int64_t kNoRow = INT64_MIN;
  auto fetchId = [&](int tile) -> int64_t {
    const int pos = tile * kTile + warp * 8 + (lane & 7);
    return pos < len ? int64_t(p.c.table[b * p.c.tableS0 +
                                         int64_t(pos >> p.bsLog2) * p.c.tableS1])
                     : kNoRow;
  };
  auto loadTile = [&](int tile, uint32_t dstBase, int64_t id) {
    const int pos = tile * kTile + warp * 8 + (lane & 7);
    const uint8_t *myRow = nullptr;
    if (id != kNoRow) {
      if (id >= 0 && id < p.c.numBlocks)
        myRow = blockRow(p.c, id, pos & (p.c.blockSize - 1));
      else if (lane < 8)
        atomicMin(&p.rec->badSeqIndex, b);
    }
#pragma unroll
    for (int k = 0; k < 18; ++k) {
      const int idx = k * 32 + lane;
      const int r = idx / kChunks, u = idx - r * kChunks;
      const uint8_t *row = reinterpret_cast<const uint8_t *>(__shfl_sync(
          0xffffffffu, reinterpret_cast<unsigned long long>(myRow), r));
      const int rowT = warp * 8 + r;
      const uint32_t dst = dstBase + uint32_t(u >> 3) * kChunkBytes +
                           uint32_t(rowT) * 128u +
                           (uint32_t((u & 7) ^ (rowT & 7)) << 4);
      cpAsync16(dst, row ? row + u * 16 : p.c.data, row != nullptr);
    }
  };

  if (t0 < t1) {
    // Q (64 heads x 576) joins the first tile's copy group.
#pragma unroll 6
    for (int k = 0; k < 18; ++k) {
      const int idx = tid + k * kThreads;
      const int h = idx / kChunks, u = idx - h * kChunks;
      const uint32_t dst = sBase + kOffQ + uint32_t(u >> 3) * kChunkBytes +
                           uint32_t(h) * 128u +
                           (uint32_t((u & 7) ^ (h & 7)) << 4);
      cpAsync16(dst, p.q + b * p.qS0 + (h0 + h) * p.qS1 + u * 8, true);
    }
    loadTile(t0, sBase + kOffK, fetchId(t0));
  }
  cpCommit();
  int64_t idNext = t0 + 1 < t1 ? fetchId(t0 + 1) : kNoRow;

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i)
    o[i] = 0.0f;
  // This thread's rows (heads) of S and O: r0 = 16*wl + g and r0 + 8.
  const int r0 = wl * 16 + g;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  for (int tile = t0; tile < t1; ++tile) {
    const int buf = (tile - t0) & 1;
    cpWaitAll();
    fenceProxyAsync();
    __syncthreads(); // tile landed; every warpgroup is done with the other buffer
    const uint32_t kb = sBase + kOffK + uint32_t(buf) * kTileBytes;

    if constexpr (kVariant == 6) {
      // Variant 6: warpgroup 0 computes all of S (m64n64k16, no max
      // exchange), does the softmax and passes alpha to warpgroup 1.
      float s6[32];
      if (wg == 0) {
#pragma unroll
        for (int i = 0; i < 32; ++i)
          s6[i] = 0.0f;
        fenceRegs(s6);
        wgArrive();
        const uint64_t dA = makeDesc(sBase + kOffQ, 16, 1024);
        const uint64_t dB = makeDesc(kb, 16, 1024);
#pragma unroll
        for (int kk = 0; kk < kD / 16; ++kk) {
          const uint64_t off = ((kk >> 2) * kChunkBytes + (kk & 3) * 32) >> 4;
          wgmmaS64(s6, dA + off, dB + off);
        }
        wgCommit();
      }
      if (tile + 1 < t1) {
        loadTile(tile + 1, sBase + kOffK + uint32_t(buf ^ 1) * kTileBytes, idNext);
        idNext = tile + 2 < t1 ? fetchId(tile + 2) : kNoRow;
      }
      cpCommit();
      if (wg == 0) {
        wgWaitAll();
        fenceRegs(s6);
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int pos = tile * kTile + j * 8 + q4 * 2 + (e & 1);
            const float v = pos < len ? s6[j * 4 + e] * p.scaleLog2 : -INFINITY;
            s6[j * 4 + e] = v;
            mx[e >> 1] = fmaxf(mx[e >> 1], v);
          }
        float base[2], alpha[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
          mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
          const float mNew = fmaxf(m[r], mx[r]);
          base[r] = mNew == -INFINITY ? 0.0f : mNew;
          alpha[r] = m[r] == -INFINITY ? 0.0f : exp2f(m[r] - mNew);
          m[r] = mNew;
        }
        uint8_t *sP = sm + kOffP;
        float sum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float p0 = exp2f(s6[j * 4 + 0] - base[0]);
          const float p1 = exp2f(s6[j * 4 + 1] - base[0]);
          const float p2 = exp2f(s6[j * 4 + 2] - base[1]);
          const float p3 = exp2f(s6[j * 4 + 3] - base[1]);
          sum[0] += p0 + p1;
          sum[1] += p2 + p3;
          const int within = q4 * 4, r1 = r0 + 8;
          *reinterpret_cast<uint32_t *>(sP + r0 * 128 + ((j ^ (r0 & 7)) << 4) +
                                        within) = packBf16(p0, p1);
          *reinterpret_cast<uint32_t *>(sP + r1 * 128 + ((j ^ (r1 & 7)) << 4) +
                                        within) = packBf16(p2, p3);
        }
        l[0] = l[0] * alpha[0] + sum[0];
        l[1] = l[1] * alpha[1] + sum[1];
        if (q4 == 0) {
          redMax[r0] = alpha[0];
          redMax[r0 + 8] = alpha[1];
        }
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          o[j * 4 + 0] *= alpha[0];
          o[j * 4 + 1] *= alpha[0];
          o[j * 4 + 2] *= alpha[1];
          o[j * 4 + 3] *= alpha[1];
        }
        fenceProxyAsync();
      }
      __syncthreads(); // P and alpha ready
      if (wg == 1) {
        const float a0 = redMax[r0], a1 = redMax[r0 + 8];
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          o[j * 4 + 0] *= a0;
          o[j * 4 + 1] *= a0;
          o[j * 4 + 2] *= a1;
          o[j * 4 + 3] *= a1;
        }
      }
    } else {
      float s[16];
      manyheads::issueScores<kVariant != 3 && kVariant != 5>(s, sBase + kOffQ,
                                                             kb, wg);
      // The next tile's copies overlap the tensor-core work.
      if (tile + 1 < t1 && (kVariant != 2 || tile == t0)) {
        loadTile(tile + 1, sBase + kOffK + uint32_t(buf ^ 1) * kTileBytes,
                 idNext);
        idNext = tile + 2 < t1 ? fetchId(tile + 2) : kNoRow;
      }
      cpCommit();
      wgWaitAll();
      fenceRegs(s);
      manyheads::softmaxTile(s, o, m, l, tile, len, p.scaleLog2, wg, r0, q4,
                             redMax, sm + kOffP, [] { __syncthreads(); });
    }
    manyheads::accumulatePV<kVariant != 4 && kVariant != 5>(o, sBase + kOffP,
                                                            kb, wg);
  }
  cpWaitAll();

  if (kVariant == 6) {
    // Warpgroup 0 alone holds m and l (l of warpgroup 1 stayed 0).
    if (q4 == 0 && wg == 0) {
      redMax[64 + r0] = m[0];
      redMax[64 + r0 + 8] = m[1];
    }
    __syncthreads();
    m[0] = redMax[64 + r0];
    m[1] = redMax[64 + r0 + 8];
  }
  float inv[2], lseV[2];
  manyheads::rowTotals(l, m, wg, r0, q4, redSum, [] { __syncthreads(); }, inv,
                       lseV);
  manyheads::storeOutput(p, o, inv, lseV, b, split, h0, wg, r0, q4);
}

} // namespace

int decodeSplitHeuristicMany(int smCount, int64_t batch, int64_t headGroups,
                             int64_t maxLen) {
  // In us (measured on the H200, 2026-12-02): ~4 a tile, ~6 of per-CTA
  // prologue/epilogue, ~5 for the combine launch, and the f32 partials
  // (4 KB a head and split, written and read back) at ~3 TB/s. (A model that
  // ignored the partial traffic picked s = 64 at B = 128, L = 8192: 2.1 GB
  // of partials, 2.7 ms instead of ~1.)
  return chooseDecodeSplits(
      smCount, batch * headGroups, maxLen,
      SplitCostModel{/*tileCost=*/4.0, /*ctaCost=*/6.0, /*combineCost=*/5.0,
                     /*partialBytesPerCta=*/int64_t(kManyHeads) * 4096,
                     /*bytesPerCost=*/3e6});
}

Status launchDecodeManyHeads(const DecodeParams &p, int64_t batch,
                             cudaStream_t stream) {
  // MLART_DECODE_MANY=2..6 selects a timing variant of this kernel (see the
  // kernel). MLART_DECODE_MANY_VARIANT (A/B): 0 this kernel, 1 (default)
  // the TMA-producer kernel, 2 that one with S queued behind PV. Measured on
  // the H200, H=128 B=128 L=8192: 826 / 657 / 758 us; variant 1 is the
  // fastest at every measured shape (docs/cuda.md, "Many-heads kernels").
  const int many = knobValue(Knob::DecodeMany);
  const int variant = many >= 2 && many <= 6 ? many : 1;
  const int tmaVariant = knobValue(Knob::DecodeManyVariant);
  if (variant == 1 && tmaVariant != 0 && decodeManyHeadsTmaApplies(p)) {
    Status s = launchDecodeManyHeadsTma(p, batch, tmaVariant == 2, stream);
    // Unavailable: the driver cannot encode tensor maps; copy with cp.async.
    if (s.code() != StatusCode::Unavailable)
      return s;
  }
  auto kernel = variant == 2   ? decodeManyHeadsKernel<2>
                : variant == 3 ? decodeManyHeadsKernel<3>
                : variant == 4 ? decodeManyHeadsKernel<4>
                : variant == 5 ? decodeManyHeadsKernel<5>
                : variant == 6 ? decodeManyHeadsKernel<6>
                               : decodeManyHeadsKernel<1>;
  MLART_RETURN_IF_ERROR(
      allowDynamicSmem(kernel, kSmem, "decodeManyHeadsKernel"));
  return launchKernel("decodeManyHeadsKernel", kernel,
                      dim3(unsigned(p.heads / kManyHeads), unsigned(p.splits),
                           unsigned(batch)),
                      kThreads, kSmem, stream, p);
}

} // namespace mlart::cuda
