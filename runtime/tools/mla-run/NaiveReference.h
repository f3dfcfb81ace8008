//===- NaiveReference.h - Float64 non-absorbed DeepSeek attention step ----===//
//
// An independent reference for a decode or prefill step that mla-gen
// generated: it knows nothing of the compiler. Keys and values are
// decompressed with W_UK / W_UV (the MHA form the model was trained in, not
// the absorbed latent form the kernels use), everything is computed in
// double, and the cache is only read for each request's earlier context; the
// step's own tokens come from its inputs. Token i of a request's new tokens
// attends causally to the context and to new tokens 0..i, so a decode step
// is the case of one new token a request.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_RUN_NAIVEREFERENCE_H
#define MLA_RUN_NAIVEREFERENCE_H

#include "mlart/Kernels.h"
#include "mlart/StatusOr.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mlarun {

/// A host tensor by name, as mla-run filled it.
struct HostTensorView {
  mlart::DType dtype = mlart::DType::F32;
  std::vector<int64_t> sizes;
  const uint8_t *data = nullptr;

  double at(int64_t i) const {
    return double(mlart::loadAsFloat(data, dtype, size_t(i)));
  }
  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t s : sizes)
      n *= s;
    return n;
  }
};

/// One layer's cache as it was before the step.
struct CacheSnapshot {
  mlart::KVCacheDesc desc;
  float scale = 1.0f;
  std::vector<uint8_t> bytes;
};

/// Everything the reference needs, by mla-gen's argument names. A prefill
/// step has query_start_loc; a decode step has one token a request.
struct NaiveStep {
  std::map<std::string, HostTensorView> tensors;
  std::vector<CacheSnapshot> caches; ///< layer order
  double softmaxScale = 1.0;
  double epsilon = 1e-6;
  mlart::RopeStyle style = mlart::RopeStyle::GptJ;
};

/// The rows a layer writes into its cache for the step's tokens, as the
/// reference computes them for attention: the latent (kv_a's first
/// latent-rank columns through the kv RMSNorm), [tokens, latent], and the
/// rope key (kv_a's last rope columns, rotated at the token's position),
/// [tokens, rope]; row-major.
struct NaiveCacheRows {
  std::vector<double> latent, ropeKey;
};

/// Runs layer `layer` of the step on `x` ([tokens, hidden], row-major), in
/// place: x += o_proj(attention(x)). The step's new cache rows come from
/// `x`, earlier rows from the layer's cache snapshot; `rows`, when given,
/// receives the new rows.
mlart::Status runNaiveLayer(const NaiveStep &step, size_t layer,
                            std::vector<double> &x,
                            NaiveCacheRows *rows = nullptr);

/// How `runNaiveStep` carries the residual stream between layers.
enum class Residual {
  Exact,        ///< double throughout
  RoundedToBF16 ///< rounded to bf16 after every layer, as a bf16 model stores
                ///< it: the gap to Exact is the floor any bf16 step has
};

/// All layers from hidden_states: the step's output (hidden_states_out,
/// row-major) in double. `rows`, when given, receives every layer's new
/// cache rows (layer order).
mlart::StatusOr<std::vector<double>>
runNaiveStep(const NaiveStep &step, Residual residual = Residual::Exact,
             std::vector<NaiveCacheRows> *rows = nullptr);

} // namespace mlarun

#endif // MLA_RUN_NAIVEREFERENCE_H
