//===- LinearAddendTest.cpp - cuBLASLt linear (+ addend) vs the CPU -------===//
//
// out = x @ W^T + addend through cuBLASLt (C = addend, D = out, beta = 1)
// against the CPU kernel (itself checked against float64) on fresh random
// inputs: outputs poisoned first, the addend unmodified, strided views whose
// other bytes survive, in place, the MLART_GEMM_LT and MLART_GEMM_AUTOTUNE
// knobs, and a captured graph replayed on new data.
//
//===----------------------------------------------------------------------===//
#include "CudaTestUtil.h"
#include "cuda/Knobs.h"

#include "cuda/BlasLt.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

using namespace mlart;
using namespace mlart::cudatest;

namespace {

const KernelLibrary &cpu() { return cpuKernelLibrary(); }

/// One environment variable for one scope.
/// Forces a knob (read once from the environment) for one scope.
struct Env {
  Env(cuda::Knob knob, int value) : knob(knob) {
    cuda::setKnobOverride(knob, value);
  }
  ~Env() { cuda::setKnobOverride(knob, std::nullopt); }
  cuda::Knob knob;
};

Arr randomArr(CudaDevice *d, DType t, std::vector<int64_t> s, float lo = -1,
              float hi = 1) {
  Arr a(d, t, std::move(s));
  a.random(lo, hi);
  a.up(d);
  return a;
}

LinearArgs args(TensorRef x, TensorRef w, TensorRef out, TensorRef addend) {
  LinearArgs a;
  a.x = x;
  a.weight = w;
  a.out = out;
  a.addend = addend;
  return a;
}

/// Runs the linear with an addend on both sides for [M, K] x [N, K]^T and
/// checks the output and that the addend is unchanged.
void checkShape(CudaDevice *dev, int64_t M, int64_t K, int64_t N, DType t) {
  SCOPED_TRACE("M=" + std::to_string(M) + " K=" + std::to_string(K) +
               " N=" + std::to_string(N) + " " + dtypeName(t));
  Arr x = randomArr(dev, t, {M, K});
  Arr w = randomArr(dev, t, {N, K}, -0.05f, 0.05f);
  Arr r = randomArr(dev, t, {M, N}, -2.0f, 2.0f);
  Arr out(dev, t, {M, N});
  out.poison();
  out.up(dev);
  ASSERT_TRUE(cpu().linear(args(x.h(), w.h(), out.h(), r.h()), nullptr).ok());
  const uint64_t launches = cuda::blasLtLaunchCount();
  Status s = dev->kernels().linear(args(x.d(), w.d(), out.d(), r.d()), nullptr);
  if (s.code() == StatusCode::Unavailable)
    GTEST_SKIP() << s.message();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_GT(cuda::blasLtLaunchCount(), launches) << "cuBLASLt did not run";
  EXPECT_LT(relErr(out, out.down(dev)), 1e-2);
  EXPECT_EQ(r.down(dev), r.host) << "the addend was modified";
}

} // namespace

TEST(CudaLinearAddend, MatchesCpuReference) {
  REQUIRE_GPU();
  for (int64_t M : {1, 7, 64}) {
    checkShape(dev, M, 2048, 2048, DType::BF16);
    checkShape(dev, M, 300, 200, DType::BF16);
  }
  checkShape(dev, 33, 512, 576, DType::F16);
  checkShape(dev, 5, 256, 96, DType::F32);
}

// out and the addend are column windows of wider rows: cuBLASLt gets their
// row strides as leading dimensions; the other columns are not touched.
TEST(CudaLinearAddend, StridedViewsKeepTheirNeighbours) {
  REQUIRE_GPU();
  for (int64_t M : {1, 7, 64}) {
    SCOPED_TRACE("M=" + std::to_string(M));
    const int64_t K = 512, N = 256, wide = 384;
    Arr x = randomArr(dev, DType::BF16, {M, K});
    Arr w = randomArr(dev, DType::BF16, {N, K}, -0.05f, 0.05f);
    Arr r = randomArr(dev, DType::BF16, {M, wide});
    Arr out(dev, DType::BF16, {M, wide});
    out.random();
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        out.set(i * wide + 64 + j, NAN);
    out.up(dev);
    auto window = [&](TensorRef t, int64_t col) {
      t.data = static_cast<uint8_t *>(t.data) + col * 2;
      t.sizes[1] = N;
      return t;
    };
    ASSERT_TRUE(cpu().linear(args(x.h(), w.h(), window(out.h(), 64),
                                  window(r.h(), 128)),
                             nullptr)
                    .ok());
    Status s = dev->kernels().linear(
        args(x.d(), w.d(), window(out.d(), 64), window(r.d(), 128)), nullptr);
    if (s.code() == StatusCode::Unavailable)
      GTEST_SKIP() << s.message();
    ASSERT_TRUE(s.ok()) << s.message();
    const std::vector<uint8_t> got = out.down(dev);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < wide; ++j) {
        const size_t e = size_t(i * wide + j);
        const float want = out.get(int64_t(e));
        const float g = loadAsFloat(got.data(), DType::BF16, e);
        if (j < 64 || j >= 64 + N)
          ASSERT_EQ(std::memcmp(&got[e * 2], &out.host[e * 2], 2), 0)
              << "column " << j << " outside the view changed";
        else
          ASSERT_NEAR(g, want, 2e-2 * (1.0 + std::fabs(want)))
              << "row " << i << " column " << j;
      }
    EXPECT_EQ(r.down(dev), r.host);
  }
}

