//===- NaiveReport.cpp - Which steps the naive reference checked, printed -===//
#include "NaiveReport.h"

namespace mlarun {

void NaiveReport::add(int index, const NaiveCheck &check) {
  steps_.push_back({index, check});
  // NaN-safe: a step replaces the worst unless it is known to be no worse.
  if (steps_.size() == 1 || !(check.gated() <= worst().check.gated()))
    worst_ = steps_.size() - 1;
}

bool NaiveReport::ok() const {
  for (const Step &s : steps_)
    if (!ok(s.check))
      return false;
  return true;
}

void NaiveReport::printText(std::FILE *out) const {
  if (steps_.empty())
    return;
  for (const Step &s : steps_) {
    const NaiveCheck &c = s.check;
    std::fprintf(out, "naive %s step %d: end to end %.3e", phase_.c_str(),
                 s.index, c.endToEnd);
    if (c.bf16Floor > 0)
      std::fprintf(out, " (bf16 residual alone %.3e)", c.bf16Floor);
    if (c.perLayer)
      std::fprintf(out, ", worst layer %.3e (layer %lld)", c.perLayerMax,
                   (long long)c.worstLayer);
    std::fprintf(out, " -> %s\n", ok(c) ? "OK" : "MISMATCH");
  }
  // ||out - ref|| / ||ref - input||: what the layers add.
  const NaiveCheck &w = worst().check;
  std::fprintf(out,
               "vs float64 non-absorbed reference, end to end: relative "
               "error %.3e",
               w.endToEnd);
  if (w.bf16Floor > 0)
    std::fprintf(out, " (a bf16 residual stream alone: %.3e)", w.bf16Floor);
  std::fprintf(out, "\n");
  if (w.perLayer)
    std::fprintf(out,
                 "vs float64 non-absorbed reference, layer by layer: worst "
                 "relative error %.3e (layer %lld)\n",
                 w.perLayerMax, (long long)w.worstLayer);
  std::fprintf(out, "naive check (%s, tolerance %.1e) -> %s\n",
               w.perLayer ? "per layer" : "end to end", tolerance_,
               ok() ? "OK" : "MISMATCH");
}

void NaiveReport::printJsonSteps(std::FILE *out, bool &first) const {
  for (const Step &s : steps_) {
    const NaiveCheck &c = s.check;
    std::fprintf(out,
                 "%s{\"phase\": \"%s\", \"step\": %d, \"rel_error\": %.3e, "
                 "\"end_to_end_rel_error\": %.3e, \"bf16_floor\": %.3e",
                 first ? "" : ", ", phase_.c_str(), s.index, c.gated(),
                 c.endToEnd, c.bf16Floor);
    if (c.perLayer)
      std::fprintf(out, ", \"worst_layer\": %lld", (long long)c.worstLayer);
    std::fprintf(out, ", \"ok\": %s}", ok(c) ? "true" : "false");
    first = false;
  }
}

void printNaiveJson(std::FILE *out,
                    const std::vector<const NaiveReport *> &reports) {
  const NaiveCheck *worst = nullptr;
  for (const NaiveReport *r : reports)
    if (!r->empty() &&
        (!worst || !(r->worst().check.gated() <= worst->gated())))
      worst = &r->worst().check;
  if (worst) {
    std::fprintf(out,
                 ", \"naive_max_rel_error\": %.3e, "
                 "\"naive_end_to_end_rel_error\": %.3e, "
                 "\"naive_bf16_floor\": %.3e",
                 worst->gated(), worst->endToEnd, worst->bf16Floor);
    if (worst->perLayer)
      std::fprintf(out, ", \"naive_worst_layer\": %lld",
                   (long long)worst->worstLayer);
  }
  std::fprintf(out, ", \"naive_steps\": [");
  bool first = true;
  for (const NaiveReport *r : reports)
    r->printJsonSteps(out, first);
  std::fprintf(out, "]");
}

} // namespace mlarun
