//===- CacheKernels.cu - cacheUpdate, rope and fused rope + cache update --===//
//
// One kernel does all three (template-free, flags in the parameters):
//  * a warp per token rotates k_pe (in place, and into k_pe_out), then
//    writes the cache row: plain layouts as 16-byte vector copies (when
//    rows are 16-byte aligned), fp8 per-tensor and fp8_ds_mla with the same
//    rounding as the CPU reference (tile amax by warp reduction);
//  * all threads then rotate q_pe, one (token, head, pair) per thread,
//    in place or from a separate source (q_pe_in: no copy before the call).
// Slots and positions are device data. Each call is all-or-nothing: for
// small calls (<= kInlineValidationLimit indices) every block scans all
// slots and positions first and returns if any is bad (block 0 records
// why); larger calls run a separate validation kernel first and the write
// kernel reads its verdict (the compiler-generated kernels do the same,
// prevalidateCacheWrite). Every row write is additionally range-checked,
// so even a racing misuse can never write outside the cache.
//
//===----------------------------------------------------------------------===//
#include "cuda/CacheCopyKernel.h"
#include "cuda/CudaCommon.h"
#include "cuda/Launch.h"
#include "cpu/CacheWrite.h"
#include "cpu/IndexAccess.h"
#include "cpu/RopeMath.h"
#include "cpu/TensorAccess.h"


#include <cmath>
#include <cstdlib>

namespace mlart::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

struct WriteParams {
  const uint8_t *kvC = nullptr;
  int64_t kvStride = 0;
  int kvType = 0;
  uint8_t *kPe = nullptr;
  int64_t kpStride = 0;
  int kpType = 0;
  const void *slots = nullptr;
  int slot64 = 0;
  int64_t slotStride = 0;
  int64_t N = 0;
  int64_t T = 0;
  uint8_t *cache = nullptr;
  int64_t rowBytes = 0, numSlots = 0, blockSize = 1;
  int64_t blockStride = 0; // KVCacheRef::blockBytes
  int layout = 0, cacheType = 0;
  float scale = 1.0f;
  const float *scalePtr = nullptr; // KVCacheRef::scaleTensor: overrides scale
  int latent = 0, rope = 0;
  const uint8_t *wp = nullptr;
  int doRope = 0;
  const void *pos = nullptr;
  int pos64 = 0;
  int64_t posStride = 0;
  const float *cs = nullptr;
  int64_t csStride = 0, maxPos = 0;
  int style = 1;
  uint8_t *q = nullptr;
  int qType = 0;
  int64_t qS0 = 0, qS1 = 0;
  const uint8_t *qIn = nullptr; // q_pe source: q itself when in place
  int64_t qInS0 = 0, qInS1 = 0;
  int Hq = 0, qRope = 0;
  uint8_t *kOut = nullptr;
  int64_t kOutStride = 0;
  int vec = 0;
  DeviceErrorRecord *rec = nullptr;
  int prevalidated = 0;
  int64_t tokenBlocks = 0; // blocks [0, tokenBlocks) write tokens, the rest rotate q
  // Latent RMSNorm before the write (per-token generic path only).
  const uint8_t *normW = nullptr;
  int normType = 0;
  float normEps = 0.0f;
};

/// Row of cos/sin for token t. Used before the validation vote, so an
/// out-of-range position is clamped to row 0 for the (speculative) loads;
/// nothing is stored for it, the vote fails.
__device__ __forceinline__ const float *csRow(const WriteParams &p, int64_t t) {
  int64_t x = loadIdx(p.pos, p.pos64, p.posStride, t);
  if (x < 0 || x >= p.maxPos)
    x = 0;
  return p.cs + x * p.csStride;
}

/// The cache row of slot s (in range).
__device__ __forceinline__ uint8_t *slotRow(const WriteParams &p, int64_t s) {
  return p.cache + (s / p.blockSize) * p.blockStride +
         (s % p.blockSize) * p.rowBytes;
}

__device__ bool scanBad(const WriteParams &p, int64_t start, int64_t step,
                        bool record) {
  bool bad = false;
  if (p.cache)
    for (int64_t i = start; i < p.N; i += step) {
      const int64_t s = loadIdx(p.slots, p.slot64, p.slotStride, i);
      if (s < 0)
        continue;
      if (s >= p.numSlots) {
        bad = true;
        if (record)
          atomicMin(&p.rec->badSlotIndex, int(i));
      } else if (p.wp && p.wp[s / p.blockSize]) {
        bad = true;
        if (record) {
          atomicMin(&p.rec->refusedIndex, int(i));
          atomicAdd(&p.rec->refusedRows, 1ull);
        }
      }
    }
  if (p.doRope)
    for (int64_t i = start; i < p.T; i += step) {
      const int64_t x = loadIdx(p.pos, p.pos64, p.posStride, i);
      if (x < 0 || x >= p.maxPos) {
        bad = true;
        if (record)
          atomicMin(&p.rec->badPosIndex, int(i));
      }
    }
  return bad;
}

/// The separate validation of a large call. Its verdict (callFailed) is
/// published by the last block to finish, which also resets the
/// accumulators for the next call: no memset node before every call.
__global__ void validateKernel(WriteParams p) {
  pdlPrologue();
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  const bool bad = __syncthreads_or(scanBad(p, tid, step, true));
  if (threadIdx.x != 0)
    return;
  if (bad)
    atomicOr(&p.rec->validateBad, 1);
  __threadfence(); // our verdict before our count
  if (atomicAdd(&p.rec->validateDone, 1u) != gridDim.x - 1)
    return;
  __threadfence(); // every block's verdict is visible to the last one
  const int verdict = atomicExch(&p.rec->validateBad, 0);
  atomicExch(&p.rec->validateDone, 0u);
  atomicExch(&p.rec->callFailed, verdict);
}

