//===- ExecutorTest.cpp - An MLA decode layer run from an artifact --------===//
//
// The program the compiler will emit for one DeepSeek decode layer, written
// by hand with ArtifactWriter, run by the Executor, and compared bit for bit
// with the same kernels called directly.
//
//===----------------------------------------------------------------------===//
#include "mlart/Executor.h"
#include "TestUtil.h"
#include "mlart/ArtifactWriter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

namespace mlart {
namespace {

using test::HostTensor;

// Layer dimensions: small, but every axis distinct so a swapped stride shows.
constexpr int64_t T = 2;       // decode batch, one token per request
constexpr int64_t D = 48;      // hidden
constexpr int64_t H = 3;       // heads
constexpr int64_t NOPE = 16;   // qk_nope_head_dim
constexpr int64_t ROPE = 8;    // qk_rope_head_dim
constexpr int64_t LATENT = 32; // kv_lora_rank
constexpr int64_t VDIM = 12;   // v_head_dim
constexpr int64_t QK = NOPE + ROPE;
constexpr int64_t ROW = LATENT + ROPE;
constexpr int64_t BLOCK = 4, BLOCKS = 8, MAX_BLOCKS = 4, MAX_POS = 64;
constexpr float kEps = 1e-6f;
const float kScale = 1.0f / std::sqrt(float(QK));

KVCacheDesc cacheDesc() {
  KVCacheDesc d;
  d.numBlocks = BLOCKS;
  d.blockSize = BLOCK;
  d.latentRank = LATENT;
  d.ropeDim = ROPE;
  d.dtype = DType::BF16;
  return d;
}

/// Arena layout shared by the artifact and the direct reference.
struct Arena {
  int64_t xn, qp, kv, kvn, qfull, olat, o, attn, qlat;
};

/// Builds the decode layer. With `useQConcat` the absorbed query goes to a
/// temporary and q_concat assembles the query; otherwise q_absorb writes
/// straight into a strided view of the assembled query and a copy writes
/// q_pe next to it.
ArtifactWriter decodeLayer(bool useQConcat, Arena &ar) {
  ArtifactWriter w("decode_layer");
  const uint32_t hidden =
      w.addBuffer("hidden", BufferRole::Input, DType::BF16, {T, D});
  const uint32_t out =
      w.addBuffer("out", BufferRole::Output, DType::BF16, {T, D});
  const uint32_t wNorm =
      w.addBuffer("w_norm", BufferRole::Weight, DType::BF16, {D});
  const uint32_t wQ =
      w.addBuffer("w_q", BufferRole::Weight, DType::BF16, {H * QK, D});
  const uint32_t wKva =
      w.addBuffer("w_kv_a", BufferRole::Weight, DType::BF16, {ROW, D});
  const uint32_t wKvNorm =
      w.addBuffer("w_kv_norm", BufferRole::Weight, DType::BF16, {LATENT});
  const uint32_t wUK =
      w.addBuffer("w_uk", BufferRole::Weight, DType::BF16, {H, NOPE, LATENT});
  const uint32_t wUV =
      w.addBuffer("w_uv", BufferRole::Weight, DType::BF16, {H, LATENT, VDIM});
  const uint32_t wO =
      w.addBuffer("w_o", BufferRole::Weight, DType::BF16, {D, H * VDIM});
  const uint32_t cosSin =
      w.addBuffer("cos_sin", BufferRole::Weight, DType::F32, {MAX_POS, ROPE});
  const uint32_t positions =
      w.addBuffer("positions", BufferRole::StepMetadata, DType::I64, {T});
  const uint32_t slots =
      w.addBuffer("slot_mapping", BufferRole::StepMetadata, DType::I64, {T});
  const uint32_t blockTable = w.addBuffer(
      "block_table", BufferRole::StepMetadata, DType::I32, {T, MAX_BLOCKS});
  const uint32_t seqLens =
      w.addBuffer("seq_lens", BufferRole::StepMetadata, DType::I32, {T});
  const uint32_t cache = w.addCache("kv_cache", cacheDesc());

  ar.xn = w.allocateArena(T * D * 2);
  ar.qp = w.allocateArena(T * H * QK * 2);
  ar.kv = w.allocateArena(T * ROW * 2);
  ar.kvn = w.allocateArena(T * LATENT * 2);
  ar.qfull = w.allocateArena(T * H * ROW * 2);
  ar.olat = w.allocateArena(T * H * LATENT * 2);
  ar.o = w.allocateArena(T * H * VDIM * 2);
  ar.attn = w.allocateArena(T * D * 2);
  ar.qlat = useQConcat ? w.allocateArena(T * H * LATENT * 2) : -1;

  const uint32_t hiddenV = w.bufferView(hidden);
  const uint32_t xn = w.arenaView(ar.xn, DType::BF16, {T, D});
  const uint32_t qp = w.arenaView(ar.qp, DType::BF16, {T, H * QK});
  const uint32_t qNope =
      w.arenaView(ar.qp, DType::BF16, {T, H, NOPE}, {H * QK, QK, 1});
  const uint32_t qPe =
      w.arenaView(ar.qp + NOPE * 2, DType::BF16, {T, H, ROPE}, {H * QK, QK, 1});
  const uint32_t kv = w.arenaView(ar.kv, DType::BF16, {T, ROW});
  const uint32_t kvC = w.arenaView(ar.kv, DType::BF16, {T, LATENT}, {ROW, 1});
  const uint32_t kPe =
      w.arenaView(ar.kv + LATENT * 2, DType::BF16, {T, ROPE}, {ROW, 1});
  const uint32_t kvn = w.arenaView(ar.kvn, DType::BF16, {T, LATENT});
  const uint32_t qFull = w.arenaView(ar.qfull, DType::BF16, {T, H, ROW});
  const uint32_t qFullLatent =
      w.arenaView(ar.qfull, DType::BF16, {T, H, LATENT}, {H * ROW, ROW, 1});
  const uint32_t qFullPe = w.arenaView(ar.qfull + LATENT * 2, DType::BF16,
                                       {T, H, ROPE}, {H * ROW, ROW, 1});
  const uint32_t oLat = w.arenaView(ar.olat, DType::BF16, {T, H, LATENT});
  const uint32_t o3 = w.arenaView(ar.o, DType::BF16, {T, H, VDIM});
  const uint32_t o2 = w.arenaView(ar.o, DType::BF16, {T, H * VDIM});
  const uint32_t attn = w.arenaView(ar.attn, DType::BF16, {T, D});

  w.rmsNorm(hiddenV, w.bufferView(wNorm), xn, kEps, "layer0.input_norm");
  w.linear(xn, w.bufferView(wQ), qp, "layer0.q_proj");
  w.linear(xn, w.bufferView(wKva), kv, "layer0.kv_a_proj");
  w.rmsNorm(kvC, w.bufferView(wKvNorm), kvn, kEps, "layer0.kv_a_norm");
  const uint32_t posV = w.bufferView(positions);
  const uint32_t csV = w.bufferView(cosSin);
  w.rope(qPe, posV, csV, RopeStyle::GptJ, "layer0.q_rope");
  w.rope(kPe, posV, csV, RopeStyle::GptJ, "layer0.k_rope");
  w.cacheUpdate(cache, kvn, kPe, w.bufferView(slots), "layer0.kv_cache_update");
  if (useQConcat) {
    const uint32_t qLat = w.arenaView(ar.qlat, DType::BF16, {T, H, LATENT});
    w.qAbsorb(qNope, w.bufferView(wUK), qLat, "layer0.q_absorb");
    w.qConcat(qLat, qPe, qFull, "layer0.q_concat");
  } else {
    w.qAbsorb(qNope, w.bufferView(wUK), qFullLatent, "layer0.q_absorb");
    w.copy(qPe, qFullPe, "layer0.q_pe_copy");
  }
  w.decodeAttention(cache, qFull, w.bufferView(blockTable),
                    w.bufferView(seqLens), oLat, kScale, kNoIndex, 2,
                    "layer0.decode_attention");
  w.vUp(oLat, w.bufferView(wUV), o3, "layer0.v_up");
  w.linear(o2, w.bufferView(wO), attn, "layer0.o_proj");
  w.add(hiddenV, attn, w.bufferView(out), "layer0.residual");
  return w;
}

/// Caller-side data of the layer: weights, one step's inputs and metadata.
struct LayerData {
  HostTensor hidden{DType::BF16, {T, D}}, out{DType::BF16, {T, D}};
  HostTensor wNorm{DType::BF16, {D}}, wQ{DType::BF16, {H * QK, D}};
  HostTensor wKva{DType::BF16, {ROW, D}}, wKvNorm{DType::BF16, {LATENT}};
  HostTensor wUK{DType::BF16, {H, NOPE, LATENT}};
  HostTensor wUV{DType::BF16, {H, LATENT, VDIM}};
  HostTensor wO{DType::BF16, {D, H *VDIM}};
  HostTensor cosSin;
  HostTensor positions{DType::I64, {T}}, slots{DType::I64, {T}};
  HostTensor blockTable{DType::I32, {T, MAX_BLOCKS}}, seqLens{DType::I32, {T}};
  std::vector<int64_t> contextLens = {5, 9};

