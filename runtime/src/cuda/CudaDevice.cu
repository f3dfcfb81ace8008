//===- CudaDevice.cu - CUDA device: memory, streams, events, errors -------===//
#include "cuda/Blas.h"
#include "cuda/BlasLt.h"
#include "cuda/CodegenModules.h"
#include "cuda/CudaCommon.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

namespace mlart {

bool cudaBackendBuilt() { return true; }

namespace cuda {

Status cudaError(cudaError_t e, const std::string &what) {
  std::string msg = "cuda: " + what + ": " + cudaGetErrorName(e) + ": " +
                    cudaGetErrorString(e);
  switch (e) {
  case cudaErrorMemoryAllocation:
    return resourceExhausted(msg);
  case cudaErrorNoDevice:
  case cudaErrorInsufficientDriver:
  case cudaErrorInvalidDevice:
  case cudaErrorSystemDriverMismatch:
  case cudaErrorCompatNotSupportedOnDevice:
    return unavailable(msg);
  case cudaErrorInvalidValue:
  case cudaErrorInvalidConfiguration:
    return invalidArgument(msg);
  default:
    return internalError(msg);
  }
}

bool isFloatType(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

bool isDeviceAccessible(const void *p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeDevice ||
         attr.type == cudaMemoryTypeManaged ||
         (attr.type == cudaMemoryTypeHost && attr.devicePointer != nullptr);
}

Status resetRecord(CudaContext &ctx, cudaStream_t stream) {
  DeviceErrorRecord init{};
  init.badSlotIndex = init.refusedIndex = init.badPosIndex =
      init.badSeqIndex = INT_MAX;
  *ctx.hostRecord = init;
  // The pinned host record is the source: copy it, then wait, so the next
  // host write cannot race with the copy.
  MLART_CUDA_CHECK(cudaMemcpyAsync(ctx.deviceRecord, ctx.hostRecord,
                                   sizeof(DeviceErrorRecord),
                                   cudaMemcpyHostToDevice, stream),
                   "reset error record");
  MLART_CUDA_CHECK(cudaStreamSynchronize(stream), "reset error record");
  return Status::success();
}

static int64_t readIndexValue(const TensorRef &t, int64_t i,
                              cudaStream_t stream, bool &ok) {
  int64_t v = 0;
  const size_t es = dtypeSize(t.dtype);
  const uint8_t *p = static_cast<const uint8_t *>(t.data) +
                     i * t.strides[0] * int64_t(es);
  ok = cudaMemcpyAsync(&v, p, es, cudaMemcpyDeviceToHost, stream) ==
           cudaSuccess &&
       cudaStreamSynchronize(stream) == cudaSuccess;
  if (es == 4)
    v = int64_t(int32_t(uint32_t(v)));
  return v;
}

static Status decodeRecord(CudaContext &ctx, cudaStream_t stream,
                           const TensorRef *slots, const TensorRef *positions,
                           int64_t blockSize, int64_t numSlots,
                           uint64_t *refusedWrites) {
  MLART_CUDA_CHECK(cudaMemcpyAsync(ctx.hostRecord, ctx.deviceRecord,
                                   sizeof(DeviceErrorRecord),
                                   cudaMemcpyDeviceToHost, stream),
                   "read error record");
  MLART_CUDA_CHECK(cudaStreamSynchronize(stream), "kernel execution");
  const DeviceErrorRecord r = *ctx.hostRecord;
  bool ok = true;
  if (r.badPosIndex != INT_MAX && positions) {
    int64_t p = readIndexValue(*positions, r.badPosIndex, stream, ok);
    return outOfRange("positions[" + std::to_string(r.badPosIndex) + "] = " +
                      (ok ? std::to_string(p) : std::string("?")) +
                      " is outside the cos/sin table");
  }
  if (r.badSlotIndex != INT_MAX && slots) {
    int64_t s = readIndexValue(*slots, r.badSlotIndex, stream, ok);
    return outOfRange("slot_mapping[" + std::to_string(r.badSlotIndex) +
                      "] = " + (ok ? std::to_string(s) : std::string("?")) +
                      " is outside the cache's " + std::to_string(numSlots) +
                      " slots");
  }
  if (r.refusedRows && slots) {
    if (refusedWrites)
      __atomic_fetch_add(refusedWrites, uint64_t(r.refusedRows),
                         __ATOMIC_RELAXED);
    int64_t s = readIndexValue(*slots, r.refusedIndex, stream, ok);
    const int64_t block = ok ? s / blockSize : -1;
    return permissionDenied(
        "checked mode refused " + std::to_string(r.refusedRows) +
        " row write(s); first: slot_mapping[" +
        std::to_string(r.refusedIndex) + "] = " + std::to_string(s) +
        " is in write-protected block " + std::to_string(block) +
        (block == 0 ? " (the null block)" : " (a prefix-cached block)"));
  }
  // Asynchronous checks (checkErrors) do not know the call's tensors.
  if (r.badPosIndex != INT_MAX)
    return outOfRange("positions[" + std::to_string(r.badPosIndex) +
                      "] is outside the cos/sin table (asynchronous check)");
  if (r.badSlotIndex != INT_MAX)
    return outOfRange("slot_mapping[" + std::to_string(r.badSlotIndex) +
                      "] is outside the cache (asynchronous check)");
  if (r.refusedRows)
    return permissionDenied("checked mode refused " +
                            std::to_string(r.refusedRows) +
                            " row write(s); first: slot_mapping[" +
                            std::to_string(r.refusedIndex) +
                            "] (asynchronous check)");
  if (r.badScale)
    return invalidArgument("quantize: scale must be finite and > 0");
  if (r.badSeqIndex != INT_MAX)
    return outOfRange("sequence " + std::to_string(r.badSeqIndex) +
                      " has a length past its block table (or past the "
                      "caller's context bound) or a block-table entry "
                      "outside the cache");
  return Status::success();
}

Status readRecord(CudaContext &ctx, cudaStream_t stream,
                  const TensorRef *slots, const TensorRef *positions,
                  int64_t blockSize, int64_t numSlots,
                  uint64_t *refusedWrites) {
  Status s = decodeRecord(ctx, stream, slots, positions, blockSize, numSlots,
                          refusedWrites);
  // A reported error is consumed: left in the record, the next
  // asynchronous check (checkErrors, runGraph) would report it again as
  // its own. Should the reset fail too, the original error is the one to
  // report.
  if (!s.ok())
    (void)resetRecord(ctx, stream);
  return s;
}

namespace {

/// Size classes: 512 B granules below 1 MiB, 2 MiB granules above.
size_t roundSize(size_t bytes) {
  if (bytes < (1u << 20))
    return (bytes + 511) / 512 * 512;
  return (bytes + (2u << 20) - 1) / (2u << 20) * (2u << 20);
}

class CudaDeviceImpl final : public CudaDevice {
public:
  CudaDeviceImpl(int ordinal, const cudaDeviceProp &prop)
      : ordinal_(ordinal), name_(prop.name), sms_(prop.multiProcessorCount),
        l2_(size_t(prop.l2CacheSize)), library_(&ctx_), codegen_(ordinal) {
    ctx_.ordinal = ordinal;
    ctx_.smCount = sms_;
  }

  Status init() {
    MLART_CUDA_CHECK(cudaSetDevice(ordinal_), "cudaSetDevice");
    MLART_CUDA_CHECK(cudaMalloc(&ctx_.deviceRecord, sizeof(DeviceErrorRecord)),
                     "cudaMalloc(error record)");
    MLART_CUDA_CHECK(cudaMallocHost(&ctx_.hostRecord, sizeof(DeviceErrorRecord)),
                     "cudaMallocHost(error record)");
    blas_ = std::make_unique<Blas>();
    ctx_.blas = blas_.get();
    blasLt_ = std::make_unique<BlasLt>();
    ctx_.blasLt = blasLt_.get();
    MLART_RETURN_IF_ERROR(createScratchPool());
    return resetRecord(ctx_, nullptr);
  }

  /// The scratch pool (Scratch.h): device memory that stays reserved
  /// between calls instead of being re-mapped after every synchronisation.
  Status createScratchPool() {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = ordinal_;
    MLART_CUDA_CHECK(cudaMemPoolCreate(&ctx_.scratchPool, &props),
                     "cudaMemPoolCreate(scratch pool)");
    uint64_t keepAll = UINT64_MAX;
    MLART_CUDA_CHECK(cudaMemPoolSetAttribute(ctx_.scratchPool,
                                             cudaMemPoolAttrReleaseThreshold,
                                             &keepAll),
                     "cudaMemPoolSetAttribute(scratch pool threshold)");
    return Status::success();
  }

  ~CudaDeviceImpl() override {
    cudaSetDevice(ordinal_);
    cudaDeviceSynchronize();
    blas_.reset();
    blasLt_.reset();
    (void)emptyCache();
    if (ctx_.scratchPool)
      cudaMemPoolDestroy(ctx_.scratchPool);
    if (ctx_.deviceRecord)
      cudaFree(ctx_.deviceRecord);
    if (ctx_.hostRecord)
      cudaFreeHost(ctx_.hostRecord);
  }

  StatusOr<int> linearAlgorithmCount(const LinearArgs &a) override {
    MLART_CUDA_CHECK(cudaSetDevice(ordinal_), "cudaSetDevice");
    return cuda::linearAlgorithmCount(ctx_, a);
  }
  Status chooseLinearAlgorithm(const LinearArgs &a, int index) override {
    MLART_CUDA_CHECK(cudaSetDevice(ordinal_), "cudaSetDevice");
    return cuda::chooseLinearAlgorithm(ctx_, a, index);
  }
  StatusOr<int> perHeadAlgorithmCount(const PerHeadGemmArgs &a) override {
    MLART_CUDA_CHECK(cudaSetDevice(ordinal_), "cudaSetDevice");
    return cuda::perHeadAlgorithmCount(ctx_, a);
  }
  Status choosePerHeadAlgorithm(const PerHeadGemmArgs &a, int index) override {
    MLART_CUDA_CHECK(cudaSetDevice(ordinal_), "cudaSetDevice");
    return cuda::choosePerHeadAlgorithm(ctx_, a, index);
  }

  bool supportsCodegenKernels() const override { return true; }
  Status launchCodegenCacheWrite(const CodegenModule &module,
                                 const CodegenKernel &kernel,
                                 const RopeCacheUpdateArgs &args,
                                 StreamHandle stream) override {
    return codegenCacheWrite(ctx_, codegen_, module, kernel, args,
                             toStream(stream));
  }
  uint64_t codegenLaunches() const override { return codegen_.launches(); }
  uint64_t codegenPdlLaunches() const override {
    return codegen_.pdlLaunches();
  }
  size_t codegenModulesLoaded() const override {
    return codegen_.loadedModules();
  }

  int ordinal() const override { return ordinal_; }
  const std::string &deviceName() const override { return name_; }
  int multiprocessorCount() const override { return sms_; }
  size_t l2CacheBytes() const override { return l2_; }

  Status copyHostToDevice(void *dst, const void *src, size_t bytes,
                          StreamHandle stream) override {
    return copy(dst, src, bytes, cudaMemcpyHostToDevice, stream,
                "copyHostToDevice");
  }
  Status copyDeviceToHost(void *dst, const void *src, size_t bytes,
                          StreamHandle stream) override {
    MLART_RETURN_IF_ERROR(copy(dst, src, bytes, cudaMemcpyDeviceToHost, stream,
                               "copyDeviceToHost"));
    // Host memory is pageable in general: the caller reads it right after.
    MLART_CUDA_CHECK(cudaStreamSynchronize(toStream(stream)),
                     "copyDeviceToHost (synchronize)");
    return Status::success();
  }
  Status copyDeviceToDevice(void *dst, const void *src, size_t bytes,
                            StreamHandle stream) override {
    return copy(dst, src, bytes, cudaMemcpyDeviceToDevice, stream,
                "copyDeviceToDevice");
  }
  Status memset(void *dst, uint8_t value, size_t bytes,
                StreamHandle stream) override {
    if (bytes == 0)
      return Status::success();
    if (!dst)
      return invalidArgument("memset: null pointer");
    MLART_CUDA_CHECK(cudaSetDevice(ordinal_), "cudaSetDevice");
    MLART_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, toStream(stream)),
                     "cudaMemsetAsync(" + std::to_string(bytes) + " bytes)");
    return Status::success();
  }
  Status synchronize(StreamHandle stream) override {
    MLART_CUDA_CHECK(cudaSetDevice(ordinal_), "cudaSetDevice");
    if (stream)
      MLART_CUDA_CHECK(cudaStreamSynchronize(toStream(stream)),
                       "cudaStreamSynchronize");
    else
      MLART_CUDA_CHECK(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return Status::success();
  }
  const KernelLibrary &kernels() const override { return library_; }

  Status copyView(const TensorRef &src, const TensorRef &dst,
                  StreamHandle stream) override {
    return cuda::copyView(ctx_, src, dst, toStream(stream));
  }

  // Graphs: checks are asynchronous while capturing (a synchronous check
  // would read the record back, which a capture cannot do); replays report
  // through checkErrors().
  Status beginCapture(StreamHandle stream) override {
    if (!stream)
      return invalidArgument("beginCapture: the default stream cannot be "
                             "captured; create a stream");
    MLART_CUDA_CHECK(cudaSetDevice(ordinal_), "cudaSetDevice");
    savedChecks_ = ctx_.synchronousChecks;
    ctx_.synchronousChecks = false;
    cudaError_t e =
        cudaStreamBeginCapture(toStream(stream), cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess) {
      ctx_.synchronousChecks = savedChecks_;
      return cudaError(e, "cudaStreamBeginCapture");
    }
    return Status::success();
  }
  StatusOr<GraphHandle> endCapture(StreamHandle stream) override {
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(toStream(stream), &graph);
    ctx_.synchronousChecks = savedChecks_;
    if (e != cudaSuccess) {
      if (graph)
        cudaGraphDestroy(graph);
      cudaGetLastError();
      return cudaError(e, "cudaStreamEndCapture");
    }
    cudaGraphExec_t exec = nullptr;
    e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess)
      return cudaError(e, "cudaGraphInstantiate");
    return GraphHandle(exec);
  }
  Status launchGraph(GraphHandle graph, StreamHandle stream) override {
    if (!graph)
      return invalidArgument("launchGraph: null graph");
    MLART_CUDA_CHECK(cudaSetDevice(ordinal_), "cudaSetDevice");
    MLART_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph),
                                     toStream(stream)),
                     "cudaGraphLaunch");
    return Status::success();
  }
  void destroyGraph(GraphHandle graph) noexcept override {
    if (graph)
      cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
  }

  StatusOr<EventHandle> createEvent() override {
    cudaEvent_t e = nullptr;
    MLART_CUDA_CHECK(cudaSetDevice(ordinal_), "cudaSetDevice");
    MLART_CUDA_CHECK(cudaEventCreate(&e), "cudaEventCreate");
    return EventHandle(e);
  }
  void destroyEvent(EventHandle event) noexcept override {
    if (event)
      cudaEventDestroy(static_cast<cudaEvent_t>(event));
  }
  Status recordEvent(EventHandle event, StreamHandle stream) override {
    MLART_CUDA_CHECK(
        cudaEventRecord(static_cast<cudaEvent_t>(event), toStream(stream)),
        "cudaEventRecord");
    return Status::success();
  }
  Status streamWaitEvent(StreamHandle stream, EventHandle event) override {
    MLART_CUDA_CHECK(cudaStreamWaitEvent(toStream(stream),
                                         static_cast<cudaEvent_t>(event), 0),
                     "cudaStreamWaitEvent");
    return Status::success();
  }
  bool supportsConcurrentStreams() const override { return true; }
  StatusOr<EventHandle> createOrderingEventRaw() override {
    cudaEvent_t e = nullptr;
    MLART_CUDA_CHECK(cudaSetDevice(ordinal_), "cudaSetDevice");
    MLART_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                     "cudaEventCreateWithFlags");
    return EventHandle(e);
  }
  void destroyOrderingEventRaw(EventHandle event) noexcept override {
    destroyEvent(event);
  }
  Status synchronizeEvent(EventHandle event) override {
    MLART_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)),
                     "cudaEventSynchronize");
    return Status::success();
  }
  StatusOr<float> elapsedMs(EventHandle start, EventHandle end) override {
    float ms = 0;
    MLART_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start),
                                          static_cast<cudaEvent_t>(end)),
                     "cudaEventElapsedTime");
    return ms;
  }

  size_t cachedBytes() const override {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (auto &kv : free_)
      n += kv.first;
    uint64_t reserved = 0, used = 0;
    if (ctx_.scratchPool &&
        cudaMemPoolGetAttribute(ctx_.scratchPool,
                                cudaMemPoolAttrReservedMemCurrent,
                                &reserved) == cudaSuccess &&
        cudaMemPoolGetAttribute(ctx_.scratchPool,
                                cudaMemPoolAttrUsedMemCurrent,
                                &used) == cudaSuccess &&
        reserved > used)
      n += size_t(reserved - used);
    return n;
  }
  size_t scratchBytes() const override {
    uint64_t reserved = 0;
    if (ctx_.scratchPool &&
        cudaMemPoolGetAttribute(ctx_.scratchPool,
                                cudaMemPoolAttrReservedMemCurrent,
                                &reserved) != cudaSuccess)
      return 0;
    return size_t(reserved);
  }
  Status emptyCache() override {
    std::lock_guard<std::mutex> lock(mu_);
    cudaSetDevice(ordinal_);
    Status first = Status::success();
    if (ctx_.scratchPool) {
      // The pool keeps what backs allocations still pending on a stream.
      cudaError_t e = cudaMemPoolTrimTo(ctx_.scratchPool, 0);
      if (e != cudaSuccess)
        first = cudaError(e, "cudaMemPoolTrimTo(scratch pool)");
    }
    for (auto &kv : free_) {
      cudaEventSynchronize(kv.second.ready);
      cudaEventDestroy(kv.second.ready);
      cudaError_t e = cudaFree(kv.second.ptr);
      if (e != cudaSuccess && first.ok())
        first = cudaError(e, "cudaFree");
    }
    free_.clear();
    return first;
  }

  void setSynchronousChecks(bool on) override { ctx_.synchronousChecks = on; }
  Status checkErrors(StreamHandle stream) override {
    std::lock_guard<std::mutex> lock(ctx_.recordMutex);
    Status s = readRecord(ctx_, toStream(stream), nullptr, nullptr, 1, 0,
                          nullptr);
    MLART_RETURN_IF_ERROR(resetRecord(ctx_, toStream(stream)));
    return s;
  }

