//===- MLAOps.h - Ops of the mla dialect ----------------------------------===//
#ifndef MLA_DIALECT_MLA_IR_MLAOPS_H
#define MLA_DIALECT_MLA_IR_MLAOPS_H

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Dialect/MLA/IR/MLATypes.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "mla/Dialect/MLA/IR/MLAOps.h.inc"

#endif // MLA_DIALECT_MLA_IR_MLAOPS_H
