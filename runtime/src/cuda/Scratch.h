//===- Scratch.h - Stream-ordered scratch memory for one kernel call ------===//
//
// Kernels that need temporary device memory (split-KV partials, the
// prefill's expanded context) take it stream-ordered from the device's
// scratch pool: allocated before the launches, freed after them, reusable
// once the stream passes the free. A CUDA graph capture turns the pair into
// graph-owned allocation nodes, so captured steps work unchanged.
//
// Why a pool of our own: the device's default pool keeps nothing across a
// synchronisation (release threshold 0), so every eager call re-mapped its
// workspace -- about a millisecond for the 230 MB context expansion of a
// 4 x 1024-token prefill chunk. The scratch pool (CudaDevice) keeps what it
// has reserved until CudaDevice::emptyCache() trims it, like the caching
// allocator beside it. A context without a pool (benchmarks that build one
// by hand) falls back to the default pool.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_SCRATCH_H
#define MLART_CUDA_SCRATCH_H

#include "cuda/CudaCommon.h"

#include <cstdint>

namespace mlart::cuda {

/// One call's scratch block, freed (stream-ordered) when it goes out of
/// scope, on every return path.
class StreamScratch {
public:
  StreamScratch(const CudaContext &ctx, cudaStream_t stream)
      : pool_(ctx.scratchPool), stream_(stream) {}
  StreamScratch(const StreamScratch &) = delete;
  StreamScratch &operator=(const StreamScratch &) = delete;
  ~StreamScratch() {
    if (ptr_)
      (void)cudaFreeAsync(ptr_, stream_);
  }

  /// Allocates `bytes` (once per object); `what` names it in the error.
  Status allocate(size_t bytes, const char *what) {
    MLART_CUDA_CHECK(pool_ ? cudaMallocFromPoolAsync(&ptr_, bytes, pool_,
                                                     stream_)
                           : cudaMallocAsync(&ptr_, bytes, stream_),
                     what);
    return Status::success();
  }
  uint8_t *get() const { return static_cast<uint8_t *>(ptr_); }

private:
  cudaMemPool_t pool_;
  cudaStream_t stream_;
  void *ptr_ = nullptr;
};

} // namespace mlart::cuda

#endif // MLART_CUDA_SCRATCH_H
