//===- ArenaPlanner.cpp - Greedy interval placement in the scratch arena --===//
#include "mla/Target/ArenaPlanner.h"

#include <algorithm>
#include <numeric>

using namespace mlir::mla;

namespace {
int64_t alignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }
bool overlapInTime(const ArenaInterval &a, const ArenaInterval &b) {
  return a.firstUse <= b.lastUse && b.firstUse <= a.lastUse;
}
} // namespace

ArenaPlan mlir::mla::planArena(const std::vector<ArenaInterval> &intervals,
                               int64_t alignment) {
  ArenaPlan plan;
  plan.offsets.assign(intervals.size(), 0);
  std::vector<size_t> order(intervals.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first, then earliest: big buffers get the low offsets that many
  // small ones can later share around.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return intervals[a].bytes > intervals[b].bytes;
  });
  std::vector<size_t> placed;
  for (size_t i : order) {
    const ArenaInterval &cur = intervals[i];
    // Byte ranges of already placed intervals that are live at the same time.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed)
      if (overlapInTime(cur, intervals[j]))
        busy.push_back({plan.offsets[j], plan.offsets[j] + intervals[j].bytes});
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (auto [begin, end] : busy) {
      if (offset + cur.bytes <= begin)
        break;
      offset = std::max(offset, alignUp(end, alignment));
    }
    plan.offsets[i] = offset;
    plan.totalBytes = std::max(plan.totalBytes, offset + cur.bytes);
    placed.push_back(i);
  }
  plan.totalBytes = alignUp(plan.totalBytes, alignment);
  return plan;
}
