//===- PreparedWeightsTest.cpp - The prepare program and prepared arena ---===//
//
// An artifact may carry a prepare program: copies that fill a prepared
// arena from the weights (two projections' weights concatenated, so that
// one GEMM computes both). These tests cover the loader's rules for it and
// the executor's contract: it runs before the first step, again only when
// a weight is rebound (not when activations are), and on request.
//
//===----------------------------------------------------------------------===//
#include "mlart/Artifact.h"
#include "ArtifactFormat.h"
#include "TestUtil.h"
#include "mlart/ArtifactWriter.h"
#include "mlart/Executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <random>

namespace mlart {
namespace {

using test::HostTensor;

constexpr int64_t T = 3, K = 8, N1 = 5, N2 = 4;

struct FusedProgram {
  ArtifactWriter w{"fused_projections"};
  uint32_t x, w1, w2, y1, y2;         // buffers
  uint32_t w1View, w2View, xView;     // views of buffers
  uint32_t fusedWeight, fusedOut;     // prepared / arena views
};

/// y1 = x @ w1^T and y2 = x @ w2^T as one linear over the prepared
/// concatenation [w1; w2], its output split by two copies.
FusedProgram fusedProgram() {
  FusedProgram p;
  ArtifactWriter &w = p.w;
  p.x = w.addBuffer("x", BufferRole::Input, DType::BF16, {T, K});
  p.w1 = w.addBuffer("w1", BufferRole::Weight, DType::BF16, {N1, K});
  p.w2 = w.addBuffer("w2", BufferRole::Weight, DType::BF16, {N2, K});
  p.y1 = w.addBuffer("y1", BufferRole::Output, DType::BF16, {T, N1});
  p.y2 = w.addBuffer("y2", BufferRole::Output, DType::BF16, {T, N2});
  p.xView = w.bufferView(p.x);
  p.w1View = w.bufferView(p.w1);
  p.w2View = w.bufferView(p.w2);
  const int64_t prep = w.allocatePrepared((N1 + N2) * K * 2);
  p.fusedWeight = w.preparedView(prep, DType::BF16, {N1 + N2, K});
  w.prepareCopy(p.w1View, w.preparedView(prep, DType::BF16, {N1, K}), "w1");
  w.prepareCopy(p.w2View,
                w.preparedView(prep + N1 * K * 2, DType::BF16, {N2, K}), "w2");
  const int64_t out = w.allocateArena(T * (N1 + N2) * 2);
  p.fusedOut = w.arenaView(out, DType::BF16, {T, N1 + N2});
  w.linear(p.xView, p.fusedWeight, p.fusedOut, "fused");
  w.copy(w.arenaView(out, DType::BF16, {T, N1}, {N1 + N2, 1}),
         w.bufferView(p.y1));
  w.copy(w.arenaView(out + N1 * 2, DType::BF16, {T, N2}, {N1 + N2, 1}),
         w.bufferView(p.y2));
  return p;
}

void expectInvalid(const ArtifactWriter &w, const std::string &fragment) {
  std::vector<uint8_t> b = w.serialize();
  StatusOr<Artifact> a = Artifact::load(b.data(), b.size());
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::InvalidArgument);
  EXPECT_NE(a.status().message().find(fragment), std::string::npos)
      << a.status().toString();
}

TEST(PreparedArtifact, RoundTripKeepsTheProgramAndItsArena) {
  FusedProgram p = fusedProgram();
  StatusOr<std::vector<uint8_t>> bytes = p.w.finish();
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  StatusOr<Artifact> a = Artifact::load(bytes->data(), bytes->size());
  ASSERT_TRUE(a.ok()) << a.status().toString();
  EXPECT_EQ(a->preparedBytes(), (N1 + N2) * K * 2);
  ASSERT_EQ(a->prepareInstructions().size(), 2u);
  EXPECT_EQ(a->prepareInstructions()[1].location, "w2");
  EXPECT_EQ(a->instructions().size(), 3u);
  const ViewDecl &fused = a->views()[p.fusedWeight];
  EXPECT_EQ(fused.base, ViewBase::Prepared);
  EXPECT_EQ(fused.sizes[0], N1 + N2);
}

TEST(PreparedArtifact, WithoutAPrepareProgramThereIsNoSection) {
  ArtifactWriter w("plain");
  const uint32_t x = w.addBuffer("x", BufferRole::Input, DType::BF16, {T, K});
  const uint32_t y = w.addBuffer("y", BufferRole::Output, DType::BF16, {T, K});
  w.copy(w.bufferView(x), w.bufferView(y));
  StatusOr<std::vector<uint8_t>> bytes = w.finish();
  ASSERT_TRUE(bytes.ok());
  StatusOr<Artifact> a = Artifact::load(bytes->data(), bytes->size());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->preparedBytes(), 0);
  EXPECT_TRUE(a->prepareInstructions().empty());
}

