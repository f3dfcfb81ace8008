//===- NaiveReport.cpp - Which steps the naive reference checked, printed -===//
#include "NaiveReport.h"

namespace mlarun {
namespace {

const char *rowPart(const CacheCheck &c) {
  return c.worstIsRopeKey ? "rope key" : "latent";
}

} // namespace

void NaiveReport::add(int index, std::optional<NaiveCheck> check,
                      const CacheCheck &cache) {
  steps_.push_back({index, std::move(check), cache});
  const Step &s = steps_.back();
  // NaN-safe: a step replaces the worst unless it is known to be no worse.
  if (s.check && (!worst_ || !(s.check->gated() <= worstOutputs()->gated())))
    worst_ = steps_.size() - 1;
  if (steps_.size() == 1 ||
      cache.pastTolerance() > worstCache().cache.pastTolerance())
    worstCache_ = steps_.size() - 1;
}

bool NaiveReport::ok() const {
  for (const Step &s : steps_)
    if (!ok(s))
      return false;
  return true;
}

int64_t NaiveReport::cacheRowsChecked() const {
  int64_t n = 0;
  for (const Step &s : steps_)
    n += s.cache.rowsChecked();
  return n;
}

int64_t NaiveReport::cacheBytesOutside() const {
  int64_t n = 0;
  for (const Step &s : steps_)
    n += s.cache.bytesOutside;
  return n;
}

void NaiveReport::printCacheLine(std::FILE *out, const Step &s) const {
  const CacheCheck &c = s.cache;
  std::fprintf(out, "naive %s step %d cache: %lld rows checked",
               phase_.c_str(), s.index, (long long)c.rowsChecked());
  if (c.worstLayer < 0)
    std::fprintf(out, " (every slot -1)");
  else
    std::fprintf(out, " (%lld a layer), worst relative error %.3e (layer "
                 "%lld, %s)",
                 (long long)c.rowsPerLayer, c.worst, (long long)c.worstLayer,
                 rowPart(c));
  if (c.unchangedRows > 0)
    std::fprintf(out, ", %lld rows unchanged (not written)",
                 (long long)c.unchangedRows);
  std::fprintf(out, ", bytes changed outside the slots %lld -> %s\n",
               (long long)c.bytesOutside, c.ok() ? "OK" : "MISMATCH");
}

void NaiveReport::printText(std::FILE *out) const {
  if (steps_.empty())
    return;
  for (const Step &s : steps_) {
    if (!s.check) {
      std::fprintf(out,
                   "naive %s step %d: dummy step (every slot -1), outputs "
                   "not compared\n",
                   phase_.c_str(), s.index);
    } else {
      const NaiveCheck &c = *s.check;
      std::fprintf(out, "naive %s step %d: end to end %.3e", phase_.c_str(),
                   s.index, c.endToEnd);
      if (c.bf16Floor > 0)
        std::fprintf(out, " (bf16 residual alone %.3e)", c.bf16Floor);
      if (c.perLayer)
        std::fprintf(out, ", worst layer %.3e (layer %lld)", c.perLayerMax,
                     (long long)c.worstLayer);
      std::fprintf(out, " -> %s\n", outputsOk(c) ? "OK" : "MISMATCH");
    }
    printCacheLine(out, s);
  }
  // ||out - ref|| / ||ref - input||: what the layers add.
  const NaiveCheck *w = worstOutputs();
  if (w) {
    std::fprintf(out,
                 "vs float64 non-absorbed reference, end to end: relative "
                 "error %.3e",
                 w->endToEnd);
    if (w->bf16Floor > 0)
      std::fprintf(out, " (a bf16 residual stream alone: %.3e)",
                   w->bf16Floor);
    std::fprintf(out, "\n");
    if (w->perLayer)
      std::fprintf(out,
                   "vs float64 non-absorbed reference, layer by layer: worst "
                   "relative error %.3e (layer %lld)\n",
                   w->perLayerMax, (long long)w->worstLayer);
  } else {
    std::fprintf(out, "vs float64 non-absorbed reference: outputs not "
                      "compared (dummy steps only)\n");
  }
  // ||cache row - ref row|| / ||ref row||, then the bytes nobody should
  // have written.
  const Step &wc = worstCache();
  std::fprintf(out, "cache rows vs float64 reference: %lld rows checked",
               (long long)cacheRowsChecked());
  if (wc.cache.worstLayer >= 0)
    std::fprintf(out,
                 ", worst relative error %.3e (step %d, layer %lld, %s; "
                 "tolerance %.1e)",
                 wc.cache.worst, wc.index, (long long)wc.cache.worstLayer,
                 rowPart(wc.cache), wc.cache.worstTolerance);
  std::fprintf(out, ", bytes changed outside the slots %lld\n",
               (long long)cacheBytesOutside());
  std::fprintf(out, "naive check (%s, tolerance %.1e) -> %s\n",
               w && w->perLayer ? "per layer" : "end to end", tolerance_,
               ok() ? "OK" : "MISMATCH");
}

void NaiveReport::writeJsonSteps(mlart::tool::JsonWriter &json) const {
  using mlart::tool::NumberFormat;
  const NumberFormat e3 = NumberFormat::scientific(3);
  for (const Step &s : steps_) {
    json.beginObject();
    json.member("phase", phase_);
    json.memberInt("step", s.index);
    if (s.check) {
      const NaiveCheck &c = *s.check;
      json.memberNumber("rel_error", c.gated(), e3);
      json.memberNumber("end_to_end_rel_error", c.endToEnd, e3);
      json.memberNumber("bf16_floor", c.bf16Floor, e3);
      if (c.perLayer)
        json.memberInt("worst_layer", c.worstLayer);
    } else {
      json.memberBool("dummy", true);
    }
    const CacheCheck &cc = s.cache;
    json.memberInt("cache_rows_checked", cc.rowsChecked());
    if (cc.worstLayer >= 0) {
      json.memberNumber("cache_rel_error", cc.worst, e3);
      json.memberInt("cache_worst_layer", cc.worstLayer);
      json.member("cache_worst_part",
                  cc.worstIsRopeKey ? "rope_key" : "latent");
    }
    json.memberInt("cache_rows_unchanged", cc.unchangedRows);
    json.memberInt("cache_bytes_changed_outside", cc.bytesOutside);
    json.memberBool("cache_ok", cc.ok());
    json.memberBool("ok", ok(s));
    json.endObject();
  }
}

void writeNaiveJson(mlart::tool::JsonWriter &json,
                    const std::vector<const NaiveReport *> &reports) {
  using mlart::tool::NumberFormat;
  const NumberFormat e3 = NumberFormat::scientific(3);
  const NaiveCheck *worst = nullptr;
  const NaiveReport::Step *worstCache = nullptr;
  int64_t rows = 0, bytesOutside = 0;
  for (const NaiveReport *r : reports) {
    if (r->empty())
      continue;
    const NaiveCheck *w = r->worstOutputs();
    if (w && (!worst || !(w->gated() <= worst->gated())))
      worst = w;
    if (!worstCache || r->worstCache().cache.pastTolerance() >
                           worstCache->cache.pastTolerance())
      worstCache = &r->worstCache();
    rows += r->cacheRowsChecked();
    bytesOutside += r->cacheBytesOutside();
  }
  if (worst) {
    json.memberNumber("naive_max_rel_error", worst->gated(), e3);
    json.memberNumber("naive_end_to_end_rel_error", worst->endToEnd, e3);
    json.memberNumber("naive_bf16_floor", worst->bf16Floor, e3);
    if (worst->perLayer)
      json.memberInt("naive_worst_layer", worst->worstLayer);
  }
  json.memberInt("naive_cache_rows_checked", rows);
  if (worstCache && worstCache->cache.worstLayer >= 0) {
    json.memberNumber("naive_cache_max_rel_error", worstCache->cache.worst, e3);
    json.memberInt("naive_cache_worst_layer", worstCache->cache.worstLayer);
  }
  json.memberInt("naive_cache_bytes_changed_outside", bytesOutside);
  json.key("naive_steps");
  json.beginArray();
  for (const NaiveReport *r : reports)
    r->writeJsonSteps(json);
  json.endArray();
}

} // namespace mlarun