  explicit LayerData(std::mt19937 &rng) {
    for (HostTensor *t :
         {&hidden, &wNorm, &wQ, &wKva, &wKvNorm, &wUK, &wUV, &wO})
      test::fillRandom(*t, rng, 0.5f);
    cosSin = test::cosSinTable(MAX_POS, ROPE, 10000.0);
    const int32_t table[T][MAX_BLOCKS] = {{1, 2, 0, 0}, {3, 4, 5, 0}};
    std::memcpy(blockTable.bytes.data(), table, sizeof(table));
    setStep();
  }

  /// Positions, slots and lengths for the next token of each request.
  void setStep() {
    auto *pos = reinterpret_cast<int64_t *>(positions.bytes.data());
    auto *slot = reinterpret_cast<int64_t *>(slots.bytes.data());
    auto *lens = reinterpret_cast<int32_t *>(seqLens.bytes.data());
    auto *table = reinterpret_cast<const int32_t *>(blockTable.bytes.data());
    for (int64_t b = 0; b < T; ++b) {
      const int64_t p = contextLens[size_t(b)];
      pos[b] = p;
      slot[b] = table[b * MAX_BLOCKS + p / BLOCK] * BLOCK + p % BLOCK;
      lens[b] = int32_t(p + 1);
    }
  }

  Status bindAll(Executor &e) {
    const std::pair<const char *, HostTensor *> all[] = {
        {"hidden", &hidden},
        {"out", &out},
        {"w_norm", &wNorm},
        {"w_q", &wQ},
        {"w_kv_a", &wKva},
        {"w_kv_norm", &wKvNorm},
        {"w_uk", &wUK},
        {"w_uv", &wUV},
        {"w_o", &wO},
        {"cos_sin", &cosSin},
        {"positions", &positions},
        {"slot_mapping", &slots},
        {"block_table", &blockTable},
        {"seq_lens", &seqLens}};
    for (const auto &[name, t] : all)
      MLART_RETURN_IF_ERROR(e.bind(name, t->ref));
    return Status::success();
  }
};

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
