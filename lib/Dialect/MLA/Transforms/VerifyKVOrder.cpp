//===- VerifyKVOrder.cpp - Diagnose cache accesses in the wrong order -----===//
#include "mla/Dialect/MLA/Analysis/CacheAccess.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::mla {
#define GEN_PASS_DEF_MLAVERIFYKVORDER
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mlir::mla

using namespace mlir;
using namespace mlir::mla;

namespace {

/// The accesses `op` itself declares on exactly `cache`. Unlike
/// getCacheAccess (what an op *may* do, for passes that must stay sound),
/// this is what it certainly does: a verifier reports certain bugs only.
CacheAccess getDeclaredAccess(Operation *op, Value cache) {
  CacheAccess access;
  auto iface = dyn_cast<MemoryEffectOpInterface>(op);
  if (!iface)
    return access;
  SmallVector<MemoryEffects::EffectInstance> effects;
  iface.getEffects(effects);
  for (const MemoryEffects::EffectInstance &effect : effects) {
    if (effect.getValue() != cache)
      continue;
    if (isa<MemoryEffects::Read>(effect.getEffect()))
      access.read = true;
    else if (isa<MemoryEffects::Write>(effect.getEffect()))
      access.write = true;
  }
  return access;
}

/// `op` or the first op nested in it that declares a write of `cache`.
Operation *findDeclaredWriter(Operation *op, Value cache) {
  Operation *writer = nullptr;
  op->walk<WalkOrder::PreOrder>([&](Operation *nested) {
    if (!getDeclaredAccess(nested, cache).write)
      return WalkResult::advance();
    writer = nested;
    return WalkResult::interrupt();
  });
  return writer;
}

/// True if `op` reads this step's rows from `cache` and does not write them
/// itself. `mla.prefill_attention` reads only earlier context from the cache
/// (its new tokens come from its k/v operands), so its order against this
/// step's update does not matter; declared effects cannot say which rows are
/// read, so that op is named here.
bool readsStepRows(Operation *op, Value cache) {
  CacheAccess access = getDeclaredAccess(op, cache);
  return access.read && !access.write && !isa<PrefillAttentionOp>(op);
}

/// The cache-typed operands of `op`, each once.
SmallVector<Value> cacheOperands(Operation *op) {
  SmallVector<Value> caches;
  for (Value operand : op->getOperands())
    if (isa<KVCacheType>(operand.getType()) &&
        !llvm::is_contained(caches, operand))
      caches.push_back(operand);
  return caches;
}

struct MLAVerifyKVOrderPass
    : mla::impl::MLAVerifyKVOrderBase<MLAVerifyKVOrderPass> {
  void runOnOperation() override {
    bool anyError = false;
    getOperation()->walk([&](Operation *op) {
      SmallVector<Value> caches = cacheOperands(op);
      for (Value cache : caches) {
        anyError |= checkStaleRead(op, cache);
        anyError |= checkParallelWrite(op, cache);
      }
      anyError |= checkDummyRunWrite(op, caches);
    });
    markAllAnalysesPreserved();
    if (anyError)
      signalPassFailure();
  }

  /// A read of `cache` followed, in its block or after an enclosing op's, by
  /// a write of it within the same function.
  static bool checkStaleRead(Operation *reader, Value cache) {
    if (!readsStepRows(reader, cache))
      return false;
    for (Operation *at = reader; at && !isa<FunctionOpInterface>(at);
         at = at->getParentOp()) {
      for (Operation *next = at->getNextNode(); next;
           next = next->getNextNode()) {
        Operation *writer = findDeclaredWriter(next, cache);
        if (!writer)
          continue;
        InFlightDiagnostic diag =
            reader->emitError("attention reads cache before the update that "
                              "writes this step's rows");
        diag.attachNote(writer->getLoc()) << "the cache is written here";
        return true;
      }
    }
    return false;
  }

  /// A write, inside a parallel loop, of a cache every iteration shares.
  /// scf.parallel and scf.forall are the parallel loops of the dialects we
  /// register; LoopLikeOpInterface does not say whether a loop is parallel.
  static bool checkParallelWrite(Operation *writer, Value cache) {
    if (!getDeclaredAccess(writer, cache).write)
      return false;
    for (Operation *loop = writer->getParentOp();
         loop && !isa<FunctionOpInterface>(loop); loop = loop->getParentOp()) {
      if (!isa<scf::ParallelOp, scf::ForallOp>(loop) ||
          loop->getRegion(0).isAncestor(cache.getParentRegion()))
        continue;
      InFlightDiagnostic diag = writer->emitError(
          "updates of one cache race across parallel iterations");
      diag.attachNote(loop->getLoc()) << "iterations of this loop run in "
                                         "parallel";
      return true;
    }
    return false;
  }

  /// Any possible write in a warm-up/profile run: there the invariant is
  /// that nothing is written, so a write that merely may happen is an error.
  static bool checkDummyRunWrite(Operation *op, ArrayRef<Value> caches) {
    auto func = op->getParentOfType<FunctionOpInterface>();
    if (!func || !func->hasAttr(MLADialect::getDummyRunAttrName()) ||
        llvm::none_of(caches, [&](Value cache) {
          return getCacheAccess(op, cache).write;
        }))
      return false;
    op->emitError("dummy/profile run writes the KV cache");
    return true;
  }
};

} // namespace
