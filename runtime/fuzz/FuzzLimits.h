//===- FuzzLimits.h - What the runtime fuzz targets let an input run ------===//
//
// The device memory limit bounds what a declaration may allocate; an
// artifact whose buffers and arenas total more than kMaxRunBytes is loaded
// but not run, so that the reference kernels' work per input stays small.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_FUZZ_FUZZLIMITS_H
#define MLART_FUZZ_FUZZLIMITS_H

#include "mlart/Artifact.h"

#include <cstdint>

namespace mlart::fuzz {

constexpr uint64_t kMemoryLimit = uint64_t(64) << 20;
constexpr int64_t kMaxRunBytes = int64_t(1) << 20;

/// True when running `artifact`'s step stays within kMaxRunBytes.
inline bool smallEnoughToRun(const Artifact &artifact) {
  int64_t declared = artifact.arenaBytes() + artifact.preparedBytes();
  for (const BufferDecl &b : artifact.buffers()) {
    declared += b.sizeBytes();
    if (declared > kMaxRunBytes)
      return false;
  }
  return declared <= kMaxRunBytes;
}

} // namespace mlart::fuzz

#endif // MLART_FUZZ_FUZZLIMITS_H
