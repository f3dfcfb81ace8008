//===- CodegenModules.h - Loads and launches compiler-generated kernels ---===//
//
// The PTX modules of an artifact (docs/codegen.md) are loaded with the CUDA
// driver API, whose entry points are resolved at run time through the
// static cudart (cudaGetDriverEntryPointByVersion): nothing links libcuda
// at build time. Loaded modules are cached per device by the hash and text
// of their PTX; a module the driver rejects is reported with its JIT log.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_CODEGENMODULES_H
#define MLART_CUDA_CODEGENMODULES_H

#include "cuda/CudaCommon.h"
#include "mlart/Artifact.h"

#include <cuda.h>

#include <map>
#include <memory>
#include <mutex>

namespace mlart::cuda {

/// A loaded entry of a generated module.
struct CodegenFunction {
  CUfunction fn = nullptr;
  /// Its PTX executes griddepcontrol.wait before touching global memory
  /// (codegenEntryWaitsForGrids): it may be launched with PDL.
  bool waitsForGrids = false;
};

/// The loaded modules of one device. Thread-safe.
class CodegenModules {
public:
  explicit CodegenModules(int ordinal) : ordinal_(ordinal) {}
  ~CodegenModules();
  CodegenModules(const CodegenModules &) = delete;
  CodegenModules &operator=(const CodegenModules &) = delete;

  /// The entry `name` of `module`, loading the module on first use.
  StatusOr<CodegenFunction> function(const CodegenModule &module,
                                     const std::string &name);
  /// cuLaunchKernelEx on `stream` (graph-capturable), with programmatic
  /// stream serialisation when `f` waits for its prerequisite grids and
  /// pdlEnabled() (cuda/Launch.h).
  Status launch(const CodegenFunction &f, const std::string &name,
                unsigned grid, unsigned block, void **params,
                cudaStream_t stream);
  /// Number of modules loaded so far (tests check the cache).
  size_t loadedModules() const;
  /// Number of generated-kernel launches so far.
  uint64_t launches() const;
  /// Of those, launched with PDL.
  uint64_t pdlLaunches() const;

private:
  struct Loaded {
    CUmodule module = nullptr;
    std::map<std::string, CodegenFunction> functions;
    /// The text (data and size) last found equal to the module's: every
    /// eager launch asks for its function, and need not compare the whole
    /// PTX again. A new text at that address after the old one was freed
    /// aliases only with the same size and fnv1a64 hash.
    const char *knownText = nullptr;
    size_t knownSize = 0;
  };
  /// The loaded module whose text is `module`'s, or nullptr.
  Loaded *findLoaded(const CodegenModule &module);
  Status driverError(CUresult r, const std::string &what) const;

  int ordinal_;
  mutable std::mutex mu_;
  /// Keyed by hash, then by text (a hash collision cannot alias modules).
  std::multimap<uint64_t, std::pair<std::string, Loaded>> modules_;
  uint64_t launches_ = 0;
  uint64_t pdlLaunches_ = 0;
};

/// Host checks, specialisation check, then a launch of the generated
/// kernel; falls back to the library kernel where the generated one does
/// not apply (checked mode, misaligned rows, a requested k_pe_out).
Status codegenCacheWrite(CudaContext &ctx, CodegenModules &modules,
                         const CodegenModule &module,
                         const CodegenKernel &kernel,
                         const RopeCacheUpdateArgs &args, cudaStream_t stream);

} // namespace mlart::cuda

#endif // MLART_CUDA_CODEGENMODULES_H
