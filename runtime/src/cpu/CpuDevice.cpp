//===- CpuDevice.cpp - The host-memory, synchronous reference device ------===//
#include "mlart/Device.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace mlart {

namespace {
/// Cache-line alignment: enough for every dtype and for AVX-512 loads.
constexpr size_t kCpuAlignment = 64;

Status checkPointers(const void *dst, const void *src, size_t bytes,
                     const char *what) {
  if (bytes != 0 && (dst == nullptr || src == nullptr))
    return invalidArgument(std::string(what) + ": null pointer");
  return Status::success();
}
} // namespace

StatusOr<void *> CpuDevice::allocateRaw(size_t bytes) {
  size_t rounded = (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  void *p = std::aligned_alloc(kCpuAlignment, rounded);
  if (!p)
    return resourceExhausted("cpu: cannot allocate " + std::to_string(bytes) +
                             " bytes");
  return p;
}

void CpuDevice::freeRaw(void *data, size_t) noexcept { std::free(data); }

// The CPU executes everything at call time, so a stream is just a name.
StatusOr<StreamHandle> CpuDevice::createStreamRaw() {
  return StreamHandle(nullptr);
}
void CpuDevice::destroyStreamRaw(StreamHandle) noexcept {}

Status CpuDevice::copyHostToDevice(void *dst, const void *src, size_t bytes,
                                   StreamHandle) {
  MLART_RETURN_IF_ERROR(checkPointers(dst, src, bytes, "copyHostToDevice"));
  if (bytes)
    std::memmove(dst, src, bytes);
  return Status::success();
}

Status CpuDevice::copyDeviceToHost(void *dst, const void *src, size_t bytes,
                                   StreamHandle) {
  MLART_RETURN_IF_ERROR(checkPointers(dst, src, bytes, "copyDeviceToHost"));
  if (bytes)
    std::memmove(dst, src, bytes);
  return Status::success();
}

Status CpuDevice::copyDeviceToDevice(void *dst, const void *src, size_t bytes,
                                     StreamHandle) {
  MLART_RETURN_IF_ERROR(checkPointers(dst, src, bytes, "copyDeviceToDevice"));
  if (bytes)
    std::memmove(dst, src, bytes);
  return Status::success();
}

Status CpuDevice::memset(void *dst, uint8_t value, size_t bytes,
                         StreamHandle) {
  if (bytes != 0 && dst == nullptr)
    return invalidArgument("memset: null pointer");
  if (bytes)
    std::memset(dst, value, bytes);
  return Status::success();
}

Status CpuDevice::synchronize(StreamHandle) { return Status::success(); }

std::unique_ptr<Device> createCpuDevice() {
  return std::make_unique<CpuDevice>();
}

} // namespace mlart
