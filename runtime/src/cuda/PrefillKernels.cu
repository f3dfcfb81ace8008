//===- PrefillKernels.cu - prefillAttention: dispatch and CUDA-core kernel -===//
//
// prefillAttention (MHA form, causal within each request, optionally after
// a request's cached context) on the GPU. Three routes, chosen per call:
//
//  * tensor cores (MLART_PREFILL_FLASH): the new tokens run on
//    prefillFlashKernel (PrefillFlashKernel.cu); a cached context is first
//    expanded to per-head K and V (PrefillContext.cu: gather + two batched
//    GEMMs, the MHA form vLLM uses for chunked context) and attended by the
//    same kernel in its context mode, whose partials the causal launch
//    merges by LSE;
//  * mixed: the flash kernel for the new tokens, and the CUDA-core kernel
//    below for the context in absorbed form, merging into the flash
//    kernel's partials (when the context cannot be expanded: weights of
//    another dtype, another rope width, a workspace too large);
//  * CUDA cores only: every other shape and dtype. One CTA per (token,
//    head), warp-per-key online softmax; the context in absorbed form
//    (q_nope @ W_UK against the latent, latent accumulator @ W_UV).
//
//===----------------------------------------------------------------------===//
#include "cuda/CudaCommon.h"
#include "cuda/DecodeCommon.h"
#include "cuda/Knobs.h"
#include "cuda/Launch.h"
#include "cuda/PrefillContext.h"
#include "cuda/PrefillFlash.h"
#include "cuda/Scratch.h"
#include "cpu/TensorAccess.h"

#include <climits>
#include <cmath>
#include <mutex>

namespace mlart::cuda {
namespace {

struct PrefillParams {
  const void *q, *k, *v;
  int qType, kType, vType;
  int64_t qS0, qS1, kS0, kS1, vS0, vS1;
  void *out;
  int outType;
  int64_t oS0, oS1;
  float *lse;
  int64_t lS0, lS1;
  const int32_t *qsl;
  int R, T, H, qkDim, vDim;
  float scale;
  int hasCtx;
  CacheView c;
  const int32_t *ctxLens;
  int64_t ctxStride;
  int64_t ctxLimit; ///< most cached tokens a request may have (contextRowLimit)
  bool lensIncludeNew;
  const void *wUK, *wUV;
  int wukType, wuvType;
  int64_t wukS0, wukS1, wuvS0, wuvS1;
  DeviceErrorRecord *rec;
  // When set, the new tokens were attended by prefillFlashKernel: its
  // normalised f32 rows [T, H, vDim] and LSEs [T, H]. This kernel then
  // attends the context only and merges the two.
  const float *newPart, *newLse;
};

constexpr int kPfThreads = 128, kPfWarps = 4;
constexpr int kPfMaxV = 8;      // vDim <= 256
constexpr int kPfMaxLat = 16;   // latent <= 512
constexpr int kPfMaxQk = 320;

__global__ void prefillKernel(PrefillParams p) {
  pdlPrologue();
  const float kvScale = cacheTensorScale(p.c);
  const int i = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  __shared__ float qs[kPfMaxQk];
  __shared__ float qAbs[kPfMaxLat * 32];
  __shared__ float wm[kPfWarps], wl[kPfWarps];
  __shared__ float accLat[kPfWarps][kPfMaxLat * 32];
  __shared__ float accV[kPfWarps][kPfMaxV * 32];

  // Which request does token i belong to? (binary search; padding: none)
  const int end = p.qsl[p.R];
  int r = -1;
  if (i < end && end <= p.T) {
    int lo = 0, hi = p.R - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (p.qsl[mid] <= i)
        lo = mid;
      else
        hi = mid - 1;
    }
    r = lo;
  } else if (end > p.T && tid == 0 && i == 0 && h == 0) {
    atomicMin(&p.rec->badSeqIndex, p.R);
  }
  if (i == 0 && h == 0)
    reportUnorderedBounds(p.qsl, p.R, p.rec);
  const int qes = p.qType == int(DType::F32) ? 4 : 2;
  const int kes = p.kType == int(DType::F32) ? 4 : 2;
  const int ves = p.vType == int(DType::F32) ? 4 : 2;
  for (int d = tid; d < p.qkDim; d += kPfThreads)
    qs[d] = r < 0 ? 0.0f
                  : loadF(static_cast<const char *>(p.q) +
                              (i * p.qS0 + h * p.qS1) * qes,
                          p.qType, d);
  int ctxLen = 0;
  const int nope = p.qkDim - p.c.rope;
  if (p.hasCtx && r >= 0) {
    ctxLen = prefillContextLength(p.ctxLens, p.ctxStride, p.lensIncludeNew,
                                  p.qsl, r, p.ctxLimit);
    if (ctxLen < 0) {
      if (tid == 0)
        atomicMin(&p.rec->badSeqIndex, r);
      ctxLen = 0;
    }
  }
  __syncthreads();
  if (ctxLen > 0) {
    // qAbs[c] = sum_n q_nope[n] * wUK[h][n][c]
    const char *w = static_cast<const char *>(p.wUK);
    const int wes = p.wukType == int(DType::F32) ? 4 : 2;
    for (int c = tid; c < p.c.latent; c += kPfThreads) {
      float s = 0.0f;
      for (int n = 0; n < nope; ++n)
        s += qs[n] * loadF(w + (h * p.wukS0 + n * p.wukS1) * wes, p.wukType, c);
      qAbs[c] = s;
    }
  }
  __syncthreads();

