//===- SkinnyGemmTest.cpp - The M <= 64 GEMM path against the CPU reference ===//
//
// linear, qAbsorb and vUp with MLART_SKINNY_GEMM on (the skinny kernel,
// proven taken by its launch counter) and off (cuBLAS): fresh random inputs,
// outputs as strided views into poisoned buffers whose other bytes must
// survive, every decode-step shape at M in {1, 7, 16, 33, 64}.
//
//===----------------------------------------------------------------------===//
#include "CudaTestUtil.h"

#include "cuda/Knobs.h"
#include "cuda/SkinnyGemm.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstdio>
#include <string>
#include <tuple>

using namespace mlart;
using namespace mlart::cudatest;

namespace {

const KernelLibrary &cpu() { return cpuKernelLibrary(); }

/// Forces a knob (read once from the environment) for one scope.
struct KnobScope {
  KnobScope(cuda::Knob knob, int value) : knob(knob) {
    cuda::setKnobOverride(knob, value);
  }
  ~KnobScope() { cuda::setKnobOverride(knob, std::nullopt); }
  cuda::Knob knob;
};

/// MLART_SKINNY_GEMM for one scope.
struct SkinnyEnv : KnobScope {
  explicit SkinnyEnv(bool on) : KnobScope(cuda::Knob::SkinnyGemm, on) {}
};

/// MLART_SKINNY_VARIANT for one scope.
struct VariantEnv : KnobScope {
  explicit VariantEnv(int v) : KnobScope(cuda::Knob::SkinnyVariant, v) {}
};

Arr randomArr(CudaDevice *d, DType t, std::vector<int64_t> s, float lo = -1,
              float hi = 1) {
  Arr a(d, t, std::move(s));
  a.random(lo, hi);
  a.up(d);
  return a;
}

/// A view of `a` (host or device copy) at element `offset` with `sizes`
/// and `strides`.
TensorRef view(Arr &a, bool device, int64_t offset,
               std::vector<int64_t> sizes, std::vector<int64_t> strides) {
  TensorRef t;
  t.data = static_cast<uint8_t *>(device ? a.dev.data() : a.host.data()) +
           offset * int64_t(dtypeSize(a.dt));
  t.dtype = a.dt;
  t.rank = int(sizes.size());
  for (int d = 0; d < t.rank; ++d) {
    t.sizes[d] = sizes[size_t(d)];
    t.strides[d] = strides[size_t(d)];
  }
  return t;
}

/// Relative L2 error of `got` against the reference `ref.host` over the
/// elements of the view (offset, sizes, strides); every byte outside the
/// view must equal `poisoned`.
void expectView(const Arr &ref, const std::vector<uint8_t> &got,
                const std::vector<uint8_t> &poisoned, int64_t offset,
                const std::vector<int64_t> &sizes,
                const std::vector<int64_t> &strides, double tol) {
  const size_t es = dtypeSize(ref.dt);
  std::vector<bool> inView(size_t(ref.numel()), false);
  double num = 0, den = 0;
  int64_t nan = 0;
  std::vector<int64_t> idx(sizes.size(), 0);
  for (bool done = sizes.empty(); !done;) {
    int64_t e = offset;
    for (size_t d = 0; d < sizes.size(); ++d)
      e += idx[d] * strides[d];
    inView[size_t(e)] = true;
    const double r = loadAsFloat(ref.host.data(), ref.dt, size_t(e));
    const double g = loadAsFloat(got.data(), ref.dt, size_t(e));
    if (std::isnan(g))
      ++nan;
    num += (g - r) * (g - r);
    den += r * r;
    done = true;
    for (size_t d = sizes.size(); d-- > 0;)
      if (++idx[d] < sizes[d]) {
        done = false;
        break;
      } else {
        idx[d] = 0;
      }
  }
  EXPECT_EQ(nan, 0) << "unwritten (NaN) elements in the view";
  EXPECT_LT(std::sqrt(num / std::max(den, 1e-30)), tol);
  int64_t touched = 0;
  for (int64_t e = 0; e < ref.numel(); ++e)
    if (!inView[size_t(e)] &&
        std::memcmp(got.data() + e * es, poisoned.data() + e * es, es) != 0)
      ++touched;
  EXPECT_EQ(touched, 0) << "elements written outside the view";
}

/// The tolerance of the existing GEMM tests: bf16 (f16) output rounding.
constexpr double kTol = 1e-2;

/// linear x [M, K] (a view of [M, K + xPad]) @ W [N, K]^T (+ a random
/// [M, N] addend, the residual) into the [M, N] view at (1, 8) of a
/// poisoned [M + 2, N + 24] buffer, skinny on and off.
void checkLinear(CudaDevice *dev, DType dt, int64_t M, int64_t N, int64_t K,
                 bool expectSkinny, int64_t xPad = 0, bool addend = false) {
  SCOPED_TRACE(std::string(dtypeName(dt)) + " linear M=" + std::to_string(M) +
               " N=" + std::to_string(N) + " K=" + std::to_string(K) +
               " xPad=" + std::to_string(xPad) +
               (addend ? " + addend" : ""));
  Arr x = randomArr(dev, dt, {M, K + xPad});
  Arr w = randomArr(dev, dt, {N, K}, -0.1f, 0.1f);
  Arr r = randomArr(dev, dt, {M, N});
  const int64_t C = N + 24, off = C + 8;
  Arr out(dev, dt, {M + 2, C});
  out.poison();
  const std::vector<uint8_t> poisoned = out.host;
  auto args = [&](bool device, bool staticWeight = false) {
    LinearArgs a{view(x, device, 0, {M, K}, {K + xPad, 1}),
                 device ? w.d() : w.h(),
                 view(out, device, off, {M, N}, {C, 1})};
    if (addend)
      a.addend = device ? r.d() : r.h();
    a.staticWeight = staticWeight;
    return a;
  };
  Status s = cpu().linear(args(false), nullptr);
  ASSERT_TRUE(s.ok()) << s.message();
  std::vector<uint8_t> first;
  for (bool on : {true, false}) {
    SCOPED_TRACE(on ? "skinny on" : "skinny off");
    SkinnyEnv env(on);
    EXPECT_EQ(cuda::skinnyLinearPlan(args(true), dev->multiprocessorCount())
                  .has_value(),
              on && expectSkinny);
    for (int rep = 0; rep < (on ? 2 : 1); ++rep) {
      ASSERT_TRUE(
          dev->writeBuffer(out.dev, 0, poisoned.data(), poisoned.size()).ok());
      const uint64_t before = cuda::skinnyGemmLaunchCount();
      // The second run lets the kernel copy W before its wait: the same
      // bits.
      s = dev->kernels().linear(args(true, rep == 1), nullptr);
      if (s.code() == StatusCode::Unavailable)
        GTEST_SKIP() << s.message();
      ASSERT_TRUE(s.ok()) << s.message();
      ASSERT_TRUE(dev->synchronize().ok());
      EXPECT_EQ(cuda::skinnyGemmLaunchCount() - before,
                on && expectSkinny ? 1u : 0u);
      const std::vector<uint8_t> got = out.down(dev);
      expectView(out, got, poisoned, off, {M, N}, {C, 1}, kTol);
      if (on && rep == 0)
        first = got;
      else if (on)
        EXPECT_TRUE(got == first) << "not deterministic";
    }
  }
}

/// qAbsorb / vUp: x [B, H, K] @ w [H, K, N] into the [B, H, N] view at
/// column `col` of a poisoned [B + 1, H, width] buffer.
void checkPerHead(CudaDevice *dev, bool isVUp, int64_t B, int64_t H,
                  int64_t K, int64_t N, int64_t width, int64_t col,
                  bool expectSkinny) {
  SCOPED_TRACE(std::string(isVUp ? "vUp" : "qAbsorb") +
               " B=" + std::to_string(B) + " H=" + std::to_string(H) +
               " K=" + std::to_string(K) + " N=" + std::to_string(N) +
               " into width " + std::to_string(width) + " at " +
               std::to_string(col));
  const DType dt = DType::BF16;
  Arr x = randomArr(dev, dt, {B, H, K});
  Arr w = randomArr(dev, dt, {H, K, N}, -0.2f, 0.2f);
  Arr out(dev, dt, {B + 1, H, width});
  out.poison();
  const std::vector<uint8_t> poisoned = out.host;
  const std::vector<int64_t> sizes = {B, H, N}, strides = {H * width, width, 1};
  auto run = [&](const KernelLibrary &k, bool device,
                 bool staticWeight = false) {
    TensorRef xv = device ? x.d() : x.h(), wv = device ? w.d() : w.h();
    TensorRef ov = view(out, device, col, sizes, strides);
    return isVUp ? k.vUp({xv, wv, ov, staticWeight}, nullptr)
                 : k.qAbsorb({xv, wv, ov, staticWeight}, nullptr);
  };
  Status s = run(cpu(), false);
  ASSERT_TRUE(s.ok()) << s.message();
  std::vector<uint8_t> first;
  for (bool on : {true, false}) {
    SCOPED_TRACE(on ? "skinny on" : "skinny off");
    SkinnyEnv env(on);
    EXPECT_EQ(cuda::skinnyPerHeadPlan(x.d(), w.d(),
                                      view(out, true, col, sizes, strides),
                                      dev->multiprocessorCount())
                  .has_value(),
              on && expectSkinny);
    for (int rep = 0; rep < (on ? 2 : 1); ++rep) {
      ASSERT_TRUE(
          dev->writeBuffer(out.dev, 0, poisoned.data(), poisoned.size()).ok());
      const uint64_t before = cuda::skinnyGemmLaunchCount();
      s = run(dev->kernels(), true, rep == 1); // rep 1: W before the wait
      if (s.code() == StatusCode::Unavailable)
        GTEST_SKIP() << s.message();
      ASSERT_TRUE(s.ok()) << s.message();
      ASSERT_TRUE(dev->synchronize().ok());
      EXPECT_EQ(cuda::skinnyGemmLaunchCount() - before,
                on && expectSkinny ? 1u : 0u);
      const std::vector<uint8_t> got = out.down(dev);
      expectView(out, got, poisoned, col, sizes, strides, kTol);
      if (on && rep == 0)
        first = got;
      else if (on)
        EXPECT_TRUE(got == first) << "not deterministic";
    }
  }
}

const int64_t kRows[] = {1, 7, 16, 33, 64};

} // namespace

