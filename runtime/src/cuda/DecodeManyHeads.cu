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
#include "cuda/DecodeCommon.h"

#include <algorithm>
#include <cstdlib>

namespace mlart::cuda {
namespace {

constexpr float kLn2M = 0.6931471805599453f;
constexpr int kThreads = 256;
constexpr int kChunks = kD * 2 / 16;          // 72 16-byte units per row
constexpr uint32_t kChunkBytes = 64 * 128;    // one 64-column chunk, 64 rows
constexpr uint32_t kTileBytes = 9 * kChunkBytes; // 73728
constexpr uint32_t kOffQ = 0, kOffK = kTileBytes, kOffP = 3 * kTileBytes;
constexpr uint32_t kOffRed = kOffP + kChunkBytes;
constexpr size_t kSmem = kOffRed + 4 * 64 * sizeof(float) + 1024; // + align

__device__ __forceinline__ uint32_t smemU32(const void *p) {
  return uint32_t(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cpAsync16(uint32_t dst, const void *src,
                                          bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
               "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cpCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
__device__ __forceinline__ void cpWaitAll() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}
/// Makes generic-proxy shared-memory writes (cp.async, st.shared) visible
/// to the async proxy (wgmma operand reads); a barrier must follow.
__device__ __forceinline__ void fenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void wgArrive() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgWaitAll() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void fenceRegs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+f"(r[i])::"memory");
}
/// Shared-memory matrix descriptor, 128-byte swizzle. lbo/sbo in bytes.
__device__ __forceinline__ uint64_t makeDesc(uint32_t addr, uint32_t lbo,
                                             uint32_t sbo) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(lbo >> 4) << 16) |
         (uint64_t(sbo >> 4) << 32) | (uint64_t(1) << 62);
}
__device__ __forceinline__ uint32_t packBf16(float lo, float hi) {
  return uint32_t(floatToBf16Bits(lo)) | (uint32_t(floatToBf16Bits(hi)) << 16);
}

__device__ __forceinline__ void wgmmaS(float (&d)[16], uint64_t da,
                                       uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
      "%16, %17, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
        "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(da), "l"(db), "r"(1));
}

__device__ __forceinline__ void wgmmaS64(float (&d)[32], uint64_t da,
                                         uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
        "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
        "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(1));
}

__device__ __forceinline__ void wgmmaPV(float (&d)[128], uint64_t da,
                                        uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, 0, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
        "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
        "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
        "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
        "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]),
        "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]),
        "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
        "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]),
        "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]),
        "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]),
        "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]),
        "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),
        "+f"(d[126]), "+f"(d[127])
      : "l"(da), "l"(db), "r"(1));
}

