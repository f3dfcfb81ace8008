//===- DecodeTraceTest.cpp - mla-bench --decode-trace's summary -----------===//
#include "../bench/DecodeTrace.h"

#include <gtest/gtest.h>

using namespace mlart::bench;

TEST(DecodeTrace, PhasesAndImbalanceFromRecords) {
  // Two CTAs on two SMs, times in ns. CTA 1 starts 1 us later and finishes
  // its loop 3 us after CTA 0; a third record never exited (dropped).
  const std::vector<uint64_t> raw = {
      7, 1000, 1500, 3000, 80000, 81000, 80100, 80300, 80600, //
      9, 2000, 2200, 4000, 83000, 84500, 83200, 83500, 83700, //
      3, 5000, 0,    0,    0,     0,     0,     0,     0};
  const std::vector<DecodeCtaTrace> t = parseDecodeTrace(raw);
  ASSERT_EQ(t.size(), 2u);
  const DecodeTraceSummary s = summarizeDecodeTrace(t);
  EXPECT_EQ(s.ctas, 2);
  EXPECT_EQ(s.sms, 2);
  EXPECT_DOUBLE_EQ(s.spanUs, 83.5);
  EXPECT_DOUBLE_EQ(s.prologue.min, 2.0);
  EXPECT_DOUBLE_EQ(s.prologue.max, 2.0);
  EXPECT_DOUBLE_EQ(s.wait.min, 0.2);
  EXPECT_DOUBLE_EQ(s.wait.max, 0.5);
  EXPECT_DOUBLE_EQ(s.loop.min, 77.0);
  EXPECT_DOUBLE_EQ(s.loop.max, 79.0);
  EXPECT_DOUBLE_EQ(s.epilogue.max, 1.5);
  EXPECT_DOUBLE_EQ(s.drain.min, 0.1);
  EXPECT_DOUBLE_EQ(s.drain.max, 0.2);
  EXPECT_DOUBLE_EQ(s.store.max, 0.3);
  EXPECT_DOUBLE_EQ(s.barrier.min, 0.2);
  EXPECT_DOUBLE_EQ(s.barrier.max, 0.3);
  EXPECT_DOUBLE_EQ(s.merge.min, 0.4);
  EXPECT_DOUBLE_EQ(s.merge.max, 0.8);
  EXPECT_DOUBLE_EQ(s.exitAt.min, 80.0);
  EXPECT_DOUBLE_EQ(s.exitAt.max, 83.5);
  EXPECT_DOUBLE_EQ(s.entryAt.max, 1.0);
  // Last first tile at 4000 ns, first loop end at 80000 ns.
  EXPECT_DOUBLE_EQ(s.allInLoopUs, 76.0);
  const std::string text = formatDecodeTrace("x", s);
  EXPECT_NE(text.find("2 CTAs on 2 SMs, span 83.50 us"), std::string::npos)
      << text;
}

TEST(DecodeTrace, ACtaWithoutTilesHasAnEmptyLoop) {
  const std::vector<DecodeCtaTrace> t =
      parseDecodeTrace({1, 100, 300, 0, 0, 900, 350, 400, 400});
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].firstTile, 300u);
  EXPECT_EQ(t[0].loopEnd, 300u);
  const DecodeTraceSummary s = summarizeDecodeTrace(t);
  EXPECT_DOUBLE_EQ(s.loop.max, 0.0);
  EXPECT_DOUBLE_EQ(s.epilogue.max, 0.6);
  EXPECT_EQ(summarizeDecodeTrace({}).ctas, 0);
}
