//===- BlasLt.cu - cuBLASLt GEMMs: linear (+ addend) and per-head ---------===//
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

bool ltForPlainGemms() { return knobValue(Knob::GemmLt) == 1; }
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
      !loadSymbol(lib_, "cublasLtMatrixLayoutSetAttribute", layoutSet_) ||
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
  const bool transA = key[4] != 0;
  const int64_t lda = key[5], ldb = key[6], ldd = key[7], ldc = key[8];
  const int64_t batch = key[9], strideA = key[10], strideB = key[11],
                strideD = key[12];
  Plan p;
  // Column-major D [m, n] = op(A) [m, k] B [k, n] (+ C), batch times.
  auto batched = [&](cublasLtMatrixLayout_t l, int64_t stride,
                     const char *what) -> Status {
    if (batch == 1)
      return Status::success();
    const int32_t count = int32_t(batch);
    MLART_LT_CHECK(layoutSet_(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                              sizeof(count)),
                   std::string("cublasLtMatrixLayoutSetAttribute(") + what +
                       " batch)");
    MLART_LT_CHECK(layoutSet_(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                              &stride, sizeof(stride)),
                   std::string("cublasLtMatrixLayoutSetAttribute(") + what +
                       " stride)");
    return Status::success();
  };
  auto build = [&]() -> Status {
    MLART_LT_CHECK(descCreate_(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                   "cublasLtMatmulDescCreate");
    const int32_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N, opN = CUBLAS_OP_N;
    MLART_LT_CHECK(descSet_(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA,
                            sizeof(opA)),
                   "cublasLtMatmulDescSetAttribute(TRANSA)");
    MLART_LT_CHECK(descSet_(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN,
                            sizeof(opN)),
                   "cublasLtMatmulDescSetAttribute(TRANSB)");
    MLART_LT_CHECK(layoutCreate_(&p.a, type, uint64_t(transA ? k : m),
                                 uint64_t(transA ? m : k), lda),
                   "cublasLtMatrixLayoutCreate(weight)");
    MLART_LT_CHECK(layoutCreate_(&p.b, type, uint64_t(k), uint64_t(n), ldb),
                   "cublasLtMatrixLayoutCreate(x)");
    MLART_LT_CHECK(layoutCreate_(&p.c, type, uint64_t(m), uint64_t(n),
                                 ldc ? ldc : ldd),
                   "cublasLtMatrixLayoutCreate(addend)");
    MLART_LT_CHECK(layoutCreate_(&p.d, type, uint64_t(m), uint64_t(n), ldd),
                   "cublasLtMatrixLayoutCreate(out)");
    MLART_RETURN_IF_ERROR(batched(p.a, strideA, "weight"));
    MLART_RETURN_IF_ERROR(batched(p.b, strideB, "x"));
    MLART_RETURN_IF_ERROR(batched(p.c, strideD, "addend"));
    MLART_RETURN_IF_ERROR(batched(p.d, strideD, "out"));
    cublasLtMatmulPreference_t pref = nullptr;
    MLART_LT_CHECK(prefCreate_(&pref), "cublasLtMatmulPreferenceCreate");
    const uint64_t wsBytes = kBlasWorkspaceBytes;
    const uint32_t align[4] = {uint32_t(key[13]), uint32_t(key[14]),
                               uint32_t(key[15]), uint32_t(key[16])};
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
      return unimplemented("cuBLASLt has no algorithm for m=" +
                           std::to_string(m) + " n=" + std::to_string(n) +
                           " k=" + std::to_string(k) + " batch=" +
                           std::to_string(batch));
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
                   const LtGemm &g, void *ws) {
  const float alpha = 1.0f, beta = g.c ? 1.0f : 0.0f;
  // Without an addend beta = 0 and C is not read; it names out's layout.
  MLART_LT_CHECK(matmul_(handle_, p.desc, &alpha, g.a, p.a, g.b, p.b, &beta,
                         g.c ? g.c : g.d, p.c, g.d, p.d, &p.algos[algo].algo,
                         ws, kBlasWorkspaceBytes, stream),
                 "cublasLtMatmul");
  MLART_CUDA_CHECK_LAUNCH("cublasLtMatmul");
  gLaunches.fetch_add(1, std::memory_order_relaxed);
  return Status::success();
}

Status BlasLt::autotune(Plan &p, cudaStream_t stream, const LtGemm &g,
                        void *ws) {
  cudaEvent_t start = nullptr, stop = nullptr;
  MLART_CUDA_CHECK(cudaEventCreate(&start), "cudaEventCreate");
  cudaError_t e = cudaEventCreate(&stop);
  if (e != cudaSuccess) {
    cudaEventDestroy(start);
    return cudaError(e, "cudaEventCreate");
  }
  auto timeOne = [&](size_t i, float &ms) -> Status {
    MLART_RETURN_IF_ERROR(run(p, i, stream, g, ws)); // warm-up
    MLART_CUDA_CHECK(cudaEventRecord(start, stream), "cudaEventRecord");
    for (int r = 0; r < kTimedRuns; ++r)
      MLART_RETURN_IF_ERROR(run(p, i, stream, g, ws));
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

LtGemm LtGemm::ofLinear(const LinearArgs &a) {
  // Column-major: out^T [N, T] = (W as K x N)^T x^T [K, T] (+ addend^T).
  const int64_t T = a.x.sizes[0], K = a.x.sizes[1], N = a.weight.sizes[0];
  LtGemm g;
  g.dtype = a.out.dtype;
  g.m = N;
  g.n = T;
  g.k = K;
  g.transA = true;
  g.a = a.weight.data;
  g.lda = leading(a.weight, K);
  g.b = a.x.data;
  g.ldb = leading(a.x, K);
  if (a.addend.present()) {
    g.c = a.addend.data;
    g.ldc = leading(a.addend, N);
  }
  g.d = a.out.data;
  g.ldd = leading(a.out, N);
  return g;
}

LtGemm LtGemm::ofPerHead(const TensorRef &x, const TensorRef &w,
                         const TensorRef &out) {
  // Per head: out_h [B, N] = x_h [B, K] @ w_h [K, N] (row-major), i.e.
  // column-major out_h^T = w_h^T x_h^T with w_h^T [N, K] at ld w.strides[1].
  const int64_t B = x.sizes[0], H = x.sizes[1], K = x.sizes[2],
                N = w.sizes[2];
  LtGemm g;
  g.dtype = out.dtype;
  g.m = N;
  g.n = B;
  g.k = K;
  g.transA = false;
  g.a = w.data;
  // A single row (or column) may carry any stride; ld must cover it.
  g.lda = K == 1 ? std::max<int64_t>(w.strides[1], N) : w.strides[1];
  g.strideA = w.strides[0];
  g.b = x.data;
  g.ldb = B == 1 ? std::max<int64_t>(x.strides[0], K) : x.strides[0];
  g.strideB = x.strides[1];
  g.d = out.data;
  g.ldd = B == 1 ? std::max<int64_t>(out.strides[0], N) : out.strides[0];
  g.strideD = out.strides[1];
  g.batch = H;
  return g;
}

BlasLt::Key BlasLt::keyOf(const LtGemm &g) {
  return {int64_t(g.dtype),
          g.m,
          g.n,
          g.k,
          g.transA ? 1 : 0,
          g.lda,
          g.ldb,
          g.ldd,
          g.c ? g.ldc : 0,
          g.batch,
          g.batch > 1 ? g.strideA : 0,
          g.batch > 1 ? g.strideB : 0,
          g.batch > 1 ? g.strideD : 0,
          alignmentOf(g.a),
          alignmentOf(g.b),
          alignmentOf(g.c ? g.c : g.d),
          alignmentOf(g.d)};
}

StatusOr<BlasLt::Plan *> BlasLt::planOf(const LtGemm &g) {
  MLART_RETURN_IF_ERROR(load());
  // An empty product (no rows, columns, K or batch) runs no algorithm.
  if (g.m == 0 || g.n == 0 || g.k == 0 || g.batch == 0)
    return static_cast<Plan *>(nullptr);
  return plan(keyOf(g), ltType(g.dtype));
}

StatusOr<int> BlasLt::algorithmCount(const LtGemm &g) {
  std::lock_guard<std::mutex> lock(mu_);
  MLART_ASSIGN_OR_RETURN(Plan *p, planOf(g));
  return p ? int(p->algos.size()) : 1;
}

Status BlasLt::chooseAlgorithm(const LtGemm &g, int index) {
  std::lock_guard<std::mutex> lock(mu_);
  MLART_ASSIGN_OR_RETURN(Plan *p, planOf(g));
  const size_t count = p ? p->algos.size() : 1;
  if (index < 0 || size_t(index) >= count)
    return outOfRange("gemm: algorithm " + std::to_string(index) + " of " +
                      std::to_string(count));
  if (p) {
    p->chosen = size_t(index);
    p->tuned = true; // the per-shape autotune must not replace it
  }
  return Status::success();
}

Status BlasLt::gemm(cudaStream_t stream, const LtGemm &g) {
  StatusOr<Plan *> p = plan(keyOf(g), ltType(g.dtype));
  MLART_RETURN_IF_ERROR(p.status());
  StatusOr<void *> ws = workspaces_.get(stream);
  MLART_RETURN_IF_ERROR(ws.status());
  Plan &planned = **p;
  // Autotuning runs the GEMM repeatedly: only eagerly (it synchronises), and
  // not in place (D = A B + D would accumulate).
  if (!planned.tuned && planned.algos.size() > 1 && gemmAutotuneEnabled() &&
      !(g.c && g.c == g.d)) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    MLART_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture),
                     "cudaStreamIsCapturing");
    if (capture == cudaStreamCaptureStatusNone)
      MLART_RETURN_IF_ERROR(autotune(planned, stream, g, *ws));
  }
  return run(planned, planned.chosen, stream, g, *ws);
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
  return gemm(stream, LtGemm::ofLinear(a));
}

