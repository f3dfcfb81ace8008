//===- BlasLt.cu - cuBLASLt linear with an epilogue addend ----------------===//
#include "cuda/BlasLt.h"
#include "cuda/BlasSupport.h"
#include "cuda/Knobs.h"
#include "cuda/CudaCommon.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <dlfcn.h>

namespace mlart::cuda {

namespace {
/// Heuristic candidates kept per shape (the autotune's N).
constexpr int kCandidates = 8;
/// Timed runs per candidate when autotuning (after one warm-up run).
constexpr int kTimedRuns = 5;

Status ltError(cublasStatus_t st, const std::string &what) {
  return internalError(what + " failed with cuBLAS status " +
                       std::to_string(int(st)));
}

#define MLART_LT_CHECK(expr, what)                                             \
  do {                                                                         \
    cublasStatus_t mlart_lt_st_ = (expr);                                      \
    if (mlart_lt_st_ != CUBLAS_STATUS_SUCCESS)                                 \
      return ltError(mlart_lt_st_, (what));                                    \
  } while (0)

cudaDataType ltType(DType t) {
  switch (t) {
  case DType::F32:
    return CUDA_R_32F;
  case DType::F16:
    return CUDA_R_16F;
  default:
    return CUDA_R_16BF;
  }
}

/// The largest power of two (<= 256) dividing the address: the heuristic
/// must not pick a kernel that assumes more alignment than the pointer has.
int64_t alignmentOf(const void *p) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  int64_t a = 256;
  while (a > 1 && (v % uintptr_t(a)) != 0)
    a /= 2;
  return a;
}

/// A leading dimension cuBLASLt accepts: a single row (column in its
/// column-major view) may carry any stride, but ld must be >= rows.
int64_t leading(const TensorRef &t, int64_t rows) {
  return t.sizes[0] == 1 ? std::max<int64_t>(t.strides[0], rows)
                         : t.strides[0];
}

std::atomic<uint64_t> gPlans{0}, gAutotunes{0}, gLaunches{0};

} // namespace

bool ltForPlainLinear() { return knobValue(Knob::GemmLt) == 1; }
bool gemmAutotuneEnabled() { return knobValue(Knob::GemmAutotune) == 1; }

BlasLt::~BlasLt() {
  for (auto &entry : plans_)
    destroy(entry.second);
  if (handle_ && destroy_)
    destroy_(handle_);
  // The library stays loaded, as libcublas does (see Blas).
}

void BlasLt::destroy(Plan &p) {
  if (layoutDestroy_) {
    for (cublasLtMatrixLayout_t l : {p.a, p.b, p.c, p.d})
      if (l)
        layoutDestroy_(l);
  }
  if (p.desc && descDestroy_)
    descDestroy_(p.desc);
  p = Plan();
}

Status BlasLt::load() {
  if (tried_)
    return loadStatus_;
  tried_ = true;
  const char *names[] = {"libcublasLt.so.13", "libcublasLt.so",
                         "/usr/local/cuda/lib64/libcublasLt.so.13"};
  for (const char *n : names)
    if ((lib_ = dlopen(n, RTLD_NOW | RTLD_LOCAL)))
      break;
  if (!lib_)
    return loadStatus_ = unavailable(
               std::string("cuBLASLt not found (dlopen libcublasLt.so.13: ") +
               dlerror() + "); set LD_LIBRARY_PATH to the CUDA 13 libraries");
  if (!loadSymbol(lib_, "cublasLtCreate", create_) ||
      !loadSymbol(lib_, "cublasLtDestroy", destroy_) ||
      !loadSymbol(lib_, "cublasLtMatmulDescCreate", descCreate_) ||
      !loadSymbol(lib_, "cublasLtMatmulDescDestroy", descDestroy_) ||
      !loadSymbol(lib_, "cublasLtMatmulDescSetAttribute", descSet_) ||
      !loadSymbol(lib_, "cublasLtMatrixLayoutCreate", layoutCreate_) ||
      !loadSymbol(lib_, "cublasLtMatrixLayoutDestroy", layoutDestroy_) ||
      !loadSymbol(lib_, "cublasLtMatmulPreferenceCreate", prefCreate_) ||
      !loadSymbol(lib_, "cublasLtMatmulPreferenceDestroy", prefDestroy_) ||
      !loadSymbol(lib_, "cublasLtMatmulPreferenceSetAttribute", prefSet_) ||
      !loadSymbol(lib_, "cublasLtMatmulAlgoGetHeuristic", heuristic_) ||
      !loadSymbol(lib_, "cublasLtMatmul", matmul_))
    return loadStatus_ = unavailable("cuBLASLt lacks an expected entry point");
  cublasStatus_t st = create_(&handle_);
  if (st != CUBLAS_STATUS_SUCCESS)
    return loadStatus_ = unavailable("cublasLtCreate failed with status " +
                                     std::to_string(int(st)));
  return loadStatus_;
}

