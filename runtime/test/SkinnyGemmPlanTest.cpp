//===- SkinnyGemmPlanTest.cpp - Launch shapes of the skinny GEMM (CPU) ----===//
#include "cuda/SkinnyGemmPlan.h"

#include <gtest/gtest.h>

#include <string>

using namespace mlart::cuda;

namespace {

constexpr int kH200Sms = 132;
constexpr uintptr_t kAligned = 0x10000;

SkinnyGemmProblem linearShape(int64_t m, int64_t n, int64_t k) {
  SkinnyGemmProblem p;
  p.weightKMajor = true;
  p.m = m, p.n = n, p.k = k, p.batch = 1;
  p.x = p.w = kAligned;
  p.xRow = k, p.wRow = k;
  return p;
}

/// x [B, H, K] @ w [H, K, N], contiguous.
SkinnyGemmProblem perHeadShape(int64_t b, int64_t h, int64_t k, int64_t n) {
  SkinnyGemmProblem p;
  p.weightKMajor = false;
  p.m = b, p.n = n, p.k = k, p.batch = h;
  p.x = p.w = kAligned;
  p.xRow = h * k, p.xBatch = k;
  p.wRow = n, p.wBatch = k * n;
  return p;
}

/// The H200 model: 132 SMs, every cluster size placeable anywhere.
std::optional<SkinnyGemmPlan> planH200(const SkinnyGemmProblem &prob,
                                       SkinnyVariant v = SkinnyVariant()) {
  return planSkinnyGemm(prob, kH200Sms, simpleResidency(kH200Sms), v);
}

struct Expect {
  int64_t tileCols;
  int split;
  int64_t kSlice, nTiles, ctas;
};

void expectPlan(const SkinnyGemmProblem &prob, Expect e,
                SkinnyVariant v = SkinnyVariant()) {
  std::optional<SkinnyGemmPlan> p = planH200(prob, v);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->mTiles, int((prob.m + 15) / 16));
  EXPECT_EQ(p->earlyWeights, v.earlyWeights);
  EXPECT_EQ(p->tileCols, e.tileCols);
  EXPECT_EQ(p->split, e.split);
  EXPECT_EQ(p->kSlice, e.kSlice);
  EXPECT_EQ(p->nTiles, e.nTiles);
  EXPECT_EQ(p->ctas, e.ctas);
  EXPECT_LE(p->ctas, simpleResidency(kH200Sms)(p->split, p->smemBytes))
      << "one wave";
}

