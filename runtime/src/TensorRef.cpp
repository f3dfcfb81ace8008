//===- TensorRef.cpp - Descriptions and basic checks of tensor views ------===//
#include "mlart/TensorRef.h"

#include "TensorRefUtil.h"

namespace mlart {

std::string TensorRef::describe() const {
  std::string s = "[";
  for (int d = 0; d < rank; ++d) {
    if (d)
      s += ", ";
    s += std::to_string(sizes[d]);
  }
  s += "] ";
  s += dtypeName(dtype);
  return s;
}

Status checkTensor(const TensorRef &t, const char *name, int rank) {
  if (!t.present())
    return invalidArgument(std::string(name) + " is missing");
  if (t.rank != rank)
    return invalidArgument(std::string(name) + " must have rank " +
                           std::to_string(rank) + ", got " + t.describe());
  for (int d = 0; d < rank; ++d)
    if (t.sizes[d] < 0)
      return invalidArgument(std::string(name) + " has a negative size: " +
                             t.describe());
  if (rank > 0 && t.sizes[rank - 1] > 1 && t.strides[rank - 1] != 1)
    return invalidArgument(std::string(name) +
                           " must have unit stride in its last dimension");
  return Status::success();
}

bool sameView(const TensorRef &a, const TensorRef &b) {
  if (a.data != b.data || a.dtype != b.dtype || a.rank != b.rank)
    return false;
  for (int d = 0; d < a.rank; ++d)
    if (a.sizes[d] != b.sizes[d] ||
        (a.sizes[d] > 1 && a.strides[d] != b.strides[d]))
      return false;
  return true;
}

std::pair<uintptr_t, uintptr_t> byteRange(const TensorRef &t) {
  const int64_t es = int64_t(dtypeSize(t.dtype));
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < t.rank; ++d) {
    if (t.sizes[d] == 0)
      return {0, 0};
    const int64_t span = (t.sizes[d] - 1) * t.strides[d];
    (span < 0 ? lo : hi) += span;
  }
  const uintptr_t base = reinterpret_cast<uintptr_t>(t.data);
  return {base + uintptr_t(lo * es), base + uintptr_t((hi + 1) * es)};
}

bool partiallyOverlaps(const TensorRef &a, const TensorRef &b) {
  if (sameView(a, b))
    return false;
  const auto [a0, a1] = byteRange(a);
  const auto [b0, b1] = byteRange(b);
  return a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1;
}

bool rowWindowsDisjoint(const TensorRef &a, const TensorRef &b) {
  auto window = [](const TensorRef &t, int64_t &pitch, int64_t &span) {
    if (t.rank < 2 || t.strides[0] <= 0)
      return false;
    int64_t reach = 0;
    for (int d = 1; d < t.rank; ++d) {
      if (t.sizes[d] <= 0 || t.strides[d] < 0)
        return false;
      reach += (t.sizes[d] - 1) * t.strides[d];
    }
    const int64_t es = int64_t(dtypeSize(t.dtype));
    pitch = t.strides[0] * es;
    span = (reach + 1) * es;
    return span <= pitch;
  };
  int64_t pa, na, pb, nb;
  if (!window(a, pa, na) || !window(b, pb, nb) || pa != pb)
    return false;
  const bool aLower = a.data <= b.data;
  const int64_t lowerSpan = aLower ? na : nb, upperSpan = aLower ? nb : na;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(aLower ? a.data : b.data);
  const uintptr_t hi = reinterpret_cast<uintptr_t>(aLower ? b.data : a.data);
  const int64_t d = int64_t((hi - lo) % uint64_t(pa));
  return lowerSpan <= d && d + upperSpan <= pa;
}

} // namespace mlart
