//===- SkinnyGemm.cu - Split-K weight-streaming GEMM for M <= 64 ---------===//
//
// out[M, N] = x[M, K] @ W with M <= 64 rows (a decode batch) runs at the
// speed W streams from DRAM. One CTA: a column tile (32 columns per warp,
// warpsN warps) and a K slice; the `split` CTAs of a cluster cover K.
//
//  1. x's slice [M, kSlice] is staged in shared memory (cp.async, rows >= M
//     and k >= K zero-filled) while each warp already has its first W
//     chunks in flight: W goes from global straight to registers with
//     L1-bypassing 16- or 8-byte loads, each byte used once.
//  2. mma.sync m16n8k16 (f32 accumulate), x as the A operand (16 rows of
//     M), W as B (8 columns). The sum over k is permutation-invariant: a
//     thread owns 8 contiguous k of a 32-wide chunk and feeds them to two
//     MMAs, A and B under the same permutation. A K-major W row gives the
//     B fragment as loaded; an N-major W (per-head [K, N]) is transposed in
//     registers (byte permutes of rows k, k + 1).
//  3. Each warp's f32 tile goes to shared memory, the warps of a K slice
//     are summed in a fixed order, a cluster barrier publishes the CTA's
//     tile, and each CTA sums one share of the tile over the cluster's CTAs
//     (distributed shared memory, fixed order) and stores it. No global
//     workspace, no atomics: deterministic and graph-capturable.
//
//===----------------------------------------------------------------------===//
#include "cuda/SkinnyGemm.h"
#include "cuda/Launch.h"
#include "cuda/Sm90Ptx.h"

#include <cooperative_groups.h>

#include <atomic>
#include <cstdlib>

