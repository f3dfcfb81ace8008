//===- Passes.h - Conversions out of the mla dialect ------------*- C++ -*-===//
#ifndef MLA_CONVERSION_PASSES_H
#define MLA_CONVERSION_PASSES_H

#include "mla/Dialect/MLA/IR/MLADialect.h"

#include "mlir/Pass/Pass.h"

namespace mlir::mla {

#define GEN_PASS_DECL
#include "mla/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "mla/Conversion/Passes.h.inc"

} // namespace mlir::mla

#endif // MLA_CONVERSION_PASSES_H
