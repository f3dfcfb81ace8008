//===- Device.h - Abstract device: memory, copies, streams and kernels ----===//
//
// The executor and the C API talk to a Device only through this interface,
// so the CPU reference device and the (later, dlopen-based) CUDA device are
// interchangeable. Addresses are opaque `void *` device pointers: on the CPU
// they are host pointers, on CUDA they will be CUdeviceptr values. Every
// operation takes a StreamHandle; the CPU executes synchronously and ignores
// it, a CUDA device enqueues and needs synchronize() before host reads.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_DEVICE_H
#define MLART_DEVICE_H

#include "mlart/Kernels.h"
#include "mlart/Status.h"
#include "mlart/StatusOr.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace mlart {

class Device;
struct CodegenModule;
struct CodegenKernel;

/// Opaque instantiated graph (cudaGraphExec_t on CUDA).
using GraphHandle = void *;
/// Opaque device event (cudaEvent_t on CUDA).
using EventHandle = void *;

/// Checks the arguments of Device::copyView (shared by the devices).
Status checkCopyView(const TensorRef &src, const TensorRef &dst);

/// Which implementation a Device is; values are part of the C API.
enum class DeviceKind : int { Cpu = 0, Cuda = 1 };

/// Owning handle of one device allocation; frees it on destruction.
/// Move-only. A default-constructed Buffer is empty.
class Buffer {
public:
  Buffer() = default;
  ~Buffer() { reset(); }
  Buffer(Buffer &&other) noexcept { *this = std::move(other); }
  Buffer &operator=(Buffer &&other) noexcept;
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;

  /// Device address of the first byte (nullptr when empty).
  void *data() const { return data_; }
  /// Size in bytes.
  size_t size() const { return size_; }
  /// The device that owns the memory (nullptr when empty).
  Device *device() const { return device_; }
  bool empty() const { return data_ == nullptr; }
  /// Frees the memory now; the Buffer becomes empty.
  void reset() noexcept;

private:
  friend class Device;
  Buffer(Device *device, void *data, size_t size)
      : device_(device), data_(data), size_(size) {}

  Device *device_ = nullptr;
  void *data_ = nullptr;
  size_t size_ = 0;
};

/// Owning handle of one device stream; destroys it on destruction.
/// Move-only. The CPU device's streams have a null handle.
class Stream {
public:
  Stream() = default;
  ~Stream() { reset(); }
  Stream(Stream &&other) noexcept { *this = std::move(other); }
  Stream &operator=(Stream &&other) noexcept;
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;

  /// The handle kernels and copies take (cudaStream_t on CUDA).
  StreamHandle handle() const { return handle_; }
  Device *device() const { return device_; }
  void reset() noexcept;

private:
  friend class Device;
  Stream(Device *device, StreamHandle handle)
      : device_(device), handle_(handle) {}

  Device *device_ = nullptr;
  StreamHandle handle_ = nullptr;
};

/// Owning handle of one device event used to order streams (no timing);
/// destroys it on destruction. Move-only.
class Event {
public:
  Event() = default;
  ~Event() { reset(); }
  Event(Event &&other) noexcept { *this = std::move(other); }
  Event &operator=(Event &&other) noexcept;
  Event(const Event &) = delete;
  Event &operator=(const Event &) = delete;

  EventHandle handle() const { return handle_; }
  void reset() noexcept;

private:
  friend class Device;
  Event(Device *device, EventHandle handle)
      : device_(device), handle_(handle) {}

  Device *device_ = nullptr;
  EventHandle handle_ = nullptr;
};

/// One compute device. Implementations must outlive every Buffer and Stream
/// they hand out. Calls are thread-safe unless noted.
class Device {
public:
  virtual ~Device() = default;

  /// Which implementation this is.
  virtual DeviceKind kind() const = 0;
  /// Stable short name: "cpu", "cuda".
  virtual const char *kindName() const = 0;
  /// True when device addresses can be dereferenced on the host (CPU); tests
  /// and the C API use it to skip staging copies.
  virtual bool isHostAccessible() const = 0;

