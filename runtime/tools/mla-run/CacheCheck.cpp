//===- CacheCheck.cpp - What a step wrote into its caches, checked --------===//
#include "CacheCheck.h"

#include "mlart/Artifact.h"
#include "mlart/KVCacheLayout.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

using namespace mlart;

namespace mlarun {
namespace {

/// The step's slots, one a token, each negative (no row) or inside
/// `numSlots`.
StatusOr<std::vector<int64_t>> stepSlots(const NaiveStep &step,
                                         int64_t numSlots) {
  auto it = step.tensors.find("slot_mapping");
  if (it == step.tensors.end())
    return invalidArgument("the cache check needs mla-gen's slot_mapping");
  const HostTensorView &view = it->second;
  if (view.dtype != DType::I64 && view.dtype != DType::I32)
    return invalidArgument("cache check: slot_mapping must be i64 or i32");
  std::vector<int64_t> slots(size_t(view.numElements()));
  for (size_t t = 0; t < slots.size(); ++t) {
    // Exact: through float, slots past 2^24 would round.
    if (view.dtype == DType::I64) {
      std::memcpy(&slots[t], view.data + t * sizeof(int64_t), sizeof(int64_t));
    } else {
      int32_t s;
      std::memcpy(&s, view.data + t * sizeof(int32_t), sizeof(int32_t));
      slots[t] = s;
    }
    if (slots[t] >= numSlots)
      return outOfRange("cache check: slot_mapping[" + std::to_string(t) +
                        "] = " + std::to_string(slots[t]) +
                        " is outside the cache's " + std::to_string(numSlots) +
                        " slots");
  }
  return slots;
}

/// sqrt(diff / ref): the norm-wise relative error; NaN counts as infinite.
double relative(double diff, double ref) {
  double rel = ref > 0 ? std::sqrt(diff / ref) : std::sqrt(diff);
  return std::isnan(rel) ? INFINITY : rel;
}

/// How far `rel` is past `tol` (the worst layer is the one furthest past its
/// own tolerance).
double overTolerance(double rel, double tol) {
  if (tol > 0)
    return rel / tol;
  return rel > 0 ? INFINITY : 0.0;
}

} // namespace

double CacheCheck::pastTolerance() const {
  return overTolerance(worst, worstTolerance);
}

double fp8Rounding(const KVCacheDesc &desc) {
  if (desc.layout == CacheLayout::Plain)
    return 0.0;
  return desc.dtype == DType::F8E5M2 ? 0.125 : 0.0625;
}

double cacheRowTolerance(const KVCacheDesc &desc, double tolerance) {
  return tolerance + fp8Rounding(desc);
}

double naiveOutputTolerance(const std::vector<CacheDecl> &caches,
                            double tolerance) {
  double rounding = 0.0;
  for (const CacheDecl &c : caches)
    rounding = std::max(rounding, fp8Rounding(c.desc));
  return tolerance + rounding / 2;
}

StatusOr<bool> isDummyStep(const NaiveStep &step) {
  if (step.caches.empty())
    return invalidArgument("cache check: the step has no cache");
  MLART_ASSIGN_OR_RETURN(std::vector<int64_t> slots,
                         stepSlots(step, step.caches[0].desc.numSlots()));
  for (int64_t s : slots)
    if (s >= 0)
      return false;
  return !slots.empty();
}

StatusOr<CacheCheck>
checkCacheWrites(const NaiveStep &step,
                 const std::vector<NaiveCacheRows> &want,
                 const std::vector<std::vector<uint8_t>> &after,
                 double tolerance) {
  const size_t layers = step.caches.size();
  if (after.size() != layers)
    return invalidArgument("cache check: " + std::to_string(after.size()) +
                           " caches after the step, " +
                           std::to_string(layers) + " before");
  CacheCheck check;
  check.layers = int64_t(layers);
  for (size_t layer = 0; layer < layers; ++layer) {
    const CacheSnapshot &before = step.caches[layer];
    const KVCacheDesc &desc = before.desc;
    const std::string where = "cache check, layer " + std::to_string(layer);
    if (after[layer].size() != before.bytes.size())
      return invalidArgument(where + ": the cache changed size");
    MLART_ASSIGN_OR_RETURN(std::vector<int64_t> slots,
                           stepSlots(step, desc.numSlots()));
    const int64_t latent = desc.latentRank, rope = desc.ropeDim,
                  rowBytes = desc.rowBytes();
    std::vector<bool> isSlot(size_t(desc.numSlots()), false);
    int64_t rows = 0;
    for (int64_t s : slots)
      if (s >= 0) {
        isSlot[size_t(s)] = true;
        ++rows;
      }
    check.rowsPerLayer = rows;

    // Rows that are no token's slot keep their bytes.
    for (int64_t s = 0; s < desc.numSlots(); ++s) {
      if (isSlot[size_t(s)])
        continue;
      const uint8_t *a = after[layer].data() + s * rowBytes,
                    *b = before.bytes.data() + s * rowBytes;
      for (int64_t i = 0; i < rowBytes; ++i)
        check.bytesOutside += a[i] != b[i];
    }
    if (rows == 0)
      continue;

    if (want.size() != layers)
      return invalidArgument(where + ": the reference gave no rows");
    const NaiveCacheRows &ref = want[layer];
    if (int64_t(ref.latent.size()) < int64_t(slots.size()) * latent ||
        int64_t(ref.ropeKey.size()) < int64_t(slots.size()) * rope)
      return invalidArgument(where + ": slot_mapping has more tokens than "
                             "the reference's rows");
    double diffLat = 0, refLat = 0, diffRope = 0, refRope = 0;
    std::vector<float> row(size_t(desc.rowValues()));
    for (size_t t = 0; t < slots.size(); ++t) {
      const int64_t s = slots[t];
      if (s < 0)
        continue;
      const uint8_t *got = after[layer].data() + s * rowBytes;
      check.unchangedRows +=
          std::memcmp(got, before.bytes.data() + s * rowBytes,
                      size_t(rowBytes)) == 0;
      decodeCacheRow(desc, got, before.scale, row.data());
      for (int64_t i = 0; i < latent; ++i) {
        double w = ref.latent[t * size_t(latent) + size_t(i)];
        double d = double(row[size_t(i)]) - w;
        diffLat += d * d;
        refLat += w * w;
      }
      for (int64_t i = 0; i < rope; ++i) {
        double w = ref.ropeKey[t * size_t(rope) + size_t(i)];
        double d = double(row[size_t(latent + i)]) - w;
        diffRope += d * d;
        refRope += w * w;
      }
    }
    const double tol = cacheRowTolerance(desc, tolerance);
    for (bool ropeKey : {false, true}) {
      double rel = ropeKey ? relative(diffRope, refRope)
                           : relative(diffLat, refLat);
      check.withinTolerance &= rel <= tol;
      if (check.worstLayer < 0 ||
          overTolerance(rel, tol) > check.pastTolerance()) {
        check.worst = rel;
        check.worstTolerance = tol;
        check.worstLayer = int64_t(layer);
        check.worstIsRopeKey = ropeKey;
      }
    }
  }
  return check;
}

} // namespace mlarun
