//===- CacheCheckTest.cpp - mla-run's cache-write check, every layout -----===//
//
// The rows come from the runtime's own cache writer (the CPU cacheUpdate),
// so each layout is encoded as a compiled step encodes it. mla-gen cannot
// emit an fp8 cache the artifact lowering accepts yet, so the fp8 layouts
// are checked here only.
//
//===----------------------------------------------------------------------===//
#include "CacheCheck.h"

#include "mlart/Device.h"
#include "mlart/KVCache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

using namespace mlart;
using namespace mlarun;

namespace {

constexpr int64_t kLatent = 256, kRope = 64, kTokens = 6;

KVCacheDesc makeDesc(CacheLayout layout) {
  KVCacheDesc d;
  d.numBlocks = 4;
  d.blockSize = 8;
  d.latentRank = kLatent;
  d.ropeDim = kRope;
  d.layout = layout;
  d.dtype = layout == CacheLayout::Plain ? DType::BF16 : DType::F8E4M3FN;
  return d;
}

/// One layer: a cache holding earlier rows, the reference's rows for the
/// step's tokens and the step's slots.
struct Fixture {
  explicit Fixture(CacheLayout layout, std::vector<int64_t> stepSlots = {3, 9,
                                                                         10, 17,
                                                                         30, 31})
      : desc(makeDesc(layout)), slots(std::move(stepSlots)) {
    cache = std::make_unique<KVCache>(
        std::move(KVCache::create(*dev, desc, 0.05f).value()));
    // Earlier context in every slot but the step's (and slot 0).
    std::vector<int64_t> context;
    for (int64_t s = 1; s < desc.numSlots(); ++s)
      if (std::find(slots.begin(), slots.end(), s) == slots.end())
        context.push_back(s);
    write(randomRows(int64_t(context.size())), context);
    step.caches.push_back(snapshot());
    step.tensors["slot_mapping"] = {DType::I64, {int64_t(slots.size())},
                                    reinterpret_cast<const uint8_t *>(
                                        slots.data())};
    want.push_back(randomRows(kTokens));
  }

  NaiveCacheRows randomRows(int64_t tokens) {
    std::normal_distribution<double> normal;
    NaiveCacheRows rows;
    rows.latent.resize(size_t(tokens * kLatent));
    rows.ropeKey.resize(size_t(tokens * kRope));
    for (double &v : rows.latent)
      v = normal(rng);
    for (double &v : rows.ropeKey)
      v = normal(rng);
    return rows;
  }

  /// Writes `rows` at `at` through the runtime's writer, from bf16 inputs
  /// as a compiled step computes them.
  void write(const NaiveCacheRows &rows, const std::vector<int64_t> &at) {
    const int64_t n = int64_t(at.size());
    std::vector<uint16_t> kvC(size_t(n * kLatent)), kPe(size_t(n * kRope));
    for (size_t i = 0; i < kvC.size(); ++i)
      kvC[i] = floatToBf16(float(rows.latent[i]));
    for (size_t i = 0; i < kPe.size(); ++i)
      kPe[i] = floatToBf16(float(rows.ropeKey[i]));
    std::vector<int64_t> slotCopy = at;
    CacheUpdateArgs args{
        TensorRef::contiguous(kvC.data(), DType::BF16, {n, kLatent}),
        TensorRef::contiguous(kPe.data(), DType::BF16, {n, kRope}),
        TensorRef::contiguous(slotCopy.data(), DType::I64, {n}),
        cache->ref()};
    Status s = dev->kernels().cacheUpdate(args, nullptr);
    ASSERT_TRUE(s.ok()) << s.toString();
  }

  CacheSnapshot snapshot() const {
    CacheSnapshot snap{desc, cache->scale(),
                       std::vector<uint8_t>(cache->sizeBytes())};
    EXPECT_TRUE(cache->readBytes(0, snap.bytes.data(), snap.bytes.size()).ok());
    return snap;
  }

