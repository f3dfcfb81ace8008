//===- RopeCacheUpdateTest.cpp - Fused rope + cache write vs unfused ------===//
#include "TestUtil.h"

#include "mlart/Device.h"
#include "mlart/KVCache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>

using namespace mlart;
using namespace mlart::test;

namespace {

struct FusedCase {
  bool neox;
  int64_t tokens;
  int64_t rope;
  int64_t blockSize;
  bool fp8;
};

/// vLLM test_concat_and_cache_mla_rope_fused: 128 q heads, 64 blocks,
/// max position 8192, base 10000, latent 512, bf16 activations.
class RopeCacheUpdateGrid
    : public ::testing::TestWithParam<
          std::tuple<bool, int64_t, int64_t, int64_t, bool>> {};

TEST_P(RopeCacheUpdateGrid, EqualsRopeThenUpdate) {
  const auto [neox, tokens, rope, blockSize, fp8] = GetParam();
  const int64_t latent = 512, qHeads = 128, blocks = 64, maxPos = 8192;
  const RopeStyle style = neox ? RopeStyle::NeoX : RopeStyle::GptJ;
  std::mt19937 rng(unsigned(tokens * 1000 + rope * 10 + blockSize) +
                   (neox ? 7u : 0u) + (fp8 ? 13u : 0u));
  auto dev = createCpuDevice();
  KVCacheDesc desc;
  desc.numBlocks = blocks;
  desc.blockSize = blockSize;
  desc.latentRank = latent;
  desc.ropeDim = rope;
  desc.dtype = fp8 ? DType::F8E4M3FN : DType::BF16;
  desc.layout = fp8 ? CacheLayout::Fp8PerTensor : CacheLayout::Plain;
  KVCache fusedCache = std::move(KVCache::create(*dev, desc, 0.1f).value());
  KVCache refCache = std::move(KVCache::create(*dev, desc, 0.1f).value());
  ASSERT_TRUE(fusedCache.fill(kPoison).ok());
  ASSERT_TRUE(refCache.fill(kPoison).ok());

  const HostTensor &table = cosSinTable(maxPos, rope, 10000.0);
  HostTensor kvC(DType::BF16, {tokens, latent});
  HostTensor kPe(DType::BF16, {tokens, rope});
  HostTensor qPe(DType::BF16, {tokens, qHeads, rope});
  fillRandom(kvC, rng);
  fillRandom(kPe, rng);
  fillRandom(qPe, rng);
  std::vector<int64_t> pos(static_cast<size_t>(tokens));
  std::uniform_int_distribution<int64_t> posDist(0, maxPos - 1);
  for (auto &p : pos)
    p = posDist(rng);
  HostTensor positions = indexTensor(pos);
  std::vector<int64_t> slots = distinctSlots(tokens, desc.numSlots(), rng);
  slots[1] = -1; // a token that is rotated but not stored
  HostTensor slotMapping = indexTensor(slots);

  // Unfused reference: rope(q_pe), rope(k_pe), cacheUpdate.
  HostTensor refQ = qPe, refK = kPe;
  const KernelLibrary &k = dev->kernels();
  ASSERT_TRUE(k.rope({refQ.ref, positions.ref, table.ref, style}, nullptr).ok());
  ASSERT_TRUE(k.rope({refK.ref, positions.ref, table.ref, style}, nullptr).ok());
  ASSERT_TRUE(k.cacheUpdate({kvC.ref, refK.ref, slotMapping.ref, refCache.ref()},
                            nullptr)
                  .ok());

  HostTensor fusedQ = qPe, fusedK = kPe;
  HostTensor kOut(DType::BF16, {tokens, rope});
  RopeCacheUpdateArgs args;
  args.kvC = kvC.ref;
  args.kPe = fusedK.ref;
  args.slotMapping = slotMapping.ref;
  args.cache = fusedCache.ref();
  args.positions = positions.ref;
  args.cosSin = table.ref;
  args.style = style;
  args.qPe = fusedQ.ref;
  args.kPeOut = kOut.ref;
  Status s = k.ropeCacheUpdate(args, nullptr);
  ASSERT_TRUE(s.ok()) << s.toString();

  // The CPU device is host-accessible: compare in place, no 20 MB copies.
  EXPECT_EQ(std::memcmp(fusedCache.data(), refCache.data(),
                        fusedCache.sizeBytes()),
            0);
  EXPECT_EQ(fusedQ.bytes, refQ.bytes);
  EXPECT_EQ(fusedK.bytes, refK.bytes);
  EXPECT_EQ(std::memcmp(kOut.bytes.data(), refK.bytes.data(),
                        size_t(tokens * rope * 2)),
            0);

  // The rotation itself against float64 (one bf16 rounding allowed).
  std::vector<float> in(static_cast<size_t>(rope));
  std::vector<double> ref(static_cast<size_t>(rope));
  const float *cs = reinterpret_cast<const float *>(table.bytes.data());
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < qHeads; h += 17) {
      const int64_t base = (t * qHeads + h) * rope;
      for (int64_t i = 0; i < rope; ++i)
        in[size_t(i)] = qPe.get(base + i);
      ropeReference(in.data(), ref.data(), rope, cs + pos[size_t(t)] * rope,
                    neox);
      for (int64_t i = 0; i < rope; ++i)
        ASSERT_NEAR(fusedQ.get(base + i), ref[size_t(i)],
                    (1.0 + std::fabs(ref[size_t(i)])) / 128);
    }
}

