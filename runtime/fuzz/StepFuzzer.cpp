//===- StepFuzzer.cpp - libFuzzer target: mla-run's step-data binding ----===//
//
// mla-run's harness on arbitrary artifact bytes: it writes slot mappings,
// positions, block tables and lengths into the buffers an artifact names,
// so every declaration it trusts is a potential overflow. The input's
// first two bytes choose the context length and step count; the rest is
// the artifact. Loads, sets up, prepares and runs one step on the CPU
// within a memory limit; errors are expected, crashes are not.
//
//===----------------------------------------------------------------------===//
#include "FuzzLimits.h"
#include "StepHarness.h"

#include <cstdint>

using namespace mlart;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return -1;
  mlarun::HarnessOptions options;
  options.context = data[0];
  options.steps = 1 + data[1] % 3;
  StatusOr<Artifact> artifact = Artifact::load(data + 2, size - 2);
  if (!artifact.ok())
    return 0;
  if (!fuzz::smallEnoughToRun(*artifact))
    return 0;

  static std::unique_ptr<Device> device = createCpuDevice();
  device->setMemoryLimit(fuzz::kMemoryLimit);
  mlarun::Harness harness(*device, options);
  if (!harness.setUp(*artifact).ok())
    return 0;
  StatusOr<Executor> executor = Executor::create(*artifact, *device);
  if (!executor.ok() || !harness.prepareStep(0).ok() ||
      !harness.bind(*executor, harness.caches()).ok())
    return 0;
  (void)executor->run();
  (void)harness.finishStep();
  return 0;
}
