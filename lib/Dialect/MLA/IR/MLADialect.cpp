//===- MLADialect.cpp - Dialect registration and discardable attributes ---===//
#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Dialect/MLA/IR/MLAAttrs.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/Dialect/MLA/IR/MLATypes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::mla;

#include "mla/Dialect/MLA/IR/MLADialect.cpp.inc"

void MLADialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "mla/Dialect/MLA/IR/MLAOps.cpp.inc"
      >();
  registerTypes();
  registerAttributes();
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
  if (attr.getName() == getKernelAttrName()) {
    if (!isa<KVCacheUpdateOp, RopeKVCacheUpdateOp>(op))
      return op->emitError() << "'" << getKernelAttrName()
                             << "' is only valid on cache-write ops";
    auto dict = dyn_cast<DictionaryAttr>(attr.getValue());
    auto symbol =
        dict ? dyn_cast_or_null<SymbolRefAttr>(dict.get("symbol")) : nullptr;
    auto threads =
        dict ? dyn_cast_or_null<IntegerAttr>(dict.get("block_threads")) : nullptr;
    auto tokens = dict ? dyn_cast_or_null<IntegerAttr>(
                             dict.get("tokens_per_block"))
                       : nullptr;
    if (!symbol || symbol.getNestedReferences().size() != 1 || !threads ||
        !tokens)
      return op->emitError()
             << "'" << getKernelAttrName()
             << "' must be {symbol = @module::@kernel, block_threads = N, "
                "tokens_per_block = M}";
    int64_t t = threads.getInt(), k = tokens.getInt();
    if (t < 32 || t > 1024 || t % 32 != 0 || k < 1 || k > t)
      return op->emitError() << "'" << getKernelAttrName()
                             << "' has a bad launch geometry (" << t
                             << " threads, " << k << " tokens per block)";
    return success();
  }
  return op->emitError() << "unknown mla attribute '" << attr.getName().getValue()
                         << "'";
}

/// `mla.name` must be a non-empty string without NUL bytes (it becomes a
/// runtime buffer name, a C string).
static LogicalResult verifyNameAttr(Operation *op, NamedAttribute attr) {
  auto name = dyn_cast<StringAttr>(attr.getValue());
  if (!name || name.getValue().empty() || name.getValue().contains('\0'))
    return op->emitError() << "'" << MLADialect::getNameAttrName()
                           << "' must be a non-empty string without NUL bytes";
  return success();
}

/// `mla.rope_table` describes a `[max_position, rope]` f32 table (tensor or
/// memref) of a function argument, with an even rope dim.
static LogicalResult verifyRopeTableAttr(Operation *op, unsigned argIndex,
                                         NamedAttribute attr) {
  StringRef name = MLADialect::getRopeTableAttrName();
  if (!isa<RopeTableAttr>(attr.getValue()))
    return op->emitError() << "'" << name
                           << "' must be a #mla.rope_table attribute";
  auto func = dyn_cast<FunctionOpInterface>(op);
  if (!func)
    return op->emitError() << "'" << name
                           << "' is only valid on function arguments";
  Type argType = func.getArgumentTypes()[argIndex];
  auto shaped = dyn_cast<ShapedType>(argType);
  if (!shaped || !shaped.hasRank() || shaped.getRank() != 2 ||
      !shaped.getElementType().isF32() ||
      ShapedType::isDynamic(shaped.getDimSize(1)) ||
      shaped.getDimSize(1) % 2 != 0)
    return op->emitError() << "'" << name
                           << "' is only valid on a [max_position, rope] f32 "
                              "argument with an even rope dim, argument #"
                           << argIndex << " is " << argType;
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
  if (attr.getName() == getRopeTableAttrName())
    return verifyRopeTableAttr(op, argIndex, attr);
  return op->emitError() << "unknown mla argument attribute '"
                         << attr.getName().getValue() << "'";
}