// addend == out (the same view): D = A B + D in place.
TEST(CudaLinearAddend, InPlace) {
  REQUIRE_GPU();
  const int64_t M = 7, K = 2048, N = 2048;
  Arr x = randomArr(dev, DType::BF16, {M, K});
  Arr w = randomArr(dev, DType::BF16, {N, K}, -0.05f, 0.05f);
  Arr io = randomArr(dev, DType::BF16, {M, N});
  Env tune(cuda::Knob::GemmAutotune, 1); // must not tune in place
  ASSERT_TRUE(cpu().linear(args(x.h(), w.h(), io.h(), io.h()), nullptr).ok());
  Status s = dev->kernels().linear(args(x.d(), w.d(), io.d(), io.d()), nullptr);
  if (s.code() == StatusCode::Unavailable)
    GTEST_SKIP() << s.message();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_LT(relErr(io, io.down(dev)), 1e-2);
}

TEST(CudaLinearAddend, RejectsBadAddendWithoutRunning) {
  REQUIRE_GPU();
  Arr x = randomArr(dev, DType::BF16, {4, 64});
  Arr w = randomArr(dev, DType::BF16, {32, 64});
  Arr out(dev, DType::BF16, {4, 32});
  out.poison();
  out.up(dev);
  Arr wrongType = randomArr(dev, DType::F32, {4, 32});
  Arr wrongShape = randomArr(dev, DType::BF16, {4, 33});
  const uint64_t launches = cuda::blasLtLaunchCount();
  for (Arr *bad : {&wrongType, &wrongShape})
    EXPECT_EQ(dev->kernels()
                  .linear(args(x.d(), w.d(), out.d(), bad->d()), nullptr)
                  .code(),
              StatusCode::InvalidArgument);
  // A view of out shifted by one element overlaps it without being it.
  TensorRef shifted = out.d();
  shifted.data = static_cast<uint8_t *>(shifted.data) + 2;
  shifted.sizes[0] = 3;
  TensorRef out3 = out.d();
  out3.sizes[0] = 3;
  Arr x3 = randomArr(dev, DType::BF16, {3, 64});
  EXPECT_EQ(dev->kernels()
                .linear(args(x3.d(), w.d(), out3, shifted), nullptr)
                .code(),
            StatusCode::InvalidArgument);
  EXPECT_EQ(cuda::blasLtLaunchCount(), launches);
  EXPECT_EQ(out.down(dev), out.host);
}

// MLART_GEMM_LT=1 routes plain linears through cuBLASLt (beta = 0); without
// it they stay on cublasGemmEx.
TEST(CudaLinearAddend, PlainLinearThroughLtKnob) {
  REQUIRE_GPU();
  for (bool lt : {false, true}) {
    SCOPED_TRACE(lt ? "MLART_GEMM_LT=1" : "unset");
    Env knob(cuda::Knob::GemmLt, lt ? 1 : 0);
    for (int64_t M : {1, 7, 64}) {
      Arr x = randomArr(dev, DType::BF16, {M, 2048});
      Arr w = randomArr(dev, DType::BF16, {2048, 2048}, -0.05f, 0.05f);
      Arr out(dev, DType::BF16, {M, 2048});
      out.poison();
      out.up(dev);
      ASSERT_TRUE(cpu().linear({x.h(), w.h(), out.h()}, nullptr).ok());
      const uint64_t launches = cuda::blasLtLaunchCount();
      Status s = dev->kernels().linear({x.d(), w.d(), out.d()}, nullptr);
      if (s.code() == StatusCode::Unavailable)
        GTEST_SKIP() << s.message();
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(cuda::blasLtLaunchCount() > launches, lt);
      EXPECT_LT(relErr(out, out.down(dev)), 1e-2);
    }
  }
}