/// What every plan must satisfy, whatever the heuristic prefers.
void checkInvariants(const SkinnyGemmProblem &prob, int sms, int variant) {
  SCOPED_TRACE("m=" + std::to_string(prob.m) + " n=" +
               std::to_string(prob.n) + " k=" + std::to_string(prob.k) +
               " batch=" + std::to_string(prob.batch) +
               " sms=" + std::to_string(sms) +
               " variant=" + std::to_string(variant));
  const SkinnyVariant v = skinnyVariant(variant);
  const SkinnyResidency residency = simpleResidency(sms);
  std::optional<SkinnyGemmPlan> p = planSkinnyGemm(prob, sms, residency, v);
  const int64_t rows = 16 * ((prob.m + 15) / 16);
  if (!p) {
    // Refused only when even the largest split's slices, in 32-column
    // tiles, exceed the budget (cuBLAS then runs it).
    const int split = std::min(v.maxSplit, kSkinnyMaxSplit);
    const int64_t slice = ((prob.k + split - 1) / split + 15) / 16 * 16;
    const int64_t w = prob.weightKMajor ? 32 * (slice + kSkinnyRowPad)
                                        : slice * (32 + kSkinnyRowPad);
    EXPECT_GT(2 * (w + rows * (slice + kSkinnyRowPad)), kSkinnySmemBudget)
        << "refused although the smallest slices fit";
    return;
  }
  EXPECT_GE(p->split, 1);
  EXPECT_LE(p->split, std::min(v.maxSplit, kSkinnyMaxSplit));
  EXPECT_EQ(p->split & (p->split - 1), 0) << "a power of two";
  EXPECT_EQ(p->kSlice % 16, 0);
  EXPECT_GE(p->kSlice * p->split, prob.k) << "K covered";
  EXPECT_LT((p->split - 1) * p->kSlice, prob.k) << "every rank has K";
  EXPECT_EQ(p->threads(), kSkinnyThreads);
  EXPECT_EQ(p->warpsN * p->warpsK, kSkinnyWarps);
  EXPECT_EQ(p->tileCols, kSkinnyWarpCols * p->warpsN);
  EXPECT_GE(p->nTiles * p->tileCols, prob.n);
  EXPECT_LT((p->nTiles - 1) * p->tileCols, prob.n);
  EXPECT_EQ(p->ctas, p->nTiles * prob.batch * p->split);
  EXPECT_GE(residency(p->split, p->smemBytes), p->split);
  EXPECT_GE(p->xGroups, 1);
  EXPECT_LE(p->xGroups, 4);
  EXPECT_LE(p->xGroups, p->kSlice / 16);
  // Shared memory: the padded slices, then the partials over them.
  EXPECT_EQ(rows, 16 * p->mTiles);
  EXPECT_EQ(p->xStride, p->kSlice + kSkinnyRowPad);
  EXPECT_EQ(p->xBytes, rows * p->xStride * 2);
  if (prob.weightKMajor) {
    EXPECT_EQ(p->wStride, p->kSlice + kSkinnyRowPad);
    EXPECT_EQ(p->wBytes, p->tileCols * p->wStride * 2);
  } else {
    EXPECT_EQ(p->wStride, p->tileCols + kSkinnyRowPad);
    EXPECT_EQ(p->wBytes, p->kSlice * p->wStride * 2);
  }
  // ldmatrix: eight rows 16 bytes apart modulo 128 bytes, never the same.
  EXPECT_EQ((p->xStride * 2) % 32, 16);
  EXPECT_EQ((p->wStride * 2) % 32, 16);
  EXPECT_EQ(p->wBytes % 16, 0) << "x's slice 16-byte aligned";
  EXPECT_LE(p->wBytes + p->xBytes, kSkinnySmemBudget);
  EXPECT_GE(p->pStride, p->tileCols);
  EXPECT_EQ(p->pStride % 4, 0) << "float4 reads of the partials";
  EXPECT_EQ(p->partBytes, p->warpsK * rows * p->pStride * 4);
  EXPECT_EQ(p->smemBytes, std::max(p->wBytes + p->xBytes, p->partBytes));
  EXPECT_LE(p->smemBytes, kSkinnySmemPerCta);
}

} // namespace

// The DeepSeek-V2-Lite decode step at batch 64 on an H200 (132 SMs).
TEST(SkinnyGemmPlan, DecodeStepShapesOnH200) {
  // q_proj: 24 tiles of 128 columns x 4 ranks; a 64-column tile would need
  // 192 CTAs or x and W slices beyond 200 KB.
  expectPlan(linearShape(64, 3072, 2048), {128, 4, 512, 24, 96});
  // kv_a_proj: 9 tiles x 8 ranks (32-column tiles would need two CTAs on
  // some SMs).
  expectPlan(linearShape(64, 576, 2048), {64, 8, 256, 9, 72});
  // o_proj: 32 tiles x 4 ranks (ties with 16 x 8; the smaller split wins).
  expectPlan(linearShape(64, 2048, 2048), {64, 4, 512, 32, 128});
  // q_absorb: 16 heads x 8 tiles, K = 128 not split.
  expectPlan(perHeadShape(64, 16, 128, 512), {64, 1, 128, 8, 128});
  // v_up: 16 heads x 4 tiles of 32 columns, K = 512 split 2 ways.
  expectPlan(perHeadShape(64, 16, 512, 128), {32, 2, 256, 4, 128});
}

TEST(SkinnyGemmPlan, Variants) {
  // Weights after the wait: the same shape.
  expectPlan(linearShape(64, 3072, 2048), {128, 4, 512, 24, 96},
             skinnyVariant(1));
  // Split <= 2: kv_a_proj in 32-column tiles.
  std::optional<SkinnyGemmPlan> p =
      planH200(linearShape(64, 576, 2048), skinnyVariant(2));
  ASSERT_TRUE(p.has_value());
  EXPECT_LE(p->split, 2);
}

// The residency answer is obeyed: without room for clusters of 4 and 8,
// q_proj takes another shape or none.
TEST(SkinnyGemmPlan, ObeysResidency) {
  const SkinnyResidency noBigClusters = [](int split, int64_t smem) {
    return split > 2 ? int64_t(0) : simpleResidency(kH200Sms)(split, smem);
  };
  std::optional<SkinnyGemmPlan> p = planSkinnyGemm(
      linearShape(64, 2048, 2048), kH200Sms, noBigClusters);
  ASSERT_TRUE(p.has_value());
  EXPECT_LE(p->split, 2);
  EXPECT_LE(p->ctas, kH200Sms);
  const SkinnyResidency nothing = [](int, int64_t) { return int64_t(0); };
  EXPECT_FALSE(planSkinnyGemm(linearShape(64, 2048, 2048), kH200Sms, nothing));
}

