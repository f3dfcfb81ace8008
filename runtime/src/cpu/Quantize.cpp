//===- Quantize.cpp - CPU kernel: saturating fp8 e4m3fn quantisation ------===//
#include "cpu/CpuKernels.h"
#include "cpu/IndexAccess.h"
#include "cpu/TensorAccess.h"

#include <cmath>
#include <string>
#include <vector>

namespace mlart::cpu {

Status quantize(const QuantizeArgs &args) {
  const TensorRef &x = args.x;
  const TensorRef &out = args.out;
  if (!x.present() || !out.present() || !args.scale.present())
    return invalidArgument("quantize needs x, scale and out");
  if (x.rank < 0 || x.rank > kMaxRank)
    return invalidArgument("quantize: bad rank of x");
  if (!isActivationType(x.dtype))
    return invalidArgument("quantize: x must be f32, f16 or bf16, got " +
                           x.describe());
  if (out.dtype != DType::F8E4M3FN)
    return invalidArgument("quantize: out must be f8e4m3fn, got " +
                           out.describe());
  bool sameShape = out.rank == x.rank;
  for (int d = 0; sameShape && d < x.rank; ++d)
    sameShape = out.sizes[d] == x.sizes[d] && x.sizes[d] >= 0;
  if (!sameShape)
    return invalidArgument("quantize: out " + out.describe() +
                           " must have the shape of x " + x.describe());
  const TensorRef &s = args.scale;
  if (s.dtype != DType::F32 || !(s.rank == 0 || (s.rank == 1 && s.sizes[0] == 1)))
    return invalidArgument("quantize: scale must be a [] or [1] f32 tensor, got " +
                           s.describe());
  const float scale = *static_cast<const float *>(s.data);
  if (!std::isfinite(scale) || scale <= 0.0f)
    return invalidArgument("quantize: scale must be finite and > 0, got " +
                           std::to_string(scale));

  // Walk x and out with their own strides, in the same row-major order.
  int64_t outOffsets = 0;
  std::vector<int64_t> dst;
  dst.reserve(size_t(out.numElements()));
  forEachElement(out, [&](int64_t off) { dst.push_back(off); });
  forEachElement(x, [&](int64_t off) {
    const float v = loadAsFloat(x.data, x.dtype, size_t(off));
    static_cast<uint8_t *>(out.data)[dst[size_t(outOffsets++)]] =
        floatToFp8e4m3(v / scale);
  });
  return Status::success();
}

} // namespace mlart::cpu
