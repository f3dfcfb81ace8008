//===- SkinnyGemmPlan.h - Launch shape of the skinny GEMM (pure C++) ------===//
//
// The split-K weight-streaming GEMM (SkinnyGemm.cu) covers out[M, N] =
// x[M, K] @ W for M <= 64, where the cost is streaming W from DRAM once.
// A CTA owns a column tile of 32 * warpsN columns and one K slice; the
// `split` CTAs of a thread-block cluster share a column tile and sum their
// f32 partials through distributed shared memory. This header chooses that
// shape; it has no CUDA dependency so a CPU unit test can check the choices.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_SKINNYGEMMPLAN_H
#define MLART_CUDA_SKINNYGEMMPLAN_H

#include <algorithm>
#include <cstdint>
#include <optional>

namespace mlart::cuda {

/// K elements a warp consumes per step: two m16n8k16 MMAs, one 16-byte W
/// load per thread and row (W K-major) or eight 8-byte rows (W N-major).
constexpr int64_t kSkinnyChunk = 32;
/// Columns of one warp (four n8 MMA tiles).
constexpr int64_t kSkinnyWarpCols = 32;
constexpr int64_t kSkinnyMaxM = 64;
constexpr int kSkinnyMaxWarps = 8;
/// Largest cluster: the portable limit (16 needs a non-portable opt-in and
/// may not be schedulable next to other work).
constexpr int kSkinnyMaxSplit = 8;
/// Dynamic shared memory of one CTA: two CTAs (2 x 256 threads at <= 128
/// registers) fit an SM's 228 KB.
constexpr int64_t kSkinnySmemBudget = 112 * 1024;

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
  int warpsN = 0;     ///< warps side by side along N: CTA tile 32 * warpsN
  int warpsK = 0;     ///< warps of a CTA splitting its K slice further
  int split = 0;      ///< cluster size: CTAs per column tile, one K slice each
  int64_t kSlice = 0; ///< K elements per CTA, a multiple of kSkinnyChunk
  int64_t nTiles = 0; ///< column tiles per batch entry
  int64_t ctas = 0;   ///< nTiles * batch * split
  int xStride = 0;    ///< shared row stride of the staged x slice, elements
  int pStride = 0;    ///< row stride of the f32 partial tiles, floats
  int64_t smemBytes = 0;
  int threads() const { return 32 * warpsN * warpsK; }
};

namespace detail {
inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Fills the K-dependent fields for `split`; false when the CTA's shared
/// memory would exceed the budget.
inline bool sizeSkinnySlice(SkinnyGemmPlan &p, int64_t chunks) {
  const int64_t sliceChunks = ceilDiv(chunks, p.split);
  p.kSlice = sliceChunks * kSkinnyChunk;
  p.warpsK = int(std::min<int64_t>(kSkinnyMaxWarps / p.warpsN, sliceChunks));
  // Row stride = 64 mod 128 bytes: the 16-byte fragment loads of rows g and
  // g + 1 (one quarter warp) then fall into disjoint banks.
  p.xStride = int(p.kSlice % 64 ? p.kSlice : p.kSlice + 32);
  // + 8 floats: the eight rows of an accumulator store hit distinct banks.
  p.pStride = int(kSkinnyWarpCols * p.warpsN + 8);
  const int64_t rows = 16 * int64_t(p.mTiles);
  const int64_t xBytes = rows * p.xStride * 2;
  const int64_t partBytes = int64_t(p.warpsK) * rows * p.pStride * 4;
  p.smemBytes = std::max(xBytes, partBytes);
  return p.smemBytes <= kSkinnySmemBudget;
}
} // namespace detail

/// The launch shape for `prob` on a GPU of `smCount` SMs, or nullopt when
/// the skinny kernel does not apply (M > 64, K not a multiple of 8, rows
/// not 16-byte aligned, x slice too large for shared memory, ...).
///
/// Column tiles are 64 wide unless N <= 32; K is split over the smallest
/// power-of-two cluster that gives at least one CTA per SM (every CTA is
/// resident at once: one wave, each streaming its W tile once), while every
/// slice keeps at least one 32-wide chunk of K (more when the x slice would
/// not fit shared memory). When 64-wide tiles cannot reach one CTA
/// per SM even at the largest split, 32-wide tiles are tried; of the
/// candidates the first with a CTA per SM wins, else the one with most CTAs.
inline std::optional<SkinnyGemmPlan> planSkinnyGemm(const SkinnyGemmProblem &p,
                                                    int smCount) {
  using detail::ceilDiv;
  if (p.m < 1 || p.m > kSkinnyMaxM || p.n < 1 || p.n > (int64_t(1) << 30) ||
      p.k < 8 || p.k % 8 || p.k > (int64_t(1) << 30) || p.batch < 1 ||
      p.batch > 65535)
    return std::nullopt;
  // x rows are staged with 16-byte cp.async.
  if (p.x % 16 || (p.m > 1 && p.xRow % 8) || (p.batch > 1 && p.xBatch % 8))
    return std::nullopt;
  if (p.weightKMajor) {
    if (p.w % 16 || (p.n > 1 && p.wRow % 8) || (p.batch > 1 && p.wBatch % 8))
      return std::nullopt;
  } else if (p.w % 8 || p.n % 4 || p.wRow % 4 ||
             (p.batch > 1 && p.wBatch % 4)) {
    return std::nullopt; // 8-byte loads of four columns
  }
  const int64_t chunks = ceilDiv(p.k, kSkinnyChunk);
  const int64_t sms = std::max(1, smCount);
  std::optional<SkinnyGemmPlan> best;
  for (int warpsN : {2, 1}) {
    if (warpsN == 2 && p.n <= kSkinnyWarpCols)
      continue;
    SkinnyGemmPlan c;
    c.mTiles = int(ceilDiv(p.m, 16));
    c.warpsN = warpsN;
    c.nTiles = ceilDiv(p.n, kSkinnyWarpCols * warpsN);
    const int64_t tiles = c.nTiles * p.batch;
    // Doubling the split for more CTAs must leave no rank without K.
    auto allRanksWork = [&](int s) {
      return (s - 1) * ceilDiv(chunks, s) < chunks;
    };
    c.split = 1;
    bool fits = detail::sizeSkinnySlice(c, chunks);
    while (c.split < kSkinnyMaxSplit &&
           (!fits || (tiles * c.split < sms && allRanksWork(2 * c.split)))) {
      c.split *= 2;
      fits = detail::sizeSkinnySlice(c, chunks);
    }
    if (!fits)
      continue;
    c.ctas = tiles * c.split;
    if (!best || c.ctas > best->ctas)
      best = c;
    if (best->ctas >= sms)
      break;
  }
  return best;
}

} // namespace mlart::cuda

#endif // MLART_CUDA_SKINNYGEMMPLAN_H