TEST(SkinnyGemmPlan, InvariantsOverShapes) {
  for (int variant = 0; variant < kSkinnyVariants; ++variant)
    for (int sms : {16, 78, 132})
      for (int64_t m : {1, 7, 16, 17, 33, 48, 64})
        for (int64_t n : {1, 8, 32, 33, 200, 576, 4096})
          for (int64_t k : {8, 24, 40, 128, 304, 2048, 6144}) {
            checkInvariants(linearShape(m, n, k), sms, variant);
            if (n % 8 == 0)
              checkInvariants(perHeadShape(m, 3, k, n), sms, variant);
          }
}

TEST(SkinnyGemmPlan, SmallKKeepsOneRank) {
  // K = 8: one k16 step, so no split however few tiles there are.
  std::optional<SkinnyGemmPlan> p = planH200(linearShape(64, 1024, 8));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->split, 1);
  EXPECT_EQ(p->kSlice, 16);
  EXPECT_EQ(p->xGroups, 1);
}

// The TMA + wgmma kernel's shapes for the step's three linears.
TEST(SkinnyGemmPlan, TmaStepShapesOnH200) {
  struct Case {
    int64_t n, tileCols;
    int split;
    int64_t kSlice, nTiles, ctas;
  };
  for (Case c : {Case{3072, 128, 4, 512, 24, 96}, // q_proj
                 Case{576, 64, 8, 256, 9, 72},    // kv_a_proj
                 Case{2048, 64, 4, 512, 32, 128}}) { // o_proj (ties 128 x 8)
    SCOPED_TRACE("n=" + std::to_string(c.n));
    std::optional<SkinnyTmaPlan> p = planSkinnyTma(
        linearShape(64, c.n, 2048), kH200Sms, simpleResidency(kH200Sms));
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->tileCols, c.tileCols);
    EXPECT_EQ(p->split, c.split);
    EXPECT_EQ(p->kSlice, c.kSlice);
    EXPECT_EQ(p->chunks, c.kSlice / 64);
    EXPECT_EQ(p->nTiles, c.nTiles);
    EXPECT_EQ(p->ctas, c.ctas);
  }
}

TEST(SkinnyGemmPlan, TmaInvariantsOverShapes) {
  for (int variant = 0; variant < kSkinnyVariants; ++variant)
    for (int sms : {16, 132})
      for (int64_t m : {1, 7, 33, 64})
        for (int64_t n : {1, 8, 33, 200, 576, 4096})
          for (int64_t k : {8, 40, 128, 304, 2048, 6144}) {
            SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) +
                         " k=" + std::to_string(k) + " sms=" +
                         std::to_string(sms) + " v=" + std::to_string(variant));
            const SkinnyVariant v = skinnyVariant(variant);
            const SkinnyResidency res = simpleResidency(sms);
            std::optional<SkinnyTmaPlan> p =
                planSkinnyTma(linearShape(m, n, k), sms, res, v);
            if (!v.tma) {
              EXPECT_FALSE(p.has_value());
              continue;
            }
            if (!p) { // only when K's slices cannot fit at the largest split
              const int split = std::min(v.maxSplit, kSkinnyMaxSplit);
              const int64_t slice = ((k + split - 1) / split + 63) / 64 * 64;
              EXPECT_GT(slice / 64 * 2 * kSkinnyTmaBoxBytes, kSkinnySmemBudget);
              continue;
            }
            EXPECT_TRUE(p->tileCols == 64 || p->tileCols == 128);
            EXPECT_EQ(p->kSlice % 64, 0);
            EXPECT_EQ(p->chunks, p->kSlice / 64);
            EXPECT_GE(p->kSlice * p->split, k);
            EXPECT_LT((p->split - 1) * p->kSlice, k);
            EXPECT_GE(p->nTiles * p->tileCols, n);
            EXPECT_LT((p->nTiles - 1) * p->tileCols, n);
            EXPECT_EQ(p->ctas, p->nTiles * p->split);
            EXPECT_EQ(p->wBytes, p->chunks * p->tileCols / 64 * kSkinnyTmaBoxBytes);
            EXPECT_EQ(p->xBytes, p->chunks * kSkinnyTmaBoxBytes);
            EXPECT_LE(p->wBytes + p->xBytes, kSkinnySmemBudget);
            EXPECT_GE(p->barOffset, p->wBytes + p->xBytes);
            EXPECT_GE(p->barOffset, p->partBytes);
            EXPECT_EQ(p->barOffset % 8, 0);
            EXPECT_EQ(p->smemBytes,
                      kSkinnyTmaAlignPad + p->barOffset + 8 * (1 + p->chunks));
            EXPECT_LE(p->smemBytes, kSkinnySmemPerCta);
            EXPECT_EQ(p->pStride % 4, 0);
            EXPECT_GE(res(p->split, p->smemBytes), p->split);
          }
}

