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

/// Whether launches ask for PDL: MLART_PDL (cuda/Knobs.h, default on)
/// unless a test overrides it.
bool pdlEnabled();
/// Tests: forces PDL on or off for the launches that follow; nullopt goes
/// back to MLART_PDL. Launches already captured in a graph keep theirs.
void setPdlOverrideForTesting(std::optional<bool> on);

/// The geometry of one launch. clusterX > 0 groups that many consecutive
/// CTAs along x into a thread-block cluster (grid.x must be a multiple);
/// 0 sets no cluster attribute. A cluster of 1 is not the same as none for
/// cudaOccupancyMaxActiveClusters, which answers 0 without the attribute.
struct LaunchShape {
  dim3 grid;
  dim3 block;
  size_t smemBytes = 0;
  unsigned clusterX = 0;
};

/// The cudaLaunchConfig_t of one launch and the attributes it points to:
/// the cluster shape when clusterX > 0, programmatic stream serialisation
/// when `pdl`. Not copyable: the config points into the object.
class LaunchConfig {
public:
  LaunchConfig(const LaunchShape &shape, cudaStream_t stream, bool pdl);
  LaunchConfig(const LaunchConfig &) = delete;
  LaunchConfig &operator=(const LaunchConfig &) = delete;
  const cudaLaunchConfig_t *get() const { return &config_; }

private:
  cudaLaunchAttribute attrs_[2];
  cudaLaunchConfig_t config_;
};

/// The Status of a launch that returned `e`; also takes (and clears) any
/// error still pending, as MLART_CUDA_CHECK_LAUNCH does.
Status launchStatus(cudaError_t e, const char *name);

/// Launches `kernel` as `shape` on `stream`, with programmatic stream
/// serialisation when pdlEnabled(). `kernel` must begin with pdlPrologue()
/// (file comment). Launch errors, and any error still pending, become a
/// Status.
template <typename... Params, typename... Args>
Status launchKernel(const char *name, void (*kernel)(Params...),
                    const LaunchShape &shape, cudaStream_t stream,
                    Args &&...args) {
  const LaunchConfig config(shape, stream, pdlEnabled());
  return launchStatus(
      cudaLaunchKernelEx(config.get(), kernel, std::forward<Args>(args)...),
      name);
}

/// The same without a cluster.
template <typename... Params, typename... Args>
Status launchKernel(const char *name, void (*kernel)(Params...), dim3 grid,
                    dim3 block, size_t smemBytes, cudaStream_t stream,
                    Args &&...args) {
  return launchKernel(name, kernel, LaunchShape{grid, block, smemBytes, 1},
                      stream, std::forward<Args>(args)...);
}

/// Lets `kernel` take `bytes` of dynamic shared memory on the current
/// device (above 48 KB it must opt in). cudaFuncSetAttribute is a driver
/// call, so it is made once per (device, kernel), again only for more.
Status allowDynamicSmem(const void *kernel, size_t bytes, const char *name);
template <typename... Params>
Status allowDynamicSmem(void (*kernel)(Params...), size_t bytes,
                        const char *name) {
  return allowDynamicSmem(reinterpret_cast<const void *>(kernel), bytes,
                          name);
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
