//===- RmsNorm.cpp - Root-mean-square normalisation on the CPU -----------===//
#include "cpu/CpuKernels.h"
#include "cpu/RmsNormRow.h"
#include "cpu/TensorAccess.h"

#include <cmath>
#include <vector>

namespace mlart::cpu {

Status rmsNorm(const RmsNormArgs &args) {
  MLART_RETURN_IF_ERROR(checkFloatTensor(args.x, "x", 2));
  MLART_RETURN_IF_ERROR(checkFloatTensor(args.weight, "weight", 1));
  MLART_RETURN_IF_ERROR(checkFloatTensor(args.out, "out", 2));
  const int64_t tokens = args.x.sizes[0], dim = args.x.sizes[1];
  MLART_RETURN_IF_ERROR(checkDim(args.weight, "weight", 0, dim));
  MLART_RETURN_IF_ERROR(checkDim(args.out, "out", 0, tokens));
  MLART_RETURN_IF_ERROR(checkDim(args.out, "out", 1, dim));
  if (!(args.epsilon >= 0.0f))
    return invalidArgument("rmsNorm epsilon must be >= 0");

  std::vector<float> weight(static_cast<size_t>(dim)),
      row(static_cast<size_t>(dim));
  loadRow(args.weight, 0, dim, weight.data());
  for (int64_t t = 0; t < tokens; ++t) {
    loadRow(args.x, args.x.offset({t, 0}), dim, row.data());
    // Normalise and scale in float, rounding once on store.
    rmsNormRow(row.data(), weight.data(), dim, args.epsilon);
    storeRow(args.out, args.out.offset({t, 0}), dim, row.data());
  }
  return Status::success();
}

} // namespace mlart::cpu
