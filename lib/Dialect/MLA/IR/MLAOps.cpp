//===- MLAOps.cpp - Verifiers of the mla ops ------------------------------===//
//
// ODS checks ranks and element types; these verifiers check how the shapes of
// an op's operands relate (dynamic sizes are accepted against anything) and
// what the cache layout demands of the op.
//
//===----------------------------------------------------------------------===//
#include "mla/Dialect/MLA/IR/MLAOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::mla;

namespace {

/// Checks one dimension of a ranked tensor value against an expected size;
/// either side may be dynamic.
class ShapeChecker {
public:
  explicit ShapeChecker(Operation *op) : op(op) {}

  LogicalResult dim(Value v, StringRef name, unsigned axis, int64_t expected,
                    StringRef what) {
    int64_t actual = cast<ShapedType>(v.getType()).getDimSize(axis);
    if (ShapedType::isDynamic(actual) || ShapedType::isDynamic(expected) ||
        actual == expected)
      return success();
    return op->emitOpError() << "expected dimension " << axis << " of '"
                             << name << "' (" << what << ") to be "
                             << expected << ", got " << actual;
  }

  static int64_t size(Value v, unsigned axis) {
    return cast<ShapedType>(v.getType()).getDimSize(axis);
  }

  /// A known size from whichever of the two is static.
  static int64_t either(int64_t a, int64_t b) {
    return ShapedType::isDynamic(a) ? b : a;
  }

