//===- PrefillContext.cu - Expand a prefill's cached context (gather + GEMM) -===//
//
// See PrefillContext.h. The gather is one CTA per expanded row: it decodes
// the paged row (any cache layout, dequantised) into the dense latent
// buffer and writes k_pe into every head's rope columns of k. The GEMMs
// then fill the nope columns of k and all of v from the latent buffer.
//
//===----------------------------------------------------------------------===//
#include "cuda/PrefillContext.h"

#include "cuda/Blas.h"
#include "cuda/DecodeCommon.h"
#include "cuda/Launch.h"
#include "cuda/PrefillFlash.h"

#include <atomic>
#include <climits>

namespace mlart::cuda {
namespace {

constexpr int kNope = 128, kRope = 64, kQk = kNope + kRope, kV = 128;
constexpr int kGatherThreads = 128;
constexpr size_t kAlign = 256;

std::atomic<uint64_t> &expansions() {
  static std::atomic<uint64_t> n{0};
  return n;
}

std::atomic<uint64_t> &expandedRows() {
  static std::atomic<uint64_t> n{0};
  return n;
}

size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

struct GatherParams {
  CacheView c;
  const int32_t *lens;
  int64_t lensStride;
  bool includeNew;
  const int32_t *qsl;
  int pad, heads, latent, dtype;
  void *latentOut; ///< [rows, latent]
  void *kOut;      ///< [rows, heads, 192]; this kernel writes columns 128..
  DeviceErrorRecord *rec;
};

__global__ void __launch_bounds__(kGatherThreads)
    gatherContextKernel(GatherParams p) {
  pdlPrologue();
  const float kvScale = cacheTensorScale(p.c);
  const int64_t row = blockIdx.x;
  const int r = int(row / p.pad), j = int(row % p.pad);
  const int tid = int(threadIdx.x);
  int len = prefillContextLength(p.lens, p.lensStride, p.includeNew, p.qsl, r,
                                 p.pad);
  if (len < 0) {
    if (tid == 0 && j == 0)
      atomicMin(&p.rec->badSeqIndex, r);
    len = 0;
  }
  const uint8_t *src = j < len ? pagedRow(p.c, r, j) : nullptr;
  if (j < len && !src && tid == 0)
    atomicMin(&p.rec->badSeqIndex, r);
  for (int c = tid; c < p.latent; c += kGatherThreads)
    storeF(p.latentOut, p.dtype, row * p.latent + c,
           src ? decodeVal(p.c, src, c, kvScale) : 0.0f);
  for (int x = tid; x < p.heads * kRope; x += kGatherThreads) {
    const int h = x / kRope, d = x - h * kRope;
    storeF(p.kOut, p.dtype, (row * p.heads + h) * kQk + kNope + d,
           src ? decodeVal(p.c, src, p.latent + d, kvScale) : 0.0f);
  }
}

cudaDataType cublasType(DType t) {
  return t == DType::F16 ? CUDA_R_16F : CUDA_R_16BF;
}

bool unitLastStride(const TensorRef &x) {
  return x.rank == 3 && x.strides[2] == 1;
}

} // namespace

bool planContextExpansion(const CudaContext &ctx,
                          const PrefillAttentionArgs &a, int64_t R,
                          ContextExpansionPlan &plan) {
  const DType dt = a.q.dtype;
  if (ctx.blas == nullptr || (dt != DType::BF16 && dt != DType::F16))
    return false;
  if (a.wUK.dtype != dt || a.wUV.dtype != dt || !unitLastStride(a.wUK) ||
      !unitLastStride(a.wUV))
    return false;
  const KVCacheDesc &desc = a.cache.desc;
  if (desc.ropeDim != kRope || a.wUK.sizes[1] != kNope ||
      a.wUV.sizes[2] != kV || a.q.sizes[2] != kQk)
    return false;
  const int64_t pad = contextRowLimit(a);
  const int64_t H = a.q.sizes[1], L = desc.latentRank;
  // cuBLAS leading dimensions: a W_UK[h] row holds L values, W_UV[h] 128.
  if (a.wUK.strides[1] < L || a.wUV.strides[1] < kV)
    return false;
  if (R <= 0 || pad <= 0 || R > INT_MAX / pad)
    return false;
  const double rows = double(R) * double(pad);
  const double need = rows * double(L + H * (kQk + kV)) * 2.0 + 3.0 * kAlign;
  if (need > double(kMaxContextExpansionBytes))
    return false;
  plan.requests = R;
  plan.pad = pad;
  plan.heads = H;
  plan.latent = L;
  const size_t n = size_t(plan.rows());
  plan.latentOffset = 0;
  plan.kOffset = alignUp(n * size_t(L) * 2);
  plan.vOffset = plan.kOffset + alignUp(n * size_t(H) * kQk * 2);
  plan.bytes = plan.vOffset + alignUp(n * size_t(H) * kV * 2);
  return true;
}

Status expandPrefillContext(CudaContext &ctx, const PrefillAttentionArgs &a,
                            const ContextExpansionPlan &plan, void *workspace,
                            cudaStream_t stream) {
  const DType dt = a.q.dtype;
  uint8_t *base = static_cast<uint8_t *>(workspace);
  void *latent = base + plan.latentOffset;
  void *k = base + plan.kOffset;
  void *v = base + plan.vOffset;
  const int64_t rows = plan.rows(), H = plan.heads, L = plan.latent;

  GatherParams g;
  g.c = makeView(a.cache, a.blockTable);
  g.lens = static_cast<const int32_t *>(a.contextLens.data);
  g.lensStride = a.contextLens.strides[0];
  g.includeNew = a.lensIncludeNewTokens;
  g.qsl = static_cast<const int32_t *>(a.queryStartLoc.data);
  g.pad = int(plan.pad);
  g.heads = int(H);
  g.latent = int(L);
  g.dtype = int(dt);
  g.latentOut = latent;
  g.kOut = k;
  g.rec = ctx.deviceRecord;
  MLART_RETURN_IF_ERROR(launchKernel("gatherContextKernel",
                                     gatherContextKernel,
                                     dim3(unsigned(rows)), kGatherThreads, 0,
                                     stream, g));

  // Column-major views (cuBLAS): per head h,
  //   k[:, h, 0:128]^T [128 x rows] = W_UK[h] ([L x 128], op T) x latent^T
  //   v[:, h, :]^T     [128 x rows] = W_UV[h]^T ([128 x L])   x latent^T
  const cudaDataType t = cublasType(dt);
  MLART_RETURN_IF_ERROR(ctx.blas->gemm(
      stream, CUBLAS_OP_T, CUBLAS_OP_N, kNope, int(rows), int(L), a.wUK.data,
      t, a.wUK.strides[1], a.wUK.strides[0], latent, t, L, 0, k, t, H * kQk,
      kQk, int(H)));
  MLART_RETURN_IF_ERROR(ctx.blas->gemm(
      stream, CUBLAS_OP_N, CUBLAS_OP_N, kV, int(rows), int(L), a.wUV.data, t,
      a.wUV.strides[1], a.wUV.strides[0], latent, t, L, 0, v, t, H * kV, kV,
      int(H)));
  expansions().fetch_add(1, std::memory_order_relaxed);
  expandedRows().fetch_add(uint64_t(rows), std::memory_order_relaxed);
  return Status::success();
}

uint64_t prefillContextExpansionCount() { return expansions().load(); }
uint64_t prefillContextExpandedRows() { return expandedRows().load(); }

} // namespace mlart::cuda
