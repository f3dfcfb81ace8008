//===- PrefetchPlanTest.cpp - Choosing the L2 prefetch hints --------------===//
#include "mlart/PrefetchPlan.h"

#include <gtest/gtest.h>

using namespace mlart;

namespace {

constexpr size_t MB = size_t(1) << 20;

const void *at(uintptr_t a) { return reinterpret_cast<const void *>(a); }

PrefetchCandidate gemm(std::vector<PrefetchRange> reads) {
  PrefetchCandidate c;
  c.constantReads = std::move(reads);
  return c;
}
PrefetchCandidate decode() {
  PrefetchCandidate c;
  c.isDecode = true;
  return c;
}

} // namespace

TEST(PrefetchPlan, LayerStepWarmsTheFrontThenTheTail) {
  // norm, q_proj, kv_a, q_absorb | decode | v_up, o_proj.
  const PrefetchRange norm{at(0x1000), 4096}, qProj{at(0x100000), 12 * MB},
      kvA{at(0x2000000), 2 * MB}, qAbs{at(0x3000000), 2 * MB},
      vUp{at(0x4000000), 2 * MB}, oProj{at(0x5000000), 8 * MB};
  const PrefetchPlan plan = planL2Prefetch(
      {gemm({norm}), gemm({qProj}), gemm({kvA}), gemm({qAbs}), decode(),
       gemm({vUp}), gemm({oProj})});
  // The norm weight is below the size worth a hint.
  ASSERT_EQ(plan.atStart.size(), 3u);
  EXPECT_EQ(plan.atStart[0].data, qProj.data);
  EXPECT_EQ(plan.atStart[1].data, kvA.data);
  EXPECT_EQ(plan.atStart[2].data, qAbs.data);
  EXPECT_EQ(plan.firstDecode, 4);
  EXPECT_EQ(plan.decodeKvBytes, PrefetchBudget().decodeKvBytes);
  ASSERT_EQ(plan.afterDecode.size(), 7u);
  ASSERT_EQ(plan.afterDecode[4].size(), 2u);
  EXPECT_EQ(plan.afterDecode[4][0].data, vUp.data);
  EXPECT_EQ(plan.afterDecode[4][1].bytes, 8 * MB);
  for (size_t i : {0, 1, 2, 3, 5, 6})
    EXPECT_TRUE(plan.afterDecode[i].empty()) << i;
  EXPECT_FALSE(plan.empty());
}

TEST(PrefetchPlan, BudgetsCutTheLastRangeAndDropTheRest) {
  PrefetchBudget budget;
  budget.startBytes = 5 * MB;
  budget.afterDecodeBytes = 3 * MB;
  const PrefetchPlan plan = planL2Prefetch(
      {gemm({{at(0x100000), 4 * MB}}), gemm({{at(0x1000000), 4 * MB}}),
       gemm({{at(0x2000000), 4 * MB}}), decode(),
       gemm({{at(0x3000000), 2 * MB}, {at(0x4000000), 2 * MB}})},
      budget);
  ASSERT_EQ(plan.atStart.size(), 2u);
  EXPECT_EQ(plan.atStart[1].bytes, 1 * MB); // cut at the budget
  ASSERT_EQ(plan.afterDecode[3].size(), 2u);
  EXPECT_EQ(plan.afterDecode[3][1].bytes, 1 * MB);
}

TEST(PrefetchPlan, EachDecodeWarmsUpToTheNextOne) {
  // Two layers: decode 1 warms layer 1's tail and layer 2's front; a weight
  // read twice is warmed where it is first read.
  const PrefetchRange w1{at(0x100000), MB}, w2{at(0x200000), MB},
      w3{at(0x300000), MB};
  const PrefetchPlan plan =
      planL2Prefetch({gemm({w1}), decode(), gemm({w2}), gemm({w1, w3}),
                      decode(), gemm({w2})});
  ASSERT_EQ(plan.atStart.size(), 1u);
  EXPECT_EQ(plan.firstDecode, 1);
  ASSERT_EQ(plan.afterDecode[1].size(), 2u);
  EXPECT_EQ(plan.afterDecode[1][0].data, w2.data);
  EXPECT_EQ(plan.afterDecode[1][1].data, w3.data);
  EXPECT_TRUE(plan.afterDecode[4].empty());
}

TEST(PrefetchPlan, AtMostTheKernelsRangeCount) {
  std::vector<PrefetchCandidate> program;
  for (int i = 0; i < 2 * kMaxPrefetchRanges; ++i)
    program.push_back(gemm({{at(uintptr_t(i + 1) << 24), MB}}));
  const PrefetchPlan plan = planL2Prefetch(program);
  EXPECT_EQ(plan.atStart.size(), size_t(kMaxPrefetchRanges));
  EXPECT_EQ(plan.atStart.back().data, at(uintptr_t(kMaxPrefetchRanges) << 24));
}

TEST(PrefetchPlan, NothingWorthWarmingIsAnEmptyPlan) {
  // Must not fire: small weights only and no decode.
  const PrefetchPlan plan =
      planL2Prefetch({gemm({{at(0x1000), 64 << 10}}), gemm({})});
  EXPECT_TRUE(plan.empty());
  EXPECT_EQ(plan.firstDecode, -1);
  EXPECT_TRUE(planL2Prefetch({}).empty());
  // A lone decode still warms its own first tiles.
  const PrefetchPlan d = planL2Prefetch({decode()});
  EXPECT_FALSE(d.empty());
  EXPECT_EQ(d.firstDecode, 0);
}
