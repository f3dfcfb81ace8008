//===- StreamPlan.cpp - Dependencies and stream assignment ----------------===//
#include "mlart/StreamPlan.h"

#include "TensorRefUtil.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <tuple>

namespace mlart {

namespace {

/// Exact test for two views with the same dtype and strides: both are boxes
/// of one row-major lattice when each stride exceeds everything the inner
/// dimensions can reach, so writing the offset between them in that mixed
/// radix gives per-dimension coordinate ranges, and the boxes share an
/// element only if the ranges meet in every dimension. Returns true
/// ("may overlap") whenever a precondition of that argument fails.
bool boxesMayOverlap(const TensorRef &a, const TensorRef &b) {
  const int64_t es = int64_t(dtypeSize(a.dtype));
  const TensorRef &lower = a.data <= b.data ? a : b;
  const TensorRef &upper = a.data <= b.data ? b : a;
  const int64_t bytes = static_cast<const char *>(upper.data) -
                        static_cast<const char *>(lower.data);
  if (bytes % es)
    return true;
  int64_t rest = bytes / es;

  // Dimensions where both boxes have one element carry no coordinate range
  // (and may have any stride); the others must be ordered outer to inner.
  struct Dim {
    int64_t stride, lowerSize, upperSize, offset;
  };
  Dim dims[kMaxRank];
  int n = 0;
  for (int d = 0; d < a.rank; ++d) {
    if (lower.sizes[d] == 1 && upper.sizes[d] == 1)
      continue;
    if (a.strides[d] <= 0 || (n && a.strides[d] >= dims[n - 1].stride))
      return true;
    dims[n++] = {a.strides[d], lower.sizes[d], upper.sizes[d], 0};
  }
  if (n == 0)
    return true; // single elements at the same address (intervals met)
  for (int d = 0; d < n; ++d) {
    dims[d].offset = rest / dims[d].stride;
    rest -= dims[d].offset * dims[d].stride;
  }
  if (rest != 0)
    return true;
  // Unique representation: what dimensions d.. can reach stays below the
  // stride of dimension d-1.
  int64_t reach = 0;
  for (int d = n - 1; d >= 1; --d) {
    const int64_t maxCoord = std::max(dims[d].lowerSize - 1,
                                      dims[d].offset + dims[d].upperSize - 1);
    reach += maxCoord * dims[d].stride;
    if (reach >= dims[d - 1].stride)
      return true;
  }
  for (int d = 0; d < n; ++d)
    if (dims[d].offset >= dims[d].lowerSize)
      return false; // [0, lowerSize) and [offset, ...) are disjoint
  return true;
}

bool sameStrides(const TensorRef &a, const TensorRef &b) {
  if (a.rank != b.rank || a.dtype != b.dtype)
    return false;
  for (int d = 0; d < a.rank; ++d)
    if (a.strides[d] != b.strides[d] &&
        !(a.sizes[d] == 1 && b.sizes[d] == 1))
      return false;
  return true;
}

} // namespace

MemoryAccess MemoryAccess::ofView(const TensorRef &view, bool write) {
  MemoryAccess m;
  m.view = view;
  std::tie(m.lo, m.hi) = byteRange(view); // empty view: lo == hi
  m.write = write;
  return m;
}

MemoryAccess MemoryAccess::ofInterval(uintptr_t lo, uintptr_t hi, bool write) {
  MemoryAccess m;
  m.lo = lo;
  m.hi = hi;
  m.write = write;
  return m;
}

bool mayOverlap(const MemoryAccess &a, const MemoryAccess &b) {
  if (a.lo >= a.hi || b.lo >= b.hi || a.hi <= b.lo || b.hi <= a.lo)
    return false;
  if (!a.view.data || !b.view.data)
    return true;
  // Either test may prove the views disjoint.
  if (sameStrides(a.view, b.view) && !boxesMayOverlap(a.view, b.view))
    return false;
  return !rowWindowsDisjoint(a.view, b.view);
}

bool mustFollow(const std::vector<MemoryAccess> &later,
                const std::vector<MemoryAccess> &earlier) {
  for (const MemoryAccess &l : later)
    for (const MemoryAccess &e : earlier)
      if ((l.write || e.write) && mayOverlap(l, e))
        return true;
  return false;
}

std::vector<std::vector<uint32_t>>
instructionDependencies(const std::vector<std::vector<MemoryAccess>> &accesses,
                        size_t *comparisons) {
  const size_t n = accesses.size();
  // Non-empty accesses by start address; a new resource (bucket) begins
  // wherever an access starts at or past the end of everything before it.
  struct Ref {
    uint32_t inst, index;
  };
  std::vector<Ref> byStart;
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < accesses[i].size(); ++k)
      if (accesses[i][k].lo < accesses[i][k].hi)
        byStart.push_back({uint32_t(i), uint32_t(k)});
  auto at = [&](Ref r) -> const MemoryAccess & {
    return accesses[r.inst][r.index];
  };
  std::sort(byStart.begin(), byStart.end(),
            [&](Ref a, Ref b) { return at(a).lo < at(b).lo; });
  std::vector<std::vector<uint32_t>> bucketOf(n);
  for (size_t i = 0; i < n; ++i)
    bucketOf[i].assign(accesses[i].size(), UINT32_MAX); // empty: none
  uint32_t buckets = 0;
  uintptr_t end = 0;
  for (size_t r = 0; r < byStart.size(); ++r) {
    const MemoryAccess &a = at(byStart[r]);
    if (r == 0 || a.lo >= end)
      ++buckets;
    end = r == 0 ? a.hi : std::max(end, a.hi);
    bucketOf[byStart[r].inst][byStart[r].index] = buckets - 1;
  }