namespace mlart::cuda {

namespace cg = cooperative_groups;

namespace {

std::atomic<uint64_t> gLaunches{0};

struct SkinnyParams {
  const uint16_t *x, *w;
  uint16_t *out;
  int64_t xRow, xBatch, wRow, wBatch, oRow, oBatch, oCol;
  int m, n, k;
  int warpsN, warpsK, split, kSlice, xStride, pStride;
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

// Streaming loads of W: read-only, no L1 allocation (each byte is used once
// per call), 256-byte L2 fetches (neighbouring chunks of a row are read by
// the same or the next warp). Volatile keeps them where they are issued:
// all of a group's loads in flight before the first use.
__device__ __forceinline__ void ldStream16(uint32_t *r, const void *p) {
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 "
               "{%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "l"(p));
}
__device__ __forceinline__ void ldStream8(uint32_t *r, const void *p) {
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v2.u32 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "l"(p));
}

template <bool Bf16> __device__ __forceinline__ uint16_t toBits(float v) {
  if constexpr (Bf16)
    return floatToBf16Bits(v);
  else
    return floatToF16Bits(v);
}

/// MT: 16-row tiles of M. KMajor: W is [N, K] (linear) rather than [K, N].
template <int MT, bool KMajor, bool Bf16>
__global__ void __launch_bounds__(256, 2)
    skinnyGemmKernel(const __grid_constant__ SkinnyParams p) {
  // Chunks a warp has in flight at once (64 bytes of W per thread each):
  // as many as fit 128 registers next to the 16 * MT accumulators (the
  // N-major transpose needs 16 more).
  constexpr int U = MT <= 2 ? (KMajor ? 3 : 2) : (KMajor ? 2 : 1);
  pdlPrologue(); // x comes from the previous kernel
  extern __shared__ __align__(16) uint8_t smem[];
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wn = warp % p.warpsN, wk = warp / p.warpsN;
  const int rank = int(blockIdx.x) % p.split;
  const int tile = int(blockIdx.x) / p.split;
  const int64_t b = blockIdx.y;
  const int kBegin = rank * p.kSlice;
  const int kLen = max(0, min(p.kSlice, p.k - kBegin));
  const int ctaCols = 32 * p.warpsN;
  const int n0 = tile * ctaCols + wn * 32; // this warp's first column

  // 1. Stage x's slice; rows >= M and k >= K read as zeros.
  uint16_t *xs = reinterpret_cast<uint16_t *>(smem);
  {
    const uint16_t *xb = p.x + b * p.xBatch + kBegin;
    const int vecs = p.kSlice / 8;
    for (int i = tid; i < MT * 16 * vecs; i += int(blockDim.x)) {
      const int r = i / vecs, kk = (i - r * vecs) * 8;
      const bool ok = r < p.m && kk < kLen;
      sm90::cpAsync16(sm90::smemU32(xs + r * p.xStride + kk),
                      ok ? xb + r * p.xRow + kk : p.x, ok);
    }
    sm90::cpCommit();
  }

  // This warp's chunks of the slice: a contiguous range.
  const int nChunks = (kLen + 31) / 32;
  const int per = (nChunks + p.warpsK - 1) / p.warpsK;
  const int c0 = min(nChunks, wk * per), c1 = min(nChunks, c0 + per);

  // W at chunk 0 of the slice. K-major: rows n0 + 8j + g, k 8t..8t+7.
  // N-major: rows k = 8t..8t+7, columns n0 + 4g .. + 3 (N is a multiple of
  // 4, planSkinnyGemm: the four are all in or all out). Offsets are formed
  // at each load from the constant-bank strides to keep registers free.
  const int nFirst = KMajor ? n0 + g : n0 + 4 * g;
  const uint16_t *wBase =
      p.w + b * p.wBatch +
      (KMajor ? int64_t(nFirst) * p.wRow + kBegin + 8 * t
              : int64_t(kBegin + 8 * t) * p.wRow + nFirst);

  uint32_t wv[U][16];
  auto loadGroup = [&](int c) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int cc = c + u;
      const bool ok = cc < c1 && cc * 32 + 8 * t < kLen;
      if constexpr (KMajor) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (ok && nFirst + 8 * j < p.n)
            ldStream16(&wv[u][4 * j],
                       wBase + int64_t(8 * j) * p.wRow + cc * 32);
          else
            wv[u][4 * j] = wv[u][4 * j + 1] = wv[u][4 * j + 2] =
                wv[u][4 * j + 3] = 0;
        }
      } else {
#pragma unroll
        for (int r = 0; r < 8; ++r) {
          if (ok && nFirst < p.n)
            ldStream8(&wv[u][2 * r], wBase + int64_t(cc * 32 + r) * p.wRow);
          else
            wv[u][2 * r] = wv[u][2 * r + 1] = 0;
        }
      }
    }
  };

  float acc[MT][4][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[i][j][e] = 0.0f;

  // The first group's loads overlap the x staging.
  loadGroup(c0);
  sm90::cpWaitAll();
  __syncthreads();

  // 2. MMAs, one group of U chunks at a time.
#pragma unroll 1
  for (int c = c0; c < c1; c += U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (c + u >= c1)
        break;
      // B fragments of tile j: [0], [1] for k16 step 0, [2], [3] for step 1.
      uint32_t bf[4][4];
      if constexpr (KMajor) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            bf[j][e] = wv[u][4 * j + e];
      } else {
        // Row r's column j is half (j & 1) of word 2r + j / 2; pair rows
        // (2e, 2e + 1) of column j.
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            bf[j][e] = __byte_perm(wv[u][2 * (2 * e) + j / 2],
                                   wv[u][2 * (2 * e + 1) + j / 2],
                                   (j & 1) ? 0x7632 : 0x5410);
      }
      const int kl = (c + u) * 32 + 8 * t;
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        const uint4 lo = *reinterpret_cast<const uint4 *>(
            xs + (16 * i + g) * p.xStride + kl);
        const uint4 hi = *reinterpret_cast<const uint4 *>(
            xs + (16 * i + g + 8) * p.xStride + kl);
        const uint32_t a0[4] = {lo.x, hi.x, lo.y, hi.y};
        const uint32_t a1[4] = {lo.z, hi.z, lo.w, hi.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          mma16816<Bf16>(acc[i][j], a0, bf[j][0], bf[j][1]);
          mma16816<Bf16>(acc[i][j], a1, bf[j][2], bf[j][3]);
        }
      }
    }
    if (c + U < c1)
      loadGroup(c + U);
  }

  // 3. Partial tiles [warpsK][16 * MT][pStride] over the x slice.
  __syncthreads();
  float *part = reinterpret_cast<float *>(smem);
  {
    float *mine = part + wk * (MT * 16) * p.pStride;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float *r0 = mine + (16 * i + g) * p.pStride + wn * 32;
        float *r1 = r0 + 8 * p.pStride;
        if constexpr (KMajor) {
          // D columns 2t, 2t + 1 of tile j are columns 8j + 2t (+1).
          *reinterpret_cast<float2 *>(r0 + 8 * j + 2 * t) =
              make_float2(acc[i][j][0], acc[i][j][1]);
          *reinterpret_cast<float2 *>(r1 + 8 * j + 2 * t) =
              make_float2(acc[i][j][2], acc[i][j][3]);
        } else {
          // D column c of tile j is column 4c + j.
          r0[8 * t + j] = acc[i][j][0];
          r0[8 * t + 4 + j] = acc[i][j][1];
          r1[8 * t + j] = acc[i][j][2];
          r1[8 * t + 4 + j] = acc[i][j][3];
        }
      }
  }
  __syncthreads();
  const int colVecs = ctaCols / 4;
  const int units = p.m * colVecs;
  if (p.warpsK > 1)
    for (int e = tid; e < units; e += int(blockDim.x)) {
      const int r = e / colVecs, col = (e - r * colVecs) * 4;
      float4 s = *reinterpret_cast<const float4 *>(part + r * p.pStride + col);
      for (int q = 1; q < p.warpsK; ++q) {
        const float4 v = *reinterpret_cast<const float4 *>(
            part + (q * MT * 16 + r) * p.pStride + col);
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
  for (int e = rank * share + tid; e < e1; e += int(blockDim.x)) {
    const int r = e / colVecs, col = (e - r * colVecs) * 4;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int q = 0; q < p.split; ++q) {
      const float *src =
          p.split > 1 ? cluster.map_shared_rank(part, unsigned(q)) : part;
      const float4 s =
          *reinterpret_cast<const float4 *>(src + r * p.pStride + col);
      v[0] += s.x, v[1] += s.y, v[2] += s.z, v[3] += s.w;
    }
    const int n = tile * ctaCols + col;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (n + j < p.n)
        ob[r * p.oRow + int64_t(n + j) * p.oCol] = toBits<Bf16>(v[j]);
  }
  if (p.split > 1)
    cluster.sync(); // no CTA leaves while another still reads its tile
}

