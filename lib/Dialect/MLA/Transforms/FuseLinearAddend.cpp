//===- FuseLinearAddend.cpp - Fold a residual add into mla.linear ---------===//
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::mla {
#define GEN_PASS_DEF_MLAFUSELINEARADDEND
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mlir::mla

using namespace mlir;
using namespace mlir::mla;

namespace {

/// `arith.addf(mla.linear(x, w), r)` or `arith.addf(r, mla.linear(x, w))`
/// -> `mla.linear x, w addend(r)`, built at the add: x and w dominate the
/// linear, which precedes the add in its block, and r dominates the add.
struct FoldAddIntoLinear : OpRewritePattern<arith::AddFOp> {
  FoldAddIntoLinear(MLIRContext *ctx, llvm::Statistic &numFused)
      : OpRewritePattern(ctx), numFused(numFused) {}

  /// The linear behind `product` if the add may take it over.
  static LinearOp fusable(Value product, arith::AddFOp add) {
    auto linear = product.getDefiningOp<LinearOp>();
    if (!linear || linear.getAddend() || !linear->hasOneUse() ||
        linear->getBlock() != add->getBlock())
      return nullptr;
    return linear;
  }

  LogicalResult matchAndRewrite(arith::AddFOp add,
                                PatternRewriter &rewriter) const override {
    if (!isa<RankedTensorType>(add.getType()))
      return rewriter.notifyMatchFailure(add, "not a tensor addition");
    Value addend = add.getRhs();
    LinearOp linear = fusable(add.getLhs(), add);
    if (!linear) {
      addend = add.getLhs();
      linear = fusable(add.getRhs(), add);
    }
    if (!linear)
      return rewriter.notifyMatchFailure(
          add, "no operand is a single-use, addend-free linear of this block");
    // addf's operands and result share one type, so the addend has the
    // linear's result type, as the fused op's verifier demands.
    auto fused = LinearOp::create(rewriter, linear.getLoc(), add.getType(),
                                  linear.getInput(), linear.getWeight(),
                                  addend);
    rewriter.replaceOp(add, fused.getResult());
    rewriter.eraseOp(linear);
    ++numFused;
    return success();
  }

  llvm::Statistic &numFused;
};

struct MLAFuseLinearAddendPass
    : mla::impl::MLAFuseLinearAddendBase<MLAFuseLinearAddendPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldAddIntoLinear>(&getContext(), numFused);
    GreedyRewriteConfig config;
    config.enableFolding(false);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config)))
      signalPassFailure();
  }
};

} // namespace
