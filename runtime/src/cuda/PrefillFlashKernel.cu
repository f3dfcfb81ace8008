//===- PrefillFlashKernel.cu - Tensor-core prefill attention (MHA form) ---===//
//
// Flash attention for a packed prefill batch, MHA form:
// out[i, h] = softmax_j(scale * q[i, h] . k[j, h]) v[j, h], where the keys j
// of token i are, causal mode, its request's new tokens up to itself, or,
// context mode, its request's expanded cached context (PrefillContext.h).
//
// One CTA of 4 warps takes 64 consecutive packed tokens (a chunk) of one
// head; warp w owns rows 16w..16w+15. A chunk may straddle requests: each
// row masks keys outside its own range, and the CTA walks its rows' ranges
// in 64-key tiles, merged into segments (one for a causal chunk, one per
// request in context mode, so no tile of another request's context is
// read). Tiles are staged in shared memory by cp.async (two stages: the
// next tile's K and V load while this one is used); S = Q K^T and
// O += P V run as mma.sync m16n8k16 (bf16 or f16 in, f32 accumulate), the
// query's fragments stay in registers, P is re-packed from S's accumulators
// without shared memory, and the softmax is online in the log2 domain.
// Chunks are scheduled longest key range first (the last chunks of a
// causal request). The epilogue can merge an earlier launch's rows (the
// context part) by LSE, so context + new tokens cost no extra kernel.
//
// Rows of padding tokens (at or past queryStartLoc[R]) and rows whose
// request bounds are malformed get zeros and an LSE of -inf; malformed
// bounds and context lengths are also recorded (badSeqIndex), and no load
// ever leaves the rows the bounds allow.
//
//===----------------------------------------------------------------------===//
#include "cuda/PrefillFlash.h"

#include "cuda/Launch.h"
#include "cuda/Sm90Ptx.h"

#include <atomic>
#include <climits>
#include <cmath>

namespace mlart::cuda {
namespace {

constexpr int kBM = 64, kBN = 64, kThreads = 128;
constexpr int kQk = kFlashQkDim, kV = kFlashVDim;
// Padded shared-memory rows (elements): eight consecutive rows start in
// eight different 16-byte bank groups, so ldmatrix is conflict-free.
constexpr int kQkRow = kQk + 8, kVRow = kV + 8;
constexpr int kQkChunks = kQk / 8, kVChunks = kV / 8; // 16-byte pieces a row
constexpr int kKSteps = kQk / 16;                     // k-steps of S
constexpr int kSTiles = kBN / 8, kOTiles = kV / 8;    // n8 tiles of S and O
constexpr size_t kSmemBytes =
    size_t(kBM * kQkRow + 2 * kBN * kQkRow + 2 * kBN * kVRow) * 2;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

std::atomic<uint64_t> &flashLaunches() {
  static std::atomic<uint64_t> n{0};
  return n;
}

template <bool kHalf>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4],
                                         uint32_t b0, uint32_t b1) {
  if constexpr (kHalf)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
}

/// Two probabilities as one A-operand register (lo at the lower column).
template <bool kHalf> __device__ __forceinline__ uint32_t packPair(float lo, float hi) {
  if constexpr (kHalf) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
  } else {
    const __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&b);
  }
}

/// cp.async of 64 rows (`valid` of them real, the rest zero-filled) of
/// `chunks` 16-byte pieces: row r is src + (first + r) * stride.
__device__ __forceinline__ void loadRows(uint16_t *dst, int rowElems,
                                         const uint16_t *src, int64_t stride,
                                         int64_t first, int valid, int chunks) {
  for (int c = int(threadIdx.x); c < kBN * chunks; c += kThreads) {
    const int r = c / chunks, u = c - r * chunks;
    const bool ok = r < valid;
    const uint16_t *from = ok ? src + (first + r) * stride + u * 8 : src;
    sm90::cpAsync16Bytes(sm90::smemU32(dst + r * rowElems + u * 8), from,
                         ok ? 16 : 0);
  }
}

/// The keys of packed token i as [lo, hi] (hi < lo: none). Causal: its
/// request's first token to itself; context mode: its request's context
/// rows. {INT_MAX, -1} when i is padding or its request's bounds are
/// malformed (recorded), which also keeps its chunk on the masked path.
template <bool kContext>
__device__ __forceinline__ int2 keyRange(const PrefillFlashParams &p,
                                         DeviceErrorRecord *rec, int end,
                                         int i) {
  if (i >= end)
    return make_int2(INT_MAX, -1);
  int lo = 0, hi = p.R - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (p.qsl[mid] <= i)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int r = lo, start = p.qsl[r];
  if (start < 0 || start > i) {
    atomicMin(&rec->badSeqIndex, r);
    return make_int2(INT_MAX, -1);
  }
  if constexpr (!kContext)
    return make_int2(start, i);
  int len = prefillContextLength(p.ctxLens, p.ctxStride, p.lensIncludeNew,
                                 p.qsl, r, p.ctxPad);
  if (len < 0) {
    atomicMin(&rec->badSeqIndex, r);
    len = 0;
  }
  return make_int2(r * p.ctxPad, r * p.ctxPad + len - 1);
}

/// The key segments a chunk walks, built by warp 0 from its 64 rows'
/// ranges. Rows are in request order, so the first keys of non-empty
/// ranges never decrease: a row starts a new segment when its range begins
/// past every earlier range's end + 1, else it extends the current one. So
/// a causal chunk is one segment and a context chunk one per request. Also
/// the tightest range every row covers ([loMax, hiMin]): a tile inside it
/// needs no mask.
struct ChunkKeys {
  int lo[kBM], hi[kBM];   ///< per segment
  int tileStart[kBM + 1]; ///< first tile of each segment; [n] = all tiles
  int segments, loMax, hiMin;
};

/// Inclusive max-scan over the warp's lanes.
__device__ __forceinline__ int warpScanMax(int v, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int u = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o)
      v = max(v, u);
  }
  return v;
}

/// Inclusive sum-scan over the warp's lanes.
__device__ __forceinline__ int warpScanSum(int v, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int u = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o)
      v += u;
  }
  return v;
}

/// Run by the 32 lanes of one warp; lane l takes rows 2l and 2l + 1.
__device__ void buildChunkKeys(ChunkKeys &c, const int (&rowLo)[kBM],
                               const int (&rowHi)[kBM], int lane) {
  const int lo[2] = {rowLo[2 * lane], rowLo[2 * lane + 1]};
  const int hi[2] = {rowHi[2 * lane], rowHi[2 * lane + 1]};
  int loMax = max(lo[0], lo[1]), hiMin = min(hi[0], hi[1]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    loMax = max(loMax, __shfl_xor_sync(0xffffffffu, loMax, o));
    hiMin = min(hiMin, __shfl_xor_sync(0xffffffffu, hiMin, o));
  }
  // The latest key of the non-empty ranges before each row (INT_MIN: none).
  const int end0 = hi[0] >= lo[0] ? hi[0] : INT_MIN;
  const int end1 = hi[1] >= lo[1] ? hi[1] : INT_MIN;
  const int upTo = warpScanMax(max(end0, end1), lane);
  int before[2];
  before[0] = __shfl_up_sync(0xffffffffu, upTo, 1);
  if (lane == 0)
    before[0] = INT_MIN;
  before[1] = max(before[0], end0);
  bool starts[2];
#pragma unroll
  for (int e = 0; e < 2; ++e)
    starts[e] = hi[e] >= lo[e] &&
                (before[e] == INT_MIN || lo[e] > before[e] + 1);
  const unsigned s0 = __ballot_sync(0xffffffffu, starts[0]);
  const unsigned s1 = __ballot_sync(0xffffffffu, starts[1]);
  const unsigned below = (1u << lane) - 1u;
  const int n = __popc(s0) + __popc(s1);
  int index = __popc(s0 & below) + __popc(s1 & below);
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    if (!starts[e])
      continue;
    c.lo[index] = lo[e];
    if (index > 0)
      c.hi[index - 1] = before[e]; // the previous segment ends here
    ++index;
  }
  if (lane == 31 && n > 0)
    c.hi[n - 1] = upTo;
  __syncwarp();
  // Tiles a segment, then their prefix sums.
  int tiles[2];
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int k = 2 * lane + e;
    tiles[e] = k < n ? (c.hi[k] - c.lo[k]) / kBN + 1 : 0;
  }
  const int upToTiles = warpScanSum(tiles[0] + tiles[1], lane);
  c.tileStart[2 * lane + 1] = upToTiles - tiles[1];
  c.tileStart[2 * lane + 2] = upToTiles;
  if (lane == 0) {
    c.tileStart[0] = 0;
    c.segments = n;
    c.loMax = loMax;
    c.hiMin = hiMin;
  }
}

