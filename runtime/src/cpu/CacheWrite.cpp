//===- CacheWrite.cpp - Validation and row encoding of cache writes -------===//
#include "cpu/CacheWrite.h"

#include "cpu/IndexAccess.h"
#include "cpu/TensorAccess.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>

namespace mlart::cpu {

namespace {
Status checkInputType(const TensorRef &t, const char *name,
                      const KVCacheDesc &desc) {
  if (desc.layout == CacheLayout::Plain) {
    // Plain rows are raw copies, so the bits must already be right.
    if (t.dtype != desc.dtype)
      return invalidArgument(std::string(name) + " must have the cache dtype " +
                             dtypeName(desc.dtype) + ", got " + t.describe());
  } else if (desc.layout == CacheLayout::Fp8PerTensor && isFp8(t.dtype)) {
    // Already quantised (an explicit quantize before the write): stored as
    // they are, so the encoding must be the cache's.
    if (t.dtype != desc.dtype)
      return invalidArgument(std::string(name) + " holds " +
                             dtypeName(t.dtype) + " values for a " +
                             dtypeName(desc.dtype) + " cache");
  } else if (!isActivationType(t.dtype) && t.dtype != DType::F64) {
    return invalidArgument(std::string(name) +
                           " must be a float type for an fp8 cache, got " +
                           t.describe());
  }
  return Status::success();
}
} // namespace

Status checkCacheWriteShapes(const TensorRef &kvC, const TensorRef &kPe,
                             const TensorRef &slotMapping,
                             const KVCacheRef &cache) {
  const KVCacheDesc &desc = cache.desc;
  MLART_RETURN_IF_ERROR(cache.validate());
  // A device scale (scaleTensor) is checked where it is read.
  if (desc.layout == CacheLayout::Fp8PerTensor && !cache.scaleTensor &&
      (!std::isfinite(cache.scale) || cache.scale <= 0.0f))
    return invalidArgument("fp8 cache scale must be finite and > 0, got " +
                           std::to_string(cache.scale));
  MLART_RETURN_IF_ERROR(checkTensor(kvC, "kv_c", 2));
  MLART_RETURN_IF_ERROR(checkTensor(kPe, "k_pe", 2));
  MLART_RETURN_IF_ERROR(checkIndexTensor(slotMapping, "slot_mapping"));
  if (kvC.sizes[1] != desc.latentRank)
    return invalidArgument("kv_c must have " + std::to_string(desc.latentRank) +
                           " columns (the cache latent rank), got " +
                           kvC.describe());
  if (kPe.sizes[1] != desc.ropeDim)
    return invalidArgument("k_pe must have " + std::to_string(desc.ropeDim) +
                           " columns (the cache rope dim), got " +
                           kPe.describe());
  if (kPe.sizes[0] != kvC.sizes[0])
    return invalidArgument("kv_c " + kvC.describe() + " and k_pe " +
                           kPe.describe() + " disagree on the token count");
  MLART_RETURN_IF_ERROR(checkInputType(kvC, "kv_c", desc));
  MLART_RETURN_IF_ERROR(checkInputType(kPe, "k_pe", desc));
  if (slotMapping.sizes[0] > kvC.sizes[0])
    return invalidArgument("slot_mapping has " +
                           std::to_string(slotMapping.sizes[0]) +
                           " entries for " + std::to_string(kvC.sizes[0]) +
                           " tokens");
  return Status::success();
}

Status validateCacheWrite(const TensorRef &kvC, const TensorRef &kPe,
                          const TensorRef &slotMapping,
                          const KVCacheRef &cache, int64_t &numTokens) {
  MLART_RETURN_IF_ERROR(checkCacheWriteShapes(kvC, kPe, slotMapping, cache));
  const KVCacheDesc &desc = cache.desc;
  numTokens = kvC.sizes[0];
  const int64_t n = slotMapping.sizes[0];

  const int64_t numSlots = desc.numSlots();
  int64_t refused = 0;
  int64_t firstRefused = -1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t slot = loadIndex(slotMapping, i);
    if (slot < 0)
      continue;
    if (slot >= numSlots)
      return outOfRange("slot_mapping[" + std::to_string(i) + "] = " +
                        std::to_string(slot) + " is outside the cache's " +
                        std::to_string(numSlots) + " slots");
    if (cache.writeProtect && cache.writeProtect[slot / desc.blockSize]) {
      if (refused++ == 0)
        firstRefused = i;
    }
  }
  if (refused) {
    if (cache.refusedWrites)
      __atomic_fetch_add(cache.refusedWrites, uint64_t(refused),
                         __ATOMIC_RELAXED);
    const int64_t slot = loadIndex(slotMapping, firstRefused);
    return permissionDenied(
        "checked mode refused " + std::to_string(refused) +
        " row write(s); first: slot_mapping[" + std::to_string(firstRefused) +
        "] = " + std::to_string(slot) + " is in write-protected block " +
        std::to_string(slot / desc.blockSize) +
        (slot / desc.blockSize == 0 ? " (the null block)"
                                    : " (a prefix-cached block)"));
  }
  return Status::success();
}

