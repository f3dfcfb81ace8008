//===- Passes.h - Passes over the mla dialect -----------------------------===//
#ifndef MLA_TRANSFORMS_PASSES_H
#define MLA_TRANSFORMS_PASSES_H

#include "mla/IR/MLADialect.h"

#include "mlir/Pass/Pass.h"

#include <memory>

namespace mlir::mla {

#define GEN_PASS_DECL
#include "mla/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "mla/Transforms/Passes.h.inc"

} // namespace mlir::mla

#endif // MLA_TRANSFORMS_PASSES_H
