//===- NaiveCheck.h - Compare a step's outputs with the naive reference ---===//
//
// How far a compiled step (decode or prefill) is from the float64
// non-absorbed reference, measured on what the layers add to the residual
// stream (the stream itself would dominate the norm and hide attention
// errors):
//
//   ||out - ref|| / ||ref - in||
//
// End to end, differences compound through the layers: a bf16 residual
// stream alone moves a deep random-weight stack by about 1e-2. When the
// artifact also returns every layer's attention and residual outputs
// (mla-gen --layer-outputs), the reference also runs each layer on the
// compiled step's own input to it and compares what the layer adds (the
// o_proj output): the compiler's error layer by layer, without that
// compounding.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_RUN_NAIVECHECK_H
#define MLA_RUN_NAIVECHECK_H

#include "NaiveReference.h"

#include <map>
#include <string>
#include <vector>

namespace mlarun {

struct NaiveCheck {
  /// hidden_states_out against the reference run from hidden_states.
  double endToEnd = 0.0;
  /// The reference with its residual rounded to bf16 between layers against
  /// the exact one: no bf16 step can be expected much closer than this end
  /// to end. 0 for one layer.
  double bf16Floor = 0.0;
  /// Whether the outputs held every layer's result.
  bool perLayer = false;
  /// The worst layer, each run from the compiled step's input to it.
  double perLayerMax = 0.0;
  int64_t worstLayer = -1;

  /// The figure a tolerance applies to: per layer when available.
  double gated() const { return perLayer ? perLayerMax : endToEnd; }
};

/// `outputs` maps output names (hidden_states_out and, optionally,
/// model.layers.N.self_attn.o_proj_out / model.layers.N.hidden_states_out)
/// to their values. `cacheRows`, when given, receives the rows each layer
/// should have written into its cache, from the input the layer was checked
/// on: the compiled step's own input to it when the outputs hold every
/// layer's result, else the reference's exact stream.
mlart::StatusOr<NaiveCheck>
checkAgainstNaive(const NaiveStep &step,
                  const std::map<std::string, std::vector<float>> &outputs,
                  std::vector<NaiveCacheRows> *cacheRows = nullptr);

} // namespace mlarun

#endif // MLA_RUN_NAIVECHECK_H
