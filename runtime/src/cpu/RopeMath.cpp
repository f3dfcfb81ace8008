//===- RopeMath.cpp - Rotary-embedding checks and row rotation ------------===//
#include "cpu/RopeMath.h"

#include "cpu/IndexAccess.h"
#include "cpu/TensorAccess.h"
#include "TensorRefUtil.h"

#include <cmath>
#include <string>

namespace mlart::cpu {

Status checkRopeStyle(RopeStyle style) {
  if (style != RopeStyle::GptJ && style != RopeStyle::NeoX)
    return invalidArgument("unknown rope style " + std::to_string(int(style)));
  return Status::success();
}

Status validateRopeTables(const TensorRef &positions, const TensorRef &cosSin,
                          int64_t numTokens, int64_t ropeDim) {
  MLART_RETURN_IF_ERROR(checkIndexTensor(positions, "positions"));
  MLART_RETURN_IF_ERROR(checkTensor(cosSin, "cos_sin", 2));
  if (cosSin.dtype != DType::F32)
    return invalidArgument("cos_sin must be f32, got " + cosSin.describe());
  if (cosSin.sizes[1] != ropeDim)
    return invalidArgument("cos_sin must have " + std::to_string(ropeDim) +
                           " columns (cos then sin), got " +
                           cosSin.describe());
  if (positions.sizes[0] != numTokens)
    return invalidArgument("positions has " +
                           std::to_string(positions.sizes[0]) +
                           " entries for " + std::to_string(numTokens) +
                           " tokens");
  const int64_t maxPos = cosSin.sizes[0];
  for (int64_t t = 0; t < numTokens; ++t) {
    const int64_t p = loadIndex(positions, t);
    if (p < 0 || p >= maxPos)
      return outOfRange("positions[" + std::to_string(t) + "] = " +
                        std::to_string(p) + " is outside the cos/sin table [0, " +
                        std::to_string(maxPos) + ")");
  }
  return Status::success();
}

Status checkRopeOperand(const TensorRef &x, const char *name, bool allowRank2,
                        bool allowRank3) {
  if (!x.present())
    return invalidArgument(std::string(name) + " is missing");
  if (!((x.rank == 2 && allowRank2) || (x.rank == 3 && allowRank3)))
    return invalidArgument(std::string(name) + " has the wrong rank: " +
                           x.describe());
  MLART_RETURN_IF_ERROR(checkTensor(x, name, x.rank));
  if (!isActivationType(x.dtype))
    return invalidArgument(std::string(name) + " must be f32, f16 or bf16, got " +
                           x.describe());
  const int64_t rope = x.sizes[x.rank - 1];
  if (rope % 2 != 0)
    return invalidArgument(std::string(name) +
                           " needs an even rotary dimension, got " +
                           x.describe());
  return Status::success();
}

Status checkRopeSource(const TensorRef &qPe, const TensorRef &qPeIn) {
  if (!qPeIn.present())
    return Status::success();
  if (!qPe.present())
    return invalidArgument("q_pe_in " + qPeIn.describe() +
                           " needs a q_pe destination");
  MLART_RETURN_IF_ERROR(checkRopeOperand(qPeIn, "q_pe_in", false, true));
  bool same = qPeIn.rank == qPe.rank && qPeIn.dtype == qPe.dtype;
  for (int d = 0; same && d < qPe.rank; ++d)
    same = qPeIn.sizes[d] == qPe.sizes[d];
  if (!same)
    return invalidArgument("q_pe_in " + qPeIn.describe() +
                           " must match q_pe " + qPe.describe());
  if (partiallyOverlaps(qPe, qPeIn))
    return invalidArgument("q_pe_in " + qPeIn.describe() +
                           " partially overlaps q_pe " + qPe.describe() +
                           " (pass the same view to rotate in place)");
  return Status::success();
}

void rotateRow(uint8_t *row, DType dtype, int64_t ropeDim, const float *cs,
               RopeStyle style) {
  const int64_t half = ropeDim / 2;
  const float *cosv = cs;
  const float *sinv = cs + half;
  for (int64_t i = 0; i < half; ++i) {
    // GPT-J pairs neighbours; NeoX pairs the two halves.
    const size_t a = style == RopeStyle::GptJ ? size_t(2 * i) : size_t(i);
    const size_t b = style == RopeStyle::GptJ ? size_t(2 * i + 1)
                                              : size_t(i + half);
    const float x0 = loadAsFloat(row, dtype, a);
    const float x1 = loadAsFloat(row, dtype, b);
    storeFromFloat(row, dtype, a, x0 * cosv[i] - x1 * sinv[i]);
    storeFromFloat(row, dtype, b, x1 * cosv[i] + x0 * sinv[i]);
  }
}

const float *cosSinRow(const TensorRef &cosSin, const TensorRef &positions,
                       int64_t t) {
  return static_cast<const float *>(cosSin.data) +
         loadIndex(positions, t) * cosSin.strides[0];
}

} // namespace mlart::cpu