__device__ __forceinline__ void rotatePair(const uint8_t *row, int type, int64_t a,
                                           int64_t b, float c, float s,
                                           float &r0, float &r1) {
  const float x0 = loadF(row, type, a), x1 = loadF(row, type, b);
  // No FMA contraction: the CPU reference rounds each product.
  r0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  r1 = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
}

/// `v` rounded to `dtype` (bf16, f16 or f32) and read back.
__device__ __forceinline__ float roundTo(int dtype, float v) {
  if (dtype == int(DType::BF16))
    return bf16BitsToFloat(floatToBf16Bits(v));
  if (dtype == int(DType::F16))
    return f16BitsToFloat(floatToF16Bits(v));
  return v;
}

/// 1 / sqrt(mean(kv^2) + eps) of one latent row, in every lane of the warp
/// (the CPU reference's rmsNormRow, summed in another order). With the
/// latent in groups of 64 values (8-value chunks, 8 chunks a group) the sum
/// is the generated kernel's, bit for bit: each chunk's squares in order,
/// a group's 8 chunk sums by the xor tree 4, 2, 1, the groups in order.
__device__ float latentInvRms(const WriteParams &p, const uint8_t *kv,
                              int lane) {
  float sum = 0.0f;
  if (p.latent % 64 == 0) {
    for (int base = 0; base < p.latent; base += 256) { // 32 chunks a pass
      const int c = base / 8 + lane;
      float part = 0.0f;
      if (8 * c < p.latent)
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float v = loadF(kv, p.kvType, 8 * c + i);
          part = __fadd_rn(part, __fmul_rn(v, v));
        }
#pragma unroll
      for (int o = 4; o > 0; o >>= 1)
        part = __fadd_rn(part, __shfl_xor_sync(0xffffffffu, part, o));
      // Groups of this pass in order: lanes 0, 8, 16, 24 hold them.
#pragma unroll
      for (int g = 0; g < 4; ++g) {
        const float groupSum = __shfl_sync(0xffffffffu, part, 8 * g);
        if (base + 64 * g < p.latent)
          sum = __fadd_rn(sum, groupSum);
      }
    }
  } else {
    for (int i = lane; i < p.latent; i += 32) {
      const float v = loadF(kv, p.kvType, i);
      sum = __fadd_rn(sum, __fmul_rn(v, v));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, o));
  }
  const float mean = __fdiv_rn(sum, float(p.latent));
  return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, p.normEps)));
}

/// Latent value i as the write encodes it: normalised and rounded once to
/// kv_c's dtype when the call has a latent norm (`inv` from latentInvRms).
__device__ __forceinline__ float latentF(const WriteParams &p,
                                         const uint8_t *kv, int i, float inv) {
  const float v = loadF(kv, p.kvType, i);
  if (!p.normW)
    return v;
  return roundTo(p.kvType,
                 __fmul_rn(__fmul_rn(v, inv), loadF(p.normW, p.normType, i)));
}

__device__ void writeRow(const WriteParams &p, const uint8_t *kv,
                         const uint8_t *kp, uint8_t *row, int lane,
                         float inv) {
  if (p.layout == int(CacheLayout::Plain)) {
    const int es = p.cacheType == int(DType::F32) ? 4 : 2;
    if (p.normW) { // computed values (plain: the cache dtype is kv_c's)
      for (int i = lane; i < p.latent + p.rope; i += 32)
        storeF(row, p.cacheType, i,
               i < p.latent ? latentF(p, kv, i, inv)
                            : loadF(kp, p.kpType, i - p.latent));
    } else if (p.vec & 1) { // bit 1: 16-byte rows (bits 2, 4: q_pe, cos/sin)
      const int lc = p.latent * es / 16, rc = p.rope * es / 16;
      for (int c = lane; c < lc + rc; c += 32) {
        const uint4 *src = c < lc ? reinterpret_cast<const uint4 *>(kv) + c
                                  : reinterpret_cast<const uint4 *>(kp) + (c - lc);
        reinterpret_cast<uint4 *>(row)[c] = *src;
      }
    } else if (es == 2) {
      for (int i = lane; i < p.latent + p.rope; i += 32)
        reinterpret_cast<uint16_t *>(row)[i] =
            i < p.latent ? reinterpret_cast<const uint16_t *>(kv)[i]
                         : reinterpret_cast<const uint16_t *>(kp)[i - p.latent];
    } else {
      for (int i = lane; i < p.latent + p.rope; i += 32)
        reinterpret_cast<uint32_t *>(row)[i] =
            i < p.latent ? reinterpret_cast<const uint32_t *>(kv)[i]
                         : reinterpret_cast<const uint32_t *>(kp)[i - p.latent];
    }
    return;
  }
  if (p.layout == int(CacheLayout::Fp8PerTensor) &&
      p.kvType == p.cacheType) { // already quantised: stored as they are
    for (int i = lane; i < p.latent + p.rope; i += 32)
      row[i] = i < p.latent ? kv[i] : kp[i - p.latent];
    return;
  }
  if (p.layout == int(CacheLayout::Fp8PerTensor)) {
    const float scale = p.scalePtr ? *p.scalePtr : p.scale;
    for (int i = lane; i < p.latent + p.rope; i += 32) {
      const float v = i < p.latent ? latentF(p, kv, i, inv)
                                   : loadF(kp, p.kpType, i - p.latent);
      row[i] = floatToFp8(__fdiv_rn(v, scale), p.cacheType);
    }
    return;
  }
  // fp8_ds_mla: per 128-value tile, scale = max(amax / 448, FLT_MIN).
  uint8_t *scales = row + p.latent;
  uint8_t *ropeOut = scales + 4 * (p.latent / 128);
  for (int tile = 0; tile < p.latent / 128; ++tile) {
    float v[4];
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[j] = latentF(p, kv, tile * 128 + lane + 32 * j, inv);
      amax = fmaxf(amax, fabsf(v[j]));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float ts = fmaxf(__fdiv_rn(amax, 448.0f), FLT_MIN);
    if (lane == 0)
      reinterpret_cast<float *>(scales)[tile] = ts;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      row[tile * 128 + lane + 32 * j] = floatToFp8Bits(__fdiv_rn(v[j], ts));
  }
  for (int i = lane; i < p.rope; i += 32)
    reinterpret_cast<uint16_t *>(ropeOut)[i] =
        floatToBf16Bits(loadF(kp, p.kpType, i));
}

