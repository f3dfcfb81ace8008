//===- SkinnyGemm.cu - Weight-resident split-K GEMM for M <= 64 ----------===//
//
// out[M, N] = x[M, K] @ W (+ addend) with M <= 64 rows (a decode batch).
// One CTA (eight warps) owns a tile of 32 * warpsN columns and one K slice;
// the `split` CTAs of a cluster cover K (SkinnyGemmPlan.h chooses).
//
//  0. When the caller says the previous kernel does not write W
//     (staticWeight: model weights inside a step), the CTA copies its whole
//     W slice into shared memory (16-byte cp.async, one group) *before* the
//     dependent-launch wait, so the copy overlaps the previous kernel's
//     tail. Otherwise, and in variant 1 (A/B), it follows the wait.
//  1. After the wait, x's [16 * MT, kSlice] slice follows in `xGroups`
//     cp.async groups along K, so the MMAs on the first group start while
//     the others land. Rows >= M, columns >= N and k >= K are zero-filled by
//     the copy (src-size 0), so the MMAs need no masks. Shared-memory rows
//     are padded by 16 bytes: ldmatrix's eight row reads hit eight bank
//     groups.
//  2. Warp (wn, wk) computes columns [32 wn, 32 wn + 32) of the tile over
//     the k16 steps s with s % warpsK == wk: ldmatrix A (x) and B (W;
//     .trans for the per-head [K, N] layout), mma.sync m16n8k16, f32.
//  3. The warpsK partial tiles are summed in shared memory in a fixed
//     order; a cluster barrier publishes the CTA's tile, and each CTA sums
//     one share of the tile over the cluster (distributed shared memory,
//     rank order), adds the addend and stores. No workspace, no atomics:
//     deterministic and graph-capturable.
//
//===----------------------------------------------------------------------===//
#include "cuda/SkinnyGemm.h"
#include "cuda/SkinnyGemmDevice.h"
#include "cuda/Knobs.h"
#include "cuda/Launch.h"
#include "cuda/Sm90Ptx.h"

#include <atomic>
#include <map>
#include <mutex>
#include <tuple>

