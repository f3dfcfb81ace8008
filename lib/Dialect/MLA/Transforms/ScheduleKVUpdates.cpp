//===- ScheduleKVUpdates.cpp - Move cache updates early or late -----------===//
#include "mla/Dialect/MLA/Analysis/CacheAccess.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"

#include "mlir/IR/RegionKindInterface.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::mla {
#define GEN_PASS_DEF_MLASCHEDULEKVUPDATES
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mlir::mla

using namespace mlir;
using namespace mlir::mla;

namespace {

/// The ops this pass moves.
bool isUpdate(Operation *op) {
  return isa<KVCacheUpdateOp, RopeKVCacheUpdateOp>(op);
}

Value cacheOf(Operation *update) {
  if (auto op = dyn_cast<KVCacheUpdateOp>(update))
    return op.getCache();
  return cast<RopeKVCacheUpdateOp>(update).getCache();
}

/// What an update does to its cache: an op that touches an aliasing cache in
/// any way conflicts with it.
constexpr CacheAccess kUpdateAccess{/*read=*/false, /*write=*/true};

bool conflicts(Operation *op, Value cache) {
  return getCacheAccess(op, cache).conflictsWith(kUpdateAccess);
}

bool definesOperandOf(Operation *def, Operation *user) {
  return llvm::any_of(user->getOperands(),
                      [&](Value v) { return v.getDefiningOp() == def; });
}

/// Moves `update` up to just after the nearest op above it that defines one
/// of its operands or conflicts on its cache (or to the block start). Updates
/// above it were scheduled already; those sitting at that spot stay first.
bool hoist(Operation *update) {
  Value cache = cacheOf(update);
  Operation *barrier = nullptr;
  for (Operation *op = update->getPrevNode(); op; op = op->getPrevNode()) {
    if (definesOperandOf(op, update) || conflicts(op, cache)) {
      barrier = op;
      break;
    }
  }
  Operation *before =
      barrier ? barrier->getNextNode() : &update->getBlock()->front();
  while (before != update && isUpdate(before))
    before = before->getNextNode();
  if (before == update)
    return false;
  update->moveBefore(before);
  return true;
}

/// Moves `update` down to just before the nearest op below it that conflicts
/// on its cache, uses one of its results (directly or inside its regions), or
/// terminates the block. Updates below it were scheduled already; those
/// sitting at that spot stay last.
bool sink(Operation *update) {
  Block *block = update->getBlock();
  Value cache = cacheOf(update);
  llvm::SmallPtrSet<Operation *, 4> users;
  for (Operation *user : update->getUsers())
    if (Operation *ancestor = block->findAncestorOpInBlock(*user))
      users.insert(ancestor);
  Operation *stop = nullptr; // nullptr: the end of a block without terminator
  for (Operation *op = update->getNextNode(); op; op = op->getNextNode()) {
    if (op->hasTrait<OpTrait::IsTerminator>() || users.contains(op) ||
        conflicts(op, cache)) {
      stop = op;
      break;
    }
  }
  Operation *before = stop;
  Operation *prev = stop ? stop->getPrevNode() : &block->back();
  while (prev != update && isUpdate(prev)) {
    before = prev;
    prev = prev->getPrevNode();
  }
  if (prev == update)
    return false;
  if (before)
    update->moveBefore(before);
  else
    update->moveBefore(block, block->end());
  return true;
}

struct MLAScheduleKVUpdatesPass
    : mla::impl::MLAScheduleKVUpdatesBase<MLAScheduleKVUpdatesPass> {
  using MLAScheduleKVUpdatesBase::MLAScheduleKVUpdatesBase;

  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation()->walk([&](Block *block) {
      // Op order means nothing in a graph region.
      if (mayHaveSSADominance(*block->getParent()))
        blocks.push_back(block);
    });
    for (Block *block : blocks) {
      SmallVector<Operation *> updates;
      for (Operation &op : *block)
        if (isUpdate(&op))
          updates.push_back(&op);
      // Each update is placed after those it may not pass have been placed:
      // top-down when hoisting, bottom-up when sinking.
      if (strategy == KVUpdateSchedule::Early) {
        for (Operation *update : updates)
          numMoved += hoist(update);
      } else {
        for (Operation *update : llvm::reverse(updates))
          numMoved += sink(update);
      }
    }
  }
};

} // namespace
