//===- MLADialect.cpp - Dialect registration and discardable attributes ---===//
#include "mla/IR/MLADialect.h"
#include "mla/IR/MLAOps.h"
#include "mla/IR/MLATypes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::mla;

#include "mla/IR/MLADialect.cpp.inc"

void MLADialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "mla/IR/MLAOps.cpp.inc"
      >();
  registerTypes();
}

LogicalResult MLADialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  if (attr.getName() == getDummyRunAttrName()) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << getDummyRunAttrName()
                             << "' must be a unit attribute";
    if (!isa<FunctionOpInterface>(op))
      return op->emitError() << "'" << getDummyRunAttrName()
                             << "' is only valid on a function";
    return success();
  }
  return op->emitError() << "unknown mla attribute '" << attr.getName().getValue()
                         << "'";
}

/// `mla.name` must be a non-empty string.
static LogicalResult verifyNameAttr(Operation *op, NamedAttribute attr) {
  auto name = dyn_cast<StringAttr>(attr.getValue());
  if (!name || name.getValue().empty())
    return op->emitError() << "'" << MLADialect::getNameAttrName()
                           << "' must be a non-empty string";
  return success();
}

LogicalResult MLADialect::verifyRegionResultAttribute(Operation *op,
                                                      unsigned regionIndex,
                                                      unsigned resultIndex,
                                                      NamedAttribute attr) {
  if (attr.getName() == getNameAttrName())
    return verifyNameAttr(op, attr);
  return op->emitError() << "unknown mla result attribute '"
                         << attr.getName().getValue() << "'";
}

LogicalResult MLADialect::verifyRegionArgAttribute(Operation *op,
                                                   unsigned regionIndex,
                                                   unsigned argIndex,
                                                   NamedAttribute attr) {
  if (attr.getName() == getNoAliasAttrName()) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << getNoAliasAttrName()
                             << "' must be a unit attribute";
    // Declarations have no body, so read the type from the signature.
    auto func = dyn_cast<FunctionOpInterface>(op);
    if (!func)
      return op->emitError() << "'" << getNoAliasAttrName()
                             << "' is only valid on function arguments";
    Type argType = func.getArgumentTypes()[argIndex];
    if (!isa<KVCacheType>(argType))
      return op->emitError() << "'" << getNoAliasAttrName()
                             << "' is only valid on a !mla.kv_cache argument, "
                                "argument #"
                             << argIndex << " is " << argType;
    return success();
  }
  if (attr.getName() == getNameAttrName())
    return verifyNameAttr(op, attr);
  return op->emitError() << "unknown mla argument attribute '"
                         << attr.getName().getValue() << "'";
}
