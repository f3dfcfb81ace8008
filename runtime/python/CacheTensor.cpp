//===- CacheTensor.cpp - A caller's tensor as a paged KV cache ------------===//
#include "CacheTensor.h"

#include "mlart/KVCacheLayout.h"

#include <dlpack/dlpack.h>

#include <cmath>
#include <string>

namespace mlart::python {

int64_t cacheRowElements(const KVCacheDesc &desc) {
  return desc.rowBytes() / int64_t(dtypeSize(desc.dtype));
}

StatusOr<CacheScale> importCacheScale(pybind11::handle scale,
                                      const Device &device,
                                      std::optional<intptr_t> stream,
                                      const std::string &what) {
  CacheScale s;
  if (!pybind11::hasattr(scale, "__dlpack__")) {
    s.value = scale.cast<float>();
    return s;
  }
  MLART_ASSIGN_OR_RETURN(ImportedTensor t, importTensor(scale, stream, what));
  if (checkDevice(t, device, what).ok()) {
    s.tensor = std::move(t);
    return s;
  }
  if (t.deviceType != kDLCPU)
    return checkDevice(t, device, what);
  if (t.ref.dtype != DType::F32 || t.ref.numElements() != 1)
    return invalidArgument(what + " must hold one float32, got " +
                           t.ref.describe());
  s.value = *static_cast<const float *>(t.ref.data);
  return s;
}

StatusOr<KVCacheRef> cacheFromTensor(const ImportedTensor &tensor,
                                     KVCacheDesc desc, const CacheScale &scale,
                                     const std::string &what) {
  ImportedTensor bytes = tensor;
  adoptFp8Encoding(bytes, desc.dtype);
  TensorRef ref = bytes.ref;
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
  // Rows within a block must be dense; the blocks may be any distance
  // apart (vLLM's per-layer view of a layer-interleaved allocation).
  if (ref.strides[2] != 1 || ref.strides[1] != row ||
      (ref.sizes[0] > 1 && ref.strides[0] < desc.blockSize * row))
    return invalidArgument(
        what + " needs dense rows within a block (strides [>= " +
        std::to_string(desc.blockSize * row) + ", " + std::to_string(row) +
        ", 1]), got strides [" + std::to_string(ref.strides[0]) + ", " +
        std::to_string(ref.strides[1]) + ", " + std::to_string(ref.strides[2]) +
        "]");
  if (scale.tensor) {
    const TensorRef &s = scale.tensor->ref;
    if (s.dtype != DType::F32 || s.numElements() != 1)
      return invalidArgument(what +
                             ": a scale tensor must hold one float32, "
                             "got " +
                             s.describe());
  } else if (!std::isfinite(scale.value) || scale.value <= 0) {
    return invalidArgument(what + ": scale must be finite and > 0");
  }
  desc.numBlocks = ref.sizes[0];
  KVCacheRef cache;
  cache.desc = desc;
  cache.data = ref.data;
  cache.blockStride =
      ref.sizes[0] > 1 ? ref.strides[0] * int64_t(dtypeSize(desc.dtype)) : 0;
  cache.scale = scale.value;
  if (scale.tensor)
    cache.scaleTensor = static_cast<const float *>(scale.tensor->ref.data);
  MLART_RETURN_IF_ERROR(cache.validate());
  return cache;
}

} // namespace mlart::python
