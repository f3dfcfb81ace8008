//===- CacheAccess.h - Which ops may read or write a given KV cache -------===//
//
// Every pass that moves, deletes or fuses a cache update asks the same two
// questions: may this op touch that cache, and may these two cache values be
// the same storage? The answers rest on declared memory effects only, never
// on op names, and are conservative: an op without a MemoryEffectOpInterface
// (a call, an unregistered op) may read and write every cache.
//
// Aliasing rule: two distinct SSA values of !mla.kv_cache type are disjoint
// only when both are arguments of the same function entry block and at least
// one of them carries `mla.noalias`. Anything else may alias.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_DIALECT_MLA_ANALYSIS_CACHEACCESS_H
#define MLA_DIALECT_MLA_ANALYSIS_CACHEACCESS_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

namespace mlir::mla {

/// How an op (with everything nested in it) may access a cache.
struct CacheAccess {
  bool read = false;
  bool write = false;

  bool none() const { return !read && !write; }
  /// True if this access and `other` cannot be reordered.
  bool conflictsWith(CacheAccess other) const {
    return (write && !other.none()) || (other.write && !none());
  }
  static CacheAccess readWrite() { return {true, true}; }
};

/// True if `a` and `b` (both of cache type) may denote the same storage.
bool mayAlias(Value a, Value b);

/// The accesses `op` may make to `cache`, including through nested regions.
CacheAccess getCacheAccess(Operation *op, Value cache);

/// True if some op strictly between `from` and `to` (same block, `from`
/// before `to`) may access `cache` in a way that conflicts with `access`.
/// Writes to `nullptr` the first such op if `firstConflict` is given.
bool hasConflictBetween(Operation *from, Operation *to, Value cache,
                        CacheAccess access,
                        Operation **firstConflict = nullptr);

} // namespace mlir::mla

#endif // MLA_DIALECT_MLA_ANALYSIS_CACHEACCESS_H