INSTANTIATE_TEST_SUITE_P(
    Vllm, RopeCacheUpdateGrid,
    ::testing::Combine(::testing::Bool(),
                       ::testing::Values(int64_t(11), int64_t(42)),
                       ::testing::Values(int64_t(64), int64_t(128)),
                       ::testing::Values(int64_t(16), int64_t(64),
                                         int64_t(256)),
                       ::testing::Bool()),
    [](const auto &info) {
      return std::string(std::get<0>(info.param) ? "neox" : "gptj") + "_t" +
             std::to_string(std::get<1>(info.param)) + "_rope" +
             std::to_string(std::get<2>(info.param)) + "_bs" +
             std::to_string(std::get<3>(info.param)) +
             (std::get<4>(info.param) ? "_fp8" : "_bf16");
    });

/// Negative-slot and padded tokens: q_pe and k_pe are still rotated for
/// every token (attention needs q), only the cache rows are skipped.
TEST(RopeCacheUpdate, NegativeSlotTokensAreRotatedButNotStored) {
  auto dev = createCpuDevice();
  KVCacheDesc desc;
  desc.numBlocks = 4;
  desc.blockSize = 16;
  KVCache cache = std::move(KVCache::create(*dev, desc).value());
  ASSERT_TRUE(cache.fill(kPoison).ok());
  const std::vector<uint8_t> before = cacheBytes(cache);
  std::mt19937 rng(9);
  const HostTensor &table = cosSinTable(64, 64, 10000.0);
  HostTensor kvC(DType::BF16, {3, 512}), kPe(DType::BF16, {3, 64}),
      qPe(DType::BF16, {3, 2, 64});
  fillRandom(kvC, rng);
  fillRandom(kPe, rng);
  fillRandom(qPe, rng);
  HostTensor refQ = qPe, refK = kPe;
  HostTensor positions = indexTensor({3, 4, 5});
  ASSERT_TRUE(cpuKernelLibrary()
                  .rope({refQ.ref, positions.ref, table.ref, RopeStyle::NeoX},
                        nullptr)
                  .ok());
  ASSERT_TRUE(cpuKernelLibrary()
                  .rope({refK.ref, positions.ref, table.ref, RopeStyle::NeoX},
                        nullptr)
                  .ok());
  // Two tokens with slot -1 and one padded token past the slot mapping.
  HostTensor slots = indexTensor({-1, -1});
  RopeCacheUpdateArgs args;
  args.kvC = kvC.ref;
  args.kPe = kPe.ref;
  args.slotMapping = slots.ref;
  args.cache = cache.ref();
  args.positions = positions.ref;
  args.cosSin = table.ref;
  args.qPe = qPe.ref;
  ASSERT_TRUE(cpuKernelLibrary().ropeCacheUpdate(args, nullptr).ok());
  EXPECT_EQ(qPe.bytes, refQ.bytes);
  EXPECT_EQ(kPe.bytes, refK.bytes);
  EXPECT_EQ(cacheBytes(cache), before);
}

