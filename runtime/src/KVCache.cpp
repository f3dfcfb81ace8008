//===- KVCache.cpp - Allocation and raw access of an owned paged cache ----===//
#include "mlart/KVCache.h"

#include <cmath>
#include <string>

namespace mlart {

StatusOr<KVCache> KVCache::create(Device &device, const KVCacheDesc &desc,
                                  float scale) {
  MLART_RETURN_IF_ERROR(desc.validate());
  if (!std::isfinite(scale) || scale <= 0.0f)
    return invalidArgument("cache scale must be finite and > 0, got " +
                           std::to_string(scale));
  MLART_ASSIGN_OR_RETURN(Buffer buffer,
                         device.allocate(size_t(desc.totalBytes())));
  // Zeroed so that a freshly created cache decodes to zeros, never to
  // whatever the allocator left there.
  MLART_RETURN_IF_ERROR(device.memset(buffer.data(), 0, buffer.size()));
  return KVCache(device, desc, scale, std::move(buffer));
}

KVCacheRef KVCache::ref() const {
  KVCacheRef r;
  r.desc = desc_;
  r.data = buffer_.data();
  r.scale = scale_;
  return r;
}

Status KVCache::writeBytes(size_t offset, const void *src, size_t bytes,
                           StreamHandle stream) {
  return device_->writeBuffer(buffer_, offset, src, bytes, stream);
}

Status KVCache::readBytes(size_t offset, void *dst, size_t bytes,
                          StreamHandle stream) const {
  return device_->readBuffer(buffer_, offset, dst, bytes, stream);
}

Status KVCache::fill(uint8_t value, StreamHandle stream) {
  return device_->memset(buffer_.data(), value, buffer_.size(), stream);
}

} // namespace mlart
