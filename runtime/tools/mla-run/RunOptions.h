//===- RunOptions.h - mla-run's command line ------------------------------===//
//
// Every option of mla-run, declared once (runtime/tools/common/CommandLine.h)
// with its range and its --help text, and the checks that need several
// options at once (--tune needs --graph, --input's NAME=FILE).
//
//===----------------------------------------------------------------------===//
#ifndef MLA_RUN_RUNOPTIONS_H
#define MLA_RUN_RUNOPTIONS_H

#include "mlart/Executor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlarun {

struct RunOptions {
  std::string artifact;
  std::string reference;
  std::string device = "cpu";
  int64_t seed = 0;
  int steps = 2;
  int64_t context = 40;
  double tolerance = 1e-2;
  bool json = false;
  bool naive = false;
  bool graph = false;
  bool tune = false; ///< --tune: capture through Executor::tuneGraph
  /// --per-op / --no-per-op; unset: on for the CPU device, off for CUDA.
  std::optional<bool> perOp;
  double naiveSoftmaxScale = 0.0; ///< 0: read it from the artifact
  /// --input NAME=FILE.npy: host data of buffer NAME (instead of random).
  std::vector<std::pair<std::string, std::string>> inputs;
  /// --decode-input NAME=FILE.npy: the same for the --decode-artifact steps.
  std::vector<std::pair<std::string, std::string>> decodeInputs;
  std::string dumpOutput;       ///< --dump-output: last hidden_states_out
  std::string decodeArtifact;   ///< --decode-artifact: decode after prefill
  int decodeSteps = 0;          ///< with --decode-artifact: --steps
  int64_t sharedPrefix = 0;     ///< --shared-prefix: common prompt tokens
  bool dummySlots = false;      ///< --dummy-slots: every slot -1
  int streams = 2;              ///< --streams: Executor::setMaxStreams
  bool separateWeights = false; ///< --separate-weights
  /// --decode-schedule: Executor::setDecodeSchedule
  mlart::DecodeSchedule decodeSchedule = mlart::DecodeSchedule::Default;
  /// --prefill-context-bound: Executor::setPrefillContextBound
  int64_t prefillContextBound = 0;
  /// --memory-limit: Device::setMemoryLimit, in MiB (0: the device's own).
  int64_t memoryLimitMiB = 0;
};

/// Parses mla-run's argv into `options`. Returns nothing when mla-run
/// should run, else its exit code: 0 after --help or --version, 2 after a
/// usage error (reported on stderr).
std::optional<int> parseRunOptions(int argc, const char *const *argv,
                                   RunOptions &options);

} // namespace mlarun

#endif // MLA_RUN_RUNOPTIONS_H