// The decode step's projections (DeepSeek-V2-Lite) and odd widths.
TEST(SkinnyGemm, LinearStepShapes) {
  REQUIRE_GPU();
  for (int64_t M : kRows) {
    checkLinear(dev, DType::BF16, M, 3072, 2048, true); // q_proj
    checkLinear(dev, DType::BF16, M, 576, 2048, true);  // kv_a_proj
    checkLinear(dev, DType::BF16, M, 2048, 2048, true); // o_proj
  }
}

TEST(SkinnyGemm, LinearOddShapes) {
  REQUIRE_GPU();
  for (int64_t M : kRows) {
    checkLinear(dev, DType::BF16, M, 200, 304, true, 8); // N and K tails
    checkLinear(dev, DType::BF16, M, 8, 64, true);
    checkLinear(dev, DType::BF16, M, 33, 40, true, 24);
  }
  // Large K: long slices through the ring.
  checkLinear(dev, DType::BF16, 64, 256, 6144, true);
}

// o_proj with the residual in the epilogue (mla-fuse-linear-addend), and
// an addend with tails.
TEST(SkinnyGemm, LinearAddend) {
  REQUIRE_GPU();
  for (int64_t M : kRows)
    checkLinear(dev, DType::BF16, M, 2048, 2048, true, 0, true);
  checkLinear(dev, DType::BF16, 33, 200, 304, true, 8, true);
  checkLinear(dev, DType::F16, 7, 576, 2048, true, 0, true);
}

