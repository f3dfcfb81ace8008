//===- CacheUpdate.cpp - CPU kernel: write kv_c and k_pe into cache rows --===//
#include "cpu/CacheWrite.h"
#include "cpu/CpuKernels.h"
#include "cpu/IndexAccess.h"

namespace mlart::cpu {

Status cacheUpdate(const CacheUpdateArgs &args) {
  int64_t numTokens = 0;
  MLART_RETURN_IF_ERROR(validateCacheWrite(args.kvC, args.kPe,
                                           args.slotMapping, args.cache,
                                           numTokens));
  // Tokens past the slot mapping are padding; negative slots are tokens the
  // scheduler chose not to store (e.g. a profile run).
  for (int64_t t = 0; t < args.slotMapping.sizes[0]; ++t) {
    const int64_t slot = loadIndex(args.slotMapping, t);
    if (slot >= 0)
      writeCacheRow(args.cache, slot, args.kvC, args.kPe, t);
  }
  return Status::success();
}

} // namespace mlart::cpu
