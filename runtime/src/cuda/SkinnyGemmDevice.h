//===- SkinnyGemmDevice.h - Device code shared by the skinny GEMMs -------===//
//
// The two skinny GEMM kernels (SkinnyGemm.cu: cp.async + mma.sync, any
// layout; SkinnyGemmTma.cu: TMA + wgmma, linear's K-major weight) end the
// same way: each CTA holds the f32 partial tile of its K slice in shared
// memory, the `split` CTAs of a cluster sum it through distributed shared
// memory (each its share, in rank order, so the result is deterministic),
// add the addend and store. This header is that epilogue.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_SKINNYGEMMDEVICE_H
#define MLART_CUDA_SKINNYGEMMDEVICE_H

#include "cuda/CudaCommon.h"
#include "cuda/SkinnyGemmPlan.h"

#ifdef __CUDACC__
#include <cooperative_groups.h>
#endif

namespace mlart::cuda {

/// Where a skinny GEMM's rows go: out[b, r, n] at out + b oBatch + r oRow +
/// n oCol, plus addend[r, n] (linear only) when not null.
struct SkinnyOut {
  uint16_t *out;
  const uint16_t *addend;
  int64_t oRow, oBatch, oCol, aRow, aCol;
  int m, n;
  /// out (and the addend) take 8-byte stores (loads) of four columns.
  int vecOut;
};

#ifdef __CUDACC__
template <bool Bf16> __device__ __forceinline__ uint16_t skinnyToBits(float v) {
  if constexpr (Bf16)
    return floatToBf16Bits(v);
  else
    return floatToF16Bits(v);
}

template <bool Bf16>
__device__ __forceinline__ float skinnyFromBits(uint16_t b) {
  if constexpr (Bf16)
    return bf16BitsToFloat(b);
  else
    return f16BitsToFloat(b);
}

/// The cluster's sum of the [M x tileCols] f32 tiles at `part` (row stride
/// pStride floats) of its `split` CTAs, for batch entry b and columns from
/// n0: this CTA (cluster rank `rank`) sums and stores one share. Every
/// thread of every CTA of the cluster calls it after its own tile is
/// complete; it holds two cluster barriers (the first publishes the tiles,
/// the last keeps each CTA's shared memory alive until its readers are
/// done).
template <bool Bf16>
__device__ __forceinline__ void
skinnyClusterStore(const SkinnyOut &o, const float *part, int pStride,
                   int tileCols, int n0, int64_t b, int rank, int split) {
  namespace cg = cooperative_groups;
  if (split > 1) // every CTA's tile is complete and visible in the cluster
    asm volatile("fence.acq_rel.cluster;\n"
                 "barrier.cluster.arrive.relaxed.aligned;\n"
                 "barrier.cluster.wait.aligned;\n" ::: "memory");
  else
    __syncthreads();
  cg::cluster_group cluster = cg::this_cluster();
  const float *src[kSkinnyMaxSplit];
#pragma unroll
  for (int q = 0; q < kSkinnyMaxSplit; ++q)
    src[q] = q < split && split > 1
                 ? cluster.map_shared_rank(const_cast<float *>(part),
                                           unsigned(q))
                 : part;
  // Float4 units of the tile's first M rows; tileCols / 4 is a power of two.
  const int colShift = __ffs(tileCols / 4) - 1, colMask = tileCols / 4 - 1;
  const int units = o.m << colShift;
  const int share = (units + split - 1) / split;
  const int e1 = min(units, (rank + 1) * share);
  uint16_t *ob = o.out + b * o.oBatch;
  for (int e = rank * share + int(threadIdx.x); e < e1; e += int(blockDim.x)) {
    const int r = e >> colShift, col = (e & colMask) * 4;
    const int off = r * pStride + col;
    float4 v = *reinterpret_cast<const float4 *>(src[0] + off);
#pragma unroll
    for (int q = 1; q < kSkinnyMaxSplit; ++q)
      if (q < split) {
        const float4 t = *reinterpret_cast<const float4 *>(src[q] + off);
        v.x += t.x, v.y += t.y, v.z += t.z, v.w += t.w;
      }
    const int n = n0 + col;
    uint16_t *dst = ob + r * o.oRow + int64_t(n) * o.oCol;
    const uint16_t *ad =
        o.addend ? o.addend + r * o.aRow + int64_t(n) * o.aCol : nullptr;
    if (o.vecOut && n + 3 < o.n) { // four contiguous, 8-byte aligned
      if (ad) {
        const uint2 a2 = *reinterpret_cast<const uint2 *>(ad);
        v.x += skinnyFromBits<Bf16>(uint16_t(a2.x));
        v.y += skinnyFromBits<Bf16>(uint16_t(a2.x >> 16));
        v.z += skinnyFromBits<Bf16>(uint16_t(a2.y));
        v.w += skinnyFromBits<Bf16>(uint16_t(a2.y >> 16));
      }
      *reinterpret_cast<uint2 *>(dst) = make_uint2(
          uint32_t(skinnyToBits<Bf16>(v.x)) |
              uint32_t(skinnyToBits<Bf16>(v.y)) << 16,
          uint32_t(skinnyToBits<Bf16>(v.z)) |
              uint32_t(skinnyToBits<Bf16>(v.w)) << 16);
      continue;
    }
    const float y[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (n + j < o.n)
        dst[j * o.oCol] = skinnyToBits<Bf16>(
            y[j] + (ad ? skinnyFromBits<Bf16>(ad[j * o.aCol]) : 0.0f));
  }
  if (split > 1) // the remote loads above have returned: no fence needed
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n"
                 "barrier.cluster.wait.aligned;\n" ::: "memory");
}
#endif // __CUDACC__

} // namespace mlart::cuda

#endif // MLART_CUDA_SKINNYGEMMDEVICE_H
