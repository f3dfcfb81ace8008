//===- TuneGraphTest.cpp - Executor::tuneGraph's choices, on a fake device ===//
//
// tuneGraph's logic without a GPU: a host device that offers several
// "algorithms" per linear shape and whose graph replays take a time that
// depends on the algorithms currently chosen (a sleep). The tuning must keep,
// for each distinct linear shape, the candidate with the shortest replays,
// tune a shape once however many linears share it, leave the step captured,
// and report a failing choice with the instruction it belongs to.
//
//===----------------------------------------------------------------------===//
#include "mlart/ArtifactWriter.h"
#include "mlart/Executor.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

namespace mlart {
namespace {

constexpr int64_t T = 4, K = 8, N1 = 6, N2 = 10;

/// Host memory and the CPU kernels; streams and graphs are names. A linear
/// of N output columns offers `algorithms[N]` choices; while any shape's
/// choice is not its `fastest[N]`, a replay sleeps 1 ms longer.
class FakeTuningDevice final : public Device {
public:
  std::map<int64_t, int> algorithms = {{N1, 3}, {N2, 4}};
  std::map<int64_t, int> fastest = {{N1, 2}, {N2, 1}};
  std::map<int64_t, int> current;
  int refuseIndex = -1; ///< chooseLinearAlgorithm fails for this index
  int captures = 0, launches = 0;

  DeviceKind kind() const override { return DeviceKind::Cpu; }
  const char *kindName() const override { return "fake"; }
  bool isHostAccessible() const override { return true; }
  const KernelLibrary &kernels() const override { return cpuKernelLibrary(); }

  StatusOr<int> linearAlgorithmCount(const LinearArgs &a) override {
    return algorithms.at(a.weight.sizes[0]);
  }
  Status chooseLinearAlgorithm(const LinearArgs &a, int index) override {
    const int64_t n = a.weight.sizes[0];
    if (index == refuseIndex)
      return internalError("fake: algorithm " + std::to_string(index) +
                           " refused");
    if (index < 0 || index >= algorithms.at(n))
      return outOfRange("fake: no algorithm " + std::to_string(index));
    current[n] = index;
    return Status::success();
  }

  /// Per-head products (q_absorb, v_up), keyed by their output width.
  std::map<int64_t, int> headAlgorithms, headFastest, headCurrent;
  StatusOr<int> perHeadAlgorithmCount(const PerHeadGemmArgs &a) override {
    auto it = headAlgorithms.find(a.w.sizes[2]);
    return it == headAlgorithms.end() ? 1 : it->second;
  }
  Status choosePerHeadAlgorithm(const PerHeadGemmArgs &a, int index) override {
    const int64_t n = a.w.sizes[2];
    if (index < 0 || index >= headAlgorithms.at(n))
      return outOfRange("fake: no per-head algorithm " + std::to_string(index));
    headCurrent[n] = index;
    return Status::success();
  }

  Status beginCapture(StreamHandle) override { return Status::success(); }
  StatusOr<GraphHandle> endCapture(StreamHandle) override {
    ++captures;
    return GraphHandle(this);
  }
  Status launchGraph(GraphHandle, StreamHandle) override {
    ++launches;
    int slow = 0;
    for (auto [n, best] : fastest)
      slow += current.count(n) && current[n] == best ? 0 : 1;
    for (auto [n, best] : headFastest)
      slow += headCurrent.count(n) && headCurrent[n] == best ? 0 : 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(slow));
    return Status::success();
  }

  Status copyHostToDevice(void *dst, const void *src, size_t bytes,
                          StreamHandle) override {
    std::memcpy(dst, src, bytes);
    return Status::success();
  }
  Status copyDeviceToHost(void *dst, const void *src, size_t bytes,
                          StreamHandle) override {
    std::memcpy(dst, src, bytes);
    return Status::success();
  }
  Status copyDeviceToDevice(void *dst, const void *src, size_t bytes,
                            StreamHandle) override {
    std::memmove(dst, src, bytes);
    return Status::success();
  }
  Status memset(void *dst, uint8_t value, size_t bytes,
                StreamHandle) override {
    std::memset(dst, value, bytes);
    return Status::success();
  }
  Status synchronize(StreamHandle) override { return Status::success(); }
  Status copyView(const TensorRef &, const TensorRef &, StreamHandle) override {
    return unimplemented("fake: copyView");
  }

protected:
  StatusOr<void *> allocateRaw(size_t bytes) override {
    void *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!p)
      return resourceExhausted("fake: out of memory");
    return p;
  }
  void freeRaw(void *data, size_t) noexcept override { std::free(data); }
  StatusOr<StreamHandle> createStreamRaw() override {
    return StreamHandle(this); // any non-null name
  }
  void destroyStreamRaw(StreamHandle) noexcept override {}
};

