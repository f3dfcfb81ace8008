//===- CacheTensor.h - A caller's tensor as a paged KV cache ----*- C++ -*-===//
//
// Engines own their cache: a [num_blocks, block_size, row] tensor (vLLM;
// FlashMLA's [num_blocks, block_size, 1, row] too), whose row is the
// layout's in elements of its storage type (bytes for the fp8 layouts).
// Rows are dense within a block; the block dimension may be strided (a
// per-layer view of a larger allocation).
// Both Executor.bind_cache and mla.ops read it through this one check.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_PYTHON_CACHETENSOR_H
#define MLART_PYTHON_CACHETENSOR_H

#include "DLPackTensor.h"

#include "mlart/Kernels.h"

namespace mlart::python {

/// The fp8 per-tensor scale of a Python call: a number, or a one-element
/// f32 tensor on the cache's device (vLLM's k_scale) that the kernels read
/// when they run, so a recalibrated scale needs no rebind or recapture.
struct CacheScale {
  float value = 1.0f;
  /// Imported and device-checked by the caller, who keeps its owner.
  std::optional<ImportedTensor> tensor;
};

/// A `scale` argument: a number; or a one-element tensor, imported (for
/// work on `stream`) when `device` can address it, else (a host tensor for
/// a GPU call) read once, now, as a number. `what` names it in errors.
StatusOr<CacheScale> importCacheScale(pybind11::handle scale,
                                      const Device &device,
                                      std::optional<intptr_t> stream,
                                      const std::string &what);

/// The cache `tensor` holds, laid out as `desc` says; desc.numBlocks 0
/// takes the block count from the tensor. `what` names it in errors.
StatusOr<KVCacheRef> cacheFromTensor(const ImportedTensor &tensor,
                                     KVCacheDesc desc, const CacheScale &scale,
                                     const std::string &what);

/// The row of `desc` in elements of its storage dtype: the last dimension
/// of a cache tensor.
int64_t cacheRowElements(const KVCacheDesc &desc);

} // namespace mlart::python

#endif // MLART_PYTHON_CACHETENSOR_H