TEST(SkinnyGemmPlan, TmaRefusals) {
  SkinnyGemmProblem p = linearShape(8, 256, 256);
  EXPECT_TRUE(planSkinnyTma(p, kH200Sms, simpleResidency(kH200Sms)));
  p.weightKMajor = false; // per-head layout: the mma.sync kernel
  EXPECT_FALSE(planSkinnyTma(p, kH200Sms, simpleResidency(kH200Sms)));
  p = linearShape(8, 256, 256);
  p.batch = 2;
  EXPECT_FALSE(planSkinnyTma(p, kH200Sms, simpleResidency(kH200Sms)));
  p = linearShape(8, 256, 256);
  p.w += 8; // TMA needs 16-byte aligned bases
  EXPECT_FALSE(planSkinnyTma(p, kH200Sms, simpleResidency(kH200Sms)));
  p = linearShape(8, 256, 256);
  p.xRow = 260;
  EXPECT_FALSE(planSkinnyTma(p, kH200Sms, simpleResidency(kH200Sms)));
  EXPECT_FALSE(planSkinnyTma(linearShape(8, 256, 256), kH200Sms,
                             simpleResidency(kH200Sms), skinnyVariant(3)));
}

TEST(SkinnyGemmPlan, RefusesWhatTheKernelCannotRun) {
  EXPECT_FALSE(planH200(linearShape(65, 256, 256)));
  EXPECT_FALSE(planH200(linearShape(0, 256, 256)));
  EXPECT_FALSE(planH200(linearShape(8, 0, 256)));
  EXPECT_FALSE(planH200(linearShape(8, 256, 300))); // K % 8
  EXPECT_FALSE(planH200(linearShape(8, 256, 4)));

  SkinnyGemmProblem p = linearShape(8, 256, 256);
  p.x += 8; // x not 16-byte aligned
  EXPECT_FALSE(planH200(p));
  p = linearShape(8, 256, 256);
  p.xRow = 260; // rows not 16-byte aligned
  EXPECT_FALSE(planH200(p));
  p.m = 1; // ... which does not matter for one row
  EXPECT_TRUE(planH200(p));
  p = linearShape(8, 256, 256);
  p.wRow = 264 + 4;
  EXPECT_FALSE(planH200(p));
  p = linearShape(8, 256, 256);
  p.w += 8;
  EXPECT_FALSE(planH200(p));

  // Per head: 16-byte copies of 8 columns (a partial last one is fine),
  // rows 16-byte aligned.
  EXPECT_TRUE(planH200(perHeadShape(8, 16, 128, 200)));
  EXPECT_FALSE(planH200(perHeadShape(8, 16, 128, 202)));
  EXPECT_FALSE(planH200(perHeadShape(8, 16, 128, 36)));
  SkinnyGemmProblem h = perHeadShape(8, 16, 128, 200);
  h.wRow = 204; // a wider row, not a multiple of 8
  EXPECT_FALSE(planH200(h));
  h.wRow = 208; // a wider row: partial last unit
  EXPECT_TRUE(planH200(h));
  h = perHeadShape(8, 16, 128, 512);
  h.w += 8;
  EXPECT_FALSE(planH200(h));
  h = perHeadShape(8, 16, 128, 512);
  h.wBatch += 2;
  EXPECT_FALSE(planH200(h));
  h = perHeadShape(8, 16, 128, 512);
  h.xBatch = 132; // head stride of x not 16-byte aligned
  EXPECT_FALSE(planH200(h));
  h = perHeadShape(8, 70000, 128, 512); // grid.y limit
  EXPECT_FALSE(planH200(h));
}
