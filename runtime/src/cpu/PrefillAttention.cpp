//===- PrefillAttention.cpp - Causal MHA prefill with cached context -----===//
//
// Chunked prefill the way vLLM runs it: the cached context of a request is
// decompressed per head (k = concat(c @ wUK^T, k_pe), v = c @ wUV) and
// attended without a mask, the new tokens attend to each other causally, and
// the two partial results are merged with their log-sum-exps
// (merge_attn_states). Tokens past queryStartLoc[R] are padding: they get
// zeros and lse -inf so no output is left undefined.
//
//===----------------------------------------------------------------------===//
#include "cpu/CpuKernels.h"
#include "cpu/TensorAccess.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace mlart::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool hasContext(const PrefillAttentionArgs &a) {
  return a.cache.data != nullptr;
}

/// Cached tokens request `r` attends to before its new tokens.
int64_t contextLength(const PrefillAttentionArgs &a, int64_t r) {
  if (!hasContext(a))
    return 0;
  int64_t len = loadI32(a.contextLens, r);
  if (a.lensIncludeNewTokens)
    len -= loadI32(a.queryStartLoc, r + 1) - loadI32(a.queryStartLoc, r);
  return len;
}

Status validate(const PrefillAttentionArgs &a) {
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.q, "q", 3));
  const int64_t tokens = a.q.sizes[0], heads = a.q.sizes[1];
  const int64_t qkDim = a.q.sizes[2];
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.k, "k", 3));
  for (int d = 0; d < 3; ++d)
    MLART_RETURN_IF_ERROR(checkDim(a.k, "k", d, a.q.sizes[d]));
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.v, "v", 3));
  MLART_RETURN_IF_ERROR(checkDim(a.v, "v", 0, tokens));
  MLART_RETURN_IF_ERROR(checkDim(a.v, "v", 1, heads));
  const int64_t vDim = a.v.sizes[2];
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.out, "out", 3));
  MLART_RETURN_IF_ERROR(checkDim(a.out, "out", 0, tokens));
  MLART_RETURN_IF_ERROR(checkDim(a.out, "out", 1, heads));
  MLART_RETURN_IF_ERROR(checkDim(a.out, "out", 2, vDim));
  if (a.lse.present()) {
    MLART_RETURN_IF_ERROR(checkTypedTensor(a.lse, "lse", 2, DType::F32));
    MLART_RETURN_IF_ERROR(checkDim(a.lse, "lse", 0, tokens));
    MLART_RETURN_IF_ERROR(checkDim(a.lse, "lse", 1, heads));
  }

  MLART_RETURN_IF_ERROR(
      checkTypedTensor(a.queryStartLoc, "queryStartLoc", 1, DType::I32));
  const int64_t requests = a.queryStartLoc.sizes[0] - 1;
  if (requests < 0)
    return invalidArgument("queryStartLoc needs at least one entry");
  if (loadI32(a.queryStartLoc, 0) != 0)
    return invalidArgument("queryStartLoc[0] must be 0");
  for (int64_t r = 0; r < requests; ++r)
    if (loadI32(a.queryStartLoc, r + 1) < loadI32(a.queryStartLoc, r))
      return invalidArgument("queryStartLoc must be non-decreasing");
  if (loadI32(a.queryStartLoc, requests) > tokens)
    return outOfRange("queryStartLoc[R] = " +
                      std::to_string(loadI32(a.queryStartLoc, requests)) +
                      " exceeds the " + std::to_string(tokens) + " tokens");

  MLART_RETURN_IF_ERROR(checkContextLenBound(a.contextLenBound));
  if (!hasContext(a))
    return Status::success();
  const KVCacheDesc &desc = a.cache.desc;
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.wUK, "wUK", 3));
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.wUV, "wUV", 3));
  MLART_RETURN_IF_ERROR(checkDim(a.wUK, "wUK", 0, heads));
  MLART_RETURN_IF_ERROR(checkDim(a.wUK, "wUK", 1, qkDim - desc.ropeDim));
  MLART_RETURN_IF_ERROR(checkDim(a.wUK, "wUK", 2, desc.latentRank));
  MLART_RETURN_IF_ERROR(checkDim(a.wUV, "wUV", 0, heads));
  MLART_RETURN_IF_ERROR(checkDim(a.wUV, "wUV", 1, desc.latentRank));
  MLART_RETURN_IF_ERROR(checkDim(a.wUV, "wUV", 2, vDim));
  MLART_RETURN_IF_ERROR(checkPagedLayout(a.cache, a.blockTable, a.contextLens,
                                         "contextLens", requests));
  // Only the cached context is read: with total lengths, the new tokens'
  // rows (written by the cache update) are not this kernel's to check.
  for (int64_t r = 0; r < requests; ++r) {
    const int64_t context = contextLength(a, r);
    if (context < 0)
      return outOfRange("contextLens[" + std::to_string(r) + "] = " +
                        std::to_string(loadI32(a.contextLens, r)) +
                        " is shorter than the request's new tokens");
    MLART_RETURN_IF_ERROR(
        checkPagedRows(a.cache, a.blockTable, r, context,
                       "request " + std::to_string(r) + "'s cached context"));
    if (a.contextLenBound > 0 && context > a.contextLenBound)
      return outOfRange("request " + std::to_string(r) + " has " +
                        std::to_string(context) +
                        " cached tokens, more than contextLenBound = " +
                        std::to_string(a.contextLenBound));
  }
  return Status::success();
}

