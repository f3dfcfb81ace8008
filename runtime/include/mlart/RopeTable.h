//===- RopeTable.h - The rotary cos/sin table a model expects -------------===//
//
// The rope kernels read a caller-provided `[max_position, rope]` f32 table
// (vLLM's cos_sin_cache). These functions compute the table a DeepSeek model
// expects: plain rope, or YaRN-scaled rope as Hugging Face's
// DeepseekV2YarnRotaryEmbedding computes it. An artifact records the
// parameters of each table argument it has (Artifact::ropeTables), so a
// runner that is not given the table can fill the right one.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_ROPETABLE_H
#define MLART_ROPETABLE_H

#include "mlart/StatusOr.h"

#include <cstdint>
#include <vector>

namespace mlart {

/// How a cos/sin table is computed (the compiler's `#mla.rope_table`;
/// the YaRN fields are those of DeepSeek's `rope_scaling`).
struct RopeTableParams {
  /// `rope_theta`, the rotary base.
  double theta = 10000.0;
  /// YaRN's scaling factor; 1 is plain rope and the YaRN fields are unused.
  double factor = 1.0;
  /// `original_max_position_embeddings`: the context YaRN extends.
  int64_t originalMaxPosition = 0;
  double betaFast = 32.0;
  double betaSlow = 1.0;
  double mscale = 1.0;
  double mscaleAllDim = 0.0;

  bool isYarn() const { return factor != 1.0; }
};

/// Checks the parameters: theta > 1; factor >= 1; for YaRN also
/// originalMaxPosition > 0 and betaFast > betaSlow > 0; all finite.
Status validateRopeTableParams(const RopeTableParams &params);

/// The table for positions [0, maxPos): row p holds m·cos(p·f_i) for
/// i < rope/2, then m·sin(p·f_i). Plain rope: f_i = theta^(-2i/rope), m = 1.
/// YaRN: f_i = e_i·(1 - r_i) + (e_i / factor)·r_i with e_i the plain
/// frequency and r_i DeepSeek's linear ramp between the correction dims of
/// betaFast and betaSlow; m = mscale(factor, mscale) /
/// mscale(factor, mscaleAllDim) with mscale(s, x) = 0.1·x·ln(s) + 1.
/// Computed in double, stored as f32. InvalidArgument for bad params, an
/// odd or non-positive rope dim, or a negative or too large maxPos.
StatusOr<std::vector<float>> ropeCosSinTable(int64_t maxPos, int64_t rope,
                                             const RopeTableParams &params);

/// Plain rope with inverse frequencies base^(-2i/rope); the arguments must
/// be valid (a positive even rope dim, maxPos >= 0).
std::vector<float> ropeCosSinTable(int64_t maxPos, int64_t rope,
                                   double base = 10000.0);

} // namespace mlart

#endif // MLART_ROPETABLE_H