  static int64_t sum(int64_t a, int64_t b) {
    return ShapedType::isDynamic(a) || ShapedType::isDynamic(b)
               ? ShapedType::kDynamic
               : a + b;
  }

private:
  Operation *op;
};

Type elementTypeOf(Value v) {
  return cast<ShapedType>(v.getType()).getElementType();
}

/// Checks the operands of every op that writes rows into a cache.
LogicalResult verifyCacheWrite(Operation *op, Value kvC, Value kPe,
                               Value slotMapping, KVCacheType cache,
                               Value scale) {
  ShapeChecker check(op);
  if (cast<ShapedType>(kPe.getType()).getRank() != 2)
    return op->emitOpError() << "expected 'k_pe' to have rank 2 ([T, P]), got "
                             << kPe.getType();
  if (failed(check.dim(kvC, "kv_c", 1, cache.getLatentRank(),
                       "the cache's latent rank")) ||
      failed(check.dim(kPe, "k_pe", 1, cache.getRopeDim(),
                       "the cache's rope dim")) ||
      failed(check.dim(kPe, "k_pe", 0, ShapeChecker::size(kvC, 0),
                       "tokens of 'kv_c'")))
    return failure();
  int64_t tokens = ShapeChecker::either(ShapeChecker::size(kvC, 0),
                                        ShapeChecker::size(kPe, 0));
  int64_t slots = ShapeChecker::size(slotMapping, 0);
  if (!ShapedType::isDynamic(tokens) && !ShapedType::isDynamic(slots) &&
      slots > tokens)
    return op->emitOpError() << "slot mapping has " << slots
                             << " entries but only " << tokens
                             << " tokens are given (it may be shorter, never "
                                "longer)";
  Type inType = elementTypeOf(kvC);
  if (inType != elementTypeOf(kPe))
    return op->emitOpError() << "expected 'kv_c' and 'k_pe' to share an "
                                "element type, got "
                             << inType << " and " << elementTypeOf(kPe);
  bool inputIsFp8 = isFp8Type(inType);
  switch (cache.getLayout()) {
  case CacheLayout::plain:
    if (inType != cache.getElementType())
      return op->emitOpError()
             << "writes " << inType << " values into a cache of "
             << cache.getElementType() << " (a plain cache stores its inputs "
             << "unconverted)";
    if (scale)
      return op->emitOpError() << "has a 'scale' but the cache is not a "
                                  "per-tensor fp8 cache";
    break;
  case CacheLayout::per_tensor:
    if (inputIsFp8 && scale)
      return op->emitOpError() << "takes already-quantised fp8 inputs, so it "
                                  "must not have a 'scale'";
    if (inputIsFp8 && inType != cache.getElementType())
      return op->emitOpError()
             << "stores already-quantised " << inType
             << " values as they are into a cache of " << cache.getElementType()
             << "; the encodings must match";
    if (!inputIsFp8 && !scale)
      return op->emitOpError() << "quantises " << inType
                               << " inputs into a per-tensor fp8 cache and "
                                  "needs a 'scale'";
    break;
  case CacheLayout::fp8_ds_mla:
    if (inputIsFp8)
      return op->emitOpError() << "an 'fp8_ds_mla' cache computes its own tile "
                                  "scales and needs float inputs, got "
                               << inType;
    if (scale)
      return op->emitOpError() << "an 'fp8_ds_mla' cache takes no 'scale'";
    break;
  }
  return success();
}

/// The runtime scale operand of a reader must be present exactly for
/// per-tensor fp8 caches.
LogicalResult verifyReaderScale(Operation *op, KVCacheType cache,
                                Value kvScale) {
  if (cache.needsScaleOperand() && !kvScale)
    return op->emitOpError() << "reads a per-tensor fp8 cache and needs a "
                                "'kv_scale'";
  if (!cache.needsScaleOperand() && kvScale)
    return op->emitOpError() << "has a 'kv_scale' but the cache is not a "
                                "per-tensor fp8 cache";
  return success();
}

LogicalResult verifySoftmaxScale(Operation *op, FloatAttr scale) {
  double v = scale.getValueAsDouble();
  if (!(v > 0.0) || std::isinf(v))
    return op->emitOpError() << "expected a positive finite softmax_scale, got "
                             << v;
  return success();
}

/// Checks block table [B, M] and seq_lens [B] against `requests`.
LogicalResult verifyPaging(Operation *op, Value blockTable, Value seqLens,
                           int64_t requests, StringRef requestsWhat) {
  ShapeChecker check(op);
  if (failed(check.dim(blockTable, "block_table", 0, requests, requestsWhat)) ||
      failed(check.dim(seqLens, "seq_lens", 0, requests, requestsWhat)))
    return failure();
  return success();
}

/// Checks the outputs [B, H, D] and lse [B, H] of an attention op.
LogicalResult verifyAttentionResults(Operation *op, Value out, Value lse,
                                     int64_t rows, int64_t heads,
                                     int64_t width, StringRef widthWhat) {
  ShapeChecker check(op);
  if (cast<ShapedType>(out.getType()).getRank() != 3)
    return op->emitOpError() << "expected 'out' to have rank 3, got "
                             << out.getType();
  if (failed(check.dim(out, "out", 0, rows, "rows of the query")) ||
      failed(check.dim(out, "out", 1, heads, "heads of the query")) ||
      failed(check.dim(out, "out", 2, width, widthWhat)))
    return failure();
  if (!lse)
    return success();
  if (cast<ShapedType>(lse.getType()).getRank() != 2)
    return op->emitOpError() << "expected 'lse' to have rank 2 ([rows, H]), "
                                "got "
                             << lse.getType();
  if (failed(check.dim(lse, "lse", 0, rows, "rows of the query")) ||
      failed(check.dim(lse, "lse", 1, heads, "heads of the query")))
    return failure();
  return success();
}

/// Checks W_UK [H, N, L] and W_UV [H, L, V] against heads and the cache.
LogicalResult verifyWeights(Operation *op, Value wUk, Value wUv,
                            int64_t heads, int64_t latent) {
  ShapeChecker check(op);
  if (wUk && (failed(check.dim(wUk, "w_uk", 0, heads, "heads")) ||
              failed(check.dim(wUk, "w_uk", 2, latent, "the latent rank"))))
    return failure();
  if (wUv && (failed(check.dim(wUv, "w_uv", 0, heads, "heads")) ||
              failed(check.dim(wUv, "w_uv", 1, latent, "the latent rank"))))
    return failure();
  return success();
}

/// For ops that both write and read the cache, `kv_scale` quantises float
/// inputs and dequantises what is read; already-quantised inputs use it only
/// to read.
Value writeScaleOf(Value kvC, Value kvScale) {
  return isFp8Type(elementTypeOf(kvC)) ? Value() : kvScale;
}

} // namespace

//===----------------------------------------------------------------------===//
// Pure tensor ops
//===----------------------------------------------------------------------===//