/// kContext: the context mode (p.ctxLens set); kMerge: p.prior set. Both
/// are template parameters so the plain causal launch compiles without
/// their code: with run-time tests the causal launch was 3-13 % slower
/// than before the context mode, with templates 2-5 % (H100).
template <bool kHalf, bool kContext, bool kMerge>
__global__ void __launch_bounds__(kThreads, 2)
    prefillFlashKernel(PrefillFlashParams p, DeviceErrorRecord *rec) {
  pdlPrologue();
  extern __shared__ __align__(16) uint16_t smem[];
  uint16_t *qs = smem;
  uint16_t *ks = qs + kBM * kQkRow;  // 2 stages
  uint16_t *vs = ks + 2 * kBN * kQkRow; // 2 stages
  __shared__ int rowLo[kBM], rowHi[kBM];
  __shared__ ChunkKeys keys;

  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int h = int(blockIdx.y);
  const int chunk = int(gridDim.x - 1 - blockIdx.x); // longest ranges first
  const int first = chunk * kBM;

  int end = p.R > 0 ? p.qsl[p.R] : 0;
  if (end < 0 || end > p.T) {
    if (tid == 0 && blockIdx.x == 0 && h == 0)
      atomicMin(&rec->badSeqIndex, p.R);
    end = 0; // everything is padding
  }
  if (blockIdx.x == 0 && h == 0)
    reportUnorderedBounds(p.qsl, p.R, rec);
  // This thread's two rows (g and g + 8 of the warp's 16) and their keys.
  int row[2];
  int2 range[2];
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int local = 16 * warp + g + 8 * e;
    row[e] = first + local;
    range[e] = keyRange<kContext>(p, rec, end, row[e]);
    if (t == 0) {
      rowLo[local] = range[e].x;
      rowHi[local] = range[e].y;
    }
  }
  __syncthreads();
  if (warp == 0)
    buildChunkKeys(keys, rowLo, rowHi, lane);
  __syncthreads();
  const int tiles = keys.tileStart[keys.segments];
  // Held in registers: read at every tile.
  const int loMax = keys.loMax, hiMin = keys.hiMin;
  const int lo0 = tiles > 0 ? keys.lo[0] : 0; // the causal segment
  const int hi0 = tiles > 0 ? keys.hi[0] : -1;

  const uint16_t *qBase = static_cast<const uint16_t *>(p.q) + h * p.qS1;
  const uint16_t *kBase = static_cast<const uint16_t *>(p.k) + h * p.kS1;
  const uint16_t *vBase = static_cast<const uint16_t *>(p.v) + h * p.vS1;
  // The first key of a tile, and the last key of its segment.
  auto tileKeys = [&](int tile, int &segHi) {
    if constexpr (!kContext) { // a causal chunk is one segment
      segHi = hi0;
      return lo0 + tile * kBN;
    }
    int k = 0;
    while (tile >= keys.tileStart[k + 1])
      ++k;
    segHi = keys.hi[k];
    return keys.lo[k] + (tile - keys.tileStart[k]) * kBN;
  };
  auto loadTile = [&](int tile) {
    const int stage = tile & 1;
    int segHi;
    const int from = tileKeys(tile, segHi);
    const int valid = min(kBN, segHi - from + 1);
    loadRows(ks + stage * kBN * kQkRow, kQkRow, kBase, p.kS0, from, valid,
             kQkChunks);
    loadRows(vs + stage * kBN * kVRow, kVRow, vBase, p.vS0, from, valid,
             kVChunks);
  };
  if (tiles > 0) {
    loadRows(qs, kQkRow, qBase, p.qS0, first, min(kBM, end - first),
             kQkChunks);
    loadTile(0);
  }
  sm90::cpCommit();

  float o[kOTiles][4];
