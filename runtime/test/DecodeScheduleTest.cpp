//===- DecodeScheduleTest.cpp - The balanced decode schedule (CPU) --------===//
//
// Walks every CTA of the balanced schedule (DecodeSchedule.h, the same
// functions the kernel calls) over many length mixes and checks what the
// kernel and its combine rely on: every KV tile is attended exactly once,
// every empty item is written exactly once, a whole item is written
// directly, and each cut item has exactly one owner whose piece list
// (mergePieceSlot) is exactly the slots its pieces were stored in, with no
// slot written twice.
//
//===----------------------------------------------------------------------===//
#include "cuda/DecodeSchedule.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace mlart::cuda;

namespace {

struct Walked {
  std::vector<int> tileVisits;        ///< per global tile
  std::vector<int> emptyWrites;       ///< per item
  std::vector<int> directWrites;      ///< per item
  std::map<int64_t, std::set<int64_t>> pieceSlots; ///< cut item -> slots
  /// cut item -> (owning CTA, its merge record)
  std::map<int64_t, std::vector<std::pair<int64_t, BalancedMerge>>> owners;
  std::vector<int> slotWrites;        ///< per workspace slot
};

/// The kernel's schedule for `tiles` per item on `ctas` CTAs, walked on the
/// CPU; the start item is found by a linear search with the kernel's
/// predicate (the kernel searches in parallel).
Walked walk(const std::vector<int64_t> &tiles, int64_t ctas) {
  const int64_t items = int64_t(tiles.size());
  std::vector<int64_t> off(tiles.size() + 1, 0);
  for (size_t s = 0; s < tiles.size(); ++s)
    off[s + 1] = off[s] + tiles[s];
  const int64_t T = off.back();
  Walked w;
  w.tileVisits.assign(size_t(T), 0);
  w.emptyWrites.assign(tiles.size(), 0);
  w.directWrites.assign(tiles.size(), 0);
  w.slotWrites.assign(size_t(2 * ctas), 0);
  for (int64_t c = 0; c < ctas; ++c) {
    const int64_t begin = balancedBegin(c, ctas, T);
    int64_t s0 = items;
    for (int64_t s = 0; s < items; ++s)
      if (walkStartsAt(off[size_t(s)] + std::max<int64_t>(tiles[size_t(s)], 1),
                       begin)) {
        s0 = s;
        break;
      }
    BalancedWalk walker(c, ctas, T, items, s0,
                        s0 < items ? off[size_t(s0)] : 0);
    auto tilesOf = [&](int64_t s) { return tiles[size_t(s)]; };
    auto empty = [&](int64_t s, int64_t itemOff) {
      EXPECT_EQ(itemOff, off[size_t(s)]);
      EXPECT_EQ(tiles[size_t(s)], 0);
      ++w.emptyWrites[size_t(s)];
    };
    BalancedPiece q;
    while (walker.next(tilesOf, empty, q)) {
      const int64_t s = q.item, itemOff = q.itemOff, n = q.n, a = q.a,
                    z = q.z;
      EXPECT_EQ(itemOff, off[size_t(s)]);
      EXPECT_EQ(n, tiles[size_t(s)]);
      EXPECT_LT(a, z) << "an empty piece";
      for (int64_t t = a; t < z; ++t)
        ++w.tileVisits[size_t(t)];
      if (a == itemOff && z == itemOff + n) {
        ++w.directWrites[size_t(s)];
        continue;
      }
      const int64_t slot = partialSlot(c, itemOff, begin);
      ++w.slotWrites[size_t(slot)];
      w.pieceSlots[s].insert(slot);
      if (z == itemOff + n)
        w.owners[s].push_back(
            {c, BalancedMerge{s, balancedCtaOfTile(itemOff, ctas, T), T}});
    }
  }
  return w;
}

void expectScheduleHolds(const std::vector<int64_t> &tiles, int64_t ctas,
                         const std::string &what) {
  SCOPED_TRACE(what);
  const Walked w = walk(tiles, ctas);
  for (size_t t = 0; t < w.tileVisits.size(); ++t)
    ASSERT_EQ(w.tileVisits[t], 1) << "tile " << t;
  for (size_t s = 0; s < tiles.size(); ++s) {
    if (tiles[s] == 0) {
      EXPECT_EQ(w.emptyWrites[s], 1) << "empty item " << s;
      continue;
    }
    const bool cut = w.pieceSlots.count(int64_t(s)) > 0;
    EXPECT_EQ(w.directWrites[s], cut ? 0 : 1) << "item " << s;
    if (!cut)
      continue;
    // One owner, and its piece list is exactly where the pieces went.
    ASSERT_EQ(w.owners.at(int64_t(s)).size(), 1u) << "item " << s;
    const auto &[owner, m] = w.owners.at(int64_t(s))[0];
    std::set<int64_t> listed;
    for (int64_t k = m.firstCta; k <= owner; ++k) {
      const int64_t slot = mergePieceSlot(m, k, ctas);
      if (slot >= 0)
        listed.insert(slot);
    }
    EXPECT_EQ(listed, w.pieceSlots.at(int64_t(s))) << "item " << s;
    EXPECT_GE(listed.size(), 2u) << "a cut item has two pieces or more";
  }
  for (size_t k = 0; k < w.slotWrites.size(); ++k)
    EXPECT_LE(w.slotWrites[k], 1) << "slot " << k;
}

TEST(DecodeSchedule, UniformLengthsCutEvenly) {
  // The V2-Lite step: 64 sequences of 4096 tokens on the H200's 132 SMs.
  const std::vector<int64_t> tiles(64, 64);
  expectScheduleHolds(tiles, 132, "B=64 L=4096");
  for (int64_t c = 0; c < 132; ++c) {
    const int64_t n = balancedBegin(c + 1, 132, 4096) - balancedBegin(c, 132, 4096);
    EXPECT_TRUE(n == 31 || n == 32) << "CTA " << c << " holds " << n;
  }
}

TEST(DecodeSchedule, MoreCtasThanTiles) {
  expectScheduleHolds({3}, 132, "one sequence of 3 tiles");
  expectScheduleHolds({1, 0, 2, 0}, 8, "short items, empty ones between");
  expectScheduleHolds({5, 5}, 7, "7 CTAs, 10 tiles");
}

TEST(DecodeSchedule, EmptyItemsAreWrittenOnce) {
  expectScheduleHolds({0, 0, 0}, 4, "every item empty");
  expectScheduleHolds({0, 4, 0, 0, 4, 0}, 3, "empty at both ends");
  expectScheduleHolds({0}, 1, "one CTA, one empty item");
}

TEST(DecodeSchedule, RandomMixes) {
  std::mt19937 rng(20261204);
  for (int trial = 0; trial < 400; ++trial) {
    const int items = 1 + int(rng() % 300);
    const int64_t ctas = 1 + int64_t(rng() % 200);
    std::vector<int64_t> tiles(size_t(items), 0);
    for (auto &n : tiles) {
      const unsigned kind = rng() % 4;
      n = kind == 0 ? 0 : kind == 1 ? 1 + rng() % 3 : rng() % 200;
    }
    expectScheduleHolds(tiles, ctas,
                        "trial " + std::to_string(trial) + ", " +
                            std::to_string(items) + " items, " +
                            std::to_string(ctas) + " CTAs");
    if (::testing::Test::HasFailure())
      return;
  }
}

// The closed forms agree with their definitions.
TEST(DecodeSchedule, CtaOfTileInvertsBegin) {
  for (int64_t ctas : {1, 2, 7, 132, 200})
    for (int64_t tiles : {1, 3, 131, 132, 133, 4096, 9999}) {
      for (int64_t t = 0; t < tiles; ++t) {
        const int64_t c = balancedCtaOfTile(t, ctas, tiles);
        ASSERT_LE(balancedBegin(c, ctas, tiles), t);
        ASSERT_LT(t, balancedBegin(c + 1, ctas, tiles));
      }
      EXPECT_EQ(zeroItemWriter(tiles, ctas, tiles), ctas - 1);
    }
}

} // namespace
