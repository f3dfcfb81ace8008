//===- BlasSupport.h - What Blas and BlasLt share (internal) --------------===//
//
// Both libraries are dlopened on first use and both need scratch memory per
// stream: GEMMs that the executor runs concurrently on two streams must not
// share a workspace (PyTorch keys its cuBLAS workspaces by stream the same
// way).
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_BLASSUPPORT_H
#define MLART_CUDA_BLASSUPPORT_H

#include "mlart/StatusOr.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <utility>
#include <vector>

namespace mlart::cuda {

/// cuBLAS's recommended workspace on Hopper.
constexpr size_t kBlasWorkspaceBytes = 32u << 20;

/// Sets `fn` to `name` from the dlopened `lib`; false when it is missing.
template <typename F> bool loadSymbol(void *lib, const char *name, F &fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}

/// One kBlasWorkspaceBytes workspace per stream, allocated on the stream's
/// first use and freed with the object. Not thread-safe: the owner holds its
/// own lock.
class StreamWorkspaces {
public:
  StreamWorkspaces() = default;
  ~StreamWorkspaces();
  StreamWorkspaces(const StreamWorkspaces &) = delete;
  StreamWorkspaces &operator=(const StreamWorkspaces &) = delete;

  /// The workspace of `stream`. When the first call on a stream is being
  /// captured, the allocation runs in relaxed capture mode (it is not a
  /// stream operation and is not recorded in the graph).
  StatusOr<void *> get(cudaStream_t stream);

private:
  std::vector<std::pair<cudaStream_t, void *>> entries_;
};

} // namespace mlart::cuda

#endif // MLART_CUDA_BLASSUPPORT_H
