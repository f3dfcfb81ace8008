//===- DecodeTrace.h - mla-bench --decode-trace: one decode launch by CTA -===//
//
// The 16-head decode kernel can record, per CTA, its SM and %globaltimer
// at eight points (DecodeCommon.h, kDecodeTraceFields): entry, after the
// dependent-launch wait, first tile in shared memory, after the last tile,
// exit, and inside the epilogue: accumulators final, stores issued, after
// the cluster barrier. This file turns one launch's records into where its
// time goes: the prologue (entry to first tile), the tile loop, the
// epilogue's parts, and how far apart the CTAs start and finish.
// Pure host code, tested on the CPU (test/DecodeTraceTest.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MLART_BENCH_DECODETRACE_H
#define MLART_BENCH_DECODETRACE_H

#include <cstdint>
#include <string>
#include <vector>

namespace mlart::bench {

/// One CTA's record, in the kernel's order (cuda::DecodeTraceField in
/// DecodeCommon.h; timestamps in ns).
struct DecodeCtaTrace {
  uint64_t sm = 0, entry = 0, waited = 0, firstTile = 0, loopEnd = 0,
           exit = 0, drained = 0, stored = 0, synced = 0;
};

/// Values per CTA in the kernel's buffer (cuda::kDecodeTraceFields).
constexpr size_t kDecodeTraceValues = 9;

/// Records from the flat buffer (kDecodeTraceValues a CTA); CTAs whose
/// entry or exit stamp is 0 (did not run) are dropped.
std::vector<DecodeCtaTrace> parseDecodeTrace(const std::vector<uint64_t> &raw);

struct Spread {
  double min = 0, median = 0, max = 0; ///< microseconds
};

struct DecodeTraceSummary {
  int ctas = 0, sms = 0;
  double spanUs = 0; ///< first entry to last exit
  Spread wait, prologue, loop, epilogue;
  /// The epilogue's parts: the last MMAs draining, issuing the stores
  /// (output, or the partial into shared memory), the cluster barrier
  /// (waiting for the partner), and the merge after it.
  Spread drain, store, barrier, merge;
  /// Entry and exit times relative to the first entry.
  Spread entryAt, exitAt;
  /// Time the span has all CTAs in their tile loop: from the last first
  /// tile to the first loop end (0 if they never overlap).
  double allInLoopUs = 0;
};

/// Empty records give a summary of zeros.
DecodeTraceSummary summarizeDecodeTrace(const std::vector<DecodeCtaTrace> &t);

/// A few lines for mla-bench's output.
std::string formatDecodeTrace(const std::string &title,
                              const DecodeTraceSummary &s);

} // namespace mlart::bench

#endif // MLART_BENCH_DECODETRACE_H
