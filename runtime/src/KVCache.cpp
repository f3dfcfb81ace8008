//===- KVCache.cpp - An owned or wrapped paged cache and its raw access ---===//
#include "mlart/KVCache.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace mlart {

namespace {
Status checkScale(float scale) {
  if (!std::isfinite(scale) || scale <= 0.0f)
    return invalidArgument("cache scale must be finite and > 0, got " +
                           std::to_string(scale));
  return Status::success();
}
} // namespace

StatusOr<KVCache> KVCache::create(Device &device, const KVCacheDesc &desc,
                                  float scale) {
  MLART_RETURN_IF_ERROR(desc.validate());
  MLART_RETURN_IF_ERROR(checkScale(scale));
  MLART_ASSIGN_OR_RETURN(Buffer buffer,
                         device.allocate(size_t(desc.totalBytes())));
  // Zeroed so that a freshly created cache decodes to zeros, never to
  // whatever the allocator left there.
  MLART_RETURN_IF_ERROR(device.memset(buffer.data(), 0, buffer.size()));
  void *data = buffer.data();
  return KVCache(device, desc, scale, std::move(buffer), data, 0);
}

StatusOr<KVCache> KVCache::wrap(Device &device, const KVCacheDesc &desc,
                                void *data, int64_t blockStride, float scale) {
  KVCacheRef view;
  view.desc = desc;
  view.data = data;
  view.blockStride = blockStride;
  MLART_RETURN_IF_ERROR(view.validate());
  MLART_RETURN_IF_ERROR(checkScale(scale));
  return KVCache(device, desc, scale, Buffer(), data, blockStride);
}

Status KVCacheRef::validate() const {
  MLART_RETURN_IF_ERROR(desc.validate());
  if (!data)
    return invalidArgument("cache has no memory");
  const int64_t dense = desc.blockSize * desc.rowBytes();
  if (blockStride != 0 && blockStride < dense)
    return invalidArgument("cache block stride must be 0 (dense) or at least "
                           "one block's " +
                           std::to_string(dense) + " bytes, got " +
                           std::to_string(blockStride));
  int64_t span = 0;
  if (__builtin_mul_overflow(desc.numBlocks - 1, blockBytes(), &span) ||
      __builtin_add_overflow(span, dense, &span))
    return invalidArgument("cache view of " + std::to_string(desc.numBlocks) +
                           " blocks " + std::to_string(blockBytes()) +
                           " bytes apart overflows the address space");
  return Status::success();
}

KVCacheRef KVCache::ref() const {
  KVCacheRef r;
  r.desc = desc_;
  r.data = data_;
  r.blockStride = blockStride_;
  r.scale = scale_;
  r.scaleTensor = scaleTensor_;
  return r;
}

template <typename F>
Status KVCache::forEachRun(size_t offset, size_t bytes, const char *what,
                           F &&copy) const {
  const size_t size = sizeBytes();
  if (offset > size || bytes > size - offset)
    return outOfRange(std::string(what) + ": bytes [" + std::to_string(offset) +
                      ", +" + std::to_string(bytes) + ") are outside the " +
                      std::to_string(size) + "-byte cache");
  const KVCacheRef view = ref();
  const size_t dense = size_t(desc_.blockSize * desc_.rowBytes());
  const size_t stride = size_t(view.blockBytes());
  for (size_t done = 0; done < bytes;) {
    const size_t at = offset + done, block = at / dense, inBlock = at % dense;
    const size_t count = std::min(bytes - done, dense - inBlock);
    MLART_RETURN_IF_ERROR(copy(
        static_cast<uint8_t *>(data_) + block * stride + inBlock, done, count));
    done += count;
  }
  return Status::success();
}

Status KVCache::writeBytes(size_t offset, const void *src, size_t bytes,
                           StreamHandle stream) {
  return forEachRun(offset, bytes, "cache write",
                    [&](uint8_t *at, size_t start, size_t count) {
                      return device_->copyHostToDevice(
                          at, static_cast<const uint8_t *>(src) + start, count,
                          stream);
                    });
}

Status KVCache::readBytes(size_t offset, void *dst, size_t bytes,
                          StreamHandle stream) const {
  return forEachRun(offset, bytes, "cache read",
                    [&](uint8_t *at, size_t start, size_t count) {
                      return device_->copyDeviceToHost(
                          static_cast<uint8_t *>(dst) + start, at, count,
                          stream);
                    });
}

Status KVCache::fill(uint8_t value, StreamHandle stream) {
  return forEachRun(0, sizeBytes(), "cache fill",
                    [&](uint8_t *at, size_t, size_t count) {
                      return device_->memset(at, value, count, stream);
                    });
}

} // namespace mlart
