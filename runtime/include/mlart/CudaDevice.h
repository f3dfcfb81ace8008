//===- CudaDevice.h - The CUDA device (sm_90a) and its kernel library -----===//
//
// Built only when nvcc is found (target mlart_cuda). The header itself needs
// no CUDA headers: streams and events are opaque handles (cudaStream_t and
// cudaEvent_t underneath).
//
// Memory: a caching allocator on top of cudaMalloc. A freed block goes back
// to a size-binned free list together with an event recorded on the legacy
// default stream; it is reused only once that event has completed, i.e. once
// all work queued before the free on any (blocking) stream is done. So a
// Buffer may be dropped while kernels that use it are still queued. Kernels'
// own temporaries (split-KV partials, a prefill's expanded context) come
// stream-ordered from a scratch pool that keeps its memory between calls.
//
// Kernels: cache-writing kernels check slots on the device. By default every
// such call synchronises its stream and turns the device error record into a
// Status (OutOfRange / PermissionDenied); with setSynchronousChecks(false)
// the calls stay asynchronous and errors are reported by checkErrors().
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDADEVICE_H
#define MLART_CUDADEVICE_H

#include "mlart/Device.h"

#include <string>

namespace mlart {

class CudaDevice : public Device {
public:
  DeviceKind kind() const override { return DeviceKind::Cuda; }
  const char *kindName() const override { return "cuda"; }
  bool isHostAccessible() const override { return false; }

  /// Ordinal, name ("NVIDIA H200"), multiprocessor count, L2 bytes.
  virtual int ordinal() const = 0;
  virtual const std::string &deviceName() const = 0;
  virtual int multiprocessorCount() const = 0;
  virtual size_t l2CacheBytes() const = 0;

  /// Timing events (createOrderingEvent makes cheaper ones for ordering).
  virtual StatusOr<EventHandle> createEvent() = 0;
  virtual void destroyEvent(EventHandle event) noexcept = 0;
  // recordEvent / streamWaitEvent: see Device.
  virtual Status synchronizeEvent(EventHandle event) = 0;
  /// Milliseconds between two completed events.
  virtual StatusOr<float> elapsedMs(EventHandle start, EventHandle end) = 0;

  /// Caching allocator and scratch pool: bytes held for reuse (free lists
  /// and unused pool reserve), and a way to return them to the driver.
  virtual size_t cachedBytes() const = 0;
  virtual Status emptyCache() = 0;
  /// Device memory the scratch pool holds for kernels' temporaries (kept
  /// between calls; emptyCache returns what no queued call still uses).
  virtual size_t scratchBytes() const = 0;

  /// Cache-write error checking mode (see the file comment).
  virtual void setSynchronousChecks(bool on) = 0;
  /// Reads and clears the sticky device error record of asynchronous calls
  /// (Device::checkErrors).
  Status checkErrors(StreamHandle stream) override = 0;

  /// Compiler-generated kernels (docs/codegen.md): launches so far, those
  /// of them with programmatic dependent launch (docs/cuda.md), and PTX
  /// modules loaded (each loaded once per device).
  virtual uint64_t codegenLaunches() const = 0;
  virtual uint64_t codegenPdlLaunches() const = 0;
  virtual size_t codegenModulesLoaded() const = 0;
};

/// Creates the CUDA device `ordinal`; Unavailable when there is no GPU, no
/// driver, or the driver is too old for this build.
StatusOr<std::unique_ptr<CudaDevice>> createCudaDevice(int ordinal = 0);

/// True when the runtime was built with the CUDA backend (always true for
/// programs linking mlart_cuda).
bool cudaBackendBuilt();

} // namespace mlart

#endif // MLART_CUDADEVICE_H
