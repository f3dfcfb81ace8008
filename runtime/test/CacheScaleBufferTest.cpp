//===- CacheScaleBufferTest.cpp - An artifact's per-tensor fp8 scale ------===//
//
// A per-tensor fp8 cache whose artifact names a scale buffer (the
// compiler's kv_scale argument, vLLM's k_scale): the executor passes that
// buffer to every instruction on the cache, read when it runs, and the
// bound cache's own scale no longer matters.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"
#include "mlart/ArtifactWriter.h"
#include "mlart/Executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace mlart {
namespace {

using test::HostTensor;

constexpr int64_t kTokens = 3, kHeads = 4, kLatent = 16, kRope = 8;
constexpr int64_t kBlocks = 4, kBlockSize = 4, kMaxBlocks = 2;
constexpr float kSoftmaxScale = 0.2f;

KVCacheDesc fp8Desc(DType encoding) {
  KVCacheDesc d;
  d.numBlocks = kBlocks;
  d.blockSize = kBlockSize;
  d.latentRank = kLatent;
  d.ropeDim = kRope;
  d.layout = CacheLayout::Fp8PerTensor;
  d.dtype = encoding;
  return d;
}

/// cache_update of this step's rows, then decode over them.
Artifact updateThenDecode(DType encoding) {
  ArtifactWriter w("fp8_step");
  const uint32_t kvC =
      w.addBuffer("kv_c", BufferRole::Input, DType::BF16, {kTokens, kLatent});
  const uint32_t kPe =
      w.addBuffer("k_pe", BufferRole::Input, DType::BF16, {kTokens, kRope});
  const uint32_t slots = w.addBuffer("slot_mapping", BufferRole::StepMetadata,
                                     DType::I64, {kTokens});
  const uint32_t q = w.addBuffer("q", BufferRole::Input, DType::BF16,
                                 {kTokens, kHeads, kLatent + kRope});
  const uint32_t table = w.addBuffer("block_table", BufferRole::StepMetadata,
                                     DType::I32, {kTokens, kMaxBlocks});
  const uint32_t lens =
      w.addBuffer("seq_lens", BufferRole::StepMetadata, DType::I32, {kTokens});
  const uint32_t out = w.addBuffer("out", BufferRole::Output, DType::F32,
                                   {kTokens, kHeads, kLatent});
  const uint32_t scale =
      w.addBuffer("kv_scale", BufferRole::Weight, DType::F32, {});
  const uint32_t cache = w.addCache("kv_cache", fp8Desc(encoding));
  w.setCacheScale(cache, scale);
  w.cacheUpdate(cache, w.bufferView(kvC), w.bufferView(kPe),
                w.bufferView(slots), "update");
  w.decodeAttention(cache, w.bufferView(q), w.bufferView(table),
                    w.bufferView(lens), w.bufferView(out), kSoftmaxScale,
                    kNoIndex, 0, "attention");
  StatusOr<std::vector<uint8_t>> bytes = w.finish();
  EXPECT_TRUE(bytes.ok()) << bytes.status().toString();
  StatusOr<Artifact> a = Artifact::load(bytes->data(), bytes->size());
  EXPECT_TRUE(a.ok()) << a.status().toString();
  return *a;
}

struct Step {
  HostTensor kvC{DType::BF16, {kTokens, kLatent}};
  HostTensor kPe{DType::BF16, {kTokens, kRope}};
  HostTensor slots = test::indexTensor({5, 0, 14});
  HostTensor q{DType::BF16, {kTokens, kHeads, kLatent + kRope}};
  HostTensor table{DType::I32, {kTokens, kMaxBlocks}};
  HostTensor lens = test::indexTensor({6, 1, 8}, DType::I32);
  HostTensor out{DType::F32, {kTokens, kHeads, kLatent}};
  HostTensor scale{DType::F32, {}};

  explicit Step(std::mt19937 &rng) {
    const int32_t blocks[] = {1, 0, 0, 3, 3, 2};
    std::memcpy(table.bytes.data(), blocks, sizeof(blocks));
    test::fillRandom(kvC, rng);
    test::fillRandom(kPe, rng);
    test::fillRandom(q, rng);
  }

