//===- BenchOptions.h - mla-bench's command line ----------------*- C++ -*-===//
//
// Every option of mla-bench, declared once (runtime/tools/common/
// CommandLine.h) with its range and its --help text. The options narrow
// which rows run; the results file is --output=PATH or, as the GPU scripts
// pass it, a positional PATH.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_BENCH_BENCHOPTIONS_H
#define MLART_BENCH_BENCHOPTIONS_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlart::bench {

struct BenchOptions {
  std::string output = "mla-bench.json"; ///< the rows as JSON
  bool quick = false;
  bool decodeOnly = false;
  bool noH128 = false;
  bool cacheOnly = false;
  bool noCeilings = false;
  bool codegenOnly = false;
  bool stepOnly = false;
  bool gemmOnly = false;          ///< ceilings + the step GEMM rows
  bool prefillOnly = false;       ///< ceilings + the prefill rows
  std::vector<std::string> steps; ///< --step: compiled steps to time
  int64_t stepContext = 4095;
  int64_t updateT = 0;      ///< only cache_update at this T (0: every T)
  int decodeH = 0;          ///< only this head count (0: every one)
  int decodeB = 0;          ///< only this batch (0: the grid's)
  int64_t decodeL = 0;      ///< only this length (0: the grid's)
  bool decodeTrace = false; ///< per-CTA decode timeline, nothing else
  std::string timelinePath; ///< --timeline: step replays, nothing else
  int timelineReplays = 5;
  int timelineStreams = 0; ///< 0: 1 and 2
};

/// Parses mla-bench's argv into `options`. Returns nothing when mla-bench
/// should run, else its exit code: 0 after --help or --version, 2 after a
/// usage error (reported on stderr).
std::optional<int> parseBenchOptions(int argc, const char *const *argv,
                                     BenchOptions &options);

} // namespace mlart::bench

#endif // MLART_BENCH_BENCHOPTIONS_H