/// The compiled step copies q_pe into the last P columns of the assembled
/// [T, H, L + P] query and rotates it there: the strided view must rotate
/// exactly as a contiguous q_pe does, and leave the latent columns alone.
TEST(RopeCacheUpdate, StridedQPeViewOfTheAssembledQuery) {
  const int64_t T = 9, H = 16, latent = 512, rope = 64, row = latent + rope;
  for (RopeStyle style : {RopeStyle::GptJ, RopeStyle::NeoX}) {
    SCOPED_TRACE(style == RopeStyle::NeoX ? "neox" : "gptj");
    auto dev = createCpuDevice();
    KVCacheDesc desc;
    desc.numBlocks = 4;
    desc.blockSize = 16;
    KVCache viewCache = std::move(KVCache::create(*dev, desc).value());
    KVCache refCache = std::move(KVCache::create(*dev, desc).value());
    ASSERT_TRUE(viewCache.fill(kPoison).ok());
    ASSERT_TRUE(refCache.fill(kPoison).ok());
    std::mt19937 rng(11);
    const HostTensor &table = cosSinTable(64, rope, 10000.0);
    HostTensor kvC(DType::BF16, {T, latent}), kPe(DType::BF16, {T, rope}),
        qPe(DType::BF16, {T, H, rope}), query(DType::BF16, {T, H, row});
    fillRandom(kvC, rng);
    fillRandom(kPe, rng);
    fillRandom(qPe, rng);
    fillRandom(query, rng);
    // q_pe's values in the query's rope columns, as the step's copy leaves
    // them.
    for (int64_t r = 0; r < T * H; ++r)
      std::memcpy(query.bytes.data() + (r * row + latent) * 2,
                  qPe.bytes.data() + r * rope * 2, size_t(rope) * 2);
    const HostTensor queryBefore = query;
    HostTensor positions = indexTensor({0, 3, 7, 12, 20, 31, 40, 55, 63});
    HostTensor slots =
        indexTensor(distinctSlots(T, desc.numSlots(), rng));

    TensorRef view = query.ref;
    view.data = query.bytes.data() + latent * 2;
    view.sizes[2] = rope;
    HostTensor refK = kPe, viewK = kPe;
    RopeCacheUpdateArgs args;
    args.kvC = kvC.ref;
    args.slotMapping = slots.ref;
    args.positions = positions.ref;
    args.cosSin = table.ref;
    args.style = style;
    args.kPe = refK.ref;
    args.cache = refCache.ref();
    args.qPe = qPe.ref;
    ASSERT_TRUE(cpuKernelLibrary().ropeCacheUpdate(args, nullptr).ok());
    args.kPe = viewK.ref;
    args.cache = viewCache.ref();
    args.qPe = view;
    Status s = cpuKernelLibrary().ropeCacheUpdate(args, nullptr);
    ASSERT_TRUE(s.ok()) << s.toString();

    EXPECT_EQ(viewK.bytes, refK.bytes);
    EXPECT_EQ(cacheBytes(viewCache), cacheBytes(refCache));
    for (int64_t r = 0; r < T * H; ++r) {
      const uint8_t *got = query.bytes.data() + r * row * 2;
      ASSERT_EQ(std::memcmp(got + latent * 2,
                            qPe.bytes.data() + r * rope * 2, size_t(rope) * 2),
                0)
          << "rotated q_pe row " << r;
      ASSERT_EQ(std::memcmp(got, queryBefore.bytes.data() + r * row * 2,
                            size_t(latent) * 2),
                0)
          << "latent columns of row " << r;
    }
    // The rotation did something (position 0 is the identity).
    EXPECT_NE(std::memcmp(query.bytes.data() + (H * row + latent) * 2,
                          queryBefore.bytes.data() + (H * row + latent) * 2,
                          size_t(rope) * 2),
              0);
  }
}

