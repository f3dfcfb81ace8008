//===- BenchOptions.cpp - mla-bench's command line ------------------------===//
#include "BenchOptions.h"

#include "common/CommandLine.h"

#include <limits>

namespace mlart::bench {

using tool::CommandLine;
using tool::Option;

namespace {

constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();
constexpr int kIntMax = std::numeric_limits<int>::max();

} // namespace

std::optional<int> parseBenchOptions(int argc, const char *const *argv,
                                     BenchOptions &o) {
  CommandLine cl(
      "mla-bench", "[OUT.json] [options]",
      "Times the CUDA kernels and compiled steps with CUDA events (warm-up, "
      "then the median of many calls) against two ceilings measured in the "
      "same run (a device-to-device copy and a cuBLAS bf16 GEMM), prints "
      "the table and writes the rows as JSON. Without options it runs "
      "every row; the options narrow it. See docs/performance.md.");
  std::string positionalOutput;
  cl.addPositional({"OUT.json", &positionalOutput,
                    "where to write the rows, as --output", false});
  std::string output;
  cl.add({
      Option::string("output", &output, "OUT.json",
                     "where to write the rows as JSON (default "
                     "mla-bench.json)"),
      Option::flag("quick", &o.quick, "fewer repetitions"),
      Option::flag("decode-only", &o.decodeOnly,
                   "ceilings, the --step rows and decode"),
      Option::flag("no-h128", &o.noH128,
                   "leave out the large H=128 decode shapes"),
      Option::flag("cache-only", &o.cacheOnly,
                   "ceilings, the generated-kernel rows and the library "
                   "cache writes"),
      Option::integer("decode-h", &o.decodeH, 0, kIntMax, "H",
                      "only decode rows with H heads (0: every head count)")
          .noun("a head count"),
      Option::integer("decode-b", &o.decodeB, 0, kIntMax, "B",
                      "the decode grid's batch: only B (any value; 0: the "
                      "grid's)")
          .noun("a batch"),
      Option::integer("decode-l", &o.decodeL, 0, kNoMax, "L",
                      "the decode grid's length: only L (any value; 0: the "
                      "grid's)")
          .noun("a token count"),
      Option::flag("no-ceilings", &o.noCeilings, "no ceilings"),
      Option::flag("codegen-only", &o.codegenOnly,
                   "ceilings and the [lib] / [gen] rows; needs "
                   "MLART_CODEGEN_ARTIFACT=codegen-kernels.mlaa"),
      Option::list("step", &o.steps, "ARTIFACT",
                   "also time the compiled step ARTIFACT, eager and as a "
                   "graph"),
      Option::integer("step-context", &o.stepContext, 0, kNoMax, "L",
                      "the --step rows' cached tokens a sequence")
          .noun("a token count"),
      Option::flag("step-only", &o.stepOnly, "ceilings and the --step rows"),
      Option::integer("update-t", &o.updateT, 0, 65536, "T",
                      "time only cache_update at T tokens (1, 16, 256, 4096 "
                      "or 65536; 0: every T)")
          .noun("a token count"),
      Option::flag("gemm-only", &o.gemmOnly,
                   "ceilings and the step GEMMs (cuBLAS, L2-warm, every "
                   "skinny variant, the residual epilogue)"),
      Option::flag("prefill-only", &o.prefillOnly, "ceilings and prefill"),
      Option::flag("decode-trace", &o.decodeTrace,
                   "the 16-head decode kernel's per-CTA trace, alone and in "
                   "each --step, nothing else"),
      Option::string("timeline", &o.timelinePath, "OUT.txt",
                     "(with --step; needs CUPTI) a CUPTI timeline of step "
                     "replays into OUT.txt, and as JSON beside it, nothing "
                     "else"),
      Option::integer("timeline-replays", &o.timelineReplays, 1, kIntMax, "N",
                      "--timeline: replays recorded")
          .noun("a count"),
      Option::integer("timeline-streams", &o.timelineStreams, 0, kIntMax, "N",
                      "--timeline: only N streams (0: 1 and 2)")
          .noun("a count"),
  });
  if (std::optional<int> exit = cl.parseOrExit(argc, argv))
    return exit;

  if (!output.empty() && !positionalOutput.empty())
    return cl.usageError("the output is given twice: '" + positionalOutput +
                         "' and --output=" + output);
  if (!output.empty())
    o.output = output;
  else if (!positionalOutput.empty())
    o.output = positionalOutput;
  if (!o.timelinePath.empty() && o.steps.empty())
    return cl.usageError("--timeline needs --step=ARTIFACT");
  return std::nullopt;
}

} // namespace mlart::bench