/// q_pe rotation, bf16 with rope 64 and 16-byte aligned rows: 16-byte
/// vectors (NeoX: 8 elements of each half per item; GPT-J: 4 pairs per
/// item), cos/sin as float4 when the table allows (vec & 4).
struct QRegs {
  uint16_t *row;
  int g;
  uint4 va, vb;
  float c[8], sn[8];
};

__device__ __forceinline__ void qLoad(const WriteParams &p, int64_t it,
                                      QRegs &r) {
  constexpr int half = 32;
  const int groups = p.style == 0 ? 8 : 4; // items per head
  r.g = int(it % groups);
  const int64_t th = it / groups;
  const int h = int(th % p.Hq);
  const int64_t t = th / p.Hq;
  r.row = reinterpret_cast<uint16_t *>(p.q) + t * p.qS0 + h * p.qS1;
  const uint16_t *src =
      reinterpret_cast<const uint16_t *>(p.qIn) + t * p.qInS0 + h * p.qInS1;
  const float *cs = csRow(p, t);
  const int n = p.style == 0 ? 4 : 8; // pairs per item
  const int first = n * r.g;
  r.va = *reinterpret_cast<const uint4 *>(src + 8 * r.g);
  if (p.style != 0)
    r.vb = *reinterpret_cast<const uint4 *>(src + half + 8 * r.g);
  if (p.vec & 4) {
#pragma unroll
    for (int j = 0; j < 8; j += 4) {
      if (j < n) {
        const float4 c = *reinterpret_cast<const float4 *>(cs + first + j);
        const float4 sn = *reinterpret_cast<const float4 *>(cs + half + first + j);
        r.c[j] = c.x, r.c[j + 1] = c.y, r.c[j + 2] = c.z, r.c[j + 3] = c.w;
        r.sn[j] = sn.x, r.sn[j + 1] = sn.y, r.sn[j + 2] = sn.z, r.sn[j + 3] = sn.w;
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (j < n) {
        r.c[j] = cs[first + j];
        r.sn[j] = cs[half + first + j];
      }
  }
}

__device__ __forceinline__ void qStore(const WriteParams &p, QRegs &r) {
  constexpr int half = 32;
  // No FMA contraction: the CPU reference rounds each product.
  if (p.style == 0) { // GPT-J: elements 8g..8g+7 = pairs 4g..4g+3
    uint16_t *e = reinterpret_cast<uint16_t *>(&r.va);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float x0 = bf16BitsToFloat(e[2 * j]), x1 = bf16BitsToFloat(e[2 * j + 1]);
      e[2 * j] = floatToBf16Bits(__fsub_rn(__fmul_rn(x0, r.c[j]), __fmul_rn(x1, r.sn[j])));
      e[2 * j + 1] = floatToBf16Bits(__fadd_rn(__fmul_rn(x1, r.c[j]), __fmul_rn(x0, r.sn[j])));
    }
    *reinterpret_cast<uint4 *>(r.row + 8 * r.g) = r.va;
  } else { // NeoX: elements 8g..8g+7 with 32+8g..32+8g+7
    uint16_t *ea = reinterpret_cast<uint16_t *>(&r.va);
    uint16_t *eb = reinterpret_cast<uint16_t *>(&r.vb);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float x0 = bf16BitsToFloat(ea[j]), x1 = bf16BitsToFloat(eb[j]);
      ea[j] = floatToBf16Bits(__fsub_rn(__fmul_rn(x0, r.c[j]), __fmul_rn(x1, r.sn[j])));
      eb[j] = floatToBf16Bits(__fadd_rn(__fmul_rn(x1, r.c[j]), __fmul_rn(x0, r.sn[j])));
    }
    *reinterpret_cast<uint4 *>(r.row + 8 * r.g) = r.va;
    *reinterpret_cast<uint4 *>(r.row + half + 8 * r.g) = r.vb;
  }
}

