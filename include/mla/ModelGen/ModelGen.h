//===- ModelGen.h - Build DeepSeek MLA model steps with C++ builders ------===//
//
// The C++ builder frontend: from a model configuration (a built-in preset or
// a Hugging Face `config.json`) and step options, build one `func.func` that
// runs the attention half of N DeepSeek layers for one decode or prefill
// step, in the monolithic `mla.attention` form that serving engines use.
// `mla-gen` is a thin command-line wrapper around it; embedders call it
// directly.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_MODELGEN_MODELGEN_H
#define MLA_MODELGEN_MODELGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir {
class Location;
class MLIRContext;
class OpBuilder;
namespace func {
class FuncOp;
} // namespace func

namespace mla {
namespace gen {

/// YaRN rope scaling as DeepSeek configures it (`rope_scaling` of type
/// `yarn`, Hugging Face's `DeepseekV2YarnRotaryEmbedding`; the defaults are
/// its defaults). `mscaleAllDim` changes the attention graph (the softmax
/// scale); the rest changes the cos/sin table, which the step records as
/// `#mla.rope_table` on its `cos_sin_cache` argument.
struct RopeScaling {
  double factor = 1.0;
  double mscaleAllDim = 0.0;
  int64_t originalMaxPosition = 4096;
  double betaFast = 32.0;
  double betaSlow = 1.0;
  double mscale = 1.0;
};

/// The attention-relevant part of a DeepSeek-V2/V3 model configuration, in
/// Hugging Face `config.json` terms.
struct ModelConfig {
  std::string name;
  int64_t hiddenSize = 0;
  int64_t numHeads = 0;
  /// Absent when the model projects q directly (`q_lora_rank: null`).
  std::optional<int64_t> qLoraRank;
  int64_t kvLoraRank = 0;
  int64_t qkNopeHeadDim = 0;
  int64_t qkRopeHeadDim = 0;
  int64_t vHeadDim = 0;
  int64_t numLayers = 0;
  double rmsNormEps = 1e-6;
  /// `rope_theta`, the rotary base.
  double ropeTheta = 10000.0;
  std::optional<RopeScaling> ropeScaling;

  /// Head dim of q and k: nope + rope.
  int64_t qkHeadDim() const { return qkNopeHeadDim + qkRopeHeadDim; }
  /// (nope + rope)^-0.5, times mscale^2 under YaRN scaling with
  /// mscale = 0.1 * mscale_all_dim * ln(factor) + 1 (DeepSeek's
  /// `yarn_get_mscale`; 1 when factor <= 1 or mscale_all_dim is 0).
  double softmaxScale() const;
  /// Checks that every dimension is positive and the rope dim is even.
  llvm::Error validate() const;
};

/// The names of the built-in presets, in a stable order.
llvm::ArrayRef<llvm::StringRef> getPresetNames();
/// A built-in preset (`deepseek-v2-lite`, `deepseek-v3`), or nothing.
std::optional<ModelConfig> lookupPreset(llvm::StringRef name);
/// Parses a Hugging Face style `config.json` text. Missing or ill-typed
/// fields are errors that name the field; `source` prefixes the messages.
llvm::Expected<ModelConfig> parseModelConfig(llvm::StringRef json,
                                             llvm::StringRef source);
/// Reads and parses a `config.json` file.
llvm::Expected<ModelConfig> loadModelConfig(llvm::StringRef path);

enum class Phase { Decode, Prefill };
/// Element type of activations and weights.
enum class DType { BF16, F32 };
/// Element encoding of the KV caches: `Auto` stores activations unconverted
/// (a plain cache of the activation type); `FP8` (f8E4M3FN) and `FP8E5M2`
/// are `per_tensor` caches with one `tensor<f32>` scale argument per layer
/// (vLLM's kv_cache_dtype "fp8" / "fp8_e4m3" and "fp8_e5m2").
enum class CacheDType { Auto, BF16, F32, FP8, FP8E5M2 };

/// Whether caches of `dtype` are per-tensor fp8 (a scale argument a layer).
inline bool isPerTensorFp8(CacheDType dtype) {
  return dtype == CacheDType::FP8 || dtype == CacheDType::FP8E5M2;
}

/// What one generated step looks like. Shapes are static: the step is
/// specialised for its batch (decode) or token and request count (prefill).
struct StepOptions {
  Phase phase = Phase::Decode;
  /// Layers to emit; 0 means every layer of the model.
  int64_t numLayers = 0;
  /// Decode: requests, one token each.
  int64_t batch = 1;
  /// Prefill: packed new tokens and the requests they belong to.
  int64_t tokens = 0;
  int64_t requests = 1;
  int64_t blockSize = 64;
  int64_t maxBlocksPerSeq = 64;
  /// Rows of the cos/sin table.
  int64_t maxPosition = 8192;
  DType dtype = DType::BF16;
  CacheDType cacheDType = CacheDType::Auto;
  /// Mark the function `mla.dummy_run` (warm-up / profile run).
  bool dummyRun = false;
  /// Also return each layer's attention output
  /// (`model.layers.N.self_attn.o_proj_out`, what it adds to the residual)
  /// and residual output but the last (`model.layers.N.hidden_states_out`),
  /// so a runner can compare the layers one by one.
  bool layerOutputs = false;
  /// Function name; empty picks `decode_step` or `prefill_step`.
  std::string funcName;

