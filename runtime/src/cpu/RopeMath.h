//===- RopeMath.h - Rotary-embedding checks and row rotation (internal) ---===//
//
// Shared by rope and ropeCacheUpdate so that the fused kernel rotates
// exactly like the unfused one (same float math, same rounding).
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CPU_ROPEMATH_H
#define MLART_CPU_ROPEMATH_H

#include "mlart/Kernels.h"

#include <cstdint>

namespace mlart::cpu {

/// Fails unless `style` is one of the RopeStyle values (the C API passes
/// plain integers).
Status checkRopeStyle(RopeStyle style);

/// Checks positions [numTokens] and cosSin [maxPos, ropeDim] f32, and that
/// every position is in [0, maxPos).
Status validateRopeTables(const TensorRef &positions, const TensorRef &cosSin,
                          int64_t numTokens, int64_t ropeDim);

/// Checks a tensor to be rotated: rank 2 [T, rope] or 3 [T, H, rope] (as
/// allowed by `allowRank2`/`allowRank3`), f32/f16/bf16, unit inner stride.
Status checkRopeOperand(const TensorRef &x, const char *name, bool allowRank2,
                        bool allowRank3);

/// Checks the optional source of a rotation into `qPe` (see
/// RopeCacheUpdateArgs::qPeIn): present only with qPe, same shape and
/// dtype, and either the same view as qPe (in place) or no byte shared with
/// it, since a partial overlap would make the result depend on the order
/// of the threads' reads and writes.
Status checkRopeSource(const TensorRef &qPe, const TensorRef &qPeIn);

/// Rotates `ropeDim` contiguous values of type `dtype` at `row` in place by
/// the cos/sin row `cs` (cos first half, sin second half); the result is
/// rounded to `dtype` once.
void rotateRow(uint8_t *row, DType dtype, int64_t ropeDim, const float *cs,
               RopeStyle style);

/// The cos/sin row of token t.
const float *cosSinRow(const TensorRef &cosSin, const TensorRef &positions,
                       int64_t t);

} // namespace mlart::cpu

#endif // MLART_CPU_ROPEMATH_H
