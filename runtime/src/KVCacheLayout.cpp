//===- KVCacheLayout.cpp - Row sizes, validation and row decoding ---------===//
#include "mlart/KVCacheLayout.h"

#include <cstring>
#include <string>

namespace mlart {

const char *cacheLayoutName(CacheLayout l) {
  switch (l) {
  case CacheLayout::Plain:
    return "plain";
  case CacheLayout::Fp8PerTensor:
    return "fp8_per_tensor";
  case CacheLayout::Fp8DsMla:
    return "fp8_ds_mla";
  }
  return "unknown";
}

int64_t KVCacheDesc::rowBytes() const {
  switch (layout) {
  case CacheLayout::Plain:
    return rowValues() * int64_t(dtypeSize(dtype));
  case CacheLayout::Fp8PerTensor:
    return rowValues();
  case CacheLayout::Fp8DsMla:
    return latentRank + 4 * (latentRank / kDsMlaTile) + 2 * ropeDim;
  }
  return 0;
}

Status KVCacheDesc::validate() const {
  if (numBlocks <= 0 || blockSize <= 0)
    return invalidArgument("cache needs num_blocks > 0 and block_size > 0, got " +
                           std::to_string(numBlocks) + " and " +
                           std::to_string(blockSize));
  if (latentRank <= 0 || ropeDim <= 0 || ropeDim % 2 != 0)
    return invalidArgument("cache needs latent_rank > 0 and an even rope_dim > "
                           "0, got " +
                           std::to_string(latentRank) + " and " +
                           std::to_string(ropeDim));
  switch (layout) {
  case CacheLayout::Plain:
    if (dtype != DType::BF16 && dtype != DType::F16 && dtype != DType::F32)
      return invalidArgument(std::string("plain cache rows must be bf16, f16 "
                                         "or f32, got ") +
                             dtypeName(dtype));
    break;
  case CacheLayout::Fp8PerTensor:
    if (!isFp8(dtype))
      return invalidArgument(std::string("fp8_per_tensor cache rows must be "
                                         "f8e4m3fn or f8e5m2, got ") +
                             dtypeName(dtype));
    break;
  case CacheLayout::Fp8DsMla:
    if (dtype != DType::F8E4M3FN)
      return invalidArgument("fp8_ds_mla cache must have dtype f8e4m3fn");
    if (latentRank % kDsMlaTile != 0)
      return invalidArgument("fp8_ds_mla needs latent_rank divisible by 128, "
                             "got " +
                             std::to_string(latentRank));
    break;
  }
  return Status::success();
}

void decodeCacheRow(const KVCacheDesc &desc, const uint8_t *row, float scale,
                    float *out) {
  const int64_t n = desc.rowValues();
  switch (desc.layout) {
  case CacheLayout::Plain:
    for (int64_t i = 0; i < n; ++i)
      out[i] = loadAsFloat(row, desc.dtype, size_t(i));
    return;
  case CacheLayout::Fp8PerTensor:
    for (int64_t i = 0; i < n; ++i)
      out[i] = loadAsFloat(row, desc.dtype, size_t(i)) * scale;
    return;
  case CacheLayout::Fp8DsMla: {
    const uint8_t *scales = row + desc.latentRank;
    const uint8_t *rope = scales + 4 * (desc.latentRank / kDsMlaTile);
    for (int64_t i = 0; i < desc.latentRank; ++i) {
      float tileScale;
      std::memcpy(&tileScale, scales + 4 * (i / kDsMlaTile), 4);
      out[i] = fp8e4m3ToFloat(row[i]) * tileScale;
    }
    for (int64_t i = 0; i < desc.ropeDim; ++i) {
      uint16_t bits;
      std::memcpy(&bits, rope + 2 * i, 2);
      out[desc.latentRank + i] = bf16ToFloat(bits);
    }
    return;
  }
  }
}

} // namespace mlart
