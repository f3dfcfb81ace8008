//===- FuseKVUpdateQuant.cpp - Fold fp8 quantisation into the update ------===//
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::mla {
#define GEN_PASS_DEF_MLAFUSEKVUPDATEQUANT
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mlir::mla

using namespace mlir;
using namespace mlir::mla;

namespace {

/// `mla.kv_cache_update` of two `mla.quantize` results (one scale) into a
/// per-tensor fp8 cache -> the update quantises the float inputs itself. The
/// cache quantises exactly as `mla.quantize` does (saturate(x / scale), round
/// to nearest even), so the stored bytes are the same.
struct FoldQuantizeIntoUpdate : OpRewritePattern<KVCacheUpdateOp> {
  FoldQuantizeIntoUpdate(MLIRContext *ctx, llvm::Statistic &numFused)
      : OpRewritePattern(ctx), numFused(numFused) {}

  LogicalResult matchAndRewrite(KVCacheUpdateOp update,
                                PatternRewriter &rewriter) const override {
    if (update.getCache().getType().getLayout() != CacheLayout::per_tensor)
      return rewriter.notifyMatchFailure(update, "not a per-tensor fp8 cache");
    if (update.getScale())
      return rewriter.notifyMatchFailure(update, "already quantises");
    auto quantKvC = update.getKvC().getDefiningOp<QuantizeOp>();
    auto quantKPe = update.getKPe().getDefiningOp<QuantizeOp>();
    if (!quantKvC || !quantKPe)
      return rewriter.notifyMatchFailure(
          update, "kv_c and k_pe are not both quantize results");
    if (quantKvC.getScale() != quantKPe.getScale())
      return rewriter.notifyMatchFailure(update,
                                         "the two quantize ops use different "
                                         "scale values");
    Value kvC = quantKvC.getInput(), kPe = quantKPe.getInput();
    // The update takes one input element type for both.
    if (getElementTypeOrSelf(kvC.getType()) !=
        getElementTypeOrSelf(kPe.getType()))
      return rewriter.notifyMatchFailure(
          update, "the float inputs have different element types");
    // Both quantize ops dominate the update, hence so do their operands; the
    // quantize ops are pure and stay only if something else uses them.
    rewriter.modifyOpInPlace(update, [&] {
      update.getKvCMutable().assign(kvC);
      update.getKPeMutable().assign(kPe);
      update.getScaleMutable().assign(quantKvC.getScale());
    });
    ++numFused;
    return success();
  }

  llvm::Statistic &numFused;
};

struct MLAFuseKVUpdateQuantPass
    : mla::impl::MLAFuseKVUpdateQuantBase<MLAFuseKVUpdateQuantPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldQuantizeIntoUpdate>(&getContext(), numFused);
    GreedyRewriteConfig config;
    config.enableFolding(false);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config)))
      signalPassFailure();
  }
};

} // namespace
