//===- SkinnyGemm.h - Weight-resident split-K GEMM for M <= 64 (internal) -===//
//
// At decode batch sizes (M <= 64 rows) a projection is bound by streaming
// its weight from DRAM once, and cuBLAS's kernels cannot start that before
// the previous kernel ends. This kernel copies its weight slice while the
// previous kernel still runs (dependent launch). linear (also with an
// addend), qAbsorb and vUp (Blas.cu) try it first and fall back to cuBLAS
// when it does not apply.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_SKINNYGEMM_H
#define MLART_CUDA_SKINNYGEMM_H

#include "cuda/CudaCommon.h"
#include "cuda/SkinnyGemmDevice.h"
#include "cuda/SkinnyGemmPlan.h"

#include <optional>

namespace mlart::cuda {

/// True only when MLART_SKINNY_GEMM=1 (cuda/Knobs.h: read once; a benchmark
/// or a test compares both paths in one process with setKnobOverride).
bool skinnyGemmEnabled();
/// MLART_SKINNY_VARIANT: a digit 0..kSkinnyVariants - 1 selecting the
/// launch variant (skinnyVariant in SkinnyGemmPlan.h) for A/B runs; unset
/// or anything else: 0.
int skinnyGemmVariant();

/// The problem of linear (x [T, K] @ W[N, K]^T, + addend) or of a per-head
/// product (x [B, H, K] @ w[H, K, N]); nullopt for a dtype the kernel lacks
/// (it runs bf16 and f16; x, weight, out and addend of one type).
std::optional<SkinnyGemmProblem> linearProblem(const LinearArgs &a);
std::optional<SkinnyGemmProblem> perHeadProblem(const TensorRef &x,
                                                const TensorRef &w,
                                                const TensorRef &out);

/// The plan linear / qAbsorb / vUp would launch on the current device (of
/// `sms` SMs), nullopt when they would call cuBLAS (disabled, dtype, shape,
/// alignment, or slices too large for one wave).
std::optional<SkinnyGemmPlan> skinnyLinearPlan(const LinearArgs &a, int sms);
std::optional<SkinnyGemmPlan> skinnyPerHeadPlan(const TensorRef &x,
                                                const TensorRef &w,
                                                const TensorRef &out, int sms);

/// Launches the skinny kernel for checked operands when it applies.
/// Returns true when launched, false when the caller must use cuBLAS.
StatusOr<bool> skinnyLinear(CudaContext &ctx, const LinearArgs &a,
                            cudaStream_t stream);
StatusOr<bool> skinnyPerHead(CudaContext &ctx, const TensorRef &x,
                             const TensorRef &w, const TensorRef &out,
                             bool staticWeight, cudaStream_t stream);

/// The TMA + wgmma kernel's plan for a bf16 linear (SkinnyGemmTma.cu),
/// nullopt when it does not apply (then skinnyLinearPlan's kernel may).
std::optional<SkinnyTmaPlan> skinnyLinearTmaPlan(const LinearArgs &a,
                                                 int sms);
/// Launches the TMA kernel when it applies; false: it does not.
StatusOr<bool> skinnyLinearTma(CudaContext &ctx, const LinearArgs &a,
                               cudaStream_t stream);

/// Skinny launches in this process, both kernels (tests prove the path was
/// taken).
uint64_t skinnyGemmLaunchCount();

// --- Shared by the two kernels' launch code. -------------------------------
/// Where a launch writes, and whether it may read W before the wait.
struct SkinnyEpilogue {
  int64_t oRow = 0, oBatch = 0, oCol = 1;
  const TensorRef *addend = nullptr;
  bool staticWeight = false;
};
/// The kernels' view of `out` and the addend for an [m, n] result.
SkinnyOut skinnyOut(const TensorRef &out, const SkinnyEpilogue &epi,
                    int64_t m, int64_t n);
void countSkinnyLaunch();

} // namespace mlart::cuda

#endif // MLART_CUDA_SKINNYGEMM_H
