//===- CacheWrite.h - Validation and row encoding of cache writes ---------===//
//
// Shared by cacheUpdate and ropeCacheUpdate so that both accept exactly the
// same inputs, refuse the same slots and encode rows bit-identically.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CPU_CACHEWRITE_H
#define MLART_CPU_CACHEWRITE_H

#include "mlart/Kernels.h"

namespace mlart::cpu {

/// Checks the cache, kvC [T, latent], kPe [T, rope] and slotMapping [N <= T]
/// without reading any slot value: what every device can check on the host.
Status checkCacheWriteShapes(const TensorRef &kvC, const TensorRef &kPe,
                             const TensorRef &slotMapping,
                             const KVCacheRef &cache);

/// Checks the cache, kvC [T, latent], kPe [T, rope], slotMapping [N <= T],
/// every slot (< numSlots) and, in checked mode, that no slot lands in a
/// write-protected block (counting refused rows). Returns T in `numTokens`.
Status validateCacheWrite(const TensorRef &kvC, const TensorRef &kPe,
                          const TensorRef &slotMapping,
                          const KVCacheRef &cache, int64_t &numTokens);

/// Encodes concat(kvC[t], kPe[t]) into the cache row `slot` (validated).
void writeCacheRow(const KVCacheRef &cache, int64_t slot, const TensorRef &kvC,
                   const TensorRef &kPe, int64_t t);

/// Encodes concat(latent, rope) (contiguous rows of the given dtypes) into
/// the cache row `slot` (validated).
void writeCacheRow(const KVCacheRef &cache, int64_t slot, const uint8_t *latent,
                   DType latentType, const uint8_t *rope, DType ropeType);

/// Checks the optional latent norm of a fused update (weight [latent] of a
/// float type, a positive finite epsilon, a float kvC).
Status checkLatentNorm(const TensorRef &weight, float epsilon,
                       const TensorRef &kvC, const KVCacheRef &cache);

} // namespace mlart::cpu

#endif // MLART_CPU_CACHEWRITE_H