StatusOr<BlasLt::Plan *> BlasLt::plan(const Key &key, cudaDataType type) {
  auto it = plans_.find(key);
  if (it != plans_.end())
    return &it->second;
  const int64_t m = key[1], n = key[2], k = key[3];
  const int64_t ldw = key[4], ldx = key[5], ldo = key[6], ldc = key[7];
  Plan p;
  // Column-major: out^T [N, T] = (W as K x N)^T x^T [K, T] (+ addend^T).
  auto build = [&]() -> Status {
    MLART_LT_CHECK(descCreate_(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                   "cublasLtMatmulDescCreate");
    const int32_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
    MLART_LT_CHECK(descSet_(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT,
                            sizeof(opT)),
                   "cublasLtMatmulDescSetAttribute(TRANSA)");
    MLART_LT_CHECK(descSet_(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN,
                            sizeof(opN)),
                   "cublasLtMatmulDescSetAttribute(TRANSB)");
    MLART_LT_CHECK(layoutCreate_(&p.a, type, uint64_t(k), uint64_t(m), ldw),
                   "cublasLtMatrixLayoutCreate(weight)");
    MLART_LT_CHECK(layoutCreate_(&p.b, type, uint64_t(k), uint64_t(n), ldx),
                   "cublasLtMatrixLayoutCreate(x)");
    MLART_LT_CHECK(layoutCreate_(&p.c, type, uint64_t(m), uint64_t(n),
                                 ldc ? ldc : ldo),
                   "cublasLtMatrixLayoutCreate(addend)");
    MLART_LT_CHECK(layoutCreate_(&p.d, type, uint64_t(m), uint64_t(n), ldo),
                   "cublasLtMatrixLayoutCreate(out)");
    cublasLtMatmulPreference_t pref = nullptr;
    MLART_LT_CHECK(prefCreate_(&pref), "cublasLtMatmulPreferenceCreate");
    const uint64_t wsBytes = kBlasWorkspaceBytes;
    const uint32_t align[4] = {uint32_t(key[8]), uint32_t(key[9]),
                               uint32_t(key[10]), uint32_t(key[11])};
    cublasStatus_t st = prefSet_(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                 &wsBytes, sizeof(wsBytes));
    const cublasLtMatmulPreferenceAttributes_t alignAttr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; ++i)
      st = prefSet_(pref, alignAttr[i], &align[i], sizeof(align[i]));
    int found = 0;
    p.algos.resize(kCandidates);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = heuristic_(handle_, p.desc, p.a, p.b, p.c, p.d, pref, kCandidates,
                      p.algos.data(), &found);
    prefDestroy_(pref);
    MLART_LT_CHECK(st, "cublasLtMatmulAlgoGetHeuristic");
    p.algos.resize(size_t(std::max(found, 0)));
    p.algos.erase(std::remove_if(p.algos.begin(), p.algos.end(),
                                 [](const cublasLtMatmulHeuristicResult_t &r) {
                                   return r.state != CUBLAS_STATUS_SUCCESS;
                                 }),
                  p.algos.end());
    if (p.algos.empty())
      return unimplemented("cuBLASLt has no algorithm for linear m=" +
                           std::to_string(m) + " n=" + std::to_string(n) +
                           " k=" + std::to_string(k));
    return Status::success();
  };
  // Descriptor and heuristic calls are host work; should the first call of
  // a shape be captured, relaxed mode keeps any internal CUDA query from
  // invalidating the capture.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  MLART_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode),
                   "cudaThreadExchangeStreamCaptureMode");
  Status s = build();
  MLART_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode),
                   "cudaThreadExchangeStreamCaptureMode");
  if (!s.ok()) {
    destroy(p);
    return s;
  }
  gPlans.fetch_add(1, std::memory_order_relaxed);
  return &plans_.emplace(key, std::move(p)).first->second;
}

