//===- ArenaPlanner.h - Liveness-based placement of temporaries -----------===//
//
// Every temporary tensor of a lowered step lives in one scratch arena. Each
// temporary is live from the instruction that first writes it to the last
// instruction that reads it; two temporaries share bytes only when their
// live ranges are disjoint. The arena therefore grows with the widest point
// of the program, not with its length (layer count).
//
//===----------------------------------------------------------------------===//
#ifndef MLA_TARGET_ARENAPLANNER_H
#define MLA_TARGET_ARENAPLANNER_H

#include <cstdint>
#include <vector>

namespace mlir::mla {

/// One temporary: its size and the instruction range where it is live.
struct ArenaInterval {
  int64_t bytes = 0;
  int64_t firstUse = 0; ///< index of the first instruction touching it
  int64_t lastUse = 0;  ///< index of the last one (inclusive)
};

/// The placement: one byte offset per interval and the arena size.
struct ArenaPlan {
  std::vector<int64_t> offsets;
  int64_t totalBytes = 0;
};

/// Places intervals greedily, largest first, at the lowest `alignment`-
/// aligned offset that overlaps no placed interval whose range intersects.
ArenaPlan planArena(const std::vector<ArenaInterval> &intervals,
                    int64_t alignment = 256);

} // namespace mlir::mla

#endif // MLA_TARGET_ARENAPLANNER_H