  /// Allocates `bytes` of device memory (at least 64-byte aligned so that any
  /// element type and vector load is aligned). Zero bytes gives an empty
  /// Buffer.
  StatusOr<Buffer> allocate(size_t bytes);
  /// Live Buffers of this device hold at most memoryLimit() bytes together:
  /// an allocate() past it is ResourceExhausted before any memory is
  /// touched, so a size read from an artifact or a command line is refused
  /// instead of exhausting the machine. The default is what the device has
  /// (the host's physical memory on the CPU; on CUDA the driver refuses
  /// what does not fit); 0 restores it.
  void setMemoryLimit(uint64_t bytes);
  uint64_t memoryLimit() const {
    const uint64_t limit = memoryLimit_.load();
    return limit ? limit : defaultMemoryLimit();
  }
  /// Bytes held by live Buffers now.
  uint64_t bytesAllocated() const { return bytesAllocated_.load(); }
  /// Creates an execution stream.
  StatusOr<Stream> createStream();

  /// Cross-stream ordering, for the executor's concurrent schedule
  /// (docs/runtime.md, "Concurrent streams"). A device that runs each call
  /// to completion before returning (the CPU) says false and the executor
  /// keeps to the caller's stream; the other three calls are then
  /// Unimplemented.
  virtual bool supportsConcurrentStreams() const { return false; }
  /// An event for recordEvent / streamWaitEvent (no timing).
  StatusOr<Event> createOrderingEvent();
  /// Marks the point of `stream` reached so far; a later streamWaitEvent
  /// waits for the latest record. Both work while `stream` is captured.
  virtual Status recordEvent(EventHandle event, StreamHandle stream);
  /// Work queued on `stream` after this call waits for `event`'s record.
  virtual Status streamWaitEvent(StreamHandle stream, EventHandle event);

  /// Raw copies between device addresses and host memory; `stream` may be
  /// null (the default stream). Asynchronous on devices that queue work.
  virtual Status copyHostToDevice(void *dst, const void *src, size_t bytes,
                                  StreamHandle stream = nullptr) = 0;
  virtual Status copyDeviceToHost(void *dst, const void *src, size_t bytes,
                                  StreamHandle stream = nullptr) = 0;
  virtual Status copyDeviceToDevice(void *dst, const void *src, size_t bytes,
                                    StreamHandle stream = nullptr) = 0;
  /// Sets `bytes` bytes at `dst` to `value`.
  virtual Status memset(void *dst, uint8_t value, size_t bytes,
                        StreamHandle stream = nullptr) = 0;
  /// Blocks until all work queued on `stream` (null: all streams) is done.
  virtual Status synchronize(StreamHandle stream = nullptr) = 0;

  /// Element-wise copy between two strided views of device memory: same
  /// dtype, same sizes, rank <= 4, arbitrary non-negative strides. A source
  /// stride may be 0 (broadcast); a destination stride may be 0 only where
  /// the size is 1. The views must not overlap. One launch on devices that
  /// queue work (so it is graph-capturable).
  virtual Status copyView(const TensorRef &src, const TensorRef &dst,
                          StreamHandle stream = nullptr) = 0;

  /// Reports (and clears) errors that asynchronous device-side checks
  /// recorded on `stream` (synchronizes it). CPU: always success.
  virtual Status checkErrors(StreamHandle stream = nullptr) {
    (void)stream;
    return Status::success();
  }

  /// Graph capture of everything queued on `stream` between beginCapture
  /// and endCapture (nothing runs while capturing); launchGraph replays it
  /// on a stream with the same addresses. CPU: Unimplemented. While a
  /// capture is open, device-side checks of cache writes are asynchronous
  /// (see checkErrors).
  virtual Status beginCapture(StreamHandle stream);
  virtual StatusOr<GraphHandle> endCapture(StreamHandle stream);
  virtual Status launchGraph(GraphHandle graph, StreamHandle stream);
  virtual void destroyGraph(GraphHandle graph) noexcept { (void)graph; }

  /// Bounds-checked copies into and out of a Buffer owned by this device.
  Status writeBuffer(Buffer &dst, size_t offset, const void *src, size_t bytes,
                     StreamHandle stream = nullptr);
  Status readBuffer(const Buffer &src, size_t offset, void *dst, size_t bytes,
                    StreamHandle stream = nullptr);

  /// The kernels that run on this device.
  virtual const KernelLibrary &kernels() const = 0;