TEST(RopeCacheUpdate, ErrorsLeaveEverythingUntouched) {
  auto dev = createCpuDevice();
  KVCacheDesc desc;
  desc.numBlocks = 4;
  desc.blockSize = 16;
  KVCache cache = std::move(KVCache::create(*dev, desc).value());
  ASSERT_TRUE(cache.fill(kPoison).ok());
  const std::vector<uint8_t> before = cacheBytes(cache);
  std::mt19937 rng(10);
  const HostTensor &table = cosSinTable(64, 64, 10000.0);
  HostTensor kvC(DType::BF16, {2, 512}), kPe(DType::BF16, {2, 64}),
      qPe(DType::BF16, {2, 4, 64});
  fillRandom(kvC, rng);
  fillRandom(kPe, rng);
  fillRandom(qPe, rng);
  const HostTensor q0 = qPe, k0 = kPe;
  RopeCacheUpdateArgs args;
  args.kvC = kvC.ref;
  args.kPe = kPe.ref;
  args.cache = cache.ref();
  args.cosSin = table.ref;
  args.qPe = qPe.ref;

  HostTensor goodPos = indexTensor({1, 2}), badPos = indexTensor({1, 64});
  HostTensor goodSlots = indexTensor({0, 1}), badSlots = indexTensor({0, 64});
  args.positions = badPos.ref;
  args.slotMapping = goodSlots.ref;
  EXPECT_EQ(cpuKernelLibrary().ropeCacheUpdate(args, nullptr).code(),
            StatusCode::OutOfRange);
  args.positions = goodPos.ref;
  args.slotMapping = badSlots.ref;
  EXPECT_EQ(cpuKernelLibrary().ropeCacheUpdate(args, nullptr).code(),
            StatusCode::OutOfRange);
  HostTensor wrongQ(DType::BF16, {2, 4, 32});
  args.slotMapping = goodSlots.ref;
  args.qPe = wrongQ.ref;
  EXPECT_EQ(cpuKernelLibrary().ropeCacheUpdate(args, nullptr).code(),
            StatusCode::InvalidArgument);
  EXPECT_EQ(qPe.bytes, q0.bytes);
  EXPECT_EQ(kPe.bytes, k0.bytes);
  EXPECT_EQ(cacheBytes(cache), before);
}

