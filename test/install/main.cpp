// Embedding check: parse mla IR and build a step with the C++ builder
// (mla/ModelGen), run mla-extract-kv-update on both, verify the results;
// then compile an RMSNorm step in process (mla/Compiler) and write its
// artifact to argv[1], for runtime-consumer.c to run through libmlart.so.
#include "mla/Compiler/Compiler.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/InitAll.h"
#include "mla/ModelGen/ModelGen.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include <cstdio>
#include <fstream>

static const char *kModule = R"mlir(
func.func @step(%q: tensor<2x16x192xbf16>, %c: tensor<2x512xbf16>, %p: tensor<2x64xbf16>,
                %s: tensor<2xi64>, %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x4xi32>,
                %sl: tensor<2xi32>, %wk: tensor<16x128x512xbf16>, %wv: tensor<16x512x128xbf16>)
    -> tensor<2x16x128xbf16> {
  %o = mla.attention decode %q, %c, %p, %s into %cache[%bt, %sl] weights(%wk, %wv) softmax_scale = 0.1
      : tensor<2x16x192xbf16>, tensor<2x512xbf16>, tensor<2x64xbf16>, tensor<2xi64> into !mla.kv_cache<?x16xbf16>,
        tensor<2x4xi32>, tensor<2xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16> -> tensor<2x16x128xbf16>
  return %o : tensor<2x16x128xbf16>
}
)mlir";

/// Runs the extract pass and returns the number of cache updates, or -1.
static int extractAndCount(mlir::MLIRContext &context, mlir::ModuleOp module) {
  auto pm = mlir::PassManager::on<mlir::ModuleOp>(&context);
  if (mlir::failed(mlir::parsePassPipeline("mla-extract-kv-update", pm)) ||
      mlir::failed(pm.run(module)))
    return -1;
  int updates = 0;
  module.walk([&](mlir::mla::KVCacheUpdateOp) { ++updates; });
  return updates;
}

static const char *kNormStep = R"mlir(
func.func @norm(%x: tensor<2x8xf32> {mla.name = "hidden_states"},
                %w: tensor<8xf32> {mla.name = "w"}) -> tensor<2x8xf32> {
  %0 = mla.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : tensor<2x8xf32>, tensor<8xf32>
  return %0 : tensor<2x8xf32>
}
)mlir";

/// Compiles kNormStep in process and writes the artifact to `path`.
static int writeNormArtifact(const char *path) {
  mlir::mla::CompileOptions options;
  options.optimize = false;
  auto result = mlir::mla::compileSource(kNormStep, "norm.mlir", options);
  if (!result) {
    std::fprintf(stderr, "%s\n", llvm::toString(result.takeError()).c_str());
    return 1;
  }
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(result->artifact.data()),
            std::streamsize(result->artifact.size()));
  std::printf("compiled in process: %zu artifact bytes\n",
              result->artifact.size());
  return out.good() ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc > 1 && writeNormArtifact(argv[1]) != 0)
    return 1;
  mlir::DialectRegistry registry;
  mlir::mla::registerAllDialects(registry);
  mlir::mla::registerAllPasses();
  mlir::MLIRContext context(registry);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kModule, &context);
  if (!module)
    return 1;
  int updates = extractAndCount(context, *module);
  std::printf("kv_cache_update ops after extraction: %d\n", updates);
  if (updates != 1)
    return 1;

  namespace gen = mlir::mla::gen;
  gen::StepOptions options;
  options.numLayers = 2;
  options.batch = 4;
  auto step = gen::buildStepModule(
      context, *gen::lookupPreset("deepseek-v2-lite"), options);
  if (!step) {
    std::fprintf(stderr, "%s\n", llvm::toString(step.takeError()).c_str());
    return 1;
  }
  updates = extractAndCount(context, **step);
  std::printf("kv_cache_update ops in a generated 2-layer step: %d\n", updates);
  return updates == 2 ? 0 : 1;
}
