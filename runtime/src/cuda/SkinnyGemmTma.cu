//===- SkinnyGemmTma.cu - TMA + wgmma skinny GEMM for bf16 linear --------===//
//
// out[M, N] = x[M, K] @ W[N, K]^T (+ addend) for M <= 64 with Hopper's
// copy engine and warpgroup MMA: one warpgroup (128 threads) a CTA, a tile
// of 64 rows by J x 64 columns and one K slice of `chunks` x 64; the
// `split` CTAs of a cluster cover K (planSkinnyTma).
//
//  0. Thread 0 initialises one mbarrier for W and one per x chunk. When
//     the caller allows it (staticWeight), it then issues every W box of the
//     slice (64 k x 64 n, 8 KB, 128-byte swizzle: the wgmma operand layout
//     as it lands) *before* the dependent-launch wait, so W streams while
//     the previous kernel finishes.
//  1. After the wait it issues x's boxes (64 k x 64 rows; rows >= M, and
//     anything past N or K, are zero-filled by TMA).
//  2. The warpgroup waits for W, then per chunk for x's box and issues four
//     k16 steps of m64n64k16 wgmma per 64 columns (A = x, B = W, both
//     K-major in shared memory), one commit group per chunk.
//  3. The f32 tile goes to shared memory over the operands and the cluster
//     sums it (skinnyClusterStore, SkinnyGemmDevice.h).
//
// The instruction count is what makes this kernel: the cp.async + mma.sync
// kernel spends ~2900 issued instructions a warp on q_proj's slice (ncu,
// H200); here one thread issues 3 x chunks copies and each warp
// 8 x chunks wgmma fragments.
//
//===----------------------------------------------------------------------===//
#include "cuda/SkinnyGemm.h"
#include "cuda/SkinnyGemmDevice.h"
#include "cuda/Launch.h"
#include "cuda/Sm90Ptx.h"
#include "cuda/TensorMap.h"

#include <map>
#include <mutex>
#include <tuple>

namespace mlart::cuda {

namespace {

struct SkinnyTmaParams {
  SkinnyOut o;
  int split, chunks, tileCols, pStride, earlyWeights;
  uint32_t xOffset;   ///< x's boxes after W's, bytes
  uint32_t barOffset; ///< the mbarriers, bytes
};

/// J: 64-column blocks of the tile (1 or 2).
template <int J>
__global__ void __launch_bounds__(kSkinnyTmaThreads, 1)
    skinnyTmaKernel(const __grid_constant__ SkinnyTmaParams p,
                    const __grid_constant__ CUtensorMap wMap,
                    const __grid_constant__ CUtensorMap xMap) {
  using namespace sm90;
  extern __shared__ __align__(1024) uint8_t smemRaw[];
  const uint32_t rawAddr = smemU32(smemRaw);
  const uint32_t pad = (1024u - (rawAddr & 1023u)) & 1023u;
  uint8_t *sm = smemRaw + pad;
  const uint32_t base = rawAddr + pad;
  const uint32_t wSmem = base, xSmem = base + p.xOffset;
  const uint32_t wBar = base + p.barOffset, xBar = wBar + 8;
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int rank = int(blockIdx.x) % p.split;
  const int tile = int(blockIdx.x) / p.split;
  const int n0 = tile * 64 * J;
  const int kBegin = rank * p.chunks * int(kSkinnyTmaChunk);

  if (tid == 0) {
    mbarInit(wBar, 1);
    for (int c = 0; c < p.chunks; ++c)
      mbarInit(xBar + 8 * c, 1);
    fenceMbarInit();
    prefetchTensorMap(&wMap);
    prefetchTensorMap(&xMap);
  }
  __syncthreads();
  auto loadWeights = [&] {
    if (tid != 0)
      return;
    mbarArriveExpectTx(wBar,
                       uint32_t(p.chunks * J * kSkinnyTmaBoxBytes));
    for (int c = 0; c < p.chunks; ++c)
#pragma unroll
      for (int j = 0; j < J; ++j)
        tmaLoad2d(wSmem + uint32_t((c * J + j) * kSkinnyTmaBoxBytes), &wMap,
                  kBegin + c * int(kSkinnyTmaChunk), n0 + 64 * j, wBar);
  };
  if (p.earlyWeights)
    loadWeights();
  pdlPrologue(); // x and the addend come from earlier kernels
  if (!p.earlyWeights)
    loadWeights();
  if (tid == 0)
    for (int c = 0; c < p.chunks; ++c) {
      mbarArriveExpectTx(xBar + 8 * c, uint32_t(kSkinnyTmaBoxBytes));
      tmaLoad2d(xSmem + uint32_t(c * kSkinnyTmaBoxBytes), &xMap,
                kBegin + c * int(kSkinnyTmaChunk), 0, xBar + 8 * c);
    }

  float acc[J][32];
#pragma unroll
  for (int j = 0; j < J; ++j) {
#pragma unroll
    for (int i = 0; i < 32; ++i)
      acc[j][i] = 0.0f;
    fenceRegs(acc[j]);
  }
  mbarWait(wBar, 0);
  for (int c = 0; c < p.chunks; ++c) {
    mbarWait(xBar + 8 * c, 0);
    wgArrive();
    const uint64_t dA = makeDesc(xSmem + uint32_t(c * kSkinnyTmaBoxBytes), 16,
                                 1024);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int j = 0; j < J; ++j)
        wgmmaS64(acc[j], dA + uint64_t(2 * kk),
                 makeDesc(wSmem + uint32_t((c * J + j) * kSkinnyTmaBoxBytes),
                          16, 1024) +
                     uint64_t(2 * kk));
    wgCommit();
  }
  wgWaitAll();
#pragma unroll
  for (int j = 0; j < J; ++j)
    fenceRegs(acc[j]);
  __syncthreads(); // every wgmma has read its operands: reuse the space

