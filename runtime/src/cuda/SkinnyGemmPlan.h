//===- SkinnyGemmPlan.h - Launch shape of the skinny GEMM (pure C++) ------===//
//
// The split-K weight-streaming GEMM (SkinnyGemm.cu) covers out[M, N] =
// x[M, K] @ W for M <= 64, where the cost is streaming W from DRAM once.
// A CTA owns a 64-column tile and one K slice, which it streams through a
// multi-stage cp.async ring in 64-wide chunks of K; the `split` CTAs of a
// thread-block cluster share a column tile and sum their f32 partials
// through distributed shared memory. This header chooses that shape; it
// has no CUDA dependency so a CPU unit test can check the choices.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_SKINNYGEMMPLAN_H
#define MLART_CUDA_SKINNYGEMMPLAN_H

#include <algorithm>
#include <cstdint>
#include <optional>

namespace mlart::cuda {

/// K elements of one pipeline stage: 128-byte rows of x and W in shared
/// memory (eight 16-byte units, XOR-swizzled for ldmatrix).
constexpr int64_t kSkinnyChunk = 64;
/// Columns of a CTA's tile (eight n8 MMA tiles).
constexpr int64_t kSkinnyTileCols = 64;
constexpr int64_t kSkinnyMaxM = 64;
/// Four warps; each takes one k16 step of every stage.
constexpr int kSkinnyThreads = 128;
/// Largest cluster: the portable limit.
constexpr int kSkinnyMaxSplit = 8;
/// Usable shared memory of one SM (228 KB less 1 KB per CTA).
constexpr int64_t kSkinnySmemPerSm = 227 * 1024;

/// A/B variants of the launch (MLART_SKINNY_VARIANT, SkinnyGemm.h): ring
/// depth, the largest cluster, and whether a CTA prefetches its W slice
/// into L2 before waiting for the previous kernel.
struct SkinnyVariant {
  int stages = 8;   ///< ring slots: 4 or 8
  int maxSplit = 4; ///< 1..kSkinnyMaxSplit
  bool prefetch = true;
};
constexpr int kSkinnyVariants = 5;
/// Variant v (0 is the default): 0 = 8 stages, split <= 4, prefetch;
/// 1 = 4 stages; 2 = split <= 2; 3 = split <= 8; 4 = no prefetch.
inline SkinnyVariant skinnyVariant(int v) {
  SkinnyVariant s;
  if (v == 1)
    s.stages = 4;
  else if (v == 2)
    s.maxSplit = 2;
  else if (v == 3)
    s.maxSplit = 8;
  else if (v == 4)
    s.prefetch = false;
  return s;
}

/// One skinny GEMM, per batch entry b: out_b[m, n] = sum_k x_b[m, k] W_b(k, n)
/// with W_b(k, n) = w[b * wBatch + n * wRow + k] (weightKMajor, linear's
/// [N, K]) or w[b * wBatch + k * wRow + n] (per-head [H, K, N]). Strides in
/// elements of a 2-byte type; addresses only for the alignment checks.
struct SkinnyGemmProblem {
  bool weightKMajor = true;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  uintptr_t x = 0, w = 0;
  int64_t xRow = 0, xBatch = 0, wRow = 0, wBatch = 0;
};

struct SkinnyGemmPlan {
  int mTiles = 0;     ///< 16-row MMA tiles covering M (1..4)
  int stages = 0;     ///< ring slots
  int split = 0;      ///< cluster size: CTAs per column tile, one K slice each
  bool prefetch = false;
  int64_t kSlice = 0; ///< K elements per CTA, a multiple of kSkinnyChunk
  int64_t nTiles = 0; ///< column tiles per batch entry
  int64_t ctas = 0;   ///< nTiles * batch * split
  int pStride = 0;    ///< row stride of the f32 partial tiles, floats
  int64_t smemBytes = 0;
  int threads() const { return kSkinnyThreads; }
};

namespace detail {
inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
} // namespace detail

/// The launch shape for `prob` on a GPU of `smCount` SMs, or nullopt when
/// the skinny kernel does not apply (M > 64, K not a multiple of 8, rows
/// not 16-byte aligned, ...).
///
/// Shared memory: `stages` slots of (16 * mTiles + 64) rows of 128 bytes,
/// or the four warps' f32 partial tiles if larger. The split s (cluster
/// size, 1..maxSplit, every rank with K) minimises the chunks streamed by
/// the busiest SM, ceil(ctas / SMs) * ceil(chunks / s), with every CTA
/// resident at once (one wave); ties go to the larger split (more CTAs,
/// more bytes in flight).
inline std::optional<SkinnyGemmPlan>
planSkinnyGemm(const SkinnyGemmProblem &p, int smCount,
               SkinnyVariant v = SkinnyVariant()) {
  using detail::ceilDiv;
  if (p.m < 1 || p.m > kSkinnyMaxM || p.n < 1 || p.n > (int64_t(1) << 30) ||
      p.k < 8 || p.k % 8 || p.k > (int64_t(1) << 30) || p.batch < 1 ||
      p.batch > 65535)
    return std::nullopt;
  if (v.stages != 4 && v.stages != 8)
    return std::nullopt;
  // Every row segment is copied with 16-byte cp.async.
  if (p.x % 16 || (p.m > 1 && p.xRow % 8) || (p.batch > 1 && p.xBatch % 8))
    return std::nullopt;
  if (p.w % 16 || p.wRow % 8 || (p.batch > 1 && p.wBatch % 8))
    return std::nullopt;
  SkinnyGemmPlan c;
  c.mTiles = int(ceilDiv(p.m, 16));
  c.stages = v.stages;
  c.prefetch = v.prefetch;
  c.nTiles = ceilDiv(p.n, kSkinnyTileCols);
  const int64_t rows = 16 * int64_t(c.mTiles);
  const int64_t ring = int64_t(v.stages) * (rows + kSkinnyTileCols) * 128;
  // + 8 floats: the eight rows of an accumulator store hit distinct banks.
  c.pStride = int(kSkinnyTileCols + 8);
  const int64_t parts = int64_t(kSkinnyThreads / 32) * rows * c.pStride * 4;
  c.smemBytes = std::max(ring, parts);
  const int64_t perSm =
      std::max<int64_t>(1, std::min<int64_t>(2, kSkinnySmemPerSm /
                                                    (c.smemBytes + 1024)));
  const int64_t sms = std::max(1, smCount);
  const int64_t chunks = ceilDiv(p.k, kSkinnyChunk);
  const int64_t tiles = c.nTiles * p.batch;
  int64_t bestCost = -1;
  for (int s = 1; s <= std::min<int64_t>(std::max(1, v.maxSplit),
                                         std::min<int64_t>(kSkinnyMaxSplit,
                                                           chunks));
       ++s) {
    if ((s - 1) * ceilDiv(chunks, s) >= chunks)
      continue; // a rank without K
    if (s > 1 && tiles * s > sms * perSm)
      break; // a second wave
    const int64_t cost = ceilDiv(tiles * s, sms) * ceilDiv(chunks, s);
    if (bestCost < 0 || cost <= bestCost) {
      bestCost = cost;
      c.split = s;
    }
  }
  c.kSlice = ceilDiv(chunks, c.split) * kSkinnyChunk;
  c.ctas = tiles * c.split;
  return c;
}

} // namespace mlart::cuda

#endif // MLART_CUDA_SKINNYGEMMPLAN_H