  float m = -INFINITY, l = 0.0f;
  float aLat[kPfMaxLat], aV[kPfMaxV];
  for (int k = 0; k < kPfMaxLat; ++k)
    aLat[k] = 0.0f;
  for (int k = 0; k < kPfMaxV; ++k)
    aV[k] = 0.0f;
  if (r >= 0) {
    // Cached context (absorbed): score = qAbs . c + q_pe . k_pe.
    for (int j = warp; j < ctxLen; j += kPfWarps) {
      const uint8_t *row = pagedRow(p.c, r, j);
      if (!row) {
        if (lane == 0)
          atomicMin(&p.rec->badSeqIndex, r);
        break;
      }
      float part = 0.0f;
      for (int c = lane; c < p.c.latent; c += 32)
        part += qAbs[c] * decodeVal(p.c, row, c, kvScale);
      for (int d = lane; d < p.c.rope; d += 32)
        part += qs[nope + d] * decodeVal(p.c, row, p.c.latent + d, kvScale);
      const float sc = warpSum(part) * p.scale;
      const float mNew = fmaxf(m, sc);
      const float alpha = m == -INFINITY ? 0.0f : expf(m - mNew);
      const float pr = expf(sc - mNew);
      l = l * alpha + pr;
      m = mNew;
      for (int k = 0; k < kPfMaxLat; ++k) {
        const int c = lane + 32 * k;
        aLat[k] =
            aLat[k] * alpha +
            (c < p.c.latent ? pr * decodeVal(p.c, row, c, kvScale) : 0.0f);
      }
      for (int k = 0; k < kPfMaxV; ++k)
        aV[k] *= alpha;
    }
    // New tokens, causal (unless the flash kernel did them).
    const int start = p.newPart ? i + 1 : p.qsl[r];
    for (int j = max(start, 0) + warp; j <= i; j += kPfWarps) {
      const char *kr = static_cast<const char *>(p.k) + (j * p.kS0 + h * p.kS1) * kes;
      float part = 0.0f;
      for (int d = lane; d < p.qkDim; d += 32)
        part += qs[d] * loadF(kr, p.kType, d);
      const float sc = warpSum(part) * p.scale;
      const float mNew = fmaxf(m, sc);
      const float alpha = m == -INFINITY ? 0.0f : expf(m - mNew);
      const float pr = expf(sc - mNew);
      l = l * alpha + pr;
      m = mNew;
      for (int k = 0; k < kPfMaxLat; ++k)
        aLat[k] *= alpha;
      const char *vr = static_cast<const char *>(p.v) + (j * p.vS0 + h * p.vS1) * ves;
      for (int k = 0; k < kPfMaxV; ++k) {
        const int c = lane + 32 * k;
        aV[k] = aV[k] * alpha + (c < p.vDim ? pr * loadF(vr, p.vType, c) : 0.0f);
      }
    }
  }
  // Merge the warps.
  if (lane == 0) {
    wm[warp] = m;
    wl[warp] = l;
  }
  __syncthreads();
  float M = -INFINITY;
  for (int w = 0; w < kPfWarps; ++w)
    M = fmaxf(M, wm[w]);
  const float myScale = m == -INFINITY ? 0.0f : expf(m - M);
  for (int k = 0; k < kPfMaxLat; ++k)
    accLat[warp][lane + 32 * k] = aLat[k] * myScale;
  for (int k = 0; k < kPfMaxV; ++k)
    accV[warp][lane + 32 * k] = aV[k] * myScale;
  __syncthreads();
  float L = 0.0f;
  for (int w = 0; w < kPfWarps; ++w)
    L += wm[w] == -INFINITY ? 0.0f : wl[w] * expf(wm[w] - M);
  if (ctxLen > 0) {
    for (int c = tid; c < p.c.latent; c += kPfThreads) {
      float s = 0.0f;
      for (int w = 0; w < kPfWarps; ++w)
        s += accLat[w][c];
      qAbs[c] = s; // reuse: the merged latent accumulator
    }
  }
  __syncthreads();
  // Weights of this kernel's part (wc) and of the flash kernel's (wn).
  float wc = 1.0f, wn = 0.0f;
  if (p.newPart) {
    const float lseNew = p.newLse[int64_t(i) * p.H + h];
    const float top = fmaxf(M, lseNew);
    wc = L > 0.0f ? expf(M - top) : 0.0f;
    wn = lseNew == -INFINITY ? 0.0f : expf(lseNew - top);
    L = L * wc + wn;
    M = top;
  }
  const float inv = L > 0.0f ? 1.0f / L : 0.0f;
  const int wes = p.wuvType == int(DType::F32) ? 4 : 2;
  const char *wv = static_cast<const char *>(p.wUV);
  const float *mine =
      p.newPart ? p.newPart + (int64_t(i) * p.H + h) * p.vDim : nullptr;
  for (int c = tid; c < p.vDim; c += kPfThreads) {
    float s = 0.0f;
    for (int w = 0; w < kPfWarps; ++w)
      s += accV[w][c];
    if (ctxLen > 0)
      for (int n = 0; n < p.c.latent; ++n)
        s += qAbs[n] * loadF(wv + (h * p.wuvS0 + n * p.wuvS1) * wes, p.wuvType, c);
    s *= wc;
    if (mine)
      s += mine[c] * wn;
    storeF(p.out, p.outType, i * p.oS0 + h * p.oS1 + c, s * inv);
  }
  if (p.lse && tid == 0)
    p.lse[i * p.lS0 + h * p.lS1] = L > 0.0f ? M + logf(L) : -INFINITY;
}

/// The flash kernel's operands, shared by every launch of one call.
PrefillFlashParams flashParams(const PrefillParams &p) {
  PrefillFlashParams f;
  f.q = p.q;
  f.k = p.k;
  f.v = p.v;
  f.dtype = p.qType;
  f.qS0 = p.qS0;
  f.qS1 = p.qS1;
  f.kS0 = p.kS0;
  f.kS1 = p.kS1;
  f.vS0 = p.vS0;
  f.vS1 = p.vS1;
  f.qsl = p.qsl;
  f.R = p.R;
  f.T = p.T;
  f.H = p.H;
  f.scale = p.scale;
  return f;
}

void writeResultTo(PrefillFlashParams &f, const PrefillParams &p) {
  f.out = p.out;
  f.outType = p.outType;
  f.oS0 = p.oS0;
  f.oS1 = p.oS1;
  f.lse = p.lse;
  f.lS0 = p.lS0;
  f.lS1 = p.lS1;
}

/// Tensor cores throughout: the context expanded to MHA form and attended
/// by the flash kernel's context mode (f32 partials + LSE), then the causal
/// launch over the new tokens, which merges the partials into out and lse.
Status prefillExpandedContext(CudaContext &ctx, const PrefillAttentionArgs &a,
                              const PrefillParams &p,
                              const ContextExpansionPlan &plan,
                              cudaStream_t stream) {
  const size_t rows = size_t(p.T) * size_t(p.H);
  const size_t partialOffset = (plan.bytes + 255) / 256 * 256;
  StreamScratch scratch(ctx, stream);
  MLART_RETURN_IF_ERROR(scratch.allocate(
      partialOffset + rows * (kFlashVDim + 1) * sizeof(float),
      "scratch (prefill context workspace)"));
  MLART_RETURN_IF_ERROR(
      expandPrefillContext(ctx, a, plan, scratch.get(), stream));
  float *partial = reinterpret_cast<float *>(scratch.get() + partialOffset);
  float *partialLse = partial + rows * kFlashVDim;

  PrefillFlashParams context = flashParams(p);
  context.k = scratch.get() + plan.kOffset;
  context.v = scratch.get() + plan.vOffset;
  context.kS0 = plan.heads * kFlashQkDim;
  context.kS1 = kFlashQkDim;
  context.vS0 = plan.heads * kFlashVDim;
  context.vS1 = kFlashVDim;
  context.ctxLens = p.ctxLens;
  context.ctxStride = p.ctxStride;
  context.ctxPad = int(plan.pad);
  context.lensIncludeNew = p.lensIncludeNew;
  context.partial = partial;
  context.lse = partialLse;
  context.lS0 = p.H;
  context.lS1 = 1;
  MLART_RETURN_IF_ERROR(launchPrefillFlash(context, p.rec, stream));

  PrefillFlashParams causal = flashParams(p);
  writeResultTo(causal, p);
  causal.prior = partial;
  causal.priorLse = partialLse;
  return launchPrefillFlash(causal, p.rec, stream);
}

/// Picks the route (file comment) and launches it.
Status runPrefill(CudaContext &ctx, const PrefillAttentionArgs &a,
                  PrefillParams p, cudaStream_t stream) {
  const bool flash = knobValue(Knob::PrefillFlash) != 0 &&
                     prefillFlashSupports(a.q, a.k, a.v, a.out);
  if (flash && !p.hasCtx) {
    PrefillFlashParams f = flashParams(p);
    writeResultTo(f, p);
    return launchPrefillFlash(f, p.rec, stream);
  }
  ContextExpansionPlan plan;
  if (flash && planContextExpansion(ctx, a, p.R, plan))
    return prefillExpandedContext(ctx, a, p, plan, stream);
  StreamScratch scratch(ctx, stream);
  if (flash) {
    // Mixed: the flash kernel's f32 rows, merged by the context kernel.
    const size_t rows = size_t(p.T) * size_t(p.H);
    MLART_RETURN_IF_ERROR(
        scratch.allocate(rows * (kFlashVDim + 1) * sizeof(float),
                         "scratch (prefill partials)"));
    PrefillFlashParams f = flashParams(p);
    f.partial = reinterpret_cast<float *>(scratch.get());
    f.lse = f.partial + rows * kFlashVDim;
    f.lS0 = p.H;
    f.lS1 = 1;
    MLART_RETURN_IF_ERROR(launchPrefillFlash(f, p.rec, stream));
    p.newPart = f.partial;
    p.newLse = f.lse;
  }
  return launchKernel("prefillKernel", prefillKernel,
                      dim3(unsigned(p.T), unsigned(p.H)), kPfThreads, 0,
                      stream, p);
}

} // namespace