/// Generic q_pe rotation (any type / rope width): one pair per item.
/// Items first, first + step, ...; `skip` items already done by the caller.
__device__ void rotateQGeneric(const WriteParams &p, int64_t first,
                               int64_t step) {
  const int half = p.rope / 2;
  const int qes = p.qType == int(DType::F32) ? 4 : 2;
  const int64_t items = p.T * p.Hq * half;
  for (int64_t it = first; it < items; it += step) {
    const int i = int(it % half);
    const int64_t th = it / half;
    const int h = int(th % p.Hq);
    const int64_t t = th / p.Hq;
    uint8_t *row = p.q + (t * p.qS0 + h * p.qS1) * qes;
    const uint8_t *src = p.qIn + (t * p.qInS0 + h * p.qInS1) * qes;
    const float *cs = p.cs + loadIdx(p.pos, p.pos64, p.posStride, t) * p.csStride;
    const int64_t a = p.style == 0 ? 2 * i : i;
    const int64_t b = p.style == 0 ? 2 * i + 1 : i + half;
    float r0, r1;
    rotatePair(src, p.qType, a, b, cs[i], cs[half + i], r0, r1);
    storeF(row, p.qType, a, r0);
    storeF(row, p.qType, b, r1);
  }
}

/// Bytes of one kv_c / k_pe element: 4 for f32, 1 for inputs already in an
/// fp8 encoding (stored as they are), 2 for f16 and bf16.
__device__ __forceinline__ int inputBytes(int dtype) {
  if (dtype == int(DType::F32))
    return 4;
  return dtype == int(DType::F8E4M3FN) || dtype == int(DType::F8E5M2) ? 1 : 2;
}

__device__ __forceinline__ int64_t qItems(const WriteParams &p) {
  return (p.vec & 2) ? p.T * p.Hq * (p.style == 0 ? 8 : 4)
                     : p.T * p.Hq * (p.rope / 2);
}

/// Generic per-token path (any layout): rotate k_pe in place, then encode.
__device__ void tokenGeneric(const WriteParams &p, int64_t t, int lane) {
  const int half = p.rope / 2;
  const int kes = inputBytes(p.kpType);
  uint8_t *kp = p.kPe + t * p.kpStride * kes;
  if (p.doRope) {
    const float *cs = p.cs + loadIdx(p.pos, p.pos64, p.posStride, t) * p.csStride;
    for (int i = lane; i < half; i += 32) {
      const int64_t a = p.style == 0 ? 2 * i : i;
      const int64_t b = p.style == 0 ? 2 * i + 1 : i + half;
      float r0, r1;
      rotatePair(kp, p.kpType, a, b, cs[i], cs[half + i], r0, r1);
      storeF(kp, p.kpType, a, r0);
      storeF(kp, p.kpType, b, r1);
      if (p.kOut) {
        uint8_t *ko = p.kOut + t * p.kOutStride * kes;
        storeF(ko, p.kpType, a, r0);
        storeF(ko, p.kpType, b, r1);
      }
    }
    __syncwarp();
  }
  if (p.cache && t < p.N) {
    const int64_t s = loadIdx(p.slots, p.slot64, p.slotStride, t);
    if (s >= 0 && s < p.numSlots && !(p.wp && p.wp[s / p.blockSize])) {
      const int vkes = inputBytes(p.kvType);
      const uint8_t *kv = p.kvC + t * p.kvStride * vkes;
      // The slot is the warp's: every lane takes part in the reduction.
      const float inv = p.normW ? latentInvRms(p, kv, lane) : 1.0f;
      writeRow(p, kv, kp, slotRow(p, s), lane, inv);
    }
  }
}

/// Fast per-token path (plain cache, 16-byte rows, rope <= 64, row <= 96
/// chunks): every load is issued before any store, and before the
/// validation barrier, so a small call costs about two memory round trips.
struct TokenRegs {
  int64_t slot;
  uint4 v[3];
  float x0, x1, c, sn;
};

__device__ __forceinline__ void tokenLoad(const WriteParams &p, int64_t t,
                                          int lane, TokenRegs &r) {
  const int es = p.cacheType == int(DType::F32) ? 4 : 2;
  const int lc = p.latent * es / 16, rc = p.doRope ? 0 : p.rope * es / 16;
  r.slot = (p.cache && t < p.N) ? loadIdx(p.slots, p.slot64, p.slotStride, t) : -1;
  const uint8_t *kv = p.kvC + t * p.kvStride * es;
  const uint8_t *kp = p.kPe + t * p.kpStride * es;
#pragma unroll
  for (int k = 0; k < 3; ++k) {
    const int ch = lane + 32 * k;
    // Issued whatever the slot (kv_c and k_pe rows t < T always exist):
    // no slot -> data dependency.
    if (ch < lc + rc)
      r.v[k] = ch < lc ? reinterpret_cast<const uint4 *>(kv)[ch]
                       : reinterpret_cast<const uint4 *>(kp)[ch - lc];
  }
  const int half = p.rope / 2;
  if (p.doRope && lane < half) {
    const float *cs = csRow(p, t);
    const int64_t a = p.style == 0 ? 2 * lane : lane;
    const int64_t b = p.style == 0 ? 2 * lane + 1 : lane + half;
    r.x0 = loadF(kp, p.kpType, a);
    r.x1 = loadF(kp, p.kpType, b);
    r.c = cs[lane];
    r.sn = cs[half + lane];
  }
}

