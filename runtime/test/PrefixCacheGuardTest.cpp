//===- PrefixCacheGuardTest.cpp - Regression for vLLM #36282 --------------===//
//
// vLLM #36282: a warm-up / profile run executed the cache write with a slot
// mapping left over from real requests and silently overwrote pages that
// the prefix cache still served. Here: (1) a dummy step whose slots are all
// -1 leaves cached blocks bit-identical, and (2) in checked mode a stale
// slot mapping pointing into cached blocks is refused before any byte is
// written, and the refusal is counted.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "mlart/BlockManager.h"
#include "mlart/Device.h"
#include "mlart/KVCache.h"

#include <gtest/gtest.h>

using namespace mlart;
using namespace mlart::test;

namespace {

class PrefixCacheGuard : public ::testing::Test {
protected:
  void SetUp() override {
    desc.numBlocks = 8;
    desc.blockSize = 16;
    desc.latentRank = 512;
    desc.ropeDim = 64;
    desc.dtype = DType::BF16;
    cache = std::make_unique<KVCache>(
        std::move(KVCache::create(*dev, desc).value()));
    ASSERT_TRUE(cache->fill(kPoison).ok());
    manager = std::make_unique<BlockManager>(
        std::move(BlockManager::create({8, 16, true}).value()));
    manager->setCheckedMode(true);
  }

  /// Runs cacheUpdate over `slots` with fresh random rows through the guard.
  Status write(const std::vector<int64_t> &slots, int64_t tokens) {
    HostTensor kvC(DType::BF16, {tokens, 512}), kPe(DType::BF16, {tokens, 64});
    fillRandom(kvC, rng);
    fillRandom(kPe, rng);
    HostTensor slotMapping = indexTensor(slots);
    StatusOr<KVCacheRef> ref = manager->guard(cache->ref());
    if (!ref.ok())
      return ref.status();
    return dev->kernels().cacheUpdate({kvC.ref, kPe.ref, slotMapping.ref, *ref},
                                      nullptr);
  }

  /// Prefills a 40-token prompt: blocks for tokens 0..31 become cached.
  std::vector<int64_t> prefillPrompt() {
    std::vector<int32_t> prompt(40);
    for (size_t i = 0; i < prompt.size(); ++i)
      prompt[i] = int32_t(1000 + i);
    EXPECT_EQ(manager->addRequest(1, prompt.data(), 40).value(), 0);
    std::vector<int64_t> slots = manager->buildSlotMapping({{1, 0, 40}}, 40).value();
    EXPECT_TRUE(write(slots, 40).ok());
    EXPECT_TRUE(manager->commitComputed(1, 40).ok());
    return slots;
  }

  std::unique_ptr<Device> dev = createCpuDevice();
  KVCacheDesc desc;
  std::unique_ptr<KVCache> cache;
  std::unique_ptr<BlockManager> manager;
  std::mt19937 rng{36282};
};

TEST_F(PrefixCacheGuard, ProfileRunWithAllNegativeSlotsKeepsCachedBlocks) {
  prefillPrompt();
  const std::vector<uint8_t> before = cacheBytes(*cache);
  // A dummy/profile step: max-size batch, every slot -1.
  ASSERT_TRUE(write(std::vector<int64_t>(128, -1), 128).ok());
  EXPECT_EQ(cacheBytes(*cache), before);
  EXPECT_EQ(manager->refusedWrites(), 0u);
}

TEST_F(PrefixCacheGuard, StaleSlotMappingIntoCachedBlocksIsRefused) {
  const std::vector<int64_t> stale = prefillPrompt();
  const std::vector<int32_t> blocks = manager->blockTable(1).value();
  ASSERT_TRUE(manager->isCached(blocks[0]));
  ASSERT_TRUE(manager->isCached(blocks[1]));
  ASSERT_FALSE(manager->isCached(blocks[2]));
  // The owner finishes; its hashed blocks stay cached for later requests.
  ASSERT_TRUE(manager->freeRequest(1).ok());
  const std::vector<uint8_t> before = cacheBytes(*cache);

  // A warm-up step replays the stale mapping: 32 of its 40 rows land in
  // cached blocks, 8 in a free one. Nothing at all may be written.
  Status s = write(stale, 40);
  EXPECT_EQ(s.code(), StatusCode::PermissionDenied);
  EXPECT_NE(s.message().find("prefix-cached block"), std::string::npos)
      << s.message();
  EXPECT_EQ(manager->refusedWrites(), 32u);
  EXPECT_EQ(manager->stats().refusedWrites, 32u);
  EXPECT_EQ(cacheBytes(*cache), before);

  // The fused rope + update path is guarded the same way and leaves q_pe.
  const HostTensor &table = cosSinTable(64, 64, 10000.0);
  HostTensor kvC(DType::BF16, {2, 512}), kPe(DType::BF16, {2, 64}),
      qPe(DType::BF16, {2, 4, 64});
  fillRandom(kvC, rng);
  fillRandom(kPe, rng);
  fillRandom(qPe, rng);
  const HostTensor q0 = qPe;
  HostTensor positions = indexTensor({0, 1});
  HostTensor slots = indexTensor({-1, stale[3]});
  RopeCacheUpdateArgs args;
  args.kvC = kvC.ref;
  args.kPe = kPe.ref;
  args.slotMapping = slots.ref;
  args.cache = manager->guard(cache->ref()).value();
  args.positions = positions.ref;
  args.cosSin = table.ref;
  args.qPe = qPe.ref;
  EXPECT_EQ(dev->kernels().ropeCacheUpdate(args, nullptr).code(),
            StatusCode::PermissionDenied);
  EXPECT_EQ(manager->refusedWrites(), 33u);
  EXPECT_EQ(qPe.bytes, q0.bytes);
  EXPECT_EQ(cacheBytes(*cache), before);

  // The prefix is intact and still served to a new request.
  std::vector<int32_t> prompt(40);
  for (size_t i = 0; i < prompt.size(); ++i)
    prompt[i] = int32_t(1000 + i);
  EXPECT_EQ(manager->addRequest(2, prompt.data(), 40).value(), 32);
}

TEST_F(PrefixCacheGuard, NullBlockWritesAreRefused) {
  Status s = write({3, -1}, 2);
  EXPECT_EQ(s.code(), StatusCode::PermissionDenied);
  EXPECT_NE(s.message().find("null block"), std::string::npos);
  EXPECT_EQ(manager->refusedWrites(), 1u);
}

TEST_F(PrefixCacheGuard, WithoutCheckedModeTheStaleWriteCorrupts) {
  // Documents what the guard prevents.
  const std::vector<int64_t> stale = prefillPrompt();
  ASSERT_TRUE(manager->freeRequest(1).ok());
  const std::vector<uint8_t> before = cacheBytes(*cache);
  manager->setCheckedMode(false);
  ASSERT_TRUE(write(stale, 40).ok());
  EXPECT_NE(cacheBytes(*cache), before);
  EXPECT_EQ(manager->refusedWrites(), 0u);
}

} // namespace