  /// The step as a compiled one runs it: every token's row at its slot.
  void runStep() { write(want[0], slots); }

  CacheCheck check(double tolerance = 1e-2) {
    std::vector<std::vector<uint8_t>> after{snapshot().bytes};
    if (corruptByte >= 0)
      after[0][size_t(corruptByte)] ^= 0x5a;
    StatusOr<CacheCheck> c = checkCacheWrites(step, want, after, tolerance);
    EXPECT_TRUE(c.ok()) << c.status().toString();
    return c.ok() ? c.value() : CacheCheck();
  }

  std::unique_ptr<Device> dev = createCpuDevice();
  std::mt19937_64 rng{5};
  KVCacheDesc desc;
  std::vector<int64_t> slots;
  std::unique_ptr<KVCache> cache;
  NaiveStep step;
  std::vector<NaiveCacheRows> want;
  int64_t corruptByte = -1; ///< flipped in the bytes read after the step
};

TEST(CacheCheck, Bf16RowsWrittenAtTheirSlotsPass) {
  Fixture f(CacheLayout::Plain);
  f.runStep();
  CacheCheck c = f.check();
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(c.rowsChecked(), kTokens);
  EXPECT_EQ(c.bytesOutside, 0);
  EXPECT_EQ(c.unchangedRows, 0);
  EXPECT_EQ(c.worstLayer, 0);
  // bf16 rounding alone: about 2^-9 relative.
  EXPECT_GT(c.worst, 1e-4);
  EXPECT_LT(c.worst, 4e-3);
  EXPECT_EQ(c.worstTolerance, 1e-2);
}

class Fp8Layouts : public ::testing::TestWithParam<CacheLayout> {};

// fp8 rows round to 3 mantissa bits: past the bf16 tolerance, within the
// looser fp8 one.
TEST_P(Fp8Layouts, DequantizedRowsPassTheLooserTolerance) {
  Fixture f(GetParam());
  f.runStep();
  CacheCheck c = f.check();
  EXPECT_TRUE(c.ok()) << c.worst;
  EXPECT_EQ(c.rowsChecked(), kTokens);
  EXPECT_DOUBLE_EQ(c.worstTolerance, 1e-2 + 0.0625);
  EXPECT_DOUBLE_EQ(cacheRowTolerance(f.desc, 1e-2), 1e-2 + 0.0625);
  EXPECT_GT(c.worst, 1e-2);
  EXPECT_LT(c.worst, 0.0625);
}

TEST_P(Fp8Layouts, WrongRowsStillFail) {
  Fixture f(GetParam());
  for (double &v : f.want[0].latent)
    v = -v;
  f.runStep();
  for (double &v : f.want[0].latent)
    v = -v;
  CacheCheck c = f.check();
  EXPECT_FALSE(c.ok());
  EXPECT_GT(c.worst, 1.0);
}

INSTANTIATE_TEST_SUITE_P(Layouts, Fp8Layouts,
                         ::testing::Values(CacheLayout::Fp8PerTensor,
                                           CacheLayout::Fp8DsMla),
                         [](const auto &info) {
                           return std::string(cacheLayoutName(info.param));
                         });

TEST(CacheCheck, RowsNotWrittenFail) {
  Fixture f(CacheLayout::Plain);
  CacheCheck c = f.check();
  EXPECT_FALSE(c.ok());
  EXPECT_FALSE(c.withinTolerance);
  EXPECT_EQ(c.unchangedRows, kTokens);
  EXPECT_EQ(c.bytesOutside, 0);
  EXPECT_GT(c.worst, 0.5);
}

TEST(CacheCheck, AWrongRopeKeyIsNamed) {
  Fixture f(CacheLayout::Plain);
  f.want[0].ropeKey[3 * kRope + 1] += 20.0; // token 3 only
  f.runStep();
  f.want[0].ropeKey[3 * kRope + 1] -= 20.0;
  CacheCheck c = f.check();
  EXPECT_FALSE(c.ok());
  EXPECT_TRUE(c.worstIsRopeKey);
  EXPECT_EQ(c.unchangedRows, 0);
}

TEST(CacheCheck, AByteChangedOutsideTheSlotsFails) {
  Fixture f(CacheLayout::Plain);
  f.runStep();
  f.corruptByte = 5 * f.desc.rowBytes() + 7; // slot 5: no token's
  CacheCheck c = f.check();
  EXPECT_TRUE(c.withinTolerance);
  EXPECT_EQ(c.bytesOutside, 1);
  EXPECT_FALSE(c.ok());
}

TEST(CacheCheck, ADummyStepChecksNoRowAndMustChangeNoByte) {
  Fixture f(CacheLayout::Plain, std::vector<int64_t>(kTokens, -1));
  f.want.clear(); // no output comparison ran
  StatusOr<bool> dummy = isDummyStep(f.step);
  ASSERT_TRUE(dummy.ok());
  EXPECT_TRUE(dummy.value());
  CacheCheck c = f.check();
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(c.rowsChecked(), 0);
  EXPECT_EQ(c.worstLayer, -1);
  EXPECT_EQ(c.bytesOutside, 0);

  f.corruptByte = 3;
  c = f.check();
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.bytesOutside, 1);
}