protected:
  StatusOr<void *> allocateRaw(size_t bytes) override {
    const size_t size = roundSize(bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Best fit among blocks whose last use has completed; a block may be
      // up to twice the request.
      for (auto it = free_.lower_bound(size);
           it != free_.end() && it->first <= 2 * size; ++it) {
        if (cudaEventQuery(it->second.ready) == cudaSuccess) {
          void *p = it->second.ptr;
          cudaEventDestroy(it->second.ready);
          live_[p] = it->first;
          free_.erase(it);
          return p;
        }
      }
      cudaGetLastError(); // cudaEventQuery's cudaErrorNotReady is not sticky
    }
    MLART_CUDA_CHECK(cudaSetDevice(ordinal_), "cudaSetDevice");
    void *p = nullptr;
    cudaError_t e = cudaMalloc(&p, size);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      // Give the cached blocks back and try once more.
      MLART_RETURN_IF_ERROR(emptyCache());
      e = cudaMalloc(&p, size);
    }
    if (e != cudaSuccess)
      return cudaError(e, "cudaMalloc(" + std::to_string(bytes) + " bytes)");
    std::lock_guard<std::mutex> lock(mu_);
    live_[p] = size;
    return p;
  }
  void freeRaw(void *data, size_t) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(data);
    if (it == live_.end())
      return;
    cudaEvent_t ready = nullptr;
    cudaSetDevice(ordinal_);
    if (cudaEventCreateWithFlags(&ready, cudaEventDisableTiming) !=
            cudaSuccess ||
        cudaEventRecord(ready, cudaStreamLegacy) != cudaSuccess) {
      // Cannot track its last use: wait for the device, then free.
      cudaDeviceSynchronize();
      if (ready)
        cudaEventDestroy(ready);
      cudaFree(data);
    } else {
      free_.emplace(it->second, FreeBlock{data, ready});
    }
    live_.erase(it);
  }
  StatusOr<StreamHandle> createStreamRaw() override {
    MLART_CUDA_CHECK(cudaSetDevice(ordinal_), "cudaSetDevice");
    cudaStream_t s = nullptr;
    // Blocking streams: they order against the legacy default stream, on
    // which the allocator records the last use of freed blocks.
    MLART_CUDA_CHECK(cudaStreamCreate(&s), "cudaStreamCreate");
    return StreamHandle(s);
  }
  void destroyStreamRaw(StreamHandle stream) noexcept override {
    cudaStreamDestroy(toStream(stream));
  }

