//===- BlasLt.h - cuBLASLt GEMMs: linear (+ addend) and per-head (internal) -===//
//
// `out = x @ W^T + addend` needs D = A B + C with C != D, which cublasGemmEx
// cannot do (its C is D); cuBLASLt can. The per-head products of q_absorb
// and v_up run here too (strided-batched layouts), so every GEMM of a step
// offers cuBLASLt's candidates to Executor::tuneGraph. Like Blas, the
// library is dlopened
// (libcublasLt.so.13) on first use. Per shape the matmul descriptor, the four
// layouts and the chosen algorithm are created once and cached, and each
// stream gets one workspace on its first call, so a repeated call (and a
// stream capture of it) only launches: no descriptor creation, no
// allocation, no synchronisation.
//
// Knobs (Knobs.h, both on by default):
//   MLART_GEMM_LT          plain linears (no addend) and the per-head
//                          products through cuBLASLt too; 0: cublasGemmEx
//                          and cublasGemmStridedBatchedEx (an A/B switch).
//   MLART_GEMM_AUTOTUNE    on the first eager call of a shape, time the
//                          top heuristic algorithms with events and keep
//                          the fastest; during stream capture the cached
//                          (or heuristic-first) algorithm is used.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_BLASLT_H
#define MLART_CUDA_BLASLT_H

#include "cuda/BlasSupport.h"
#include "mlart/Kernels.h"
#include "mlart/StatusOr.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace mlart::cuda {

/// MLART_GEMM_LT: route plain linears and the per-head products (q_absorb,
/// v_up) through cuBLASLt.
bool ltForPlainGemms();
/// MLART_GEMM_AUTOTUNE: time the top heuristic algorithms once per shape.
bool gemmAutotuneEnabled();

/// Process-wide counters for tests: plans (descriptor sets) created,
/// autotunes run, cublasLtMatmul calls made (autotune runs included).
uint64_t blasLtPlanCount();
uint64_t blasLtAutotuneCount();
uint64_t blasLtLaunchCount();

/// One GEMM as cuBLASLt sees it, column-major: D[m, n] = op(A)[m, k] B[k, n]
/// (+ C), `batch` times at the given element strides. op(A) is A^T when
/// transA (a linear's [N, K] weight) and A otherwise (a per-head [K, N]
/// weight). Pointers of the first batch; C null: no addend.
struct LtGemm {
  DType dtype = DType::BF16;
  int64_t m = 0, n = 0, k = 0;
  bool transA = true;
  const void *a = nullptr;
  int64_t lda = 0, strideA = 0;
  const void *b = nullptr;
  int64_t ldb = 0, strideB = 0;
  const void *c = nullptr;
  int64_t ldc = 0;
  void *d = nullptr;
  int64_t ldd = 0, strideD = 0;
  int64_t batch = 1;

  /// out = x @ weight^T (+ addend): m = N, n = T, k = K.
  static LtGemm ofLinear(const LinearArgs &a);
  /// out[:, h, :] = x[:, h, :] @ w[h] for every head h: m = N, n = B,
  /// k = K, batch = H.
  static LtGemm ofPerHead(const TensorRef &x, const TensorRef &w,
                          const TensorRef &out);
};

class BlasLt {
public:
  BlasLt() = default;
  ~BlasLt();
  BlasLt(const BlasLt &) = delete;
  BlasLt &operator=(const BlasLt &) = delete;

  /// out = x @ weight^T (+ addend), bf16/f16/f32 storage, f32 compute, one
  /// rounding. Operands are checked by the caller (cpu::validateLinear and
  /// the GEMM type check); rows must have unit inner stride.
  Status linear(cudaStream_t stream, const LinearArgs &a);
  /// out[b, h, :] = x[b, h, :] @ w[h] (q_absorb, v_up), operands checked by
  /// the caller, unit inner strides.
  Status perHead(cudaStream_t stream, const TensorRef &x, const TensorRef &w,
                 const TensorRef &out);

