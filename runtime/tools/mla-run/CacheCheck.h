//===- CacheCheck.h - What a step wrote into its caches, checked ----------===//
//
// The output checks (NaiveCheck) compare what a step returned. A step that
// writes no cache row, or wrong rows, can still return the right outputs (a
// prefill attends to its new tokens from its inputs), and the next step
// reads the damage. So the caches after the step are compared with the
// float64 reference and with the snapshot taken before it:
//
//  * each token t with a slot s = slot_mapping[t] >= 0: row s of every
//    layer's cache must hold the reference's latent and rope key of t. The
//    error is norm-wise over the layer's written rows, ||got - want|| /
//    ||want||, for the latent and the rope key separately (the rope key is
//    a small part of the row and would hide in the whole row's norm);
//  * every row that is no token's slot must keep its bytes.
//
// A dummy step (every slot -1) checks no row and must change no byte.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_RUN_CACHECHECK_H
#define MLA_RUN_CACHECHECK_H

#include "NaiveReference.h"

#include "mlart/Artifact.h"

#include <cstdint>
#include <vector>

namespace mlarun {

struct CacheCheck {
  /// Tokens with a slot; every layer checks this many rows.
  int64_t rowsPerLayer = 0;
  int64_t layers = 0;
  /// The worst layer (relative to its tolerance): its error, tolerance and
  /// which part of the row. -1 when no row was checked.
  double worst = 0.0;
  double worstTolerance = 0.0;
  int64_t worstLayer = -1;
  bool worstIsRopeKey = false;
  /// Checked rows whose bytes are as before the step: most likely never
  /// written (a diagnosis; the error figure decides).
  int64_t unchangedRows = 0;
  /// Bytes that changed in rows that are no token's slot.
  int64_t bytesOutside = 0;
  /// Every layer within its tolerance.
  bool withinTolerance = true;

  int64_t rowsChecked() const { return rowsPerLayer * layers; }
  /// The worst layer's error over its tolerance (> 1: past it).
  double pastTolerance() const;
  bool ok() const { return withinTolerance && bytesOutside == 0; }
};

/// The relative rounding of one value stored in a cache of `desc`: 0 for
/// plain (bf16, f16, f32) caches, whose rows hold the step's values as they
/// are; half a unit in the last place for fp8, 2^-4 for e4m3 (3 mantissa
/// bits, fp8_ds_mla's latent too) and 2^-3 for e5m2.
double fp8Rounding(const mlart::KVCacheDesc &desc);

/// The relative-error tolerance of a layer's rows: `tolerance` on top of
/// the rounding of the cache's encoding (fp8Rounding).
double cacheRowTolerance(const mlart::KVCacheDesc &desc, double tolerance);

/// The tolerance of a step's outputs against the float64 reference:
/// `tolerance`, plus half the coarsest cache's fp8Rounding (attention
/// averages many rounded rows; measured on V2-Lite layers at 0.2 of the
/// rounding for both encodings, so this leaves 2.5x).
double naiveOutputTolerance(const std::vector<mlart::CacheDecl> &caches,
                            double tolerance);

/// Whether the step writes no row at all: a dummy (warm-up, profile) step,
/// every slot -1.
mlart::StatusOr<bool> isDummyStep(const NaiveStep &step);

/// Compares the caches after the step (`after`, a layer's bytes each) with
/// `want` (the reference's rows, layer order; may be empty when no token has
/// a slot) and with the snapshot in `step`.
mlart::StatusOr<CacheCheck>
checkCacheWrites(const NaiveStep &step,
                 const std::vector<NaiveCacheRows> &want,
                 const std::vector<std::vector<uint8_t>> &after,
                 double tolerance);

} // namespace mlarun

#endif // MLA_RUN_CACHECHECK_H