private:
  static cudaStream_t toStream(StreamHandle s) {
    return static_cast<cudaStream_t>(s);
  }
  Status copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
              StreamHandle stream, const char *what) {
    if (bytes == 0)
      return Status::success();
    if (!dst || !src)
      return invalidArgument(std::string(what) + ": null pointer");
    MLART_CUDA_CHECK(cudaSetDevice(ordinal_), "cudaSetDevice");
    MLART_CUDA_CHECK(
        cudaMemcpyAsync(dst, src, bytes, kind, toStream(stream)),
        std::string(what) + "(" + std::to_string(bytes) + " bytes)");
    return Status::success();
  }

  struct FreeBlock {
    void *ptr;
    cudaEvent_t ready;
  };
  int ordinal_;
  std::string name_;
  int sms_;
  size_t l2_;
  CudaContext ctx_;
  bool savedChecks_ = true;
  CudaKernelLibrary library_;
  CodegenModules codegen_;
  std::unique_ptr<Blas> blas_;
  std::unique_ptr<BlasLt> blasLt_;
  mutable std::mutex mu_;
  std::multimap<size_t, FreeBlock> free_;
  std::map<void *, size_t> live_;
};

} // namespace
} // namespace cuda

StatusOr<std::unique_ptr<CudaDevice>> createCudaDevice(int ordinal) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return unavailable(std::string("no CUDA GPU available (") +
                       cudaGetErrorName(e) + ": " + cudaGetErrorString(e) +
                       ")");
  }
  if (count == 0)
    return unavailable("no CUDA GPU available (0 devices)");
  if (ordinal < 0 || ordinal >= count)
    return invalidArgument("CUDA device " + std::to_string(ordinal) +
                           " does not exist (" + std::to_string(count) +
                           " devices)");
  cudaDeviceProp prop{};
  MLART_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal),
                   "cudaGetDeviceProperties");
  if (prop.major < 9)
    return unavailable(std::string("CUDA device ") + prop.name +
                       " is sm_" + std::to_string(prop.major * 10 + prop.minor) +
                       "; this build targets sm_90a");
  auto dev = std::make_unique<cuda::CudaDeviceImpl>(ordinal, prop);
  MLART_RETURN_IF_ERROR(dev->init());
  return std::unique_ptr<CudaDevice>(std::move(dev));
}

} // namespace mlart
