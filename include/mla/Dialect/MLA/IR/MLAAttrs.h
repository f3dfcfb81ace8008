//===- MLAAttrs.h - The mla dialect's attributes --------------------------===//
#ifndef MLA_DIALECT_MLA_IR_MLAATTRS_H
#define MLA_DIALECT_MLA_IR_MLAATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

namespace mlir::mla {
/// Parses a float literal for an
/// attribute's double-precision field.
FailureOr<llvm::APFloat> parseF64Field(AsmParser &parser);
} // namespace mlir::mla

#define GET_ATTRDEF_CLASSES
#include "mla/Dialect/MLA/IR/MLAAttrs.h.inc"

#endif // MLA_DIALECT_MLA_IR_MLAATTRS_H
