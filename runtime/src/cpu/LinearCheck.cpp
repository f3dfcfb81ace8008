//===- LinearCheck.cpp - Operand checks of the linear kernels -------------===//
#include "cpu/LinearCheck.h"

#include "cpu/TensorAccess.h"
#include "TensorRefUtil.h"

namespace mlart::cpu {

Status validateLinear(const LinearArgs &a) {
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.x, "x", 2));
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.weight, "weight", 2));
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.out, "out", 2));
  const int64_t tokens = a.x.sizes[0], k = a.x.sizes[1];
  const int64_t n = a.weight.sizes[0];
  MLART_RETURN_IF_ERROR(checkDim(a.weight, "weight", 1, k));
  MLART_RETURN_IF_ERROR(checkDim(a.out, "out", 0, tokens));
  MLART_RETURN_IF_ERROR(checkDim(a.out, "out", 1, n));
  if (!a.addend.present())
    return Status::success();
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.addend, "addend", 2));
  if (a.addend.dtype != a.out.dtype)
    return invalidArgument("addend " + a.addend.describe() +
                           " must have out's dtype, out is " +
                           a.out.describe());
  MLART_RETURN_IF_ERROR(checkDim(a.addend, "addend", 0, tokens));
  MLART_RETURN_IF_ERROR(checkDim(a.addend, "addend", 1, n));
  // Each out element is written after its addend element is read, so the
  // same view works in place; a shifted overlap would read written values.
  if (partiallyOverlaps(a.addend, a.out))
    return invalidArgument("addend " + a.addend.describe() +
                           " partially overlaps out " + a.out.describe() +
                           " (pass the same view to add in place)");
  return Status::success();
}

} // namespace mlart::cpu
