//===- RopeTable.cpp - Plain and YaRN rotary cos/sin tables ---------------===//
#include "mlart/RopeTable.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace mlart {

namespace {

constexpr double kPi = 3.14159265358979323846;
/// Bounds the table (and each product below) far under 2^63 bytes.
constexpr int64_t kMaxTableValues = int64_t(1) << 34;

/// DeepSeek's `yarn_get_mscale`.
double yarnMscale(double factor, double mscale) {
  return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

/// DeepSeek's `yarn_find_correction_dim`: the dim whose frequency turns
/// `rotations` times over `maxPosition` positions.
double correctionDim(double rotations, int64_t rope, double theta,
                     int64_t maxPosition) {
  return double(rope) *
         std::log(double(maxPosition) / (rotations * 2.0 * kPi)) /
         (2.0 * std::log(theta));
}

/// The inverse frequency of pair i and the table's amplitude.
struct Frequencies {
  std::vector<double> inverse;
  double amplitude = 1.0;
};

Frequencies frequencies(int64_t rope, const RopeTableParams &p) {
  const int64_t half = rope / 2;
  Frequencies f;
  f.inverse.resize(size_t(half));
  for (int64_t i = 0; i < half; ++i)
    f.inverse[size_t(i)] = std::pow(p.theta, -2.0 * double(i) / double(rope));
  if (!p.isYarn())
    return f;
  // yarn_find_correction_range, then the linear ramp over the pairs:
  // pairs below `low` keep their frequency (extrapolation), pairs above
  // `high` are divided by the factor (interpolation), a ramp in between.
  double low = std::floor(
      correctionDim(p.betaFast, rope, p.theta, p.originalMaxPosition));
  double high = std::ceil(
      correctionDim(p.betaSlow, rope, p.theta, p.originalMaxPosition));
  low = std::max(low, 0.0);
  high = std::min(high, double(rope - 1));
  if (low == high)
    high += 0.001;
  for (int64_t i = 0; i < half; ++i) {
    const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    const double extra = f.inverse[size_t(i)];
    f.inverse[size_t(i)] = extra / p.factor * ramp + extra * (1.0 - ramp);
  }
  f.amplitude =
      yarnMscale(p.factor, p.mscale) / yarnMscale(p.factor, p.mscaleAllDim);
  return f;
}

std::vector<float> fillTable(int64_t maxPos, int64_t rope,
                             const Frequencies &f) {
  const int64_t half = rope / 2;
  std::vector<float> table(size_t(maxPos * rope));
  for (int64_t p = 0; p < maxPos; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = double(p) * f.inverse[size_t(i)];
      table[size_t(p * rope + i)] = float(f.amplitude * std::cos(angle));
      table[size_t(p * rope + half + i)] = float(f.amplitude * std::sin(angle));
    }
  return table;
}

} // namespace

Status validateRopeTableParams(const RopeTableParams &p) {
  auto finite = [](double v) { return std::isfinite(v); };
  if (!finite(p.theta) || !(p.theta > 1.0))
    return invalidArgument("rope table: theta must be a finite number > 1, "
                           "got " +
                           std::to_string(p.theta));
  if (!finite(p.factor) || !(p.factor >= 1.0))
    return invalidArgument("rope table: factor must be a finite number >= "
                           "1, got " +
                           std::to_string(p.factor));
  if (!finite(p.mscale) || !finite(p.mscaleAllDim))
    return invalidArgument("rope table: mscale and mscale_all_dim must be "
                           "finite");
  if (!p.isYarn())
    return Status::success();
  if (p.originalMaxPosition <= 0)
    return invalidArgument("rope table: YaRN needs original_max_position > 0, "
                           "got " +
                           std::to_string(p.originalMaxPosition));
  if (!finite(p.betaFast) || !finite(p.betaSlow) || !(p.betaSlow > 0.0) ||
      !(p.betaFast > p.betaSlow))
    return invalidArgument("rope table: YaRN needs beta_fast > beta_slow > 0");
  // mscale(factor, mscale_all_dim) divides the table.
  if (!(std::abs(yarnMscale(p.factor, p.mscaleAllDim)) > 1e-6))
    return invalidArgument("rope table: mscale_all_dim makes YaRN's "
                           "amplitude divide by zero");
  return Status::success();
}

StatusOr<std::vector<float>> ropeCosSinTable(int64_t maxPos, int64_t rope,
                                             const RopeTableParams &params) {
  MLART_RETURN_IF_ERROR(validateRopeTableParams(params));
  if (rope <= 0 || rope % 2 != 0)
    return invalidArgument("rope table: the rope dim must be positive and "
                           "even, got " +
                           std::to_string(rope));
  if (maxPos < 0 || maxPos > kMaxTableValues / rope)
    return invalidArgument("rope table: " + std::to_string(maxPos) +
                           " positions is out of range");
  return fillTable(maxPos, rope, frequencies(rope, params));
}

std::vector<float> ropeCosSinTable(int64_t maxPos, int64_t rope, double base) {
  RopeTableParams plain;
  plain.theta = base;
  return fillTable(maxPos, rope, frequencies(rope, plain));
}

} // namespace mlart
