//===- FuseKVNorm.cpp - Fold the latent RMSNorm into the cache write ------===//
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::mla {
#define GEN_PASS_DEF_MLAFUSEKVNORM
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mlir::mla

using namespace mlir;
using namespace mlir::mla;

namespace {

/// `mla.rope_kv_cache_update(mla.rms_norm(x, w), ...)` -> the update with
/// `latent_norm(w, eps)` reading x. Only when the normalised latent has no
/// other reader: otherwise it must be materialised anyway.
struct FoldNormIntoUpdate : OpRewritePattern<RopeKVCacheUpdateOp> {
  FoldNormIntoUpdate(MLIRContext *ctx, llvm::Statistic &numFused)
      : OpRewritePattern(ctx), numFused(numFused) {}

  LogicalResult matchAndRewrite(RopeKVCacheUpdateOp update,
                                PatternRewriter &rewriter) const override {
    if (update.getLatentNormWeight())
      return rewriter.notifyMatchFailure(update, "already normalises");
    auto norm = update.getKvC().getDefiningOp<RmsNormOp>();
    if (!norm)
      return rewriter.notifyMatchFailure(update, "kv_c is not an rms_norm");
    // In the same block the norm precedes the update, so its operands are
    // available there; a norm in another block is not moved into this one.
    if (norm->getBlock() != update->getBlock())
      return rewriter.notifyMatchFailure(update, "rms_norm in another block");
    if (!norm->hasOneUse())
      return rewriter.notifyMatchFailure(
          update, "the normalised latent has other readers");

    rewriter.setInsertionPoint(update);
    auto fused = RopeKVCacheUpdateOp::create(
        rewriter, update.getLoc(),
        update.getQPeOut() ? update.getQPeOut().getType() : Type(),
        update.getKPeOut() ? update.getKPeOut().getType() : Type(),
        update.getStyleAttr(), norm.getInput(), update.getKPe(),
        update.getPositions(), update.getCosSin(), update.getSlotMapping(),
        update.getCache(), update.getQPe(), update.getScale(), norm.getWeight(),
        norm.getEpsilonAttr());
    // Keep whatever else the update carries (a discardable attribute).
    for (NamedAttribute attr : update->getDiscardableAttrs())
      fused->setAttr(attr.getName(), attr.getValue());
    rewriter.replaceOp(update, fused->getResults());
    rewriter.eraseOp(norm);
    ++numFused;
    return success();
  }

  llvm::Statistic &numFused;
};

struct MLAFuseKVNormPass : mla::impl::MLAFuseKVNormBase<MLAFuseKVNormPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldNormIntoUpdate>(&getContext(), numFused);
    GreedyRewriteConfig config;
    config.enableFolding(false);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }
};

} // namespace