Status BlasLt::run(const Plan &p, size_t algo, cudaStream_t stream,
                   const LinearArgs &a, void *ws) {
  const float alpha = 1.0f, beta = a.addend.present() ? 1.0f : 0.0f;
  // Without an addend beta = 0 and C is not read; it names out's layout.
  const void *c = a.addend.present() ? a.addend.data : a.out.data;
  MLART_LT_CHECK(matmul_(handle_, p.desc, &alpha, a.weight.data, p.a,
                         a.x.data, p.b, &beta, c, p.c, a.out.data, p.d,
                         &p.algos[algo].algo, ws, kBlasWorkspaceBytes, stream),
                 "cublasLtMatmul");
  MLART_CUDA_CHECK_LAUNCH("cublasLtMatmul");
  gLaunches.fetch_add(1, std::memory_order_relaxed);
  return Status::success();
}

Status BlasLt::autotune(Plan &p, cudaStream_t stream, const LinearArgs &a,
                        void *ws) {
  cudaEvent_t start = nullptr, stop = nullptr;
  MLART_CUDA_CHECK(cudaEventCreate(&start), "cudaEventCreate");
  cudaError_t e = cudaEventCreate(&stop);
  if (e != cudaSuccess) {
    cudaEventDestroy(start);
    return cudaError(e, "cudaEventCreate");
  }
  auto timeOne = [&](size_t i, float &ms) -> Status {
    MLART_RETURN_IF_ERROR(run(p, i, stream, a, ws)); // warm-up
    MLART_CUDA_CHECK(cudaEventRecord(start, stream), "cudaEventRecord");
    for (int r = 0; r < kTimedRuns; ++r)
      MLART_RETURN_IF_ERROR(run(p, i, stream, a, ws));
    MLART_CUDA_CHECK(cudaEventRecord(stop, stream), "cudaEventRecord");
    MLART_CUDA_CHECK(cudaEventSynchronize(stop), "cudaEventSynchronize");
    MLART_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop),
                     "cudaEventElapsedTime");
    return Status::success();
  };
  Status result = Status::success();
  float best = 0.0f;
  size_t bestIndex = 0;
  for (size_t i = 0; i < p.algos.size(); ++i) {
    float ms = 0.0f;
    Status s = timeOne(i, ms);
    if (!s.ok()) {
      // A candidate the heuristic offered but that does not run is skipped;
      // the first one must run (it is what an untuned call uses).
      if (i == 0) {
        result = s;
        break;
      }
      continue;
    }
    if (i == 0 || ms < best) {
      best = ms;
      bestIndex = i;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  MLART_RETURN_IF_ERROR(result);
  p.chosen = bestIndex;
  p.tuned = true;
  gAutotunes.fetch_add(1, std::memory_order_relaxed);
  return Status::success();
}

BlasLt::Key BlasLt::keyOf(const LinearArgs &a) {
  const int64_t T = a.x.sizes[0], K = a.x.sizes[1], N = a.weight.sizes[0];
  const bool withAddend = a.addend.present();
  return {int64_t(a.out.dtype),
          N,
          T,
          K,
          leading(a.weight, K),
          leading(a.x, K),
          leading(a.out, N),
          withAddend ? leading(a.addend, N) : 0,
          alignmentOf(a.weight.data),
          alignmentOf(a.x.data),
          alignmentOf(withAddend ? a.addend.data : a.out.data),
          alignmentOf(a.out.data)};
}

StatusOr<BlasLt::Plan *> BlasLt::planOf(const LinearArgs &a) {
  MLART_RETURN_IF_ERROR(load());
  // An empty product (no rows, columns or K) runs no cuBLASLt algorithm.
  if (a.x.sizes[0] == 0 || a.weight.sizes[0] == 0 || a.x.sizes[1] == 0)
    return static_cast<Plan *>(nullptr);
  return plan(keyOf(a), ltType(a.out.dtype));
}

StatusOr<int> BlasLt::algorithmCount(const LinearArgs &a) {
  std::lock_guard<std::mutex> lock(mu_);
  MLART_ASSIGN_OR_RETURN(Plan *p, planOf(a));
  return p ? int(p->algos.size()) : 1;
}

Status BlasLt::chooseAlgorithm(const LinearArgs &a, int index) {
  std::lock_guard<std::mutex> lock(mu_);
  MLART_ASSIGN_OR_RETURN(Plan *p, planOf(a));
  const size_t count = p ? p->algos.size() : 1;
  if (index < 0 || size_t(index) >= count)
    return outOfRange("linear: algorithm " + std::to_string(index) + " of " +
                      std::to_string(count));
  if (p) {
    p->chosen = size_t(index);
    p->tuned = true; // the per-shape autotune must not replace it
  }
  return Status::success();
}

Status BlasLt::linear(cudaStream_t stream, const LinearArgs &a) {
  std::lock_guard<std::mutex> lock(mu_);
  MLART_RETURN_IF_ERROR(load());
  const int64_t T = a.x.sizes[0], K = a.x.sizes[1], N = a.weight.sizes[0];
  const bool withAddend = a.addend.present();
  const size_t es = dtypeSize(a.out.dtype);
  if (T == 0 || N == 0)
    return Status::success();
  if (K == 0) {
    // An empty product: out = addend (or 0); cuBLASLt rejects k = 0.
    if (withAddend && a.addend.data == a.out.data)
      return Status::success();
    if (withAddend)
      MLART_CUDA_CHECK(cudaMemcpy2DAsync(a.out.data, leading(a.out, N) * es,
                                         a.addend.data,
                                         leading(a.addend, N) * es, N * es, T,
                                         cudaMemcpyDeviceToDevice, stream),
                       "cudaMemcpy2DAsync (linear addend)");
    else
      MLART_CUDA_CHECK(cudaMemset2DAsync(a.out.data, leading(a.out, N) * es, 0,
                                         N * es, T, stream),
                       "cudaMemset2DAsync (linear)");
    return Status::success();
  }
  StatusOr<Plan *> p = plan(keyOf(a), ltType(a.out.dtype));
  MLART_RETURN_IF_ERROR(p.status());
  StatusOr<void *> ws = workspaces_.get(stream);
  MLART_RETURN_IF_ERROR(ws.status());
  Plan &planned = **p;
  // Autotuning runs the GEMM repeatedly: only eagerly (it synchronises), and
  // not in place (D = A B + D would accumulate).
  if (!planned.tuned && planned.algos.size() > 1 && gemmAutotuneEnabled() &&
      !(withAddend && a.addend.data == a.out.data)) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    MLART_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture),
                     "cudaStreamIsCapturing");
    if (capture == cudaStreamCaptureStatusNone)
      MLART_RETURN_IF_ERROR(autotune(planned, stream, a, *ws));
  }
  return run(planned, planned.chosen, stream, a, *ws);
}

uint64_t blasLtPlanCount() { return gPlans.load(std::memory_order_relaxed); }
uint64_t blasLtAutotuneCount() {
  return gAutotunes.load(std::memory_order_relaxed);
}
uint64_t blasLtLaunchCount() {
  return gLaunches.load(std::memory_order_relaxed);
}

} // namespace mlart::cuda