/// The compiled decode step rotates q_pe out of place: the source is the
/// strided q_pe of q_proj's output [T, H * (nope + rope)], the destination
/// the rope columns of the assembled query [T, H, L + P]. The result must
/// equal the in-place rotation bit for bit, leave the source and the latent
/// columns alone, and write the cache and k_pe the same way.
TEST(RopeCacheUpdate, OutOfPlaceEqualsInPlace) {
  const int64_t T = 7, H = 16, nope = 128, latent = 512, rope = 64;
  const int64_t qRow = H * (nope + rope), row = latent + rope;
  for (RopeStyle style : {RopeStyle::GptJ, RopeStyle::NeoX}) {
    SCOPED_TRACE(style == RopeStyle::NeoX ? "neox" : "gptj");
    auto dev = createCpuDevice();
    KVCacheDesc desc;
    desc.numBlocks = 4;
    desc.blockSize = 16;
    KVCache outCache = std::move(KVCache::create(*dev, desc).value());
    KVCache refCache = std::move(KVCache::create(*dev, desc).value());
    ASSERT_TRUE(outCache.fill(kPoison).ok());
    ASSERT_TRUE(refCache.fill(kPoison).ok());
    std::mt19937 rng(style == RopeStyle::NeoX ? 21 : 22);
    const HostTensor &table = cosSinTable(64, rope, 10000.0);
    HostTensor kvC(DType::BF16, {T, latent}), kPe(DType::BF16, {T, rope}),
        qProj(DType::BF16, {T, qRow}), query(DType::BF16, {T, H, row});
    fillRandom(kvC, rng);
    fillRandom(kPe, rng);
    fillRandom(qProj, rng);
    fillRandom(query, rng); // latent columns and poison in the rope columns
    const HostTensor qProjBefore = qProj, queryBefore = query;
    HostTensor positions = indexTensor({1, 3, 7, 12, 20, 40, 63});
    std::vector<int64_t> slotValues = distinctSlots(T, desc.numSlots(), rng);
    slotValues[2] = -1;
    HostTensor slots = indexTensor(slotValues);

    // In-place reference on a contiguous copy of the source.
    HostTensor refQ(DType::BF16, {T, H, rope});
    for (int64_t r = 0; r < T * H; ++r)
      std::memcpy(refQ.bytes.data() + r * rope * 2,
                  qProj.bytes.data() + (r * (nope + rope) + nope) * 2,
                  size_t(rope) * 2);
    HostTensor refK = kPe, outK = kPe;
    RopeCacheUpdateArgs args;
    args.kvC = kvC.ref;
    args.slotMapping = slots.ref;
    args.positions = positions.ref;
    args.cosSin = table.ref;
    args.style = style;
    args.kPe = refK.ref;
    args.cache = refCache.ref();
    args.qPe = refQ.ref;
    ASSERT_TRUE(cpuKernelLibrary().ropeCacheUpdate(args, nullptr).ok());

    TensorRef src = qProj.ref; // [T, H, rope], strides {qRow, nope + rope, 1}
    src.data = qProj.bytes.data() + nope * 2;
    src.rank = 3;
    src.sizes[0] = T, src.sizes[1] = H, src.sizes[2] = rope;
    src.strides[0] = qRow, src.strides[1] = nope + rope, src.strides[2] = 1;
    TensorRef dst = query.ref;
    dst.data = query.bytes.data() + latent * 2;
    dst.sizes[2] = rope;
    args.kPe = outK.ref;
    args.cache = outCache.ref();
    args.qPe = dst;
    args.qPeIn = src;
    Status s = cpuKernelLibrary().ropeCacheUpdate(args, nullptr);
    ASSERT_TRUE(s.ok()) << s.toString();

    EXPECT_EQ(qProj.bytes, qProjBefore.bytes) << "the source was written";
    EXPECT_EQ(outK.bytes, refK.bytes);
    EXPECT_EQ(cacheBytes(outCache), cacheBytes(refCache));
    for (int64_t r = 0; r < T * H; ++r) {
      const uint8_t *got = query.bytes.data() + r * row * 2;
      ASSERT_EQ(std::memcmp(got + latent * 2, refQ.bytes.data() + r * rope * 2,
                            size_t(rope) * 2),
                0)
          << "rotated q_pe row " << r;
      ASSERT_EQ(std::memcmp(got, queryBefore.bytes.data() + r * row * 2,
                            size_t(latent) * 2),
                0)
          << "latent columns of row " << r;
    }

    // The same view as source and destination is the in-place rotation.
    HostTensor sameQ(DType::BF16, {T, H, rope});
    for (int64_t r = 0; r < T * H; ++r)
      std::memcpy(sameQ.bytes.data() + r * rope * 2,
                  qProjBefore.bytes.data() + (r * (nope + rope) + nope) * 2,
                  size_t(rope) * 2);
    HostTensor sameK = kPe;
    KVCache sameCache = std::move(KVCache::create(*dev, desc).value());
    args.kPe = sameK.ref;
    args.cache = sameCache.ref();
    args.qPe = sameQ.ref;
    args.qPeIn = sameQ.ref;
    ASSERT_TRUE(cpuKernelLibrary().ropeCacheUpdate(args, nullptr).ok());
    EXPECT_EQ(sameQ.bytes, refQ.bytes);
  }
}