TEST(PreparedArtifact, RefusesWhatThePrepareProgramMayNotDo) {
  {
    // Only copies: a linear in the prepare program would run once per
    // binding on whatever the activations were then.
    FusedProgram p = fusedProgram();
    Instruction inst;
    inst.opcode = Opcode::Linear;
    inst.operands[0] = p.xView;
    inst.operands[1] = p.w1View;
    inst.operands[2] = p.fusedWeight;
    p.w.addPrepareInstruction(inst);
    expectInvalid(p.w, "the prepare program may only copy (got linear)");
  }
  {
    // Reading an input: not a function of the weights.
    FusedProgram p = fusedProgram();
    const uint32_t dst = p.w.preparedView(0, DType::BF16, {T, K});
    p.w.prepareCopy(p.xView, dst);
    expectInvalid(p.w, "copies from non-weight buffer 'x'");
  }
  {
    // Reading the scratch arena.
    FusedProgram p = fusedProgram();
    p.w.prepareCopy(p.w.arenaView(0, DType::BF16, {T, K}),
                    p.w.preparedView(0, DType::BF16, {T, K}));
    expectInvalid(p.w, "copies from the arena");
  }
  {
    // Writing outside the prepared arena.
    FusedProgram p = fusedProgram();
    p.w.prepareCopy(p.w.bufferView(p.w1, 0, DType::BF16, {T, K}),
                    p.w.arenaView(0, DType::BF16, {T, K}));
    expectInvalid(p.w, "writes outside the prepared arena");
  }
  {
    // The step may read the prepared arena but never write it.
    FusedProgram p = fusedProgram();
    p.w.copy(p.xView, p.w.preparedView(0, DType::BF16, {T, K}));
    expectInvalid(p.w, "would write the prepared arena");
  }
  {
    // A prepared view must lie inside the prepared arena.
    FusedProgram p = fusedProgram();
    p.w.preparedView((N1 + N2) * K * 2 - 2, DType::BF16, {2});
    expectInvalid(p.w, "lies outside the prepared arena");
  }
  {
    // Without a prepare section there is no prepared arena at all.
    ArtifactWriter w("no_prepare");
    const uint32_t x = w.addBuffer("x", BufferRole::Input, DType::BF16, {T, K});
    w.preparedView(0, DType::BF16, {1});
    w.copy(w.bufferView(x), w.bufferView(x));
    expectInvalid(w, "lies outside the prepared arena of 0 bytes");
  }
}

TEST(PreparedArtifact, RefusesABadlyFramedPrepareSection) {
  FusedProgram p = fusedProgram();
  std::vector<uint8_t> b = p.w.serialize();
  // Find the prepare section and claim one instruction more than it holds.
  size_t pos = mlaa::kHeaderBytes;
  bool found = false;
  while (pos + mlaa::kSectionHeaderBytes <= b.size()) {
    uint32_t kind;
    uint64_t bytes;
    std::memcpy(&kind, &b[pos], 4);
    std::memcpy(&bytes, &b[pos + 8], 8);
    if (kind == mlaa::kSectionPrepare) {
      uint32_t count;
      std::memcpy(&count, &b[pos + 4], 4);
      ++count;
      std::memcpy(&b[pos + 4], &count, 4);
      found = true;
      break;
    }
    pos += mlaa::kSectionHeaderBytes + ((bytes + 7) & ~uint64_t(7));
  }
  ASSERT_TRUE(found);
  const uint64_t h =
      fnv1a64(b.data() + mlaa::kChecksumStart, b.size() - mlaa::kChecksumStart);
  std::memcpy(&b[mlaa::kOffChecksum], &h, 8);
  StatusOr<Artifact> a = Artifact::load(b.data(), b.size());
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("prepare section holds"),
            std::string::npos)
      << a.status().toString();
}

