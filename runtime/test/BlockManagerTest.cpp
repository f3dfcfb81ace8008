//===- BlockManagerTest.cpp - Allocation, tables, slots, prefix caching ---===//
#include "mlart/BlockManager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <vector>

using namespace mlart;

namespace {

BlockManager make(int64_t blocks, int64_t blockSize = 4, bool caching = true) {
  StatusOr<BlockManager> m =
      BlockManager::create({blocks, blockSize, caching});
  EXPECT_TRUE(m.ok()) << m.status().toString();
  return std::move(m).value();
}

std::vector<int32_t> tokens(int64_t n, int32_t first = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<int32_t> table(const BlockManager &m, RequestId id) {
  return m.blockTable(id).value();
}

TEST(BlockManager, RejectsBadConfigs) {
  EXPECT_EQ(BlockManager::create({1, 16, true}).status().code(),
            StatusCode::InvalidArgument);
  EXPECT_EQ(BlockManager::create({8, 0, true}).status().code(),
            StatusCode::InvalidArgument);
}

TEST(BlockManager, NullBlockIsNeverHandedOut) {
  BlockManager m = make(9, 4);
  EXPECT_EQ(m.numFreeBlocks(), 8);
  std::set<int32_t> seen;
  for (RequestId r = 0; r < 8; ++r) {
    auto t = tokens(3, int32_t(r * 10));
    ASSERT_TRUE(m.addRequest(r, t.data(), 3).ok());
    for (int32_t b : table(m, r)) {
      EXPECT_NE(b, 0);
      EXPECT_TRUE(seen.insert(b).second) << "block " << b << " handed out twice";
    }
  }
  EXPECT_EQ(m.numFreeBlocks(), 0);
  auto t = tokens(1);
  StatusOr<int64_t> full = m.addRequest(99, t.data(), 1);
  EXPECT_EQ(full.status().code(), StatusCode::ResourceExhausted);
  EXPECT_FALSE(m.hasRequest(99));
  EXPECT_EQ(m.appendTokens(0, t.data(), 2).code(),
            StatusCode::ResourceExhausted);
  EXPECT_EQ(m.numTokens(0).value(), 3); // unchanged by the failed append
}

TEST(BlockManager, AllocatesAppendsAndFreesWithRefCounts) {
  BlockManager m = make(8, 4, /*caching=*/false);
  auto t = tokens(6);
  ASSERT_EQ(m.addRequest(1, t.data(), 6).value(), 0);
  std::vector<int32_t> blocks = table(m, 1);
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(m.refCount(blocks[0]), 1);
  // Two more tokens fill block 1; the third needs block 2.
  ASSERT_TRUE(m.appendTokens(1, t.data(), 2).ok());
  EXPECT_EQ(table(m, 1).size(), 2u);
  ASSERT_TRUE(m.appendTokens(1, t.data(), 1).ok());
  blocks = table(m, 1);
  EXPECT_EQ(blocks.size(), 3u);
  EXPECT_EQ(m.numTokens(1).value(), 9);
  EXPECT_EQ(m.numFreeBlocks(), 7 - 3);
  ASSERT_TRUE(m.freeRequest(1).ok());
  for (int32_t b : blocks)
    EXPECT_EQ(m.refCount(b), 0);
  EXPECT_EQ(m.numFreeBlocks(), 7);
  EXPECT_EQ(m.freeRequest(1).code(), StatusCode::InvalidArgument);
  EXPECT_EQ(m.addRequest(2, t.data(), 6).status().code(), StatusCode::Ok);
  EXPECT_EQ(m.addRequest(2, t.data(), 6).status().code(),
            StatusCode::FailedPrecondition);
}

TEST(BlockManager, SlotMappingAndBlockTable) {
  BlockManager m = make(16, 4);
  auto a = tokens(6), b = tokens(3, 500);
  ASSERT_TRUE(m.addRequest(1, a.data(), 6).ok());
  ASSERT_TRUE(m.addRequest(2, b.data(), 3).ok());
  const std::vector<int32_t> ta = table(m, 1), tb = table(m, 2);
  // Request 1 computes tokens 2..5, request 2 all three; padded to 10.
  StatusOr<std::vector<int64_t>> slots =
      m.buildSlotMapping({{1, 2, 4}, {2, 0, 3}}, 10);
  ASSERT_TRUE(slots.ok()) << slots.status().toString();
  std::vector<int64_t> expected;
  for (int64_t pos = 2; pos < 6; ++pos)
    expected.push_back(int64_t(ta[size_t(pos / 4)]) * 4 + pos % 4);
  for (int64_t pos = 0; pos < 3; ++pos)
    expected.push_back(int64_t(tb[size_t(pos / 4)]) * 4 + pos % 4);
  expected.resize(10, -1);
  EXPECT_EQ(*slots, expected);

  EXPECT_EQ(m.buildSlotMapping({{1, 4, 3}}, 8).status().code(),
            StatusCode::OutOfRange);
  EXPECT_EQ(m.buildSlotMapping({{1, 0, 6}}, 5).status().code(),
            StatusCode::InvalidArgument); // does not fit the padded length
  EXPECT_EQ(m.buildSlotMapping({{7, 0, 1}}, 5).status().code(),
            StatusCode::InvalidArgument);

  const RequestId ids[] = {2, 1};
  std::vector<int32_t> bt(2 * 3, -5);
  ASSERT_TRUE(m.buildBlockTable(ids, 2, 3, bt.data()).ok());
  EXPECT_EQ(bt, (std::vector<int32_t>{tb[0], 0, 0, ta[0], ta[1], 0}));
  EXPECT_EQ(m.buildBlockTable(ids, 2, 1, bt.data()).code(),
            StatusCode::OutOfRange);
}

TEST(BlockManager, PrefixHitSharesBlocks) {
  BlockManager m = make(16, 4);
  auto a = tokens(10);
  ASSERT_EQ(m.addRequest(1, a.data(), 10).value(), 0);
  // Nothing is hashed until the step that writes the tokens has run.
  EXPECT_EQ(m.stats().cachedBlocks, 0);
  ASSERT_TRUE(m.commitComputed(1, 10).ok());
  const std::vector<int32_t> ta = table(m, 1);
  EXPECT_TRUE(m.isCached(ta[0]));
  EXPECT_TRUE(m.isCached(ta[1]));
  EXPECT_FALSE(m.isCached(ta[2])); // partial block
  EXPECT_EQ(m.stats().cachedBlocks, 2);

  // Same first 8 tokens, then different ones.
  std::vector<int32_t> b = a;
  b[9] = 7;
  b.push_back(8);
  ASSERT_EQ(m.addRequest(2, b.data(), int64_t(b.size())).value(), 8);
  const std::vector<int32_t> tb = table(m, 2);
  EXPECT_EQ(tb[0], ta[0]);
  EXPECT_EQ(tb[1], ta[1]);
  EXPECT_NE(tb[2], ta[2]);
  EXPECT_EQ(m.refCount(ta[0]), 2);
  EXPECT_EQ(m.numComputedTokens(2).value(), 8);
  PrefixCacheStats s = m.stats();
  EXPECT_EQ(s.queriedTokens, 10 + 11);
  EXPECT_EQ(s.hitTokens, 8);

  // A different first block breaks the chain, even if block 2 matches.
  std::vector<int32_t> c = a;
  c[0] = -3;
  ASSERT_EQ(m.addRequest(3, c.data(), int64_t(c.size())).value(), 0);
}

TEST(BlockManager, FullPromptHitStillComputesTheLastToken) {
  BlockManager m = make(16, 4);
  auto a = tokens(8);
  ASSERT_TRUE(m.addRequest(1, a.data(), 8).ok());
  ASSERT_TRUE(m.commitComputed(1, 8).ok());
  // All 8 tokens are cached, but only the first block may be shared: the
  // last token must be recomputed and its block must be private.
  ASSERT_EQ(m.addRequest(2, a.data(), 8).value(), 4);
  EXPECT_EQ(table(m, 2)[0], table(m, 1)[0]);
  EXPECT_NE(table(m, 2)[1], table(m, 1)[1]);
  EXPECT_FALSE(m.isCached(table(m, 2)[1]));
}

TEST(BlockManager, FreedCachedBlocksAreReusedThenEvictedLru) {
  // 6 usable blocks of 4 tokens.
  BlockManager m = make(7, 4);
  auto a = tokens(9, 0), b = tokens(9, 1000);
  ASSERT_TRUE(m.addRequest(1, a.data(), 9).ok());
  ASSERT_TRUE(m.commitComputed(1, 9).ok());
  const std::vector<int32_t> ta = table(m, 1);
  ASSERT_TRUE(m.freeRequest(1).ok());
  ASSERT_TRUE(m.addRequest(2, b.data(), 9).ok());
  ASSERT_TRUE(m.commitComputed(2, 9).ok());
  const std::vector<int32_t> tb = table(m, 2);
  ASSERT_TRUE(m.freeRequest(2).ok());
  EXPECT_EQ(m.numFreeBlocks(), 6);
  EXPECT_EQ(m.stats().cachedBlocks, 4);

  // Reuse after free: a's prefix is still there.
  ASSERT_EQ(m.addRequest(3, a.data(), 9).value(), 8);
  EXPECT_EQ(table(m, 3)[0], ta[0]);
  EXPECT_EQ(table(m, 3)[1], ta[1]);
  EXPECT_EQ(m.refCount(ta[0]), 1);
  ASSERT_TRUE(m.freeRequest(3).ok());

  // a was used more recently than b, so pressure evicts b's blocks first.
  auto c = tokens(12, 5000); // 3 blocks; 2 never-hashed are free
  ASSERT_TRUE(m.addRequest(4, c.data(), 12).ok());
  EXPECT_EQ(m.stats().evictions, 1);
  EXPECT_FALSE(m.isCached(tb[1]) && m.isCached(tb[0]));
  EXPECT_TRUE(m.isCached(ta[0]));
  EXPECT_TRUE(m.isCached(ta[1]));
  auto d = tokens(9, 1000);
  // b's first block may survive, but the chain is broken at the evicted one.
  EXPECT_LT(m.addRequest(5, d.data(), 9).value(), 8);
}

TEST(BlockManager, DuplicatePrefixComputedTwiceStaysPrivate) {
  BlockManager m = make(16, 4);
  auto a = tokens(5);
  ASSERT_TRUE(m.addRequest(1, a.data(), 5).ok());
  ASSERT_TRUE(m.addRequest(2, a.data(), 5).ok()); // nothing cached yet
  ASSERT_TRUE(m.commitComputed(1, 5).ok());
  ASSERT_TRUE(m.commitComputed(2, 5).ok());
  EXPECT_TRUE(m.isCached(table(m, 1)[0]));
  EXPECT_FALSE(m.isCached(table(m, 2)[0]));
  EXPECT_EQ(m.stats().cachedBlocks, 1);
  EXPECT_EQ(m.commitComputed(2, 4).code(), StatusCode::InvalidArgument);
  EXPECT_EQ(m.commitComputed(2, 6).code(), StatusCode::InvalidArgument);
}

TEST(BlockManager, PrefixCachingDisabledNeverHashesOrShares) {
  BlockManager m = make(8, 4, /*caching=*/false);
  m.setCheckedMode(true);
  auto a = tokens(9);
  ASSERT_TRUE(m.addRequest(1, a.data(), 9).ok());
  ASSERT_TRUE(m.commitComputed(1, 9).ok());
  EXPECT_EQ(m.stats().cachedBlocks, 0);
  EXPECT_EQ(m.addRequest(2, a.data(), 9).value(), 0);
  for (int32_t b : table(m, 1))
    EXPECT_EQ(m.writeProtect()[b], 0);
  ASSERT_TRUE(m.freeRequest(1).ok());
  EXPECT_EQ(m.numFreeBlocks(), 7 - 3);
}

TEST(BlockManager, CheckedModeProtectsNullAndHashedBlocks) {
  BlockManager m = make(8, 4);
  EXPECT_EQ(m.writeProtect(), nullptr);
  m.setCheckedMode(true);
  const uint8_t *flags = m.writeProtect();
  ASSERT_NE(flags, nullptr);
  EXPECT_EQ(flags[0], 1);
  auto a = tokens(6);
  ASSERT_TRUE(m.addRequest(1, a.data(), 6).ok());
  const std::vector<int32_t> ta = table(m, 1);
  EXPECT_EQ(flags[ta[0]], 0); // not written yet: writable
  ASSERT_TRUE(m.commitComputed(1, 6).ok());
  EXPECT_EQ(flags[ta[0]], 1);
  EXPECT_EQ(flags[ta[1]], 0);

  KVCacheDesc desc;
  desc.numBlocks = 8;
  desc.blockSize = 4;
  KVCacheRef ref;
  ref.desc = desc;
  StatusOr<KVCacheRef> g = m.guard(ref);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->writeProtect, flags);
  EXPECT_NE(g->refusedWrites, nullptr);
  ref.desc.numBlocks = 9;
  EXPECT_EQ(m.guard(ref).status().code(), StatusCode::InvalidArgument);
  m.setCheckedMode(false);
  ref.desc.numBlocks = 8;
  EXPECT_EQ(m.guard(ref)->writeProtect, nullptr);
}

} // namespace
