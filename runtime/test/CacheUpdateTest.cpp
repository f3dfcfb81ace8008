//===- CacheUpdateTest.cpp - CPU cacheUpdate: vLLM grid, edge cases, ds_mla ===//
#include "TestUtil.h"

#include "mlart/Device.h"
#include "mlart/KVCache.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <string>
#include <tuple>

using namespace mlart;
using namespace mlart::test;

namespace {

/// What the cache stores: rows in the input dtype, or per-tensor fp8 (e4m3fn
/// or e5m2) with scale 0.1.
enum class CacheKind { Same, Fp8, Fp8E5M2 };

const char *kindName(CacheKind kind) {
  return kind == CacheKind::Same  ? "same"
         : kind == CacheKind::Fp8 ? "fp8"
                                  : "fp8e5m2";
}

KVCacheDesc makeDesc(int64_t latent, int64_t rope, int64_t blocks,
                     int64_t blockSize, DType inType, CacheKind kind) {
  KVCacheDesc d;
  d.numBlocks = blocks;
  d.blockSize = blockSize;
  d.latentRank = latent;
  d.ropeDim = rope;
  d.dtype = kind == CacheKind::Same  ? inType
            : kind == CacheKind::Fp8 ? DType::F8E4M3FN
                                     : DType::F8E5M2;
  d.layout = kind == CacheKind::Same ? CacheLayout::Plain
                                     : CacheLayout::Fp8PerTensor;
  return d;
}

/// Checks that row `slot` of the cache holds concat(kvC[t], kPe[t]).
void expectRow(const KVCacheDesc &desc, const std::vector<uint8_t> &bytes,
               float scale, int64_t slot, const HostTensor &kvC,
               const HostTensor &kPe, int64_t t) {
  const uint8_t *row = bytes.data() + slot * desc.rowBytes();
  if (desc.layout == CacheLayout::Plain) {
    const size_t es = dtypeSize(desc.dtype);
    ASSERT_EQ(std::memcmp(row, kvC.ref.bytesAt(kvC.ref.offset({t, 0})),
                          size_t(desc.latentRank) * es),
              0)
        << "latent of token " << t;
    ASSERT_EQ(std::memcmp(row + desc.latentRank * es,
                          kPe.ref.bytesAt(kPe.ref.offset({t, 0})),
                          size_t(desc.ropeDim) * es),
              0)
        << "rope of token " << t;
    return;
  }
  std::vector<float> decoded(static_cast<size_t>(desc.rowValues()));
  decodeCacheRow(desc, row, scale, decoded.data());
  for (int64_t i = 0; i < desc.rowValues(); ++i) {
    const float ref = i < desc.latentRank
                          ? kvC.get(kvC.ref.offset({t, i}))
                          : kPe.get(kPe.ref.offset({t, i - desc.latentRank}));
    // vLLM's tolerance for fp8 caches: atol 1e-3, rtol 0.1; e5m2's half
    // step is 2^-3 relative.
    const double rtol = desc.dtype == DType::F8E5M2 ? 0.125 : 0.1;
    ASSERT_NEAR(decoded[size_t(i)], ref, 1e-3 + rtol * std::fabs(ref))
        << "token " << t << " value " << i;
    if (desc.layout == CacheLayout::Fp8PerTensor)
      ASSERT_EQ(row[i], desc.dtype == DType::F8E5M2
                            ? floatToFp8e5m2(ref / scale)
                            : floatToFp8e4m3(ref / scale));
  }
}

/// Every row not in `written` still holds the poison pattern.
void expectPoisoned(const KVCacheDesc &desc, const std::vector<uint8_t> &bytes,
                    const std::vector<bool> &written) {
  for (int64_t s = 0; s < desc.numSlots(); ++s) {
    if (written[size_t(s)])
      continue;
    const uint8_t *row = bytes.data() + s * desc.rowBytes();
    for (int64_t b = 0; b < desc.rowBytes(); ++b)
      ASSERT_EQ(row[b], kPoison) << "slot " << s << " byte " << b;
  }
}

class CacheUpdateGrid
    : public ::testing::TestWithParam<std::tuple<int64_t, DType, CacheKind>> {};

// vLLM test_concat_and_cache_mla: 42 tokens, rope 64, block size 16,
// 8 blocks, distinct random slots.
TEST_P(CacheUpdateGrid, MatchesVllmReference) {
  const auto [latent, dtype, kind] = GetParam();
  const int64_t rope = 64, tokens = 42, blockSize = 16, blocks = 8;
  const float scale = 0.1f;
  std::mt19937 rng(unsigned(latent) * 31 + unsigned(dtype) * 7 +
                   unsigned(kind));
  auto dev = createCpuDevice();
  const KVCacheDesc desc =
      makeDesc(latent, rope, blocks, blockSize, dtype, kind);
  StatusOr<KVCache> cache = KVCache::create(*dev, desc, scale);
  ASSERT_TRUE(cache.ok()) << cache.status().toString();
  ASSERT_TRUE(cache->fill(kPoison).ok());

  HostTensor kvC(dtype, {tokens, latent}), kPe(dtype, {tokens, rope});
  fillRandom(kvC, rng);
  fillRandom(kPe, rng);
  const std::vector<int64_t> slots =
      distinctSlots(tokens, desc.numSlots(), rng);
  HostTensor slotMapping = indexTensor(slots);

  CacheUpdateArgs args{kvC.ref, kPe.ref, slotMapping.ref, cache->ref()};
  Status s = dev->kernels().cacheUpdate(args, nullptr);
  ASSERT_TRUE(s.ok()) << s.toString();

  const std::vector<uint8_t> bytes = cacheBytes(*cache);
  std::vector<bool> written(size_t(desc.numSlots()), false);
  for (int64_t t = 0; t < tokens; ++t) {
    expectRow(desc, bytes, scale, slots[size_t(t)], kvC, kPe, t);
    written[size_t(slots[size_t(t)])] = true;
  }
  expectPoisoned(desc, bytes, written);
}

INSTANTIATE_TEST_SUITE_P(
    Vllm, CacheUpdateGrid,
    ::testing::Combine(::testing::Values(int64_t(256), int64_t(512)),
                       ::testing::Values(DType::BF16, DType::F32),
                       ::testing::Values(CacheKind::Same, CacheKind::Fp8,
                                         CacheKind::Fp8E5M2)),
    [](const auto &info) {
      return "rank" + std::to_string(std::get<0>(info.param)) + "_" +
             dtypeName(std::get<1>(info.param)) + "_" +
             kindName(std::get<2>(info.param));
    });

/// A small bf16 setup shared by the edge-case tests.
struct Small {
  std::unique_ptr<Device> dev = createCpuDevice();
  KVCacheDesc desc = makeDesc(512, 64, 8, 16, DType::BF16, CacheKind::Same);
  KVCache cache = std::move(KVCache::create(*dev, desc).value());
  std::mt19937 rng{1234};
  HostTensor kvC, kPe;

