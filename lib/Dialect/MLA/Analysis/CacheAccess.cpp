//===- CacheAccess.cpp - Cache effects from declared memory effects -------===//
#include "mla/Dialect/MLA/Analysis/CacheAccess.h"

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Dialect/MLA/IR/MLATypes.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::mla;

namespace {

/// The function whose entry block defines `v`, if `v` is such an argument.
FunctionOpInterface entryArgOwner(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || !arg.getOwner()->isEntryBlock())
    return {};
  return dyn_cast_or_null<FunctionOpInterface>(arg.getOwner()->getParentOp());
}

bool hasNoAlias(Value v) {
  FunctionOpInterface func = entryArgOwner(v);
  return func && func.getArgAttr(cast<BlockArgument>(v).getArgNumber(),
                                 MLADialect::getNoAliasAttrName());
}

/// Adds the effects of one op (not its regions) on `cache` to `access`.
/// Returns false if the op's effects are unknown.
bool addOwnEffects(Operation *op, Value cache, CacheAccess &access) {
  auto iface = dyn_cast<MemoryEffectOpInterface>(op);
  if (!iface)
    return false;
  SmallVector<MemoryEffects::EffectInstance> effects;
  iface.getEffects(effects);
  for (const MemoryEffects::EffectInstance &effect : effects) {
    Value target = effect.getValue();
    bool onCacheResource = isa<KVCacheResource>(effect.getResource());
    bool touches;
    if (target)
      // An effect on a value only reaches a cache through a cache value.
      touches = isa<KVCacheType>(target.getType()) && mayAlias(target, cache);
    else
      // A valueless effect on the cache resource (or on the default resource,
      // which promises nothing about where it lands) may touch any cache.
      touches = onCacheResource ||
                isa<SideEffects::DefaultResource>(effect.getResource());
    if (!touches)
      continue;
    if (isa<MemoryEffects::Read>(effect.getEffect()))
      access.read = true;
    else if (isa<MemoryEffects::Write>(effect.getEffect()) ||
             isa<MemoryEffects::Free>(effect.getEffect()))
      access.write = true;
  }
  return true;
}

} // namespace

bool mlir::mla::mayAlias(Value a, Value b) {
  if (a == b)
    return true;
  FunctionOpInterface fa = entryArgOwner(a), fb = entryArgOwner(b);
  if (fa && fa == fb && (hasNoAlias(a) || hasNoAlias(b)))
    return false;
  return true;
}

CacheAccess mlir::mla::getCacheAccess(Operation *op, Value cache) {
  CacheAccess access;
  bool known = true;
  op->walk([&](Operation *nested) {
    if (!known)
      return WalkResult::interrupt();
    bool recursive = nested->hasTrait<OpTrait::HasRecursiveMemoryEffects>();
    if (recursive && !isa<MemoryEffectOpInterface>(nested))
      return WalkResult::advance(); // its nested ops are visited by the walk
    if (!addOwnEffects(nested, cache, access))
      known = false;
    return WalkResult::advance();
  });
  if (!known)
    return CacheAccess::readWrite();
  return access;
}

bool mlir::mla::hasConflictBetween(Operation *from, Operation *to, Value cache,
                                   CacheAccess access,
                                   Operation **firstConflict) {
  for (Operation *op = from->getNextNode(); op && op != to;
       op = op->getNextNode()) {
    if (getCacheAccess(op, cache).conflictsWith(access)) {
      if (firstConflict)
        *firstConflict = op;
      return true;
    }
  }
  return false;
}
