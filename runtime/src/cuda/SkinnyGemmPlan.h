//===- SkinnyGemmPlan.h - Launch shape of the skinny GEMM (pure C++) ------===//
//
// The skinny GEMM (SkinnyGemm.cu) covers out[M, N] = x[M, K] @ W (+ addend)
// for M <= 64 rows, a decode batch. Its weight W does not depend on the
// previous kernel, so each CTA copies its whole W slice into shared memory
// *before* the dependent-launch wait, while the previous kernel still runs;
// after the wait only x (from L2), the MMAs and the split-K sum remain.
//
// A CTA owns `tileCols` columns (32 per warp column) and one K slice; the
// `split` CTAs of a thread-block cluster share a column tile and sum their
// f32 partials through distributed shared memory. This header chooses that
// shape; it has no CUDA dependency so a CPU unit test can check the choices.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_SKINNYGEMMPLAN_H
#define MLART_CUDA_SKINNYGEMMPLAN_H

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>

namespace mlart::cuda {

constexpr int64_t kSkinnyMaxM = 64;
/// Eight warps: warpsN columns of 32 output columns times warpsK slices of
/// the k16 steps.
constexpr int kSkinnyThreads = 256;
constexpr int kSkinnyWarps = kSkinnyThreads / 32;
constexpr int64_t kSkinnyWarpCols = 32;
/// Largest cluster: the portable limit.
constexpr int kSkinnyMaxSplit = 8;
/// Usable shared memory of one CTA (227 KB opt-in on sm_90).
constexpr int64_t kSkinnySmemPerCta = 227 * 1024;
/// The operand slices a plan may hold in shared memory; the rest of the SM
/// stays free for a neighbouring kernel's CTA (dependent launch overlap).
constexpr int64_t kSkinnySmemBudget = 200 * 1024;
/// Shared-memory rows are padded by 16 bytes so that ldmatrix's eight
/// 16-byte row reads hit eight distinct bank groups.
constexpr int64_t kSkinnyRowPad = 8;

/// A/B variants of the launch (MLART_SKINNY_VARIANT, SkinnyGemm.h).
struct SkinnyVariant {
  /// Copy W before the dependent-launch wait (when the call allows it).
  bool earlyWeights = true;
  int maxSplit = kSkinnyMaxSplit;
  /// bf16 linear through the TMA + wgmma kernel (SkinnyGemmTma.cu).
  bool tma = true;
};
constexpr int kSkinnyVariants = 4;
/// Variant v (0 is the default): 0 = W before the wait, split <= 8, TMA
/// for linear; 1 = W after the wait (what the early copy is worth);
/// 2 = split <= 2; 3 = linear through the mma.sync kernel too.
inline SkinnyVariant skinnyVariant(int v) {
  SkinnyVariant s;
  if (v == 1)
    s.earlyWeights = false;
  else if (v == 2)
    s.maxSplit = 2;
  else if (v == 3)
    s.tma = false;
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
  int mTiles = 0;       ///< 16-row MMA tiles covering M (1..4)
  int warpsN = 0;       ///< warp columns; tileCols = 32 * warpsN
  int warpsK = 0;       ///< warps sharing a column, kSkinnyWarps / warpsN
  int64_t tileCols = 0; ///< output columns per CTA
  int split = 0;        ///< cluster size: CTAs per column tile
  int64_t kSlice = 0;   ///< K elements per CTA, a multiple of 16
  int xGroups = 0;      ///< x arrives in this many cp.async groups (1..4)
  bool earlyWeights = false; ///< when the call's staticWeight allows
  int64_t nTiles = 0;   ///< column tiles per batch entry
  int64_t ctas = 0;     ///< nTiles * batch * split
  int wStride = 0;      ///< shared-memory row of W, elements
  int xStride = 0;      ///< shared-memory row of x, elements
  int pStride = 0;      ///< row of the f32 partial tiles, floats
  int64_t wBytes = 0, xBytes = 0, partBytes = 0;
  int64_t smemBytes = 0; ///< max(wBytes + xBytes, partBytes)
  int threads() const { return kSkinnyThreads; }
};

/// How many CTAs of a cluster size can be resident at once for a CTA of
/// `smemBytes` (the runtime asks cudaOccupancyMaxActiveClusters; a CPU test
/// passes a model). A second wave costs what the model says it costs.
using SkinnyResidency = std::function<int64_t(int split, int64_t smemBytes)>;

namespace detail {
inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
} // namespace detail

/// The launch shape for `prob`, or nullopt when the skinny kernel does not
/// apply (M > 64, K not a multiple of 8, rows not 16-byte aligned, slices
/// too large for shared memory, ...).
///
/// Candidates: tiles of 32, 64 or 128 columns times splits 1, 2, 4, 8 on
/// `sms` SMs. The cost of a candidate is what the busiest SM moves: per
/// CTA, half its W slice (copied while the previous kernel runs), its x
/// slice and the partials its cluster exchanges, times the CTAs that SM
/// runs (side by side, or in a second wave when `residency` says the
/// clusters do not all fit). Ties go to more CTAs, then to the smaller
/// split.
inline std::optional<SkinnyGemmPlan>
planSkinnyGemm(const SkinnyGemmProblem &p, int sms,
               const SkinnyResidency &residency,
               SkinnyVariant v = SkinnyVariant()) {
  using detail::ceilDiv;
  if (p.m < 1 || p.m > kSkinnyMaxM || p.n < 1 || p.n > (int64_t(1) << 30) ||
      p.k < 8 || p.k % 8 || p.k > (int64_t(1) << 30) || p.batch < 1 ||
      p.batch > 65535)
    return std::nullopt;
  // Every row segment is copied with 16-byte cp.async.
  if (p.x % 16 || (p.m > 1 && p.xRow % 8) || (p.batch > 1 && p.xBatch % 8))
    return std::nullopt;
  if (p.w % 16 || p.wRow % 8 || (p.batch > 1 && p.wBatch % 8))
    return std::nullopt;
  const int mTiles = int(ceilDiv(p.m, 16));
  const int64_t rows = 16 * int64_t(mTiles);
  std::optional<SkinnyGemmPlan> best;
  int64_t bestCost = 0;
  for (int warpsN : {1, 2, 4}) {
    const int64_t cols = kSkinnyWarpCols * warpsN;
    const int64_t nTiles = ceilDiv(p.n, cols);
    for (int split = 1; split <= std::min(v.maxSplit, kSkinnyMaxSplit);
         split *= 2) {
      const int64_t kSlice = ceilDiv(ceilDiv(p.k, split), 16) * 16;
      if ((split - 1) * kSlice >= p.k)
        break; // a rank without K
      SkinnyGemmPlan c;
      c.mTiles = mTiles;
      c.warpsN = warpsN;
      c.warpsK = kSkinnyWarps / warpsN;
      c.tileCols = cols;
      c.split = split;
      c.kSlice = kSlice;
      c.xGroups = int(std::min<int64_t>(4, kSlice / 16));
      c.earlyWeights = v.earlyWeights;
      c.nTiles = nTiles;
      c.ctas = nTiles * p.batch * split;
      c.xStride = int(kSlice + kSkinnyRowPad);
      c.wStride = int(p.weightKMajor ? kSlice + kSkinnyRowPad
                                     : cols + kSkinnyRowPad);
      c.pStride = int(cols + 4);
      c.wBytes = (p.weightKMajor ? cols : kSlice) * c.wStride * 2;
      c.xBytes = rows * c.xStride * 2;
      c.partBytes = int64_t(c.warpsK) * rows * c.pStride * 4;
      c.smemBytes = std::max(c.wBytes + c.xBytes, c.partBytes);
      if (c.wBytes + c.xBytes > kSkinnySmemBudget ||
          c.smemBytes > kSkinnySmemPerCta)
        continue;
      const int64_t resident = residency(split, c.smemBytes);
      if (resident < split)
        continue; // not even one cluster fits
      const int64_t exchanged =
          split > 1 ? 2 * rows * cols * 4 * (split - 1) / split : 0;
      // CTAs the busiest SM runs, one after another or side by side.
      const int64_t load =
          ceilDiv(c.ctas, std::min<int64_t>(std::max(1, sms), resident));
      const int64_t cost = (kSlice * cols + c.xBytes + exchanged) * load;
      if (!best || cost < bestCost ||
          (cost == bestCost && c.ctas > best->ctas)) {
        best = c;
        bestCost = cost;
      }
    }
  }
  return best;
}

/// CTAs of the kernel an SM holds by registers (__launch_bounds__ in
/// SkinnyGemm.cu: at most 128 registers a thread).
constexpr int64_t kSkinnyCtasPerSmByRegisters = 2;

/// The residency model of a GPU of `sms` SMs with `smemPerSm` bytes of
/// shared memory each and every cluster size placeable on any SM (the CPU
/// tests; the runtime asks the driver).
inline SkinnyResidency simpleResidency(int sms,
                                       int64_t smemPerSm = 228 * 1024) {
  return [sms, smemPerSm](int split, int64_t smemBytes) {
    const int64_t perSm =
        std::min(kSkinnyCtasPerSmByRegisters,
                 std::max<int64_t>(1, smemPerSm / (smemBytes + 1024)));
    return int64_t(sms) * perSm / split * split;
  };
}

// --- The TMA + wgmma kernel (SkinnyGemmTma.cu): bf16 linear only. --------
//
// One warpgroup a CTA; the tile is 64 rows (M <= 64, the rest zero-filled
// by TMA) by 64 or 128 columns; W and x arrive as 64 x 64 boxes (8 KB,
// 128-byte swizzle), every box of the K slice resident at once.

constexpr int kSkinnyTmaThreads = 128;
constexpr int64_t kSkinnyTmaChunk = 64;               ///< K per box
constexpr int64_t kSkinnyTmaBoxBytes = 64 * 64 * 2;   ///< one 64 x 64 box
/// The kernel aligns its shared memory to 1024 bytes itself.
constexpr int64_t kSkinnyTmaAlignPad = 1024;

struct SkinnyTmaPlan {
  int64_t tileCols = 0; ///< 64 or 128
  int split = 0;        ///< cluster size: CTAs per column tile
  int64_t kSlice = 0;   ///< a multiple of 64
  int chunks = 0;       ///< kSlice / 64
  bool earlyWeights = false;
  int64_t nTiles = 0, ctas = 0;
  int pStride = 0;      ///< f32 partial tile row, floats
  int64_t wBytes = 0, xBytes = 0, partBytes = 0;
  int64_t barOffset = 0; ///< the mbarriers, after the operands
  int64_t smemBytes = 0; ///< pad + max(operands, partials) + barriers
  int threads() const { return kSkinnyTmaThreads; }
};

/// The TMA kernel's shape for a bf16 linear (K-major W, one batch entry),
/// or nullopt (another layout, misalignment for TMA, slices too large).
/// Candidates and cost as planSkinnyGemm's.
inline std::optional<SkinnyTmaPlan>
planSkinnyTma(const SkinnyGemmProblem &p, int sms,
              const SkinnyResidency &residency,
              SkinnyVariant v = SkinnyVariant()) {
  using detail::ceilDiv;
  if (!v.tma || !p.weightKMajor || p.batch != 1 || p.m < 1 ||
      p.m > kSkinnyMaxM || p.n < 1 || p.n > (int64_t(1) << 30) || p.k < 8 ||
      p.k % 8 || p.k > (int64_t(1) << 30))
    return std::nullopt;
  // cuTensorMapEncodeTiled: 16-byte aligned bases and row pitches.
  if (p.x % 16 || p.w % 16 || (p.m > 1 && p.xRow % 8) || p.wRow % 8)
    return std::nullopt;
  std::optional<SkinnyTmaPlan> best;
  int64_t bestCost = 0;
  for (int64_t cols : {int64_t(64), int64_t(128)}) {
    const int64_t nTiles = ceilDiv(p.n, cols);
    for (int split = 1; split <= std::min(v.maxSplit, kSkinnyMaxSplit);
         split *= 2) {
      const int64_t kSlice =
          ceilDiv(ceilDiv(p.k, split), kSkinnyTmaChunk) * kSkinnyTmaChunk;
      if ((split - 1) * kSlice >= p.k)
        break; // a rank without K
      SkinnyTmaPlan c;
      c.tileCols = cols;
      c.split = split;
      c.kSlice = kSlice;
      c.chunks = int(kSlice / kSkinnyTmaChunk);
      c.earlyWeights = v.earlyWeights;
      c.nTiles = nTiles;
      c.ctas = nTiles * split;
      c.pStride = int(cols + 4);
      c.wBytes = c.chunks * (cols / 64) * kSkinnyTmaBoxBytes;
      c.xBytes = c.chunks * kSkinnyTmaBoxBytes;
      c.partBytes = 64 * c.pStride * 4;
      if (c.wBytes + c.xBytes > kSkinnySmemBudget)
        continue;
      c.barOffset = std::max(c.wBytes + c.xBytes, c.partBytes);
      c.smemBytes = kSkinnyTmaAlignPad + c.barOffset + 8 * (1 + c.chunks);
      if (c.smemBytes > kSkinnySmemPerCta)
        continue;
      const int64_t resident = residency(split, c.smemBytes);
      if (resident < split)
        continue;
      const int64_t exchanged =
          split > 1 ? 2 * 64 * cols * 4 * (split - 1) / split : 0;
      const int64_t load =
          ceilDiv(c.ctas, std::min<int64_t>(std::max(1, sms), resident));
      const int64_t cost = (kSlice * cols + c.xBytes + exchanged) * load;
      if (!best || cost < bestCost ||
          (cost == bestCost && c.ctas > best->ctas)) {
        best = c;
        bestCost = cost;
      }
    }
  }
  return best;
}

} // namespace mlart::cuda

#endif // MLART_CUDA_SKINNYGEMMPLAN_H