/// Runs the fused program on the CPU device.
class PreparedExecutor : public ::testing::Test {
protected:
  void SetUp() override {
    device = createCpuDevice();
    StatusOr<std::vector<uint8_t>> bytes = fusedProgram().w.finish();
    ASSERT_TRUE(bytes.ok());
    StatusOr<Artifact> a = Artifact::load(bytes->data(), bytes->size());
    ASSERT_TRUE(a.ok());
    StatusOr<Executor> e = Executor::create(*a, *device);
    ASSERT_TRUE(e.ok()) << e.status().toString();
    exec.emplace(std::move(*e));
    for (HostTensor *t : {&x, &w1, &w2})
      test::fillRandom(*t, rng);
  }

  Status bindAll() {
    for (auto [name, t] : {std::pair<const char *, HostTensor *>{"x", &x},
                           {"w1", &w1}, {"w2", &w2}, {"y1", &y1},
                           {"y2", &y2}})
      MLART_RETURN_IF_ERROR(exec->bind(name, t->ref));
    return Status::success();
  }

  /// Poisons the outputs, runs, and checks them against x @ w^T computed in
  /// double from `ref1`, `ref2`.
  void runAndCheck(const HostTensor &ref1, const HostTensor &ref2) {
    for (HostTensor *t : {&y1, &y2})
      for (int64_t i = 0; i < t->numel(); ++i)
        t->set(i, NAN);
    ASSERT_TRUE(exec->run().ok());
    for (auto [y, wt, n] : {std::tuple<HostTensor *, const HostTensor *,
                                       int64_t>{&y1, &ref1, N1},
                            {&y2, &ref2, N2}})
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc += double(x.get(t * K + k)) * double(wt->get(j * K + k));
          EXPECT_NEAR(y->get(t * n + j), acc, 0.02 * (1 + std::fabs(acc)))
              << "row " << t << " column " << j;
        }
  }

  /// Fills `fused` (as an engine stores the weights: one [N1 + N2, K]
  /// tensor), binds everything with w1 and w2 as its rows [0, N1) and
  /// [N1, N1 + N2), and checks a run.
  void bindBackToBackAndRun(HostTensor &fused);

  std::unique_ptr<Device> device;
  std::optional<Executor> exec;
  std::mt19937 rng{7};
  HostTensor x{DType::BF16, {T, K}}, w1{DType::BF16, {N1, K}},
      w2{DType::BF16, {N2, K}}, y1{DType::BF16, {T, N1}},
      y2{DType::BF16, {T, N2}};
};

TEST_F(PreparedExecutor, TheFirstRunPreparesTheConcatenatedWeights) {
  ASSERT_TRUE(bindAll().ok());
  runAndCheck(w1, w2);
}

TEST_F(PreparedExecutor, RebindingAWeightPreparesAgain) {
  ASSERT_TRUE(bindAll().ok());
  runAndCheck(w1, w2);
  HostTensor other(DType::BF16, {N2, K});
  test::fillRandom(other, rng);
  ASSERT_TRUE(exec->bind("w2", other.ref).ok());
  runAndCheck(w1, other);
}

TEST_F(PreparedExecutor, RebindingActivationsDoesNotPrepareAgain) {
  ASSERT_TRUE(bindAll().ok());
  runAndCheck(w1, w2);
  // Change w1 in place: the prepared copy still holds the old values, and a
  // new activation binding must not silently refresh it (a step loop
  // rebinds activations every step; preparing each time would copy every
  // fused weight per step).
  const HostTensor old1 = w1;
  test::fillRandom(w1, rng);
  HostTensor x2(DType::BF16, {T, K});
  test::fillRandom(x2, rng);
  x = x2;
  ASSERT_TRUE(exec->bind("x", x.ref).ok());
  runAndCheck(old1, w2);
  // prepare() is how a caller publishes in-place weight changes.
  ASSERT_TRUE(exec->prepare().ok());
  runAndCheck(w1, w2);
}

