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
  int split;
  int64_t kSlice, nTiles, ctas;
};

void expectPlan(const SkinnyGemmProblem &prob, Expect e,
                SkinnyVariant v = SkinnyVariant()) {
  std::optional<SkinnyGemmPlan> p = planSkinnyGemm(prob, kH200Sms, v);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->mTiles, int((prob.m + 15) / 16));
  EXPECT_EQ(p->stages, v.stages);
  EXPECT_EQ(p->prefetch, v.prefetch);
  EXPECT_EQ(p->split, e.split);
  EXPECT_EQ(p->kSlice, e.kSlice);
  EXPECT_EQ(p->nTiles, e.nTiles);
  EXPECT_EQ(p->ctas, e.ctas);
}

/// What every plan must satisfy, whatever the heuristic prefers.
void checkInvariants(const SkinnyGemmProblem &prob, int sms, int variant) {
  SCOPED_TRACE("m=" + std::to_string(prob.m) + " n=" +
               std::to_string(prob.n) + " k=" + std::to_string(prob.k) +
               " batch=" + std::to_string(prob.batch) +
               " sms=" + std::to_string(sms) +
               " variant=" + std::to_string(variant));
  const SkinnyVariant v = skinnyVariant(variant);
  std::optional<SkinnyGemmPlan> p = planSkinnyGemm(prob, sms, v);
  ASSERT_TRUE(p.has_value());
  EXPECT_GE(p->split, 1);
  EXPECT_LE(p->split, std::min(v.maxSplit, kSkinnyMaxSplit));
  EXPECT_EQ(p->kSlice % kSkinnyChunk, 0);
  EXPECT_GE(p->kSlice * p->split, prob.k) << "K covered";
  EXPECT_LT((p->split - 1) * p->kSlice, prob.k) << "every rank has K";
  EXPECT_EQ(p->threads(), kSkinnyThreads);
  EXPECT_GE(p->nTiles * kSkinnyTileCols, prob.n);
  EXPECT_LT((p->nTiles - 1) * kSkinnyTileCols, prob.n);
  EXPECT_EQ(p->ctas, p->nTiles * prob.batch * p->split);
  EXPECT_LE(p->smemBytes, kSkinnySmemPerSm);
  const int64_t rows = 16 * p->mTiles;
  EXPECT_GE(p->smemBytes, p->stages * (rows + kSkinnyTileCols) * 128)
      << "the ring";
  EXPECT_GE(p->smemBytes, 4 * rows * p->pStride * 4) << "the partials";
  EXPECT_GE(p->pStride, kSkinnyTileCols);
  EXPECT_EQ(p->pStride % 4, 0) << "float4 reads of the partials";
  if (p->split > 1)
    EXPECT_LE(p->ctas, 2 * sms) << "one wave";
}

} // namespace

// The DeepSeek-V2-Lite decode step at batch 64 on an H200 (132 SMs), the
// default variant (8 stages, 128 KB of shared memory: one CTA per SM).
TEST(SkinnyGemmPlan, DecodeStepShapesOnH200) {
  // q_proj: 48 column tiles, split 3 would need a second wave.
  expectPlan(linearShape(64, 3072, 2048), {2, 1024, 48, 96});
  // kv_a_proj: 9 tiles, the largest split of the variant.
  expectPlan(linearShape(64, 576, 2048), {4, 512, 9, 36});
  expectPlan(linearShape(64, 2048, 2048), {4, 512, 32, 128}); // o_proj
  // q_absorb: 16 heads x 8 tiles, K = 128 (two chunks) not split.
  expectPlan(perHeadShape(64, 16, 128, 512), {1, 128, 8, 128});
  // v_up: 16 heads x 2 tiles, K = 512 split 4 ways.
  expectPlan(perHeadShape(64, 16, 512, 128), {4, 128, 2, 128});
  // One row: 80 KB of shared memory, two CTAs an SM.
  expectPlan(linearShape(1, 3072, 2048), {4, 512, 48, 192});
}

TEST(SkinnyGemmPlan, Variants) {
  // 4 stages: two CTAs an SM, so q_proj splits 4 ways.
  expectPlan(linearShape(64, 3072, 2048), {4, 512, 48, 192}, skinnyVariant(1));
  // Split <= 2.
  expectPlan(linearShape(64, 576, 2048), {2, 1024, 9, 18}, skinnyVariant(2));
  // Split <= 8.
  expectPlan(linearShape(64, 576, 2048), {8, 256, 9, 72}, skinnyVariant(3));
  expectPlan(linearShape(64, 576, 2048), {4, 512, 9, 36}, skinnyVariant(4));
  // Unknown ring depths are refused.
  SkinnyVariant bad;
  bad.stages = 6;
  EXPECT_FALSE(planSkinnyGemm(linearShape(64, 576, 2048), kH200Sms, bad));
}

TEST(SkinnyGemmPlan, InvariantsOverShapes) {
  for (int variant = 0; variant < kSkinnyVariants; ++variant)
    for (int sms : {1, 16, 78, 132})
      for (int64_t m : {1, 7, 16, 17, 33, 48, 64})
        for (int64_t n : {1, 8, 32, 33, 200, 576, 4096})
          for (int64_t k : {8, 24, 40, 128, 304, 2048, 6144}) {
            checkInvariants(linearShape(m, n, k), sms, variant);
            if (n % 8 == 0)
              checkInvariants(perHeadShape(m, 3, k, n), sms, variant);
          }
}

TEST(SkinnyGemmPlan, SmallKKeepsOneChunkPerRank) {
  // K = 40: one chunk, so no split however few tiles there are.
  std::optional<SkinnyGemmPlan> p =
      planSkinnyGemm(linearShape(64, 1024, 40), kH200Sms);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->split, 1);
  EXPECT_EQ(p->kSlice, 64);
  // K = 136: three chunks, at most three ranks.
  p = planSkinnyGemm(linearShape(64, 64, 136), kH200Sms, skinnyVariant(3));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->split, 3);
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

  // Per head: 16-byte copies of 8 columns (a partial last one is fine),
  // rows 16-byte aligned.
  EXPECT_TRUE(planSkinnyGemm(perHeadShape(8, 16, 128, 200), kH200Sms));
  EXPECT_FALSE(planSkinnyGemm(perHeadShape(8, 16, 128, 202), kH200Sms));
  EXPECT_FALSE(planSkinnyGemm(perHeadShape(8, 16, 128, 36), kH200Sms));
  SkinnyGemmProblem h = perHeadShape(8, 16, 128, 200);
  h.wRow = 204; // a wider row, not a multiple of 8
  EXPECT_FALSE(planSkinnyGemm(h, kH200Sms));
  h.wRow = 208; // a wider row: partial last unit
  EXPECT_TRUE(planSkinnyGemm(h, kH200Sms));
  h = perHeadShape(8, 16, 128, 512);
  h.w += 8;
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
