//===- RopeCacheUpdate.cpp - CPU kernel: fused rope + cache write ---------===//
//
// Semantics (the fused op must equal rope(q_pe); rope(k_pe); cacheUpdate):
// every one of the T tokens has q_pe and k_pe rotated in place (q_pe from
// q_pe_in when given, and k_pe copied to kPeOut), including tokens with a
// negative slot and padded tokens past the slot mapping, because q still feeds
// attention; only the cache row write is skipped for them. All checks
// (including checked-mode refusals) run before anything is written, so an error
// leaves q_pe, k_pe, kPeOut and the cache untouched (q_pe_in is never written).
// With a latent norm weight each written row's latent is normalised like
// rmsNorm before encoding.
//
//===----------------------------------------------------------------------===//
#include "cpu/CacheWrite.h"
#include "cpu/CpuKernels.h"
#include "cpu/IndexAccess.h"
#include "cpu/RmsNormRow.h"
#include "cpu/RopeMath.h"
#include "TensorRefUtil.h"

#include <cstring>
#include <string>
#include <vector>

namespace mlart::cpu {

Status ropeCacheUpdate(const RopeCacheUpdateArgs &args) {
  int64_t numTokens = 0;
  MLART_RETURN_IF_ERROR(checkRopeStyle(args.style));
  MLART_RETURN_IF_ERROR(checkRopeOperand(args.kPe, "k_pe", true, false));
  MLART_RETURN_IF_ERROR(validateRopeTables(args.positions, args.cosSin,
                                           args.kPe.sizes[0],
                                           args.kPe.sizes[1]));
  const int64_t ropeDim = args.kPe.sizes[1];
  if (args.qPe.present()) {
    MLART_RETURN_IF_ERROR(checkRopeOperand(args.qPe, "q_pe", false, true));
    if (args.qPe.sizes[0] != args.kPe.sizes[0] || args.qPe.sizes[2] != ropeDim)
      return invalidArgument("q_pe " + args.qPe.describe() +
                             " does not match k_pe " + args.kPe.describe());
  }
  MLART_RETURN_IF_ERROR(checkRopeSource(args.qPe, args.qPeIn));
  if (args.kPeOut.present()) {
    MLART_RETURN_IF_ERROR(checkRopeOperand(args.kPeOut, "k_pe_out", true,
                                           false));
    if (args.kPeOut.sizes[0] != args.kPe.sizes[0] ||
        args.kPeOut.sizes[1] != ropeDim || args.kPeOut.dtype != args.kPe.dtype)
      return invalidArgument("k_pe_out " + args.kPeOut.describe() +
                             " must match k_pe " + args.kPe.describe());
  }
  // Last, because it counts checked-mode refusals: a call rejected for a bad
  // shape must not show up as a refused write.
  MLART_RETURN_IF_ERROR(checkLatentNorm(
      args.latentNormWeight, args.latentNormEpsilon, args.kvC, args.cache));
  MLART_RETURN_IF_ERROR(validateCacheWrite(args.kvC, args.kPe,
                                           args.slotMapping, args.cache,
                                           numTokens));

  const size_t ropeBytes = size_t(ropeDim) * dtypeSize(args.kPe.dtype);
  // The latent norm: each written row normalised in float and rounded once
  // to kv_c's dtype (exactly rmsNorm's row), then encoded like any row.
  const bool norm = args.latentNormWeight.present();
  const int64_t latent = args.cache.desc.latentRank;
  std::vector<float> weight, normRow;
  std::vector<uint8_t> normBytes;
  if (norm) {
    weight.resize(size_t(latent));
    normRow.resize(size_t(latent));
    normBytes.resize(size_t(latent) * dtypeSize(args.kvC.dtype));
    loadRow(args.latentNormWeight, 0, latent, weight.data());
  }
  const TensorRef normOut =
      TensorRef::contiguous(normBytes.data(), args.kvC.dtype, {1, latent});
  const int64_t numSlots = args.slotMapping.sizes[0];
  const bool outOfPlace =
      args.qPeIn.present() && !sameView(args.qPe, args.qPeIn);
  for (int64_t t = 0; t < numTokens; ++t) {
    const float *cs = cosSinRow(args.cosSin, args.positions, t);
    uint8_t *kRow = rowPtr(args.kPe, t);
    rotateRow(kRow, args.kPe.dtype, ropeDim, cs, args.style);
    if (args.kPeOut.present())
      std::memmove(rowPtr(args.kPeOut, t), kRow, ropeBytes);
    if (args.qPe.present())
      for (int64_t h = 0; h < args.qPe.sizes[1]; ++h) {
        // Out of place: the row is disjoint from its source (checked), so
        // copy, then rotate the copy exactly like the in-place path.
        uint8_t *qRow = rowPtr(args.qPe, t, h);
        if (outOfPlace)
          std::memcpy(qRow, rowPtr(args.qPeIn, t, h),
                      size_t(ropeDim) * dtypeSize(args.qPe.dtype));
        rotateRow(qRow, args.qPe.dtype, ropeDim, cs, args.style);
      }
    if (t < numSlots) {
      const int64_t slot = loadIndex(args.slotMapping, t);
      if (slot >= 0 && !norm) {
        writeCacheRow(args.cache, slot, args.kvC, args.kPe, t);
      } else if (slot >= 0) {
        loadRow(args.kvC, args.kvC.offset({t, 0}), latent, normRow.data());
        rmsNormRow(normRow.data(), weight.data(), latent,
                   args.latentNormEpsilon);
        storeRow(normOut, 0, latent, normRow.data());
        writeCacheRow(args.cache, slot, normBytes.data(), args.kvC.dtype, kRow,
                      args.kPe.dtype);
      }
    }
  }
  return Status::success();
}

} // namespace mlart::cpu
