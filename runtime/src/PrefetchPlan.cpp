//===- PrefetchPlan.cpp - Which bytes to warm in L2, and when -------------===//
#include "mlart/PrefetchPlan.h"

#include <algorithm>
#include <set>
#include <utility>

namespace mlart {

namespace {

/// Appends ranges of `from` not yet in `seen` to `out`, within `budget`
/// bytes and kMaxPrefetchRanges entries; returns the bytes taken.
size_t take(const std::vector<PrefetchRange> &from, size_t budget,
            size_t minBytes, std::set<std::pair<const void *, size_t>> &seen,
            std::vector<PrefetchRange> &out, size_t used) {
  for (const PrefetchRange &r : from) {
    if (used >= budget || int(out.size()) >= kMaxPrefetchRanges)
      break;
    if (r.bytes < minBytes || !r.data || !seen.insert({r.data, r.bytes}).second)
      continue;
    PrefetchRange cut = r;
    cut.bytes = std::min(r.bytes, budget - used);
    out.push_back(cut);
    used += cut.bytes;
  }
  return used;
}

} // namespace

bool PrefetchPlan::empty() const {
  if (!atStart.empty() || (firstDecode >= 0 && decodeKvBytes > 0))
    return false;
  for (const std::vector<PrefetchRange> &a : afterDecode)
    if (!a.empty())
      return false;
  return true;
}

PrefetchPlan planL2Prefetch(const std::vector<PrefetchCandidate> &program,
                            const PrefetchBudget &budget) {
  PrefetchPlan plan;
  plan.afterDecode.resize(program.size());
  std::set<std::pair<const void *, size_t>> seen;

  // The prefix up to the first decode.
  size_t i = 0, used = 0;
  for (; i < program.size() && !program[i].isDecode; ++i)
    used = take(program[i].constantReads, budget.startBytes,
                budget.minRangeBytes, seen, plan.atStart, used);
  if (i < program.size()) {
    plan.firstDecode = int(i);
    plan.decodeKvBytes = budget.decodeKvBytes;
  }

  // Each decode: the reads after it, up to the next decode.
  while (i < program.size()) {
    const size_t decode = i;
    used = 0;
    for (++i; i < program.size() && !program[i].isDecode; ++i)
      used = take(program[i].constantReads, budget.afterDecodeBytes,
                  budget.minRangeBytes, seen, plan.afterDecode[decode], used);
  }
  return plan;
}

} // namespace mlart
