//===- ExecutorTest.cpp - An MLA decode layer run from an artifact --------===//
//
// The program the compiler will emit for one DeepSeek decode layer, written
// by hand with ArtifactWriter, run by the Executor, and compared bit for bit
// with the same kernels called directly.
//
//===----------------------------------------------------------------------===//
#include "mlart/Executor.h"
#include "DecodeLayerFixture.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

namespace mlart {
namespace {

using namespace test::decode_layer;
using test::HostTensor;

/// A view of host scratch memory laid out like the artifact's arena.
TensorRef at(std::vector<uint8_t> &mem, int64_t off, DType dtype,
             std::initializer_list<int64_t> sizes,
             std::initializer_list<int64_t> strides = {}) {
  TensorRef t = TensorRef::contiguous(mem.data() + off, dtype, sizes);
  int d = 0;
  for (int64_t s : strides)
    t.strides[d++] = s;
  return t;
}

/// The same layer through direct kernel calls.
void referenceLayer(LayerData &in, const Arena &ar, bool useQConcat,
                    const KVCacheRef &cache, HostTensor &out) {
  const KernelLibrary &k = cpuKernelLibrary();
  std::vector<uint8_t> m(4096 * 8, 0);
  const DType bf = DType::BF16;
  TensorRef xn = at(m, ar.xn, bf, {T, D});
  TensorRef qp = at(m, ar.qp, bf, {T, H * QK});
  TensorRef qNope = at(m, ar.qp, bf, {T, H, NOPE}, {H * QK, QK, 1});
  TensorRef qPe = at(m, ar.qp + NOPE * 2, bf, {T, H, ROPE}, {H * QK, QK, 1});
  TensorRef kv = at(m, ar.kv, bf, {T, ROW});
  TensorRef kvC = at(m, ar.kv, bf, {T, LATENT}, {ROW, 1});
  TensorRef kPe = at(m, ar.kv + LATENT * 2, bf, {T, ROPE}, {ROW, 1});
  TensorRef kvn = at(m, ar.kvn, bf, {T, LATENT});
  TensorRef qFull = at(m, ar.qfull, bf, {T, H, ROW});
  TensorRef oLat = at(m, ar.olat, bf, {T, H, LATENT});
  TensorRef o3 = at(m, ar.o, bf, {T, H, VDIM});
  TensorRef o2 = at(m, ar.o, bf, {T, H * VDIM});
  TensorRef attn = at(m, ar.attn, bf, {T, D});

  ASSERT_TRUE(k.rmsNorm({in.hidden.ref, in.wNorm.ref, kEps, xn}, nullptr).ok());
  ASSERT_TRUE(k.linear({xn, in.wQ.ref, qp}, nullptr).ok());
  ASSERT_TRUE(k.linear({xn, in.wKva.ref, kv}, nullptr).ok());
  ASSERT_TRUE(k.rmsNorm({kvC, in.wKvNorm.ref, kEps, kvn}, nullptr).ok());
  ASSERT_TRUE(
      k.rope({qPe, in.positions.ref, in.cosSin.ref, RopeStyle::GptJ}, nullptr)
          .ok());
  ASSERT_TRUE(
      k.rope({kPe, in.positions.ref, in.cosSin.ref, RopeStyle::GptJ}, nullptr)
          .ok());
  ASSERT_TRUE(k.cacheUpdate({kvn, kPe, in.slots.ref, cache}, nullptr).ok());
  // Assemble the query the simplest way: absorb into a temporary and
  // concatenate with q_pe; the artifact's two variants must match it.
  std::vector<uint8_t> qLatMem(size_t(T * H * LATENT * 2));
  TensorRef qLat = at(qLatMem, 0, bf, {T, H, LATENT});
  ASSERT_TRUE(k.qAbsorb({qNope, in.wUK.ref, qLat}, nullptr).ok());
  ASSERT_TRUE(k.qConcat({qLat, qPe, qFull}, nullptr).ok());
  (void)useQConcat;
  DecodeAttentionArgs da;
  da.q = qFull;
  da.cache = cache;
  da.blockTable = in.blockTable.ref;
  da.seqLens = in.seqLens.ref;
  da.softmaxScale = kScale;
  da.out = oLat;
  da.numSplits = 2;
  ASSERT_TRUE(k.decodeAttention(da, nullptr).ok());
  ASSERT_TRUE(k.vUp({oLat, in.wUV.ref, o3}, nullptr).ok());
  ASSERT_TRUE(k.linear({o2, in.wO.ref, attn}, nullptr).ok());
  ASSERT_TRUE(k.add({in.hidden.ref, attn, out.ref}, nullptr).ok());
}

/// Fills every context row of both caches with the same random bf16 values.
void fillContext(KVCache &a, KVCache &b, std::mt19937 &rng) {
  HostTensor rows(DType::BF16, {BLOCKS * BLOCK, ROW});
  test::fillRandom(rows, rng);
  ASSERT_TRUE(a.writeBytes(0, rows.bytes.data(), a.sizeBytes()).ok());
  ASSERT_TRUE(b.writeBytes(0, rows.bytes.data(), b.sizeBytes()).ok());
}

class DecodeLayer : public ::testing::TestWithParam<bool> {};

TEST_P(DecodeLayer, MatchesDirectKernelCallsBitForBitOverTwoSteps) {
  const bool useQConcat = GetParam();
  std::mt19937 rng(7);
  auto device = createCpuDevice();
  Arena ar;
  StatusOr<std::vector<uint8_t>> bytes = decodeLayer(useQConcat, ar).finish();
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  StatusOr<Artifact> artifact = Artifact::load(bytes->data(), bytes->size());
  ASSERT_TRUE(artifact.ok()) << artifact.status().toString();
  StatusOr<Executor> exec = Executor::create(*artifact, *device);
  ASSERT_TRUE(exec.ok()) << exec.status().toString();

  StatusOr<KVCache> cache = KVCache::create(*device, cacheDesc());
  StatusOr<KVCache> refCache = KVCache::create(*device, cacheDesc());
  ASSERT_TRUE(cache.ok() && refCache.ok());
  fillContext(*cache, *refCache, rng);

  LayerData data(rng);
  ASSERT_TRUE(data.bindAll(*exec).ok());
  ASSERT_TRUE(exec->bindCache("kv_cache", *cache).ok());
  std::vector<std::string> timed;
  exec->setTimingCallback([&](size_t i, const Instruction &inst, double s) {
    EXPECT_EQ(i, timed.size() % 13);
    EXPECT_GE(s, 0.0);
    timed.push_back(inst.location);
  });

  for (int step = 0; step < 2; ++step) {
    // Step 2 reuses the executor: new activations and metadata in the same
    // bound memory (the caller's step loop).
    if (step == 1) {
      test::fillRandom(data.hidden, rng, 0.5f);
      for (int64_t &len : data.contextLens)
        ++len;
      data.setStep();
    }
    LayerData refIn = data; // same inputs for the direct calls
    HostTensor refOut(DType::BF16, {T, D});
    referenceLayer(refIn, ar, useQConcat, refCache->ref(), refOut);

    Status s = exec->run();
    ASSERT_TRUE(s.ok()) << s.toString();
    EXPECT_EQ(data.out.bytes, refOut.bytes) << "step " << step;
    EXPECT_EQ(test::cacheBytes(*cache), test::cacheBytes(*refCache))
        << "step " << step;
    // q_pe was rotated in place in the arena, as in the reference.
  }
  ASSERT_EQ(timed.size(), 2 * artifact->instructions().size());
  EXPECT_EQ(timed[0], "layer0.input_norm");
  EXPECT_EQ(timed.back(), "layer0.residual");

  // The output is not trivially the residual input.
  EXPECT_NE(data.out.bytes, data.hidden.bytes);
}

INSTANTIATE_TEST_SUITE_P(QueryAssembly, DecodeLayer, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &p) {
                           return p.param ? "QConcat" : "StridedWrites";
                         });

class ExecutorErrors : public ::testing::Test {
protected:
  void SetUp() override {
    device = createCpuDevice();
    StatusOr<std::vector<uint8_t>> bytes = decodeLayer(false, ar).finish();
    ASSERT_TRUE(bytes.ok());
    StatusOr<Artifact> a = Artifact::load(bytes->data(), bytes->size());
    ASSERT_TRUE(a.ok());
    StatusOr<Executor> e = Executor::create(*a, *device);
    ASSERT_TRUE(e.ok());
    exec.emplace(std::move(*e));
    StatusOr<KVCache> c = KVCache::create(*device, cacheDesc());
    ASSERT_TRUE(c.ok());
    cache.emplace(std::move(*c));
  }