  /// The candidate algorithms of `g`'s shape (cuBLASLt's heuristic, up to
  /// 8; planned on first use), and a fixed choice among them for every
  /// later call of that shape, replacing the per-shape autotune
  /// (Executor::tuneGraph picks it by replaying the step).
  StatusOr<int> algorithmCount(const LtGemm &g);
  Status chooseAlgorithm(const LtGemm &g, int index);

private:
  /// What fixes the descriptors and the algorithm: dtype, m, n, k, transA,
  /// the leading dimensions of A, B, D and C (0: none), the batch and its
  /// strides, and the alignments of the A, B, C and D pointers.
  using Key = std::array<int64_t, 17>;
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
    /// Candidates in heuristic order; `chosen` indexes them.
    std::vector<cublasLtMatmulHeuristicResult_t> algos;
    size_t chosen = 0;
    bool tuned = false;
  };

  static Key keyOf(const LtGemm &g);
  /// The plan of `g`'s shape (loads cuBLASLt, plans on first use); null for
  /// an empty product. The caller holds mu_.
  StatusOr<Plan *> planOf(const LtGemm &g);
  Status load();
  StatusOr<Plan *> plan(const Key &key, cudaDataType type);
  /// Runs `g` (planned, non-empty) with its chosen algorithm, autotuning
  /// first on its first eager call.
  Status gemm(cudaStream_t stream, const LtGemm &g);
  /// Times each candidate of `p` on `stream` and keeps the fastest.
  Status autotune(Plan &p, cudaStream_t stream, const LtGemm &g, void *ws);
  Status run(const Plan &p, size_t algo, cudaStream_t stream, const LtGemm &g,
             void *ws);
  void destroy(Plan &p);

  std::mutex mu_;
  bool tried_ = false;
  Status loadStatus_ = Status::success();
  void *lib_ = nullptr;
  cublasLtHandle_t handle_ = nullptr;
  std::map<Key, Plan> plans_;
  StreamWorkspaces workspaces_;

  cublasStatus_t (*create_)(cublasLtHandle_t *) = nullptr;
  cublasStatus_t (*destroy_)(cublasLtHandle_t) = nullptr;
  cublasStatus_t (*descCreate_)(cublasLtMatmulDesc_t *, cublasComputeType_t,
                                cudaDataType_t) = nullptr;
  cublasStatus_t (*descDestroy_)(cublasLtMatmulDesc_t) = nullptr;
  cublasStatus_t (*descSet_)(cublasLtMatmulDesc_t,
                             cublasLtMatmulDescAttributes_t, const void *,
                             size_t) = nullptr;
  cublasStatus_t (*layoutCreate_)(cublasLtMatrixLayout_t *, cudaDataType,
                                  uint64_t, uint64_t, int64_t) = nullptr;
  cublasStatus_t (*layoutDestroy_)(cublasLtMatrixLayout_t) = nullptr;
  cublasStatus_t (*layoutSet_)(cublasLtMatrixLayout_t,
                               cublasLtMatrixLayoutAttribute_t, const void *,
                               size_t) = nullptr;
  cublasStatus_t (*prefCreate_)(cublasLtMatmulPreference_t *) = nullptr;
  cublasStatus_t (*prefDestroy_)(cublasLtMatmulPreference_t) = nullptr;
  cublasStatus_t (*prefSet_)(cublasLtMatmulPreference_t,
                             cublasLtMatmulPreferenceAttributes_t,
                             const void *, size_t) = nullptr;
  cublasStatus_t (*heuristic_)(cublasLtHandle_t, cublasLtMatmulDesc_t,
                               cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                               cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                               cublasLtMatmulPreference_t, int,
                               cublasLtMatmulHeuristicResult_t *,
                               int *) = nullptr;
  cublasStatus_t (*matmul_)(cublasLtHandle_t, cublasLtMatmulDesc_t,
                            const void *, const void *, cublasLtMatrixLayout_t,
                            const void *, cublasLtMatrixLayout_t, const void *,
                            const void *, cublasLtMatrixLayout_t, void *,
                            cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *,
                            void *, size_t, cudaStream_t) = nullptr;
};

} // namespace mlart::cuda

#endif // MLART_CUDA_BLASLT_H
