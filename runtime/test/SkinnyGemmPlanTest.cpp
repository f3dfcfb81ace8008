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

struct Expect {
  int warpsN, warpsK, split;
  int64_t kSlice, nTiles, ctas;
};

void expectPlan(const SkinnyGemmProblem &prob, Expect e) {
  std::optional<SkinnyGemmPlan> p = planSkinnyGemm(prob, kH200Sms);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->mTiles, int((prob.m + 15) / 16));
  EXPECT_EQ(p->warpsN, e.warpsN);
  EXPECT_EQ(p->warpsK, e.warpsK);
  EXPECT_EQ(p->split, e.split);
  EXPECT_EQ(p->kSlice, e.kSlice);
  EXPECT_EQ(p->nTiles, e.nTiles);
  EXPECT_EQ(p->ctas, e.ctas);
}

/// What every plan must satisfy, whatever the heuristic prefers.
void checkInvariants(const SkinnyGemmProblem &prob, int sms) {
  SCOPED_TRACE("m=" + std::to_string(prob.m) + " n=" +
               std::to_string(prob.n) + " k=" + std::to_string(prob.k) +
               " batch=" + std::to_string(prob.batch) +
               " sms=" + std::to_string(sms));
  std::optional<SkinnyGemmPlan> p = planSkinnyGemm(prob, sms);
  ASSERT_TRUE(p.has_value());
  EXPECT_GE(p->split, 1);
  EXPECT_LE(p->split, kSkinnyMaxSplit);
  EXPECT_EQ(p->split & (p->split - 1), 0) << "power of two";
  EXPECT_EQ(p->kSlice % kSkinnyChunk, 0);
  EXPECT_GE(p->kSlice * p->split, prob.k) << "K covered";
  EXPECT_LT((p->split - 1) * p->kSlice, prob.k) << "every rank has K";
  EXPECT_GE(p->warpsK, 1);
  EXPECT_LE(p->warpsK * kSkinnyChunk, p->kSlice) << "every warp has a chunk";
  EXPECT_LE(p->threads(), 256);
  EXPECT_GE(p->nTiles * kSkinnyWarpCols * p->warpsN, prob.n);
  EXPECT_LT((p->nTiles - 1) * kSkinnyWarpCols * p->warpsN, prob.n);
  EXPECT_EQ(p->ctas, p->nTiles * prob.batch * p->split);
  EXPECT_LE(p->smemBytes, kSkinnySmemBudget);
  const int64_t rows = 16 * p->mTiles;
  EXPECT_GE(p->smemBytes, rows * p->xStride * 2);
  EXPECT_GE(p->smemBytes, p->warpsK * rows * p->pStride * 4);
  EXPECT_GE(p->xStride, p->kSlice);
  EXPECT_EQ(p->xStride * 2 % 128, 64) << "conflict-free fragment loads";
  EXPECT_GE(p->pStride, kSkinnyWarpCols * p->warpsN);
  EXPECT_EQ(p->pStride % 4, 0) << "float4 reads of the partials";
}

} // namespace

// The DeepSeek-V2-Lite decode step at batch 64 on an H200 (132 SMs): every
// projection gets one wave of 132..264 CTAs, each streaming 8-64 KB of W.
TEST(SkinnyGemmPlan, DecodeStepShapesOnH200) {
  // q_proj: 48 column tiles of 64, K split 4 ways.
  expectPlan(linearShape(64, 3072, 2048), {2, 4, 4, 512, 48, 192});
  // kv_a_proj: 64-wide tiles reach only 9 x 8 = 72 CTAs; 32-wide give 144.
  expectPlan(linearShape(64, 576, 2048), {1, 8, 8, 256, 18, 144});
  // o_proj: split 4 would leave 128 CTAs (< 132 SMs).
  expectPlan(linearShape(64, 2048, 2048), {2, 4, 8, 256, 32, 256});
  // q_absorb: 16 heads x 8 tiles, K = 128 split in two.
  expectPlan(perHeadShape(64, 16, 128, 512), {2, 2, 2, 64, 8, 256});
  // v_up: 16 heads x 2 tiles, K = 512 split 8 ways.
  expectPlan(perHeadShape(64, 16, 512, 128), {2, 2, 8, 64, 2, 256});
  // Fewer rows: the same split, fewer MMA tiles.
  expectPlan(linearShape(1, 3072, 2048), {2, 4, 4, 512, 48, 192});
  expectPlan(linearShape(33, 576, 2048), {1, 8, 8, 256, 18, 144});
}

