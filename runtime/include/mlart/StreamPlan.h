//===- StreamPlan.h - Spreading a program's instructions over streams -----===//
//
// The executor may issue independent instructions on several device streams
// so that they overlap (in the V2-Lite decode step: kv_a_proj, its norm and
// the cache write beside q_proj and q_absorb). This file holds the part of
// that decision that needs no device: which bytes each instruction touches,
// which earlier instructions it must therefore follow, and a stream for each
// instruction with the cross-stream waits that keep program order wherever
// it matters. docs/runtime.md ("Concurrent streams") explains the rules.
//
// The plan is made from the addresses the instructions will really use
// (after binding), so two buffers bound to overlapping memory are ordered
// like any other conflicting pair.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_STREAMPLAN_H
#define MLART_STREAMPLAN_H

#include "mlart/TensorRef.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mlart {

/// One region an instruction reads or writes: a strided view of device
/// memory, or an opaque resource (a whole cache, the device's error record)
/// given as a byte interval [lo, hi) in its own address space.
struct MemoryAccess {
  /// A strided view (rank >= 0), or an interval when `view.data` is null.
  TensorRef view;
  uintptr_t lo = 0, hi = 0;
  bool write = false;

  static MemoryAccess ofView(const TensorRef &view, bool write);
  static MemoryAccess ofInterval(uintptr_t lo, uintptr_t hi, bool write);
};

/// True when the two accesses may touch a common byte. Exact for two views
/// that are boxes of one row-major array with the same strides (e.g. column
/// ranges of one tensor); otherwise it compares byte intervals, which may
/// answer true for views that interleave without touching.
bool mayOverlap(const MemoryAccess &a, const MemoryAccess &b);

/// True when instruction accesses `later` must stay after `earlier`: some
/// pair may overlap and at least one of the two writes.
bool mustFollow(const std::vector<MemoryAccess> &later,
                const std::vector<MemoryAccess> &earlier);

/// Per instruction (accesses in program order): the earlier instructions it
/// mustFollow(), latest first. Accesses are bucketed by resource, i.e. by
/// maximal runs of overlapping byte intervals, so that only instructions
/// touching one resource are compared, and a read only against writes:
/// linear in the program for the usual shape of many small buffers, instead
/// of a scan over every earlier instruction. `comparisons` (tests), when
/// not null, receives how many access pairs were compared.
std::vector<std::vector<uint32_t>>
instructionDependencies(const std::vector<std::vector<MemoryAccess>> &accesses,
                        size_t *comparisons = nullptr);

/// Where each instruction runs and what it waits for.
struct StreamPlan {
  /// Streams used; stream 0 is the caller's. 1 means "all in order".
  int numStreams = 1;
  /// Per instruction: its stream.
  std::vector<int> stream;
  /// Per instruction: instructions on other streams it must wait for
  /// (already pruned of waits implied by earlier ones).
  std::vector<std::vector<uint32_t>> waitFor;
  /// Per instruction: some later instruction waits for it, so an event is
  /// recorded on its stream right after it.
  std::vector<bool> recordAfter;
};

/// Plans `accesses` (one vector per instruction, in program order) over at
/// most `maxStreams` streams. Every pair that mustFollow() stays ordered
/// (same stream, or a wait); the first instruction runs on stream 0. With
/// maxStreams <= 1 everything runs on stream 0 with no waits.
StreamPlan planStreams(const std::vector<std::vector<MemoryAccess>> &accesses,
                       int maxStreams);

} // namespace mlart

#endif // MLART_STREAMPLAN_H
