//===- IndexAccess.h - Index tensors, row pointers and element walks ------===//
//
// Helpers of the cache-write, rope, quantize and concat kernels: slot and
// position tensors may be i32 or i64 and any stride, and rows are addressed
// through TensorRef strides so that views need no copy.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CPU_INDEXACCESS_H
#define MLART_CPU_INDEXACCESS_H

#include "mlart/Status.h"
#include "mlart/TensorRef.h"

#include <cstdint>
#include <string>

namespace mlart::cpu {

/// Checks that an index tensor (slots, positions) is rank 1, i32 or i64.
inline Status checkIndexTensor(const TensorRef &t, const char *name) {
  if (!t.present())
    return invalidArgument(std::string(name) + " is missing");
  if (t.rank != 1 || t.sizes[0] < 0)
    return invalidArgument(std::string(name) + " must be a 1-D tensor, got " +
                           t.describe());
  if (t.dtype != DType::I32 && t.dtype != DType::I64)
    return invalidArgument(std::string(name) + " must be i32 or i64, got " +
                           t.describe());
  return Status::success();
}

/// Element i of a 1-D i32/i64 tensor (any stride).
inline int64_t loadIndex(const TensorRef &t, int64_t i) {
  const int64_t off = i * t.strides[0];
  if (t.dtype == DType::I32)
    return static_cast<const int32_t *>(t.data)[off];
  return static_cast<const int64_t *>(t.data)[off];
}

/// Byte pointer to row `t` of a rank-2 tensor, or row (t, h) of a rank-3 one.
inline uint8_t *rowPtr(const TensorRef &x, int64_t t, int64_t h = 0) {
  int64_t off = t * x.strides[0];
  if (x.rank == 3)
    off += h * x.strides[1];
  return x.bytesAt(off);
}

/// Calls f(elementOffset) for every element of `t` in row-major order.
template <typename F> void forEachElement(const TensorRef &t, F &&f) {
  int64_t sizes[kMaxRank] = {1, 1, 1, 1};
  int64_t strides[kMaxRank] = {0, 0, 0, 0};
  // Right-align the dimensions so that one 4-deep loop covers ranks 0..4.
  for (int d = 0; d < t.rank; ++d) {
    sizes[kMaxRank - t.rank + d] = t.sizes[d];
    strides[kMaxRank - t.rank + d] = t.strides[d];
  }
  for (int64_t a = 0; a < sizes[0]; ++a)
    for (int64_t b = 0; b < sizes[1]; ++b)
      for (int64_t c = 0; c < sizes[2]; ++c)
        for (int64_t d = 0; d < sizes[3]; ++d)
          f(a * strides[0] + b * strides[1] + c * strides[2] + d * strides[3]);
}

} // namespace mlart::cpu

#endif // MLART_CPU_INDEXACCESS_H
