//===- KVCache.h - One layer's paged KV cache: layout plus device memory --===//
//
// KVCache owns the bytes of a [num_blocks, block_size, row] cache on a device
// and produces the non-owning KVCacheRef the kernels take. Checked mode is
// not a property of the cache: the BlockManager knows which blocks are
// protected and adds its flags to the ref (BlockManager::guard).
//
//===----------------------------------------------------------------------===//
#ifndef MLART_KVCACHE_H
#define MLART_KVCACHE_H

#include "mlart/Device.h"
#include "mlart/KVCacheLayout.h"
#include "mlart/Kernels.h"
#include "mlart/StatusOr.h"

namespace mlart {

/// Owning paged cache of one layer.
class KVCache {
public:
  /// Allocates a cache described by `desc` on `device`; `scale` is the
  /// per-tensor scale of an Fp8PerTensor cache (must be finite and > 0; it is
  /// ignored, but still checked, for other layouts). The bytes are zeroed.
  static StatusOr<KVCache> create(Device &device, const KVCacheDesc &desc,
                                  float scale = 1.0f);

  KVCache(KVCache &&) = default;
  KVCache &operator=(KVCache &&) = default;

  const KVCacheDesc &desc() const { return desc_; }
  float scale() const { return scale_; }
  Device &device() const { return *device_; }
  /// Device address of block 0, slot 0.
  void *data() const { return buffer_.data(); }
  /// Total size in bytes (desc().totalBytes()).
  size_t sizeBytes() const { return buffer_.size(); }

  /// The view kernels take; no write protection.
  KVCacheRef ref() const;

  /// Raw byte access for tests, checkpoints and debugging.
  Status writeBytes(size_t offset, const void *src, size_t bytes,
                    StreamHandle stream = nullptr);
  Status readBytes(size_t offset, void *dst, size_t bytes,
                   StreamHandle stream = nullptr) const;
  /// Sets every byte to `value` (tests poison caches with a sentinel).
  Status fill(uint8_t value, StreamHandle stream = nullptr);

private:
  KVCache(Device &device, const KVCacheDesc &desc, float scale, Buffer buffer)
      : device_(&device), desc_(desc), scale_(scale),
        buffer_(std::move(buffer)) {}

  Device *device_;
  KVCacheDesc desc_;
  float scale_;
  Buffer buffer_;
};

} // namespace mlart

#endif // MLART_KVCACHE_H
