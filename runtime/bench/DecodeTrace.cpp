//===- DecodeTrace.cpp - mla-bench --decode-trace: one decode launch ------===//
#include "DecodeTrace.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace mlart::bench {

namespace {


Spread spreadOf(std::vector<double> v) {
  Spread s;
  if (v.empty())
    return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = v[v.size() / 2];
  return s;
}

double us(uint64_t later, uint64_t earlier) {
  return later >= earlier ? double(later - earlier) / 1000.0 : 0.0;
}

} // namespace

std::vector<DecodeCtaTrace> parseDecodeTrace(const std::vector<uint64_t> &raw) {
  std::vector<DecodeCtaTrace> out;
  constexpr size_t n = kDecodeTraceValues;
  for (size_t i = 0; i + n <= raw.size(); i += n) {
    DecodeCtaTrace t{raw[i],     raw[i + 1], raw[i + 2],
                     raw[i + 3], raw[i + 4], raw[i + 5],
                     raw[i + 6], raw[i + 7], raw[i + 8]};
    if (t.exit == 0 || t.entry == 0)
      continue;
    if (t.firstTile == 0) // no tile: the loop took no time
      t.firstTile = t.loopEnd = t.waited;
    out.push_back(t);
  }
  return out;
}

DecodeTraceSummary summarizeDecodeTrace(const std::vector<DecodeCtaTrace> &t) {
  DecodeTraceSummary s;
  if (t.empty())
    return s;
  uint64_t first = t[0].entry, last = t[0].exit, lastFirstTile = 0,
           firstLoopEnd = t[0].loopEnd;
  std::set<uint64_t> sms;
  for (const DecodeCtaTrace &c : t) {
    first = std::min(first, c.entry);
    last = std::max(last, c.exit);
    lastFirstTile = std::max(lastFirstTile, c.firstTile);
    firstLoopEnd = std::min(firstLoopEnd, c.loopEnd);
    sms.insert(c.sm);
  }
  std::vector<double> wait, prologue, loop, epilogue, entryAt, exitAt, drain,
      store, barrier, merge;
  for (const DecodeCtaTrace &c : t) {
    wait.push_back(us(c.waited, c.entry));
    prologue.push_back(us(c.firstTile, c.entry));
    loop.push_back(us(c.loopEnd, c.firstTile));
    epilogue.push_back(us(c.exit, c.loopEnd));
    drain.push_back(us(c.drained, c.loopEnd));
    store.push_back(us(c.stored, c.drained));
    barrier.push_back(us(c.synced, c.stored));
    merge.push_back(us(c.exit, c.synced));
    entryAt.push_back(us(c.entry, first));
    exitAt.push_back(us(c.exit, first));
  }
  s.ctas = int(t.size());
  s.sms = int(sms.size());
  s.spanUs = us(last, first);
  s.wait = spreadOf(wait);
  s.prologue = spreadOf(prologue);
  s.loop = spreadOf(loop);
  s.epilogue = spreadOf(epilogue);
  s.drain = spreadOf(drain);
  s.store = spreadOf(store);
  s.barrier = spreadOf(barrier);
  s.merge = spreadOf(merge);
  s.entryAt = spreadOf(entryAt);
  s.exitAt = spreadOf(exitAt);
  s.allInLoopUs = us(firstLoopEnd, lastFirstTile);
  return s;
}

std::string formatDecodeTrace(const std::string &title,
                              const DecodeTraceSummary &s) {
  char buf[1024];
  auto row = [](const char *name, const Spread &v) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-28s %8.2f %8.2f %8.2f\n", name,
                  v.min, v.median, v.max);
    return std::string(line);
  };
  std::snprintf(buf, sizeof buf,
                "== decode trace: %s: %d CTAs on %d SMs, span %.2f us, all "
                "CTAs in their tile loop for %.2f us ==\n  %-28s %8s %8s "
                "%8s\n",
                title.c_str(), s.ctas, s.sms, s.spanUs, s.allInLoopUs,
                "us (min / median / max)", "min", "median", "max");
  return std::string(buf) + row("entry (after first entry)", s.entryAt) +
         row("dependent-launch wait", s.wait) +
         row("entry to first tile", s.prologue) +
         row("tile loop", s.loop) + row("epilogue", s.epilogue) +
         row("  last MMAs drain", s.drain) + row("  stores issued", s.store) +
         row("  cluster barrier", s.barrier) + row("  merge, exit", s.merge) +
         row("exit (after first entry)", s.exitAt);
}

} // namespace mlart::bench
