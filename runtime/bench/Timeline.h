//===- Timeline.h - Device activities of graph replays, laid out -*- C++ -*-===//
//
// mla-bench --timeline records, with CUPTI, the kernels, copies and memsets
// of a few replays of the compiled step's CUDA graph. This file turns those
// records into a per-replay timeline: relative start and end, duration, the
// gap since the previous activity on the same stream, the time the whole
// device sat idle before each activity, an estimated critical path and the
// replay's span; as a table and as JSON. Pure C++ (no CUPTI, no CUDA), so
// the CPU unit tests check it.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_BENCH_TIMELINE_H
#define MLART_BENCH_TIMELINE_H

#include <cstdint>
#include <string>
#include <vector>

namespace mlart::bench {

/// One device activity as CUPTI reports it (times in ns, CUPTI's clock).
struct TraceActivity {
  enum class Kind { Kernel, Memcpy, Memset };
  Kind kind = Kind::Kernel;
  std::string name; ///< kernels: the (mangled) name; else "memcpy"/"memset"
  uint32_t stream = 0;
  uint64_t start = 0, end = 0;
  uint64_t bytes = 0; ///< copies and memsets
};

/// An activity inside one replay, times in us from the replay's first start.
struct TimelineEntry {
  TraceActivity activity;
  std::string shortName;
  double startUs = 0, endUs = 0, durationUs = 0;
  /// Since the previous activity on the same stream ended; negative values
  /// (overlap on one stream, which CUPTI should never report) are kept.
  /// NaN for the first activity of its stream.
  double streamGapUs = 0;
  /// How long nothing ran on the device right before this started: start
  /// minus the latest end of every earlier-starting activity, 0 when one
  /// of them was still running. Summed over a replay: its idle time.
  double idleBeforeUs = 0;
  /// On the critical path as the timestamps show it: walking back from the
  /// activity that ends last, each step goes to the activity that ended
  /// last before the current one started. An estimate: it does not know
  /// the graph's edges, only who finished last.
  bool critical = false;
  /// Critical activities: since their predecessor on that path ended (NaN
  /// for the path's first activity and for activities off the path).
  double criticalGapUs = 0;
};

struct ReplayTimeline {
  std::vector<TimelineEntry> entries; ///< by start time
  double spanUs = 0;   ///< first start to last end
  double busyUs = 0;   ///< time at least one activity ran
  double idleUs = 0;   ///< spanUs - busyUs: the bubbles
  int streams = 0;     ///< distinct stream ids
};

/// Host-side brackets of one replay (CUPTI timestamps): the activities
/// that start inside [begin, end] belong to it.
struct ReplayWindow {
  uint64_t begin = 0, end = 0;
};

/// Splits `activities` over `windows` (activities outside every window,
/// e.g. from warm-up, are dropped) and lays out each replay.
std::vector<ReplayTimeline>
buildTimelines(const std::vector<TraceActivity> &activities,
               const std::vector<ReplayWindow> &windows);

/// Lays out one replay's activities (any order).
ReplayTimeline layoutReplay(std::vector<TraceActivity> activities);

/// A kernel name for a table: demangled when mangled, without the return
/// type, parameter list, `(anonymous namespace)::` and `mlart::cuda::`
/// qualifiers, and cut to `maxLength` characters ("..." at the end).
std::string shortKernelName(const std::string &name, size_t maxLength = 56);

/// The timelines as a text table per replay plus a summary line each.
std::string formatTimelineText(const std::vector<ReplayTimeline> &replays,
                               const std::string &title);

/// The timelines as JSON: {"title", "replays": [{"span_us", "busy_us",
/// "idle_us", "streams", "activities": [{"name", "short_name", "kind",
/// "stream", "start_us", "end_us", "duration_us", "stream_gap_us"
/// (null when none), "idle_before_us", "critical", "critical_gap_us" (null
/// when none), "bytes"}]}]}.
std::string formatTimelineJson(const std::vector<ReplayTimeline> &replays,
                               const std::string &title);

} // namespace mlart::bench

#endif // MLART_BENCH_TIMELINE_H
