//===- CpuKernels.h - CPU reference kernels (internal) --------------------===//
//
// Free functions behind the CPU KernelLibrary. Each validates its arguments
// completely before writing any output. Clear loops, float accumulation.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CPU_CPUKERNELS_H
#define MLART_CPU_CPUKERNELS_H

#include "mlart/Kernels.h"

namespace mlart::cpu {

Status cacheUpdate(const CacheUpdateArgs &args);
Status rope(const RopeArgs &args);
Status ropeCacheUpdate(const RopeCacheUpdateArgs &args);
Status decodeAttention(const DecodeAttentionArgs &args);
/// The argument checks of decodeAttention that read no device data (shapes,
/// dtypes, the cache descriptor, the paged layout), shared with CUDA.
Status checkDecodeAttentionShapes(const DecodeAttentionArgs &args);
Status decodeAttentionWithUpdate(const DecodeAttentionWithUpdateArgs &args);
Status prefillAttention(const PrefillAttentionArgs &args);
Status qAbsorb(const QAbsorbArgs &args);
Status vUp(const VUpArgs &args);
Status qConcat(const QConcatArgs &args);
/// The argument checks of qConcat, shared with the CUDA kernel.
Status validateQConcat(const QConcatArgs &args);
Status quantize(const QuantizeArgs &args);
Status rmsNorm(const RmsNormArgs &args);
Status linear(const LinearArgs &args);
Status add(const AddArgs &args);

} // namespace mlart::cpu

#endif // MLART_CPU_CPUKERNELS_H