TEST(SkinnyGemmPlan, InvariantsOverShapes) {
  for (int sms : {1, 16, 78, 132})
    for (int64_t m : {1, 7, 16, 17, 33, 48, 64})
      for (int64_t n : {1, 8, 32, 33, 200, 576, 4096})
        for (int64_t k : {8, 24, 40, 128, 304, 2048, 4096}) {
          checkInvariants(linearShape(m, n, k), sms);
          if (n % 4 == 0)
            checkInvariants(perHeadShape(m, 3, k, n), sms);
        }
}

TEST(SkinnyGemmPlan, SmallKKeepsOneChunkPerRank) {
  // K = 40: two chunks, the second partial; 16 tiles would like 8 ranks.
  std::optional<SkinnyGemmPlan> p =
      planSkinnyGemm(linearShape(64, 1024, 40), kH200Sms);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->split, 2);
  EXPECT_EQ(p->kSlice, 32);
  EXPECT_EQ(p->warpsK, 1);
}

TEST(SkinnyGemmPlan, LargeKSplitsForSharedMemory) {
  // x slice [64, K / split] must fit: K = 6144 needs split 8 even though
  // 96 tiles x 2 would already cover the SMs.
  std::optional<SkinnyGemmPlan> p =
      planSkinnyGemm(linearShape(64, 6144, 6144), kH200Sms);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->split, 8);
  EXPECT_LE(p->smemBytes, kSkinnySmemBudget);
  // With 16 rows the same K needs a smaller split.
  p = planSkinnyGemm(linearShape(16, 6144, 6144), kH200Sms);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->split, 2);
  // Too large at any split: cuBLAS.
  EXPECT_FALSE(planSkinnyGemm(linearShape(64, 2048, 16384), kH200Sms));
}

TEST(SkinnyGemmPlan, RefusesWhatTheKernelCannotRun) {
  EXPECT_FALSE(planSkinnyGemm(linearShape(65, 256, 256), kH200Sms));
  EXPECT_FALSE(planSkinnyGemm(linearShape(0, 256, 256), kH200Sms));
  EXPECT_FALSE(planSkinnyGemm(linearShape(8, 0, 256), kH200Sms));
  EXPECT_FALSE(planSkinnyGemm(linearShape(8, 256, 300), kH200Sms)); // K % 8
  EXPECT_FALSE(planSkinnyGemm(linearShape(8, 256, 4), kH200Sms));

  SkinnyGemmProblem p = linearShape(8, 256, 256);
  p.x += 8; // x not 16-byte aligned
  EXPECT_FALSE(planSkinnyGemm(p, kH200Sms));
  p = linearShape(8, 256, 256);
  p.xRow = 260; // rows not 16-byte aligned
  EXPECT_FALSE(planSkinnyGemm(p, kH200Sms));
  p.m = 1; // ... which does not matter for one row
  EXPECT_TRUE(planSkinnyGemm(p, kH200Sms));
  p = linearShape(8, 256, 256);
  p.wRow = 264 + 4;
  EXPECT_FALSE(planSkinnyGemm(p, kH200Sms));
  p = linearShape(8, 256, 256);
  p.w += 8;
  EXPECT_FALSE(planSkinnyGemm(p, kH200Sms));

  // Per head: 8-byte loads of 4 columns.
  EXPECT_TRUE(planSkinnyGemm(perHeadShape(8, 16, 128, 200), kH200Sms));
  EXPECT_FALSE(planSkinnyGemm(perHeadShape(8, 16, 128, 202), kH200Sms));
  SkinnyGemmProblem h = perHeadShape(8, 16, 128, 512);
  h.w += 4;
  EXPECT_FALSE(planSkinnyGemm(h, kH200Sms));
  h = perHeadShape(8, 16, 128, 512);
  h.wBatch += 2;
  EXPECT_FALSE(planSkinnyGemm(h, kH200Sms));
  h = perHeadShape(8, 16, 128, 512);
  h.xBatch = 132; // head stride of x not 16-byte aligned
  EXPECT_FALSE(planSkinnyGemm(h, kH200Sms));
  h = perHeadShape(8, 70000, 128, 512); // grid.y limit
  EXPECT_FALSE(planSkinnyGemm(h, kH200Sms));
}
