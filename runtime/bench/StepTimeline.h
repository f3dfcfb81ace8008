//===- StepTimeline.h - mla-bench --timeline: traced graph replays -*- C++ -*-===//
//
// Replays the compiled step's CUDA graph a few times under CUPTI activity
// tracing and writes, per replay, when each kernel, copy and memset ran and
// on which stream (Timeline.h lays them out). Built only with CUPTI
// (MLA_BENCH_HAVE_CUPTI).
//
//===----------------------------------------------------------------------===//
#ifndef MLART_BENCH_STEPTIMELINE_H
#define MLART_BENCH_STEPTIMELINE_H

#include "mlart/Device.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace mlart::bench {

struct StepTimelineOptions {
  std::vector<std::string> steps; ///< artifacts, each traced in turn
  int64_t context = 4095;         ///< tokens cached per sequence
  std::vector<int> streams = {1, 2};
  int replays = 5;  ///< traced replays per configuration
  int warmups = 3;  ///< untraced replays before them
  std::string path; ///< the text; the JSON goes next to it (.json)
};

/// The JSON path that goes with the text path: "X.txt" -> "X.json", else
/// "X" -> "X.json".
std::string timelineJsonPath(const std::string &textPath);

/// Traces every step at every stream count; prints the tables and writes
/// the text and JSON files. Any failure ends the run with its message.
Status runStepTimeline(Device &device, StreamHandle stream,
                       const StepTimelineOptions &options, std::mt19937 &rng);

} // namespace mlart::bench

#endif // MLART_BENCH_STEPTIMELINE_H
