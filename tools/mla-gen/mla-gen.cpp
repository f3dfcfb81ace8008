//===- mla-gen.cpp - Generate DeepSeek MLA decode / prefill steps ---------===//
//
// A thin command line over mla/ModelGen: pick a model (a preset or a Hugging
// Face config.json) and a step shape, get the step's IR on stdout or in -o.
//
//===----------------------------------------------------------------------===//
#include "mla/ModelGen/ModelGen.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace mlir::mla::gen;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory category("mla-gen options");

cl::opt<std::string> modelName(
    "model", cl::desc("Built-in model preset (deepseek-v2-lite, deepseek-v3)"),
    cl::value_desc("name"), cl::init("deepseek-v2-lite"), cl::cat(category));
cl::opt<std::string>
    configPath("config",
               cl::desc("Hugging Face style config.json instead of a preset"),
               cl::value_desc("file"), cl::cat(category));

cl::opt<Phase> phase("phase", cl::desc("Step to generate"),
                     cl::values(clEnumValN(Phase::Decode, "decode",
                                           "one new token a request"),
                                clEnumValN(Phase::Prefill, "prefill",
                                           "packed new tokens of requests")),
                     cl::init(Phase::Decode), cl::cat(category));
cl::opt<int64_t> layers("layers",
                        cl::desc("Layers to emit (default: all of the model)"),
                        cl::init(0), cl::cat(category));
cl::opt<int64_t> batch("batch", cl::desc("Decode: requests (default 1)"),
                       cl::init(1), cl::cat(category));
cl::opt<int64_t> tokens("tokens", cl::desc("Prefill: packed new tokens"),
                        cl::init(0), cl::cat(category));
cl::opt<int64_t> requests("requests",
                          cl::desc("Prefill: requests the tokens belong to "
                                   "(default 1)"),
                          cl::init(1), cl::cat(category));
cl::opt<int64_t> blockSize("block-size", cl::desc("Tokens a cache block"),
                           cl::init(64), cl::cat(category));
cl::opt<int64_t> maxBlocksPerSeq("max-blocks-per-seq",
                                 cl::desc("Columns of the block table"),
                                 cl::init(64), cl::cat(category));
cl::opt<int64_t> maxPosition("max-position",
                             cl::desc("Rows of the cos/sin table"),
                             cl::init(8192), cl::cat(category));
cl::opt<DType> dtype("dtype", cl::desc("Activation and weight type"),
                     cl::values(clEnumValN(DType::BF16, "bf16", "bfloat16"),
                                clEnumValN(DType::F32, "f32", "float32")),
                     cl::init(DType::BF16), cl::cat(category));
cl::opt<CacheDType> cacheDType(
    "cache-dtype", cl::desc("KV-cache encoding"),
    cl::values(
        clEnumValN(CacheDType::Auto, "auto", "the activation type (default)"),
        clEnumValN(CacheDType::BF16, "bf16", "plain bf16 (needs --dtype=bf16)"),
        clEnumValN(CacheDType::F32, "f32", "plain f32 (needs --dtype=f32)"),
        clEnumValN(CacheDType::FP8, "fp8",
                   "f8E4M3FN, per-tensor scale argument a layer"),
        clEnumValN(CacheDType::FP8, "fp8_e4m3",
                   "the same as fp8 (vLLM's name)"),
        clEnumValN(CacheDType::FP8E5M2, "fp8_e5m2",
                   "f8E5M2, per-tensor scale argument a layer")),
    cl::init(CacheDType::Auto), cl::cat(category));
cl::opt<bool> dummyRun("dummy-run",
                       cl::desc("Mark the step mla.dummy_run (warm-up or "
                                "profile run: cache writes unobservable)"),
                       cl::init(false), cl::cat(category));
cl::opt<bool> layerOutputs(
    "layer-outputs",
    cl::desc("Also return each layer's attention output "
             "(model.layers.N.self_attn.o_proj_out) and residual output but "
             "the last (model.layers.N.hidden_states_out), for per-layer "
             "checks"),
    cl::init(false), cl::cat(category));
cl::opt<std::string> outputFilename("o", cl::desc("Output file"),
                                    cl::value_desc("filename"), cl::init("-"),
                                    cl::cat(category));

int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "mla-gen") << message << "\n";
  return 1;
}

/// Options that belong to the other phase are mistakes, not no-ops.
llvm::Error checkPhaseOptions() {
  auto error = [](const llvm::Twine &m) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), m);
  };
  if (phase == Phase::Decode) {
    if (tokens.getNumOccurrences() || requests.getNumOccurrences())
      return error("--tokens and --requests are prefill options; decode takes "
                   "--batch");
  } else {
    if (batch.getNumOccurrences())
      return error("--batch is a decode option; prefill takes --tokens and "
                   "--requests");
    if (!tokens.getNumOccurrences())
      return error("--phase=prefill needs --tokens=T");
  }
  if (layers.getNumOccurrences() && layers <= 0)
    return error("--layers must be positive, got " + llvm::Twine(layers));
  return llvm::Error::success();
}

llvm::Expected<ModelConfig> loadConfig() {
  if (!configPath.empty()) {
    if (modelName.getNumOccurrences())
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "give either --model or --config, not "
                                     "both");
    return loadModelConfig(configPath);
  }
  if (std::optional<ModelConfig> preset = lookupPreset(modelName))
    return *preset;
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "unknown model '" + modelName + "' (presets: " +
          llvm::join(getPresetNames(), ", ") + "; or --config=config.json)");
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "DeepSeek MLA step generator: the IR of N attention layers of one "
      "decode or prefill step, in the monolithic mla.attention form\n");

  if (llvm::Error err = checkPhaseOptions())
    return fail(llvm::toString(std::move(err)));
  llvm::Expected<ModelConfig> config = loadConfig();
  if (!config)
    return fail(llvm::toString(config.takeError()));

  StepOptions options;
  options.phase = phase;
  options.numLayers = layers;
  options.batch = batch;
  options.tokens = tokens;
  options.requests = requests;
  options.blockSize = blockSize;
  options.maxBlocksPerSeq = maxBlocksPerSeq;
  options.maxPosition = maxPosition;
  options.dtype = dtype;
  options.cacheDType = cacheDType;
  options.dummyRun = dummyRun;
  options.layerOutputs = layerOutputs;

  mlir::MLIRContext context;
  auto module = buildStepModule(context, *config, options);
  if (!module)
    return fail(llvm::toString(module.takeError()));

  std::string errorMessage;
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFilename, &errorMessage);
  if (!output)
    return fail(errorMessage);
  (*module)->print(output->os());
  output->os() << "\n";
  output->keep();
  return 0;
}
