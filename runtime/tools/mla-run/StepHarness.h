//===- StepHarness.h - The serving situation a step artifact runs in ------===//
//
// What mla-run sets up around an artifact: requests with earlier context in
// a paged cache managed by the block manager, random weights and
// activations from a seed (or .npy data), step metadata (slot mappings,
// block tables, positions, lengths) for each step, prefix-cache hits with a
// shared prompt prefix, and the hand-over from a prefill step to decode
// steps on the same caches. The runtime alone: no MLIR here.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_RUN_STEPHARNESS_H
#define MLA_RUN_STEPHARNESS_H

#include "mlart/Artifact.h"
#include "mlart/BlockManager.h"
#include "mlart/Device.h"
#include "mlart/Executor.h"
#include "mlart/KVCache.h"

#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace mlarun {

using mlart::Artifact;
using mlart::BlockManager;
using mlart::Buffer;
using mlart::BufferDecl;
using mlart::Device;
using mlart::Executor;
using mlart::KVCache;
using mlart::Status;
using mlart::StatusOr;
using mlart::TensorRef;

/// The mla-run options the harness reads.
struct HarnessOptions {
  uint64_t seed = 0;
  int steps = 2;
  int64_t context = 40;
  /// A buffer whose host data comes from a .npy file instead of random
  /// values, as the option `flag` ("--input", "--decode-input") named it;
  /// `hint` ends a shape mismatch's message.
  struct BoundInput {
    std::string name, path, flag, hint;
  };
  std::vector<BoundInput> inputs;
  int64_t sharedPrefix = 0; ///< common prompt tokens of all requests
  bool dummySlots = false;  ///< every step's slot_mapping is -1
  /// Each weight in its own allocation, never back to back with another
  /// (--separate-weights), instead of all weights back to back in one, in
  /// declaration order, as an engine keeps them (which lets the executor
  /// read fused weights in place).
  bool separateWeights = false;
};

/// A host-initialised tensor on the device: its own allocation, or a
/// window of the harness's weight pool.
struct DeviceTensor {
  BufferDecl decl;
  Buffer owned; ///< empty for a window of the weight pool
  void *data = nullptr;
  std::vector<uint8_t> host;

  size_t bytes() const { return host.size(); }
  TensorRef ref() const { return decl.view(data); }
};

/// The serving situation one artifact runs in.
class Harness {
public:
  Harness(Device &device, const HarnessOptions &options)
      : device_(device), options_(options), rng_(options.seed) {}

  Status setUp(const Artifact &artifact);
  /// Fills step metadata and activations for step `step`.
  Status prepareStep(int step);
  Status finishStep();
  /// Binds everything to `executor` using `caches`.
  Status bind(Executor &executor, std::vector<KVCache> &caches);
  /// Fresh caches with the same bytes as the harness's initial caches.
  StatusOr<std::vector<KVCache>> cloneCaches() const;

  std::vector<KVCache> &caches() { return caches_; }
  const Artifact &artifact() const { return *artifact_; }
  /// The artifact is a prefill step (it has query_start_loc).
  bool isPrefill() const { return prefill_; }
  std::map<std::string, DeviceTensor> &tensors() { return tensors_; }
  /// Takes over `prefill`'s caches, block manager and requests (whose
  /// prompts are committed) to run `artifact`, a decode step, next; weights
  /// of the same name and shape keep the prefill's values.
  Status continueFrom(Harness &prefill, const Artifact &artifact,
                      int64_t steps);
  /// Full blocks the prefix cache found for prompts so far.
  int64_t prefixHitBlocks() const {
    return blocks_ ? blocks_->stats().hitTokens / blocks_->blockSize() : 0;
  }

private:
  void fillRandom(DeviceTensor &t, float scale, float mean = 0.0f);
  Status upload(DeviceTensor &t) {
    return device_.copyHostToDevice(t.data, t.host.data(), t.host.size());
  }
  template <typename T> T *hostAs(const std::string &name) {
    return reinterpret_cast<T *>(tensors_.at(name).host.data());
  }
  bool has(const std::string &name) const { return tensors_.count(name); }

  Device &device_;
  HarnessOptions options_;
  std::mt19937_64 rng_;
  const Artifact *artifact_ = nullptr;
  std::map<std::string, DeviceTensor> tensors_;
  /// Every weight back to back (unless options_.separateWeights).
  Buffer weightPool_;
  std::vector<KVCache> caches_;
  std::unique_ptr<BlockManager> blocks_;
  int64_t requests_ = 0, tokens_ = 0, maxBlocks_ = 0;
  bool prefill_ = false;
  /// --input data by buffer name, checked against the declarations.
  std::map<std::string, std::vector<uint8_t>> bound_;
  Status loadBoundInputs();
  void applyBound(DeviceTensor &t, const std::string &name) {
    auto it = bound_.find(name);
    if (it != bound_.end())
      t.host = it->second;
  }
  Status allocateTensors(const Artifact &artifact);
  Status readShapes();
};

} // namespace mlarun

#endif // MLA_RUN_STEPHARNESS_H
