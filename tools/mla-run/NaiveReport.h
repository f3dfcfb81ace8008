//===- NaiveReport.h - Which steps the naive reference checked, printed ---===//
//
// mla-run checks every step of a phase (the main artifact's steps, or the
// decode steps after a prefill) against the float64 reference. A report
// keeps each step's figures so the output says which steps were checked and
// how each fared, then summarizes the phase by its worst step.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_RUN_NAIVEREPORT_H
#define MLA_RUN_NAIVEREPORT_H

#include "NaiveCheck.h"

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace mlarun {

class NaiveReport {
public:
  struct Step {
    int index = 0; ///< within the phase
    NaiveCheck check;
  };

  /// `phase` names the steps in the output ("decode", "prefill").
  NaiveReport(std::string phase, double tolerance)
      : phase_(std::move(phase)), tolerance_(tolerance) {}

  void add(int index, const NaiveCheck &check);
  bool empty() const { return steps_.empty(); }
  /// Every checked step within the tolerance (NaN is not).
  bool ok() const;
  bool ok(const NaiveCheck &check) const {
    return check.gated() <= tolerance_;
  }
  /// The step with the largest gated figure; requires !empty().
  const Step &worst() const { return steps_[worst_]; }

  /// A line per step, then the worst step's figures and the verdict.
  void printText(std::FILE *out) const;
  /// JSON array elements, one object per step, comma-separated; `first`
  /// says whether an element was printed before (and is updated).
  void printJsonSteps(std::FILE *out, bool &first) const;

private:
  std::string phase_;
  double tolerance_;
  std::vector<Step> steps_;
  size_t worst_ = 0;
};

/// The JSON members (each after ", ") for reports in run order: the worst
/// checked step of all (naive_max_rel_error, ...) and "naive_steps".
void printNaiveJson(std::FILE *out,
                    const std::vector<const NaiveReport *> &reports);

} // namespace mlarun

#endif // MLA_RUN_NAIVEREPORT_H
