//===- StepBuilder.cpp - The IR of one DeepSeek MLA step ------------------===//
//
// One layer, as the hand-written examples/deepseek-v2-lite-decode-layer.mlir:
//
//   h      = rms_norm(x)
//   q      = q_proj(h)  |  q_b_proj(rms_norm(q_a_proj(h)))      [T, H*(N+P)]
//   q      = concat(q[..., :N], rope(q[..., N:]))                [T, H, N+P]
//   kv     = kv_a_proj_with_mqa(h)                               [T, L+P]
//   out    = mla.attention(q, rms_norm(kv[:, :L]), rope(kv[:, L:]), cache)
//   x'     = o_proj(collapse(out)) + x
//
//===----------------------------------------------------------------------===//
#include "mla/ModelGen/ModelGen.h"

#include "mla/Dialect/MLA/IR/MLAAttrs.h"
#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::mla;
using namespace mlir::mla::gen;

std::string names::layerPrefix(int64_t layer) {
  return llvm::formatv("model.layers.{0}", layer);
}

std::string names::layerWeight(int64_t layer, llvm::StringRef module) {
  return llvm::formatv("model.layers.{0}.{1}", layer, module);
}

std::string names::kvCache(int64_t layer) {
  return llvm::formatv("model.layers.{0}.kv_cache", layer);
}

std::string names::kvScale(int64_t layer) {
  return llvm::formatv("model.layers.{0}.kv_scale", layer);
}

std::string names::layerOutput(int64_t layer) {
  return llvm::formatv("model.layers.{0}.hidden_states_out", layer);
}

std::string names::layerAttentionOutput(int64_t layer) {
  return llvm::formatv("model.layers.{0}.self_attn.o_proj_out", layer);
}

namespace {

/// The function signature, collected before the function exists so that
/// every argument carries its name from the start.
class Signature {
public:
  explicit Signature(MLIRContext *ctx) : ctx(ctx) {}

  /// Adds an argument and returns its index.
  unsigned add(Type type, llvm::StringRef name, bool noAlias = false) {
    types.push_back(type);
    NamedAttrList attrs;
    attrs.append(MLADialect::getNameAttrName(), StringAttr::get(ctx, name));
    if (noAlias)
      attrs.append(MLADialect::getNoAliasAttrName(), UnitAttr::get(ctx));
    argAttrs.push_back(attrs.getDictionary(ctx));
    return types.size() - 1;
  }

  /// Adds `attr` to argument `index`'s attributes.
  void addAttr(unsigned index, llvm::StringRef name, Attribute attr) {
    NamedAttrList attrs(argAttrs[index]);
    attrs.set(name, attr);
    argAttrs[index] = attrs.getDictionary(ctx);
  }

  SmallVector<Type> types;
  SmallVector<DictionaryAttr> argAttrs;

private:
  MLIRContext *ctx;
};

/// Argument indices of one layer's cache and weights.
struct LayerArgs {
  unsigned cache;
  std::optional<unsigned> kvScale;
  unsigned inputNorm;
  std::optional<unsigned> qProj;  // without q LoRA
  std::optional<unsigned> qAProj; // with q LoRA
  std::optional<unsigned> qANorm; // with q LoRA
  std::optional<unsigned> qBProj; // with q LoRA
  unsigned kvAProj;
  unsigned kvANorm;
  unsigned wUk;
  unsigned wUv;
  unsigned oProj;
};

/// Argument indices of the step data shared by every layer.
struct StepArgs {
  unsigned hiddenStates;
  unsigned positions;
  unsigned slotMapping;
  unsigned blockTable;
  unsigned seqLens;
  std::optional<unsigned> queryStartLoc;
  unsigned cosSin;
};

class StepBuilder {
public:
  StepBuilder(OpBuilder &builder, const ModelConfig &config,
              const StepOptions &options)
      : b(builder), ctx(builder.getContext()), config(config), options(options),
        sig(ctx) {
    act = options.dtype == DType::BF16 ? Type(b.getBF16Type())
                                       : Type(b.getF32Type());
    tokens = options.numTokens();
    heads = config.numHeads;
    nope = config.qkNopeHeadDim;
    rope = config.qkRopeHeadDim;
    latent = config.kvLoraRank;
  }

