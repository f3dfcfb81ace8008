//===- NaiveReference.h - Float64 non-absorbed DeepSeek attention step ----===//
//
// An independent reference for a decode step that mla-gen generated: it
// knows nothing of the compiler. Keys and values are decompressed with
// W_UK / W_UV (the MHA form the model was trained in, not the absorbed
// latent form the kernels use), everything is computed in double, and the
// cache is only read for the earlier context.
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
};

/// One layer's cache as it was before the step.
struct CacheSnapshot {
  mlart::KVCacheDesc desc;
  float scale = 1.0f;
  std::vector<uint8_t> bytes;
};

/// Everything the reference needs, by mla-gen's argument names.
struct NaiveStep {
  std::map<std::string, HostTensorView> tensors;
  std::vector<CacheSnapshot> caches; ///< layer order
  double softmaxScale = 1.0;
  double epsilon = 1e-6;
  mlart::RopeStyle style = mlart::RopeStyle::GptJ;
};

/// Runs layer `layer` of the step on `x` ([tokens, hidden], row-major), in
/// place: x += o_proj(attention(x)). The layer's new cache row comes from
/// `x`, earlier rows from the layer's cache snapshot.
mlart::Status naiveDecodeLayer(const NaiveStep &step, size_t layer,
                               std::vector<double> &x);

/// How `naiveDecodeStep` carries the residual stream between layers.
enum class Residual {
  Exact,        ///< double throughout
  RoundedToBF16 ///< rounded to bf16 after every layer, as a bf16 model stores
                ///< it: the gap to Exact is the floor any bf16 step has
};

/// All layers from hidden_states: the step's output (hidden_states_out,
/// row-major) in double.
mlart::StatusOr<std::vector<double>>
naiveDecodeStep(const NaiveStep &step, Residual residual = Residual::Exact);

} // namespace mlarun

#endif // MLA_RUN_NAIVEREFERENCE_H
