//===- CpuDevice.cpp - The host-memory, synchronous reference device ------===//
#include "mlart/Device.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include <unistd.h>

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

uint64_t CpuDevice::defaultMemoryLimit() const {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long pageSize = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || pageSize <= 0)
    return UINT64_MAX;
  return uint64_t(pages) * uint64_t(pageSize);
}

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

Status CpuDevice::copyView(const TensorRef &src, const TensorRef &dst,
                           StreamHandle) {
  MLART_RETURN_IF_ERROR(checkCopyView(src, dst));
  if (src.numElements() == 0)
    return Status::success();
  const size_t elem = dtypeSize(src.dtype);
  // Pad to rank 4 with leading size-1 dimensions.
  int64_t sz[kMaxRank], ss[kMaxRank], ds[kMaxRank];
  const int pad = kMaxRank - src.rank;
  for (int d = 0; d < kMaxRank; ++d) {
    const bool real = d >= pad;
    sz[d] = real ? src.sizes[d - pad] : 1;
    ss[d] = real ? src.strides[d - pad] : 0;
    ds[d] = real ? dst.strides[d - pad] : 0;
  }
  for (int64_t i0 = 0; i0 < sz[0]; ++i0)
    for (int64_t i1 = 0; i1 < sz[1]; ++i1)
      for (int64_t i2 = 0; i2 < sz[2]; ++i2)
        for (int64_t i3 = 0; i3 < sz[3]; ++i3) {
          const int64_t so = i0 * ss[0] + i1 * ss[1] + i2 * ss[2] + i3 * ss[3];
          const int64_t dOff =
              i0 * ds[0] + i1 * ds[1] + i2 * ds[2] + i3 * ds[3];
          std::memcpy(dst.bytesAt(dOff), src.bytesAt(so), elem);
        }
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
