//===- RunOptions.cpp - mla-run's command line ----------------------------===//
#include "RunOptions.h"

#include "common/CommandLine.h"

#include <limits>
#include <tuple>

namespace mlarun {

using mlart::DecodeSchedule;
using mlart::tool::CommandLine;
using mlart::tool::Option;

namespace {

constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();
constexpr int kIntMax = std::numeric_limits<int>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();

} // namespace

std::optional<int> parseRunOptions(int argc, const char *const *argv,
                                   RunOptions &o) {
  CommandLine cl(
      "mla-run", "ARTIFACT [options]",
      "Runs a compiled step artifact (.mlaa) on the runtime alone: requests "
      "with earlier context in a paged cache, random weights and "
      "activations from --seed, --steps steps, and a per-op time table. "
      "--reference and --naive check the results; a mismatch exits 1. See "
      "docs/mla-run.md.");
  cl.addPositional({"ARTIFACT", &o.artifact, "the step artifact to run"});
  std::vector<std::string> inputs, decodeInputs;
  cl.add({
      Option::string("reference", &o.reference, "ARTIFACT",
                     "also run ARTIFACT (e.g. the same model compiled "
                     "without the optimizing passes) on the same inputs "
                     "and copies of the caches, and compare its outputs "
                     "and caches"),
      Option::integer("seed", &o.seed, 0, kNoMax, "N",
                      "seed of the random weights and activations"),
      Option::integer("steps", &o.steps, 1, kIntMax, "N",
                      "steps to run; with --decode-artifact, the decode steps"),
      Option::integer("context", &o.context, 0, kNoMax, "N",
                      "tokens of earlier context of every request")
          .noun("a token count"),
      Option::real("tolerance", &o.tolerance, 0, kInf, "X",
                   "the largest relative error --reference and --naive "
                   "accept"),
      Option::oneOf(
          "device", &o.device,
          {{"cpu", std::string("cpu")}, {"cuda", std::string("cuda")}},
          "the device to run on"),
      Option::flag("naive", &o.naive,
                   "also compare every step with a float64 non-absorbed "
                   "reference (decode and prefill steps of mla-gen models, "
                   "and the decode steps of --decode-artifact); compares "
                   "the attention layers' contribution, output - input, "
                   "and the cache rows each step wrote (no other cache "
                   "byte may change)"),
      Option::real("softmax-scale", &o.naiveSoftmaxScale, 0, kInf, "X",
                   "the model's scale for --naive (0: the artifact's)"),
      Option::flag("json", &o.json,
                   "print one JSON object on stdout and nothing else (other "
                   "messages go to stderr)"),
      Option::flag("graph", &o.graph,
                   "(cuda) run step 0 eagerly, capture the step as a CUDA "
                   "graph and replay it for the other steps; the step time "
                   "is the median over the replays"),
      Option::flag("tune", &o.tune,
                   "(with --graph) choose each GEMM's algorithm (linear, "
                   "q_absorb, v_up) by replaying the step "
                   "(Executor::tuneGraph) when capturing; prints the "
                   "choices"),
      Option::flag("per-op", &o.perOp, true,
                   "time every op (synchronizes after each one, so the "
                   "step time includes that); default on for cpu, off for "
                   "cuda"),
      Option::flag("no-per-op", &o.perOp, false, "do not time every op"),
      Option::list("input", &inputs, "NAME=FILE.npy",
                   "bind buffer NAME's data from a .npy file (dtype and "
                   "shape must match)"),
      Option::string("dump-output", &o.dumpOutput, "FILE.npy",
                     "write the last step's hidden_states_out as float32"),
      Option::string("decode-artifact", &o.decodeArtifact, "FILE",
                     "after one step of ARTIFACT (a prefill), run FILE (a "
                     "decode step) for --steps steps on the same caches"),
      Option::list("decode-input", &decodeInputs, "NAME=FILE.npy",
                   "(with --decode-artifact) bind the decode step's input "
                   "NAME from a .npy file at every decode step"),
      Option::integer("shared-prefix", &o.sharedPrefix, 0, kNoMax, "N",
                      "all requests share their first N prompt tokens "
                      "(prefix caching)")
          .noun("a token count"),
      Option::flag("dummy-slots", &o.dummySlots,
                   "every step's slot_mapping is -1 (a warm-up or profile "
                   "step: it may write no cache byte)"),
      Option::integer("streams", &o.streams, 1, kIntMax, "N",
                      "(cuda) spread independent instructions over at most "
                      "N streams (1: program order on one stream)")
          .noun("a count"),
      Option::flag("separate-weights", &o.separateWeights,
                   "allocate each weight on its own (default: all back to "
                   "back in one allocation, so fused weights are read in "
                   "place)"),
      Option::oneOf("decode-schedule", &o.decodeSchedule,
                    {{"default", DecodeSchedule::Default},
                     {"per-sequence", DecodeSchedule::PerSequence},
                     {"balanced", DecodeSchedule::Balanced}},
                    "(cuda) how decode attention spreads over the GPU: "
                    "balanced cuts all sequences' tiles evenly (mixed "
                    "lengths), per-sequence splits every sequence alike "
                    "(alike lengths)"),
      Option::integer("prefill-context-bound", &o.prefillContextBound, 0,
                      kNoMax, "N",
                      "every request's cached context is at most N tokens "
                      "(prefill steps; 0: none): the CUDA prefill expands N "
                      "rows a request, not the block table's capacity; a "
                      "longer context is an error")
          .noun("a token count"),
      Option::integer("memory-limit", &o.memoryLimitMiB, 0, int64_t(1) << 40,
                      "MIB",
                      "device memory the run may allocate, in MiB (0: what "
                      "the device has); an artifact that declares more is "
                      "refused before anything is allocated"),
  });
  if (std::optional<int> exit = cl.parseOrExit(argc, argv))
    return exit;

  for (auto [flag, values, out] :
       {std::tuple("--input", &inputs, &o.inputs),
        std::tuple("--decode-input", &decodeInputs, &o.decodeInputs)})
    for (const std::string &kv : *values) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size())
        return cl.usageError(std::string(flag) + " needs NAME=FILE.npy, not '" +
                             kv + "'");
      out->emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
  if (!o.decodeInputs.empty() && o.decodeArtifact.empty())
    return cl.usageError("--decode-input needs --decode-artifact");
  if (o.tune && !o.graph)
    return cl.usageError("--tune needs --graph");
  if (!o.decodeArtifact.empty()) {
    // One prefill step, then --steps decode steps.
    o.decodeSteps = o.steps;
    o.steps = 1;
  }
  return std::nullopt;
}

} // namespace mlarun
