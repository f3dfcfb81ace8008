//===- ModelConfig.cpp - DeepSeek presets, config.json, step options ------===//
#include "mla/ModelGen/ModelGen.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

using namespace mlir::mla::gen;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;

namespace {

Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The `rope_scaling` of DeepSeek-V2-Lite and V3's `config.json`: YaRN by 40
/// from 4096 positions, with `mscale == mscale_all_dim`.
RopeScaling deepSeekYarn(double mscale) {
  RopeScaling rope;
  rope.factor = 40.0;
  rope.originalMaxPosition = 4096;
  rope.betaFast = 32.0;
  rope.betaSlow = 1.0;
  rope.mscale = mscale;
  rope.mscaleAllDim = mscale;
  return rope;
}

/// DeepSeek-V2-Lite (HF `deepseek-ai/DeepSeek-V2-Lite`): q without LoRA.
ModelConfig deepSeekV2Lite() {
  ModelConfig c;
  c.name = "deepseek-v2-lite";
  c.hiddenSize = 2048;
  c.numHeads = 16;
  c.qLoraRank = std::nullopt;
  c.kvLoraRank = 512;
  c.qkNopeHeadDim = 128;
  c.qkRopeHeadDim = 64;
  c.vHeadDim = 128;
  c.numLayers = 27;
  c.rmsNormEps = 1e-6;
  c.ropeScaling = deepSeekYarn(/*mscale=*/0.707);
  return c;
}

/// DeepSeek-V3 (HF `deepseek-ai/DeepSeek-V3`): q through a LoRA bottleneck.
ModelConfig deepSeekV3() {
  ModelConfig c;
  c.name = "deepseek-v3";
  c.hiddenSize = 7168;
  c.numHeads = 128;
  c.qLoraRank = 1536;
  c.kvLoraRank = 512;
  c.qkNopeHeadDim = 128;
  c.qkRopeHeadDim = 64;
  c.vHeadDim = 128;
  c.numLayers = 61;
  c.rmsNormEps = 1e-6;
  c.ropeScaling = deepSeekYarn(/*mscale=*/1.0);
  return c;
}

/// Reads the fields of one JSON object, recording the first error with the
/// path of the offending field.
class FieldReader {
public:
  FieldReader(const llvm::json::Object &object, StringRef source,
              StringRef prefix = "")
      : object(object), source(source), prefix(prefix) {}

  int64_t positiveInt(StringRef key) {
    const llvm::json::Value *v = find(key);
    if (!v)
      return 0;
    std::optional<int64_t> i = v->getAsInteger();
    if (!i || *i <= 0)
      fail(key, "must be a positive integer");
    return i.value_or(0);
  }

  /// A positive integer or `null`.
  std::optional<int64_t> optionalPositiveInt(StringRef key) {
    const llvm::json::Value *v = find(key);
    if (!v || v->kind() == llvm::json::Value::Null)
      return std::nullopt;
    std::optional<int64_t> i = v->getAsInteger();
    if (!i || *i <= 0)
      fail(key, "must be a positive integer or null");
    return i;
  }

  double number(StringRef key, std::optional<double> defaultValue) {
    const llvm::json::Value *v = object.get(key);
    if (!v) {
      if (defaultValue)
        return *defaultValue;
      fail(key, "is missing");
      return 0.0;
    }
    std::optional<double> d = v->getAsNumber();
    if (!d || !std::isfinite(*d))
      fail(key, "must be a finite number");
    return d.value_or(0.0);
  }

  Error takeError() {
    return firstError.empty() ? Error::success() : makeError(firstError);
  }

private:
  const llvm::json::Value *find(StringRef key) {
    const llvm::json::Value *v = object.get(key);
    if (!v)
      fail(key, "is missing");
    return v;
  }

  void fail(StringRef key, StringRef what) {
    if (firstError.empty())
      firstError =
          llvm::formatv("{0}: field '{1}{2}' {3}", source, prefix, key, what);
  }

  const llvm::json::Object &object;
  StringRef source;
  StringRef prefix;
  std::string firstError;
};

} // namespace

double ModelConfig::softmaxScale() const {
  double scale = 1.0 / std::sqrt(static_cast<double>(qkHeadDim()));
  if (ropeScaling && ropeScaling->mscaleAllDim != 0.0 &&
      ropeScaling->factor > 1.0) {
    double mscale =
        0.1 * ropeScaling->mscaleAllDim * std::log(ropeScaling->factor) + 1.0;
    scale *= mscale * mscale;
  }
  return scale;
}

