//===- Compiler.h - In-process compilation to a runtime artifact -*- C++
//-*-===//
//
// What `mla-gen | mla-opt -mla-{decode,prefill}-pipeline | mla-translate
// --mla-to-artifact` does, as one library call for embedders (the Python
// package's mla.compiler, inference engines): from MLIR text or a model
// configuration to artifact bytes, with the same pipelines and the same
// option spelling as mla-opt. Each call owns its MLIRContext, so calls on
// different threads are independent. Every diagnostic of a failed call is
// returned in the error, located, as mla-opt prints it.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_COMPILER_COMPILER_H
#define MLA_COMPILER_COMPILER_H

#include "mla/ModelGen/ModelGen.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::mla {

/// How a step is compiled.
struct CompileOptions {
  /// Which pipeline runs: -mla-decode-pipeline or -mla-prefill-pipeline.
  gen::Phase phase = gen::Phase::Decode;
  /// The pipeline's options as mla-opt spells them inside the quotes of
  /// -mla-decode-pipeline='...', e.g. "target=cuda-sm90 fuse-rope=false".
  std::string pipelineOptions;
  /// False: translate the input as given (already optimized IR).
  bool optimize = true;
  /// The function to translate; empty: the module's single public one.
  std::string functionName;
  /// Also return the optimized IR as text.
  bool keepIR = false;
};

struct CompileResult {
  /// The MLAA artifact (docs/artifact.md), as mla-translate writes it.
  std::vector<uint8_t> artifact;
  /// The optimized module, when CompileOptions::keepIR.
  std::string ir;
};

/// Parses `source` (named `sourceName` in diagnostics) and compiles it.
llvm::Expected<CompileResult> compileSource(llvm::StringRef source,
                                            llvm::StringRef sourceName,
                                            const CompileOptions &options);

/// Generates the step of `config` (as mla-gen does) and compiles it;
/// `options.phase` is taken from `step.phase`.
llvm::Expected<CompileResult> compileModel(const gen::ModelConfig &config,
                                           const gen::StepOptions &step,
                                           CompileOptions options);

/// The step of `config` as MLIR text, what mla-gen prints.
llvm::Expected<std::string> generateModel(const gen::ModelConfig &config,
                                          const gen::StepOptions &step);

} // namespace mlir::mla

#endif // MLA_COMPILER_COMPILER_H
