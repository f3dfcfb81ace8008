//===- FuseRopeKVUpdate.cpp - Fuse k_pe (and q_pe) rope into the update ---===//
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"

#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::mla {
#define GEN_PASS_DEF_MLAFUSEROPEKVUPDATE
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mlir::mla

using namespace mlir;
using namespace mlir::mla;

namespace {

/// True if every use of `value` is in an op that `point` properly dominates,
/// i.e. the uses may read a result produced at `point` instead.
bool allUsesAfter(Value value, Operation *point, DominanceInfo &dom) {
  return llvm::all_of(value.getUsers(), [&](Operation *user) {
    return dom.properlyDominates(point, user);
  });
}

/// The rope of a rank-3 q_pe that can be folded into a fused op replacing
/// `update`: same block, same positions, table and style as `kRope`, operands
/// available at the update and every user after it. The earliest in the block
/// if several qualify.
RopeOp findQRope(RopeOp kRope, KVCacheUpdateOp update, DominanceInfo &dom) {
  RopeOp best;
  for (Operation *user : kRope.getPositions().getUsers()) {
    auto rope = dyn_cast<RopeOp>(user);
    if (!rope || rope == kRope || rope->getBlock() != update->getBlock() ||
        rope.getPositions() != kRope.getPositions() ||
        rope.getCosSin() != kRope.getCosSin() ||
        rope.getStyle() != kRope.getStyle() ||
        cast<RankedTensorType>(rope.getInput().getType()).getRank() != 3)
      continue;
    // Defined after the update, its input must already exist there; its
    // results replace it at the update, so every user must come later.
    if (!dom.properlyDominates(rope.getInput(), update) ||
        !allUsesAfter(rope.getResult(), update, dom))
      continue;
    if (!best || rope->isBeforeInBlock(best))
      best = rope;
  }
  return best;
}

struct FuseRopeIntoUpdate : OpRewritePattern<KVCacheUpdateOp> {
  FuseRopeIntoUpdate(MLIRContext *ctx, bool allowKPeResult, bool fuseQ,
                     llvm::Statistic &numFused, llvm::Statistic &numQFolded)
      : OpRewritePattern(ctx), allowKPeResult(allowKPeResult), fuseQ(fuseQ),
        numFused(numFused), numQFolded(numQFolded) {}

  LogicalResult matchAndRewrite(KVCacheUpdateOp update,
                                PatternRewriter &rewriter) const override {
    auto kRope = update.getKPe().getDefiningOp<RopeOp>();
    if (!kRope)
      return rewriter.notifyMatchFailure(update, "k_pe is not a rope result");
    // In the same block the rope precedes the update, so its operands are
    // available where the fused op is created.
    if (kRope->getBlock() != update->getBlock())
      return rewriter.notifyMatchFailure(update, "rope is in another block");

    DominanceInfo dom;
    Value rotatedK = kRope.getResult();
    bool hasOtherUsers = llvm::any_of(
        rotatedK.getUsers(), [&](Operation *user) { return user != update; });
    if (hasOtherUsers) {
      if (!allowKPeResult)
        return rewriter.notifyMatchFailure(
            update, "rotated k_pe has other users and allow-k-pe-result=false");
      // The fused op is created at the update: earlier users cannot read its
      // k_pe_out.
      if (llvm::any_of(rotatedK.getUsers(), [&](Operation *user) {
            return user != update && !dom.properlyDominates(update, user);
          }))
        return rewriter.notifyMatchFailure(
            update, "rotated k_pe is used before the update");
    }

    RopeOp qRope = fuseQ ? findQRope(kRope, update, dom) : RopeOp();

    rewriter.setInsertionPoint(update);
    auto fused = RopeKVCacheUpdateOp::create(
        rewriter, update.getLoc(),
        /*q_pe_out=*/qRope ? qRope.getType() : Type(),
        /*k_pe_out=*/hasOtherUsers ? rotatedK.getType() : Type(),
        kRope.getStyle(), update.getKvC(), kRope.getInput(),
        kRope.getPositions(), kRope.getCosSin(), update.getSlotMapping(),
        update.getCache(), qRope ? qRope.getInput() : Value(),
        update.getScale(), /*latent_norm_weight=*/Value(),
        /*latent_norm_epsilon=*/FloatAttr());
    rewriter.eraseOp(update);
    if (qRope) {
      rewriter.replaceOp(qRope, fused.getQPeOut());
      ++numQFolded;
    }
    if (hasOtherUsers)
      rewriter.replaceOp(kRope, fused.getKPeOut());
    else
      rewriter.eraseOp(kRope);
    ++numFused;
    return success();
  }

  bool allowKPeResult, fuseQ;
  llvm::Statistic &numFused, &numQFolded;
};

struct MLAFuseRopeKVUpdatePass
    : mla::impl::MLAFuseRopeKVUpdateBase<MLAFuseRopeKVUpdatePass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseRopeIntoUpdate>(&getContext(), allowKPeResult, fuseQ,
                                     numFused, numQFolded);
    // In block order, so that with several updates the first one that can
    // take a q rope does.
    GreedyRewriteConfig config;
    config.enableFolding(false).setUseTopDownTraversal(true);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config)))
      signalPassFailure();
  }
};

} // namespace
