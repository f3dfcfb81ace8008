//===- Blas.h - cuBLAS, loaded with dlopen on first use (internal) --------===//
//
// No static cuBLAS ships with this toolkit, so linking libcublas.so would tie
// every binary (and every GPU-less CI run) to it. Instead the few entry
// points are resolved from libcublas.so.13 at the first GEMM; a missing
// library is an Unavailable status for the GEMM kernels only.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_BLAS_H
#define MLART_CUDA_BLAS_H

#include "mlart/Status.h"

#include "cuda/BlasSupport.h"

#include <cublas_v2.h>

#include <mutex>

namespace mlart::cuda {

class Blas {
public:
  Blas() = default;
  ~Blas();
  /// C = op(A) op(B) in column-major cuBLAS terms; f32 accumulation.
  Status gemm(cudaStream_t stream, cublasOperation_t ta, cublasOperation_t tb,
              int m, int n, int k, const void *a, cudaDataType at, int64_t lda,
              int64_t strideA, const void *b, cudaDataType bt, int64_t ldb,
              int64_t strideB, void *c, cudaDataType ct, int64_t ldc,
              int64_t strideC, int batch);

private:
  Status load();
  /// Points the handle at `stream` and that stream's workspace.
  Status useStream(cudaStream_t stream);
  std::mutex mu_;
  bool tried_ = false;
  Status loadStatus_ = Status::success();
  void *lib_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  StreamWorkspaces workspaces_; ///< see useStream
  cublasStatus_t (*create_)(cublasHandle_t *) = nullptr;
  cublasStatus_t (*destroy_)(cublasHandle_t) = nullptr;
  cublasStatus_t (*setStream_)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*setWorkspace_)(cublasHandle_t, void *, size_t) = nullptr;
  cublasStatus_t (*gemmEx_)(cublasHandle_t, cublasOperation_t,
                            cublasOperation_t, int, int, int, const void *,
                            const void *, cudaDataType, int, const void *,
                            cudaDataType, int, const void *, void *,
                            cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*gemmBatched_)(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
      const void *, const void *, cudaDataType, int, long long, const void *,
      cudaDataType, int, long long, const void *, void *, cudaDataType, int,
      long long, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

} // namespace mlart::cuda

#endif // MLART_CUDA_BLAS_H
