//===- MLATypes.h - The mla dialect's types and enums ---------------------===//
#ifndef MLA_DIALECT_MLA_IR_MLATYPES_H
#define MLA_DIALECT_MLA_IR_MLATYPES_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"

#include "mla/Dialect/MLA/IR/MLAEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "mla/Dialect/MLA/IR/MLATypes.h.inc"

namespace mlir::mla {
/// The fp8 encodings a cache can hold: f8E4M3FN (both fp8 layouts) and
/// f8E5M2 (per_tensor only).
inline bool isFp8Type(Type type) {
  return isa<Float8E4M3FNType, Float8E5M2Type>(type);
}
} // namespace mlir::mla

#endif // MLA_DIALECT_MLA_IR_MLATYPES_H
