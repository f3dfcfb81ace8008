//===- ArtifactFuzzer.cpp - libFuzzer target: artifact bytes to a step ---===//
//
// What an engine does with artifact bytes it did not compile itself: load
// them, and when they load, create an executor on the CPU device, bind
// zeroed buffers and caches of the declared shapes, prepare and run one
// step (within FuzzLimits.h). Errors are expected; a crash, a sanitizer
// report or a hang is not.
//
//===----------------------------------------------------------------------===//
#include "FuzzLimits.h"
#include "mlart/Artifact.h"
#include "mlart/Device.h"
#include "mlart/Executor.h"
#include "mlart/KVCache.h"

#include <cstdint>
#include <vector>

using namespace mlart;

namespace {
constexpr int64_t kBlocksWhenDynamic = 4;
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  StatusOr<Artifact> artifact = Artifact::load(data, size);
  if (!artifact.ok())
    return 0;
  if (!fuzz::smallEnoughToRun(*artifact))
    return 0;

  static std::unique_ptr<Device> device = createCpuDevice();
  device->setMemoryLimit(fuzz::kMemoryLimit);
  std::vector<Buffer> buffers;
  std::vector<KVCache> caches;
  std::vector<std::pair<std::string, TensorRef>> bindings;
  for (const BufferDecl &decl : artifact->buffers()) {
    StatusOr<Buffer> b = device->allocate(size_t(decl.sizeBytes()));
    if (!b.ok())
      return 0;
    if (!b->empty() && !device->memset(b->data(), 0, b->size()).ok())
      return 0;
    bindings.emplace_back(decl.name, decl.view(b->data()));
    buffers.push_back(std::move(*b));
  }
  for (const CacheDecl &decl : artifact->caches()) {
    KVCacheDesc desc = decl.desc;
    if (desc.numBlocks == 0)
      desc.numBlocks = kBlocksWhenDynamic;
    StatusOr<KVCache> cache = KVCache::create(*device, desc);
    if (!cache.ok())
      return 0;
    caches.push_back(std::move(*cache));
  }
  StatusOr<Executor> executor = Executor::create(*artifact, *device);
  if (!executor.ok())
    return 0;
  for (const auto &[name, ref] : bindings)
    if (!executor->bind(name, ref).ok())
      return 0;
  for (size_t i = 0; i < caches.size(); ++i)
    if (!executor->bindCache(artifact->caches()[i].name, caches[i]).ok())
      return 0;
  (void)executor->run();
  return 0;
}
