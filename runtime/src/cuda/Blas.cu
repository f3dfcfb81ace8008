//===- Blas.cu - qAbsorb, vUp and linear: skinny kernel, cuBLAS(Lt) -------===//
#include "cuda/Blas.h"
#include "cuda/BlasSupport.h"
#include "cuda/BlasLt.h"
#include "cuda/CudaCommon.h"
#include "cuda/SkinnyGemm.h"
#include "cpu/LinearCheck.h"
#include "cpu/TensorAccess.h"

#include <algorithm>
#include <dlfcn.h>

namespace mlart::cuda {

namespace {
} // namespace

Blas::~Blas() {
  if (handle_ && destroy_)
    destroy_(handle_);
  // The library stays loaded: unloading it at exit races with its own
  // destructors.
}

Status Blas::load() {
  if (tried_)
    return loadStatus_;
  tried_ = true;
  const char *names[] = {"libcublas.so.13", "libcublas.so",
                         "/usr/local/cuda/lib64/libcublas.so.13"};
  for (const char *n : names)
    if ((lib_ = dlopen(n, RTLD_NOW | RTLD_LOCAL)))
      break;
  if (!lib_)
    return loadStatus_ = unavailable(
               std::string("cuBLAS not found (dlopen libcublas.so.13: ") +
               dlerror() + "); set LD_LIBRARY_PATH to the CUDA 13 libraries");
  if (!loadSymbol(lib_, "cublasCreate_v2", create_) ||
      !loadSymbol(lib_, "cublasDestroy_v2", destroy_) ||
      !loadSymbol(lib_, "cublasSetStream_v2", setStream_) ||
      !loadSymbol(lib_, "cublasSetWorkspace_v2", setWorkspace_) ||
      !loadSymbol(lib_, "cublasGemmEx", gemmEx_) ||
      !loadSymbol(lib_, "cublasGemmStridedBatchedEx", gemmBatched_))
    return loadStatus_ = unavailable("cuBLAS lacks an expected entry point");
  cublasStatus_t st = create_(&handle_);
  if (st != CUBLAS_STATUS_SUCCESS)
    return loadStatus_ = unavailable("cublasCreate failed with status " +
                                     std::to_string(int(st)));
  return loadStatus_;
}

// cublasSetStream resets the handle's workspace to cuBLAS's default pool, so
// the stream's own workspace is set after it on every call. One workspace a
// stream (as PyTorch keys them by handle and stream): GEMMs that the
// executor runs concurrently on two streams must not share scratch memory.
Status Blas::useStream(cudaStream_t stream) {
  cublasStatus_t st = setStream_(handle_, stream);
  if (st != CUBLAS_STATUS_SUCCESS)
    return internalError("cublasSetStream failed with status " +
                         std::to_string(int(st)));
  MLART_ASSIGN_OR_RETURN(void *workspace, workspaces_.get(stream));
  st = setWorkspace_(handle_, workspace, kBlasWorkspaceBytes);
  if (st != CUBLAS_STATUS_SUCCESS)
    return internalError("cublasSetWorkspace failed with status " +
                         std::to_string(int(st)));
  return Status::success();
}

Status Blas::gemm(cudaStream_t stream, cublasOperation_t ta,
                  cublasOperation_t tb, int m, int n, int k, const void *a,
                  cudaDataType at, int64_t lda, int64_t strideA, const void *b,
                  cudaDataType bt, int64_t ldb, int64_t strideB, void *c,
                  cudaDataType ct, int64_t ldc, int64_t strideC, int batch) {
  std::lock_guard<std::mutex> lock(mu_);
  MLART_RETURN_IF_ERROR(load());
  if (m == 0 || n == 0 || batch == 0)
    return Status::success();
  const float alpha = 1.0f, beta = 0.0f;
  MLART_RETURN_IF_ERROR(useStream(stream));
  cublasStatus_t st;
  if (batch == 1)
    st = gemmEx_(handle_, ta, tb, m, n, k, &alpha, a, at, int(lda), b, bt,
                 int(ldb), &beta, c, ct, int(ldc), CUBLAS_COMPUTE_32F,
                 CUBLAS_GEMM_DEFAULT);
  else
    st = gemmBatched_(handle_, ta, tb, m, n, k, &alpha, a, at, int(lda),
                      strideA, b, bt, int(ldb), strideB, &beta, c, ct,
                      int(ldc), strideC, batch, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS)
    return internalError("cuBLAS GEMM failed with status " +
                         std::to_string(int(st)) + " (m=" + std::to_string(m) +
                         " n=" + std::to_string(n) + " k=" +
                         std::to_string(k) + " batch=" +
                         std::to_string(batch) + ")");
  MLART_CUDA_CHECK_LAUNCH("cuBLAS GEMM");
  return Status::success();
}

namespace {
cudaDataType cudaType(DType t) {
  switch (t) {
  case DType::F32:
    return CUDA_R_32F;
  case DType::F16:
    return CUDA_R_16F;
  default:
    return CUDA_R_16BF;
  }
}

Status checkGemmTypes(const TensorRef &x, const TensorRef &w,
                      const TensorRef &out, const char *what) {
  if (x.dtype != w.dtype || x.dtype != out.dtype || !isFloatType(x.dtype))
    return unimplemented(std::string(what) +
                         " on CUDA needs x, weight and out of one type "
                         "(bf16, f16 or f32), got " +
                         x.describe() + ", " + w.describe() + ", " +
                         out.describe());
  return Status::success();
}

/// The operand checks of out[b, h, :] = x[b, h, :] @ w[h].
Status checkPerHead(const TensorRef &x, const char *xName, const TensorRef &w,
                    const char *wName, const TensorRef &out,
                    const char *what) {
  using namespace mlart::cpu;
  MLART_RETURN_IF_ERROR(checkFloatTensor(x, xName, 3));
  MLART_RETURN_IF_ERROR(checkFloatTensor(w, wName, 3));
  MLART_RETURN_IF_ERROR(checkFloatTensor(out, "out", 3));
  MLART_RETURN_IF_ERROR(checkDim(w, wName, 0, x.sizes[1]));
  MLART_RETURN_IF_ERROR(checkDim(w, wName, 1, x.sizes[2]));
  MLART_RETURN_IF_ERROR(checkDim(out, "out", 0, x.sizes[0]));
  MLART_RETURN_IF_ERROR(checkDim(out, "out", 1, x.sizes[1]));
  MLART_RETURN_IF_ERROR(checkDim(out, "out", 2, w.sizes[2]));
  return checkGemmTypes(x, w, out, what);
}

Status perHead(CudaContext &ctx, const TensorRef &x, const char *xName,
               const TensorRef &w, const char *wName, const TensorRef &out,
               bool staticWeight, cudaStream_t stream, const char *what) {
  MLART_RETURN_IF_ERROR(checkPerHead(x, xName, w, wName, out, what));
  StatusOr<bool> skinny = skinnyPerHead(ctx, x, w, out, staticWeight, stream);
  if (!skinny.ok() || *skinny)
    return skinny.status();
  if (ltForPlainGemms())
    return ctx.blasLt->perHead(stream, x, w, out);
  const int64_t B = x.sizes[0], H = x.sizes[1], K = x.sizes[2],
                N = w.sizes[2];
  // Per head: out_h [B, N] = x_h [B, K] @ w_h [K, N] (row-major), i.e.
  // column-major out_h^T = w_h^T x_h^T.
  // A size-1 batch dimension may carry any stride; cuBLAS wants ld >= rows.
  const int64_t ldx = B == 1 ? std::max<int64_t>(x.strides[0], K) : x.strides[0];
  const int64_t ldo = B == 1 ? std::max<int64_t>(out.strides[0], N)
                             : out.strides[0];
  return ctx.blas->gemm(stream, CUBLAS_OP_N, CUBLAS_OP_N, int(N), int(B),
                        int(K), w.data, cudaType(w.dtype), w.strides[1],
                        w.strides[0], x.data, cudaType(x.dtype), ldx,
                        x.strides[1], out.data, cudaType(out.dtype), ldo,
                        out.strides[1], int(H));
}
} // namespace

Status qAbsorb(CudaContext &ctx, const QAbsorbArgs &a, cudaStream_t s) {
  return perHead(ctx, a.qNope, "qNope", a.wUK, "wUK", a.out, a.staticWeight,
                 s, "qAbsorb");
}

Status vUp(CudaContext &ctx, const VUpArgs &a, cudaStream_t s) {
  return perHead(ctx, a.oLatent, "oLatent", a.wUV, "wUV", a.out,
                 a.staticWeight, s, "vUp");
}

/// Past the skinny kernel, linear's route: cuBLASLt for the residual in the
/// epilogue (D = A B + C with C != D) and, by default, for plain linears.
static bool cublasLtRuns(const LinearArgs &a) {
  return a.addend.present() || ltForPlainGemms();
}

/// Whether linear hands `a` to cuBLASLt (the dispatch of linear below).
static StatusOr<bool> linearUsesLt(CudaContext &ctx, const LinearArgs &a) {
  MLART_RETURN_IF_ERROR(cpu::validateLinear(a));
  MLART_RETURN_IF_ERROR(checkGemmTypes(a.x, a.weight, a.out, "linear"));
  if (skinnyLinearTmaPlan(a, ctx.smCount) || skinnyLinearPlan(a, ctx.smCount))
    return false;
  return cublasLtRuns(a);
}

/// The one algorithm of a GEMM that cuBLASLt does not run.
static Status onlyAlgorithm(const char *what, int index) {
  return index == 0 ? Status::success()
                    : outOfRange(std::string(what) +
                                 ": this call has one algorithm, not " +
                                 std::to_string(index + 1));
}

StatusOr<int> linearAlgorithmCount(CudaContext &ctx, const LinearArgs &a) {
  MLART_ASSIGN_OR_RETURN(bool lt, linearUsesLt(ctx, a));
  return lt ? ctx.blasLt->algorithmCount(LtGemm::ofLinear(a))
            : StatusOr<int>(1);
}

Status chooseLinearAlgorithm(CudaContext &ctx, const LinearArgs &a,
                             int index) {
  MLART_ASSIGN_OR_RETURN(bool lt, linearUsesLt(ctx, a));
  if (lt)
    return ctx.blasLt->chooseAlgorithm(LtGemm::ofLinear(a), index);
  return onlyAlgorithm("linear", index);
}

/// Whether perHead hands the product to cuBLASLt (its dispatch above).
static StatusOr<bool> perHeadUsesLt(CudaContext &ctx, const PerHeadGemmArgs &a) {
  MLART_RETURN_IF_ERROR(checkPerHead(a.x, "x", a.w, "w", a.out, "per-head GEMM"));
  if (skinnyPerHeadPlan(a.x, a.w, a.out, ctx.smCount))
    return false;
  return ltForPlainGemms();
}

StatusOr<int> perHeadAlgorithmCount(CudaContext &ctx,
                                    const PerHeadGemmArgs &a) {
  MLART_ASSIGN_OR_RETURN(bool lt, perHeadUsesLt(ctx, a));
  return lt ? ctx.blasLt->algorithmCount(LtGemm::ofPerHead(a.x, a.w, a.out))
            : StatusOr<int>(1);
}

Status choosePerHeadAlgorithm(CudaContext &ctx, const PerHeadGemmArgs &a,
                              int index) {
  MLART_ASSIGN_OR_RETURN(bool lt, perHeadUsesLt(ctx, a));
  if (lt)
    return ctx.blasLt->chooseAlgorithm(LtGemm::ofPerHead(a.x, a.w, a.out),
                                       index);
  return onlyAlgorithm("per-head GEMM", index);
}

Status linear(CudaContext &ctx, const LinearArgs &a, cudaStream_t s) {
  MLART_RETURN_IF_ERROR(cpu::validateLinear(a));
  const int64_t T = a.x.sizes[0], K = a.x.sizes[1], N = a.weight.sizes[0];
  MLART_RETURN_IF_ERROR(checkGemmTypes(a.x, a.weight, a.out, "linear"));
  StatusOr<bool> skinny = skinnyLinear(ctx, a, s);
  if (!skinny.ok() || *skinny)
    return skinny.status();
  if (cublasLtRuns(a))
    return ctx.blasLt->linear(s, a);
  // Column-major: out^T [N, T] = W [N, K] (stored as K x N col-major, op T)
  // times x^T [K, T].
  return ctx.blas->gemm(s, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(T), int(K),
                        a.weight.data, cudaType(a.weight.dtype),
                        a.weight.strides[0], 0, a.x.data, cudaType(a.x.dtype),
                        a.x.strides[0], 0, a.out.data, cudaType(a.out.dtype),
                        a.out.strides[0], 0, 1);
}

} // namespace mlart::cuda