TEST(SkinnyGemm, LinearF16) {
  REQUIRE_GPU();
  checkLinear(dev, DType::F16, 7, 576, 2048, true);
  checkLinear(dev, DType::F16, 64, 200, 304, true);
}

// The step's five projections get a plan on this device (linear a TMA one
// unless the variant turns it off); the shapes are printed (the cluster residency comes from the driver, so they may differ
// from the CPU model's in SkinnyGemmPlanTest).
TEST(SkinnyGemm, StepShapePlans) {
  REQUIRE_GPU();
  SkinnyEnv env(true);
  const int sms = dev->multiprocessorCount();
  auto show = [](const char *name, const std::optional<cuda::SkinnyGemmPlan> &p) {
    ASSERT_TRUE(p.has_value()) << name;
    std::printf("%-9s %3lld cols x split %d, kSlice %4lld, %3lld CTAs, "
                "%6lld B smem\n",
                name, (long long)p->tileCols, p->split, (long long)p->kSlice,
                (long long)p->ctas, (long long)p->smemBytes);
  };
  const int64_t M = 64, H = 16;
  for (auto [name, N, K] : {std::tuple<const char *, int64_t, int64_t>{
                                "q_proj", 3072, 2048},
                            {"kv_a", 576, 2048},
                            {"o_proj", 2048, 2048}}) {
    Arr x(dev, DType::BF16, {M, K}), w(dev, DType::BF16, {N, K}),
        out(dev, DType::BF16, {M, N});
    show(name, cuda::skinnyLinearPlan({x.d(), w.d(), out.d()}, sms));
    const std::optional<cuda::SkinnyTmaPlan> t =
        cuda::skinnyLinearTmaPlan({x.d(), w.d(), out.d()}, sms);
    // Variant 3 (MLART_SKINNY_VARIANT=3) keeps linear on the mma.sync kernel.
    const bool tma = cuda::skinnyVariant(cuda::skinnyGemmVariant()).tma;
    ASSERT_EQ(t.has_value(), tma) << name;
    if (!t)
      continue;
    std::printf("%-9s %3lld cols x split %d, kSlice %4lld, %3lld CTAs, "
                "%6lld B smem (TMA + wgmma)\n",
                name, (long long)t->tileCols, t->split, (long long)t->kSlice,
                (long long)t->ctas, (long long)t->smemBytes);
  }
  Arr qn(dev, DType::BF16, {M, H, 128}), wuk(dev, DType::BF16, {H, 128, 512}),
      q(dev, DType::BF16, {M, H, 512});
  show("q_absorb", cuda::skinnyPerHeadPlan(qn.d(), wuk.d(), q.d(), sms));
  Arr ol(dev, DType::BF16, {M, H, 512}), wuv(dev, DType::BF16, {H, 512, 128}),
      vo(dev, DType::BF16, {M, H, 128});
  show("v_up", cuda::skinnyPerHeadPlan(ol.d(), wuv.d(), vo.d(), sms));
}