namespace mlart::cuda {

namespace {

std::atomic<uint64_t> gLaunches{0};

struct SkinnyParams {
  const uint16_t *x, *w;
  SkinnyOut o;
  int64_t xRow, xBatch, wRow, wBatch;
  int m, n, k;
  int split, kSlice, warpsN, xGroups, wStride, xStride, pStride;
  int earlyWeights;
  uint32_t wBytes; ///< x's slice starts here in shared memory
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

/// Waits until at most `n` (0..4) of this thread's cp.async groups are
/// pending; the count must be an immediate.
__device__ __forceinline__ void cpWaitGroupUpTo(int n) {
  switch (n) {
  case 0:
    sm90::cpWaitGroup<0>();
    break;
  case 1:
    sm90::cpWaitGroup<1>();
    break;
  case 2:
    sm90::cpWaitGroup<2>();
    break;
  case 3:
    sm90::cpWaitGroup<3>();
    break;
  default:
    sm90::cpWaitGroup<4>();
    break;
  }
}

/// MT: 16-row tiles of M. KMajor: W is [N, K] (linear) rather than [K, N].
template <int MT, bool KMajor, bool Bf16>
__global__ void __launch_bounds__(kSkinnyThreads, kSkinnyCtasPerSmByRegisters)
    skinnyGemmKernel(const __grid_constant__ SkinnyParams p) {
  constexpr int ROWS = 16 * MT;
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int warpsK = kSkinnyWarps / p.warpsN;
  const int wn = warp % p.warpsN, wk = warp / p.warpsN;
  const int rank = int(blockIdx.x) % p.split;
  const int tile = int(blockIdx.x) / p.split;
  const int tileCols = int(kSkinnyWarpCols) * p.warpsN;
  const int64_t b = blockIdx.y;
  const int kBegin = rank * p.kSlice;
  const int kEnd = min(p.k, kBegin + p.kSlice);
  const int n0 = tile * tileCols;
  const uint16_t *xb = p.x + b * p.xBatch;
  const uint16_t *wb = p.w + b * p.wBatch;
  const uint32_t wSmem = sm90::smemU32(smem);
  const uint32_t xSmem = wSmem + p.wBytes;

  // Copies a block of `rows` shared-memory rows, `dstRow` bytes apart, of
  // `units` 16-byte units each: row r's units [0, valid) from src0 + r *
  // srcRow + 8 u elements, the last of them only `lastBytes` (1..16) read,
  // and the rest zero-filled. Rows from `rowsCopied` on are left as they
  // are (their products only reach outputs nobody stores). A row is shared
  // by `tpr` (a power of two) threads, so the loops only add.
  auto copyRows = [&](int rows, int rowsCopied, int units, int valid,
                      int lastBytes, uint32_t dst0, uint32_t dstRow,
                      const uint16_t *src0, int64_t srcRow) {
    int shift = 0; // log2(tpr): up to kSkinnyThreads / rows, at most units
    while ((2 << shift) * rows <= kSkinnyThreads && (2 << shift) <= units)
      ++shift;
    const int tpr = 1 << shift, lu = tid & (tpr - 1);
    for (int r = tid >> shift; r < min(rows, rowsCopied);
         r += kSkinnyThreads >> shift) {
      uint32_t d = dst0 + uint32_t(r) * dstRow + uint32_t(lu) * 16;
      const uint16_t *sp = src0 + int64_t(r) * srcRow + 8 * lu;
      int u = lu;
      for (; u < valid - 1; u += tpr, d += 16 * tpr, sp += 8 * tpr)
        sm90::cpAsync16(d, sp, true);
      if (u == valid - 1) {
        sm90::cpAsync16Bytes(d, sp, lastBytes);
        u += tpr, d += 16 * tpr;
      }
      for (; u < units; u += tpr, d += 16 * tpr)
        sm90::cpAsync16(d, p.w, false);
    }
  };
  const int kLen = max(0, kEnd - kBegin); // this rank's K, a multiple of 8

  // 0. The W slice: KMajor rows are columns n (kSlice / 8 units, kLen / 8
  // of them read; columns >= N not copied), per-head rows are k (tileCols /
  // 8 units; rows k >= kLen zero, they meet x's zeros).
  auto loadWeights = [&] {
    if constexpr (KMajor) {
      copyRows(tileCols, p.n - n0, p.kSlice / 8, kLen / 8, 16, wSmem,
               uint32_t(p.wStride * 2), wb + int64_t(n0) * p.wRow + kBegin,
               p.wRow);
    } else {
      const int cols = min(tileCols, p.n - n0);
      const uint16_t *w0 = wb + int64_t(kBegin) * p.wRow + n0;
      copyRows(kLen, kLen, tileCols / 8, (cols + 7) / 8,
               2 * (cols - 8 * ((cols - 1) / 8)), wSmem,
               uint32_t(p.wStride * 2), w0, p.wRow);
      copyRows(p.kSlice - kLen, p.kSlice - kLen, tileCols / 8, 0, 16,
               wSmem + uint32_t(kLen * p.wStride * 2),
               uint32_t(p.wStride * 2), w0, p.wRow);
    }
    sm90::cpCommit();
  };
  if (p.earlyWeights)
    loadWeights();
  pdlPrologue(); // x and the addend come from earlier kernels
  if (!p.earlyWeights)
    loadWeights();

  // 1. x's slice in xGroups groups of whole k16 steps: group g is the
  // [ROWS x 2 (s1 - s0)] block of units starting at unit 2 s0; rows >= M
  // are not copied.
  const int steps = p.kSlice / 16;
  auto groupBegin = [&](int g) { return g * steps / p.xGroups; };
  for (int g = 0; g < p.xGroups; ++g) {
    const int s0 = groupBegin(g), s1 = groupBegin(g + 1);
    const int units = 2 * (s1 - s0);
    const int valid = min(units, max(0, kLen / 8 - 2 * s0));
    copyRows(ROWS, p.m, units, valid, 16, xSmem + uint32_t(s0 * 32),
             uint32_t(p.xStride * 2), xb + kBegin + 16 * s0, p.xRow);
    sm90::cpCommit();
  }

  float acc[MT][4][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[i][j][e] = 0.0f;

  // 2. This lane's ldmatrix addresses at k step 0; step s adds
  // 32 s bytes (x, KMajor W) or 16 s rows (per-head W).
  const int nw = int(kSkinnyWarpCols) * wn; // the warp's first column
  uint32_t aAddr[MT], bAddr[2];
#pragma unroll
  for (int i = 0; i < MT; ++i)
    aAddr[i] = xSmem + uint32_t(((16 * i + (lane & 15)) * p.xStride +
                                 8 * (lane >> 4)) *
                                2);
#pragma unroll
  for (int jp = 0; jp < 2; ++jp)
    bAddr[jp] =
        KMajor ? wSmem + uint32_t(((nw + 16 * jp + (lane & 7) +
                                    8 * (lane >> 4)) *
                                       p.wStride +
                                   8 * ((lane >> 3) & 1)) *
                                  2)
               : wSmem + uint32_t(((lane & 7) + 8 * ((lane >> 3) & 1)) *
                                      p.wStride * 2 +
                                  (nw + 16 * jp + 8 * (lane >> 4)) * 2);
  const uint32_t bStep = KMajor ? 32u : uint32_t(16 * p.wStride * 2);
  auto compute = [&](int s) {
    uint32_t a[MT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
      sm90::ldsm4(a[i], aAddr[i] + uint32_t(32 * s));
#pragma unroll
    for (int jp = 0; jp < 2; ++jp) {
      // bq[0], bq[1]: n8 tile 2 jp (k 0-7, 8-15); bq[2], bq[3]: 2 jp + 1.
      uint32_t bq[4];
      if constexpr (KMajor)
        sm90::ldsm4(bq, bAddr[jp] + uint32_t(s) * bStep);
      else
        sm90::ldsm4T(bq, bAddr[jp] + uint32_t(s) * bStep);
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        mma16816<Bf16>(acc[i][2 * jp], a[i], bq[0], bq[1]);
        mma16816<Bf16>(acc[i][2 * jp + 1], a[i], bq[2], bq[3]);
      }
    }
  };
  int s = wk; // this warp's steps: wk, wk + warpsK, ...
  for (int g = 0; g < p.xGroups; ++g) {
    cpWaitGroupUpTo(p.xGroups - 1 - g); // W and x groups <= g: this thread's
    __syncthreads();                    // ... and everyone's
    for (const int s1 = groupBegin(g + 1); s < s1; s += warpsK)
      compute(s);
  }
  __syncthreads(); // W and x are dead: the partial tiles go over them

  // 3. Partial tiles [warpsK][ROWS][pStride]; warp (wn, wk) fills its 32
  // columns of slab wk.
  float *part = reinterpret_cast<float *>(smem);
  {
    const int g = lane >> 2, t = lane & 3;
    float *mine = part + wk * ROWS * p.pStride + nw;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float *r0 = mine + (16 * i + g) * p.pStride + 8 * j + 2 * t;
        *reinterpret_cast<float2 *>(r0) =
            make_float2(acc[i][j][0], acc[i][j][1]);
        *reinterpret_cast<float2 *>(r0 + 8 * p.pStride) =
            make_float2(acc[i][j][2], acc[i][j][3]);
      }
  }
  __syncthreads();
  // The warps' slabs summed into slab 0 (float4 units of the first M rows).
  const int colShift = __ffs(tileCols / 4) - 1, colMask = tileCols / 4 - 1;
  const int units = p.m << colShift;
  if (warpsK > 1)
    for (int e = tid; e < units; e += kSkinnyThreads) {
      const int r = e >> colShift, col = (e & colMask) * 4;
      float4 s = *reinterpret_cast<const float4 *>(part + r * p.pStride + col);
      for (int q = 1; q < warpsK; ++q) {
        const float4 v = *reinterpret_cast<const float4 *>(
            part + (q * ROWS + r) * p.pStride + col);
        s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
      }
      *reinterpret_cast<float4 *>(part + r * p.pStride + col) = s;
    }
  skinnyClusterStore<Bf16>(p.o, part, p.pStride, tileCols, n0, b, rank,
                           p.split);
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

/// CTAs of the kernel the current device holds at once in clusters of
/// `split` with `smemBytes` of shared memory each: the driver's answer for
/// the largest instantiation, cached per (device, split, smem in KB). 0 on
/// any error (the plan then keeps to what is known to fit).
int64_t residentCtas(int split, int64_t smemBytes) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess)
    return 0;
  const int64_t kb = (smemBytes + 1023) / 1024;
  static std::mutex mu;
  static std::map<std::tuple<int, int, int64_t>, int64_t> known;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = known.find({device, split, kb});
    if (it != known.end())
      return it->second;
  }
  KernelFn kernel = pickKernel(4, true, true);
  int64_t ctas = 0;
  if (allowDynamicSmem(kernel, size_t(kb * 1024), "skinnyGemmKernel").ok()) {
    const LaunchShape shape{dim3(unsigned(split)), dim3(kSkinnyThreads),
                            size_t(kb * 1024), unsigned(split)};
    const LaunchConfig cfg(shape, nullptr, /*pdl=*/false);
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, kernel, cfg.get()) ==
        cudaSuccess)
      ctas = int64_t(clusters) * split;
    else
      (void)cudaGetLastError(); // not sticky; the plan avoids this split
  }
  std::lock_guard<std::mutex> lock(mu);
  known[{device, split, kb}] = ctas;
  return ctas;
}

