//===- ExtractKVUpdate.cpp - Split mla.attention into update + attention --===//
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::mla {
#define GEN_PASS_DEF_MLAEXTRACTKVUPDATE
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mlir::mla

using namespace mlir;
using namespace mlir::mla;

namespace {

/// The scale the update needs: the cache's runtime scale when it quantises
/// float inputs into a per-tensor fp8 cache, none otherwise.
Value updateScale(AttentionOp op) {
  KVCacheType cache = op.getCache().getType();
  bool quantises =
      cache.needsScaleOperand() &&
      !isFp8Type(cast<ShapedType>(op.getKvC().getType()).getElementType());
  return quantises ? op.getKvScale() : Value();
}

struct ExtractDecode : OpRewritePattern<AttentionOp> {
  ExtractDecode(MLIRContext *ctx, llvm::Statistic &count)
      : OpRewritePattern(ctx), count(count) {}

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getMode() != AttentionMode::decode)
      return rewriter.notifyMatchFailure(op, "not a decode attention");
    Location loc = op.getLoc();
    KVCacheUpdateOp::create(rewriter, loc, op.getKvC(), op.getKPe(),
                            op.getSlotMapping(), op.getCache(),
                            updateScale(op));
    auto qType = cast<RankedTensorType>(op.getQ().getType());
    auto latentType = RankedTensorType::get(
        {qType.getDimSize(0), qType.getDimSize(1),
         op.getCache().getType().getLatentRank()},
        op.getType().getElementType());
    auto attention = DecodeAttentionOp::create(
        rewriter, loc, latentType, /*lse=*/Type(), op.getQ(), op.getCache(),
        op.getBlockTable(), op.getSeqLens(), op.getKvScale(), op.getWUk(),
        /*q_scale=*/Value(), op.getSoftmaxScaleAttr());
    rewriter.replaceOpWithNewOp<VUpOp>(op, op.getType(), attention.getOut(),
                                       op.getWUv());
    ++count;
    return success();
  }

  llvm::Statistic &count;
};

struct ExtractPrefill : OpRewritePattern<AttentionOp> {
  ExtractPrefill(MLIRContext *ctx, llvm::Statistic &count)
      : OpRewritePattern(ctx), count(count) {}

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getMode() != AttentionMode::prefill)
      return rewriter.notifyMatchFailure(op, "not a prefill attention");
    auto kvType = cast<RankedTensorType>(op.getKvC().getType());
    Type elementType = kvType.getElementType();
    if (!elementType.isBF16() && !elementType.isF16() && !elementType.isF32())
      return rewriter.notifyMatchFailure(
          op, "new tokens must be float to be decompressed");
    Location loc = op.getLoc();
    KVCacheUpdateOp::create(rewriter, loc, op.getKvC(), op.getKPe(),
                            op.getSlotMapping(), op.getCache(),
                            updateScale(op));
    auto qType = cast<RankedTensorType>(op.getQ().getType());
    int64_t tokens = qType.getDimSize(0), heads = qType.getDimSize(1);
    auto kType =
        RankedTensorType::get({tokens, heads, qType.getDimSize(2)}, elementType);
    auto vType = RankedTensorType::get(
        {tokens, heads, op.getType().getDimSize(2)}, elementType);
    auto kv = DecompressKVOp::create(rewriter, loc, kType, vType, op.getKvC(),
                                     op.getKPe(), op.getWUk(), op.getWUv());
    rewriter.replaceOpWithNewOp<PrefillAttentionOp>(
        op, op.getType(), /*lse=*/Type(), op.getQ(), kv.getK(), kv.getV(),
        op.getQueryStartLoc(), op.getCache(), op.getBlockTable(),
        op.getSeqLens(), op.getWUk(), op.getWUv(), op.getKvScale(),
        op.getSoftmaxScaleAttr());
    ++count;
    return success();
  }

  llvm::Statistic &count;
};

struct MLAExtractKVUpdatePass
    : mla::impl::MLAExtractKVUpdateBase<MLAExtractKVUpdatePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ExtractDecode>(&getContext(), numDecodeExtracted);
    patterns.add<ExtractPrefill>(&getContext(), numPrefillExtracted);
    // Only the matched ops change: no folding of unrelated IR.
    GreedyRewriteConfig config;
    config.enableFolding(false);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config)))
      signalPassFailure();
  }
};

} // namespace
