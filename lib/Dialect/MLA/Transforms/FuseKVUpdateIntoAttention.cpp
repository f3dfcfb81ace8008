//===- FuseKVUpdateIntoAttention.cpp - Update + decode attention in one ---===//
#include "mla/Dialect/MLA/Analysis/CacheAccess.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/ADT/StringSwitch.h"

#include <optional>

namespace mlir::mla {
#define GEN_PASS_DEF_MLAFUSEKVUPDATEINTOATTENTION
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mlir::mla

using namespace mlir;
using namespace mlir::mla;

namespace {

/// Whether the runtime's decode attention for `target` can write the step's
/// rows itself (opcode decode_attention_with_update); std::nullopt for a
/// target this pass does not know. A target without that kernel says false
/// and the pass leaves its updates alone.
std::optional<bool> attentionWritesCache(StringRef target) {
  return llvm::StringSwitch<std::optional<bool>>(target)
      .Case("cuda-sm90", true)
      .Case("cpu", true)
      .Default(std::nullopt);
}

/// Longest sequence (block-table width x page) up to which the CUDA one
/// launch beats cacheUpdate + decode (mla-bench's "decode+update" rows,
/// docs/results/h100.md).
constexpr int64_t kCudaFoldMaxContext = 4160;

/// Why folding the update into `attention` does not pay on `target`, or
/// std::nullopt where it does. The CPU kernel is one pass either way. On
/// CUDA only the 16-head decode stores the rows in its own launch (H not
/// a multiple of 64, a plain cache); elsewhere the runtime runs the
/// update's launch first, and past kCudaFoldMaxContext the substitution's
/// per-tile test costs more than the saved launch.
std::optional<StringRef> foldDoesNotPay(StringRef target,
                                        DecodeAttentionOp attention) {
  if (target != "cuda-sm90")
    return std::nullopt;
  auto q = cast<ShapedType>(attention.getQ().getType());
  auto table = cast<ShapedType>(attention.getBlockTable().getType());
  auto cache = cast<KVCacheType>(attention.getCache().getType());
  if (!q.hasStaticShape() || q.getDimSize(1) % 64 == 0)
    return StringRef("the many-heads decode stores no rows itself");
  if (cache.isFp8())
    return StringRef("an fp8 cache's rows are stored by their own launch");
  if (ShapedType::isDynamic(table.getDimSize(1)) ||
      table.getDimSize(1) * cache.getBlockSize() > kCudaFoldMaxContext)
    return StringRef("sequences longer than the measured break-even");
  return std::nullopt;
}

/// The first latent-form decode attention after `update` in its block that
/// reads the same cache value, or null.
DecodeAttentionOp findAttention(KVCacheUpdateOp update) {
  for (Operation *op = update->getNextNode(); op; op = op->getNextNode())
    if (auto attention = dyn_cast<DecodeAttentionOp>(op))
      if (attention.getCache() == update.getCache())
        return attention;
  return {};
}

struct FoldUpdateIntoAttention : OpRewritePattern<KVCacheUpdateOp> {
  FoldUpdateIntoAttention(MLIRContext *ctx, llvm::Statistic &numFused,
                          StringRef target, bool costModel)
      : OpRewritePattern(ctx), numFused(numFused), target(target.str()),
        costModel(costModel) {}

  LogicalResult matchAndRewrite(KVCacheUpdateOp update,
                                PatternRewriter &rewriter) const override {
    Value cache = update.getCache();
    // Only the same block: then the update's operands, which dominate the
    // update, also dominate the attention's position below it.
    DecodeAttentionOp attention = findAttention(update);
    if (!attention)
      return rewriter.notifyMatchFailure(
          update, "no decode attention of this cache later in the block");
    // The write moves down to the attention: nothing in between may read or
    // write this cache or one that may alias it. This also makes the
    // attention the update's first reader.
    Operation *conflict = nullptr;
    if (hasConflictBetween(update, attention, cache,
                           getCacheAccess(update, cache), &conflict))
      return rewriter.notifyMatchFailure(conflict,
                                         "may access the cache in between");
    if (attention.isAbsorbing() || attention.getQScale())
      return rewriter.notifyMatchFailure(
          attention, "not the latent form (absorb or q_scale)");
    // The fused op has one scale to quantise what it writes and to read; a
    // quantising update must use the attention's.
    if (Value writeScale = update.getScale())
      if (writeScale != attention.getKvScale())
        return rewriter.notifyMatchFailure(
            update, "write and read use different scale values");
    if (costModel)
      if (std::optional<StringRef> why = foldDoesNotPay(target, attention))
        return rewriter.notifyMatchFailure(attention, *why);

    rewriter.setInsertionPoint(attention);
    auto fused = DecodeAttentionWithUpdateOp::create(
        rewriter, attention.getLoc(), attention.getOut().getType(),
        attention.getLse() ? attention.getLse().getType() : Type(),
        attention.getQ(), update.getKvC(), update.getKPe(),
        update.getSlotMapping(), cache, attention.getBlockTable(),
        attention.getSeqLens(), attention.getKvScale(),
        attention.getSoftmaxScaleAttr());
    rewriter.replaceOp(attention, fused->getResults());
    rewriter.eraseOp(update);
    ++numFused;
    return success();
  }

  llvm::Statistic &numFused;
  std::string target;
  bool costModel;
};

struct MLAFuseKVUpdateIntoAttentionPass
    : mla::impl::MLAFuseKVUpdateIntoAttentionBase<
          MLAFuseKVUpdateIntoAttentionPass> {
  using Base::Base;

  void runOnOperation() override {
    std::optional<bool> fuses = attentionWritesCache(target);
    if (!fuses) {
      getOperation()->emitError()
          << "mla-fuse-kv-update-into-attention: unknown target '" << target
          << "' (expected 'cpu' or 'cuda-sm90')";
      return signalPassFailure();
    }
    if (!*fuses)
      return markAllAnalysesPreserved();

    RewritePatternSet patterns(&getContext());
    patterns.add<FoldUpdateIntoAttention>(&getContext(), numFused, target,
                                          costModel);
    GreedyRewriteConfig config;
    config.enableFolding(false);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config)))
      signalPassFailure();
  }
};

} // namespace