/// A source that shares bytes with the destination without being the same
/// view is refused, and a refused or failed out-of-place call writes
/// nothing: not the destination, the source, k_pe nor the cache.
TEST(RopeCacheUpdate, OutOfPlaceErrorsLeaveEverythingUntouched) {
  auto dev = createCpuDevice();
  KVCacheDesc desc;
  desc.numBlocks = 4;
  desc.blockSize = 16;
  KVCache cache = std::move(KVCache::create(*dev, desc).value());
  ASSERT_TRUE(cache.fill(kPoison).ok());
  const std::vector<uint8_t> before = cacheBytes(cache);
  std::mt19937 rng(12);
  const HostTensor &table = cosSinTable(64, 64, 10000.0);
  HostTensor kvC(DType::BF16, {2, 512}), kPe(DType::BF16, {2, 64}),
      qIn(DType::BF16, {2, 4, 64}), qOut(DType::BF16, {2, 4, 64}),
      both(DType::BF16, {2, 5, 64});
  fillRandom(kvC, rng);
  fillRandom(kPe, rng);
  fillRandom(qIn, rng);
  fillRandom(qOut, rng);
  fillRandom(both, rng);
  const HostTensor k0 = kPe, qIn0 = qIn, qOut0 = qOut, both0 = both;
  HostTensor goodPos = indexTensor({1, 2}), badPos = indexTensor({1, 64});
  HostTensor goodSlots = indexTensor({0, 1}), badSlots = indexTensor({0, 64});
  RopeCacheUpdateArgs args;
  args.kvC = kvC.ref;
  args.kPe = kPe.ref;
  args.cache = cache.ref();
  args.cosSin = table.ref;
  args.positions = goodPos.ref;
  args.slotMapping = badSlots.ref;
  args.qPe = qOut.ref;
  args.qPeIn = qIn.ref;
  EXPECT_EQ(cpuKernelLibrary().ropeCacheUpdate(args, nullptr).code(),
            StatusCode::OutOfRange);
  args.positions = badPos.ref;
  args.slotMapping = goodSlots.ref;
  EXPECT_EQ(cpuKernelLibrary().ropeCacheUpdate(args, nullptr).code(),
            StatusCode::OutOfRange);
  args.positions = goodPos.ref;

  // Shape, dtype and a source without a destination.
  HostTensor wrongShape(DType::BF16, {2, 3, 64}), wrongType(DType::F32, {2, 4, 64});
  args.qPeIn = wrongShape.ref;
  EXPECT_EQ(cpuKernelLibrary().ropeCacheUpdate(args, nullptr).code(),
            StatusCode::InvalidArgument);
  args.qPeIn = wrongType.ref;
  EXPECT_EQ(cpuKernelLibrary().ropeCacheUpdate(args, nullptr).code(),
            StatusCode::InvalidArgument);
  args.qPe = TensorRef();
  args.qPeIn = qIn.ref;
  EXPECT_EQ(cpuKernelLibrary().ropeCacheUpdate(args, nullptr).code(),
            StatusCode::InvalidArgument);

  // Partial overlap: heads 0..3 and 1..4 of one [2, 5, 64] buffer.
  TensorRef lo = both.ref, hi = both.ref;
  lo.sizes[1] = hi.sizes[1] = 4;
  hi.data = both.bytes.data() + 64 * 2;
  args.qPe = lo;
  args.qPeIn = hi;
  EXPECT_EQ(cpuKernelLibrary().ropeCacheUpdate(args, nullptr).code(),
            StatusCode::InvalidArgument);
  args.qPe = hi;
  args.qPeIn = lo;
  EXPECT_EQ(cpuKernelLibrary().ropeCacheUpdate(args, nullptr).code(),
            StatusCode::InvalidArgument);
  // Interleaved views (same start, other strides) overlap too.
  TensorRef strided = lo;
  strided.strides[0] = 64;
  strided.sizes[0] = 2;
  strided.sizes[1] = 1;
  TensorRef plain = lo;
  plain.sizes[1] = 1;
  args.qPe = plain;
  args.qPeIn = strided;
  EXPECT_EQ(cpuKernelLibrary().ropeCacheUpdate(args, nullptr).code(),
            StatusCode::InvalidArgument);

  EXPECT_EQ(kPe.bytes, k0.bytes);
  EXPECT_EQ(qIn.bytes, qIn0.bytes);
  EXPECT_EQ(qOut.bytes, qOut0.bytes);
  EXPECT_EQ(both.bytes, both0.bytes);
  EXPECT_EQ(cacheBytes(cache), before);

  // Disjoint views of one buffer are fine (heads 0..1 into heads 3..4).
  TensorRef a = both.ref, b = both.ref;
  a.sizes[0] = b.sizes[0] = 1;
  a.sizes[1] = b.sizes[1] = 2;
  b.data = both.bytes.data() + 3 * 64 * 2;
  HostTensor one = indexTensor({5});
  HostTensor noSlot = indexTensor({-1});
  HostTensor kv1(DType::BF16, {1, 512}), k1(DType::BF16, {1, 64});
  args.kvC = kv1.ref;
  args.kPe = k1.ref;
  args.positions = one.ref;
  args.slotMapping = noSlot.ref;
  args.qPe = b;
  args.qPeIn = a;
  Status s = cpuKernelLibrary().ropeCacheUpdate(args, nullptr);
  EXPECT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(std::memcmp(both.bytes.data(), both0.bytes.data(), 2 * 64 * 2), 0);
  EXPECT_NE(std::memcmp(both.bytes.data() + 3 * 64 * 2,
                        both0.bytes.data() + 3 * 64 * 2, 2 * 64 * 2),
            0);
}

} // namespace
