//===- LatentNormCacheUpdateTest.cpp - Fused latent RMSNorm + cache write -===//
//
// The fused rope + cache update with a latent norm must equal rmsNorm into
// kv_c's dtype followed by the plain fused update (bit for bit on the CPU:
// one row routine, one rounding), against float64 within one rounding, and
// refuse bad norm operands without writing anything.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "mlart/Device.h"
#include "mlart/KVCache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>

using namespace mlart;
using namespace mlart::test;

namespace {

constexpr int64_t kLatent = 512, kRope = 64, kMaxPos = 4096;

KVCacheDesc cacheDesc(CacheLayout layout, DType dtype) {
  KVCacheDesc d;
  d.numBlocks = 16;
  d.blockSize = 16;
  d.latentRank = kLatent;
  d.ropeDim = kRope;
  d.dtype = dtype;
  d.layout = layout;
  return d;
}

/// Inputs of one call: T tokens, slot 1 negative, random positions.
struct Inputs {
  HostTensor kvC, kPe, weight, positions, slots;
  Inputs(int64_t tokens, DType act, DType weightType, int64_t numSlots,
         unsigned seed)
      : kvC(act, {tokens, kLatent}), kPe(act, {tokens, kRope}),
        weight(weightType, {kLatent}) {
    std::mt19937 rng(seed);
    fillRandom(kvC, rng, 2.0f);
    fillRandom(kPe, rng);
    // Weights around 1 like a trained norm, some negative.
    std::normal_distribution<float> w(1.0f, 0.5f);
    for (int64_t i = 0; i < kLatent; ++i)
      weight.set(i, w(rng));
    std::vector<int64_t> pos(static_cast<size_t>(tokens));
    std::uniform_int_distribution<int64_t> posDist(0, kMaxPos - 1);
    for (auto &p : pos)
      p = posDist(rng);
    positions = indexTensor(pos);
    std::vector<int64_t> s = distinctSlots(tokens, numSlots, rng);
    if (tokens > 1)
      s[1] = -1; // rotated, never stored
    slots = indexTensor(s);
  }
};

RopeCacheUpdateArgs argsFor(const HostTensor &kvC, HostTensor &kPe,
                            const Inputs &in, KVCache &cache) {
  RopeCacheUpdateArgs a;
  a.kvC = kvC.ref;
  a.kPe = kPe.ref;
  a.slotMapping = in.slots.ref;
  a.cache = cache.ref();
  a.positions = in.positions.ref;
  a.cosSin = cosSinTable(kMaxPos, kRope, 10000.0).ref;
  a.style = RopeStyle::NeoX;
  return a;
}

class LatentNormGrid
    : public ::testing::TestWithParam<std::tuple<int, DType, int64_t>> {};

// layout: 0 plain (cache of the activation type), 1 fp8 per-tensor,
// 2 fp8_ds_mla.
TEST_P(LatentNormGrid, EqualsNormThenFusedUpdate) {
  const auto [layoutCase, weightType, tokens] = GetParam();
  const DType act =
      layoutCase == 0 && weightType == DType::F32 ? DType::F32 : DType::BF16;
  const KVCacheDesc desc =
      layoutCase == 0   ? cacheDesc(CacheLayout::Plain, act)
      : layoutCase == 1 ? cacheDesc(CacheLayout::Fp8PerTensor, DType::F8E4M3FN)
                        : cacheDesc(CacheLayout::Fp8DsMla, DType::F8E4M3FN);
  auto dev = createCpuDevice();
  const KernelLibrary &k = dev->kernels();
  KVCache fused = std::move(KVCache::create(*dev, desc, 0.05f).value());
  KVCache ref = std::move(KVCache::create(*dev, desc, 0.05f).value());
  ASSERT_TRUE(fused.fill(kPoison).ok());
  ASSERT_TRUE(ref.fill(kPoison).ok());
  Inputs in(tokens, act, weightType, desc.numSlots(),
            unsigned(tokens * 10 + layoutCase));

  // Unfused: rmsNorm into kv_c's dtype, then the fused rope + update.
  HostTensor normed(act, {tokens, kLatent});
  ASSERT_TRUE(
      k.rmsNorm({in.kvC.ref, in.weight.ref, 1e-6f, normed.ref}, nullptr).ok());
  HostTensor refK = in.kPe;
  ASSERT_TRUE(k.ropeCacheUpdate(argsFor(normed, refK, in, ref), nullptr).ok());

  const HostTensor kvBefore = in.kvC;
  HostTensor fusedK = in.kPe;
  RopeCacheUpdateArgs a = argsFor(in.kvC, fusedK, in, fused);
  a.latentNormWeight = in.weight.ref;
  a.latentNormEpsilon = 1e-6f;
  Status s = k.ropeCacheUpdate(a, nullptr);
  ASSERT_TRUE(s.ok()) << s.toString();

  EXPECT_EQ(std::memcmp(fused.data(), ref.data(), fused.sizeBytes()), 0);
  EXPECT_EQ(fusedK.bytes, refK.bytes);
  EXPECT_EQ(in.kvC.bytes, kvBefore.bytes) << "kv_c must only be read";
  // The negative slot's token wrote nothing: every row not in the mapping
  // still holds the poison (the unfused reference proves the rest).
  std::vector<uint8_t> poison(size_t(desc.rowBytes()), kPoison);
  int64_t poisoned = 0;
  for (int64_t r = 0; r < desc.numSlots(); ++r)
    poisoned +=
        std::memcmp(static_cast<uint8_t *>(fused.data()) + r * desc.rowBytes(),
                    poison.data(), poison.size()) == 0;
  EXPECT_EQ(poisoned, desc.numSlots() - (tokens > 1 ? tokens - 1 : tokens));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, LatentNormGrid,
    ::testing::Combine(::testing::Values(0, 1, 2),
                       ::testing::Values(DType::BF16, DType::F32),
                       ::testing::Values(int64_t(1), int64_t(5), int64_t(64))));

// The stored latent against a float64 norm: one bf16 rounding.
TEST(LatentNormCacheUpdate, MatchesFloat64) {
  const KVCacheDesc desc = cacheDesc(CacheLayout::Plain, DType::BF16);
  auto dev = createCpuDevice();
  KVCache cache = std::move(KVCache::create(*dev, desc).value());
  ASSERT_TRUE(cache.fill(kPoison).ok());
  const int64_t tokens = 9;
  Inputs in(tokens, DType::BF16, DType::BF16, desc.numSlots(), 77u);
  HostTensor kPe = in.kPe;
  RopeCacheUpdateArgs a = argsFor(in.kvC, kPe, in, cache);
  a.latentNormWeight = in.weight.ref;
  a.latentNormEpsilon = 1e-6f;
  ASSERT_TRUE(dev->kernels().ropeCacheUpdate(a, nullptr).ok());
  const int64_t *slots =
      reinterpret_cast<const int64_t *>(in.slots.bytes.data());
  for (int64_t t = 0; t < tokens; ++t) {
    if (slots[t] < 0)
      continue;
    double ms = 0;
    for (int64_t i = 0; i < kLatent; ++i)
      ms += double(in.kvC.get(t * kLatent + i)) * in.kvC.get(t * kLatent + i);
    const double inv = 1.0 / std::sqrt(ms / kLatent + 1e-6);
    const uint8_t *row =
        static_cast<uint8_t *>(cache.data()) + slots[t] * desc.rowBytes();
    for (int64_t i = 0; i < kLatent; ++i) {
      const double want = in.kvC.get(t * kLatent + i) * inv * in.weight.get(i);
      const double got = loadAsFloat(row, DType::BF16, size_t(i));
      ASSERT_NEAR(got, want, std::fabs(want) / 128 + 1e-6)
          << "token " << t << " column " << i;
    }
  }
}

// Bad norm operands: an error, and the cache, k_pe and kv_c untouched.
TEST(LatentNormCacheUpdate, RejectsBadNormWithoutWriting) {
  const KVCacheDesc desc = cacheDesc(CacheLayout::Plain, DType::BF16);
  auto dev = createCpuDevice();
  KVCache cache = std::move(KVCache::create(*dev, desc).value());
  ASSERT_TRUE(cache.fill(kPoison).ok());
  Inputs in(4, DType::BF16, DType::BF16, desc.numSlots(), 5u);
  HostTensor shortW(DType::BF16, {kLatent - 8});
  HostTensor intW(DType::I32, {kLatent});
  HostTensor weight2d(DType::BF16, {1, kLatent});
  struct Bad {
    const char *what;
    TensorRef weight;
    float eps;
  } cases[] = {{"short weight", shortW.ref, 1e-6f},
               {"integer weight", intW.ref, 1e-6f},
               {"rank-2 weight", weight2d.ref, 1e-6f},
               {"zero epsilon", in.weight.ref, 0.0f},
               {"negative epsilon", in.weight.ref, -1e-6f},
               {"NaN epsilon", in.weight.ref, std::nanf("")},
               {"infinite epsilon", in.weight.ref, INFINITY},
               {"epsilon without weight", TensorRef(), 1e-6f}};
  for (const Bad &c : cases) {
    HostTensor kPe = in.kPe;
    RopeCacheUpdateArgs a = argsFor(in.kvC, kPe, in, cache);
    a.latentNormWeight = c.weight;
    a.latentNormEpsilon = c.eps;
    EXPECT_FALSE(dev->kernels().ropeCacheUpdate(a, nullptr).ok()) << c.what;
    EXPECT_EQ(kPe.bytes, in.kPe.bytes) << c.what;
  }
  std::vector<uint8_t> poison(cache.sizeBytes(), kPoison);
  EXPECT_EQ(std::memcmp(cache.data(), poison.data(), poison.size()), 0);

  // An fp8 latent has nothing to normalise.
  KVCacheDesc fp8 = cacheDesc(CacheLayout::Fp8PerTensor, DType::F8E4M3FN);
  KVCache fp8Cache = std::move(KVCache::create(*dev, fp8, 0.1f).value());
  HostTensor kv8(DType::F8E4M3FN, {4, kLatent}), kPe = in.kPe;
  RopeCacheUpdateArgs a = argsFor(kv8, kPe, in, fp8Cache);
  a.latentNormWeight = in.weight.ref;
  a.latentNormEpsilon = 1e-6f;
  Status s = dev->kernels().ropeCacheUpdate(a, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.toString().find("normalised kv_c"), std::string::npos)
      << s.toString();
}

} // namespace
