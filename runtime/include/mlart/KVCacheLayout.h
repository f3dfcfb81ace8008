//===- KVCacheLayout.h - Byte layout of one paged MLA KV-cache ------------===//
//
// A layer's cache is [num_blocks, block_size, row] where a row holds one
// token: the latent kv_c (latent_rank values) followed by the rotary k_pe
// (rope_dim values). The compiler's !mla.kv_cache type records the same facts.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_KVCACHELAYOUT_H
#define MLART_KVCACHELAYOUT_H

#include "mlart/DType.h"
#include "mlart/Status.h"

#include <cstdint>

namespace mlart {

/// How a row is encoded.
enum class CacheLayout : int {
  /// latent + rope values of `dtype` (bf16, f16 or f32).
  Plain = 0,
  /// latent + rope fp8 values (e4m3fn or e5m2), one per-tensor scale
  /// (value = q * scale).
  Fp8PerTensor = 1,
  /// DeepSeek's fp8_ds_mla: latent fp8 values, latent/128 f32 tile scales,
  /// then rope bf16 values (656 bytes for 512 + 64).
  Fp8DsMla = 2,
};

/// Stable name: "plain", "fp8_per_tensor", "fp8_ds_mla".
const char *cacheLayoutName(CacheLayout l);

/// Values per fp8_ds_mla scale tile.
constexpr int64_t kDsMlaTile = 128;

/// Static description of one layer's paged cache.
struct KVCacheDesc {
  int64_t numBlocks = 0;
  int64_t blockSize = 0;
  int64_t latentRank = 512;
  int64_t ropeDim = 64;
  /// Element type of Plain rows; F8E4M3FN or F8E5M2 for Fp8PerTensor,
  /// F8E4M3FN for Fp8DsMla.
  DType dtype = DType::BF16;
  CacheLayout layout = CacheLayout::Plain;

  int64_t rowValues() const { return latentRank + ropeDim; }
  int64_t numSlots() const { return numBlocks * blockSize; }
  /// Bytes of one token row.
  int64_t rowBytes() const;
  /// Bytes of the whole cache.
  int64_t totalBytes() const { return numSlots() * rowBytes(); }
  /// Checks that the fields describe a consistent layout.
  Status validate() const;
};

/// Decodes one cache row into `out[rowValues()]` floats. `scale` is the
/// per-tensor scale for Fp8PerTensor and ignored otherwise.
void decodeCacheRow(const KVCacheDesc &desc, const uint8_t *row, float scale,
                    float *out);

} // namespace mlart

#endif // MLART_KVCACHELAYOUT_H