  Status bind(Executor &e) {
    for (auto [name, t] : {std::pair<const char *, HostTensor *>{"kv_c", &kvC},
                           {"k_pe", &kPe},
                           {"slot_mapping", &slots},
                           {"q", &q},
                           {"block_table", &table},
                           {"seq_lens", &lens},
                           {"out", &out},
                           {"kv_scale", &scale}})
      MLART_RETURN_IF_ERROR(e.bind(name, t->ref));
    return Status::success();
  }

  /// The same two kernels called directly on `cache` (its own scale).
  void reference(const KVCacheRef &cache, HostTensor &refOut) const {
    const KernelLibrary &k = cpuKernelLibrary();
    ASSERT_TRUE(
        k.cacheUpdate({kvC.ref, kPe.ref, slots.ref, cache}, nullptr).ok());
    DecodeAttentionArgs da;
    da.q = q.ref;
    da.cache = cache;
    da.blockTable = table.ref;
    da.seqLens = lens.ref;
    da.softmaxScale = kSoftmaxScale;
    da.out = refOut.ref;
    ASSERT_TRUE(k.decodeAttention(da, nullptr).ok());
  }
};

class CacheScaleBuffer : public ::testing::TestWithParam<DType> {};

TEST_P(CacheScaleBuffer, EveryInstructionReadsTheBoundScaleWhenItRuns) {
  const DType encoding = GetParam();
  std::mt19937 rng(unsigned(encoding) * 13 + 1);
  auto device = createCpuDevice();
  StatusOr<Executor> exec =
      Executor::create(updateThenDecode(encoding), *device);
  ASSERT_TRUE(exec.ok()) << exec.status().toString();
  // The bound cache's own scale (1) must not be what the kernels use.
  StatusOr<KVCache> cache = KVCache::create(*device, fp8Desc(encoding), 1.0f);
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE(cache->fill(test::kPoison).ok());
  Step step(rng);
  {
    Status bound = step.bind(*exec);
    ASSERT_TRUE(bound.ok()) << bound.toString();
  }
  ASSERT_TRUE(exec->bindCache("kv_cache", *cache).ok());

  // Two values written into the same bound buffer: the second run follows
  // without a rebind.
  for (float value : {0.05f, 0.0125f}) {
    SCOPED_TRACE(value);
    step.scale.set(0, value);
    StatusOr<KVCache> ref = KVCache::create(*device, fp8Desc(encoding), value);
    ASSERT_TRUE(ref.ok());
    ASSERT_TRUE(
        ref->writeBytes(0, test::cacheBytes(*cache).data(), cache->sizeBytes())
            .ok());
    HostTensor refOut(DType::F32, {kTokens, kHeads, kLatent});
    step.reference(ref->ref(), refOut);

    Status s = exec->run();
    ASSERT_TRUE(s.ok()) << s.toString();
    EXPECT_EQ(test::cacheBytes(*cache), test::cacheBytes(*ref));
    EXPECT_EQ(step.out.bytes, refOut.bytes);
  }
}

TEST_P(CacheScaleBuffer, ABadScaleIsRefusedAndWritesNoRow) {
  const DType encoding = GetParam();
  std::mt19937 rng(3);
  auto device = createCpuDevice();
  StatusOr<Executor> exec =
      Executor::create(updateThenDecode(encoding), *device);
  ASSERT_TRUE(exec.ok());
  StatusOr<KVCache> cache = KVCache::create(*device, fp8Desc(encoding), 0.1f);
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE(cache->fill(test::kPoison).ok());
  Step step(rng);
  {
    Status bound = step.bind(*exec);
    ASSERT_TRUE(bound.ok()) << bound.toString();
  }
  ASSERT_TRUE(exec->bindCache("kv_cache", *cache).ok());
  const std::vector<uint8_t> before = test::cacheBytes(*cache);
  for (float bad : {0.0f, -1.0f, NAN, INFINITY}) {
    SCOPED_TRACE(bad);
    step.scale.set(0, bad);
    Status s = exec->run();
    EXPECT_EQ(s.code(), StatusCode::InvalidArgument) << s.toString();
    EXPECT_NE(s.message().find("scale"), std::string::npos) << s.toString();
    EXPECT_EQ(test::cacheBytes(*cache), before);
  }
}

INSTANTIATE_TEST_SUITE_P(Encodings, CacheScaleBuffer,
                         ::testing::Values(DType::F8E4M3FN, DType::F8E5M2),
                         [](const ::testing::TestParamInfo<DType> &p) {
                           return std::string(dtypeName(p.param));
                         });

} // namespace
} // namespace mlart