/// y1 = x W1^T and y2 = x W2^T (the same shape), y3 = x W3^T (another).
Artifact threeLinears() {
  ArtifactWriter w("three_linears");
  const DType f = DType::F32;
  uint32_t x = w.addBuffer("x", BufferRole::Input, f, {T, K});
  uint32_t w1 = w.addBuffer("w1", BufferRole::Weight, f, {N1, K});
  uint32_t w2 = w.addBuffer("w2", BufferRole::Weight, f, {N1, K});
  uint32_t w3 = w.addBuffer("w3", BufferRole::Weight, f, {N2, K});
  uint32_t y1 = w.addBuffer("y1", BufferRole::Output, f, {T, N1});
  uint32_t y2 = w.addBuffer("y2", BufferRole::Output, f, {T, N1});
  uint32_t y3 = w.addBuffer("y3", BufferRole::Output, f, {T, N2});
  w.linear(w.bufferView(x), w.bufferView(w1), w.bufferView(y1), "first");
  w.linear(w.bufferView(x), w.bufferView(w2), w.bufferView(y2), "same_shape");
  w.linear(w.bufferView(x), w.bufferView(w3), w.bufferView(y3), "other");
  StatusOr<std::vector<uint8_t>> bytes = w.finish();
  EXPECT_TRUE(bytes.ok()) << bytes.status().toString();
  StatusOr<Artifact> a = Artifact::load(bytes->data(), bytes->size());
  EXPECT_TRUE(a.ok()) << a.status().toString();
  return std::move(a).value();
}

class TuneGraph : public ::testing::Test {
protected:
  void SetUp() override {
    StatusOr<Executor> e = Executor::create(threeLinears(), dev);
    ASSERT_TRUE(e.ok()) << e.status().toString();
    exec.emplace(std::move(e).value());
    struct Operand {
      const char *name;
      int64_t rows, cols;
    };
    for (const Operand &o : {Operand{"x", T, K}, Operand{"w1", N1, K},
                             Operand{"w2", N1, K}, Operand{"w3", N2, K},
                             Operand{"y1", T, N1}, Operand{"y2", T, N1},
                             Operand{"y3", T, N2}}) {
      StatusOr<Buffer> b = dev.allocate(size_t(o.rows * o.cols) * 4);
      ASSERT_TRUE(b.ok());
      float *p = static_cast<float *>(b->data());
      for (int64_t i = 0; i < o.rows * o.cols; ++i)
        p[i] = float((i * 7) % 5) * 0.25f - 0.5f;
      TensorRef t =
          TensorRef::contiguous(b->data(), DType::F32, {o.rows, o.cols});
      ASSERT_TRUE(exec->bind(o.name, t).ok()) << o.name;
      buffers.push_back(std::move(b).value());
    }
    StatusOr<Stream> s = dev.createStream();
    ASSERT_TRUE(s.ok());
    stream.emplace(std::move(s).value());
  }

  FakeTuningDevice dev;
  std::optional<Executor> exec;
  std::vector<Buffer> buffers;
  std::optional<Stream> stream;
};

TEST_F(TuneGraph, KeepsTheFastestCandidateOfEachShapeOnce) {
  StatusOr<std::vector<Executor::GemmChoice>> choices =
      exec->tuneGraph(stream->handle(), 3);
  ASSERT_TRUE(choices.ok()) << choices.status().toString();
  ASSERT_EQ(choices->size(), 2u) << "the second linear shares the first's shape";
  EXPECT_EQ((*choices)[0].instruction, 0u);
  EXPECT_EQ((*choices)[0].candidates, 3);
  EXPECT_EQ((*choices)[0].chosen, 2);
  EXPECT_EQ((*choices)[1].instruction, 2u);
  EXPECT_EQ((*choices)[1].candidates, 4);
  EXPECT_EQ((*choices)[1].chosen, 1);
  // The device is left with the kept choices, and the step captured with
  // them: one capture per candidate, one at the end.
  EXPECT_EQ(dev.current[N1], 2);
  EXPECT_EQ(dev.current[N2], 1);
  EXPECT_EQ(dev.captures, 3 + 4 + 1);
  EXPECT_TRUE(exec->hasGraph());
  // While the second shape was tuned, the first already ran its choice:
  // its best replay is the fastest of all (no sleep at all).
  EXPECT_LT((*choices)[1].microseconds, 1000.0);
  EXPECT_GE((*choices)[0].microseconds, 1000.0) << "W3 was not tuned yet";
}