// What the kernel cannot run goes to cuBLAS, still correct.
TEST(SkinnyGemm, LinearFallsBackToCublas) {
  REQUIRE_GPU();
  checkLinear(dev, DType::BF16, 65, 256, 256, false); // M > 64
  checkLinear(dev, DType::BF16, 16, 256, 300, false); // K % 8
  checkLinear(dev, DType::BF16, 16, 256, 256, false, 4); // x rows misaligned
  checkLinear(dev, DType::F32, 16, 256, 256, false);  // f32
}

TEST(SkinnyGemm, QAbsorbVUpStepShapes) {
  REQUIRE_GPU();
  for (int64_t B : kRows) {
    // q_absorb into the latent part of the assembled [B, 16, 576] query.
    checkPerHead(dev, false, B, 16, 128, 512, 576, 0, true);
    checkPerHead(dev, true, B, 16, 512, 128, 136, 8, true); // v_up
  }
}

TEST(SkinnyGemm, PerHeadOddShapes) {
  REQUIRE_GPU();
  for (int64_t B : {int64_t(1), int64_t(33)}) {
    checkPerHead(dev, false, B, 3, 128, 200, 208, 4, true);
    checkPerHead(dev, true, B, 5, 64, 8, 8, 0, true);
    checkPerHead(dev, true, B, 2, 40, 40, 48, 0, true); // K < one chunk
    checkPerHead(dev, true, B, 3, 136, 24, 24, 0, true); // K tail chunk
    // W rows (N) not a multiple of 8 elements: cuBLAS.
    checkPerHead(dev, true, B, 2, 40, 36, 40, 0, false);
    checkPerHead(dev, false, B, 3, 64, 202, 210, 1, false);
  }
}

// Every A/B variant (weights before or after the wait, largest split) on
// the step shapes and tails.
TEST(SkinnyGemm, EveryVariant) {
  REQUIRE_GPU();
  for (int v = 0; v < cuda::kSkinnyVariants; ++v) {
    SCOPED_TRACE("MLART_SKINNY_VARIANT=" + std::to_string(v));
    VariantEnv env(v);
    EXPECT_EQ(cuda::skinnyGemmVariant(), v);
    checkLinear(dev, DType::BF16, 64, 3072, 2048, true);
    checkLinear(dev, DType::BF16, 33, 576, 2048, true);
    checkLinear(dev, DType::BF16, 1, 2048, 2048, true);
    checkLinear(dev, DType::BF16, 7, 200, 304, true, 8);
    checkLinear(dev, DType::F16, 17, 100, 1032, true);
    checkPerHead(dev, false, 64, 16, 128, 512, 576, 0, true);
    checkPerHead(dev, true, 33, 16, 512, 128, 136, 8, true);
  }
}

