//===- CuptiTrace.h - CUPTI activity records for mla-bench ------*- C++ -*-===//
//
// Collects the device activities (kernels, copies, memsets) of this process
// through the CUPTI activity API, for mla-bench --timeline. Built only when
// CMake finds CUPTI (MLA_BENCH_HAVE_CUPTI); the product libraries never
// link it. One trace at a time per process (CUPTI's buffer callbacks are
// process-wide).
//
//===----------------------------------------------------------------------===//
#ifndef MLART_BENCH_CUPTITRACE_H
#define MLART_BENCH_CUPTITRACE_H

#include "Timeline.h"

#include "mlart/StatusOr.h"

#include <cstdint>
#include <vector>

namespace mlart::bench {

class CuptiTrace {
public:
  /// Registers the buffer callbacks and enables the concurrent-kernel,
  /// memcpy and memset activity kinds. Fails (Unavailable) when the CUPTI
  /// library is older than the headers it was compiled with.
  static Status start();
  /// CUPTI's timestamp (ns, the clock of the activity records).
  static StatusOr<uint64_t> now();
  /// Flushes and disables the activity kinds; returns every record
  /// collected since start(). Fails when CUPTI dropped records or a
  /// callback met an error.
  static StatusOr<std::vector<TraceActivity>> stop();
};

} // namespace mlart::bench

#endif // MLART_BENCH_CUPTITRACE_H
