//===- MLATypes.h - The mla dialect's types and enums ---------------------===//
#ifndef MLA_IR_MLATYPES_H
#define MLA_IR_MLATYPES_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"

#include "mla/IR/MLAEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "mla/IR/MLATypes.h.inc"

#endif // MLA_IR_MLATYPES_H