std::optional<SkinnyGemmPlan> planOnDevice(const SkinnyGemmProblem &prob,
                                          int sms) {
  return planSkinnyGemm(prob, sms, residentCtas,
                        skinnyVariant(skinnyGemmVariant()));
}



Status launch(const SkinnyGemmPlan &plan, const SkinnyGemmProblem &prob,
              const TensorRef &x, const TensorRef &w, const TensorRef &out,
              const SkinnyEpilogue &epi, cudaStream_t stream) {
  SkinnyParams p;
  p.x = static_cast<const uint16_t *>(x.data);
  p.w = static_cast<const uint16_t *>(w.data);
  p.o = skinnyOut(out, epi, prob.m, prob.n);
  p.xRow = prob.xRow;
  p.xBatch = prob.xBatch;
  p.wRow = prob.wRow;
  p.wBatch = prob.wBatch;
  p.m = int(prob.m);
  p.n = int(prob.n);
  p.k = int(prob.k);
  p.split = plan.split;
  p.kSlice = int(plan.kSlice);
  p.warpsN = plan.warpsN;
  p.xGroups = plan.xGroups;
  p.wStride = plan.wStride;
  p.xStride = plan.xStride;
  p.pStride = plan.pStride;
  p.earlyWeights = plan.earlyWeights && epi.staticWeight ? 1 : 0;
  p.wBytes = uint32_t(plan.wBytes);

  KernelFn kernel = pickKernel(plan.mTiles, prob.weightKMajor,
                               x.dtype == DType::BF16);
  MLART_RETURN_IF_ERROR(
      allowDynamicSmem(kernel, size_t(plan.smemBytes), "skinnyGemmKernel"));
  // The kernel waits in pdlPrologue() after its weight copy; a cluster of
  // `split` CTAs shares a column tile.
  const LaunchShape shape{
      dim3(unsigned(plan.nTiles * plan.split), unsigned(prob.batch)),
      dim3(unsigned(plan.threads())), size_t(plan.smemBytes),
      unsigned(plan.split)};
  MLART_RETURN_IF_ERROR(
      launchKernel("skinnyGemmKernel", kernel, shape, stream, p));
  countSkinnyLaunch();
  return Status::success();
}

} // namespace

