//===- PrefillContext.h - A prefill's cached context in MHA form ----------===//
//
// Chunked prefill on the tensor cores the way vLLM runs it: a request's
// cached context (latent c and k_pe, paged) is expanded once per head to
//   k[j, h] = (c_j @ W_UK[h]^T, k_pe_j)   [192 = nope 128 + rope 64]
//   v[j, h] =  c_j @ W_UV[h]              [128]
// so the flash kernel's context mode attends it like any MHA keys. One
// gather kernel copies the paged rows into a dense latent buffer (zeros past
// each request's length) and broadcasts k_pe into k; two strided-batched
// GEMMs (one batch a head) write the nope part of k and all of v.
//
// Context lengths are device data, so each request gets `pad` rows
// (contextRowLimit: the block table's capacity, maxBlocks x blockSize, or
// the caller's smaller host-side bound) and the kernels read only the
// first length of them. FLOPs per 1000 context tokens at H=16: the
// expansion costs 2 x 1000 x 512 x 256 x 16 = 4.2 G once, then every new
// token spends 2 x 16 x 320 x 1000 = 10 M on it, against 35 M in absorbed
// form (2 x 16 x 1088 x 1000): fewer FLOPs from ~170 new tokens a request
// on, and on tensor cores either way.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_PREFILLCONTEXT_H
#define MLART_CUDA_PREFILLCONTEXT_H

#include "cuda/CudaCommon.h"

#include <cstddef>
#include <cstdint>

namespace mlart::cuda {

/// Where the expanded context lives inside a caller's workspace.
struct ContextExpansionPlan {
  int64_t requests = 0, pad = 0, heads = 0, latent = 0;
  size_t bytes = 0;                           ///< workspace the plan needs
  size_t latentOffset = 0, kOffset = 0, vOffset = 0;
  int64_t rows() const { return requests * pad; }
};

/// The most cached tokens a request of `a` may have: the block table's
/// capacity, or PrefillAttentionArgs::contextLenBound when that is smaller.
/// Every route reports a longer context (badSeqIndex) and pads each
/// request's expanded context to this many rows.
inline int64_t contextRowLimit(const PrefillAttentionArgs &a) {
  const int64_t capacity = a.blockTable.sizes[1] * a.cache.desc.blockSize;
  return a.contextLenBound > 0 && a.contextLenBound < capacity
             ? a.contextLenBound
             : capacity;
}

/// The most workspace the expansion may take; beyond it the CUDA-core
/// context kernel runs instead.
constexpr size_t kMaxContextExpansionBytes = size_t(2) << 30;

/// Whether the context of `a` (which has one, and shapes already checked
/// for R requests) can be expanded for the flash kernel: q/k/v and both
/// weights of one dtype (bf16 or f16) with unit last strides, rope 64,
/// nope 128, v 128, a cuBLAS handle, and a workspace within
/// kMaxContextExpansionBytes. Fills `plan` when it can.
bool planContextExpansion(const CudaContext &ctx,
                          const PrefillAttentionArgs &a, int64_t R,
                          ContextExpansionPlan &plan);

/// Writes k [rows, H, 192] and v [rows, H, 128] (q's dtype) into
/// `workspace` + plan offsets; request r's context is rows [r * pad,
/// r * pad + len). Bad context lengths and block ids are recorded in the
/// device record (badSeqIndex) and their rows read as zeros.
Status expandPrefillContext(CudaContext &ctx, const PrefillAttentionArgs &a,
                            const ContextExpansionPlan &plan, void *workspace,
                            cudaStream_t stream);

/// How many context expansions ran in this process (tests: the tensor-core
/// context route was taken).
uint64_t prefillContextExpansionCount();
/// How many context rows (requests x pad) those expansions wrote in all
/// (tests: the bound, not the capacity, sized them).
uint64_t prefillContextExpandedRows();

} // namespace mlart::cuda

#endif // MLART_CUDA_PREFILLCONTEXT_H
