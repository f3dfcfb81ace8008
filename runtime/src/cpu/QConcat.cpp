//===- QConcat.cpp - CPU kernel: assemble the absorbed decode query -------===//
#include "cpu/CpuKernels.h"
#include "cpu/IndexAccess.h"
#include "cpu/TensorAccess.h"

#include <cstring>
#include <string>

namespace mlart::cpu {

namespace {
/// Copies n values, converting only when the element types differ.
void copyValues(const uint8_t *src, DType srcType, uint8_t *dst, DType dstType,
                int64_t n) {
  if (srcType == dstType) {
    std::memmove(dst, src, size_t(n) * dtypeSize(srcType));
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    storeFromFloat(dst, dstType, size_t(i),
                   loadAsFloat(src, srcType, size_t(i)));
}
} // namespace

Status validateQConcat(const QConcatArgs &args) {
  MLART_RETURN_IF_ERROR(checkTensor(args.qLatent, "q_latent", 3));
  MLART_RETURN_IF_ERROR(checkTensor(args.qPe, "q_pe", 3));
  MLART_RETURN_IF_ERROR(checkTensor(args.out, "out", 3));
  const TensorRef &a = args.qLatent, &b = args.qPe, &o = args.out;
  if (!isActivationType(a.dtype) || !isActivationType(b.dtype) ||
      !(isActivationType(o.dtype) || o.dtype == DType::F8E4M3FN))
    return invalidArgument("q_concat: unsupported dtypes " + a.describe() +
                           ", " + b.describe() + " -> " + o.describe());
  if (a.sizes[0] != b.sizes[0] || a.sizes[1] != b.sizes[1] ||
      o.sizes[0] != a.sizes[0] || o.sizes[1] != a.sizes[1] ||
      o.sizes[2] != a.sizes[2] + b.sizes[2])
    return invalidArgument("q_concat: out " + o.describe() +
                           " is not concat(" + a.describe() + ", " +
                           b.describe() + ")");
  return Status::success();
}

Status qConcat(const QConcatArgs &args) {
  MLART_RETURN_IF_ERROR(validateQConcat(args));
  const TensorRef &a = args.qLatent, &b = args.qPe, &o = args.out;
  const size_t oes = dtypeSize(o.dtype);
  for (int64_t i = 0; i < a.sizes[0]; ++i)
    for (int64_t h = 0; h < a.sizes[1]; ++h) {
      uint8_t *dst = rowPtr(o, i, h);
      copyValues(rowPtr(a, i, h), a.dtype, dst, o.dtype, a.sizes[2]);
      copyValues(rowPtr(b, i, h), b.dtype, dst + size_t(a.sizes[2]) * oes,
                 o.dtype, b.sizes[2]);
    }
  return Status::success();
}

} // namespace mlart::cpu
