//===- Executor.h - Runs a loaded artifact's step on a device -------------===//
//
// An Executor owns a copy of the program and its scratch arena on the
// device. The caller binds every declared buffer (by name, to memory of the
// declared dtype and shape) and every declared cache, then calls run() once
// per step; bindings persist across runs, so a step loop rebinds only what
// changed (step metadata, activations) and runs again.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_EXECUTOR_H
#define MLART_EXECUTOR_H

#include "mlart/Artifact.h"
#include "mlart/Device.h"
#include "mlart/KVCache.h"

#include <functional>
#include <string>
#include <vector>

namespace mlart {

/// Called after each instruction when timing is on: its index, the
/// instruction and the host wall time in seconds from launch to the end of
/// a device synchronize (so it includes launch overhead).
using InstructionTimingCallback =
    std::function<void(size_t index, const Instruction &inst, double seconds)>;

class Executor {
public:
  /// Allocates the arena on `device`, which must outlive the executor.
  static StatusOr<Executor> create(Artifact artifact, Device &device);

  Executor(Executor &&) = default;
  Executor &operator=(Executor &&) = default;

  const Artifact &artifact() const { return artifact_; }
  Device &device() const { return *device_; }

  /// Binds buffer `name` to `tensor`, which must have the declared dtype and
  /// shape and be contiguous (views address it as a packed row-major array).
  /// The memory must stay valid while runs use it.
  Status bind(const std::string &name, const TensorRef &tensor);
  /// Binds cache `name`; the desc must equal the declared one. The ref is
  /// kept as given, so a BlockManager::guard()ed ref keeps checked mode.
  Status bindCache(const std::string &name, const KVCacheRef &cache);
  Status bindCache(const std::string &name, KVCache &cache);
  /// Forgets every binding.
  void unbindAll();
  /// True when every buffer and cache is bound.
  bool fullyBound() const;

  /// Runs the instructions in order on `stream`. Fails with
  /// FailedPrecondition before running anything when a binding is missing;
  /// otherwise stops at the first failing instruction and returns its status
  /// with "instruction #i op (location): " prefixed to the message. Kernels
  /// validate before writing, so a failing instruction wrote nothing; earlier
  /// instructions did run.
  Status run(StreamHandle stream = nullptr);

  /// Turns per-instruction timing on (a non-empty callback) or off. Timing
  /// synchronizes the device after every instruction.
  void setTimingCallback(InstructionTimingCallback callback) {
    timing_ = std::move(callback);
  }

private:
  Executor(Artifact artifact, Device &device, Buffer arena);
  Status runInstruction(const Instruction &inst, StreamHandle stream);
  Status copyView(const TensorRef &src, const TensorRef &dst,
                  StreamHandle stream);
  TensorRef view(uint32_t index) const;

  Artifact artifact_;
  Device *device_;
  Buffer arena_;
  std::vector<void *> bufferData_;
  std::vector<KVCacheRef> caches_;
  std::vector<bool> cacheBound_;
  InstructionTimingCallback timing_;
};

} // namespace mlart

#endif // MLART_EXECUTOR_H