Error ModelConfig::validate() const {
  auto positive = [&](StringRef field, int64_t value) -> Error {
    if (value > 0)
      return Error::success();
    return makeError(llvm::formatv("model '{0}': {1} must be positive, got {2}",
                                   name, field, value));
  };
  for (auto [field, value] :
       {std::pair<StringRef, int64_t>{"hidden_size", hiddenSize},
        {"num_attention_heads", numHeads},
        {"kv_lora_rank", kvLoraRank},
        {"qk_nope_head_dim", qkNopeHeadDim},
        {"qk_rope_head_dim", qkRopeHeadDim},
        {"v_head_dim", vHeadDim},
        {"num_hidden_layers", numLayers}})
    if (Error err = positive(field, value))
      return err;
  if (qLoraRank)
    if (Error err = positive("q_lora_rank", *qLoraRank))
      return err;
  if (qkRopeHeadDim % 2 != 0)
    return makeError(llvm::formatv("model '{0}': qk_rope_head_dim must be even "
                                   "(rotated in pairs), got {1}",
                                   name, qkRopeHeadDim));
  if (!(rmsNormEps > 0.0))
    return makeError(
        llvm::formatv("model '{0}': rms_norm_eps must be positive, got {1}",
                      name, rmsNormEps));
  if (!(ropeTheta > 1.0))
    return makeError(
        llvm::formatv("model '{0}': rope_theta must be greater than 1, got {1}",
                      name, ropeTheta));
  if (!ropeScaling)
    return Error::success();
  if (!(ropeScaling->factor >= 1.0))
    return makeError(llvm::formatv(
        "model '{0}': rope_scaling.factor must be at least 1, got {1}", name,
        ropeScaling->factor));
  if (ropeScaling->originalMaxPosition <= 0)
    return makeError(llvm::formatv("model '{0}': rope_scaling."
                                   "original_max_position_embeddings must be "
                                   "positive, got {1}",
                                   name, ropeScaling->originalMaxPosition));
  if (!(ropeScaling->betaSlow > 0.0) ||
      !(ropeScaling->betaFast > ropeScaling->betaSlow))
    return makeError(llvm::formatv(
        "model '{0}': rope_scaling needs beta_fast > beta_slow > 0, got {1} "
        "and {2}",
        name, ropeScaling->betaFast, ropeScaling->betaSlow));
  return Error::success();
}

llvm::ArrayRef<StringRef> mlir::mla::gen::getPresetNames() {
  static constexpr StringRef kNames[] = {"deepseek-v2-lite", "deepseek-v3"};
  return kNames;
}

std::optional<ModelConfig> mlir::mla::gen::lookupPreset(StringRef name) {
  if (name == "deepseek-v2-lite")
    return deepSeekV2Lite();
  if (name == "deepseek-v3")
    return deepSeekV3();
  return std::nullopt;
}

