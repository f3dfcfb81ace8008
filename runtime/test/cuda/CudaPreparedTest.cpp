//===- CudaPreparedTest.cpp - The prepare program on the GPU --------------===//
//
// A fused projection at the V2-Lite front's shape (64 x 2048 -> 3072 + 576):
// the prepare program concatenates the two weights on the device, or the
// step reads them in place when they are bound as rows of one tensor; both
// eager and replayed from a CUDA graph, against float64 with poisoned
// outputs.
//
//===----------------------------------------------------------------------===//
#include "CudaTestUtil.h"
#include "PreparedTestUtil.h"

#include "mlart/ArtifactWriter.h"
#include "mlart/Executor.h"

#include <cmath>

using namespace mlart;
using namespace mlart::cudatest;

namespace {

constexpr int64_t T = 64, K = 2048, N1 = 3072, N2 = 576, N = N1 + N2;

/// y = x @ [w_q; w_kv]^T through one linear over the prepared concat.
Artifact fusedProjection() {
  StatusOr<std::vector<uint8_t>> bytes =
      test::fusedProjectionBytes(DType::BF16, T, K, N1, N2, "w_q", "w_kv");
  EXPECT_TRUE(bytes.ok()) << bytes.status().toString();
  StatusOr<Artifact> a = Artifact::load(bytes->data(), bytes->size());
  EXPECT_TRUE(a.ok()) << a.status().toString();
  return std::move(a).value();
}

/// Checks y (downloaded) against x @ w^T in float64, w the host rows of the
/// concatenation [wq; wkv]; bf16 output rounding plus f32 accumulation.
void expectProduct(CudaDevice *dev, const Arr &x, const Arr &wq,
                   const Arr &wkv, Arr &y) {
  y.host = y.down(dev);
  int bad = 0;
  for (int64_t t = 0; t < T; t += 7)
    for (int64_t n = 0; n < N; n += 5) {
      const Arr &w = n < N1 ? wq : wkv;
      const int64_t row = n < N1 ? n : n - N1;
      double acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += double(x.get(t * K + k)) * double(w.get(row * K + k));
      const double got = y.get(t * N + n);
      if (!(std::fabs(got - acc) <= 2e-2 * (1 + std::fabs(acc))) && bad++ < 5)
        ADD_FAILURE() << "y[" << t << ", " << n << "] = " << got
                      << ", expected " << acc;
    }
}

} // namespace

TEST(CudaPrepared, ConcatenatesOnTheDeviceEagerAndInAGraph) {
  REQUIRE_GPU();
  StatusOr<Stream> stream = dev->createStream();
  ASSERT_TRUE(stream.ok());
  StreamHandle st = stream->handle();
  StatusOr<Executor> exec = Executor::create(fusedProjection(), *dev);
  ASSERT_TRUE(exec.ok()) << exec.status().toString();
  Arr x(dev, DType::BF16, {T, K}), wq(dev, DType::BF16, {N1, K}),
      wkv(dev, DType::BF16, {N2, K}), y(dev, DType::BF16, {T, N});
  for (Arr *a : {&x, &wq, &wkv}) {
    a->random();
    a->up(dev);
  }
  ASSERT_TRUE(exec->bind("x", x.d()).ok());
  ASSERT_TRUE(exec->bind("w_q", wq.d()).ok());
  ASSERT_TRUE(exec->bind("w_kv", wkv.d()).ok());
  ASSERT_TRUE(exec->bind("y", y.d()).ok());

  y.poison();
  y.up(dev);
  ASSERT_TRUE(exec->run(st).ok());
  ASSERT_TRUE(dev->synchronize(st).ok());
  EXPECT_EQ(exec->preparedArenaBytes(), size_t(N * K * 2));
  expectProduct(dev, x, wq, wkv, y);

  // The graph reads the prepared arena; new activations, same weights.
  Status cap = exec->captureGraph(st);
  ASSERT_TRUE(cap.ok()) << cap.toString();
  x.random();
  x.up(dev);
  y.poison();
  y.up(dev);
  ASSERT_TRUE(dev->synchronize().ok());
  Status r = exec->runGraph(st);
  ASSERT_TRUE(r.ok()) << r.toString();
  expectProduct(dev, x, wq, wkv, y);

  // New weight values in place + prepare(): the replay sees them.
  wkv.random();
  wkv.up(dev);
  ASSERT_TRUE(dev->synchronize().ok());
  ASSERT_TRUE(exec->prepare(st).ok());
  y.poison();
  y.up(dev);
  ASSERT_TRUE(dev->synchronize().ok());
  r = exec->runGraph(st);
  ASSERT_TRUE(r.ok()) << r.toString();
  expectProduct(dev, x, wq, wkv, y);
}

TEST(CudaPrepared, ReadsWeightsBoundAsRowsOfOneTensorInPlace) {
  REQUIRE_GPU();
  StatusOr<Stream> stream = dev->createStream();
  ASSERT_TRUE(stream.ok());
  StreamHandle st = stream->handle();
  StatusOr<Executor> exec = Executor::create(fusedProjection(), *dev);
  ASSERT_TRUE(exec.ok()) << exec.status().toString();
  // One [N, K] device tensor as an engine stores it; host mirrors per part.
  Arr fused(dev, DType::BF16, {N, K}), x(dev, DType::BF16, {T, K}),
      y(dev, DType::BF16, {T, N});
  Arr wq(dev, DType::BF16, {N1, K}), wkv(dev, DType::BF16, {N2, K});
  auto upload = [&] {
    wq.random();
    wkv.random();
    std::memcpy(fused.host.data(), wq.host.data(), size_t(N1 * K * 2));
    std::memcpy(fused.host.data() + N1 * K * 2, wkv.host.data(),
                size_t(N2 * K * 2));
    fused.up(dev);
  };
  upload();
  x.random();
  x.up(dev);
  TensorRef rowsQ = fused.d(), rowsKv = fused.d();
  rowsQ.sizes[0] = N1;
  rowsKv.sizes[0] = N2;
  rowsKv.data = static_cast<uint8_t *>(fused.dev.data()) + N1 * K * 2;
  ASSERT_TRUE(exec->bind("x", x.d()).ok());
  ASSERT_TRUE(exec->bind("w_q", rowsQ).ok());
  ASSERT_TRUE(exec->bind("w_kv", rowsKv).ok());
  ASSERT_TRUE(exec->bind("y", y.d()).ok());

  y.poison();
  y.up(dev);
  ASSERT_TRUE(exec->run(st).ok());
  ASSERT_TRUE(dev->synchronize(st).ok());
  EXPECT_EQ(exec->preparedArenaBytes(), 0u);
  expectProduct(dev, x, wq, wkv, y);

  // Captured and replayed after the weights change in place: read in
  // place, so no prepare() is needed.
  Status cap = exec->captureGraph(st);
  ASSERT_TRUE(cap.ok()) << cap.toString();
  upload();
  y.poison();
  y.up(dev);
  ASSERT_TRUE(dev->synchronize().ok());
  Status r = exec->runGraph(st);
  ASSERT_TRUE(r.ok()) << r.toString();
  expectProduct(dev, x, wq, wkv, y);
}
