//===- BlasSupport.cu - Per-stream BLAS workspaces ------------------------===//
#include "cuda/BlasSupport.h"
#include "cuda/CudaCommon.h"

namespace mlart::cuda {

StreamWorkspaces::~StreamWorkspaces() {
  for (auto &entry : entries_)
    cudaFree(entry.second);
}

StatusOr<void *> StreamWorkspaces::get(cudaStream_t stream) {
  for (auto &entry : entries_)
    if (entry.first == stream)
      return entry.second;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  MLART_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode),
                   "cudaThreadExchangeStreamCaptureMode");
  void *ws = nullptr;
  cudaError_t e = cudaMalloc(&ws, kBlasWorkspaceBytes);
  cudaError_t restore = cudaThreadExchangeStreamCaptureMode(&mode);
  MLART_CUDA_CHECK(e, "cudaMalloc (BLAS workspace)");
  if (restore != cudaSuccess) {
    cudaFree(ws);
    return cudaError(restore, "cudaThreadExchangeStreamCaptureMode");
  }
  entries_.emplace_back(stream, ws);
  return ws;
}

} // namespace mlart::cuda