/// Softmax attention of one query over `count` keys/values (row-major float
/// [count, qkDim] and [count, vDim]). Writes the normalised output and
/// returns the LSE of the scaled scores; no keys gives zeros and -inf.
float attend(const float *q, const float *keys, const float *values,
             int64_t count, int64_t qkDim, int64_t vDim, float scale,
             std::vector<float> &scores, float *out) {
  std::fill(out, out + vDim, 0.0f);
  if (count == 0)
    return kNegInf;
  scores.resize(size_t(count));
  float maxScore = kNegInf;
  for (int64_t j = 0; j < count; ++j) {
    scores[j] = scale * dot(q, keys + j * qkDim, qkDim);
    maxScore = std::max(maxScore, scores[j]);
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < count; ++j) {
    const float p = std::exp(scores[j] - maxScore);
    sum += p;
    axpy(p, values + j * vDim, out, vDim);
  }
  const float inv = 1.0f / sum;
  for (int64_t c = 0; c < vDim; ++c)
    out[c] *= inv;
  return maxScore + std::log(sum);
}

void storeLse(const TensorRef &lse, int64_t t, int64_t h, float value) {
  if (lse.present())
    *reinterpret_cast<float *>(lse.bytesAt(lse.offset({t, h}))) = value;
}

} // namespace

Status prefillAttention(const PrefillAttentionArgs &args) {
  MLART_RETURN_IF_ERROR(validate(args));
  const int64_t tokens = args.q.sizes[0], heads = args.q.sizes[1];
  const int64_t qkDim = args.q.sizes[2], vDim = args.v.sizes[2];
  const int64_t requests = args.queryStartLoc.sizes[0] - 1;
  const KVCacheDesc &desc = args.cache.desc;
  const int64_t latent = desc.latentRank, rowValues = desc.rowValues();
  const int64_t nope = qkDim - desc.ropeDim;

  std::vector<float> ctxRows, ctxKeys, ctxValues, wUK, wUV;
  std::vector<float> newKeys, newValues, q(static_cast<size_t>(qkDim));
  std::vector<float> ctxOut(static_cast<size_t>(vDim)),
      newOut(static_cast<size_t>(vDim));
  std::vector<float> scores;
  for (int64_t r = 0; r < requests; ++r) {
    const int64_t start = loadI32(args.queryStartLoc, r);
    const int64_t count = loadI32(args.queryStartLoc, r + 1) - start;
    const int64_t ctxLen = contextLength(args, r);
    // Decode the request's cached rows once; every head decompresses them.
    ctxRows.resize(size_t(ctxLen * rowValues));
    for (int64_t j = 0; j < ctxLen; ++j)
      decodeCacheRow(desc, pagedRow(args.cache, args.blockTable, r, j),
                     args.cache.scale, ctxRows.data() + j * rowValues);

    for (int64_t h = 0; h < heads; ++h) {
      if (ctxLen > 0) {
        wUK.resize(size_t(nope * latent));
        wUV.resize(size_t(latent * vDim));
        for (int64_t i = 0; i < nope; ++i)
          loadRow(args.wUK, args.wUK.offset({h, i, 0}), latent,
                  wUK.data() + i * latent);
        for (int64_t i = 0; i < latent; ++i)
          loadRow(args.wUV, args.wUV.offset({h, i, 0}), vDim,
                  wUV.data() + i * vDim);
        ctxKeys.resize(size_t(ctxLen * qkDim));
        ctxValues.assign(size_t(ctxLen * vDim), 0.0f);
        for (int64_t j = 0; j < ctxLen; ++j) {
          const float *c = ctxRows.data() + j * rowValues;
          float *key = ctxKeys.data() + j * qkDim;
          for (int64_t i = 0; i < nope; ++i)
            key[i] = dot(c, wUK.data() + i * latent, latent);
          std::copy(c + latent, c + rowValues, key + nope);
          float *value = ctxValues.data() + j * vDim;
          for (int64_t i = 0; i < latent; ++i)
            axpy(c[i], wUV.data() + i * vDim, value, vDim);
        }
      }
      newKeys.resize(size_t(count * qkDim));
      newValues.resize(size_t(count * vDim));
      for (int64_t j = 0; j < count; ++j) {
        loadRow(args.k, args.k.offset({start + j, h, 0}), qkDim,
                newKeys.data() + j * qkDim);
        loadRow(args.v, args.v.offset({start + j, h, 0}), vDim,
                newValues.data() + j * vDim);
      }

      for (int64_t i = 0; i < count; ++i) {
        const int64_t t = start + i;
        loadRow(args.q, args.q.offset({t, h, 0}), qkDim, q.data());
        const float ctxLse =
            attend(q.data(), ctxKeys.data(), ctxValues.data(), ctxLen, qkDim,
                   vDim, args.softmaxScale, scores, ctxOut.data());
        // Causal: new token i sees new tokens 0..i.
        const float newLse =
            attend(q.data(), newKeys.data(), newValues.data(), i + 1, qkDim,
                   vDim, args.softmaxScale, scores, newOut.data());
        // newLse is finite (at least the token itself), so maxLse is too.
        const float maxLse = std::max(ctxLse, newLse);
        const float ctxWeight = std::exp(ctxLse - maxLse);
        const float newWeight = std::exp(newLse - maxLse);
        const float total = ctxWeight + newWeight;
        for (int64_t c = 0; c < vDim; ++c)
          newOut[c] = (ctxWeight * ctxOut[c] + newWeight * newOut[c]) / total;
        storeRow(args.out, args.out.offset({t, h, 0}), vDim, newOut.data());
        storeLse(args.lse, t, h, maxLse + std::log(total));
      }
    }
  }

  std::fill(newOut.begin(), newOut.end(), 0.0f);
  for (int64_t t = loadI32(args.queryStartLoc, requests); t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      storeRow(args.out, args.out.offset({t, h, 0}), vDim, newOut.data());
      storeLse(args.lse, t, h, kNegInf);
    }
  return Status::success();
}

} // namespace mlart::cpu
