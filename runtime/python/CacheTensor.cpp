//===- CacheTensor.cpp - A caller's tensor as a paged KV cache ------------===//
#include "CacheTensor.h"

#include "mlart/KVCacheLayout.h"

#include <cmath>
#include <string>

namespace mlart::python {

int64_t cacheRowElements(const KVCacheDesc &desc) {
  return desc.rowBytes() / int64_t(dtypeSize(desc.dtype));
}

StatusOr<KVCacheRef> cacheFromTensor(const ImportedTensor &tensor,
                                     KVCacheDesc desc, float scale,
                                     const std::string &what) {
  TensorRef ref = tensor.ref;
  // FlashMLA's cache has a head dimension of one before the row.
  if (ref.rank == 4 && ref.sizes[2] == 1) {
    ref.rank = 3;
    ref.sizes[2] = ref.sizes[3];
    ref.strides[2] = ref.strides[3];
  }
  const int64_t row = cacheRowElements(desc);
  if (ref.dtype != desc.dtype || ref.rank != 3 ||
      ref.sizes[1] != desc.blockSize || ref.sizes[2] != row ||
      (desc.numBlocks != 0 && ref.sizes[0] != desc.numBlocks))
    return invalidArgument(
        what + " needs a [" +
        (desc.numBlocks ? std::to_string(desc.numBlocks) : "num_blocks") +
        ", " + std::to_string(desc.blockSize) + ", " + std::to_string(row) +
        "] " + dtypeName(desc.dtype) + " tensor (" +
        cacheLayoutName(desc.layout) + " layout)");
  if (!ref.isContiguous())
    return invalidArgument(what + " must be contiguous; a strided block "
                                  "dimension is not supported yet");
  if (!std::isfinite(scale) || scale <= 0)
    return invalidArgument(what + ": scale must be finite and > 0");
  desc.numBlocks = ref.sizes[0];
  MLART_RETURN_IF_ERROR(desc.validate());
  KVCacheRef cache;
  cache.desc = desc;
  cache.data = ref.data;
  cache.scale = scale;
  return cache;
}

} // namespace mlart::python
