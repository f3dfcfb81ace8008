//===- StepTimeline.cpp - mla-bench --timeline: traced graph replays ------===//
#include "StepTimeline.h"

#include "CuptiTrace.h"
#include "StepBench.h"
#include "Timeline.h"

#include <cstdio>

namespace mlart::bench {

namespace {

Status writeFile(const std::string &path, const std::string &text) {
  FILE *f = std::fopen(path.c_str(), "w");
  if (!f)
    return unavailable("cannot open '" + path + "' for writing");
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok)
    return dataLoss("cannot write '" + path + "'");
  return Status::success();
}

/// Replays with tracing on from before the capture: CUPTI sees the graph
/// from its instantiation. Eager warm-up first, untraced, because the GEMM
/// autotuning runs on the first eager call and never inside a capture.
Status traceOne(Device &device, StreamHandle stream, Executor &ex,
                const StepTimelineOptions &o,
                std::vector<TraceActivity> &activities,
                std::vector<ReplayWindow> &windows) {
  MLART_RETURN_IF_ERROR(ex.run(stream));
  MLART_RETURN_IF_ERROR(device.synchronize(stream));
  MLART_RETURN_IF_ERROR(CuptiTrace::start());
  Status traced = [&]() -> Status {
    MLART_RETURN_IF_ERROR(ex.captureGraph(stream));
    for (int i = 0; i < o.warmups; ++i)
      MLART_RETURN_IF_ERROR(ex.runGraph(stream, /*wait=*/true));
    for (int r = 0; r < o.replays; ++r) {
      ReplayWindow w;
      MLART_ASSIGN_OR_RETURN(w.begin, CuptiTrace::now());
      MLART_RETURN_IF_ERROR(ex.runGraph(stream, /*wait=*/true));
      MLART_ASSIGN_OR_RETURN(w.end, CuptiTrace::now());
      windows.push_back(w);
    }
    return device.synchronize(nullptr);
  }();
  // Always stop, so a failed configuration leaves tracing off.
  StatusOr<std::vector<TraceActivity>> got = CuptiTrace::stop();
  MLART_RETURN_IF_ERROR(traced);
  MLART_RETURN_IF_ERROR(got.status());
  activities = std::move(got).value();
  return Status::success();
}

} // namespace

std::string timelineJsonPath(const std::string &textPath) {
  const std::string ext = ".txt";
  if (textPath.size() > ext.size() &&
      textPath.compare(textPath.size() - ext.size(), ext.size(), ext) == 0)
    return textPath.substr(0, textPath.size() - ext.size()) + ".json";
  return textPath + ".json";
}

Status runStepTimeline(Device &device, StreamHandle stream,
                       const StepTimelineOptions &o, std::mt19937 &rng) {
  if (o.steps.empty())
    return invalidArgument("--timeline needs a compiled step (--step=ART)");
  if (o.replays < 1 || o.warmups < 0)
    return invalidArgument("--timeline-replays must be >= 1");
  std::string text, json = "[\n";
  bool first = true;
  for (const std::string &path : o.steps) {
    MLART_ASSIGN_OR_RETURN(std::unique_ptr<CompiledStep> step,
                           CompiledStep::load(device, path, o.context, rng));
    const std::string base = path.substr(path.find_last_of('/') + 1);
    for (int streams : o.streams) {
      step->executor().setMaxStreams(streams);
      std::vector<TraceActivity> activities;
      std::vector<ReplayWindow> windows;
      Status s = traceOne(device, stream, step->executor(), o, activities,
                          windows);
      if (!s.ok())
        return Status(s.code(), base + " streams=" + std::to_string(streams) +
                                    ": " + s.message());
      const std::vector<ReplayTimeline> replays =
          buildTimelines(activities, windows);
      const std::string title = base + " B=" + std::to_string(step->batch()) +
                                " L=" + std::to_string(o.context + 1) +
                                " streams=" + std::to_string(streams);
      for (const ReplayTimeline &r : replays)
        if (r.entries.empty())
          return internalError(title + ": CUPTI reported no activity inside "
                                       "a replay");
      const std::string table = formatTimelineText(replays, title);
      std::fputs(table.c_str(), stdout);
      text += table;
      json += std::string(first ? "" : ",\n") +
              formatTimelineJson(replays, title);
      first = false;
    }
  }
  json += "]\n";
  MLART_RETURN_IF_ERROR(writeFile(o.path, text));
  const std::string jsonPath = timelineJsonPath(o.path);
  MLART_RETURN_IF_ERROR(writeFile(jsonPath, json));
  std::printf("wrote %s and %s\n", o.path.c_str(), jsonPath.c_str());
  return Status::success();
}

} // namespace mlart::bench