  // 3. acc[j][4 i + 2 r + e] is row 16 warp + lane / 4 + 8 r, column
  // 64 j + 8 i + 2 (lane % 4) + e.
  float *part = reinterpret_cast<float *>(sm);
  const int g = lane >> 2, q4 = lane & 3;
#pragma unroll
  for (int j = 0; j < J; ++j)
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r)
        *reinterpret_cast<float2 *>(part + (16 * warp + g + 8 * r) * p.pStride +
                                    64 * j + 8 * i + 2 * q4) =
            make_float2(acc[j][4 * i + 2 * r], acc[j][4 * i + 2 * r + 1]);
  skinnyClusterStore<true>(p.o, part, p.pStride, p.tileCols, n0, 0, rank,
                           p.split);
}

using TmaKernelFn = void (*)(SkinnyTmaParams, CUtensorMap, CUtensorMap);

TmaKernelFn pickTmaKernel(int64_t tileCols) {
  return tileCols == 128 ? skinnyTmaKernel<2> : skinnyTmaKernel<1>;
}

/// CTAs of the kernel the current device holds at once in clusters of
/// `split` with `smemBytes` each (the driver's answer, cached per device,
/// split and KB); 0 on any error.
int64_t residentTmaCtas(int split, int64_t smemBytes) {
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
  TmaKernelFn kernel = pickTmaKernel(128);
  int64_t ctas = 0;
  if (allowDynamicSmem(kernel, size_t(kb * 1024), "skinnyTmaKernel").ok()) {
    const LaunchShape shape{dim3(unsigned(split)), dim3(kSkinnyTmaThreads),
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

} // namespace

std::optional<SkinnyTmaPlan> skinnyLinearTmaPlan(const LinearArgs &a,
                                                 int sms) {
  if (!skinnyGemmEnabled() || a.x.dtype != DType::BF16)
    return std::nullopt;
  std::optional<SkinnyGemmProblem> prob = linearProblem(a);
  return prob ? planSkinnyTma(*prob, sms, residentTmaCtas,
                              skinnyVariant(skinnyGemmVariant()))
              : std::nullopt;
}

StatusOr<bool> skinnyLinearTma(CudaContext &ctx, const LinearArgs &a,
                               cudaStream_t stream) {
  std::optional<SkinnyTmaPlan> plan = skinnyLinearTmaPlan(a, ctx.smCount);
  if (!plan)
    return false;
  const int64_t M = a.x.sizes[0], K = a.x.sizes[1], N = a.weight.sizes[0];
  CUtensorMap wMap, xMap;
  Status s = encodeBf16TensorMap2d(&wMap, a.weight.data, uint64_t(K),
                                   uint64_t(N),
                                   uint64_t(a.weight.strides[0]) * 2, 64, 64);
  // One row: its pitch is never used, but must be a valid one.
  const int64_t xPitch = M > 1 ? a.x.strides[0] * 2 : (K * 2 + 15) / 16 * 16;
  if (s.ok())
    s = encodeBf16TensorMap2d(&xMap, a.x.data, uint64_t(K), uint64_t(M),
                              uint64_t(xPitch), 64, 64);
  if (!s.ok())
    return false; // the driver refuses this view: the other kernels run it

  SkinnyTmaParams p;
  SkinnyEpilogue epi;
  epi.oRow = a.out.strides[0];
  epi.oCol = a.out.strides[1];
  epi.addend = a.addend.present() ? &a.addend : nullptr;
  p.o = skinnyOut(a.out, epi, M, N);
  p.split = plan->split;
  p.chunks = plan->chunks;
  p.tileCols = int(plan->tileCols);
  p.pStride = plan->pStride;
  p.earlyWeights = plan->earlyWeights && a.staticWeight ? 1 : 0;
  p.xOffset = uint32_t(plan->wBytes);
  p.barOffset = uint32_t(plan->barOffset);
  TmaKernelFn kernel = pickTmaKernel(plan->tileCols);
  MLART_RETURN_IF_ERROR(
      allowDynamicSmem(kernel, size_t(plan->smemBytes), "skinnyTmaKernel"));
  const LaunchShape shape{dim3(unsigned(plan->ctas)),
                          dim3(unsigned(plan->threads())),
                          size_t(plan->smemBytes), unsigned(plan->split)};
  MLART_RETURN_IF_ERROR(
      launchKernel("skinnyTmaKernel", kernel, shape, stream, p, wMap, xMap));
  countSkinnyLaunch();
  return true;
}

} // namespace mlart::cuda
