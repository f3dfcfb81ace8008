//===- Device.cpp - Device-independent parts of Buffer, Stream and Device -===//
#include "mlart/Device.h"

#include <string>

namespace mlart {

Buffer &Buffer::operator=(Buffer &&other) noexcept {
  if (this != &other) {
    reset();
    device_ = other.device_;
    data_ = other.data_;
    size_ = other.size_;
    other.device_ = nullptr;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void Buffer::reset() noexcept {
  if (data_ && device_) {
    device_->freeRaw(data_, size_);
    device_->bytesAllocated_ -= size_;
  }
  device_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

Stream &Stream::operator=(Stream &&other) noexcept {
  if (this != &other) {
    reset();
    device_ = other.device_;
    handle_ = other.handle_;
    other.device_ = nullptr;
    other.handle_ = nullptr;
  }
  return *this;
}

void Stream::reset() noexcept {
  if (handle_ && device_)
    device_->destroyStreamRaw(handle_);
  device_ = nullptr;
  handle_ = nullptr;
}

Event &Event::operator=(Event &&other) noexcept {
  if (this != &other) {
    reset();
    device_ = other.device_;
    handle_ = other.handle_;
    other.device_ = nullptr;
    other.handle_ = nullptr;
  }
  return *this;
}

void Event::reset() noexcept {
  if (handle_ && device_)
    device_->destroyOrderingEventRaw(handle_);
  device_ = nullptr;
  handle_ = nullptr;
}

StatusOr<Buffer> Device::allocate(size_t bytes) {
  if (bytes == 0)
    return Buffer();
  // Reserve first, so that concurrent allocations cannot pass the limit
  // together.
  const uint64_t limit = memoryLimit();
  const uint64_t before = bytesAllocated_.fetch_add(bytes);
  if (bytes > limit || before > limit - bytes) {
    bytesAllocated_ -= bytes;
    return resourceExhausted(
        std::string(kindName()) + ": allocating " + std::to_string(bytes) +
        " bytes would exceed the device's memory limit of " +
        std::to_string(limit) + " bytes (" + std::to_string(before) +
        " in use; Device::setMemoryLimit)");
  }
  StatusOr<void *> data = allocateRaw(bytes);
  if (!data.ok()) {
    bytesAllocated_ -= bytes;
    return data.status();
  }
  return Buffer(this, *data, bytes);
}

void Device::setMemoryLimit(uint64_t bytes) { memoryLimit_ = bytes; }

StatusOr<int> Device::linearAlgorithmCount(const LinearArgs &) { return 1; }

Status Device::chooseLinearAlgorithm(const LinearArgs &, int index) {
  return index == 0 ? Status::success()
                    : outOfRange("linear has one algorithm on " +
                                 std::string(kindName()) + ", not " +
                                 std::to_string(index + 1));
}

StatusOr<int> Device::perHeadAlgorithmCount(const PerHeadGemmArgs &) {
  return 1;
}

Status Device::choosePerHeadAlgorithm(const PerHeadGemmArgs &, int index) {
  return index == 0 ? Status::success()
                    : outOfRange("a per-head GEMM has one algorithm on " +
                                 std::string(kindName()) + ", not " +
                                 std::to_string(index + 1));
}

StatusOr<Stream> Device::createStream() {
  MLART_ASSIGN_OR_RETURN(StreamHandle handle, createStreamRaw());
  return Stream(this, handle);
}

StatusOr<Event> Device::createOrderingEvent() {
  MLART_ASSIGN_OR_RETURN(EventHandle handle, createOrderingEventRaw());
  return Event(this, handle);
}

StatusOr<EventHandle> Device::createOrderingEventRaw() {
  return unimplemented(std::string("events are not supported on the ") +
                       kindName() + " device");
}
Status Device::recordEvent(EventHandle, StreamHandle) {
  return unimplemented(std::string("events are not supported on the ") +
                       kindName() + " device");
}
Status Device::streamWaitEvent(StreamHandle, EventHandle) {
  return unimplemented(std::string("events are not supported on the ") +
                       kindName() + " device");
}

Status Device::checkRange(const Buffer &buffer, size_t offset, size_t bytes,
                          const char *what) const {
  if (buffer.device() != this && !buffer.empty())
    return invalidArgument(std::string(what) +
                           ": buffer belongs to another device");
  if (offset > buffer.size() || bytes > buffer.size() - offset)
    return outOfRange(std::string(what) + ": range [" + std::to_string(offset) +
                      ", " + std::to_string(offset + bytes) +
                      ") exceeds the buffer of " +
                      std::to_string(buffer.size()) + " bytes");
  return Status::success();
}

Status Device::writeBuffer(Buffer &dst, size_t offset, const void *src,
                           size_t bytes, StreamHandle stream) {
  MLART_RETURN_IF_ERROR(checkRange(dst, offset, bytes, "writeBuffer"));
  if (bytes == 0)
    return Status::success();
  return copyHostToDevice(static_cast<uint8_t *>(dst.data()) + offset, src,
                          bytes, stream);
}

Status Device::readBuffer(const Buffer &src, size_t offset, void *dst,
                          size_t bytes, StreamHandle stream) {
  MLART_RETURN_IF_ERROR(checkRange(src, offset, bytes, "readBuffer"));
  if (bytes == 0)
    return Status::success();
  return copyDeviceToHost(dst, static_cast<const uint8_t *>(src.data()) + offset,
                          bytes, stream);
}

Status checkCopyView(const TensorRef &src, const TensorRef &dst) {
  if (src.dtype != dst.dtype)
    return invalidArgument("copyView: dtypes differ (" + src.describe() +
                           " -> " + dst.describe() + ")");
  if (src.rank != dst.rank || src.rank < 0 || src.rank > kMaxRank)
    return invalidArgument("copyView: ranks differ or exceed 4 (" +
                           src.describe() + " -> " + dst.describe() + ")");
  int64_t n = 1;
  for (int d = 0; d < src.rank; ++d) {
    if (src.sizes[d] != dst.sizes[d] || src.sizes[d] < 0)
      return invalidArgument("copyView: sizes differ (" + src.describe() +
                             " -> " + dst.describe() + ")");
    if (src.strides[d] < 0 || dst.strides[d] < 0)
      return invalidArgument("copyView: negative stride");
    if (dst.strides[d] == 0 && dst.sizes[d] > 1)
      return invalidArgument("copyView: destination stride 0 on a dimension "
                             "of size > 1 (" + dst.describe() + ")");
    n *= src.sizes[d];
  }
  if (n > 0 && (!src.data || !dst.data))
    return invalidArgument("copyView: null pointer");
  return Status::success();
}

Status Device::beginCapture(StreamHandle) {
  return unimplemented(std::string("graph capture is not supported on the ") +
                       kindName() + " device");
}
StatusOr<GraphHandle> Device::endCapture(StreamHandle) {
  return unimplemented(std::string("graph capture is not supported on the ") +
                       kindName() + " device");
}
Status Device::launchGraph(GraphHandle, StreamHandle) {
  return unimplemented(std::string("graphs are not supported on the ") +
                       kindName() + " device");
}

Status Device::launchCodegenCacheWrite(const CodegenModule &,
                                       const CodegenKernel &,
                                       const RopeCacheUpdateArgs &,
                                       StreamHandle) {
  return unimplemented(std::string(kindName()) +
                       " device cannot run compiler-generated kernels");
}

} // namespace mlart
