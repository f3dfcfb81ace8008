//===- Rope.cpp - CPU kernel: rotary embedding in place -------------------===//
#include "cpu/CpuKernels.h"
#include "cpu/RopeMath.h"

namespace mlart::cpu {

Status rope(const RopeArgs &args) {
  const TensorRef &x = args.x;
  MLART_RETURN_IF_ERROR(checkRopeStyle(args.style));
  MLART_RETURN_IF_ERROR(checkRopeOperand(x, "x", true, true));
  const int64_t ropeDim = x.sizes[x.rank - 1];
  MLART_RETURN_IF_ERROR(
      validateRopeTables(args.positions, args.cosSin, x.sizes[0], ropeDim));
  const int64_t heads = x.rank == 3 ? x.sizes[1] : 1;
  for (int64_t t = 0; t < x.sizes[0]; ++t) {
    const float *cs = cosSinRow(args.cosSin, args.positions, t);
    for (int64_t h = 0; h < heads; ++h)
      rotateRow(x.bytesAt(t * x.strides[0] + (x.rank == 3 ? h * x.strides[1] : 0)),
                x.dtype, ropeDim, cs, args.style);
  }
  return Status::success();
}

} // namespace mlart::cpu
