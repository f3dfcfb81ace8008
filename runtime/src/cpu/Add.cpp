//===- Add.cpp - Elementwise addition (residual connection) on the CPU ----===//
#include "cpu/CpuKernels.h"
#include "cpu/TensorAccess.h"

#include <vector>

namespace mlart::cpu {

Status add(const AddArgs &args) {
  MLART_RETURN_IF_ERROR(checkFloatTensor(args.a, "a", 2));
  MLART_RETURN_IF_ERROR(checkFloatTensor(args.b, "b", 2));
  MLART_RETURN_IF_ERROR(checkFloatTensor(args.out, "out", 2));
  const int64_t rows = args.a.sizes[0], cols = args.a.sizes[1];
  for (const TensorRef *t : {&args.b, &args.out}) {
    MLART_RETURN_IF_ERROR(checkDim(*t, "operand", 0, rows));
    MLART_RETURN_IF_ERROR(checkDim(*t, "operand", 1, cols));
  }
  std::vector<float> x(static_cast<size_t>(cols)), y(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    loadRow(args.a, args.a.offset({r, 0}), cols, x.data());
    loadRow(args.b, args.b.offset({r, 0}), cols, y.data());
    for (int64_t i = 0; i < cols; ++i)
      x[i] += y[i];
    storeRow(args.out, args.out.offset({r, 0}), cols, x.data());
  }
  return Status::success();
}

} // namespace mlart::cpu
