//===- EliminateKVUpdates.cpp - Delete cache updates nobody can observe ---===//
#include "mla/Dialect/MLA/Analysis/CacheAccess.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::mla {
#define GEN_PASS_DEF_MLAELIMINATEKVUPDATES
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mlir::mla

using namespace mlir;
using namespace mlir::mla;

namespace {

/// The operands that say what a cache update writes, for both update forms.
struct UpdateOperands {
  Value kvC, slotMapping, cache;
};

std::optional<UpdateOperands> getUpdateOperands(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<UpdateOperands>>(op)
      .Case<KVCacheUpdateOp, RopeKVCacheUpdateOp>([](auto update) {
        return UpdateOperands{update.getKvC(), update.getSlotMapping(),
                              update.getCache()};
      })
      .Default([](Operation *) { return std::nullopt; });
}

bool isUpdate(Operation *op) { return getUpdateOperands(op).has_value(); }

/// True if the update writes no row whatever the runtime values: no tokens,
/// an empty slot mapping, or constant slots that are all negative.
bool writesNoRow(const UpdateOperands &update) {
  auto isEmpty = [](Value v) {
    return cast<ShapedType>(v.getType()).getDimSize(0) == 0;
  };
  if (isEmpty(update.kvC) || isEmpty(update.slotMapping))
    return true;
  DenseIntElementsAttr slots;
  if (!matchPattern(update.slotMapping, m_Constant(&slots)))
    return false;
  return llvm::all_of(slots.getValues<APInt>(),
                      [](const APInt &slot) { return slot.isNegative(); });
}

/// Removes the cache write of `op`. The fused form's rotated outputs are pure
/// functions of its inputs, so used ones survive as `mla.rope` ops.
void eraseWrite(RewriterBase &rewriter, Operation *op) {
  if (auto fused = dyn_cast<RopeKVCacheUpdateOp>(op)) {
    rewriter.setInsertionPoint(fused);
    auto keepRotation = [&](Value result, Value input) {
      if (!result || result.use_empty())
        return;
      Value rotated = RopeOp::create(rewriter, fused.getLoc(), result.getType(),
                                     fused.getStyleAttr(), input,
                                     fused.getPositions(), fused.getCosSin());
      rewriter.replaceAllUsesWith(result, rotated);
    };
    keepRotation(fused.getQPeOut(), fused.getQPe());
    keepRotation(fused.getKPeOut(), fused.getKPe());
  }
  rewriter.eraseOp(op);
}

/// Which of two updates of one block can go.
enum class Redundancy { None, LaterDuplicate, EarlierOverwritten };

struct MLAEliminateKVUpdatesPass
    : mla::impl::MLAEliminateKVUpdatesBase<MLAEliminateKVUpdatesPass> {
  using Base::Base;

  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    if (dummyRuns)
      eraseInDummyRuns(rewriter);
    if (staticEmpty)
      eraseEmptyWrites(rewriter);
    if (duplicates || overwritten)
      eraseRedundantPairs(rewriter);
  }

  /// Every update of a dummy/profile run goes; ops that read and write in one
  /// kernel cannot be split here, so the user is told.
  void eraseInDummyRuns(RewriterBase &rewriter) {
    SmallVector<Operation *> updates;
    getOperation()->walk([&](Operation *op) {
      auto func = op->getParentOfType<FunctionOpInterface>();
      if (!func || !func->hasAttr(MLADialect::getDummyRunAttrName()))
        return;
      if (isUpdate(op)) {
        updates.push_back(op);
        return;
      }
      for (Value operand : op->getOperands()) {
        if (!isa<KVCacheType>(operand.getType()) ||
            !getCacheAccess(op, operand).write)
          continue;
        op->emitWarning() << "dummy/profile run still writes the KV cache "
                             "through this op; only separate cache updates "
                             "are removed";
        return;
      }
    });
    for (Operation *op : updates)
      eraseWrite(rewriter, op);
    numDummyRun += updates.size();
  }

  void eraseEmptyWrites(RewriterBase &rewriter) {
    SmallVector<Operation *> empty;
    getOperation()->walk([&](Operation *op) {
      if (std::optional<UpdateOperands> update = getUpdateOperands(op))
        if (writesNoRow(*update))
          empty.push_back(op);
    });
    for (Operation *op : empty)
      eraseWrite(rewriter, op);
    numStaticEmpty += empty.size();
  }

  /// `earlier` and `later` are updates of one block, `earlier` first.
  Redundancy classify(Operation *earlier, Operation *later) {
    UpdateOperands a = *getUpdateOperands(earlier);
    UpdateOperands b = *getUpdateOperands(later);
    if (a.cache != b.cache)
      return Redundancy::None;
    // Rewriting identical rows with identical values changes nothing, unless
    // another write in between changed them: reads in between are harmless.
    if (duplicates &&
        OperationEquivalence::isEquivalentTo(
            earlier, later, OperationEquivalence::IgnoreLocations) &&
        !hasConflictBetween(earlier, later, a.cache,
                            CacheAccess{/*read=*/true, /*write=*/false}))
      return Redundancy::LaterDuplicate;
    // One slot mapping value means one set of rows (the slot mapping, never
    // the token count, bounds which tokens write), so the later update
    // rewrites all of them; nothing may see the earlier values in between.
    if (overwritten && a.slotMapping == b.slotMapping &&
        !hasConflictBetween(earlier, later, a.cache,
                            CacheAccess{/*read=*/false, /*write=*/true}))
      return Redundancy::EarlierOverwritten;
    return Redundancy::None;
  }

  /// Deletes one redundant update of `block`; returns false if none is.
  bool eraseOneRedundant(RewriterBase &rewriter, Block &block) {
    SmallVector<Operation *> updates;
    for (Operation &op : block)
      if (isUpdate(&op))
        updates.push_back(&op);
    for (auto [i, earlier] : llvm::enumerate(updates)) {
      for (Operation *later : ArrayRef(updates).drop_front(i + 1)) {
        switch (classify(earlier, later)) {
        case Redundancy::None:
          continue;
        case Redundancy::LaterDuplicate:
          rewriter.replaceOp(later, earlier->getResults());
          ++numDuplicates;
          return true;
        case Redundancy::EarlierOverwritten:
          eraseWrite(rewriter, earlier);
          ++numOverwritten;
          return true;
        }
      }
    }
    return false;
  }

  /// Pairs are compared within a block only: its ops run in order, each
  /// exactly when the others do.
  void eraseRedundantPairs(RewriterBase &rewriter) {
    llvm::SetVector<Block *> blocks;
    getOperation()->walk([&](Operation *op) {
      if (isUpdate(op))
        blocks.insert(op->getBlock());
    });
    // Deleting one update may expose another pair: iterate to a fixpoint.
    for (Block *block : blocks)
      while (eraseOneRedundant(rewriter, *block)) {
      }
  }
};

} // namespace