  /// How many algorithms `kernels().linear(a)` can choose from for `a`'s
  /// shape (CUDA: cuBLASLt's candidates; 1 where there is no choice), and
  /// a fixed choice among them for every later call of that shape.
  /// Executor::tuneGraph picks it by timing the whole step. Defaults: 1,
  /// and only index 0 is accepted (OutOfRange otherwise).
  virtual StatusOr<int> linearAlgorithmCount(const LinearArgs &a);
  virtual Status chooseLinearAlgorithm(const LinearArgs &a, int index);
  /// The same for the per-head products of `kernels().qAbsorb` and
  /// `kernels().vUp` (CUDA: cuBLASLt's strided-batched candidates).
  virtual StatusOr<int> perHeadAlgorithmCount(const PerHeadGemmArgs &a);
  virtual Status choosePerHeadAlgorithm(const PerHeadGemmArgs &a, int index);

  /// True when the device can run compiler-generated kernels
  /// (docs/codegen.md). The executor runs the library kernel for
  /// instructions that name one on devices that cannot (same semantics).
  virtual bool supportsCodegenKernels() const { return false; }
  /// Runs the generated cache-write `kernel` of `module` on `args` (for a
  /// cache_update kernel only kvC, kPe, slotMapping and cache are used).
  /// Refuses a kernel whose name does not match the operands
  /// (InvalidArgument) and reports the driver's log when it rejects the
  /// module. Default: Unimplemented.
  virtual Status launchCodegenCacheWrite(const CodegenModule &module,
                                         const CodegenKernel &kernel,
                                         const RopeCacheUpdateArgs &args,
                                         StreamHandle stream);

protected:
  /// What setMemoryLimit(0) restores.
  virtual uint64_t defaultMemoryLimit() const { return UINT64_MAX; }
  /// Device-specific allocation; `bytes` > 0.
  virtual StatusOr<void *> allocateRaw(size_t bytes) = 0;
  /// Frees memory returned by allocateRaw; must not fail.
  virtual void freeRaw(void *data, size_t bytes) noexcept = 0;
  virtual StatusOr<StreamHandle> createStreamRaw() = 0;
  virtual void destroyStreamRaw(StreamHandle stream) noexcept = 0;
  /// Ordering events; the defaults are Unimplemented / a no-op.
  virtual StatusOr<EventHandle> createOrderingEventRaw();
  virtual void destroyOrderingEventRaw(EventHandle event) noexcept {
    (void)event;
  }

private:
  friend class Buffer;
  friend class Stream;
  friend class Event;
  Status checkRange(const Buffer &buffer, size_t offset, size_t bytes,
                    const char *what) const;

  /// 0: defaultMemoryLimit() (virtual, so the constructor cannot store it).
  std::atomic<uint64_t> memoryLimit_{0};
  std::atomic<uint64_t> bytesAllocated_{0};
};

/// The CPU reference device: host memory, synchronous execution, the CPU
/// kernel library.
class CpuDevice final : public Device {
public:
  DeviceKind kind() const override { return DeviceKind::Cpu; }
  const char *kindName() const override { return "cpu"; }
  bool isHostAccessible() const override { return true; }

  Status copyHostToDevice(void *dst, const void *src, size_t bytes,
                          StreamHandle stream = nullptr) override;
  Status copyDeviceToHost(void *dst, const void *src, size_t bytes,
                          StreamHandle stream = nullptr) override;
  Status copyDeviceToDevice(void *dst, const void *src, size_t bytes,
                            StreamHandle stream = nullptr) override;
  Status memset(void *dst, uint8_t value, size_t bytes,
                StreamHandle stream = nullptr) override;
  Status synchronize(StreamHandle stream = nullptr) override;
  Status copyView(const TensorRef &src, const TensorRef &dst,
                  StreamHandle stream = nullptr) override;
  const KernelLibrary &kernels() const override { return cpuKernelLibrary(); }

protected:
  /// The host's physical memory.
  uint64_t defaultMemoryLimit() const override;
  StatusOr<void *> allocateRaw(size_t bytes) override;
  void freeRaw(void *data, size_t bytes) noexcept override;
  StatusOr<StreamHandle> createStreamRaw() override;
  void destroyStreamRaw(StreamHandle stream) noexcept override;
};

/// Creates the CPU device.
std::unique_ptr<Device> createCpuDevice();

} // namespace mlart

#endif // MLART_DEVICE_H
