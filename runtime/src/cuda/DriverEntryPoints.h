//===- DriverEntryPoints.h - Driver-API functions without libcuda ---------===//
//
// The runtime links cudart statically and never links libcuda, so the few
// driver-API functions it needs (module loading for generated kernels,
// tensor-map encoding for TMA) are looked up at run time through
// cudaGetDriverEntryPointByVersion. Callers resolve once and cache.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_DRIVERENTRYPOINTS_H
#define MLART_CUDA_DRIVERENTRYPOINTS_H

#include "cuda/CudaCommon.h"

namespace mlart::cuda {

/// Sets `fn` to the driver's `symbol` (ABI of CUDA 12.0); Unavailable when
/// the driver does not have it.
template <typename Fn>
Status resolveDriverEntryPoint(const char *symbol, Fn &fn) {
  void *p = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  // 12000: the ABI of these entry points since CUDA 12.0.
  MLART_CUDA_CHECK(
      cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &q),
      std::string("cudaGetDriverEntryPointByVersion(") + symbol + ")");
  if (q != cudaDriverEntryPointSuccess || !p)
    return unavailable(std::string("cuda: the driver has no entry point ") +
                       symbol);
  fn = reinterpret_cast<Fn>(p);
  return Status::success();
}

} // namespace mlart::cuda

#endif // MLART_CUDA_DRIVERENTRYPOINTS_H