// Off unless MLART_SKINNY_GEMM=1 until the H200 measures this design
// against cuBLAS in the step (docs/cuda.md: the two earlier designs lost).
bool skinnyGemmEnabled() { return knobValue(Knob::SkinnyGemm) == 1; }

int skinnyGemmVariant() { return knobValue(Knob::SkinnyVariant); }

std::optional<SkinnyGemmProblem> linearProblem(const LinearArgs &a) {
  if (!sameSkinnyType(a.x, a.weight, a.out) ||
      (a.addend.present() && a.addend.dtype != a.out.dtype))
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
                                               int sms) {
  if (!skinnyGemmEnabled())
    return std::nullopt;
  std::optional<SkinnyGemmProblem> prob = linearProblem(a);
  return prob ? planOnDevice(*prob, sms) : std::nullopt;
}

std::optional<SkinnyGemmPlan> skinnyPerHeadPlan(const TensorRef &x,
                                                const TensorRef &w,
                                                const TensorRef &out,
                                                int sms) {
  if (!skinnyGemmEnabled())
    return std::nullopt;
  std::optional<SkinnyGemmProblem> prob = perHeadProblem(x, w, out);
  return prob ? planOnDevice(*prob, sms) : std::nullopt;
}

StatusOr<bool> skinnyLinear(CudaContext &ctx, const LinearArgs &a,
                            cudaStream_t stream) {
  StatusOr<bool> tma = skinnyLinearTma(ctx, a, stream);
  if (!tma.ok() || *tma)
    return tma;
  std::optional<SkinnyGemmPlan> plan = skinnyLinearPlan(a, ctx.smCount);
  if (!plan)
    return false;
  SkinnyEpilogue epi;
  epi.oRow = a.out.strides[0];
  epi.oCol = a.out.strides[1];
  epi.addend = a.addend.present() ? &a.addend : nullptr;
  epi.staticWeight = a.staticWeight;
  MLART_RETURN_IF_ERROR(
      launch(*plan, *linearProblem(a), a.x, a.weight, a.out, epi, stream));
  return true;
}