// MLART_GEMM_AUTOTUNE=1: the first eager call of a shape times the
// candidates once; later calls reuse the choice; results stay correct.
TEST(CudaLinearAddend, AutotunesOncePerShape) {
  REQUIRE_GPU();
  Env knob(cuda::Knob::GemmAutotune, 1);
  const int64_t M = 64, K = 1536, N = 1024; // a shape no other test uses
  Arr x = randomArr(dev, DType::BF16, {M, K});
  Arr w = randomArr(dev, DType::BF16, {N, K}, -0.05f, 0.05f);
  Arr r = randomArr(dev, DType::BF16, {M, N});
  Arr out(dev, DType::BF16, {M, N});
  ASSERT_TRUE(cpu().linear(args(x.h(), w.h(), out.h(), r.h()), nullptr).ok());
  const uint64_t tunes = cuda::blasLtAutotuneCount();
  const uint64_t plans = cuda::blasLtPlanCount();
  for (int call = 0; call < 3; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    // 0xffff is a bf16 NaN.
    ASSERT_TRUE(dev->memset(out.dev.data(), 0xff, out.host.size()).ok());
    Status s =
        dev->kernels().linear(args(x.d(), w.d(), out.d(), r.d()), nullptr);
    if (s.code() == StatusCode::Unavailable)
      GTEST_SKIP() << s.message();
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_LT(relErr(out, out.down(dev)), 1e-2);
    EXPECT_EQ(r.down(dev), r.host);
  }
  EXPECT_LE(cuda::blasLtAutotuneCount() - tunes, 1u);
  EXPECT_EQ(cuda::blasLtPlanCount() - plans, 1u);
}

// Captured on a fresh stream with a shape seen for the first time (plan and
// workspace are created during the capture, autotuning is skipped), then
// replayed on new data; a later eager call reuses the plan.
TEST(CudaLinearAddend, GraphCaptureAndReplay) {
  REQUIRE_GPU();
  Env knob(cuda::Knob::GemmAutotune, 1);
  StatusOr<Stream> stream = dev->createStream();
  ASSERT_TRUE(stream.ok());
  StreamHandle st = stream->handle();
  const int64_t M = 64, K = 2048, N = 1408; // a shape no other test uses
  Arr x = randomArr(dev, DType::BF16, {M, K});
  Arr w = randomArr(dev, DType::BF16, {N, K}, -0.05f, 0.05f);
  Arr r = randomArr(dev, DType::BF16, {M, N});
  Arr out(dev, DType::BF16, {M, N});
  const uint64_t tunes = cuda::blasLtAutotuneCount();
  ASSERT_TRUE(dev->beginCapture(st).ok());
  Status s = dev->kernels().linear(args(x.d(), w.d(), out.d(), r.d()), st);
  StatusOr<GraphHandle> graph = dev->endCapture(st);
  if (s.code() == StatusCode::Unavailable)
    GTEST_SKIP() << s.message();
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(graph.ok()) << graph.status().message();
  EXPECT_EQ(cuda::blasLtAutotuneCount(), tunes) << "tuned during capture";
  const uint64_t plans = cuda::blasLtPlanCount();
  for (int replay = 0; replay < 2; ++replay) {
    SCOPED_TRACE("replay " + std::to_string(replay));
    x.random();
    x.up(dev);
    r.random(-2.0f, 2.0f);
    r.up(dev);
    out.poison();
    out.up(dev);
    ASSERT_TRUE(dev->synchronize().ok());
    ASSERT_TRUE(
        cpu().linear(args(x.h(), w.h(), out.h(), r.h()), nullptr).ok());
    ASSERT_TRUE(dev->launchGraph(*graph, st).ok());
    ASSERT_TRUE(dev->synchronize(st).ok());
    EXPECT_LT(relErr(out, out.down(dev)), 1e-2);
    EXPECT_EQ(r.down(dev), r.host);
  }
  dev->destroyGraph(*graph);
  // The first eager call of the shape reuses the plan made in the capture
  // and is the one that tunes (the capture did not).
  ASSERT_TRUE(
      dev->kernels().linear(args(x.d(), w.d(), out.d(), r.d()), st).ok());
  ASSERT_TRUE(dev->synchronize(st).ok());
  EXPECT_EQ(cuda::blasLtPlanCount(), plans);
  EXPECT_LE(cuda::blasLtAutotuneCount() - tunes, 1u);
  EXPECT_LT(relErr(out, out.down(dev)), 1e-2);
}