  std::unique_ptr<Device> device;
  Arena ar;
  std::optional<Executor> exec;
  std::optional<KVCache> cache;
  std::mt19937 rng{11};
};

TEST_F(ExecutorErrors, RefusesToRunWithUnboundArguments) {
  Status s = exec->run();
  EXPECT_EQ(s.code(), StatusCode::FailedPrecondition);
  EXPECT_NE(s.message().find("'hidden' is not bound"), std::string::npos)
      << s.toString();
  LayerData data(rng);
  ASSERT_TRUE(data.bindAll(*exec).ok());
  EXPECT_FALSE(exec->fullyBound());
  s = exec->run();
  EXPECT_EQ(s.code(), StatusCode::FailedPrecondition);
  EXPECT_NE(s.message().find("cache 'kv_cache' is not bound"),
            std::string::npos);
  EXPECT_EQ(data.out.bytes, HostTensor(DType::BF16, {T, D}).bytes)
      << "nothing ran";
  ASSERT_TRUE(exec->bindCache("kv_cache", *cache).ok());
  EXPECT_TRUE(exec->fullyBound());
  EXPECT_TRUE(exec->run().ok());
  exec->unbindAll();
  EXPECT_EQ(exec->run().code(), StatusCode::FailedPrecondition);
}

TEST_F(ExecutorErrors, BindChecksNameDtypeShapeAndLayout) {
  HostTensor ok(DType::BF16, {T, D});
  EXPECT_TRUE(exec->bind("hidden", ok.ref).ok());
  HostTensor wrongDtype(DType::F32, {T, D});
  Status s = exec->bind("hidden", wrongDtype.ref);
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  EXPECT_NE(s.message().find("declared [2, 48] bf16, got [2, 48] f32"),
            std::string::npos)
      << s.toString();
  HostTensor wrongShape(DType::BF16, {T, D + 1});
  EXPECT_EQ(exec->bind("hidden", wrongShape.ref).code(),
            StatusCode::InvalidArgument);
  HostTensor wrongRank(DType::BF16, {T * D});
  EXPECT_EQ(exec->bind("hidden", wrongRank.ref).code(),
            StatusCode::InvalidArgument);
  EXPECT_NE(exec->bind("nothing", ok.ref).message().find("no buffer 'nothing'"),
            std::string::npos);
  EXPECT_NE(exec->bind("kv_cache", ok.ref).message().find("use bindCache"),
            std::string::npos);
  HostTensor wide(DType::BF16, {T, 2 * D});
  TensorRef strided = wide.ref; // right shape, but rows are not packed
  strided.sizes[1] = D;
  EXPECT_NE(exec->bind("hidden", strided).message().find("contiguous"),
            std::string::npos);
  TensorRef null = ok.ref;
  null.data = nullptr;
  EXPECT_EQ(exec->bind("hidden", null).code(), StatusCode::InvalidArgument);
}

TEST_F(ExecutorErrors, BindCacheChecksTheDescriptor) {
  KVCacheDesc other = cacheDesc();
  other.numBlocks = BLOCKS + 1;
  StatusOr<KVCache> bigger = KVCache::create(*device, other);
  ASSERT_TRUE(bigger.ok());
  Status s = exec->bindCache("kv_cache", *bigger);
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  EXPECT_NE(s.message().find("blocks 9"), std::string::npos) << s.toString();
  other = cacheDesc();
  other.dtype = DType::F16;
  StatusOr<KVCache> f16 = KVCache::create(*device, other);
  ASSERT_TRUE(f16.ok());
  EXPECT_EQ(exec->bindCache("kv_cache", *f16).code(),
            StatusCode::InvalidArgument);
  EXPECT_EQ(exec->bindCache("hidden", *cache).code(),
            StatusCode::InvalidArgument);
  EXPECT_TRUE(exec->bindCache("kv_cache", *cache).ok());
}

TEST_F(ExecutorErrors, KernelErrorNamesTheInstructionAndWritesNoCacheRow) {
  LayerData data(rng);
  ASSERT_TRUE(data.bindAll(*exec).ok());
  ASSERT_TRUE(exec->bindCache("kv_cache", *cache).ok());
  ASSERT_TRUE(cache->fill(test::kPoison).ok());
  // Request 1's slot is one past the cache: the update must refuse the
  // whole batch, including request 0's valid row.
  reinterpret_cast<int64_t *>(data.slots.bytes.data())[1] = BLOCKS * BLOCK;
  const std::vector<uint8_t> before = test::cacheBytes(*cache);
  std::vector<size_t> ran;
  exec->setTimingCallback(
      [&](size_t i, const Instruction &, double) { ran.push_back(i); });
  Status s = exec->run();
  EXPECT_EQ(s.code(), StatusCode::OutOfRange) << s.toString();
  EXPECT_NE(
      s.message().find("instruction #6 cache_update (layer0.kv_cache_update)"),
      std::string::npos)
      << s.toString();
  EXPECT_EQ(test::cacheBytes(*cache), before);
  EXPECT_EQ(s.message().rfind("instruction #6 ", 0), 0u) << s.toString();
  EXPECT_EQ(ran.size(), 6u) << "instructions before the failing one ran";
  EXPECT_EQ(data.out.bytes, HostTensor(DType::BF16, {T, D}).bytes)
      << "instructions after the failing one did not";
  // The untimed path reports the same error in the same words.
  exec->setTimingCallback(nullptr);
  Status untimed = exec->run();
  EXPECT_EQ(untimed.code(), s.code());
  EXPECT_EQ(untimed.message(), s.message());
  EXPECT_EQ(test::cacheBytes(*cache), before);

  // Fixing the metadata makes the same executor run again.
  data.setStep();
  EXPECT_TRUE(exec->run().ok());
  EXPECT_NE(test::cacheBytes(*cache), before);
}

TEST_F(ExecutorErrors, CheckedModeGuardTravelsWithTheBoundRef) {
  LayerData data(rng);
  ASSERT_TRUE(data.bindAll(*exec).ok());
  // Every block protected, as if all were prefix-cached.
  std::vector<uint8_t> protect(BLOCKS, 1);
  uint64_t refused = 0;
  KVCacheRef guarded = cache->ref();
  guarded.writeProtect = protect.data();
  guarded.refusedWrites = &refused;
  ASSERT_TRUE(exec->bindCache("kv_cache", guarded).ok());
  const std::vector<uint8_t> before = test::cacheBytes(*cache);
  Status s = exec->run();
  EXPECT_EQ(s.code(), StatusCode::PermissionDenied) << s.toString();
  EXPECT_EQ(refused, uint64_t(T));
  EXPECT_EQ(test::cacheBytes(*cache), before);
}

TEST_F(ExecutorErrors, CpuRunsEveryInstructionInOrderWhateverTheStreamLimit) {
  EXPECT_EQ(exec->streamPlan().status().code(),
            StatusCode::FailedPrecondition);
  LayerData data(rng);
  ASSERT_TRUE(data.bindAll(*exec).ok());
  ASSERT_TRUE(exec->bindCache("kv_cache", *cache).ok());
  EXPECT_EQ(exec->maxStreams(), 2);
  exec->setMaxStreams(4);
  StatusOr<const StreamPlan *> plan = exec->streamPlan();
  ASSERT_TRUE(plan.ok()) << plan.status().toString();
  EXPECT_EQ((*plan)->numStreams, 1);
  EXPECT_EQ((*plan)->stream,
            std::vector<int>(exec->artifact().instructions().size(), 0));
  exec->setMaxStreams(0);
  EXPECT_EQ(exec->maxStreams(), 1);
  EXPECT_TRUE(exec->run().ok());
}

// The CPU has one algorithm per linear: nothing for tuneGraph to choose,
// and it needs a created stream like captureGraph (the CPU has none).
TEST_F(ExecutorErrors, CpuOffersOneLinearAlgorithm) {
  HostTensor x(DType::BF16, {2, 8}), w(DType::BF16, {4, 8}),
      y(DType::BF16, {2, 4});
  const LinearArgs a{x.ref, w.ref, y.ref};
  StatusOr<int> n = device->linearAlgorithmCount(a);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  EXPECT_TRUE(device->chooseLinearAlgorithm(a, 0).ok());
  EXPECT_EQ(device->chooseLinearAlgorithm(a, 1).code(), StatusCode::OutOfRange);
  EXPECT_EQ(device->chooseLinearAlgorithm(a, -1).code(),
            StatusCode::OutOfRange);

  LayerData data(rng);
  ASSERT_TRUE(data.bindAll(*exec).ok());
  ASSERT_TRUE(exec->bindCache("kv_cache", *cache).ok());
  StatusOr<std::vector<Executor::GemmChoice>> choices =
      exec->tuneGraph(nullptr);
  EXPECT_EQ(choices.status().code(), StatusCode::InvalidArgument);
  EXPECT_FALSE(exec->hasGraph());
}

} // namespace
} // namespace mlart
