//===- PrefetchPlan.h - Which bytes to warm in L2, and when ---------------===//
//
// A decode step is a chain of short kernels around one long one: the query
// projections read ~17 MB of weights before the attention can start, the
// attention streams the whole cache, and the V-up / output projections read
// ~10 MB more after it. Each small GEMM fetches its weight from DRAM with
// few CTAs, far below copy bandwidth. The executor therefore asks L2 to
// fetch ahead (docs/runtime.md, "L2 prefetch"):
//
//  * at the start of the program, on a side stream: the weights of the
//    instructions before the first decode attention, in program order, then
//    the first KV tiles of that decode's splits;
//  * as each decode attention finishes (DecodeAttentionArgs::prefetchAfter):
//    the weights of the instructions after it, up to the next decode.
//
// A prefetch only warms L2; it never changes a result. This file holds the
// device-free part: picking the ranges from what each instruction reads.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_PREFETCHPLAN_H
#define MLART_PREFETCHPLAN_H

#include "mlart/Kernels.h"

#include <cstddef>
#include <vector>

namespace mlart {

/// What one instruction reads that is worth warming: ranges no instruction
/// of the program writes (weights), largest reads only.
struct PrefetchCandidate {
  bool isDecode = false;
  std::vector<PrefetchRange> constantReads;
};

struct PrefetchBudget {
  /// Weight bytes prefetched at the start / after one decode, at most.
  size_t startBytes = size_t(24) << 20;
  size_t afterDecodeBytes = size_t(24) << 20;
  /// KV bytes of the first decode prefetched at the start, at most.
  size_t decodeKvBytes = size_t(16) << 20;
  /// Reads smaller than this are not worth a hint.
  size_t minRangeBytes = size_t(256) << 10;
};

struct PrefetchPlan {
  /// Weights before the first decode (program order; each range once).
  std::vector<PrefetchRange> atStart;
  /// The first decode attention, or -1 (then atStart covers the program).
  int firstDecode = -1;
  size_t decodeKvBytes = 0;
  /// Per instruction: what a decode asks L2 to fetch as it finishes (the
  /// weights of the instructions up to the next decode); empty otherwise.
  std::vector<std::vector<PrefetchRange>> afterDecode;

  bool empty() const;
};

/// The plan for instructions `program` (in program order). A range read
/// by several instructions is taken once, where it is first read; each list
/// keeps at most kMaxPrefetchRanges ranges and its byte budget (a range
/// that would pass the budget is cut, the rest dropped).
PrefetchPlan planL2Prefetch(const std::vector<PrefetchCandidate> &program,
                            const PrefetchBudget &budget = PrefetchBudget());

} // namespace mlart

#endif // MLART_PREFETCHPLAN_H