Expected<ModelConfig> mlir::mla::gen::parseModelConfig(StringRef json,
                                                       StringRef source) {
  Expected<llvm::json::Value> root = llvm::json::parse(json);
  if (!root)
    return makeError(llvm::formatv("{0}: invalid JSON: {1}", source,
                                   llvm::toString(root.takeError())));
  const llvm::json::Object *object = root->getAsObject();
  if (!object)
    return makeError(llvm::formatv("{0}: expected a JSON object", source));

  ModelConfig config;
  config.name = source.str();
  FieldReader fields(*object, source);
  config.hiddenSize = fields.positiveInt("hidden_size");
  config.numHeads = fields.positiveInt("num_attention_heads");
  if (!object->get("q_lora_rank"))
    // HF's DeepseekV2Config defaults it to 1536, so absence is ambiguous.
    return makeError(llvm::formatv(
        "{0}: field 'q_lora_rank' is missing (use null for a model without "
        "q LoRA)",
        source));
  config.qLoraRank = fields.optionalPositiveInt("q_lora_rank");
  config.kvLoraRank = fields.positiveInt("kv_lora_rank");
  config.qkNopeHeadDim = fields.positiveInt("qk_nope_head_dim");
  config.qkRopeHeadDim = fields.positiveInt("qk_rope_head_dim");
  config.vHeadDim = fields.positiveInt("v_head_dim");
  config.numLayers = fields.positiveInt("num_hidden_layers");
  config.rmsNormEps = fields.number("rms_norm_eps", std::nullopt);
  // Hugging Face's DeepseekV2Config defaults rope_theta to 10000.
  config.ropeTheta = fields.number("rope_theta", 10000.0);
  if (Error err = fields.takeError())
    return std::move(err);

  const llvm::json::Value *scaling = object->get("rope_scaling");
  if (scaling && scaling->kind() != llvm::json::Value::Null) {
    const llvm::json::Object *scalingObject = scaling->getAsObject();
    if (!scalingObject)
      return makeError(llvm::formatv(
          "{0}: field 'rope_scaling' must be an object or null", source));
    FieldReader scalingFields(*scalingObject, source, "rope_scaling.");
    // Transformers spells the kind `type` in older configs, `rope_type` in
    // newer ones; only YaRN is modelled.
    for (StringRef kindKey : {"type", "rope_type"})
      if (const llvm::json::Value *kind = scalingObject->get(kindKey))
        if (kind->getAsString() != std::optional<StringRef>("yarn"))
          return makeError(llvm::formatv(
              "{0}: field 'rope_scaling.{1}' must be \"yarn\" (the only "
              "rope scaling DeepSeek's MLA uses)",
              source, kindKey));
    RopeScaling rope;
    rope.factor = scalingFields.number("factor", std::nullopt);
    // The remaining defaults are DeepseekV2YarnRotaryEmbedding's; DeepSeek's
    // attention reads `mscale_all_dim` with a default of 0.
    rope.mscaleAllDim = scalingFields.number("mscale_all_dim", 0.0);
    rope.mscale = scalingFields.number("mscale", 1.0);
    rope.betaFast = scalingFields.number("beta_fast", 32.0);
    rope.betaSlow = scalingFields.number("beta_slow", 1.0);
    double originalMax =
        scalingFields.number("original_max_position_embeddings", 4096.0);
    if (Error err = scalingFields.takeError())
      return std::move(err);
    if (originalMax != std::floor(originalMax) || originalMax < 1.0 ||
        originalMax > double(int64_t(1) << 40))
      return makeError(llvm::formatv(
          "{0}: field 'rope_scaling.original_max_position_embeddings' must "
          "be a positive integer",
          source));
    rope.originalMaxPosition = int64_t(originalMax);
    config.ropeScaling = rope;
  }
  if (Error err = config.validate())
    return std::move(err);
  return config;
}

Expected<ModelConfig> mlir::mla::gen::loadModelConfig(StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return makeError(llvm::formatv("cannot read model config '{0}': {1}", path,
                                   buffer.getError().message()));
  return parseModelConfig((*buffer)->getBuffer(), path);
}

Error StepOptions::validate(const ModelConfig &config) const {
  if (numLayers < 0 || numLayers > config.numLayers)
    return makeError(llvm::formatv(
        "layers must be between 1 and the model's {0} layers, got {1}",
        config.numLayers, numLayers));
  auto positive = [](StringRef what, int64_t value) -> Error {
    if (value > 0)
      return Error::success();
    return makeError(
        llvm::formatv("{0} must be positive, got {1}", what, value));
  };
  if (phase == Phase::Decode) {
    if (Error err = positive("batch", batch))
      return err;
  } else {
    if (Error err = positive("tokens", tokens))
      return err;
    if (Error err = positive("requests", requests))
      return err;
    if (requests > tokens)
      return makeError(llvm::formatv(
          "prefill needs at least one token a request: {0} requests, {1} "
          "tokens",
          requests, tokens));
  }
  for (auto [what, value] :
       {std::pair<StringRef, int64_t>{"block size", blockSize},
        {"max blocks per sequence", maxBlocksPerSeq},
        {"max position", maxPosition}})
    if (Error err = positive(what, value))
      return err;
  bool plainMismatch =
      (cacheDType == CacheDType::BF16 && dtype != DType::BF16) ||
      (cacheDType == CacheDType::F32 && dtype != DType::F32);
  if (plainMismatch)
    return makeError(
        llvm::formatv("a {0} cache stores activations unconverted and needs "
                      "{0} activations, got {1}",
                      cacheDType == CacheDType::BF16 ? "bf16" : "f32",
                      dtype == DType::BF16 ? "bf16" : "f32"));
  return Error::success();
}