StatusOr<bool> skinnyPerHead(CudaContext &ctx, const TensorRef &x,
                             const TensorRef &w, const TensorRef &out,
                             bool staticWeight, cudaStream_t stream) {
  std::optional<SkinnyGemmPlan> plan = skinnyPerHeadPlan(x, w, out, ctx.smCount);
  if (!plan)
    return false;
  SkinnyEpilogue epi;
  epi.oRow = out.strides[0];
  epi.oBatch = out.strides[1];
  epi.oCol = out.strides[2];
  epi.staticWeight = staticWeight;
  MLART_RETURN_IF_ERROR(
      launch(*plan, *perHeadProblem(x, w, out), x, w, out, epi, stream));
  return true;
}

SkinnyOut skinnyOut(const TensorRef &out, const SkinnyEpilogue &epi,
                    int64_t m, int64_t n) {
  SkinnyOut o;
  o.out = static_cast<uint16_t *>(out.data);
  o.addend = epi.addend ? static_cast<const uint16_t *>(epi.addend->data)
                        : nullptr;
  o.aRow = epi.addend ? epi.addend->strides[0] : 0;
  o.aCol = epi.addend ? epi.addend->strides[1] : 0;
  o.oRow = epi.oRow;
  o.oBatch = epi.oBatch;
  o.oCol = epi.oCol;
  o.m = int(m);
  o.n = int(n);
  auto vec4 = [](const void *ptr, int64_t row, int64_t batch, int64_t col) {
    return reinterpret_cast<uintptr_t>(ptr) % 8 == 0 && row % 4 == 0 &&
           batch % 4 == 0 && col == 1;
  };
  o.vecOut = vec4(out.data, o.oRow, o.oBatch, o.oCol) &&
             (!epi.addend || vec4(epi.addend->data, o.aRow, 0, o.aCol));
  return o;
}

void countSkinnyLaunch() { gLaunches.fetch_add(1, std::memory_order_relaxed); }

uint64_t skinnyGemmLaunchCount() {
  return gLaunches.load(std::memory_order_relaxed);
}

} // namespace mlart::cuda