/// Rows [first, first + rows) of `t` as their own [rows, K] tensor.
TensorRef rowsOf(const HostTensor &t, int64_t first, int64_t rows) {
  TensorRef r = t.ref;
  r.data = static_cast<uint8_t *>(t.ref.data) +
           first * K * int64_t(dtypeSize(t.ref.dtype));
  r.sizes[0] = rows;
  return r;
}

/// w1 and w2 copied out of rows of `fused`, for the float64 check.
HostTensor copyRows(const HostTensor &fused, int64_t first, int64_t rows) {
  HostTensor t(DType::BF16, {rows, K});
  for (int64_t i = 0; i < rows * K; ++i)
    t.set(i, fused.get(first * K + i));
  return t;
}

void PreparedExecutor::bindBackToBackAndRun(HostTensor &fused) {
  test::fillRandom(fused, rng);
  ASSERT_TRUE(bindAll().ok());
  ASSERT_TRUE(exec->bind("w1", rowsOf(fused, 0, N1)).ok());
  ASSERT_TRUE(exec->bind("w2", rowsOf(fused, N1, N2)).ok());
  runAndCheck(copyRows(fused, 0, N1), copyRows(fused, N1, N2));
}

TEST_F(PreparedExecutor, WeightsBoundBackToBackAreReadInPlace) {
  HostTensor fused(DType::BF16, {N1 + N2, K});
  bindBackToBackAndRun(fused);
  EXPECT_EQ(exec->preparedArenaBytes(), 0u);
  // Read in place, so an in-place change shows without prepare().
  for (int64_t i = 0; i < N2 * K; ++i)
    fused.set(N1 * K + i, -fused.get(N1 * K + i));
  runAndCheck(copyRows(fused, 0, N1), copyRows(fused, N1, N2));
}

TEST_F(PreparedExecutor, WeightsBoundInTheOtherOrderAreCopied) {
  // Back to back, but w2 first: the program wants [w1; w2].
  HostTensor fused(DType::BF16, {N1 + N2, K});
  test::fillRandom(fused, rng);
  ASSERT_TRUE(bindAll().ok());
  ASSERT_TRUE(exec->bind("w2", rowsOf(fused, 0, N2)).ok());
  ASSERT_TRUE(exec->bind("w1", rowsOf(fused, N2, N1)).ok());
  runAndCheck(copyRows(fused, N2, N1), copyRows(fused, 0, N2));
  EXPECT_EQ(exec->preparedArenaBytes(),
            size_t(exec->artifact().preparedBytes()));
}

TEST_F(PreparedExecutor, RebindingApartMovesTheWeightsIntoTheArena) {
  HostTensor fused(DType::BF16, {N1 + N2, K});
  bindBackToBackAndRun(fused);
  EXPECT_EQ(exec->preparedArenaBytes(), 0u);
  // w2 elsewhere: the run is no longer back to back, so both are copied.
  ASSERT_TRUE(exec->bind("w2", w2.ref).ok());
  runAndCheck(copyRows(fused, 0, N1), w2);
  EXPECT_EQ(exec->preparedArenaBytes(),
            size_t(exec->artifact().preparedBytes()));
  // And back: the arena is released again.
  ASSERT_TRUE(exec->bind("w2", rowsOf(fused, N1, N2)).ok());
  runAndCheck(copyRows(fused, 0, N1), copyRows(fused, N1, N2));
  EXPECT_EQ(exec->preparedArenaBytes(), 0u);
}

TEST_F(PreparedExecutor, PrepareNeedsTheWeightsOnly) {
  ASSERT_TRUE(exec->bind("w1", w1.ref).ok());
  Status s = exec->prepare();
  EXPECT_EQ(s.code(), StatusCode::FailedPrecondition) << s.toString();
  EXPECT_NE(s.message().find("weight 'w2' is not bound"), std::string::npos)
      << s.toString();
  ASSERT_TRUE(exec->bind("w2", w2.ref).ok());
  EXPECT_TRUE(exec->prepare().ok());
}

} // namespace
} // namespace mlart
