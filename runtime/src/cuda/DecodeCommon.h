//===- DecodeCommon.h - Types shared by the decode kernels ----------------===//
//
// The paged-cache view and the launch parameters of the tensor-core decode
// paths: DecodeKernels.cu (16-head groups, mma.sync, the split combine and
// the dispatch) and DecodeManyHeads.cu (64-head groups, wgmma).
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_DECODECOMMON_H
#define MLART_CUDA_DECODECOMMON_H

#include "cuda/CudaCommon.h"

namespace mlart::cuda {

struct CacheView {
  const uint8_t *data;
  int64_t rowBytes, numBlocks;
  int blockSize, layout, dtype, latent, rope;
  float scale;
  const int32_t *table;
  int64_t tableS0, tableS1, maxBlocks;
};

struct DecodeParams {
  CacheView c;
  const uint16_t *q;
  int64_t qS0, qS1;
  void *out;
  int outType;
  int64_t oS0, oS1;
  float *lse;
  int64_t lS0, lS1;
  const int32_t *seqLens;
  int64_t seqStride;
  float scaleLog2;
  int heads, splits, bsLog2;
  float *partOut; // [B, S, H, 512]
  float *partLse; // [B, S, H]
  DeviceErrorRecord *rec;
};

/// Heads per CTA of the many-heads path (DecodeManyHeads.cu).
constexpr int kManyHeads = 64;
/// Fewest (sequence, 64-head group) pairs for which the many-heads path is
/// chosen: below it the 16-head kernel spreads over more SMs. Tests force
/// the many-heads path with MLART_DECODE_MANY=force.
constexpr int64_t kManyMinGroups = 8;

/// Launches the many-heads decode kernel (bf16, latent 512 + rope 64, H a
/// multiple of 64, power-of-two block size) over a (H/64, splits, B) grid.
/// With p.splits > 1 it writes partials that the caller combines.
Status launchDecodeManyHeads(const DecodeParams &p, int64_t batch,
                             cudaStream_t stream);

/// Split count of the many-heads path (one CTA per SM).
int decodeSplitHeuristicMany(int smCount, int64_t batch, int64_t headGroups,
                             int64_t maxLen);

} // namespace mlart::cuda

#endif