LogicalResult RopeOp::verify() {
  auto type = cast<RankedTensorType>(getInput().getType());
  if (type.getRank() < 2)
    return emitOpError() << "expected an input of rank >= 2 ([T, ..., P]), "
                            "got "
                         << type;
  int64_t rope = type.getDimSize(type.getRank() - 1);
  if (!ShapedType::isDynamic(rope) && rope % 2 != 0)
    return emitOpError() << "expected an even rotary dimension, got " << rope;
  ShapeChecker check(*this);
  if (failed(check.dim(getPositions(), "positions", 0, type.getDimSize(0),
                       "tokens of the input")) ||
      failed(check.dim(getCosSin(), "cos_sin", 1, rope, "the rotary dim")))
    return failure();
  return success();
}

/// The per-head batched matmul shared by q_absorb and v_up:
/// result[B, H, Y] = input[B, H, X] @ weight[H, X, Y]. The names make each
/// op's diagnostics speak its own operands.
struct PerHeadMatmulNames {
  const char *input, *weight, *shapes, *inputDim, *weightDim;
};
static LogicalResult verifyPerHeadMatmul(Operation *op, Value in, Value w,
                                         Value r,
                                         const PerHeadMatmulNames &names) {
  ShapeChecker check(op);
  if (cast<ShapedType>(in.getType()).getRank() != 3 ||
      cast<ShapedType>(r.getType()).getRank() != 3)
    return op->emitOpError() << "expected '" << names.input
                             << "' and the result to have rank 3 ("
                             << names.shapes << ")";
  if (failed(check.dim(w, names.weight, 0, ShapeChecker::size(in, 1),
                       "heads")) ||
      failed(check.dim(w, names.weight, 1, ShapeChecker::size(in, 2),
                       names.inputDim)) ||
      failed(check.dim(r, "result", 0, ShapeChecker::size(in, 0), "batch")) ||
      failed(check.dim(r, "result", 1, ShapeChecker::size(in, 1), "heads")) ||
      failed(check.dim(r, "result", 2, ShapeChecker::size(w, 2),
                       names.weightDim)))
    return failure();
  return success();
}

LogicalResult QAbsorbOp::verify() {
  return verifyPerHeadMatmul(
      *this, getQNope(), getWUk(), getResult(),
      {"q_nope", "w_uk", "[B, H, N] and [B, H, L]",
       "the nope dim of 'q_nope'", "the latent rank of 'w_uk'"});
}

LogicalResult QConcatOp::verify() {
  ShapeChecker check(*this);
  Value a = getQLatent(), b = getQPe(), r = getResult();
  for (Value v : {a, b, r})
    if (cast<ShapedType>(v.getType()).getRank() != 3)
      return emitOpError() << "expected operands and result of rank 3, got "
                           << v.getType();
  if (elementTypeOf(a) != elementTypeOf(b) || elementTypeOf(a) != elementTypeOf(r))
    return emitOpError() << "expected one element type, got "
                         << elementTypeOf(a) << ", " << elementTypeOf(b)
                         << " and " << elementTypeOf(r);
  for (unsigned axis = 0; axis < 2; ++axis)
    if (failed(check.dim(b, "q_pe", axis, ShapeChecker::size(a, axis),
                         "as in 'q_latent'")) ||
        failed(check.dim(r, "result", axis, ShapeChecker::size(a, axis),
                         "as in 'q_latent'")))
      return failure();
  return check.dim(r, "result", 2,
                   ShapeChecker::sum(ShapeChecker::size(a, 2),
                                     ShapeChecker::size(b, 2)),
                   "latent + rope");
}

LogicalResult QuantizeOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getResult().getType());
  if (failed(verifyCompatibleShape(in.getShape(), out.getShape())))
    return emitOpError() << "expected the result to have the input's shape, "
                            "got "
                         << in << " and " << out;
  return success();
}

LogicalResult VUpOp::verify() {
  return verifyPerHeadMatmul(
      *this, getOLatent(), getWUv(), getResult(),
      {"o_latent", "w_uv", "[B, H, L] and [B, H, V]",
       "the latent rank of 'o_latent'", "the value dim of 'w_uv'"});
}

