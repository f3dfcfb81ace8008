//===- PreparedAliases.h - Prepared bytes the caller's weights already hold -===//
//
// The prepare program of a fused projection copies whole weight buffers
// into consecutive bytes of the prepared arena ([w_q; w_kv_a]). An engine
// that keeps those weights in one tensor (as vLLM keeps fused_qkv_a_proj)
// binds them as adjacent slices of it, and then the prepared bytes already
// exist, in the caller's memory: the executor reads them there instead of
// copying, and allocates no prepared arena for them.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_SRC_PREPAREDALIASES_H
#define MLART_SRC_PREPAREDALIASES_H

#include "mlart/Artifact.h"

#include <vector>

namespace mlart {

struct PreparedAliases {
  /// Per view of the artifact: for a prepared view that lies in an aliased
  /// run, the address its run's byte 0 would have (so the view resolves to
  /// caller memory); nullptr for every other view.
  std::vector<void *> viewBase;
  /// Per prepare instruction: whether it must still copy.
  std::vector<bool> copyNeeded;
  /// Whether any prepared view still reads the prepared arena.
  bool needsArena = false;
};

/// Finds the runs of the prepare program that copy whole, contiguously
/// bound weight buffers into consecutive prepared bytes, in an order in
/// which the bound buffers are also consecutive, and that no other copy
/// writes into and no prepared view straddles. `bufferData` is each
/// buffer's bound address (null: unbound, never aliased).
PreparedAliases planPreparedAliases(const Artifact &artifact,
                                    const std::vector<void *> &bufferData);

} // namespace mlart

#endif // MLART_SRC_PREPAREDALIASES_H
