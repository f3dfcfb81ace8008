//===- TimelineTest.cpp - mla-bench --timeline's layout of replays --------===//
//
// The CUPTI side runs only on a GPU; what it records is laid out by pure
// code (runtime/bench/Timeline.cpp), checked here on hand-made activities.
//
//===----------------------------------------------------------------------===//
#include "../bench/Timeline.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mlart::bench;

namespace {

TraceActivity kernel(const char *name, uint32_t stream, uint64_t start,
                     uint64_t end) {
  TraceActivity a;
  a.name = name;
  a.stream = stream;
  a.start = start;
  a.end = end;
  return a;
}

TEST(Timeline, ShortKernelNames) {
  EXPECT_EQ(shortKernelName(
                "_ZN5mlart4cuda12_GLOBAL__N_114decodeTcKernelILb1EEEvNS0_"
                "12DecodeParamsE"),
            "decodeTcKernel<true>");
  EXPECT_EQ(shortKernelName("void mlart::cuda::rmsNorm<(int)4>(float*, "
                            "float const*)"),
            "rmsNorm<(int)4>");
  // Not mangled, no parameters (cuBLAS): kept, cut to the length.
  const std::string cublas =
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_"
      "warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas";
  EXPECT_EQ(shortKernelName(cublas, 20), "sm90_xmma_gemm_bf...");
  EXPECT_EQ(shortKernelName(cublas, 1000), cublas);
  // Broken mangling stays as it is rather than failing.
  EXPECT_EQ(shortKernelName("_Z!!"), "_Z!!");
  EXPECT_EQ(shortKernelName(""), "");
}

TEST(Timeline, TwoStreamsGapsIdleAndCriticalPath) {
  // ns. Stream 7: a [1000, 3000), c [3500, 6000); stream 9: b [2000,
  // 2500), d [7000, 8000). Device idle [6000, 7000).
  std::vector<TraceActivity> acts = {
      kernel("c", 7, 3500, 6000), kernel("a", 7, 1000, 3000),
      kernel("d", 9, 7000, 8000), kernel("b", 9, 2000, 2500)};
  ReplayTimeline t = layoutReplay(acts);
  ASSERT_EQ(t.entries.size(), 4u);
  EXPECT_EQ(t.entries[0].shortName, "a");
  EXPECT_EQ(t.entries[1].shortName, "b");
  EXPECT_EQ(t.entries[2].shortName, "c");
  EXPECT_EQ(t.entries[3].shortName, "d");
  EXPECT_DOUBLE_EQ(t.entries[1].startUs, 1.0);
  EXPECT_DOUBLE_EQ(t.entries[2].endUs, 5.0);
  EXPECT_DOUBLE_EQ(t.entries[3].durationUs, 1.0);
  EXPECT_TRUE(std::isnan(t.entries[0].streamGapUs));
  EXPECT_TRUE(std::isnan(t.entries[1].streamGapUs));
  EXPECT_DOUBLE_EQ(t.entries[2].streamGapUs, 0.5);  // after a
  EXPECT_DOUBLE_EQ(t.entries[3].streamGapUs, 4.5);  // after b
  EXPECT_DOUBLE_EQ(t.entries[2].idleBeforeUs, 0.5); // a and b done at 3000
  EXPECT_DOUBLE_EQ(t.entries[1].idleBeforeUs, 0.0); // a still running
  EXPECT_DOUBLE_EQ(t.entries[3].idleBeforeUs, 1.0);
  EXPECT_DOUBLE_EQ(t.spanUs, 7.0);
  EXPECT_DOUBLE_EQ(t.busyUs, 2.0 + 2.5 + 1.0);
  EXPECT_DOUBLE_EQ(t.idleUs, 1.5);
  EXPECT_EQ(t.streams, 2);
  // d <- c (ended last before d) <- a (b ended earlier than a).
  EXPECT_TRUE(t.entries[0].critical);
  EXPECT_FALSE(t.entries[1].critical);
  EXPECT_TRUE(t.entries[2].critical);
  EXPECT_TRUE(t.entries[3].critical);
  EXPECT_TRUE(std::isnan(t.entries[0].criticalGapUs)); // the path's start
  EXPECT_TRUE(std::isnan(t.entries[1].criticalGapUs)); // off the path
  EXPECT_DOUBLE_EQ(t.entries[2].criticalGapUs, 0.5);   // after a
  EXPECT_DOUBLE_EQ(t.entries[3].criticalGapUs, 1.0);   // after c
}

TEST(Timeline, WindowsSplitReplaysAndDropTheRest) {
  std::vector<TraceActivity> acts = {
      kernel("warm", 1, 100, 200),  // before every window
      kernel("x", 1, 1000, 1500),   kernel("y", 2, 1200, 1300),
      kernel("x", 1, 5000, 5600),   kernel("y", 2, 5100, 5200),
      kernel("late", 1, 9000, 9100)};
  TraceActivity copy;
  copy.kind = TraceActivity::Kind::Memset;
  copy.name = "memset";
  copy.stream = 2;
  copy.start = 5300;
  copy.end = 5400;
  copy.bytes = 64;
  acts.push_back(copy);
  std::vector<ReplayTimeline> r =
      buildTimelines(acts, {{900, 2000}, {4900, 6000}});
  ASSERT_EQ(r.size(), 2u);
  ASSERT_EQ(r[0].entries.size(), 2u);
  ASSERT_EQ(r[1].entries.size(), 3u);
  EXPECT_DOUBLE_EQ(r[0].spanUs, 0.5);
  EXPECT_DOUBLE_EQ(r[1].spanUs, 0.6);
  EXPECT_EQ(r[1].entries[2].shortName, "memset");
  EXPECT_EQ(r[1].entries[2].activity.bytes, 64u);
  // An empty window is an empty replay, not an error.
  EXPECT_TRUE(buildTimelines(acts, {{20000, 30000}})[0].entries.empty());
}

TEST(Timeline, TextAndJson) {
  std::vector<ReplayTimeline> r = {
      layoutReplay({kernel("k\"1", 3, 0, 1000), kernel("k2", 3, 1500, 2000)})};
  const std::string text = formatTimelineText(r, "step streams=1");
  EXPECT_NE(text.find("== step streams=1, replay 1 of 1: span 2.00 us, busy "
                      "1.50 us, idle 0.50 us, 2 activities on 1 stream(s) =="),
            std::string::npos)
      << text;
  const std::string json = formatTimelineJson(r, "t");
  EXPECT_NE(json.find("\"name\": \"k\\\"1\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"stream_gap_us\": null"), std::string::npos) << json;
  EXPECT_NE(json.find("\"stream_gap_us\": 0.500"), std::string::npos) << json;
  EXPECT_NE(json.find("\"span_us\": 2.000"), std::string::npos) << json;
  EXPECT_NE(json.find("\"critical_gap_us\": 0.500"), std::string::npos)
      << json;
  // The second kernel's row: on the critical path, 0.5 us after the first.
  EXPECT_NE(text.find("      0.50  k2\n"), std::string::npos) << text;
  EXPECT_EQ(json.find("nan"), std::string::npos) << json;
}

} // namespace
