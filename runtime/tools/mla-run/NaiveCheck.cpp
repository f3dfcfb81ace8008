//===- NaiveCheck.cpp - Compare a step's outputs with the naive reference -===//
#include "NaiveCheck.h"

#include <cmath>

using namespace mlart;

namespace mlarun {
namespace {

/// ||got - want|| / ||want - input||; NaN in `got` counts as infinite.
double relativeToContribution(const std::vector<double> &got,
                              const std::vector<double> &want,
                              const std::vector<double> &input) {
  double sumDiff = 0.0, sumRef = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    double diff = got[i] - want[i];
    sumDiff += std::isnan(diff) ? INFINITY : diff * diff;
    sumRef += (want[i] - input[i]) * (want[i] - input[i]);
  }
  return sumRef > 0 ? std::sqrt(sumDiff / sumRef) : std::sqrt(sumDiff);
}

std::string layerOutputName(size_t layer) {
  return "model.layers." + std::to_string(layer) + ".hidden_states_out";
}

std::string attentionOutputName(size_t layer) {
  return "model.layers." + std::to_string(layer) + ".self_attn.o_proj_out";
}

} // namespace

StatusOr<NaiveCheck>
checkAgainstNaive(const NaiveStep &step,
                  const std::map<std::string, std::vector<float>> &outputs,
                  std::vector<NaiveCacheRows> *cacheRows) {
  auto input = step.tensors.find("hidden_states");
  auto out = outputs.find("hidden_states_out");
  if (input == step.tensors.end() || out == outputs.end())
    return invalidArgument("the naive reference compares hidden_states_out "
                           "with hidden_states");
  const size_t size = out->second.size();
  if (input->second.numElements() != int64_t(size))
    return invalidArgument("the naive reference compares hidden_states_out "
                           "with hidden_states, which must have its size (" +
                           std::to_string(input->second.numElements()) +
                           " elements, the output " + std::to_string(size) +
                           ")");
  std::vector<double> x0(size);
  for (size_t i = 0; i < size; ++i)
    x0[i] = input->second.at(int64_t(i));
  auto toDouble = [](const std::vector<float> &v) {
    return std::vector<double>(v.begin(), v.end());
  };

  NaiveCheck check;
  MLART_ASSIGN_OR_RETURN(std::vector<double> want,
                         runNaiveStep(step, Residual::Exact, cacheRows));
  if (want.size() != size)
    return invalidArgument("hidden_states_out has the wrong size");
  check.endToEnd = relativeToContribution(toDouble(out->second), want, x0);

  const size_t layers = step.caches.size();
  if (layers > 1) {
    MLART_ASSIGN_OR_RETURN(std::vector<double> rounded,
                           runNaiveStep(step, Residual::RoundedToBF16));
    check.bf16Floor = relativeToContribution(rounded, want, x0);
  }

  // Layer by layer: the reference runs each layer on the compiled step's
  // own input to it and is compared with what the compiled layer added
  // (its o_proj output, before the bf16 residual add rounds it away).
  check.perLayer = true;
  for (size_t layer = 0; layer < layers; ++layer)
    check.perLayer &= outputs.count(attentionOutputName(layer)) != 0 &&
                      (layer + 1 == layers ||
                       outputs.count(layerOutputName(layer)) != 0);
  if (!check.perLayer)
    return check;
  const std::vector<double> zeros(size, 0.0);
  std::vector<double> layerInput = x0;
  for (size_t layer = 0; layer < layers; ++layer) {
    const std::vector<float> &got = outputs.at(attentionOutputName(layer));
    if (got.size() != size)
      return invalidArgument(attentionOutputName(layer) +
                             " has the wrong size");
    std::vector<double> layerWant = layerInput;
    MLART_RETURN_IF_ERROR(runNaiveLayer(
        step, layer, layerWant, cacheRows ? &(*cacheRows)[layer] : nullptr));
    for (size_t i = 0; i < size; ++i)
      layerWant[i] -= layerInput[i];
    double rel = relativeToContribution(toDouble(got), layerWant, zeros);
    if (std::isnan(rel))
      rel = INFINITY;
    if (check.worstLayer < 0 || rel > check.perLayerMax) {
      check.perLayerMax = rel;
      check.worstLayer = int64_t(layer);
    }
    if (layer + 1 < layers) {
      const std::vector<float> &next = outputs.at(layerOutputName(layer));
      if (next.size() != size)
        return invalidArgument(layerOutputName(layer) + " has the wrong size");
      layerInput = toDouble(next);
    }
  }
  return check;
}

} // namespace mlarun