#pragma unroll
  for (int n = 0; n < kOTiles; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      o[n][e] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  uint32_t qf[kKSteps][4];
  const float scaleLog2 = p.scale * kLog2e;

  for (int tile = 0; tile < tiles; ++tile) {
    if (tile + 1 < tiles)
      loadTile(tile + 1);
    sm90::cpCommit();
    sm90::cpWaitGroup<1>(); // this tile (and the query) has landed
    __syncthreads();
    if (tile == 0)
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk)
        sm90::ldsm4(qf[kk],
                    sm90::smemU32(qs + (16 * warp + (lane & 7) +
                                        ((lane >> 3) & 1) * 8) * kQkRow +
                                  kk * 16 + (lane >> 4) * 8));
    const uint16_t *kt = ks + (tile & 1) * kBN * kQkRow;
    const uint16_t *vt = vs + (tile & 1) * kBN * kVRow;

    // S = Q K^T for this warp's 16 rows and the tile's 64 keys.
    float s[kSTiles][4];
#pragma unroll
    for (int n = 0; n < kSTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk)
#pragma unroll
      for (int np = 0; np < kSTiles / 2; ++np) {
        uint32_t b[4];
        sm90::ldsm4(b, sm90::smemU32(kt + (np * 16 + (lane & 7) +
                                           ((lane >> 4) << 3)) * kQkRow +
                                     kk * 16 + ((lane >> 3) & 1) * 8));
        mma16816<kHalf>(s[2 * np], qf[kk], b[0], b[1]);
        mma16816<kHalf>(s[2 * np + 1], qf[kk], b[2], b[3]);
      }

    // Scale, mask, online softmax (rows g and g + 8).
    int segHi;
    const int from = tileKeys(tile, segHi);
    const bool unmasked = from >= loMax && from + kBN - 1 <= hiMin;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kSTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;
        const int key = from + 8 * n + 2 * t + (e & 1);
        float v = s[n][e] * scaleLog2;
        if (!unmasked && (key < range[r].x || key > range[r].y))
          v = -INFINITY;
        s[n][e] = v;
        mx[r] = fmaxf(mx[r], v);
      }
    float alpha[2], mUse[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float mNew = fmaxf(m[r], mx[r]);
      mUse[r] = mNew == -INFINITY ? 0.0f : mNew;
      alpha[r] = exp2f(m[r] - mUse[r]);
      m[r] = mNew;
    }
    float rowSum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < kSTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float pv = exp2f(s[n][e] - mUse[e >> 1]);
        s[n][e] = pv;
        rowSum[e >> 1] += pv;
      }
#pragma unroll
    for (int r = 0; r < 2; ++r)
      l[r] = l[r] * alpha[r] + rowSum[r];