  func::FuncOp build(Location loc);

private:
  RankedTensorType tensor(ArrayRef<int64_t> shape) const {
    return RankedTensorType::get(shape, act);
  }
  RankedTensorType tensor(ArrayRef<int64_t> shape, Type element) const {
    return RankedTensorType::get(shape, element);
  }

  KVCacheType cacheType() const;
  /// How the cos/sin table argument is computed (plain or YaRN rope).
  RopeTableAttr ropeTableAttr() const;
  void declareStepArgs();
  LayerArgs declareLayerArgs(int64_t layer);

  Value rmsNorm(Location loc, Value input, Value weight);
  Value linear(Location loc, Value input, Value weight, int64_t outFeatures);
  Value slice(Location loc, Value source, ArrayRef<int64_t> offsets,
              ArrayRef<int64_t> sizes);
  /// Returns the residual output; `attentionOut` gets what the layer adds.
  Value buildLayer(Location loc, Value x, const LayerArgs &layer,
                   Value &attentionOut);

  Value arg(unsigned index) const { return entry->getArgument(index); }

  OpBuilder &b;
  MLIRContext *ctx;
  const ModelConfig &config;
  const StepOptions &options;
  Signature sig;
  StepArgs step{};
  Block *entry = nullptr;

  Type act;
  int64_t tokens, heads, nope, rope, latent;
};

KVCacheType StepBuilder::cacheType() const {
  Type element = act;
  CacheLayout layout = CacheLayout::plain;
  if (isPerTensorFp8(options.cacheDType)) {
    element = options.cacheDType == CacheDType::FP8E5M2
                  ? Type(Float8E5M2Type::get(ctx))
                  : Type(Float8E4M3FNType::get(ctx));
    layout = CacheLayout::per_tensor;
  }
  return KVCacheType::get(ShapedType::kDynamic, options.blockSize, element,
                          layout, latent, rope);
}

void StepBuilder::declareStepArgs() {
  Type i64 = b.getI64Type(), i32 = b.getI32Type();
  int64_t requests = options.numRequests();
  step.hiddenStates =
      sig.add(tensor({tokens, config.hiddenSize}), names::kHiddenStates);
  step.positions = sig.add(tensor({tokens}, i64), names::kPositions);
  step.slotMapping = sig.add(tensor({tokens}, i64), names::kSlotMapping);
  step.blockTable = sig.add(tensor({requests, options.maxBlocksPerSeq}, i32),
                            names::kBlockTable);
  step.seqLens = sig.add(tensor({requests}, i32), names::kSeqLens);
  if (options.phase == Phase::Prefill)
    step.queryStartLoc =
        sig.add(tensor({requests + 1}, i32), names::kQueryStartLoc);
  // The table is f32 whatever the activations: cos/sin of large positions
  // lose too much in bf16.
  step.cosSin = sig.add(tensor({options.maxPosition, rope}, b.getF32Type()),
                        names::kCosSinCache);
  sig.addAttr(step.cosSin, MLADialect::getRopeTableAttrName(), ropeTableAttr());
}

RopeTableAttr StepBuilder::ropeTableAttr() const {
  using llvm::APFloat;
  const std::optional<RopeScaling> &yarn = config.ropeScaling;
  // YaRN by a factor of 1 is plain rope: both frequency sets coincide and
  // both mscales are 1.
  if (!yarn || yarn->factor == 1.0)
    return RopeTableAttr::get(
        ctx, APFloat(config.ropeTheta), /*factor=*/APFloat(1.0),
        /*original_max_position=*/0, /*beta_fast=*/APFloat(32.0),
        /*beta_slow=*/APFloat(1.0), /*mscale=*/APFloat(1.0),
        /*mscale_all_dim=*/APFloat(0.0));
  return RopeTableAttr::get(ctx, APFloat(config.ropeTheta),
                            APFloat(yarn->factor), yarn->originalMaxPosition,
                            APFloat(yarn->betaFast), APFloat(yarn->betaSlow),
                            APFloat(yarn->mscale), APFloat(yarn->mscaleAllDim));
}

LayerArgs StepBuilder::declareLayerArgs(int64_t layer) {
  auto weight = [&](ArrayRef<int64_t> shape, llvm::StringRef module) {
    return sig.add(tensor(shape), names::layerWeight(layer, module));
  };
  int64_t hidden = config.hiddenSize, qOut = heads * config.qkHeadDim();
  LayerArgs a{};
  a.cache = sig.add(cacheType(), names::kvCache(layer), /*noAlias=*/true);
  if (isPerTensorFp8(options.cacheDType))
    a.kvScale = sig.add(tensor({}, b.getF32Type()), names::kvScale(layer));
  a.inputNorm = weight({hidden}, "input_layernorm.weight");
  if (config.qLoraRank) {
    int64_t rank = *config.qLoraRank;
    a.qAProj = weight({rank, hidden}, "self_attn.q_a_proj.weight");
    a.qANorm = weight({rank}, "self_attn.q_a_layernorm.weight");
    a.qBProj = weight({qOut, rank}, "self_attn.q_b_proj.weight");
  } else {
    a.qProj = weight({qOut, hidden}, "self_attn.q_proj.weight");
  }
  a.kvAProj =
      weight({latent + rope, hidden}, "self_attn.kv_a_proj_with_mqa.weight");
  a.kvANorm = weight({latent}, "self_attn.kv_a_layernorm.weight");
  // kv_b_proj split per head into its key (W_UK) and value (W_UV) halves.
  a.wUk = weight({heads, nope, latent}, "self_attn.w_uk");
  a.wUv = weight({heads, latent, config.vHeadDim}, "self_attn.w_uv");
  a.oProj =
      weight({hidden, heads * config.vHeadDim}, "self_attn.o_proj.weight");
  return a;
}

Value StepBuilder::rmsNorm(Location loc, Value input, Value weight) {
  return RmsNormOp::create(b, loc, input, weight,
                           b.getF32FloatAttr(config.rmsNormEps));
}

Value StepBuilder::linear(Location loc, Value input, Value weight,
                          int64_t outFeatures) {
  int64_t rows = cast<RankedTensorType>(input.getType()).getDimSize(0);
  return LinearOp::create(b, loc, tensor({rows, outFeatures}), input, weight);
}

Value StepBuilder::slice(Location loc, Value source, ArrayRef<int64_t> offsets,
                         ArrayRef<int64_t> sizes) {
  SmallVector<int64_t> strides(offsets.size(), 1);
  return tensor::ExtractSliceOp::create(
      b, loc, tensor(sizes), source, getAsIndexOpFoldResult(ctx, offsets),
      getAsIndexOpFoldResult(ctx, sizes), getAsIndexOpFoldResult(ctx, strides));
}

Value StepBuilder::buildLayer(Location loc, Value x, const LayerArgs &layer,
                              Value &attentionOut) {
  int64_t qkDim = config.qkHeadDim(), vDim = config.vHeadDim;
  Value positions = arg(step.positions), cosSin = arg(step.cosSin);
  auto gptj = RopeStyleAttr::get(ctx, RopeStyle::gptj);

  Value h = rmsNorm(loc, x, arg(layer.inputNorm));

  // Query: project (directly or through the LoRA bottleneck), split into
  // nope and rope parts, rotate the rope part, put it back.
  Value qFlat;
  if (config.qLoraRank) {
    Value qA = linear(loc, h, arg(*layer.qAProj), *config.qLoraRank);
    Value qANorm = rmsNorm(loc, qA, arg(*layer.qANorm));
    qFlat = linear(loc, qANorm, arg(*layer.qBProj), heads * qkDim);
  } else {
    qFlat = linear(loc, h, arg(*layer.qProj), heads * qkDim);
  }
  SmallVector<ReassociationIndices> splitHeads = {{0}, {1, 2}};
  Value q = tensor::ExpandShapeOp::create(
      b, loc, tensor({tokens, heads, qkDim}), qFlat, splitHeads);
  Value qNope = slice(loc, q, {0, 0, 0}, {tokens, heads, nope});
  Value qPe = slice(loc, q, {0, 0, nope}, {tokens, heads, rope});
  Value qPeRot = RopeOp::create(b, loc, gptj, qPe, positions, cosSin);
  Value qRot =
      tensor::ConcatOp::create(b, loc, /*dim=*/2, ValueRange{qNope, qPeRot});

  // Latent KV: one projection gives kv_c and k_pe; normalise the latent,
  // rotate k_pe.
  Value kv = linear(loc, h, arg(layer.kvAProj), latent + rope);
  Value kvC = slice(loc, kv, {0, 0}, {tokens, latent});
  Value kPe = slice(loc, kv, {0, latent}, {tokens, rope});
  Value kvCNorm = rmsNorm(loc, kvC, arg(layer.kvANorm));
  Value kPeRot = RopeOp::create(b, loc, gptj, kPe, positions, cosSin);

  // The monolithic form: the op writes this step's rows and attends.
  bool decode = options.phase == Phase::Decode;
  Value attention = AttentionOp::create(
      b, loc, tensor({tokens, heads, vDim}),
      decode ? AttentionMode::decode : AttentionMode::prefill, qRot, kvCNorm,
      kPeRot, arg(step.slotMapping), arg(layer.cache), arg(step.blockTable),
      arg(step.seqLens), arg(layer.wUk), arg(layer.wUv),
      step.queryStartLoc ? arg(*step.queryStartLoc) : Value(),
      layer.kvScale ? arg(*layer.kvScale) : Value(),
      llvm::APFloat(static_cast<float>(config.softmaxScale())));

  Value attnFlat =
      tensor::CollapseShapeOp::create(b, loc, attention, splitHeads);
  Value out = linear(loc, attnFlat, arg(layer.oProj), config.hiddenSize);
  attentionOut = out;
  return arith::AddFOp::create(b, loc, out, x);
}

func::FuncOp StepBuilder::build(Location loc) {
  int64_t numLayers =
      options.numLayers > 0 ? options.numLayers : config.numLayers;
  declareStepArgs();
  SmallVector<LayerArgs> layers;
  for (int64_t i = 0; i < numLayers; ++i)
    layers.push_back(declareLayerArgs(i));

  RankedTensorType resultType = tensor({tokens, config.hiddenSize});
  // The step's output first, then (optionally) every layer's attention
  // output and every residual output but the last (that is the step's).
  SmallVector<std::string> resultNames = {names::kHiddenStatesOut.str()};
  if (options.layerOutputs)
    for (int64_t i = 0; i < numLayers; ++i) {
      resultNames.push_back(names::layerAttentionOutput(i));
      if (i + 1 < numLayers)
        resultNames.push_back(names::layerOutput(i));
    }
  SmallVector<Type> resultTypes(resultNames.size(), resultType);
  std::string name = options.funcName;
  if (name.empty())
    name = options.phase == Phase::Decode ? "decode_step" : "prefill_step";
  auto func = func::FuncOp::create(
      b, loc, name, FunctionType::get(ctx, sig.types, resultTypes));
  func.setAllArgAttrs(sig.argAttrs);
  for (auto [i, resultName] : llvm::enumerate(resultNames))
    func.setResultAttr(i, MLADialect::getNameAttrName(),
                       StringAttr::get(ctx, resultName));
  if (options.dummyRun)
    func->setAttr(MLADialect::getDummyRunAttrName(), UnitAttr::get(ctx));

  OpBuilder::InsertionGuard guard(b);
  entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  Value x = arg(step.hiddenStates);
  SmallVector<Value> results = {Value()};
  for (auto [i, layer] : llvm::enumerate(layers)) {
    Value attentionOut;
    x = buildLayer(
        NameLoc::get(StringAttr::get(ctx, names::layerPrefix(i)), loc), x,
        layer, attentionOut);
    if (options.layerOutputs) {
      results.push_back(attentionOut);
      if (i + 1 < layers.size())
        results.push_back(x);
    }
  }
  results.front() = x;
  func::ReturnOp::create(b, loc, results);
  return func;
}

} // namespace

func::FuncOp mlir::mla::gen::buildStep(OpBuilder &builder, Location loc,
                                       const ModelConfig &config,
                                       const StepOptions &options) {
  return StepBuilder(builder, config, options).build(loc);
}

llvm::Expected<OwningOpRef<ModuleOp>>
mlir::mla::gen::buildStepModule(MLIRContext &context, const ModelConfig &config,
                                const StepOptions &options) {
  if (llvm::Error err = config.validate())
    return std::move(err);
  if (llvm::Error err = options.validate(config))
    return std::move(err);
  context.loadDialect<MLADialect, arith::ArithDialect, func::FuncDialect,
                      tensor::TensorDialect>();
  Location loc = NameLoc::get(StringAttr::get(&context, config.name));
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder builder = OpBuilder::atBlockEnd(module->getBody());
  buildStep(builder, loc, config, options);
  if (failed(verify(*module)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the generated step does not verify");
  return std::move(module);
}