  explicit Small(int64_t tokens) {
    kvC = HostTensor(DType::BF16, {tokens, 512});
    kPe = HostTensor(DType::BF16, {tokens, 64});
    fillRandom(kvC, rng);
    fillRandom(kPe, rng);
    EXPECT_TRUE(cache.fill(kPoison).ok());
  }
  Status run(const HostTensor &slots) {
    return dev->kernels().cacheUpdate(
        CacheUpdateArgs{kvC.ref, kPe.ref, slots.ref, cache.ref()}, nullptr);
  }
};

TEST(CacheUpdate, NegativeSlotsWriteNothing) {
  Small s(6);
  HostTensor slots = indexTensor({5, -1, 17, -1, -7, 100}, DType::I32);
  ASSERT_TRUE(s.run(slots).ok());
  const std::vector<uint8_t> bytes = cacheBytes(s.cache);
  std::vector<bool> written(size_t(s.desc.numSlots()), false);
  for (auto [t, slot] : {std::pair<int64_t, int64_t>{0, 5}, {2, 17}, {5, 100}}) {
    expectRow(s.desc, bytes, 1.0f, slot, s.kvC, s.kPe, t);
    written[size_t(slot)] = true;
  }
  expectPoisoned(s.desc, bytes, written);
}

TEST(CacheUpdate, PaddedInputsUseOnlyTheSlotMappingPrefix) {
  Small s(10); // 10 input rows, 4 real tokens
  HostTensor slots = indexTensor({3, 40, 41, 127});
  ASSERT_TRUE(s.run(slots).ok());
  const std::vector<uint8_t> bytes = cacheBytes(s.cache);
  std::vector<bool> written(size_t(s.desc.numSlots()), false);
  const int64_t expected[] = {3, 40, 41, 127};
  for (int64_t t = 0; t < 4; ++t) {
    expectRow(s.desc, bytes, 1.0f, expected[t], s.kvC, s.kPe, t);
    written[size_t(expected[t])] = true;
  }
  expectPoisoned(s.desc, bytes, written);
}

TEST(CacheUpdate, OutOfRangeSlotIsAnErrorAndWritesNothing) {
  Small s(4);
  const std::vector<uint8_t> before = cacheBytes(s.cache);
  // The bad slot comes last: the valid ones before it must not be written.
  HostTensor slots = indexTensor({0, 1, 2, 8 * 16});
  Status st = s.run(slots);
  EXPECT_EQ(st.code(), StatusCode::OutOfRange);
  EXPECT_NE(st.message().find("slot_mapping[3] = 128"), std::string::npos)
      << st.message();
  EXPECT_EQ(cacheBytes(s.cache), before);
}

TEST(CacheUpdate, RejectsBadShapesAndDtypesWithoutWriting) {
  Small s(4);
  const std::vector<uint8_t> before = cacheBytes(s.cache);
  HostTensor slots = indexTensor({0, 1, 2, 3});
  HostTensor tooLong = indexTensor({0, 1, 2, 3, 4});
  EXPECT_EQ(s.run(tooLong).code(), StatusCode::InvalidArgument);

  HostTensor f32Kv(DType::F32, {4, 512});
  fillRandom(f32Kv, s.rng);
  Status st = s.dev->kernels().cacheUpdate(
      CacheUpdateArgs{f32Kv.ref, s.kPe.ref, slots.ref, s.cache.ref()}, nullptr);
  EXPECT_EQ(st.code(), StatusCode::InvalidArgument);
  EXPECT_NE(st.message().find("cache dtype bf16"), std::string::npos);

  HostTensor narrow(DType::BF16, {4, 500});
  fillRandom(narrow, s.rng);
  EXPECT_EQ(s.dev->kernels()
                .cacheUpdate(CacheUpdateArgs{narrow.ref, s.kPe.ref, slots.ref,
                                             s.cache.ref()},
                             nullptr)
                .code(),
            StatusCode::InvalidArgument);

  HostTensor f32Slots(DType::F32, {4});
  EXPECT_EQ(s.run(f32Slots).code(), StatusCode::InvalidArgument);
  EXPECT_EQ(cacheBytes(s.cache), before);
}

TEST(CacheUpdate, StridedInputRows) {
  // kv_c and k_pe as views into one [T, 576 + 8] buffer, like slices of the
  // kv_a projection output.
  const int64_t tokens = 5, width = 512 + 64 + 8;
  Small s(1);
  HostTensor fused(DType::BF16, {tokens, width});
  fillRandom(fused, s.rng);
  TensorRef kvC = fused.ref, kPe = fused.ref;
  kvC.sizes[1] = 512;
  kPe.sizes[1] = 64;
  kPe.data = fused.ref.bytesAt(512);
  HostTensor slots = indexTensor({9, 8, 7, 100, 50});
  ASSERT_TRUE(s.dev->kernels()
                  .cacheUpdate(CacheUpdateArgs{kvC, kPe, slots.ref,
                                               s.cache.ref()},
                               nullptr)
                  .ok());
  const std::vector<uint8_t> bytes = cacheBytes(s.cache);
  const int64_t expected[] = {9, 8, 7, 100, 50};
  for (int64_t t = 0; t < tokens; ++t) {
    const uint8_t *row = bytes.data() + expected[t] * s.desc.rowBytes();
    ASSERT_EQ(std::memcmp(row, fused.ref.bytesAt(t * width), 576 * 2), 0);
  }
}

TEST(CacheUpdate, Fp8PerTensorSaturates) {
  auto dev = createCpuDevice();
  KVCacheDesc desc = makeDesc(256, 64, 2, 16, DType::F32, CacheKind::Fp8);
  KVCache cache = std::move(KVCache::create(*dev, desc, 0.1f).value());
  HostTensor kvC(DType::F32, {1, 256}), kPe(DType::F32, {1, 64});
  std::mt19937 rng(5);
  fillRandom(kvC, rng);
  fillRandom(kPe, rng);
  kvC.set(0, 1000.0f); // 1000 / 0.1 = 10000 saturates to 448
  kvC.set(1, -1000.0f);
  HostTensor slots = indexTensor({3});
  ASSERT_TRUE(dev->kernels()
                  .cacheUpdate(CacheUpdateArgs{kvC.ref, kPe.ref, slots.ref,
                                               cache.ref()},
                               nullptr)
                  .ok());
  const std::vector<uint8_t> bytes = cacheBytes(cache);
  EXPECT_EQ(bytes[size_t(3 * desc.rowBytes())], 0x7e);
  EXPECT_EQ(bytes[size_t(3 * desc.rowBytes() + 1)], 0xfe);
}

TEST(CacheUpdate, Fp8E5M2PerTensorSaturatesInfinitiesToo) {
  auto dev = createCpuDevice();
  KVCacheDesc desc = makeDesc(256, 64, 2, 16, DType::F32, CacheKind::Fp8E5M2);
  KVCache cache = std::move(KVCache::create(*dev, desc, 0.1f).value());
  HostTensor kvC(DType::F32, {1, 256}), kPe(DType::F32, {1, 64});
  std::mt19937 rng(6);
  fillRandom(kvC, rng);
  fillRandom(kPe, rng);
  kvC.set(0, 1e4f); // 1e5 saturates to 57344 (0x7b), not to inf (0x7c)
  kvC.set(1, -INFINITY);
  kvC.set(2, 2.0f); // 20 = 1.25 * 2^4: exactly representable
  HostTensor slots = indexTensor({5});
  ASSERT_TRUE(dev->kernels()
                  .cacheUpdate(
                      CacheUpdateArgs{kvC.ref, kPe.ref, slots.ref, cache.ref()},
                      nullptr)
                  .ok());
  const std::vector<uint8_t> bytes = cacheBytes(cache);
  const size_t row = size_t(5 * desc.rowBytes());
  EXPECT_EQ(bytes[row], 0x7b);
  EXPECT_EQ(bytes[row + 1], 0xfb);
  EXPECT_EQ(bytes[row + 2], 0x4d); // exponent 4 + 15 = 19, mantissa 01
}

// Inputs an explicit mla.quantize already encoded are stored as they are;
// an input of the other fp8 encoding is refused before anything is written.
TEST(CacheUpdate, QuantisedInputsAreStoredAsTheyAre) {
  auto dev = createCpuDevice();
  for (DType encoding : {DType::F8E4M3FN, DType::F8E5M2}) {
    SCOPED_TRACE(dtypeName(encoding));
    KVCacheDesc desc = makeDesc(256, 64, 2, 16, DType::F32,
                                encoding == DType::F8E5M2 ? CacheKind::Fp8E5M2
                                                          : CacheKind::Fp8);
    KVCache cache = std::move(KVCache::create(*dev, desc, 0.1f).value());
    ASSERT_TRUE(cache.fill(kPoison).ok());
    HostTensor kvC(encoding, {2, 256}), kPe(encoding, {2, 64});
    std::mt19937 rng(9);
    fillRandom(kvC, rng);
    fillRandom(kPe, rng);
    HostTensor slots = indexTensor({7, 30});
    ASSERT_TRUE(dev->kernels()
                    .cacheUpdate(CacheUpdateArgs{kvC.ref, kPe.ref, slots.ref,
                                                 cache.ref()},
                                 nullptr)
                    .ok());
    const std::vector<uint8_t> bytes = cacheBytes(cache);
    for (int64_t t = 0; t < 2; ++t) {
      const uint8_t *row = bytes.data() + (t == 0 ? 7 : 30) * desc.rowBytes();
      EXPECT_EQ(std::memcmp(row, kvC.bytes.data() + t * 256, 256), 0);
      EXPECT_EQ(std::memcmp(row + 256, kPe.bytes.data() + t * 64, 64), 0);
    }
    const DType other =
        encoding == DType::F8E5M2 ? DType::F8E4M3FN : DType::F8E5M2;
    HostTensor wrongC(other, {2, 256}), wrongP(other, {2, 64});
    Status s = dev->kernels().cacheUpdate(
        CacheUpdateArgs{wrongC.ref, wrongP.ref, slots.ref, cache.ref()},
        nullptr);
    EXPECT_EQ(s.code(), StatusCode::InvalidArgument) << s.toString();
    EXPECT_EQ(cacheBytes(cache), bytes);
  }
}

// fp8_ds_mla: [512 fp8 | 4 x f32 tile scale | 64 x bf16 rope] = 656 bytes.
TEST(CacheUpdate, DsMlaRowLayoutIs656Bytes) {
  auto dev = createCpuDevice();
  KVCacheDesc desc;
  desc.numBlocks = 4;
  desc.blockSize = 16;
  desc.dtype = DType::F8E4M3FN;
  desc.layout = CacheLayout::Fp8DsMla;
  ASSERT_EQ(desc.rowBytes(), 656);
  KVCache cache = std::move(KVCache::create(*dev, desc).value());
  ASSERT_TRUE(cache.fill(kPoison).ok());
  const int64_t tokens = 7;
  std::mt19937 rng(77);
  HostTensor kvC(DType::BF16, {tokens, 512}), kPe(DType::BF16, {tokens, 64});
  fillRandom(kvC, rng, 3.0f);
  fillRandom(kPe, rng);
  // Tile 2 of token 0 is all zeros: its scale must not be 0 (no div by 0).
  for (int64_t i = 256; i < 384; ++i)
    kvC.set(i, 0.0f);
  const std::vector<int64_t> slots = distinctSlots(tokens, 64, rng);
  HostTensor slotMapping = indexTensor(slots);
  ASSERT_TRUE(dev->kernels()
                  .cacheUpdate(CacheUpdateArgs{kvC.ref, kPe.ref,
                                               slotMapping.ref, cache.ref()},
                               nullptr)
                  .ok());
  const std::vector<uint8_t> bytes = cacheBytes(cache);
  std::vector<bool> written(64, false);
  for (int64_t t = 0; t < tokens; ++t) {
    const uint8_t *row = bytes.data() + slots[size_t(t)] * 656;
    written[size_t(slots[size_t(t)])] = true;
    for (int64_t tile = 0; tile < 4; ++tile) {
      float amax = 0.0f;
      for (int64_t i = tile * 128; i < (tile + 1) * 128; ++i)
        amax = std::max(amax, std::fabs(kvC.get(t * 512 + i)));
      float scale;
      std::memcpy(&scale, row + 512 + 4 * tile, 4);
      EXPECT_EQ(scale, std::max(amax / 448.0f, FLT_MIN))
          << "token " << t << " tile " << tile;
      for (int64_t i = tile * 128; i < (tile + 1) * 128; ++i) {
        const float x = kvC.get(t * 512 + i);
        ASSERT_EQ(row[i], floatToFp8e4m3(x / scale)) << i;
        ASSERT_NEAR(fp8e4m3ToFloat(row[i]) * scale, x,
                    1e-3 + 0.1 * std::fabs(x));
      }
    }
    // The rope part is the bf16 input, bit for bit.
    ASSERT_EQ(std::memcmp(row + 528, kPe.ref.bytesAt(t * 64), 128), 0);
    expectRow(desc, bytes, 1.0f, slots[size_t(t)], kvC, kPe, t);
  }
  expectPoisoned(desc, bytes, written);
}

} // namespace
