//===- MLATypes.h - The mla dialect's types and enums ---------------------===//
#ifndef MLA_DIALECT_MLA_IR_MLATYPES_H
#define MLA_DIALECT_MLA_IR_MLATYPES_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"

#include "mla/Dialect/MLA/IR/MLAEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "mla/Dialect/MLA/IR/MLATypes.h.inc"

#endif // MLA_DIALECT_MLA_IR_MLATYPES_H
