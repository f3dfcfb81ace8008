//===- StepBench.h - A compiled decode step, set up for timing --*- C++ -*-===//
//
// Loads an artifact compiled from an mla-gen decode step and binds synthetic
// step data so mla-bench can time the whole step, eagerly and replayed as a
// CUDA graph: weights random and scaled by 1/sqrt(fan-in), caches full of
// random rows, every sequence `context` tokens long with its pages in random
// order, the new token written at position `context`. Correctness is
// mla-run's job (--naive, --reference); this only times.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_BENCH_STEPBENCH_H
#define MLART_BENCH_STEPBENCH_H

#include "mlart/Executor.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

namespace mlart::bench {

class CompiledStep {
public:
  /// `context`: tokens already cached per sequence (the step adds one).
  static StatusOr<std::unique_ptr<CompiledStep>>
  load(Device &device, const std::string &path, int64_t context,
       std::mt19937 &rng);

  Executor &executor() { return *executor_; }
  int64_t batch() const { return batch_; }
  int64_t context() const { return context_; }
  /// Weights once, the cache rows attention reads, activations in and out.
  double bytes() const { return bytes_; }
  /// 2 * batch * weight elements (the projections) + 2·B·H·L·(576 + 512)
  /// per attention (FlashMLA's count).
  double flops() const { return flops_; }

private:
  CompiledStep() = default;
  Status bindAll(Device &device, std::mt19937 &rng);

  std::unique_ptr<Executor> executor_;
  std::vector<Buffer> buffers_;
  std::vector<KVCache> caches_;
  int64_t batch_ = 0, context_ = 0;
  double bytes_ = 0, flops_ = 0;
};

} // namespace mlart::bench

#endif // MLART_BENCH_STEPBENCH_H