#pragma unroll
    for (int n = 0; n < kOTiles; ++n) {
      o[n][0] *= alpha[0];
      o[n][1] *= alpha[0];
      o[n][2] *= alpha[1];
      o[n][3] *= alpha[1];
    }

    // O += P V: S's accumulators of keys 16kk..16kk+15 are P's A fragment.
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      const uint32_t pa[4] = {
          packPair<kHalf>(s[2 * kk][0], s[2 * kk][1]),
          packPair<kHalf>(s[2 * kk][2], s[2 * kk][3]),
          packPair<kHalf>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
          packPair<kHalf>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int cp = 0; cp < kOTiles / 2; ++cp) {
        uint32_t b[4];
        sm90::ldsm4T(b, sm90::smemU32(vt + (kk * 16 + (lane & 7) +
                                            ((lane >> 3) & 1) * 8) * kVRow +
                                      cp * 16 + (lane >> 4) * 8));
        mma16816<kHalf>(o[2 * cp], pa, b[0], b[1]);
        mma16816<kHalf>(o[2 * cp + 1], pa, b[2], b[3]);
      }
    }
    __syncthreads(); // every warp is done with this stage before its refill
  }
  sm90::cpWaitAll();

  // Normalise (merging with the prior rows by LSE) and store; rows that
  // saw no key get 0 and -inf.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = row[r];
    if (i >= p.T)
      continue;
    const int64_t at = int64_t(i) * p.H + h;
    // out = o * wOwn + prior * wPrior; lse2 in the log2 domain.
    float lse2 = l[r] > 0.0f ? m[r] + log2f(l[r]) : -INFINITY;
    float wOwn = l[r] > 0.0f ? 1.0f / l[r] : 0.0f, wPrior = 0.0f;
    if constexpr (kMerge) {
      const float before = p.priorLse[at] * kLog2e;
      const float top = fmaxf(lse2, before);
      if (top == -INFINITY) {
        wOwn = 0.0f;
      } else {
        const float own = exp2f(lse2 - top), old = exp2f(before - top);
        const float inv = 1.0f / (own + old);
        wOwn *= own * inv;
        wPrior = old * inv;
        lse2 = top + log2f(own + old);
      }
    }
    const float *prior = kMerge ? p.prior + at * kV : nullptr;
    auto value = [&](int n, int j) {
      const float mine = o[n][2 * r + j] * wOwn;
      return prior ? mine + prior[8 * n + 2 * t + j] * wPrior : mine;
    };
    if (p.partial) {
      float *dst = p.partial + at * kV;
#pragma unroll
      for (int n = 0; n < kOTiles; ++n)
        *reinterpret_cast<float2 *>(dst + 8 * n + 2 * t) =
            make_float2(value(n, 0), value(n, 1));
    } else {
      const int64_t base = int64_t(i) * p.oS0 + int64_t(h) * p.oS1;
#pragma unroll
      for (int n = 0; n < kOTiles; ++n) {
        storeF(p.out, p.outType, base + 8 * n + 2 * t, value(n, 0));
        storeF(p.out, p.outType, base + 8 * n + 2 * t + 1, value(n, 1));
      }
    }
    if (p.lse && t == 0)
      p.lse[int64_t(i) * p.lS0 + int64_t(h) * p.lS1] =
          lse2 == -INFINITY ? -INFINITY : lse2 * kLn2;
  }
}

/// A [T, H, dim] operand the kernel can cp.async: `dtype`, last dim `dim`,
/// 16-byte pieces.
bool flashOperand(const TensorRef &x, DType dtype, int64_t dim) {
  return x.rank == 3 && x.dtype == dtype && x.sizes[2] == dim &&
         x.present() && rowsAligned16(x);
}

} // namespace

bool prefillFlashSupports(const TensorRef &q, const TensorRef &k,
                          const TensorRef &v, const TensorRef &out) {
  const DType dt = q.dtype;
  if (dt != DType::BF16 && dt != DType::F16)
    return false;
  return flashOperand(q, dt, kQk) && flashOperand(k, dt, kQk) &&
         flashOperand(v, dt, kV) && out.rank == 3 && out.strides[2] == 1 &&
         (out.dtype == DType::BF16 || out.dtype == DType::F16 ||
          out.dtype == DType::F32);
}

Status launchPrefillFlash(const PrefillFlashParams &p, DeviceErrorRecord *rec,
                          cudaStream_t stream) {
  using KernelFn = void (*)(PrefillFlashParams, DeviceErrorRecord *);
  const bool half = p.dtype == int(DType::F16);
  const KernelFn kernel =
      p.ctxLens ? (half ? prefillFlashKernel<true, true, false>
                        : prefillFlashKernel<false, true, false>)
      : p.prior ? (half ? prefillFlashKernel<true, false, true>
                        : prefillFlashKernel<false, false, true>)
                : (half ? prefillFlashKernel<true, false, false>
                        : prefillFlashKernel<false, false, false>);
  if (p.ctxLens && p.prior)
    return internalError("prefill flash: context mode does not merge");
  MLART_RETURN_IF_ERROR(
      allowDynamicSmem(kernel, kSmemBytes, "prefillFlashKernel"));
  const int64_t chunks = (int64_t(p.T) + kBM - 1) / kBM;
  if (chunks > INT_MAX || p.H > 65535)
    return invalidArgument("prefill too large for one launch");
  MLART_RETURN_IF_ERROR(launchKernel(
      "prefillFlashKernel", kernel, dim3(unsigned(chunks), unsigned(p.H)),
      dim3(kThreads), kSmemBytes, stream, p, rec));
  flashLaunches().fetch_add(1, std::memory_order_relaxed);
  return Status::success();
}

uint64_t prefillFlashLaunchCount() { return flashLaunches().load(); }

} // namespace mlart::cuda