TEST_F(TuneGraph, ReportsAChoiceTheDeviceRefusesWithItsInstruction) {
  dev.refuseIndex = 1;
  StatusOr<std::vector<Executor::GemmChoice>> choices =
      exec->tuneGraph(stream->handle(), 1);
  ASSERT_FALSE(choices.ok());
  EXPECT_EQ(choices.status().code(), StatusCode::Internal);
  EXPECT_NE(choices.status().message().find("tuneGraph: instruction #0"),
            std::string::npos)
      << choices.status().toString();
  EXPECT_NE(choices.status().message().find("algorithm 1 refused"),
            std::string::npos);
}

TEST_F(TuneGraph, NothingToChooseLeavesTheExecutorAlone) {
  dev.algorithms = {{N1, 1}, {N2, 1}};
  StatusOr<std::vector<Executor::GemmChoice>> choices =
      exec->tuneGraph(stream->handle());
  ASSERT_TRUE(choices.ok()) << choices.status().toString();
  EXPECT_TRUE(choices->empty());
  EXPECT_EQ(dev.captures, 0);
  EXPECT_FALSE(exec->hasGraph());
}

// q_absorb and v_up are GEMMs too: their per-head products are tuned like
// the linears, by their own shapes.
TEST(TuneGraphPerHead, ChoosesTheAbsorbAndVUpProducts) {
  constexpr int64_t H = 2, NOPE = 4, LAT = 6, V = 3;
  ArtifactWriter w("per_head");
  const DType f = DType::F32;
  uint32_t q = w.addBuffer("q_nope", BufferRole::Input, f, {T, H, NOPE});
  uint32_t wuk = w.addBuffer("w_uk", BufferRole::Weight, f, {H, NOPE, LAT});
  uint32_t wuv = w.addBuffer("w_uv", BufferRole::Weight, f, {H, LAT, V});
  uint32_t out = w.addBuffer("out", BufferRole::Output, f, {T, H, V});
  const int64_t off = w.allocateArena(T * H * LAT * 4);
  const uint32_t lat = w.arenaView(off, f, {T, H, LAT});
  w.qAbsorb(w.bufferView(q), w.bufferView(wuk), lat, "absorb");
  w.vUp(lat, w.bufferView(wuv), w.bufferView(out), "v_up");
  StatusOr<std::vector<uint8_t>> bytes = w.finish();
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  StatusOr<Artifact> a = Artifact::load(bytes->data(), bytes->size());
  ASSERT_TRUE(a.ok()) << a.status().toString();

  FakeTuningDevice dev;
  dev.fastest.clear();
  dev.headAlgorithms = {{LAT, 2}, {V, 3}};
  dev.headFastest = {{LAT, 1}, {V, 2}};
  StatusOr<Executor> e = Executor::create(*a, dev);
  ASSERT_TRUE(e.ok()) << e.status().toString();
  std::vector<Buffer> keep;
  auto bind = [&](const char *name, std::vector<int64_t> sizes) {
    int64_t n = 1;
    for (int64_t d : sizes)
      n *= d;
    StatusOr<Buffer> b = dev.allocate(size_t(n) * 4);
    ASSERT_TRUE(b.ok());
    std::memset(b->data(), 0, size_t(n) * 4);
    TensorRef t;
    t.data = b->data();
    t.dtype = f;
    t.rank = int(sizes.size());
    for (int d = t.rank - 1, stride = 1; d >= 0; stride *= int(sizes[size_t(d)]), --d) {
      t.sizes[d] = sizes[size_t(d)];
      t.strides[d] = stride;
    }
    ASSERT_TRUE(e->bind(name, t).ok()) << name;
    keep.push_back(std::move(b).value());
  };
  bind("q_nope", {T, H, NOPE});
  bind("w_uk", {H, NOPE, LAT});
  bind("w_uv", {H, LAT, V});
  bind("out", {T, H, V});
  StatusOr<Stream> st = dev.createStream();
  ASSERT_TRUE(st.ok());
  StatusOr<std::vector<Executor::GemmChoice>> choices =
      e->tuneGraph(st->handle(), 2);
  ASSERT_TRUE(choices.ok()) << choices.status().toString();
  ASSERT_EQ(choices->size(), 2u);
  EXPECT_EQ((*choices)[0].instruction, 0u);
  EXPECT_EQ((*choices)[0].candidates, 2);
  EXPECT_EQ((*choices)[0].chosen, 1);
  EXPECT_EQ((*choices)[1].instruction, 1u);
  EXPECT_EQ((*choices)[1].candidates, 3);
  EXPECT_EQ((*choices)[1].chosen, 2);
  EXPECT_EQ(dev.headCurrent[LAT], 1);
  EXPECT_EQ(dev.headCurrent[V], 2);
  EXPECT_EQ(e->describeGemmChoice((*choices)[1]).rfind("v_up #1 (", 0), 0u)
      << e->describeGemmChoice((*choices)[1]);
}

} // namespace
} // namespace mlart
