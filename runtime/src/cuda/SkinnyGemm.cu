//===- SkinnyGemm.cu - Split-K weight-streaming GEMM for M <= 64 ---------===//
//
// out[M, N] = x[M, K] @ W with M <= 64 rows (a decode batch) runs at the
// speed W streams from DRAM. One CTA (four warps): a 64-column tile and a
// K slice; the `split` CTAs of a cluster cover K.
//
//  0. Before waiting for the previous kernel (programmatic dependent
//     launch) the CTA may ask L2 to prefetch its W slice
//     (cp.async.bulk.prefetch.L2: nothing is written to registers or shared
//     memory, L2 is the coherence point). Everything else follows the wait.
//  1. The slice streams through a ring of `STAGES` shared-memory slots, one
//     64-wide chunk of K each: x's [16 * MT, 64] and W's 64 x 64 block,
//     128-byte rows with the 16-byte units XOR-swizzled by row. All 128
//     threads issue 16-byte cp.async for chunk c + STAGES - 1 while chunk c
//     is multiplied (the sm80 multistage pipeline): STAGES - 1 chunks, up to
//     112 KB, are in flight per CTA. Rows >= M, columns >= N and k >= K are
//     zero-filled by the copy (src-size), so the MMAs need no masks.
//  2. Warp w takes k16 step w of every chunk: ldmatrix A (x) and B (W;
//     .trans for the per-head [K, N] layout), mma.sync m16n8k16 into the
//     full [16 * MT, 64] f32 tile.
//  3. The four warps' tiles are summed in shared memory in a fixed order,
//     a cluster barrier publishes the CTA's tile, and each CTA sums one
//     share of the tile over the cluster's CTAs (distributed shared memory,
//     rank order) and stores it. No workspace, no atomics: deterministic
//     and graph-capturable.
//
//===----------------------------------------------------------------------===//
#include "cuda/SkinnyGemm.h"
#include "cuda/Knobs.h"
#include "cuda/Launch.h"
#include "cuda/Sm90Ptx.h"

#include <cooperative_groups.h>

#include <atomic>

