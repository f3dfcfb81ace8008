//===- CApiInternal.h - Handle types and conversions behind mlart.h -------===//
#ifndef MLART_CAPI_CAPIINTERNAL_H
#define MLART_CAPI_CAPIINTERNAL_H

#include "mlart/BlockManager.h"
#include "mlart/Device.h"
#include "mlart/KVCache.h"
#include "mlart/mlart.h"

#include <memory>
#include <new>
#include <string>

struct mlart_status_s {
  mlart_status_code code;
  std::string message;
};

struct mlart_device_s {
  std::unique_ptr<mlart::Device> device;
};

struct mlart_stream_s {
  mlart::Stream stream;
  /// The device that created it (not owned); calls check they match.
  mlart_device *device = nullptr;
};

struct mlart_buffer_s {
  mlart::Buffer buffer;
};

struct mlart_block_manager_s {
  mlart::BlockManager manager;
};

struct mlart_kv_cache_s {
  mlart::KVCache cache;
  /// Checked-mode guard attached by mlart_kv_cache_set_guard (not owned).
  mlart_block_manager *guard = nullptr;
};

namespace mlart::capi {

/// NULL for Ok, else a heap status (falls back to a static one if even that
/// allocation fails, so callers always learn about the error).
mlart_status toC(const Status &status);

/// Runs `body` (returning Status) and converts the result; a C++ exception
/// (std::bad_alloc from a container) becomes an Internal status instead of
/// crossing the C boundary.
template <typename F> mlart_status guarded(F &&body) noexcept {
  try {
    return toC(body());
  } catch (const std::bad_alloc &) {
    return toC(resourceExhausted("out of host memory"));
  } catch (...) {
    return toC(internalError("unexpected C++ exception"));
  }
}

/// Converts a C view, checking rank and dtype values.
Status toTensorRef(const mlart_tensor &t, const char *name, TensorRef &out);

/// The kernel view of a C cache handle, with its checked-mode guard.
Status toCacheRef(const mlart_kv_cache *cache, KVCacheRef &out);

/// The handle of `stream` (nullptr for NULL) after checking that it belongs
/// to `device`; `what` names the call in the error.
Status toStreamHandle(const Device &device, const mlart_stream *stream,
                      const char *what, StreamHandle &out);

/// The argument checks of mlart_device_create_cuda shared by its two
/// providers (CApiCudaDevice.cpp, CApiNoCudaDevice.cpp); clears `*out`.
Status checkCudaDeviceArgs(int ordinal, mlart_device **out);

/// Wraps a created device into a new C handle stored in `*out`.
Status storeDevice(StatusOr<std::unique_ptr<Device>> created,
                   mlart_device **out);

} // namespace mlart::capi

#endif // MLART_CAPI_CAPIINTERNAL_H
