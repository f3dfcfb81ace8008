//===- LiftQPrep.cpp - Make the decode query preparation explicit ops -----===//
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::mla {
#define GEN_PASS_DEF_MLALIFTQPREP
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mlir::mla

using namespace mlir;
using namespace mlir::mla;

namespace {

/// The nope width N of the head query: static from `w_uk` or from
/// `q = N + P` when either is known, otherwise `tensor.dim %w_uk, 1`.
OpFoldResult nopeWidth(PatternRewriter &rewriter, Location loc, Value q,
                       Value wUk, int64_t rope) {
  int64_t fromWeight = cast<ShapedType>(wUk.getType()).getDimSize(1);
  if (!ShapedType::isDynamic(fromWeight))
    return rewriter.getIndexAttr(fromWeight);
  int64_t width = cast<ShapedType>(q.getType()).getDimSize(2);
  if (!ShapedType::isDynamic(width))
    return rewriter.getIndexAttr(width - rope);
  return tensor::getMixedSize(rewriter, loc, wUk, 1);
}

/// If `q` is `tensor.concat dim(2) %nope, %pe` with `%pe` exactly `rope`
/// wide, returns the two parts.
std::optional<std::pair<Value, Value>> splitConcat(Value q, int64_t rope) {
  auto concat = q.getDefiningOp<tensor::ConcatOp>();
  if (!concat || concat.getDim() != 2 || concat.getInputs().size() != 2)
    return std::nullopt;
  Value nope = concat.getInputs()[0], pe = concat.getInputs()[1];
  if (cast<ShapedType>(pe.getType()).getDimSize(2) != rope)
    return std::nullopt;
  return std::make_pair(nope, pe);
}

/// decode_attention(q, absorb(w_uk), q_scale?) becomes
///   quantize?(q_concat(q_absorb(q[..., :N], w_uk), q[..., N:]))
/// feeding a latent-form decode_attention.
struct LiftQPrep : OpRewritePattern<DecodeAttentionOp> {
  LiftQPrep(MLIRContext *ctx, llvm::Statistic &count)
      : OpRewritePattern(ctx), count(count) {}

  LogicalResult matchAndRewrite(DecodeAttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.isAbsorbing())
      return rewriter.notifyMatchFailure(op, "query is already latent");
    Value q = op.getQ(), wUk = op.getWUk();
    auto qType = cast<RankedTensorType>(q.getType());
    Type elementType = qType.getElementType();
    // mla.q_absorb multiplies float queries only.
    if (!elementType.isBF16() && !elementType.isF16() && !elementType.isF32())
      return rewriter.notifyMatchFailure(op, "head query is not bf16/f16/f32");

    Location loc = op.getLoc();
    KVCacheType cache = op.getCache().getType();
    int64_t rope = cache.getRopeDim(), latent = cache.getLatentRank();
    OpFoldResult zero = rewriter.getIndexAttr(0),
                 one = rewriter.getIndexAttr(1);
    OpFoldResult batch = tensor::getMixedSize(rewriter, loc, q, 0);
    OpFoldResult heads = tensor::getMixedSize(rewriter, loc, q, 1);
    OpFoldResult nope = nopeWidth(rewriter, loc, q, wUk, rope);
    SmallVector<OpFoldResult> strides(3, one);

    Value qNope, qPe;
    if (std::optional<std::pair<Value, Value>> parts = splitConcat(q, rope)) {
      // Models assemble q as concat(q_nope, rope(q_pe)): use the parts, so
      // the q rope feeds q_concat directly and can fuse with the k rope.
      std::tie(qNope, qPe) = *parts;
    } else {
      qNope = tensor::ExtractSliceOp::create(
          rewriter, loc, q, {zero, zero, zero}, {batch, heads, nope}, strides);
      qPe = tensor::ExtractSliceOp::create(
          rewriter, loc, q, {zero, zero, nope},
          {batch, heads, rewriter.getIndexAttr(rope)}, strides);
    }

    int64_t b = qType.getDimSize(0), h = qType.getDimSize(1);
    auto latentType = RankedTensorType::get({b, h, latent}, elementType);
    auto queryType = RankedTensorType::get({b, h, latent + rope}, elementType);
    Value query = QAbsorbOp::create(rewriter, loc, latentType, qNope, wUk);
    query = QConcatOp::create(rewriter, loc, queryType, query, qPe);
    if (Value qScale = op.getQScale())
      query = QuantizeOp::create(
          rewriter, loc, queryType.clone(rewriter.getType<Float8E4M3FNType>()),
          query, qScale);

    Value lse = op.getLse();
    auto latentForm = DecodeAttentionOp::create(
        rewriter, loc, op.getOut().getType(), lse ? lse.getType() : Type(),
        query, op.getCache(), op.getBlockTable(), op.getSeqLens(),
        op.getKvScale(), /*w_uk=*/Value(), /*q_scale=*/Value(),
        op.getSoftmaxScaleAttr());
    latentForm->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    rewriter.replaceOp(op, latentForm->getResults());
    ++count;
    return success();
  }

  llvm::Statistic &count;
};

struct MLALiftQPrepPass : mla::impl::MLALiftQPrepBase<MLALiftQPrepPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<LiftQPrep>(&getContext(), numLifted);
    // One rewrite per op; unlike the greedy driver this neither folds nor
    // erases unrelated dead ops.
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace
