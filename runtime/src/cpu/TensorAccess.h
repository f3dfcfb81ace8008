//===- TensorAccess.h - Float row access and checks for CPU kernels -----===//
//
// The CPU reference kernels compute in float whatever the storage type is.
// These helpers move one contiguous innermost row between a TensorRef and a
// float buffer with the dtype switch hoisted out of the element loop, and
// hold the argument checks several kernels repeat.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CPU_TENSORACCESS_H
#define MLART_CPU_TENSORACCESS_H

#include "mlart/Kernels.h"

#include <cstdint>
#include <string>

namespace mlart::cpu {

/// True for the activation types the kernels read and write (bf16, f16, f32).
inline bool isActivationType(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

/// checkTensor plus a bf16/f16/f32 element type.
inline Status checkFloatTensor(const TensorRef &t, const char *name, int rank) {
  MLART_RETURN_IF_ERROR(checkTensor(t, name, rank));
  if (!isActivationType(t.dtype))
    return invalidArgument(std::string(name) +
                           " must be bf16, f16 or f32, got " + t.describe());
  return Status::success();
}

/// checkTensor plus an exact dtype.
inline Status checkTypedTensor(const TensorRef &t, const char *name, int rank,
                               DType dtype) {
  MLART_RETURN_IF_ERROR(checkTensor(t, name, rank));
  if (t.dtype != dtype)
    return invalidArgument(std::string(name) + " must be " + dtypeName(dtype) +
                           ", got " + t.describe());
  return Status::success();
}

/// Fails unless dimension `dim` of `t` has size `expected`.
inline Status checkDim(const TensorRef &t, const char *name, int dim,
                       int64_t expected) {
  if (t.sizes[dim] != expected)
    return invalidArgument(std::string(name) + " dimension " +
                           std::to_string(dim) + " must be " +
                           std::to_string(expected) + ", got " + t.describe());
  return Status::success();
}

/// dst[i] = t[elementOffset + i] for i < n (the innermost stride is 1).
inline void loadRow(const TensorRef &t, int64_t elementOffset, int64_t n,
                    float *dst) {
  const void *base = t.bytesAt(elementOffset);
  switch (t.dtype) {
  case DType::F32: {
    const float *src = static_cast<const float *>(base);
    for (int64_t i = 0; i < n; ++i)
      dst[i] = src[i];
    return;
  }
  case DType::BF16: {
    const uint16_t *src = static_cast<const uint16_t *>(base);
    for (int64_t i = 0; i < n; ++i)
      dst[i] = bf16ToFloat(src[i]);
    return;
  }
  default:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = loadAsFloat(base, t.dtype, size_t(i));
    return;
  }
}

/// t[elementOffset + i] = round(src[i]) for i < n.
inline void storeRow(const TensorRef &t, int64_t elementOffset, int64_t n,
                     const float *src) {
  void *base = t.bytesAt(elementOffset);
  if (t.dtype == DType::F32) {
    float *dst = static_cast<float *>(base);
    for (int64_t i = 0; i < n; ++i)
      dst[i] = src[i];
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    storeFromFloat(base, t.dtype, size_t(i), src[i]);
}

/// Element `i` of a rank-1 i32 tensor.
inline int32_t loadI32(const TensorRef &t, int64_t i) {
  return static_cast<const int32_t *>(t.data)[i * t.strides[0]];
}

/// Element (i, j) of a rank-2 i32 tensor.
inline int32_t loadI32(const TensorRef &t, int64_t i, int64_t j) {
  return static_cast<const int32_t *>(t.data)[i * t.strides[0] + j];
}

/// Dot product with eight independent accumulators: without -ffast-math the
/// compiler may not reorder a float reduction, so we split it by hand to let
/// it vectorize.
inline float dot(const float *a, const float *b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k)
      acc[k] += a[i + k] * b[i + k];
  for (; i < n; ++i)
    acc[0] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
         ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/// y[i] += a * x[i].
inline void axpy(float a, const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] += a * x[i];
}

/// PrefillAttentionArgs::contextLenBound: 0 (none) or a token count.
inline Status checkContextLenBound(int64_t bound) {
  if (bound < 0)
    return invalidArgument("contextLenBound must be >= 0 (0: no bound), not " +
                           std::to_string(bound));
  return Status::success();
}

/// The shapes of a paged-cache read: the cache itself, blockTable [batch,
/// maxBlocks] i32 and lens [batch] i32.
inline Status checkPagedLayout(const KVCacheRef &cache,
                               const TensorRef &blockTable,
                               const TensorRef &lens, const char *lensName,
                               int64_t batch) {
  MLART_RETURN_IF_ERROR(cache.validate());
  MLART_RETURN_IF_ERROR(
      checkTypedTensor(blockTable, "blockTable", 2, DType::I32));
  MLART_RETURN_IF_ERROR(checkTypedTensor(lens, lensName, 1, DType::I32));
  MLART_RETURN_IF_ERROR(checkDim(blockTable, "blockTable", 0, batch));
  return checkDim(lens, lensName, 0, batch);
}

/// Sequence `b` reads its first `len` rows (`what` names the length in
/// messages): len in [0, maxBlocks * blockSize] and every block id those
/// rows use in [0, numBlocks). Entries past ceil(len / blockSize) are never
/// looked at, so callers may leave them stale.
inline Status checkPagedRows(const KVCacheRef &cache,
                             const TensorRef &blockTable, int64_t b,
                             int64_t len, const std::string &what) {
  const int64_t maxBlocks = blockTable.sizes[1];
  const int64_t blockSize = cache.desc.blockSize;
  if (len < 0 || len > maxBlocks * blockSize)
    return outOfRange(what + " = " + std::to_string(len) + " is outside [0, " +
                      std::to_string(maxBlocks * blockSize) + "]");
  const int64_t usedBlocks = (len + blockSize - 1) / blockSize;
  for (int64_t j = 0; j < usedBlocks; ++j) {
    const int64_t id = loadI32(blockTable, b, j);
    if (id < 0 || id >= cache.desc.numBlocks)
      return outOfRange("blockTable[" + std::to_string(b) + ", " +
                        std::to_string(j) + "] = " + std::to_string(id) +
                        " is not a block of a " +
                        std::to_string(cache.desc.numBlocks) + "-block cache");
  }
  return Status::success();
}

/// Validates a paged-cache read whose lengths are `lens` as given
/// (checkPagedLayout, then checkPagedRows for every sequence).
inline Status checkPagedRead(const KVCacheRef &cache,
                             const TensorRef &blockTable, const TensorRef &lens,
                             const char *lensName, int64_t batch) {
  MLART_RETURN_IF_ERROR(
      checkPagedLayout(cache, blockTable, lens, lensName, batch));
  for (int64_t b = 0; b < batch; ++b)
    MLART_RETURN_IF_ERROR(checkPagedRows(
        cache, blockTable, b, loadI32(lens, b),
        std::string(lensName) + "[" + std::to_string(b) + "]"));
  return Status::success();
}

/// The cache slot of token `pos` of a sequence whose pages are row `seq` of
/// blockTable (already validated by checkPagedRead).
inline int64_t pagedSlot(const KVCacheRef &cache, const TensorRef &blockTable,
                         int64_t seq, int64_t pos) {
  const int64_t blockSize = cache.desc.blockSize;
  return loadI32(blockTable, seq, pos / blockSize) * blockSize +
         pos % blockSize;
}

/// Start of the cache row of token `pos` of a sequence whose pages are row
/// `seq` of blockTable (already validated by checkPagedRead).
inline const uint8_t *pagedRow(const KVCacheRef &cache,
                               const TensorRef &blockTable, int64_t seq,
                               int64_t pos) {
  return static_cast<const uint8_t *>(cache.data) +
         cache.slotOffset(pagedSlot(cache, blockTable, seq, pos));
}

} // namespace mlart::cpu

#endif // MLART_CPU_TENSORACCESS_H