namespace mlart::cuda {

namespace cg = cooperative_groups;

namespace {

std::atomic<uint64_t> gLaunches{0};

struct SkinnyParams {
  const uint16_t *x, *w;
  uint16_t *out;
  int64_t xRow, xBatch, wRow, wBatch, oRow, oBatch, oCol;
  int m, n, k;
  int split, kSlice, pStride, prefetch;
};

template <bool Bf16>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4],
                                         uint32_t b0, uint32_t b1) {
  if constexpr (Bf16)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <bool Bf16> __device__ __forceinline__ uint16_t toBits(float v) {
  if constexpr (Bf16)
    return floatToBf16Bits(v);
  else
    return floatToF16Bits(v);
}

/// Byte offset of 16-byte unit u of row r in a tile of 128-byte rows:
/// ldmatrix reads unit u of eight consecutive rows, which land in eight
/// distinct bank groups.
__device__ __forceinline__ uint32_t swz(int r, int u) {
  return uint32_t(r * 128 + ((u ^ (r & 7)) << 4));
}

/// MT: 16-row tiles of M. KMajor: W is [N, K] (linear) rather than [K, N].
template <int MT, bool KMajor, bool Bf16, int STAGES>
__global__ void __launch_bounds__(kSkinnyThreads, 1)
    skinnyGemmKernel(const __grid_constant__ SkinnyParams p) {
  constexpr int ROWS = 16 * MT;
  constexpr uint32_t SLOT = (ROWS + kSkinnyTileCols) * 128; // x rows, W rows
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int rank = int(blockIdx.x) % p.split;
  const int tile = int(blockIdx.x) / p.split;
  const int64_t b = blockIdx.y;
  const int kBegin = rank * p.kSlice;
  const int kLen = max(0, min(p.kSlice, p.k - kBegin));
  const int kEnd = kBegin + kLen;
  const int n0 = tile * int(kSkinnyTileCols);
  const uint16_t *xb = p.x + b * p.xBatch;
  const uint16_t *wb = p.w + b * p.wBatch;

  // 0. W is a weight, not an output of the previous kernel; only L2 sees
  // the prefetch. Segment lengths are whole 16-byte units inside the rows.
  if (p.prefetch && kLen > 0) {
    if constexpr (KMajor) {
      for (int r = tid; r < kSkinnyTileCols && n0 + r < p.n; r += kSkinnyThreads)
        sm90::prefetchL2Bulk(wb + int64_t(n0 + r) * p.wRow + kBegin,
                             uint32_t(kLen) * 2);
    } else {
      const int cols = min(int(kSkinnyTileCols), p.n - n0) & ~7;
      if (cols > 0)
        for (int r = tid; r < kLen; r += kSkinnyThreads)
          sm90::prefetchL2Bulk(wb + int64_t(kBegin + r) * p.wRow + n0,
                               uint32_t(cols) * 2);
    }
  }
  pdlPrologue(); // x comes from the previous kernel

  const uint32_t ring = sm90::smemU32(smem);
  // 1. Chunk c of the slice into slot s: MT (x) + 4 (W) copies a thread.
  auto load = [&](int c, int s) {
    const uint32_t xs = ring + uint32_t(s) * SLOT;
    const uint32_t ws = xs + ROWS * 128;
    const int kc = kBegin + c * int(kSkinnyChunk);
#pragma unroll
    for (int q = 0; q < MT; ++q) {
      const int i = tid + q * kSkinnyThreads;
      const int r = i >> 3, u = i & 7, kk = kc + 8 * u;
      const bool ok = r < p.m && kk < kEnd;
      sm90::cpAsync16(xs + swz(r, u), ok ? xb + r * p.xRow + kk : p.x, ok);
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int i = tid + q * kSkinnyThreads;
      const int r = i >> 3, u = i & 7;
      if constexpr (KMajor) { // row r is column n0 + r
        const int kk = kc + 8 * u;
        const bool ok = n0 + r < p.n && kk < kEnd;
        sm90::cpAsync16(ws + swz(r, u),
                        ok ? wb + int64_t(n0 + r) * p.wRow + kk : p.w, ok);
      } else { // row r is k = kc + r, unit u columns n0 + 8u ..
        const int kk = kc + r, nn = n0 + 8 * u;
        const int bytes = kk < kEnd ? 2 * max(0, min(8, p.n - nn)) : 0;
        sm90::cpAsync16Bytes(ws + swz(r, u),
                             bytes ? wb + int64_t(kk) * p.wRow + nn : p.w,
                             bytes);
      }
    }
  };

  float acc[MT][8][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[i][j][e] = 0.0f;

  // 2. Warp w: k16 step w of the chunk in slot s.
  auto compute = [&](int s) {
    const uint32_t xs = ring + uint32_t(s) * SLOT;
    const uint32_t ws = xs + ROWS * 128;
    uint32_t a[MT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
      sm90::ldsm4(a[i], xs + swz(16 * i + (lane & 7) + 8 * ((lane >> 3) & 1),
                                 2 * warp + (lane >> 4)));
#pragma unroll
    for (int jp = 0; jp < 4; ++jp) {
      // b[0], b[1]: n8 tile 2 jp (k 0-7, 8-15); b[2], b[3]: tile 2 jp + 1.
      uint32_t bq[4];
      if constexpr (KMajor)
        sm90::ldsm4(bq, ws + swz(16 * jp + (lane & 7) + 8 * (lane >> 4),
                                 2 * warp + ((lane >> 3) & 1)));
      else
        sm90::ldsm4T(bq, ws + swz(16 * warp + (lane & 7) +
                                      8 * ((lane >> 3) & 1),
                                  2 * jp + (lane >> 4)));
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        mma16816<Bf16>(acc[i][2 * jp], a[i], bq[0], bq[1]);
        mma16816<Bf16>(acc[i][2 * jp + 1], a[i], bq[2], bq[3]);
      }
    }
  };

  const int chunks = (kLen + int(kSkinnyChunk) - 1) / int(kSkinnyChunk);
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < chunks)
      load(s, s);
    sm90::cpCommit(); // empty groups keep the count uniform
  }
#pragma unroll 1
  for (int c = 0; c < chunks; ++c) {
    sm90::cpWaitGroup<STAGES - 2>(); // chunk c has landed (this thread's)
    __syncthreads(); // ... everyone's; slot (c - 1) % STAGES is free
    const int next = c + STAGES - 1;
    if (next < chunks)
      load(next, next % STAGES);
    sm90::cpCommit();
    compute(c % STAGES);
  }
  sm90::cpWaitAll();
  __syncthreads(); // the ring becomes the partial tiles

  // 3. Partial tiles [4 warps][ROWS][pStride].
  float *part = reinterpret_cast<float *>(smem);
  {
    const int g = lane >> 2, t = lane & 3;
    float *mine = part + warp * ROWS * p.pStride;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float *r0 = mine + (16 * i + g) * p.pStride + 8 * j + 2 * t;
        *reinterpret_cast<float2 *>(r0) =
            make_float2(acc[i][j][0], acc[i][j][1]);
        *reinterpret_cast<float2 *>(r0 + 8 * p.pStride) =
            make_float2(acc[i][j][2], acc[i][j][3]);
      }
  }
  __syncthreads();
  constexpr int colVecs = int(kSkinnyTileCols) / 4;
  const int units = p.m * colVecs;
  for (int e = tid; e < units; e += kSkinnyThreads) {
    const int r = e / colVecs, col = (e - r * colVecs) * 4;
    float4 s = *reinterpret_cast<const float4 *>(part + r * p.pStride + col);
#pragma unroll
    for (int q = 1; q < kSkinnyThreads / 32; ++q) {
      const float4 v = *reinterpret_cast<const float4 *>(
          part + (q * ROWS + r) * p.pStride + col);
      s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
    }
    *reinterpret_cast<float4 *>(part + r * p.pStride + col) = s;
  }
  cg::cluster_group cluster = cg::this_cluster();
  if (p.split > 1)
    cluster.sync(); // every CTA's tile is complete and visible
  else
    __syncthreads();

  // This CTA's share of the tile, summed over the cluster in rank order.
  const int share = (units + p.split - 1) / p.split;
  const int e1 = min(units, (rank + 1) * share);
  uint16_t *ob = p.out + b * p.oBatch;
  for (int e = rank * share + tid; e < e1; e += kSkinnyThreads) {
    const int r = e / colVecs, col = (e - r * colVecs) * 4;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int q = 0; q < p.split; ++q) {
      const float *src =
          p.split > 1 ? cluster.map_shared_rank(part, unsigned(q)) : part;
      const float4 s =
          *reinterpret_cast<const float4 *>(src + r * p.pStride + col);
      v[0] += s.x, v[1] += s.y, v[2] += s.z, v[3] += s.w;
    }
    const int n = n0 + col;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (n + j < p.n)
        ob[r * p.oRow + int64_t(n + j) * p.oCol] = toBits<Bf16>(v[j]);
  }
  if (p.split > 1)
    cluster.sync(); // no CTA leaves while another still reads its tile
}