LogicalResult DecompressKVOp::verify() {
  ShapeChecker check(*this);
  Value c = getKvC(), p = getKPe(), wk = getWUk(), wv = getWUv();
  for (Value v : {c, p})
    if (cast<ShapedType>(v.getType()).getRank() != 2)
      return emitOpError() << "expected 'kv_c' and 'k_pe' of rank 2, got "
                           << v.getType();
  for (Value v : {getK(), getV()})
    if (cast<ShapedType>(v.getType()).getRank() != 3)
      return emitOpError() << "expected results of rank 3, got "
                           << v.getType();
  int64_t tokens = ShapeChecker::size(c, 0);
  int64_t heads = ShapeChecker::size(wk, 0);
  if (failed(check.dim(p, "k_pe", 0, tokens, "tokens")) ||
      failed(verifyWeights(*this, wk, wv, heads, ShapeChecker::size(c, 1))) ||
      failed(check.dim(getK(), "k", 0, tokens, "tokens")) ||
      failed(check.dim(getK(), "k", 1, heads, "heads")) ||
      failed(check.dim(getK(), "k", 2,
                       ShapeChecker::sum(ShapeChecker::size(wk, 1),
                                         ShapeChecker::size(p, 1)),
                       "nope + rope")) ||
      failed(check.dim(getV(), "v", 0, tokens, "tokens")) ||
      failed(check.dim(getV(), "v", 1, heads, "heads")) ||
      failed(check.dim(getV(), "v", 2, ShapeChecker::size(wv, 2),
                       "the value dim of 'w_uv'")))
    return failure();
  return success();
}

LogicalResult LinearOp::verify() {
  ShapeChecker check(*this);
  Value x = getInput(), w = getWeight(), r = getResult();
  if (failed(check.dim(w, "weight", 1, ShapeChecker::size(x, 1),
                       "input features of 'input'")) ||
      failed(check.dim(r, "result", 0, ShapeChecker::size(x, 0), "tokens")) ||
      failed(check.dim(r, "result", 1, ShapeChecker::size(w, 0),
                       "output features of 'weight'")))
    return failure();
  // The addend is added in the epilogue before the one rounding to the
  // result type, so it must be exactly a result-shaped value.
  if (Value addend = getAddend()) {
    if (elementTypeOf(addend) != elementTypeOf(r))
      return emitOpError() << "expected 'addend' to have the result's element "
                              "type "
                           << elementTypeOf(r) << ", got "
                           << elementTypeOf(addend);
    if (failed(check.dim(addend, "addend", 0, ShapeChecker::size(r, 0),
                         "tokens of the result")) ||
        failed(check.dim(addend, "addend", 1, ShapeChecker::size(r, 1),
                         "output features of the result")))
      return failure();
  }
  return success();
}

LogicalResult RmsNormOp::verify() {
  ShapeChecker check(*this);
  if (failed(check.dim(getWeight(), "weight", 0,
                       ShapeChecker::size(getInput(), 1), "features")))
    return failure();
  if (!(getEpsilon().convertToDouble() > 0.0))
    return emitOpError() << "expected a positive epsilon";
  return success();
}

//===----------------------------------------------------------------------===//
// Cache writers
//===----------------------------------------------------------------------===//

LogicalResult KVCacheUpdateOp::verify() {
  return verifyCacheWrite(*this, getKvC(), getKPe(), getSlotMapping(),
                          getCache().getType(), getScale());
}

/// The optional latent RMSNorm of the fused update (see the op description).
static LogicalResult verifyLatentNorm(RopeKVCacheUpdateOp op,
                                      KVCacheType cache) {
  ShapeChecker check(op);
  Value weight = op.getLatentNormWeight();
  std::optional<APFloat> epsilon = op.getLatentNormEpsilon();
  if (static_cast<bool>(weight) != epsilon.has_value())
    return op.emitOpError() << "expected a latent norm weight and epsilon "
                               "together";
  if (!weight)
    return success();
  if (failed(check.dim(weight, "latent_norm weight", 0, cache.getLatentRank(),
                       "the cache's latent rank")))
    return failure();
  if (!(epsilon->convertToDouble() > 0.0))
    return op.emitOpError() << "expected a positive latent norm epsilon";
  return success();
}

