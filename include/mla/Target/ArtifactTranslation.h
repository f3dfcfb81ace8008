//===- ArtifactTranslation.h - mla IR to a runtime step artifact ----------===//
//
// Translates one function of a pipeline-optimized module (tensor-level mla IR
// with static shapes) into the runtime's MLAA artifact: function arguments
// become named buffers and caches, every tensor value a view of a buffer or
// of the scratch arena (planned by liveness), and every op one or a few
// kernel instructions. See docs/lowering.md.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_TARGET_ARTIFACTTRANSLATION_H
#define MLA_TARGET_ARTIFACTTRANSLATION_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <vector>

namespace mlir::mla {

/// Serializes the single public function of `module` (or the one called
/// `functionName` when not empty). Unsupported IR is reported as a located
/// error and yields failure.
FailureOr<std::vector<uint8_t>>
translateToArtifact(ModuleOp module, StringRef functionName = {});

/// Registers `--mla-to-artifact` (binary) and `--mla-to-artifact-listing`
/// (the artifact loaded back and printed as text) with mlir-translate.
void registerToArtifactTranslations();

} // namespace mlir::mla

#endif // MLA_TARGET_ARTIFACTTRANSLATION_H