using KernelFn = void (*)(SkinnyParams);

template <bool KMajor, bool Bf16, int STAGES> KernelFn pickMt(int mTiles) {
  switch (mTiles) {
  case 1:
    return skinnyGemmKernel<1, KMajor, Bf16, STAGES>;
  case 2:
    return skinnyGemmKernel<2, KMajor, Bf16, STAGES>;
  case 3:
    return skinnyGemmKernel<3, KMajor, Bf16, STAGES>;
  default:
    return skinnyGemmKernel<4, KMajor, Bf16, STAGES>;
  }
}

template <int STAGES>
KernelFn pickLayout(int mTiles, bool kMajor, bool bf16) {
  if (kMajor)
    return bf16 ? pickMt<true, true, STAGES>(mTiles)
                : pickMt<true, false, STAGES>(mTiles);
  return bf16 ? pickMt<false, true, STAGES>(mTiles)
              : pickMt<false, false, STAGES>(mTiles);
}

KernelFn pickKernel(const SkinnyGemmPlan &plan, bool kMajor, bool bf16) {
  return plan.stages == 4 ? pickLayout<4>(plan.mTiles, kMajor, bf16)
                          : pickLayout<8>(plan.mTiles, kMajor, bf16);
}

bool sameSkinnyType(const TensorRef &x, const TensorRef &w,
                    const TensorRef &out) {
  return (x.dtype == DType::BF16 || x.dtype == DType::F16) &&
         w.dtype == x.dtype && out.dtype == x.dtype;
}

Status launch(const SkinnyGemmPlan &plan, const SkinnyGemmProblem &prob,
              const TensorRef &x, const TensorRef &w, const TensorRef &out,
              int64_t oRow, int64_t oBatch, int64_t oCol,
              cudaStream_t stream) {
  SkinnyParams p;
  p.x = static_cast<const uint16_t *>(x.data);
  p.w = static_cast<const uint16_t *>(w.data);
  p.out = static_cast<uint16_t *>(out.data);
  p.xRow = prob.xRow;
  p.xBatch = prob.xBatch;
  p.wRow = prob.wRow;
  p.wBatch = prob.wBatch;
  p.oRow = oRow;
  p.oBatch = oBatch;
  p.oCol = oCol;
  p.m = int(prob.m);
  p.n = int(prob.n);
  p.k = int(prob.k);
  p.split = plan.split;
  p.kSlice = int(plan.kSlice);
  p.pStride = plan.pStride;
  p.prefetch = plan.prefetch ? 1 : 0;
  KernelFn kernel =
      pickKernel(plan, prob.weightKMajor, x.dtype == DType::BF16);
  MLART_RETURN_IF_ERROR(
      allowDynamicSmem(kernel, size_t(plan.smemBytes), "skinnyGemmKernel"));
  // The kernel begins with pdlPrologue(); a cluster of `split` CTAs shares
  // a column tile.
  const LaunchShape shape{
      dim3(unsigned(plan.nTiles * plan.split), unsigned(prob.batch)),
      dim3(unsigned(plan.threads())), size_t(plan.smemBytes),
      unsigned(plan.split)};
  MLART_RETURN_IF_ERROR(
      launchKernel("skinnyGemmKernel", kernel, shape, stream, p));
  gLaunches.fetch_add(1, std::memory_order_relaxed);
  return Status::success();
}

} // namespace