LogicalResult RopeKVCacheUpdateOp::verify() {
  KVCacheType cache = getCache().getType();
  if (failed(verifyCacheWrite(*this, getKvC(), getKPe(), getSlotMapping(),
                              cache, getScale())))
    return failure();
  ShapeChecker check(*this);
  int64_t tokens = ShapeChecker::size(getKPe(), 0);
  if (failed(check.dim(getPositions(), "positions", 0, tokens, "tokens")) ||
      failed(check.dim(getCosSin(), "cos_sin", 1, cache.getRopeDim(),
                       "the cache's rope dim")))
    return failure();
  if (static_cast<bool>(getQPe()) != static_cast<bool>(getQPeOut()))
    return emitOpError() << "returns a rotated 'q_pe' exactly when it is "
                            "given one";
  if (Value qPe = getQPe()) {
    auto qType = cast<RankedTensorType>(qPe.getType());
    if (qType.getRank() != 3)
      return emitOpError() << "expected 'q_pe' of rank 3 ([T, Hq, P]), got "
                           << qType;
    if (failed(check.dim(qPe, "q_pe", 0, tokens, "tokens")) ||
        failed(check.dim(qPe, "q_pe", 2, cache.getRopeDim(),
                         "the cache's rope dim")))
      return failure();
    if (getQPeOut().getType() != qType)
      return emitOpError() << "expected the rotated q_pe to have type "
                           << qType << ", got " << getQPeOut().getType();
  }
  if (Value kOut = getKPeOut())
    if (kOut.getType() != getKPe().getType())
      return emitOpError() << "expected the rotated k_pe to have type "
                           << getKPe().getType() << ", got " << kOut.getType();
  return verifyLatentNorm(*this, cache);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

LogicalResult DecodeAttentionOp::verify() {
  KVCacheType cache = getCache().getType();
  ShapeChecker check(*this);
  Value q = getQ();
  int64_t batch = ShapeChecker::size(q, 0), heads = ShapeChecker::size(q, 1);
  int64_t queryWidth = cache.getRowValues();
  StringRef widthWhat = "latent + rope of the cache";
  if (Value wUk = getWUk()) {
    if (failed(verifyWeights(*this, wUk, Value(), heads,
                             cache.getLatentRank())))
      return failure();
    queryWidth = ShapeChecker::sum(ShapeChecker::size(wUk, 1),
                                   cache.getRopeDim());
    widthWhat = "nope dim of 'w_uk' + rope of the cache";
  }
  if (failed(check.dim(q, "q", 2, queryWidth, widthWhat)) ||
      failed(verifyPaging(*this, getBlockTable(), getSeqLens(), batch,
                          "batch of 'q'")) ||
      failed(verifyReaderScale(*this, cache, getKvScale())) ||
      failed(verifySoftmaxScale(*this, getSoftmaxScaleAttr())))
    return failure();
  return verifyAttentionResults(*this, getOut(), getLse(), batch, heads,
                                cache.getLatentRank(),
                                "the cache's latent rank");
}

LogicalResult PrefillAttentionOp::verify() {
  ShapeChecker check(*this);
  Value q = getQ(), k = getK(), v = getV();
  int64_t tokens = ShapeChecker::size(q, 0), heads = ShapeChecker::size(q, 1);
  if (failed(check.dim(k, "k", 0, tokens, "tokens of 'q'")) ||
      failed(check.dim(k, "k", 1, heads, "heads of 'q'")) ||
      failed(check.dim(k, "k", 2, ShapeChecker::size(q, 2),
                       "the head dim of 'q'")) ||
      failed(check.dim(v, "v", 0, tokens, "tokens of 'q'")) ||
      failed(check.dim(v, "v", 1, heads, "heads of 'q'")) ||
      failed(verifySoftmaxScale(*this, getSoftmaxScaleAttr())))
    return failure();
  int64_t requests = ShapeChecker::size(getQueryStartLoc(), 0);
  if (!ShapedType::isDynamic(requests)) {
    if (requests < 1)
      return emitOpError() << "expected 'query_start_loc' to hold R + 1 >= 1 "
                              "offsets";
    --requests;
  }
  bool hasCache = static_cast<bool>(getCache());
  Value ctx[] = {getBlockTable(), getSeqLens(), getWUk(), getWUv()};
  for (Value c : ctx)
    if (static_cast<bool>(c) != hasCache)
      return emitOpError() << "expected the context operands (cache, "
                              "block_table, seq_lens, w_uk, w_uv) all present "
                              "or all absent";
  if (hasCache) {
    KVCacheType cache = cast<KVCacheType>(getCache().getType());
    if (failed(verifyPaging(*this, getBlockTable(), getSeqLens(), requests,
                            "requests of 'query_start_loc'")) ||
        failed(verifyWeights(*this, getWUk(), getWUv(), heads,
                             cache.getLatentRank())) ||
        failed(check.dim(q, "q", 2,
                         ShapeChecker::sum(ShapeChecker::size(getWUk(), 1),
                                           cache.getRopeDim()),
                         "nope dim of 'w_uk' + rope of the cache")) ||
        failed(check.dim(v, "v", 2, ShapeChecker::size(getWUv(), 2),
                         "the value dim of 'w_uv'")) ||
        failed(verifyReaderScale(*this, cache, getKvScale())))
      return failure();
  } else if (getKvScale()) {
    return emitOpError() << "has a 'kv_scale' but reads no cache";
  }
  return verifyAttentionResults(*this, getOut(), getLse(), tokens, heads,
                                ShapeChecker::size(v, 2), "the value dim");
}

LogicalResult DecodeAttentionWithUpdateOp::verify() {
  KVCacheType cache = getCache().getType();
  if (failed(verifyCacheWrite(*this, getKvC(), getKPe(), getSlotMapping(),
                              cache, writeScaleOf(getKvC(), getKvScale()))) ||
      failed(verifyReaderScale(*this, cache, getKvScale())))
    return failure();
  ShapeChecker check(*this);
  Value q = getQ();
  int64_t batch = ShapeChecker::size(q, 0), heads = ShapeChecker::size(q, 1);
  if (failed(check.dim(q, "q", 2, cache.getRowValues(),
                       "latent + rope of the cache")) ||
      failed(verifyPaging(*this, getBlockTable(), getSeqLens(), batch,
                          "batch of 'q'")) ||
      failed(verifySoftmaxScale(*this, getSoftmaxScaleAttr())))
    return failure();
  return verifyAttentionResults(*this, getOut(), getLse(), batch, heads,
                                cache.getLatentRank(),
                                "the cache's latent rank");
}

LogicalResult AttentionOp::verify() {
  KVCacheType cache = getCache().getType();
  if (failed(verifyCacheWrite(*this, getKvC(), getKPe(), getSlotMapping(),
                              cache, writeScaleOf(getKvC(), getKvScale()))) ||
      failed(verifyReaderScale(*this, cache, getKvScale())))
    return failure();
  ShapeChecker check(*this);
  Value q = getQ();
  int64_t tokens = ShapeChecker::size(q, 0), heads = ShapeChecker::size(q, 1);
  if (failed(check.dim(getKvC(), "kv_c", 0, tokens, "tokens of 'q'")) ||
      failed(verifyWeights(*this, getWUk(), getWUv(), heads,
                           cache.getLatentRank())) ||
      failed(check.dim(q, "q", 2,
                       ShapeChecker::sum(ShapeChecker::size(getWUk(), 1),
                                         cache.getRopeDim()),
                       "nope dim of 'w_uk' + rope of the cache")) ||
      failed(verifySoftmaxScale(*this, getSoftmaxScaleAttr())))
    return failure();
  int64_t requests = tokens;
  StringRef requestsWhat = "tokens of 'q' (one a request in decode)";
  if (getMode() == AttentionMode::decode) {
    if (getQueryStartLoc())
      return emitOpError() << "decode attention takes no 'query_start_loc' "
                              "(one token a request)";
  } else {
    if (!getQueryStartLoc())
      return emitOpError() << "prefill attention needs 'query_start_loc'";
    requests = ShapeChecker::size(getQueryStartLoc(), 0);
    if (!ShapedType::isDynamic(requests))
      --requests;
    requestsWhat = "requests of 'query_start_loc'";
  }
  if (failed(verifyPaging(*this, getBlockTable(), getSeqLens(), requests,
                          requestsWhat)))
    return failure();
  return verifyAttentionResults(*this, getOut(), Value(), tokens, heads,
                                ShapeChecker::size(getWUv(), 2),
                                "the value dim of 'w_uv'");
}

#define GET_OP_CLASSES
#include "mla/Dialect/MLA/IR/MLAOps.cpp.inc"