// With staticWeight the kernel copies W before its dependent-launch wait,
// but x and the addend still after it: the kernel just before writes x (an
// add over a NaN-poisoned x) and the addend, eagerly and in a graph, and
// the product must match the CPU's on those new values.
TEST(SkinnyGemm, EarlyWeightsStillWaitForX) {
  REQUIRE_GPU();
  SkinnyEnv env(true);
  const int64_t M = 64, N = 2048, K = 2048;
  Arr a = randomArr(dev, DType::BF16, {M, K});
  Arr b = randomArr(dev, DType::BF16, {M, K});
  Arr ra = randomArr(dev, DType::BF16, {M, N});
  Arr rb = randomArr(dev, DType::BF16, {M, N});
  Arr w = randomArr(dev, DType::BF16, {N, K}, -0.1f, 0.1f);
  Arr x(dev, DType::BF16, {M, K}), r(dev, DType::BF16, {M, N});
  Arr out(dev, DType::BF16, {M, N});
  ASSERT_TRUE(cpu().add({a.h(), b.h(), x.h()}, nullptr).ok());
  ASSERT_TRUE(cpu().add({ra.h(), rb.h(), r.h()}, nullptr).ok());
  LinearArgs ref{x.h(), w.h(), out.h(), r.h()};
  ASSERT_TRUE(cpu().linear(ref, nullptr).ok());
  const std::vector<uint8_t> want = out.host;

  auto runAll = [&](StreamHandle s) {
    Status st = dev->kernels().add({ra.d(), rb.d(), r.d()}, s);
    if (st.ok())
      st = dev->kernels().add({a.d(), b.d(), x.d()}, s);
    LinearArgs la{x.d(), w.d(), out.d(), r.d()};
    la.staticWeight = true;
    if (st.ok())
      st = dev->kernels().linear(la, s);
    return st;
  };
  auto poisonAll = [&] {
    for (Arr *p : {&x, &r, &out}) {
      p->poison();
      p->up(dev);
    }
  };
  auto expectWant = [&](const char *how) {
    SCOPED_TRACE(how);
    out.host = want;
    const std::vector<uint8_t> got = out.down(dev);
    expectView(out, got, got, 0, {M, N}, {N, 1}, kTol);
  };
  poisonAll();
  const uint64_t before = cuda::skinnyGemmLaunchCount();
  Status s = runAll(nullptr);
  if (s.code() == StatusCode::Unavailable)
    GTEST_SKIP() << s.message();
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(dev->synchronize().ok());
  EXPECT_EQ(cuda::skinnyGemmLaunchCount() - before, 1u);
  expectWant("eager");

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  s = runAll(stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int rep = 0; rep < 3; ++rep) {
    poisonAll();
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    expectWant("graph replay");
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// The cluster launch inside a captured CUDA graph (how the executor runs a
// decode step): replays give the eager result bit for bit.
TEST(SkinnyGemm, GraphReplayMatchesEager) {
  REQUIRE_GPU();
  SkinnyEnv env(true);
  const int64_t M = 64, N = 3072, K = 2048, H = 16;
  Arr x = randomArr(dev, DType::BF16, {M, K});
  Arr w = randomArr(dev, DType::BF16, {N, K}, -0.1f, 0.1f);
  Arr out(dev, DType::BF16, {M, N});
  Arr qn = randomArr(dev, DType::BF16, {M, H, 128});
  Arr wuk = randomArr(dev, DType::BF16, {H, 128, 512}, -0.2f, 0.2f);
  Arr q(dev, DType::BF16, {M, H, 576});
  const TensorRef qv = view(q, true, 0, {M, H, 512}, {H * 576, 576, 1});
  auto runAll = [&](StreamHandle s) {
    Status st = dev->kernels().linear({x.d(), w.d(), out.d()}, s);
    if (st.ok())
      st = dev->kernels().qAbsorb({qn.d(), wuk.d(), qv}, s);
    return st;
  };
  out.poison();
  out.up(dev);
  q.poison();
  q.up(dev);
  Status s = runAll(nullptr);
  if (s.code() == StatusCode::Unavailable)
    GTEST_SKIP() << s.message();
  ASSERT_TRUE(s.ok()) << s.message();
  const std::vector<uint8_t> eagerOut = out.down(dev), eagerQ = q.down(dev);

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            cudaSuccess);
  out.up(dev); // poisoned again
  q.up(dev);
  ASSERT_TRUE(dev->synchronize().ok());
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  const uint64_t before = cuda::skinnyGemmLaunchCount();
  s = runAll(stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(cuda::skinnyGemmLaunchCount() - before, 2u);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int rep = 0; rep < 3; ++rep)
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_TRUE(out.down(dev) == eagerOut);
  EXPECT_TRUE(q.down(dev) == eagerQ);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}