// Off unless MLART_SKINNY_GEMM=1: on the H200 (2026-12-03, mla-bench
// --gemm-only) the five step projections took 56.9 us here against 24.1 us
// through cuBLAS (docs/cuda.md), so cuBLAS stays the default.
bool skinnyGemmEnabled() { return knobValue(Knob::SkinnyGemm) == 1; }

int skinnyGemmVariant() { return knobValue(Knob::SkinnyVariant); }

std::optional<SkinnyGemmProblem> linearProblem(const LinearArgs &a) {
  if (!sameSkinnyType(a.x, a.weight, a.out))
    return std::nullopt;
  SkinnyGemmProblem p;
  p.weightKMajor = true;
  p.m = a.x.sizes[0];
  p.k = a.x.sizes[1];
  p.n = a.weight.sizes[0];
  p.batch = 1;
  p.x = reinterpret_cast<uintptr_t>(a.x.data);
  p.w = reinterpret_cast<uintptr_t>(a.weight.data);
  p.xRow = a.x.strides[0];
  p.wRow = a.weight.strides[0];
  return p;
}

std::optional<SkinnyGemmProblem> perHeadProblem(const TensorRef &x,
                                                const TensorRef &w,
                                                const TensorRef &out) {
  if (!sameSkinnyType(x, w, out))
    return std::nullopt;
  SkinnyGemmProblem p;
  p.weightKMajor = false;
  p.m = x.sizes[0];
  p.batch = x.sizes[1];
  p.k = x.sizes[2];
  p.n = w.sizes[2];
  p.x = reinterpret_cast<uintptr_t>(x.data);
  p.w = reinterpret_cast<uintptr_t>(w.data);
  p.xRow = x.strides[0];
  p.xBatch = x.strides[1];
  p.wBatch = w.strides[0];
  p.wRow = w.strides[1];
  return p;
}

std::optional<SkinnyGemmPlan> skinnyLinearPlan(const LinearArgs &a,
                                               int smCount) {
  if (!skinnyGemmEnabled())
    return std::nullopt;
  std::optional<SkinnyGemmProblem> prob = linearProblem(a);
  return prob ? planSkinnyGemm(*prob, smCount,
                               skinnyVariant(skinnyGemmVariant()))
              : std::nullopt;
}

std::optional<SkinnyGemmPlan> skinnyPerHeadPlan(const TensorRef &x,
                                                const TensorRef &w,
                                                const TensorRef &out,
                                                int smCount) {
  if (!skinnyGemmEnabled())
    return std::nullopt;
  std::optional<SkinnyGemmProblem> prob = perHeadProblem(x, w, out);
  return prob ? planSkinnyGemm(*prob, smCount,
                               skinnyVariant(skinnyGemmVariant()))
              : std::nullopt;
}

StatusOr<bool> skinnyLinear(CudaContext &ctx, const LinearArgs &a,
                            cudaStream_t stream) {
  std::optional<SkinnyGemmPlan> plan = skinnyLinearPlan(a, ctx.smCount);
  if (!plan)
    return false;
  MLART_RETURN_IF_ERROR(launch(*plan, *linearProblem(a), a.x, a.weight, a.out,
                               a.out.strides[0], 0, a.out.strides[1],
                               stream));
  return true;
}

StatusOr<bool> skinnyPerHead(CudaContext &ctx, const TensorRef &x,
                             const TensorRef &w, const TensorRef &out,
                             cudaStream_t stream) {
  std::optional<SkinnyGemmPlan> plan = skinnyPerHeadPlan(x, w, out, ctx.smCount);
  if (!plan)
    return false;
  MLART_RETURN_IF_ERROR(launch(*plan, *perHeadProblem(x, w, out), x, w, out,
                               out.strides[0], out.strides[1], out.strides[2],
                               stream));
  return true;
}

uint64_t skinnyGemmLaunchCount() {
  return gLaunches.load(std::memory_order_relaxed);
}

} // namespace mlart::cuda
