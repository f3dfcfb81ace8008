//===- NaiveReport.h - Which steps the naive reference checked, printed ---===//
//
// mla-run checks every step of a phase (the main artifact's steps, or the
// decode steps after a prefill) against the float64 reference: its outputs
// (NaiveCheck) and what it wrote into the caches (CacheCheck). A report
// keeps each step's figures so the output says which steps were checked and
// how each fared, then summarizes the phase by its worst step.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_RUN_NAIVEREPORT_H
#define MLA_RUN_NAIVEREPORT_H

#include "CacheCheck.h"
#include "NaiveCheck.h"

#include "common/JsonWriter.h"

#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlarun {

class NaiveReport {
public:
  struct Step {
    int index = 0; ///< within the phase
    /// The outputs' figures; none for a dummy step (every slot -1), whose
    /// outputs a server discards and the reference cannot predict (the
    /// step attends to rows it never wrote).
    std::optional<NaiveCheck> check;
    CacheCheck cache;
  };

  /// `phase` names the steps in the output ("decode", "prefill").
  NaiveReport(std::string phase, double tolerance)
      : phase_(std::move(phase)), tolerance_(tolerance) {}

  void add(int index, std::optional<NaiveCheck> check,
           const CacheCheck &cache);
  bool empty() const { return steps_.empty(); }
  /// Every checked step within the tolerance (NaN is not), caches included.
  bool ok() const;
  bool ok(const Step &step) const {
    return (!step.check || outputsOk(*step.check)) && step.cache.ok();
  }
  bool outputsOk(const NaiveCheck &check) const {
    return check.gated() <= tolerance_;
  }
  /// The step whose outputs have the largest gated figure; null when no
  /// step's outputs were compared.
  const NaiveCheck *worstOutputs() const {
    return worst_ ? &*steps_[*worst_].check : nullptr;
  }
  /// The step whose cache rows are furthest past their tolerance; requires
  /// !empty().
  const Step &worstCache() const { return steps_[worstCache_]; }
  /// Over all steps: rows checked and bytes changed outside the slots.
  int64_t cacheRowsChecked() const;
  int64_t cacheBytesOutside() const;

  /// A line per step for its outputs and one for its caches, then the worst
  /// step's figures and the verdict.
  void printText(std::FILE *out) const;
  /// One JSON object per step, into the array `json` is writing.
  void writeJsonSteps(mlart::tool::JsonWriter &json) const;

private:
  void printCacheLine(std::FILE *out, const Step &step) const;

  std::string phase_;
  double tolerance_;
  std::vector<Step> steps_;
  std::optional<size_t> worst_;
  size_t worstCache_ = 0;
};

/// The JSON members, into the object `json` is writing, for reports in run
/// order: the worst checked step of all (naive_max_rel_error, ...), the
/// cache writes of all (naive_cache_...) and "naive_steps".
void writeNaiveJson(mlart::tool::JsonWriter &json,
                    const std::vector<const NaiveReport *> &reports);

} // namespace mlarun

#endif // MLA_RUN_NAIVEREPORT_H
