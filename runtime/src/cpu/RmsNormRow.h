//===- RmsNormRow.h - One row of RMSNorm in float (CPU) -------------------===//
//
// Shared by rmsNorm and the fused rope + cache update's latent norm, so that
// the fused kernel's rows equal the unfused norm's bit for bit on the CPU.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CPU_RMSNORMROW_H
#define MLART_CPU_RMSNORMROW_H

#include "cpu/TensorAccess.h"

#include <cmath>

namespace mlart::cpu {

/// row[i] = row[i] / sqrt(mean(row^2) + epsilon) * weight[i], in float; the
/// caller rounds once when it stores the row.
inline void rmsNormRow(float *row, const float *weight, int64_t dim,
                       float epsilon) {
  const float meanSquare = dim > 0 ? dot(row, row, dim) / float(dim) : 0.0f;
  const float inv = 1.0f / std::sqrt(meanSquare + epsilon);
  for (int64_t i = 0; i < dim; ++i)
    row[i] = row[i] * inv * weight[i];
}

} // namespace mlart::cpu

#endif // MLART_CPU_RMSNORMROW_H
