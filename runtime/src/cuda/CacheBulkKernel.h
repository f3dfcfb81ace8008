//===- CacheBulkKernel.h - Large plain cache updates on the copy engine ---===//
//
// The bulk-copy (TMA engine) kernel for the large plain update that
// CacheCopyKernel.h describes: MLART_UPDATE_KERNEL=2. Same parameters,
// same all-or-nothing contract; launchCacheCopy dispatches to it.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_CACHEBULKKERNEL_H
#define MLART_CUDA_CACHEBULKKERNEL_H

#include "cuda/CacheCopyKernel.h"

namespace mlart::cuda {

/// Launches the bulk kernel of `cfg` (cfg.stages, cfg.ctasPerSm,
/// cfg.early, cfg.hints) for a call that the validation kernel, launched
/// just before on `stream`, checks.
Status launchCacheBulk(CudaContext &ctx, const CacheCopyParams &p,
                       const CacheCopyConfig &cfg, cudaStream_t stream);

} // namespace mlart::cuda

#endif // MLART_CUDA_CACHEBULKKERNEL_H
