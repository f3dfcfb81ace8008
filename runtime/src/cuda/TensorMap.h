//===- TensorMap.h - TMA descriptors built on the host --------------------===//
//
// cuTensorMapEncodeTiled is a driver-API function; like CodegenModules.cu we
// reach it through the static cudart (cudaGetDriverEntryPointByVersion), so
// nothing links libcuda. Encoding is host-only and cheap (no device call):
// a descriptor is built per launch and passed as a __grid_constant__ kernel
// parameter, which CUDA-graph capture copies like any other argument.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_TENSORMAP_H
#define MLART_CUDA_TENSORMAP_H

#include "cuda/CudaCommon.h"

#include <cuda.h>

namespace mlart::cuda {

/// A 2D tensor map over `rows` rows of `cols` bf16 values, `pitchBytes`
/// apart, loaded in boxes of boxCols x boxRows with the 128-byte swizzle
/// (boxCols * 2 must be <= 128) and zero fill out of bounds. Unavailable
/// when the driver has no cuTensorMapEncodeTiled; InvalidArgument when the
/// driver rejects the view (alignment, sizes).
Status encodeBf16TensorMap2d(CUtensorMap *map, const void *base, uint64_t cols,
                             uint64_t rows, uint64_t pitchBytes,
                             uint32_t boxCols, uint32_t boxRows);

/// The same over `planes` planes of `rows` rows, planes `planePitchBytes`
/// apart (a multiple of 16, like the row pitch); boxes stay within one
/// plane (boxCols x boxRows x 1). A paged cache is one plane per block.
Status encodeBf16TensorMap3d(CUtensorMap *map, const void *base, uint64_t cols,
                             uint64_t rows, uint64_t planes,
                             uint64_t pitchBytes, uint64_t planePitchBytes,
                             uint32_t boxCols, uint32_t boxRows);

} // namespace mlart::cuda

#endif // MLART_CUDA_TENSORMAP_H
