//===- DecodeManyHeadsTile.h - Per-tile math of the many-heads decode -----===//
//
// The steps of one 64-token KV tile and the epilogue, shared by the two
// many-heads kernels (DecodeManyHeads.cu: the MMA warps copy with cp.async;
// DecodeManyHeadsTma.cu: a producer warp loads with TMA). Both run the math
// on two consumer warpgroups (256 threads); `sync` syncs exactly those.
//
// Thread roles: warpgroup wg computes S for tokens 32wg..32wg+31 and O for
// latent channels 256wg..256wg+255; a thread holds rows (heads) r0 and r0+8
// of both, r0 = 16 * (warp % 4) + lane / 4, q4 = lane % 4.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_DECODEMANYHEADSTILE_H
#define MLART_CUDA_DECODEMANYHEADSTILE_H

#include "cuda/DecodeCommon.h"
#include "cuda/Sm90Ptx.h"

#ifdef __CUDACC__
namespace mlart::cuda::manyheads {

constexpr float kLn2 = 0.6931471805599453f;

/// Issues (and commits, without waiting) S = Q K^T for this warpgroup's 32
/// tokens: Q at qAddr, the KV tile at kb, both [64 x 576] operands.
/// kIssue = false leaves the tensor cores out (timing experiments).
/// kNoZero starts from scale-d = 0 instead of zeroed registers: no
/// instruction then writes s while an earlier wgmma (PV) may be in flight,
/// which would make ptxas serialise the wgmma (C7515).
template <bool kIssue = true, bool kNoZero = false>
__device__ __forceinline__ void issueScores(float (&s)[16], uint32_t qAddr,
                                            uint32_t kb, int wg) {
  using namespace sm90;
  static_assert(kIssue || !kNoZero, "S would be undefined");
  if (!kNoZero) {
#pragma unroll
    for (int i = 0; i < 16; ++i)
      s[i] = 0.0f;
    fenceRegs(s);
  }
  wgArrive();
  const uint64_t dA = makeDesc(qAddr, 16, 1024);
  const uint64_t dB = makeDesc(kb + uint32_t(wg) * 4096u, 16, 1024);
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    if (!kIssue)
      break;
    const uint64_t off = ((kk >> 2) * kChunkBytes + (kk & 3) * 32) >> 4;
    wgmmaS(s, dA + off, dB + off, kNoZero && kk == 0 ? 0 : 1);
  }
  wgCommit();
}

/// Online softmax of one tile once S is in registers: positions >= len
/// masked (selected away, so NaN scores of such rows never propagate), row
/// max exchanged between the warpgroups through redMax[2][64], P (bf16)
/// written to the swizzled [64 heads x 64 tokens] operand at sP, m, l and o
/// rescaled. Returns after `sync` with P visible to wgmma.
template <typename Sync>
__device__ __forceinline__ void softmaxTile(float (&s)[16], float (&o)[128],
                                            float (&m)[2], float (&l)[2],
                                            int tile, int len, float scaleLog2,
                                            int wg, int r0, int q4,
                                            float *redMax, uint8_t *sP,
                                            Sync sync) {
  using namespace sm90;
  // Mask, scale (log2 domain), row max of this warpgroup's half.
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int pos = tile * kTile + wg * 32 + j * 8 + q4 * 2 + (e & 1);
      const float v = pos < len ? s[j * 4 + e] * scaleLog2 : -INFINITY;
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
  sync();
  float base[2], alpha[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float t = fmaxf(redMax[r0 + 8 * r], redMax[64 + r0 + 8 * r]);
    const float mNew = fmaxf(m[r], t);
    base[r] = mNew == -INFINITY ? 0.0f : mNew;
    alpha[r] = m[r] == -INFINITY ? 0.0f : exp2f(m[r] - mNew);
    m[r] = mNew;
  }
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
  // Per-thread partial row sums (reduced over lanes and warpgroups once, at
  // the end: alpha is the same for every thread of a row).
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
  sync(); // P complete (both halves)
}

/// Issues (and commits, without waiting) O[:, 256wg..] += P V with P at
/// pAddr and V the first 512 columns of the KV tile at kb read MN-major.
/// kIssue = false leaves the tensor cores out.
template <bool kIssue = true>
__device__ __forceinline__ void issuePV(float (&o)[128], uint32_t pAddr,
                                        uint32_t kb, int wg) {
  using namespace sm90;
  fenceRegs(o);
  wgArrive();
  const uint64_t dA = makeDesc(pAddr, 16, 1024);
  const uint64_t dB =
      makeDesc(kb + uint32_t(wg) * 4u * kChunkBytes, kChunkBytes, 1024);
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk)
    if (kIssue)
      wgmmaPV(o, dA + ((kk * 32) >> 4), dB + ((kk * 2048) >> 4));
  wgCommit();
}

/// issuePV, then returns when the tensor cores are done with P and V.
template <bool kIssue = true>
__device__ __forceinline__ void accumulatePV(float (&o)[128], uint32_t pAddr,
                                             uint32_t kb, int wg) {
  using namespace sm90;
  issuePV<kIssue>(o, pAddr, kb, wg);
  wgWaitAll();
  fenceRegs(o);
}

/// Row totals at the end of a split: l summed over the quad's lanes and the
/// two warpgroups (through redSum[2][64]), then 1/L and the LSE (natural
/// log) of rows r0 and r0 + 8.
template <typename Sync>
__device__ __forceinline__ void rowTotals(float (&l)[2], const float (&m)[2],
                                          int wg, int r0, int q4,
                                          float *redSum, Sync sync,
                                          float (&inv)[2], float (&lseV)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  if (q4 == 0) {
    redSum[wg * 64 + r0] = l[0];
    redSum[wg * 64 + r0 + 8] = l[1];
  }
  sync();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float L = redSum[r0 + 8 * r] + redSum[64 + r0 + 8 * r];
    inv[r] = L > 0.0f ? 1.0f / L : 0.0f;
    lseV[r] = L > 0.0f ? m[r] * kLn2 + logf(L) : -INFINITY;
  }
}

/// Writes this thread's part of O (normalised) and the LSE: to out/lse with
/// one split, else to the f32 partials that the combine kernel reduces.
__device__ __forceinline__ void storeOutput(const DecodeParams &p,
                                            const float (&o)[128],
                                            const float (&inv)[2],
                                            const float (&lseV)[2], int b,
                                            int split, int h0, int wg, int r0,
                                            int q4) {
  using namespace sm90;
  const int H = p.heads;
  if (p.splits == 1) {
    withOutputType(p, [&](auto bf16) {
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        const int col = wg * 256 + j * 8 + q4 * 2;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int h = h0 + r0 + 8 * r;
          storeOutPair<decltype(bf16)::value>(
              p, b * p.oS0 + h * p.oS1 + col, o[j * 4 + 2 * r] * inv[r],
              o[j * 4 + 2 * r + 1] * inv[r]);
        }
      }
    });
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
      *reinterpret_cast<float2 *>(po + int64_t(h) * kDv + col) = make_float2(
          o[j * 4 + 2 * r] * inv[r], o[j * 4 + 2 * r + 1] * inv[r]);
    }
  }
  if (q4 == 0 && wg == 0) {
    float *pl = p.partLse + (int64_t(b) * p.splits + split) * H;
    pl[h0 + r0] = lseV[0];
    pl[h0 + r0 + 8] = lseV[1];
  }
}

} // namespace mlart::cuda::manyheads
#endif // __CUDACC__

#endif // MLART_CUDA_DECODEMANYHEADSTILE_H
