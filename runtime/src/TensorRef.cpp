//===- TensorRef.cpp - Descriptions and basic checks of tensor views ------===//
#include "mlart/TensorRef.h"

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

} // namespace mlart
