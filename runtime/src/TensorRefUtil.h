//===- TensorRefUtil.h - Byte ranges and aliasing of views (internal) -----===//
//
// Kernel checks (a linear's addend, a rotation's source) and the executor's
// stream planner ask the same questions of two views: which bytes may each
// touch, and are they the very same elements. Internal to the runtime.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_TENSORREFUTIL_H
#define MLART_TENSORREFUTIL_H

#include "mlart/TensorRef.h"

#include <cstdint>
#include <utility>

namespace mlart {

/// True when `a` and `b` are the same elements (same data, dtype, sizes
/// and strides; the stride of a size-1 dimension does not matter): an
/// elementwise kernel from `a` into `b` is then in place.
bool sameView(const TensorRef &a, const TensorRef &b);

/// Bytes [first, last) that `t` may touch; empty for an empty tensor.
std::pair<uintptr_t, uintptr_t> byteRange(const TensorRef &t);

/// True when the byte ranges of `a` and `b` meet but the views are not the
/// same (a partial overlap an elementwise kernel cannot run in).
bool partiallyOverlaps(const TensorRef &a, const TensorRef &b);

} // namespace mlart

#endif // MLART_TENSORREFUTIL_H