Status BlasLt::perHead(cudaStream_t stream, const TensorRef &x,
                       const TensorRef &w, const TensorRef &out) {
  std::lock_guard<std::mutex> lock(mu_);
  MLART_RETURN_IF_ERROR(load());
  const int64_t B = x.sizes[0], H = x.sizes[1], K = x.sizes[2],
                N = w.sizes[2];
  if (B == 0 || H == 0 || N == 0)
    return Status::success();
  if (K == 0) {
    // An empty product is zero; cuBLASLt rejects k = 0.
    const size_t es = dtypeSize(out.dtype);
    for (int64_t h = 0; h < H; ++h)
      MLART_CUDA_CHECK(
          cudaMemset2DAsync(static_cast<uint8_t *>(out.data) +
                                h * out.strides[1] * int64_t(es),
                            size_t(std::max<int64_t>(out.strides[0], N)) * es,
                            0, size_t(N) * es, size_t(B), stream),
          "cudaMemset2DAsync (per-head GEMM)");
    return Status::success();
  }
  return gemm(stream, LtGemm::ofPerHead(x, w, out));
}

uint64_t blasLtPlanCount() { return gPlans.load(std::memory_order_relaxed); }
uint64_t blasLtAutotuneCount() {
  return gAutotunes.load(std::memory_order_relaxed);
}
uint64_t blasLtLaunchCount() {
  return gLaunches.load(std::memory_order_relaxed);
}

} // namespace mlart::cuda