TEST(CacheCheck, AStepWithSlotsIsNoDummy) {
  Fixture f(CacheLayout::Plain, {-1, -1, 4, -1, -1, -1});
  StatusOr<bool> dummy = isDummyStep(f.step);
  ASSERT_TRUE(dummy.ok());
  EXPECT_FALSE(dummy.value());
  f.runStep();
  EXPECT_EQ(f.check().rowsChecked(), 1);
}

TEST(CacheCheck, ReadsI32SlotMappings) {
  Fixture f(CacheLayout::Plain);
  f.runStep();
  std::vector<int32_t> narrow(f.slots.begin(), f.slots.end());
  narrow[1] = -1; // token 1's row then counts as no slot's: changed bytes
  f.step.tensors["slot_mapping"] = {
      DType::I32, {kTokens}, reinterpret_cast<const uint8_t *>(narrow.data())};
  CacheCheck c = f.check();
  EXPECT_EQ(c.rowsChecked(), kTokens - 1);
  EXPECT_TRUE(c.withinTolerance);
  EXPECT_GT(c.bytesOutside, 0);
  EXPECT_FALSE(c.ok());
}

TEST(CacheCheck, BadInputIsAnErrorNotACrash) {
  Fixture f(CacheLayout::Plain, {0, 1, 2, 3, 4, 99}); // 32 slots
  std::vector<std::vector<uint8_t>> after{f.snapshot().bytes};
  StatusOr<CacheCheck> c = checkCacheWrites(f.step, f.want, after, 1e-2);
  EXPECT_EQ(c.status().code(), StatusCode::OutOfRange);
  EXPECT_NE(c.status().message().find("slot_mapping[5] = 99"),
            std::string::npos)
      << c.status().message();
  EXPECT_FALSE(isDummyStep(f.step).ok());
  f.step.tensors["slot_mapping"].dtype = DType::F32;
  EXPECT_EQ(isDummyStep(f.step).status().code(), StatusCode::InvalidArgument);

  Fixture g(CacheLayout::Plain);
  EXPECT_FALSE(checkCacheWrites(g.step, g.want, {}, 1e-2).ok());
  std::vector<std::vector<uint8_t>> shorter{std::vector<uint8_t>(3)};
  EXPECT_FALSE(checkCacheWrites(g.step, g.want, shorter, 1e-2).ok());
  std::vector<std::vector<uint8_t>> same{g.snapshot().bytes};
  EXPECT_FALSE(checkCacheWrites(g.step, {}, same, 1e-2).ok());
}

} // namespace