using KernelFn = void (*)(SkinnyParams);

template <bool KMajor, bool Bf16> KernelFn pickMt(int mTiles) {
  switch (mTiles) {
  case 1:
    return skinnyGemmKernel<1, KMajor, Bf16>;
  case 2:
    return skinnyGemmKernel<2, KMajor, Bf16>;
  case 3:
    return skinnyGemmKernel<3, KMajor, Bf16>;
  default:
    return skinnyGemmKernel<4, KMajor, Bf16>;
  }
}

KernelFn pickKernel(int mTiles, bool kMajor, bool bf16) {
  if (kMajor)
    return bf16 ? pickMt<true, true>(mTiles) : pickMt<true, false>(mTiles);
  return bf16 ? pickMt<false, true>(mTiles) : pickMt<false, false>(mTiles);
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
  p.warpsN = plan.warpsN;
  p.warpsK = plan.warpsK;
  p.split = plan.split;
  p.kSlice = int(plan.kSlice);
  p.xStride = plan.xStride;
  p.pStride = plan.pStride;
  KernelFn kernel =
      pickKernel(plan.mTiles, prob.weightKMajor, x.dtype == DType::BF16);
  MLART_CUDA_CHECK(cudaFuncSetAttribute(
                       kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       int(plan.smemBytes)),
                   "cudaFuncSetAttribute(skinnyGemmKernel)");
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(plan.nTiles * plan.split), unsigned(prob.batch));
  cfg.blockDim = dim3(unsigned(plan.threads()));
  cfg.dynamicSmemBytes = size_t(plan.smemBytes);
  cfg.stream = stream;
  cudaLaunchAttribute attr[2]; // cluster shape, dependent launch
  cfg.attrs = attr;
  cfg.numAttrs = 0;
  if (plan.split > 1) {
    cudaLaunchAttribute &cl = attr[cfg.numAttrs++];
    cl.id = cudaLaunchAttributeClusterDimension;
    cl.val.clusterDim.x = unsigned(plan.split);
    cl.val.clusterDim.y = 1;
    cl.val.clusterDim.z = 1;
  }
  if (pdlEnabled()) { // the kernel begins with pdlPrologue()
    cudaLaunchAttribute &pd = attr[cfg.numAttrs++];
    pd.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    pd.val.programmaticStreamSerializationAllowed = 1;
  }
  MLART_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, p),
                   "cudaLaunchKernelEx(skinnyGemmKernel)");
  MLART_CUDA_CHECK_LAUNCH("skinnyGemmKernel");
  gLaunches.fetch_add(1, std::memory_order_relaxed);
  return Status::success();
}

} // namespace

// Off unless MLART_SKINNY_GEMM=1: on the H200 (2026-12-03, mla-bench
// --gemm-only) the five step projections took 56.9 us here against 24.1 us
// through cuBLAS (docs/cuda.md), so cuBLAS stays the default.
bool skinnyGemmEnabled() {
  const char *v = std::getenv("MLART_SKINNY_GEMM");
  return v && v[0] == '1' && v[1] == '\0';
}

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
  return prob ? planSkinnyGemm(*prob, smCount) : std::nullopt;
}

std::optional<SkinnyGemmPlan> skinnyPerHeadPlan(const TensorRef &x,
                                                const TensorRef &w,
                                                const TensorRef &out,
                                                int smCount) {
  if (!skinnyGemmEnabled())
    return std::nullopt;
  std::optional<SkinnyGemmProblem> prob = perHeadProblem(x, w, out);
  return prob ? planSkinnyGemm(*prob, smCount) : std::nullopt;
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
