//===- Launch.h - Kernel launches with programmatic dependent launch ------===//
//
// Every kernel of the library is launched through launchKernel, which asks
// for programmatic dependent launch (PDL, sm_90): the next kernel of the
// stream is launched, and its CTAs become resident, while the previous one
// finishes, instead of after it (about 1-2 us a kernel boundary on the
// H200, also inside CUDA graphs, where capture turns the attribute into a
// programmatic edge). MLART_PDL=0 turns it off (plain launches).
//
// The safety rule. A kernel launched with the attribute may start before
// the kernels it depends on have finished, so it MUST execute
// waitForPrerequisites() (griddepcontrol.wait) before its first read of
// data an earlier kernel produced and before its first global write; the
// wait returns once every prerequisite grid has completed and its memory
// is visible. Our kernels do it as their very first statement
// (pdlPrologue()); CacheCopyKernel.cu argues its one exception (loads of
// data older than its only prerequisite). They then call
// launchDependents() at once: the next kernel is only launched when all
// our CTAs have triggered (or exited), so it cannot take SMs that CTAs of
// ours still need, and it blocks in its own wait until we complete.
// Kernels without the wait (cuBLAS's) are never launched with the
// attribute; a kernel without it after ours waits for us as usual.
// Compiler-generated kernels follow the same rule (docs/codegen.md;
// CodegenModules.cu checks their PTX).
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_LAUNCH_H
#define MLART_CUDA_LAUNCH_H

#include "cuda/CudaCommon.h"

#include <optional>
#include <utility>

namespace mlart::cuda {

/// The value of MLART_PDL: "0" off, "1" on; unset or empty: nullopt (the
/// default, on); anything else is no value either (nullopt).
std::optional<bool> parsePdlKnob(const char *value);
/// Whether launches ask for PDL: MLART_PDL (read once, default on) unless a
/// test overrides it.
bool pdlEnabled();
/// Tests: forces PDL on or off for the launches that follow; nullopt goes
/// back to MLART_PDL. Launches already captured in a graph keep theirs.
void setPdlOverrideForTesting(std::optional<bool> on);

/// Launches `kernel` on `stream`, with programmatic stream serialisation
/// when pdlEnabled(). `kernel` must begin with pdlPrologue() (file
/// comment). Launch errors, and any error still pending, become a Status.
template <typename... Params, typename... Args>
Status launchKernel(const char *name, void (*kernel)(Params...), dim3 grid,
                    dim3 block, size_t smemBytes, cudaStream_t stream,
                    Args &&...args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smemBytes;
  config.stream = stream;
  const bool pdl = pdlEnabled();
  config.attrs = pdl ? attr : nullptr;
  config.numAttrs = pdl ? 1 : 0;
  cudaError_t e =
      cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  // Also clears the error, as MLART_CUDA_CHECK_LAUNCH does.
  const cudaError_t last = cudaGetLastError();
  if (e == cudaSuccess)
    e = last;
  if (e != cudaSuccess)
    return cudaError(e, std::string("launch of ") + name);
  return Status::success();
}

#ifdef __CUDACC__
// griddepcontrol is sm_90. The attribute is set on every launch, so a
// kernel built for an older architecture (no wait, or PTX JIT-compiled on
// a newer GPU) would race: refuse to build one.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "the CUDA kernels use programmatic dependent launch: build for sm_90+"
#endif

/// Blocks until every prerequisite grid has completed and its writes are
/// visible; returns at once when launched without the attribute.
__device__ __forceinline__ void waitForPrerequisites() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
/// Lets the next kernel of the stream launch once all our CTAs did this.
__device__ __forceinline__ void launchDependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
/// The first statement of every kernel launched through launchKernel.
__device__ __forceinline__ void pdlPrologue() {
  waitForPrerequisites();
  launchDependents();
}
#endif

} // namespace mlart::cuda

#endif // MLART_CUDA_LAUNCH_H
