//===- Passes.h - Passes over the mla dialect -----------------------------===//
#ifndef MLA_DIALECT_MLA_TRANSFORMS_PASSES_H
#define MLA_DIALECT_MLA_TRANSFORMS_PASSES_H

#include "mla/Dialect/MLA/IR/MLADialect.h"

#include "mlir/Pass/Pass.h"

#include <memory>

namespace mlir::mla {

/// Where `mla-schedule-kv-updates` places each cache update.
enum class KVUpdateSchedule {
  /// As soon as its operands and the cache allow.
  Early,
  /// Just before the next access to its cache (or the end of the block).
  Late,
};

#define GEN_PASS_DECL
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"

} // namespace mlir::mla

#endif // MLA_DIALECT_MLA_TRANSFORMS_PASSES_H