  // In program order: compare with the earlier accesses of the same
  // resource (writes always, reads only when this access writes), then
  // add this instruction's accesses to their resources.
  std::vector<std::vector<Ref>> writes(buckets), reads(buckets);
  std::vector<uint32_t> seenBy(n, UINT32_MAX);
  std::vector<std::vector<uint32_t>> deps(n);
  size_t compared = 0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < accesses[i].size(); ++k) {
      const uint32_t b = bucketOf[i][k];
      if (b == UINT32_MAX)
        continue;
      const MemoryAccess &a = accesses[i][k];
      auto scan = [&](const std::vector<Ref> &earlier) {
        for (Ref e : earlier) {
          if (seenBy[e.inst] == i)
            continue;
          ++compared;
          if (mayOverlap(a, at(e))) {
            seenBy[e.inst] = uint32_t(i);
            deps[i].push_back(e.inst);
          }
        }
      };
      scan(writes[b]);
      if (a.write)
        scan(reads[b]);
    }
    for (size_t k = 0; k < accesses[i].size(); ++k)
      if (bucketOf[i][k] != UINT32_MAX)
        (accesses[i][k].write ? writes : reads)[bucketOf[i][k]].push_back(
            {uint32_t(i), uint32_t(k)});
    std::sort(deps[i].begin(), deps[i].end(), std::greater<uint32_t>());
  }
  if (comparisons)
    *comparisons = compared;
  return deps;
}

StreamPlan planStreams(const std::vector<std::vector<MemoryAccess>> &accesses,
                       int maxStreams) {
  const size_t n = accesses.size();
  StreamPlan plan;
  plan.stream.assign(n, 0);
  plan.waitFor.assign(n, {});
  plan.recordAfter.assign(n, false);
  if (maxStreams <= 1 || n == 0)
    return plan;

  const size_t streams = size_t(maxStreams);
  // tail[s]: last instruction issued on stream s (-1: unused).
  std::vector<int64_t> tail(streams, -1);
  // clock[i][s]: the last instruction of stream s known to complete before
  // instruction i starts (vector clock; -1 for none). A wait for j on stream
  // s is redundant when the waiting stream's clock already covers j.
  std::vector<std::vector<int64_t>> clock(n);
  const std::vector<std::vector<uint32_t>> allDeps =
      instructionDependencies(accesses);
  for (size_t i = 0; i < n; ++i) {
    const std::vector<uint32_t> &deps = allDeps[i]; // descending
    auto isDep = [&](int64_t j) {
      return j >= 0 && std::find(deps.begin(), deps.end(), uint32_t(j)) !=
                           deps.end();
    };

    // Continue the chain of the latest dependency when it is a stream's
    // tail; otherwise start a stream that is still unused, so that the
    // instruction can overlap the other streams' tails; otherwise take the
    // stream whose tail was issued longest ago (the likeliest to be done).
    int chosen = -1;
    for (size_t s = 0; s < streams; ++s)
      if (isDep(tail[s]) && (chosen < 0 || tail[s] > tail[size_t(chosen)]))
        chosen = int(s);
    for (size_t s = 0; s < streams && chosen < 0; ++s)
      if (tail[s] < 0)
        chosen = int(s);
    if (chosen < 0) {
      chosen = 0;
      for (size_t s = 1; s < streams; ++s)
        if (tail[s] < tail[size_t(chosen)])
          chosen = int(s);
    }
    const size_t s = size_t(chosen);

    std::vector<int64_t> now =
        tail[s] >= 0 ? clock[size_t(tail[s])]
                     : std::vector<int64_t>(streams, -1);
    for (uint32_t j : deps) {
      const size_t t = size_t(plan.stream[j]);
      if (t == s || now[t] >= int64_t(j))
        continue;
      plan.waitFor[i].push_back(j);
      plan.recordAfter[j] = true;
      for (size_t u = 0; u < streams; ++u)
        now[u] = std::max(now[u], clock[j][u]);
    }
    now[s] = int64_t(i);
    clock[i] = std::move(now);
    tail[s] = int64_t(i);
    plan.stream[i] = chosen;
    plan.numStreams = std::max(plan.numStreams, chosen + 1);
  }
  return plan;
}

} // namespace mlart