  /// Tokens of the step: `batch` in decode, `tokens` in prefill.
  int64_t numTokens() const { return phase == Phase::Decode ? batch : tokens; }
  /// Requests of the step: `batch` in decode, `requests` in prefill.
  int64_t numRequests() const {
    return phase == Phase::Decode ? batch : requests;
  }
  /// Checks the options against the model (layer count, positive sizes,
  /// at least one token a request, cache type vs. activation type).
  llvm::Error validate(const ModelConfig &config) const;
};

/// Names of the step's arguments and result (`mla.name`), Hugging Face
/// style so that a runtime can bind checkpoint tensors by name.
namespace names {
std::string layerPrefix(int64_t layer);
std::string layerWeight(int64_t layer, llvm::StringRef module);
std::string kvCache(int64_t layer);
std::string kvScale(int64_t layer);
/// Layer `layer`'s residual output (with `StepOptions::layerOutputs`).
std::string layerOutput(int64_t layer);
/// Layer `layer`'s o_proj output (with `StepOptions::layerOutputs`).
std::string layerAttentionOutput(int64_t layer);
inline constexpr llvm::StringLiteral kHiddenStates = "hidden_states";
inline constexpr llvm::StringLiteral kPositions = "positions";
inline constexpr llvm::StringLiteral kSlotMapping = "slot_mapping";
inline constexpr llvm::StringLiteral kBlockTable = "block_table";
inline constexpr llvm::StringLiteral kSeqLens = "seq_lens";
inline constexpr llvm::StringLiteral kQueryStartLoc = "query_start_loc";
inline constexpr llvm::StringLiteral kCosSinCache = "cos_sin_cache";
inline constexpr llvm::StringLiteral kHiddenStatesOut = "hidden_states_out";
} // namespace names

/// Builds the step function at the builder's insertion point. The options
/// must have passed `validate`; the mla, func, tensor and arith dialects
/// must be loaded.
func::FuncOp buildStep(OpBuilder &builder, Location loc,
                       const ModelConfig &config, const StepOptions &options);

/// Validates config and options, builds a module holding the step and
/// verifies it. Loads the dialects it needs into `context`.
llvm::Expected<OwningOpRef<ModuleOp>>
buildStepModule(MLIRContext &context, const ModelConfig &config,
                const StepOptions &options);

} // namespace gen
} // namespace mla
} // namespace mlir

#endif // MLA_MODELGEN_MODELGEN_H
