//===- KVCache.h - One layer's paged KV cache: layout plus device memory --===//
//
// KVCache owns the bytes of a [num_blocks, block_size, row] cache on a device,
// or wraps memory its caller owns (an engine's cache tensor, possibly with a
// strided block dimension), and produces the non-owning KVCacheRef the
// kernels take. Checked mode is
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
  /// Wraps `data`, memory of `device` the caller owns and keeps alive, as a
  /// cache with blocks `blockStride` bytes apart (0: dense). Nothing is
  /// written; the kernels touch only the rows of the slots they are given.
  static StatusOr<KVCache> wrap(Device &device, const KVCacheDesc &desc,
                                void *data, int64_t blockStride = 0,
                                float scale = 1.0f);

  KVCache(KVCache &&) = default;
  KVCache &operator=(KVCache &&) = default;

  const KVCacheDesc &desc() const { return desc_; }
  float scale() const { return scale_; }
  /// Makes the kernels read the per-tensor scale from `scale`, an f32 in
  /// this device's memory that the caller keeps alive (KVCacheRef::
  /// scaleTensor); null returns to scale(). Executors take it at bindCache.
  void setScaleTensor(const float *scale) { scaleTensor_ = scale; }
  const float *scaleTensor() const { return scaleTensor_; }
  Device &device() const { return *device_; }
  /// Device address of block 0, slot 0.
  void *data() const { return data_; }
  /// Bytes from one block to the next (dense: blockSize * rowBytes).
  int64_t blockStride() const { return ref().blockBytes(); }
  /// Bytes of the rows (desc().totalBytes()), gaps between blocks excluded.
  size_t sizeBytes() const { return size_t(desc_.totalBytes()); }
  /// True when the memory is the caller's (wrap).
  bool isWrapped() const { return buffer_.empty(); }

  /// The view kernels take; no write protection.
  KVCacheRef ref() const;

  /// Raw byte access for tests, checkpoints and debugging. Offsets count
  /// the rows as if dense ([block, slot, byte], sizeBytes() in all); a
  /// strided view's gaps are never touched.
  Status writeBytes(size_t offset, const void *src, size_t bytes,
                    StreamHandle stream = nullptr);
  Status readBytes(size_t offset, void *dst, size_t bytes,
                   StreamHandle stream = nullptr) const;
  /// Sets every byte to `value` (tests poison caches with a sentinel).
  Status fill(uint8_t value, StreamHandle stream = nullptr);

private:
  KVCache(Device &device, const KVCacheDesc &desc, float scale, Buffer buffer,
          void *data, int64_t blockStride)
      : device_(&device), desc_(desc), scale_(scale),
        buffer_(std::move(buffer)), data_(data), blockStride_(blockStride) {}

  /// Calls `copy(address, start, count)` for each run of the byte range
  /// [offset, offset + bytes) of the dense numbering that is contiguous in
  /// the view (one per block touched); `start` is relative to `offset`.
  template <typename F>
  Status forEachRun(size_t offset, size_t bytes, const char *what,
                    F &&copy) const;

  Device *device_;
  KVCacheDesc desc_;
  float scale_;
  Buffer buffer_; ///< empty when wrapped
  void *data_;
  int64_t blockStride_; ///< 0: dense
  const float *scaleTensor_ = nullptr;
};

} // namespace mlart

#endif // MLART_KVCACHE_H
