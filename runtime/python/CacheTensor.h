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

/// The cache `tensor` holds, laid out as `desc` says; desc.numBlocks 0
/// takes the block count from the tensor. `what` names it in errors.
StatusOr<KVCacheRef> cacheFromTensor(const ImportedTensor &tensor,
                                     KVCacheDesc desc, float scale,
                                     const std::string &what);

/// The row of `desc` in elements of its storage dtype: the last dimension
/// of a cache tensor.
int64_t cacheRowElements(const KVCacheDesc &desc);

} // namespace mlart::python

#endif // MLART_PYTHON_CACHETENSOR_H