Status prefillAttention(CudaContext &ctx, const PrefillAttentionArgs &a,
                        cudaStream_t stream) {
  using namespace mlart::cpu;
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.q, "q", 3));
  const int64_t T = a.q.sizes[0], H = a.q.sizes[1], qkDim = a.q.sizes[2];
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.k, "k", 3));
  for (int d = 0; d < 3; ++d)
    MLART_RETURN_IF_ERROR(checkDim(a.k, "k", d, a.q.sizes[d]));
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.v, "v", 3));
  MLART_RETURN_IF_ERROR(checkDim(a.v, "v", 0, T));
  MLART_RETURN_IF_ERROR(checkDim(a.v, "v", 1, H));
  const int64_t vDim = a.v.sizes[2];
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.out, "out", 3));
  MLART_RETURN_IF_ERROR(checkDim(a.out, "out", 0, T));
  MLART_RETURN_IF_ERROR(checkDim(a.out, "out", 1, H));
  MLART_RETURN_IF_ERROR(checkDim(a.out, "out", 2, vDim));
  if (a.lse.present()) {
    MLART_RETURN_IF_ERROR(checkTypedTensor(a.lse, "lse", 2, DType::F32));
    MLART_RETURN_IF_ERROR(checkDim(a.lse, "lse", 0, T));
    MLART_RETURN_IF_ERROR(checkDim(a.lse, "lse", 1, H));
  }
  MLART_RETURN_IF_ERROR(
      checkTypedTensor(a.queryStartLoc, "queryStartLoc", 1, DType::I32));
  const int64_t R = a.queryStartLoc.sizes[0] - 1;
  if (R < 0)
    return invalidArgument("queryStartLoc needs at least one entry");
  MLART_RETURN_IF_ERROR(checkContextLenBound(a.contextLenBound));
  if (a.queryStartLoc.strides[0] != 1)
    return unimplemented("CUDA prefill needs a contiguous queryStartLoc");
  if (vDim > 32 * kPfMaxV || qkDim > kPfMaxQk)
    return unimplemented("CUDA prefill supports vDim <= 256, qk dim <= 320");
  const bool hasCtx = a.cache.data != nullptr;
  PrefillParams p{};
  if (hasCtx) {
    const KVCacheDesc &desc = a.cache.desc;
    MLART_RETURN_IF_ERROR(checkFloatTensor(a.wUK, "wUK", 3));
    MLART_RETURN_IF_ERROR(checkFloatTensor(a.wUV, "wUV", 3));
    MLART_RETURN_IF_ERROR(checkDim(a.wUK, "wUK", 0, H));
    MLART_RETURN_IF_ERROR(checkDim(a.wUK, "wUK", 1, qkDim - desc.ropeDim));
    MLART_RETURN_IF_ERROR(checkDim(a.wUK, "wUK", 2, desc.latentRank));
    MLART_RETURN_IF_ERROR(checkDim(a.wUV, "wUV", 0, H));
    MLART_RETURN_IF_ERROR(checkDim(a.wUV, "wUV", 1, desc.latentRank));
    MLART_RETURN_IF_ERROR(checkDim(a.wUV, "wUV", 2, vDim));
    MLART_RETURN_IF_ERROR(cpu::checkPagedLayout(
        a.cache, a.blockTable, a.contextLens, "contextLens", R));
    if (desc.latentRank > 32 * kPfMaxLat)
      return unimplemented("CUDA prefill supports latent rank <= 512");
    p.c = makeView(a.cache, a.blockTable);
    p.ctxLens = static_cast<const int32_t *>(a.contextLens.data);
    p.ctxStride = a.contextLens.strides[0];
    p.ctxLimit = contextRowLimit(a);
    p.lensIncludeNew = a.lensIncludeNewTokens;
    p.wUK = a.wUK.data;
    p.wUV = a.wUV.data;
    p.wukType = int(a.wUK.dtype);
    p.wuvType = int(a.wUV.dtype);
    p.wukS0 = a.wUK.strides[0];
    p.wukS1 = a.wUK.strides[1];
    p.wuvS0 = a.wUV.strides[0];
    p.wuvS1 = a.wUV.strides[1];
  }
  if (T == 0 || H == 0)
    return Status::success();
  if (T > INT_MAX || H > 65535)
    return invalidArgument("prefill too large for one launch");
  p.q = a.q.data;
  p.k = a.k.data;
  p.v = a.v.data;
  p.qType = int(a.q.dtype);
  p.kType = int(a.k.dtype);
  p.vType = int(a.v.dtype);
  p.qS0 = a.q.strides[0];
  p.qS1 = a.q.strides[1];
  p.kS0 = a.k.strides[0];
  p.kS1 = a.k.strides[1];
  p.vS0 = a.v.strides[0];
  p.vS1 = a.v.strides[1];
  p.out = a.out.data;
  p.outType = int(a.out.dtype);
  p.oS0 = a.out.strides[0];
  p.oS1 = a.out.strides[1];
  p.lse = static_cast<float *>(a.lse.data);
  p.lS0 = a.lse.present() ? a.lse.strides[0] : 0;
  p.lS1 = a.lse.present() ? a.lse.strides[1] : 0;
  p.qsl = static_cast<const int32_t *>(a.queryStartLoc.data);
  p.R = int(R);
  p.T = int(T);
  p.H = int(H);
  p.qkDim = int(qkDim);
  p.vDim = int(vDim);
  p.scale = a.softmaxScale;
  p.hasCtx = hasCtx;
  p.rec = ctx.deviceRecord;
  if (R == 0) {
    // No requests: every token is padding.
    p.R = 0;
  }
  std::unique_lock<std::mutex> lock(ctx.recordMutex, std::defer_lock);
  if (ctx.synchronousChecks) {
    lock.lock();
    MLART_RETURN_IF_ERROR(resetRecord(ctx, stream));
  }
  Status s = runPrefill(ctx, a, p, stream);
  if (!s.ok())
    return s;
  return finishChecked(ctx, stream, lock);
}

} // namespace mlart::cuda