Status checkLatentNorm(const TensorRef &weight, float epsilon,
                       const TensorRef &kvC, const KVCacheRef &cache) {
  if (!weight.present()) {
    if (epsilon != 0.0f)
      return invalidArgument("a latent norm epsilon without a weight");
    return Status::success();
  }
  MLART_RETURN_IF_ERROR(checkFloatTensor(weight, "latent_norm_weight", 1));
  MLART_RETURN_IF_ERROR(
      checkDim(weight, "latent_norm_weight", 0, cache.desc.latentRank));
  if (!isActivationType(kvC.dtype))
    return invalidArgument("a normalised kv_c must be bf16, f16 or f32, got " +
                           kvC.describe());
  if (!std::isfinite(epsilon) || !(epsilon > 0.0f))
    return invalidArgument("latent norm epsilon must be positive and finite, "
                           "got " +
                           std::to_string(epsilon));
  return Status::success();
}

void writeCacheRow(const KVCacheRef &cache, int64_t slot, const TensorRef &kvC,
                   const TensorRef &kPe, int64_t t) {
  writeCacheRow(cache, slot, rowPtr(kvC, t), kvC.dtype, rowPtr(kPe, t),
                kPe.dtype);
}

void writeCacheRow(const KVCacheRef &cache, int64_t slot, const uint8_t *latent,
                   DType latentType, const uint8_t *rope, DType ropeType) {
  const KVCacheDesc &desc = cache.desc;
  uint8_t *row = static_cast<uint8_t *>(cache.data) + cache.slotOffset(slot);
  switch (desc.layout) {
  case CacheLayout::Plain: {
    const size_t es = dtypeSize(desc.dtype);
    std::memcpy(row, latent, size_t(desc.latentRank) * es);
    std::memcpy(row + desc.latentRank * es, rope, size_t(desc.ropeDim) * es);
    return;
  }
  case CacheLayout::Fp8PerTensor: {
    if (latentType == desc.dtype) { // already quantised (checkInputType)
      std::memcpy(row, latent, size_t(desc.latentRank));
      std::memcpy(row + desc.latentRank, rope, size_t(desc.ropeDim));
      return;
    }
    // Division, not multiplication by 1/scale, to match vLLM's rounding.
    for (int64_t i = 0; i < desc.latentRank; ++i)
      storeFromFloat(row, desc.dtype, size_t(i),
                     loadAsFloat(latent, latentType, size_t(i)) / cache.scale);
    for (int64_t i = 0; i < desc.ropeDim; ++i)
      storeFromFloat(row + desc.latentRank, desc.dtype, size_t(i),
                     loadAsFloat(rope, ropeType, size_t(i)) / cache.scale);
    return;
  }
  case CacheLayout::Fp8DsMla: {
    uint8_t *scales = row + desc.latentRank;
    uint8_t *ropeOut = scales + 4 * (desc.latentRank / kDsMlaTile);
    for (int64_t tile = 0; tile < desc.latentRank / kDsMlaTile; ++tile) {
      float amax = 0.0f;
      for (int64_t i = tile * kDsMlaTile; i < (tile + 1) * kDsMlaTile; ++i)
        amax = std::max(amax,
                        std::fabs(loadAsFloat(latent, latentType, size_t(i))));
      // FLT_MIN keeps an all-zero tile from dividing by zero (as vLLM does).
      const float tileScale = std::max(amax / kFp8E4M3Max, FLT_MIN);
      std::memcpy(scales + 4 * tile, &tileScale, 4);
      for (int64_t i = tile * kDsMlaTile; i < (tile + 1) * kDsMlaTile; ++i)
        row[i] = floatToFp8e4m3(loadAsFloat(latent, latentType, size_t(i)) /
                                tileScale);
    }
    for (int64_t i = 0; i < desc.ropeDim; ++i) {
      const uint16_t bits = floatToBf16(loadAsFloat(rope, ropeType, size_t(i)));
      std::memcpy(ropeOut + 2 * i, &bits, 2);
    }
    return;
  }
  }
}

} // namespace mlart::cpu
