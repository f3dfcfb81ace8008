//===- TensorRef.h - Non-owning strided view of device or host memory -----===//
//
// Kernels take TensorRefs: a pointer, an element type, up to four sizes and
// strides counted in elements. Views let a kernel read a slice of a larger
// buffer (k_pe inside the kv_a projection output) without a copy.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_TENSORREF_H
#define MLART_TENSORREF_H

#include "mlart/DType.h"
#include "mlart/Status.h"

#include <cstdint>
#include <initializer_list>
#include <string>

namespace mlart {

constexpr int kMaxRank = 4;

struct TensorRef {
  void *data = nullptr;
  DType dtype = DType::F32;
  int rank = 0;
  int64_t sizes[kMaxRank] = {0, 0, 0, 0};
  int64_t strides[kMaxRank] = {0, 0, 0, 0};

  /// A contiguous (row-major) view.
  static TensorRef contiguous(void *data, DType dtype,
                              std::initializer_list<int64_t> sizes) {
    TensorRef t;
    t.data = data;
    t.dtype = dtype;
    t.rank = int(sizes.size());
    int i = 0;
    for (int64_t s : sizes)
      t.sizes[i++] = s;
    int64_t stride = 1;
    for (int d = t.rank - 1; d >= 0; --d) {
      t.strides[d] = stride;
      stride *= t.sizes[d];
    }
    return t;
  }

  bool present() const { return data != nullptr; }
  int64_t numElements() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d)
      n *= sizes[d];
    return n;
  }
  /// True if the innermost dimension has stride 1 and the others are packed.
  bool isContiguous() const {
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      if (sizes[d] != 1 && strides[d] != stride)
        return false;
      stride *= sizes[d];
    }
    return true;
  }
  /// Element offset of an index tuple.
  int64_t offset(std::initializer_list<int64_t> idx) const {
    int64_t off = 0;
    int d = 0;
    for (int64_t i : idx)
      off += i * strides[d++];
    return off;
  }
  /// Byte pointer to the element at an element offset.
  uint8_t *bytesAt(int64_t elementOffset) const {
    return static_cast<uint8_t *>(data) +
           elementOffset * int64_t(dtypeSize(dtype));
  }
  /// "[2, 16, 576] bf16"
  std::string describe() const;
};

/// True when `a` and `b` provably share no byte because they are column
/// windows of the same rows: both have rank >= 2, one row pitch (outermost
/// stride, in bytes) and inner dimensions that stay inside one row, and
/// measured from the lower view's start, the upper view's window (which
/// begins `distance mod pitch` bytes in) fits between the end of the lower
/// one and the next row. Ranks may differ: the q heads and the k_pe
/// columns of one fused projection output. Only the addresses' difference
/// matters, so offsets into one base work as `data` too. False means "may
/// overlap".
bool rowWindowsDisjoint(const TensorRef &a, const TensorRef &b);

/// Checks that `t` is present, has `rank` dimensions, an innermost stride of
/// 1 and non-negative sizes; `name` goes into the message.
Status checkTensor(const TensorRef &t, const char *name, int rank);

} // namespace mlart

#endif // MLART_TENSORREF_H