__device__ __forceinline__ void tokenStore(const WriteParams &p, int64_t t,
                                           int lane, const TokenRegs &r) {
  const int es = p.cacheType == int(DType::F32) ? 4 : 2;
  const int lc = p.latent * es / 16, rc = p.doRope ? 0 : p.rope * es / 16;
  const bool write = r.slot >= 0 && r.slot < p.numSlots &&
                     !(p.wp && p.wp[r.slot / p.blockSize]);
  uint8_t *row = slotRow(p, write ? r.slot : 0);
  if (write) {
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      const int ch = lane + 32 * k;
      if (ch < lc + rc)
        reinterpret_cast<uint4 *>(row)[ch] = r.v[k];
    }
  }
  const int half = p.rope / 2;
  if (p.doRope && lane < half) {
    const int64_t a = p.style == 0 ? 2 * lane : lane;
    const int64_t b = p.style == 0 ? 2 * lane + 1 : lane + half;
    const float r0 = __fsub_rn(__fmul_rn(r.x0, r.c), __fmul_rn(r.x1, r.sn));
    const float r1 = __fadd_rn(__fmul_rn(r.x1, r.c), __fmul_rn(r.x0, r.sn));
    uint8_t *kp = p.kPe + t * p.kpStride * es;
    storeF(kp, p.kpType, a, r0);
    storeF(kp, p.kpType, b, r1);
    if (p.kOut) {
      uint8_t *ko = p.kOut + t * p.kOutStride * es;
      storeF(ko, p.kpType, a, r0);
      storeF(ko, p.kpType, b, r1);
    }
    if (write) {
      uint8_t *rr = row + int64_t(p.latent) * es;
      storeF(rr, p.kpType, a, r0);
      storeF(rr, p.kpType, b, r1);
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    ropeCacheWriteKernel(WriteParams p) {
  pdlPrologue();
  const int lane = threadIdx.x & 31;
  // Two roles: blocks [0, tokenBlocks) write tokens (a warp per token), the
  // others rotate q_pe. Neither waits for the other; both issue their
  // loads before the validation vote.
  const bool qRole = blockIdx.x >= p.tokenBlocks;
  const int64_t warp = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int64_t nWarps = p.tokenBlocks * kWarps;
  const int64_t qFirst = (int64_t(blockIdx.x) - p.tokenBlocks) * blockDim.x + threadIdx.x;
  const int64_t qStep = (int64_t(gridDim.x) - p.tokenBlocks) * blockDim.x;
  const bool doQ = p.q && p.doRope;
  const bool fast = (p.vec & 1) && p.kPe;
  if (!p.prevalidated) {
    // Small call: at most one token per warp. Load first, then vote.
    TokenRegs r;
    r.slot = -1;
    QRegs qr;
    const bool qVec = qRole && doQ && (p.vec & 2) && qFirst < qItems(p);
    if (!qRole && fast && warp < p.T)
      tokenLoad(p, warp, lane, r);
    if (qVec)
      qLoad(p, qFirst, qr);
    if (__syncthreads_or(scanBad(p, threadIdx.x, blockDim.x, blockIdx.x == 0)))
      return;
    if (!qRole) {
      if (p.kPe && warp < p.T) {
        if (fast)
          tokenStore(p, warp, lane, r);
        else
          tokenGeneric(p, warp, lane);
      }
      return;
    }
    if (!doQ)
      return;
    if (p.vec & 2) {
      if (qVec)
        qStore(p, qr);
      for (int64_t it = qFirst + qStep; it < qItems(p); it += qStep) {
        qLoad(p, it, qr);
        qStore(p, qr);
      }
    } else {
      rotateQGeneric(p, qFirst, qStep);
    }
    return;
  }
  if (*reinterpret_cast<volatile int *>(&p.rec->callFailed))
    return;
  if (!qRole) {
    if (p.kPe && fast) {
      // Two tokens per step: six 16-byte loads in flight per lane.
      for (int64_t t = warp; t < p.T; t += 2 * nWarps) {
        TokenRegs r0, r1;
        const bool second = t + nWarps < p.T;
        tokenLoad(p, t, lane, r0);
        if (second)
          tokenLoad(p, t + nWarps, lane, r1);
        tokenStore(p, t, lane, r0);
        if (second)
          tokenStore(p, t + nWarps, lane, r1);
      }
    } else if (p.kPe) {
      for (int64_t t = warp; t < p.T; t += nWarps)
        tokenGeneric(p, t, lane);
    }
    return;
  }
  if (!doQ)
    return;
  if (p.vec & 2) {
    // Two items per step, both loaded before either is stored.
    const int64_t items = qItems(p);
    for (int64_t it = qFirst; it < items; it += 2 * qStep) {
      QRegs a, b;
      const bool second = it + qStep < items;
      qLoad(p, it, a);
      if (second)
        qLoad(p, it + qStep, b);
      qStore(p, a);
      if (second)
        qStore(p, b);
    }
  } else {
    rotateQGeneric(p, qFirst, qStep);
  }
}

/// cpu::checkCacheWriteShapes admits what the CPU kernels read; of that, the
/// CUDA kernels lack only f64 inputs for an fp8 cache.
Status checkCudaInputType(const TensorRef &t, const char *name,
                          const KVCacheDesc &desc) {
  if (desc.layout != CacheLayout::Plain && t.dtype == DType::F64) {
    return invalidArgument(std::string(name) +
                           " must be f32, f16, bf16 or the cache's fp8 "
                           "encoding for an fp8 cache on CUDA, got " +
                           t.describe());
  }
  return Status::success();
}

/// Host-side part of validateCacheWrite: everything but the slot values,
/// which live on the device and are checked by the kernels.
Status checkCacheWrite(const TensorRef &kvC, const TensorRef &kPe,
                       const TensorRef &slotMapping, const KVCacheRef &cache) {
  MLART_RETURN_IF_ERROR(
      cpu::checkCacheWriteShapes(kvC, kPe, slotMapping, cache));
  MLART_RETURN_IF_ERROR(checkCudaInputType(kvC, "kv_c", cache.desc));
  MLART_RETURN_IF_ERROR(checkCudaInputType(kPe, "k_pe", cache.desc));
  if (kvC.sizes[0] > INT_MAX)
    return invalidArgument("too many tokens for one call");
  if (cache.writeProtect && !isDeviceAccessible(cache.writeProtect))
    return invalidArgument("checked mode on CUDA needs writeProtect flags in "
                           "device-accessible memory");
  return Status::success();
}

Status checkRopeTables(const TensorRef &positions, const TensorRef &cosSin,
                       int64_t numTokens, int64_t ropeDim) {
  using namespace mlart::cpu;
  MLART_RETURN_IF_ERROR(checkIndexTensor(positions, "positions"));
  MLART_RETURN_IF_ERROR(checkTensor(cosSin, "cos_sin", 2));
  if (cosSin.dtype != DType::F32)
    return invalidArgument("cos_sin must be f32, got " + cosSin.describe());
  if (cosSin.sizes[1] != ropeDim)
    return invalidArgument("cos_sin must have " + std::to_string(ropeDim) +
                           " columns (cos then sin), got " + cosSin.describe());
  if (positions.sizes[0] != numTokens)
    return invalidArgument("positions has " +
                           std::to_string(positions.sizes[0]) +
                           " entries for " + std::to_string(numTokens) +
                           " tokens");
  return Status::success();
}

bool aligned16(const void *p, int64_t strideBytes) {
  return (reinterpret_cast<uintptr_t>(p) % 16 == 0) && strideBytes % 16 == 0;
}

void fillCache(WriteParams &p, const TensorRef &kvC, const TensorRef &kPe,
               const TensorRef &slots, const KVCacheRef &cache) {
  const KVCacheDesc &d = cache.desc;
  p.kvC = static_cast<const uint8_t *>(kvC.data);
  p.kvStride = kvC.strides[0];
  p.kvType = int(kvC.dtype);
  p.slots = slots.data;
  p.slot64 = slots.dtype == DType::I64;
  p.slotStride = slots.strides[0];
  p.N = slots.sizes[0];
  p.cache = static_cast<uint8_t *>(cache.data);
  p.rowBytes = d.rowBytes();
  p.numSlots = d.numSlots();
  p.blockSize = d.blockSize;
  p.blockStride = cache.blockBytes();
  p.layout = int(d.layout);
  p.cacheType = int(d.dtype);
  p.scale = cache.scale;
  p.scalePtr = cache.scaleTensor;
  p.latent = int(d.latentRank);
  p.rope = int(d.ropeDim);
  p.wp = cache.writeProtect;
  const int64_t es = int64_t(dtypeSize(kvC.dtype));
  const int64_t chunks = d.rowValues() * es / 16;
  p.vec = (d.layout == CacheLayout::Plain &&
           aligned16(kvC.data, kvC.strides[0] * es) &&
           aligned16(kPe.data, kPe.strides[0] * es) &&
           aligned16(cache.data, p.rowBytes) && p.blockStride % 16 == 0 &&
           (d.latentRank * es) % 16 == 0 && (d.ropeDim * es) % 16 == 0 &&
           d.ropeDim <= 64 && chunks <= 96)
              ? 1
              : 0;
}

/// Sets p.prevalidated and, for a large call, runs the separate validation
/// (shared with the compiler-generated kernels, prevalidateCacheWrite). It
/// publishes callFailed itself (see validateKernel): no memset first.
Status prevalidate(CudaContext &ctx, WriteParams &p, cudaStream_t stream) {
  p.rec = ctx.deviceRecord;
  const int64_t checks = std::max(p.cache ? p.N : 0, p.doRope ? p.T : 0);
  p.prevalidated = checks > kInlineValidationLimit;
  if (!p.prevalidated)
    return Status::success();
  return launchKernel("validateKernel", validateKernel,
                      gridFor(checks, kThreads, int64_t(ctx.smCount) * 8),
                      kThreads, 0, stream, p);
}

/// The general kernel: a warp per token (two per step when pre-validated),
/// q_pe rotation in its own blocks.
Status launchWriteKernel(CudaContext &ctx, WriteParams &p, cudaStream_t stream) {
  const int64_t cap = int64_t(ctx.smCount) * 64;
  int64_t tokenBlocks = p.kPe ? (p.T + kWarps - 1) / kWarps : 0;
  // Large calls: two tokens per warp (see the kernel).
  if (p.prevalidated)
    tokenBlocks = std::min(cap, (tokenBlocks + 1) / 2);
  const int64_t items = p.q ? ((p.vec & 2) ? p.T * p.Hq * (p.style == 0 ? 8 : 4)
                                          : p.T * p.Hq * (p.rope / 2))
                            : 0;
  int64_t qBlocks = (items + kThreads - 1) / kThreads;
  if (p.prevalidated && (p.vec & 2))
    qBlocks = (qBlocks + 1) / 2; // two items per thread and step
  qBlocks = std::min(cap, qBlocks);
  p.tokenBlocks = tokenBlocks;
  const int64_t blocks = std::max<int64_t>(1, tokenBlocks + qBlocks);
  return launchKernel("ropeCacheWriteKernel", ropeCacheWriteKernel,
                      unsigned(blocks), kThreads, 0, stream, p);
}

/// The common large update (pre-validated, plain bf16/f16 1152-byte rows
/// on the 16-byte path, a dense cache, no rope, no q, no checked mode) goes
/// to the streaming copy kernel when MLART_UPDATE_KERNEL=1
/// (CacheCopyKernel.cu).
bool takesCacheCopy(const WriteParams &p) {
  return p.prevalidated && (p.vec & 1) && p.kPe && p.cache && !p.doRope &&
         !p.q && !p.kOut && !p.wp && p.layout == int(CacheLayout::Plain) &&
         (p.cacheType == int(DType::BF16) || p.cacheType == int(DType::F16)) &&
         p.rowBytes == int64_t(kCacheCopyChunks) * 16 &&
         p.blockStride == p.blockSize * p.rowBytes && // slot * row addressing
         (p.latent + p.rope) * 2 / 16 == kCacheCopyChunks &&
         p.numSlots <= INT_MAX; // checked row indices are int
}

Status launchCopyKernel(CudaContext &ctx, const WriteParams &p,
                        const CacheCopyConfig &cfg, cudaStream_t stream) {
  CacheCopyParams c;
  c.kv = p.kvC;
  c.kvStride = p.kvStride * 2; // elements -> bytes (2-byte types only)
  c.kp = p.kPe;
  c.kpStride = p.kpStride * 2;
  c.slots = p.slots;
  c.slot64 = p.slot64;
  c.slotStride = p.slotStride;
  c.T = p.T;
  c.cache = p.cache;
  c.numSlots = p.numSlots;
  c.kvChunks = p.latent * 2 / 16;
  c.callFailed = &p.rec->callFailed;
  return launchCacheCopy(ctx, c, cfg, stream);
}

Status launch(CudaContext &ctx, WriteParams &p, cudaStream_t stream,
              const TensorRef *slots, const TensorRef *positions,
              const KVCacheRef *cache) {
  if (p.q && !p.qIn) { // in place
    p.qIn = p.q;
    p.qInS0 = p.qS0;
    p.qInS1 = p.qS1;
  }
  if (p.q && p.qType == int(DType::BF16) && p.rope == 64 &&
      reinterpret_cast<uintptr_t>(p.q) % 16 == 0 && p.qS0 % 8 == 0 &&
      (p.qS1 % 8 == 0 || p.Hq == 1) &&
      reinterpret_cast<uintptr_t>(p.qIn) % 16 == 0 && p.qInS0 % 8 == 0 &&
      (p.qInS1 % 8 == 0 || p.Hq == 1))
    p.vec |= 2;
  if (p.cs && reinterpret_cast<uintptr_t>(p.cs) % 16 == 0 && p.csStride % 4 == 0)
    p.vec |= 4;
  std::unique_lock<std::mutex> lock(ctx.recordMutex, std::defer_lock);
  if (ctx.synchronousChecks) {
    lock.lock();
    MLART_RETURN_IF_ERROR(resetRecord(ctx, stream));
  }
  MLART_RETURN_IF_ERROR(prevalidate(ctx, p, stream));
  const CacheCopyConfig copy = cacheCopyConfig();
  if (copy.kernel != UpdateKernel::General && takesCacheCopy(p))
    MLART_RETURN_IF_ERROR(launchCopyKernel(ctx, p, copy, stream));
  else
    MLART_RETURN_IF_ERROR(launchWriteKernel(ctx, p, stream));
  if (!ctx.synchronousChecks)
    return Status::success();
  return readRecord(ctx, stream, slots, positions,
                    cache ? cache->desc.blockSize : 1,
                    cache ? cache->desc.numSlots() : 0,
                    cache ? cache->refusedWrites : nullptr);
}


} // namespace

StatusOr<bool> prevalidateCacheWrite(CudaContext &ctx, const TensorRef &slots,
                                     const KVCacheRef &cache,
                                     const TensorRef *positions,
                                     const TensorRef *cosSin,
                                     cudaStream_t stream) {
  WriteParams p;
  p.slots = slots.data;
  p.slot64 = slots.dtype == DType::I64;
  p.slotStride = slots.strides[0];
  p.N = slots.sizes[0];
  p.cache = static_cast<uint8_t *>(cache.data);
  p.numSlots = cache.desc.numSlots();
  p.blockSize = cache.desc.blockSize;
  p.wp = cache.writeProtect;
  if (positions && cosSin) {
    p.doRope = 1;
    p.pos = positions->data;
    p.pos64 = positions->dtype == DType::I64;
    p.posStride = positions->strides[0];
    p.T = positions->sizes[0];
    p.maxPos = cosSin->sizes[0];
  }
  MLART_RETURN_IF_ERROR(prevalidate(ctx, p, stream));
  return bool(p.prevalidated);
}

Status cacheUpdate(CudaContext &ctx, const CacheUpdateArgs &a,
                   cudaStream_t stream) {
  MLART_RETURN_IF_ERROR(checkCacheWrite(a.kvC, a.kPe, a.slotMapping, a.cache));
  WriteParams p;
  fillCache(p, a.kvC, a.kPe, a.slotMapping, a.cache);
  p.kPe = static_cast<uint8_t *>(a.kPe.data);
  p.kpStride = a.kPe.strides[0];
  p.kpType = int(a.kPe.dtype);
  p.T = a.kvC.sizes[0];
  if (p.N == 0)
    return Status::success();
  p.T = std::min(p.T, p.N); // padded tokens past the mapping write nothing
  return launch(ctx, p, stream, &a.slotMapping, nullptr, &a.cache);
}

Status rope(CudaContext &ctx, const RopeArgs &a, cudaStream_t stream) {
  using namespace mlart::cpu;
  MLART_RETURN_IF_ERROR(checkRopeStyle(a.style));
  MLART_RETURN_IF_ERROR(checkRopeOperand(a.x, "x", true, true));
  const int64_t T = a.x.sizes[0], rope = a.x.sizes[a.x.rank - 1];
  MLART_RETURN_IF_ERROR(checkRopeTables(a.positions, a.cosSin, T, rope));
  if (T == 0)
    return Status::success();
  WriteParams p;
  p.T = T;
  p.rope = int(rope);
  p.doRope = 1;
  p.pos = a.positions.data;
  p.pos64 = a.positions.dtype == DType::I64;
  p.posStride = a.positions.strides[0];
  p.cs = static_cast<const float *>(a.cosSin.data);
  p.csStride = a.cosSin.strides[0];
  p.maxPos = a.cosSin.sizes[0];
  p.style = int(a.style);
  p.q = static_cast<uint8_t *>(a.x.data);
  p.qType = int(a.x.dtype);
  p.qS0 = a.x.strides[0];
  p.qS1 = a.x.rank == 3 ? a.x.strides[1] : 0;
  p.Hq = a.x.rank == 3 ? int(a.x.sizes[1]) : 1;
  if (p.Hq == 0)
    return Status::success();
  return launch(ctx, p, stream, nullptr, &a.positions, nullptr);
}

Status ropeCacheUpdate(CudaContext &ctx, const RopeCacheUpdateArgs &a,
                       cudaStream_t stream) {
  using namespace mlart::cpu;
  MLART_RETURN_IF_ERROR(checkRopeStyle(a.style));
  MLART_RETURN_IF_ERROR(checkRopeOperand(a.kPe, "k_pe", true, false));
  MLART_RETURN_IF_ERROR(
      checkRopeTables(a.positions, a.cosSin, a.kPe.sizes[0], a.kPe.sizes[1]));
  const int64_t ropeDim = a.kPe.sizes[1];
  if (a.qPe.present()) {
    MLART_RETURN_IF_ERROR(checkRopeOperand(a.qPe, "q_pe", false, true));
    if (a.qPe.sizes[0] != a.kPe.sizes[0] || a.qPe.sizes[2] != ropeDim)
      return invalidArgument("q_pe " + a.qPe.describe() +
                             " does not match k_pe " + a.kPe.describe());
  }
  MLART_RETURN_IF_ERROR(checkRopeSource(a.qPe, a.qPeIn));
  if (a.kPeOut.present()) {
    MLART_RETURN_IF_ERROR(checkRopeOperand(a.kPeOut, "k_pe_out", true, false));
    if (a.kPeOut.sizes[0] != a.kPe.sizes[0] || a.kPeOut.sizes[1] != ropeDim ||
        a.kPeOut.dtype != a.kPe.dtype)
      return invalidArgument("k_pe_out " + a.kPeOut.describe() +
                             " must match k_pe " + a.kPe.describe());
  }
  MLART_RETURN_IF_ERROR(checkCacheWrite(a.kvC, a.kPe, a.slotMapping, a.cache));
  MLART_RETURN_IF_ERROR(cpu::checkLatentNorm(
      a.latentNormWeight, a.latentNormEpsilon, a.kvC, a.cache));
  WriteParams p;
  fillCache(p, a.kvC, a.kPe, a.slotMapping, a.cache);
  p.kPe = static_cast<uint8_t *>(a.kPe.data);
  p.kpStride = a.kPe.strides[0];
  p.kpType = int(a.kPe.dtype);
  p.T = a.kvC.sizes[0];
  p.doRope = 1;
  if (a.latentNormWeight.present()) {
    // The norm needs the whole row before any value is stored: the
    // per-token generic path (a warp per token), not the 16-byte copies.
    p.normW = static_cast<const uint8_t *>(a.latentNormWeight.data);
    p.normType = int(a.latentNormWeight.dtype);
    p.normEps = a.latentNormEpsilon;
    p.vec &= ~1;
  }
  p.pos = a.positions.data;
  p.pos64 = a.positions.dtype == DType::I64;
  p.posStride = a.positions.strides[0];
  p.cs = static_cast<const float *>(a.cosSin.data);
  p.csStride = a.cosSin.strides[0];
  p.maxPos = a.cosSin.sizes[0];
  p.style = int(a.style);
  if (a.qPe.present() && a.qPe.sizes[1] > 0) {
    p.q = static_cast<uint8_t *>(a.qPe.data);
    p.qType = int(a.qPe.dtype);
    p.qS0 = a.qPe.strides[0];
    p.qS1 = a.qPe.strides[1];
    p.Hq = int(a.qPe.sizes[1]);
    if (a.qPeIn.present()) {
      p.qIn = static_cast<const uint8_t *>(a.qPeIn.data);
      p.qInS0 = a.qPeIn.strides[0];
      p.qInS1 = a.qPeIn.strides[1];
    }
  }
  if (a.kPeOut.present()) {
    p.kOut = static_cast<uint8_t *>(a.kPeOut.data);
    p.kOutStride = a.kPeOut.strides[0];
  }
  if (p.T == 0)
    return Status::success();
  return launch(ctx, p, stream, &a.slotMapping, &a.positions, &a.cache);
}

Status checkCacheUpdate(const CacheUpdateArgs &a) {
  return checkCacheWrite(a.kvC, a.kPe, a.slotMapping, a.cache);
}

} // namespace mlart::cuda