/// kVariant (timing experiments, MLART_DECODE_MANY=2..5): 1 = the kernel;
/// 2 = no KV copies after the first two tiles; 3 = no S wgmma; 4 = no PV
/// wgmma; 5 = neither wgmma; 6 = S computed by warpgroup 0 alone (N = 64).
/// Variants 1 and 6 compute attention.
template <int kVariant>
__global__ void __launch_bounds__(kThreads, 1)
    decodeManyHeadsKernel(DecodeParams p) {
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
        myRow = p.c.data + ((id << p.bsLog2) + (pos & (p.c.blockSize - 1))) *
                               int64_t(kD * 2);
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
    // S = Q K^T for this warpgroup's 32 tokens.
    float s[16];
#pragma unroll
    for (int i = 0; i < 16; ++i)
      s[i] = 0.0f;
    fenceRegs(s);
    wgArrive();
    {
      const uint64_t dA = makeDesc(sBase + kOffQ, 16, 1024);
      const uint64_t dB = makeDesc(kb + uint32_t(wg) * 4096u, 16, 1024);
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        if (kVariant == 3 || kVariant == 5)
          break;
        const uint64_t off = ((kk >> 2) * kChunkBytes + (kk & 3) * 32) >> 4;
        wgmmaS(s, dA + off, dB + off);
      }
    }
    wgCommit();
    // The next tile's copies overlap the tensor-core work.
    if (tile + 1 < t1 && (kVariant != 2 || tile == t0)) {
      loadTile(tile + 1, sBase + kOffK + uint32_t(buf ^ 1) * kTileBytes, idNext);
      idNext = tile + 2 < t1 ? fetchId(tile + 2) : kNoRow;
    }
    cpCommit();
    wgWaitAll();
    fenceRegs(s);

    // Mask, scale (log2 domain), row max of this warpgroup's half.
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int pos = tile * kTile + wg * 32 + j * 8 + q4 * 2 + (e & 1);
        const float v = pos < len ? s[j * 4 + e] * p.scaleLog2 : -INFINITY;
        s[j * 4 + e] = v;
        mx[e >> 1] = fmaxf(mx[e >> 1], v);
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    }
    if (q4 == 0) {
      redMax[wg * 64 + r0] = mx[0];
      redMax[wg * 64 + r0 + 8] = mx[1];
    }
    __syncthreads();
    float base[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float t = fmaxf(redMax[r0 + 8 * r], redMax[64 + r0 + 8 * r]);
      const float mNew = fmaxf(m[r], t);
      base[r] = mNew == -INFINITY ? 0.0f : mNew;
      alpha[r] = m[r] == -INFINITY ? 0.0f : exp2f(m[r] - mNew);
      m[r] = mNew;
    }
    // P (bf16) into the swizzled [64 heads x 64 tokens] operand.
    uint8_t *sP = sm + kOffP;
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float p0 = exp2f(s[j * 4 + 0] - base[0]);
      const float p1 = exp2f(s[j * 4 + 1] - base[0]);
      const float p2 = exp2f(s[j * 4 + 2] - base[1]);
      const float p3 = exp2f(s[j * 4 + 3] - base[1]);
      sum[0] += p0 + p1;
      sum[1] += p2 + p3;
      const int col = wg * 32 + j * 8 + q4 * 2; // token
      const int unit = col >> 3, within = (col & 7) * 2;
      *reinterpret_cast<uint32_t *>(sP + r0 * 128 + ((unit ^ (r0 & 7)) << 4) +
                                    within) = packBf16(p0, p1);
      const int r1 = r0 + 8;
      *reinterpret_cast<uint32_t *>(sP + r1 * 128 + ((unit ^ (r1 & 7)) << 4) +
                                    within) = packBf16(p2, p3);
    }
    // Per-thread partial row sums (reduced over lanes and warpgroups once,
    // at the end: alpha is the same for every thread of a row).
    l[0] = l[0] * alpha[0] + sum[0];
    l[1] = l[1] * alpha[1] + sum[1];
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      o[j * 4 + 0] *= alpha[0];
      o[j * 4 + 1] *= alpha[0];
      o[j * 4 + 2] *= alpha[1];
      o[j * 4 + 3] *= alpha[1];
    }
    fenceProxyAsync();
    __syncthreads(); // P complete (both halves)
    }

    // O[:, 256wg..] += P V.
    fenceRegs(o);
    wgArrive();
    {
      const uint64_t dA = makeDesc(sBase + kOffP, 16, 1024);
      const uint64_t dB =
          makeDesc(kb + uint32_t(wg) * 4u * kChunkBytes, kChunkBytes, 1024);
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk)
        if (kVariant != 4 && kVariant != 5)
          wgmmaPV(o, dA + ((kk * 32) >> 4), dB + ((kk * 2048) >> 4));
    }
    wgCommit();
    wgWaitAll();
    fenceRegs(o);
  }
  cpWaitAll();

  // Row sums: lanes of a quad, then the two warpgroups.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  if (q4 == 0) {
    redSum[wg * 64 + r0] = kVariant == 6 && wg == 1 ? 0.0f : l[0];
    redSum[wg * 64 + r0 + 8] = kVariant == 6 && wg == 1 ? 0.0f : l[1];
    if (kVariant == 6 && wg == 0) {
      redMax[64 + r0] = m[0];
      redMax[64 + r0 + 8] = m[1];
    }
  }
  __syncthreads();
  if (kVariant == 6) {
    m[0] = redMax[64 + r0];
    m[1] = redMax[64 + r0 + 8];
  }
  float inv[2], lseV[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float L = redSum[r0 + 8 * r] + redSum[64 + r0 + 8 * r];
    inv[r] = L > 0.0f ? 1.0f / L : 0.0f;
    lseV[r] = L > 0.0f ? m[r] * kLn2M + logf(L) : -INFINITY;
  }
  const int H = p.heads;
  if (p.splits == 1) {
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int col = wg * 256 + j * 8 + q4 * 2;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int h = h0 + r0 + 8 * r;
        const int64_t off = b * p.oS0 + h * p.oS1 + col;
        const float v0 = o[j * 4 + 2 * r] * inv[r], v1 = o[j * 4 + 2 * r + 1] * inv[r];
        if (p.outType == int(DType::BF16)) {
          *reinterpret_cast<uint32_t *>(static_cast<uint16_t *>(p.out) + off) =
              packBf16(v0, v1);
        } else {
          storeF(p.out, p.outType, off, v0);
          storeF(p.out, p.outType, off + 1, v1);
        }
      }
    }
    if (p.lse && q4 == 0 && wg == 0) {
      p.lse[b * p.lS0 + (h0 + r0) * p.lS1] = lseV[0];
      p.lse[b * p.lS0 + (h0 + r0 + 8) * p.lS1] = lseV[1];
    }
    return;
  }
  float *po = p.partOut + ((int64_t(b) * p.splits + split) * H) * kDv;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const int col = wg * 256 + j * 8 + q4 * 2;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int h = h0 + r0 + 8 * r;
      *reinterpret_cast<float2 *>(po + int64_t(h) * kDv + col) =
          make_float2(o[j * 4 + 2 * r] * inv[r], o[j * 4 + 2 * r + 1] * inv[r]);
    }
  }
  if (q4 == 0 && wg == 0) {
    float *pl = p.partLse + (int64_t(b) * p.splits + split) * H;
    pl[h0 + r0] = lseV[0];
    pl[h0 + r0 + 8] = lseV[1];
  }
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
  // MLART_DECODE_MANY=2..5 selects a timing variant (see the kernel).
  static const int variant = [] {
    const char *v = std::getenv("MLART_DECODE_MANY");
    return v && v[0] >= '2' && v[0] <= '6' ? v[0] - '0' : 1;
  }();
  auto kernel = variant == 2   ? decodeManyHeadsKernel<2>
                : variant == 3 ? decodeManyHeadsKernel<3>
                : variant == 4 ? decodeManyHeadsKernel<4>
                : variant == 5 ? decodeManyHeadsKernel<5>
                : variant == 6 ? decodeManyHeadsKernel<6>
                               : decodeManyHeadsKernel<1>;
  MLART_CUDA_CHECK(cudaFuncSetAttribute(kernel,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        int(kSmem)),
                   "cudaFuncSetAttribute(decodeManyHeadsKernel)");
  kernel<<<dim3(unsigned(p.heads / kManyHeads), unsigned(p.splits),
                unsigned(batch)),
           kThreads, kSmem, stream>>>(p);
  MLART_CUDA_CHECK_LAUNCH("decodeManyHeadsKernel");
  return Status::success();
}

} // namespace mlart::cuda
