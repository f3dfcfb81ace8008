//===- StridedCacheTest.cpp - Wrapped caches with a strided block dimension
//-===//
//
// KVCache::wrap and mlart_kv_cache_wrap: what a view may be, raw access that
// skips the gaps, the executor's binding, and every CPU kernel on a strided
// view against the same kernel on a dense cache (StridedCacheChecks.h).
//
//===----------------------------------------------------------------------===//
#include "StridedCacheChecks.h"

#include "mlart/mlart.h"

#include <gtest/gtest.h>

namespace mlart {
namespace {

using stridedtest::StridedCase;

KVCacheDesc smallDesc() {
  KVCacheDesc d;
  d.numBlocks = 3;
  d.blockSize = 4;
  d.latentRank = 128;
  d.ropeDim = 64;
  d.dtype = DType::BF16;
  return d;
}

TEST(StridedCache, WrapRefusesOverlappingOrMissingViews) {
  auto dev = createCpuDevice();
  const KVCacheDesc d = smallDesc();
  const int64_t block = d.blockSize * d.rowBytes();
  std::vector<uint8_t> mem(size_t(3 * block));
  auto overlapping = KVCache::wrap(*dev, d, mem.data(), block - 16);
  ASSERT_FALSE(overlapping.ok());
  EXPECT_EQ(overlapping.status().code(), StatusCode::InvalidArgument);
  EXPECT_NE(overlapping.status().message().find("block stride"),
            std::string::npos)
      << overlapping.status().message();
  EXPECT_FALSE(KVCache::wrap(*dev, d, mem.data(), -block).ok());
  EXPECT_FALSE(KVCache::wrap(*dev, d, nullptr, 0).ok());
  EXPECT_FALSE(KVCache::wrap(*dev, d, mem.data(), 0, /*scale=*/0.0f).ok());
  // A stride whose last block lies past the address space.
  EXPECT_FALSE(KVCache::wrap(*dev, d, mem.data(), int64_t(1) << 62).ok());
  auto dense = KVCache::wrap(*dev, d, mem.data(), 0);
  ASSERT_TRUE(dense.ok()) << dense.status().message();
  EXPECT_EQ(dense->blockStride(), block);
  EXPECT_TRUE(dense->isWrapped());
}

TEST(StridedCache, RawBytesNumberTheRowsAndSkipTheGaps) {
  auto dev = createCpuDevice();
  const KVCacheDesc d = smallDesc();
  const int64_t block = d.blockSize * d.rowBytes(), gap = 48;
  std::vector<uint8_t> mem(size_t(3 * (block + gap)), 0xEE);
  auto view = KVCache::wrap(*dev, d, mem.data(), block + gap);
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_EQ(view->sizeBytes(), size_t(3 * block));
  // A write spanning the end of block 0 and the start of block 1.
  std::vector<uint8_t> src(100);
  std::iota(src.begin(), src.end(), uint8_t(1));
  ASSERT_TRUE(
      view->writeBytes(size_t(block - 50), src.data(), src.size()).ok());
  EXPECT_EQ(mem[size_t(block - 50)], 1);
  EXPECT_EQ(mem[size_t(block - 1)], 50);
  EXPECT_EQ(mem[size_t(block)], 0xEE) << "the gap was written";
  EXPECT_EQ(mem[size_t(block + gap)], 51);
  std::vector<uint8_t> back(100);
  ASSERT_TRUE(
      view->readBytes(size_t(block - 50), back.data(), back.size()).ok());
  EXPECT_EQ(back, src);
  // Past the rows: refused, nothing written.
  const std::vector<uint8_t> before = mem;
  Status s = view->writeBytes(size_t(3 * block - 10), src.data(), 20);
  EXPECT_EQ(s.code(), StatusCode::OutOfRange) << s.message();
  EXPECT_EQ(mem, before);
  ASSERT_TRUE(view->fill(0x11).ok());
  for (int64_t b = 0; b < 3; ++b) {
    EXPECT_EQ(mem[size_t(b * (block + gap))], 0x11);
    EXPECT_EQ(mem[size_t(b * (block + gap) + block)], 0xEE);
  }
}

TEST(StridedCache, ViewArithmeticAndValidation) {
  KVCacheRef bad;
  bad.desc = smallDesc();
  std::vector<uint8_t> mem(size_t(bad.desc.totalBytes()));
  bad.data = mem.data();
  bad.blockStride = 8;
  Status s = bad.validate();
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  bad.blockStride = 0;
  EXPECT_TRUE(bad.validate().ok());
  EXPECT_EQ(bad.spanBytes(), bad.desc.totalBytes());
  bad.blockStride = bad.desc.blockSize * bad.desc.rowBytes() + 32;
  EXPECT_EQ(bad.slotOffset(5), bad.blockStride + bad.desc.rowBytes());
  EXPECT_EQ(bad.spanBytes(), bad.desc.totalBytes() + 2 * 32);
}

class StridedCacheKernels : public ::testing::TestWithParam<StridedCase> {
protected:
  std::unique_ptr<Device> dev = createCpuDevice();
  std::mt19937 rng{std::random_device{}()};
};

TEST_P(StridedCacheKernels, CacheWritesMatchDense) {
  stridedtest::checkCacheWrites(*dev, rng, GetParam());
}

TEST_P(StridedCacheKernels, DecodeMatchesDense) {
  for (int64_t heads : {16, 128})
    stridedtest::checkDecode(*dev, rng, GetParam(), heads);
}

TEST_P(StridedCacheKernels, PrefillContextMatchesDense) {
  stridedtest::checkPrefillContext(*dev, rng, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Cases, StridedCacheKernels,
                         ::testing::ValuesIn(stridedtest::stridedCases()),
                         [](const auto &info) {
                           return stridedtest::caseName(info.param);
                         });

TEST(StridedCacheCApi, WrapWritesOnlyTheGivenSlots) {
  mlart_device *dev = nullptr;
  ASSERT_EQ(mlart_device_create_cpu(&dev), nullptr);
  const mlart_kv_cache_desc desc = {
      2, 4, 128, 64, MLART_DTYPE_F32, MLART_CACHE_PLAIN};
  const int64_t row = (128 + 64) * 4, block = 4 * row, gap = 256;
  std::vector<uint8_t> mem(size_t(2 * (block + gap)), 0xEE);
  mlart_kv_cache *cache = nullptr;
  // Overlapping blocks: refused, no handle.
  mlart_status st =
      mlart_kv_cache_wrap(dev, &desc, mem.data(), block - 4, 1.0f, &cache);
  EXPECT_EQ(mlart_status_get_code(st), MLART_STATUS_INVALID_ARGUMENT);
  mlart_status_free(st);
  EXPECT_EQ(cache, nullptr);
  ASSERT_EQ(
      mlart_kv_cache_wrap(dev, &desc, mem.data(), block + gap, 1.0f, &cache),
      nullptr);
  EXPECT_EQ(mlart_kv_cache_block_stride(cache), block + gap);
  EXPECT_EQ(mlart_kv_cache_size_bytes(cache), size_t(2 * block));

  // Slot 5 is block 1, row 1: one row past the gap.
  std::vector<float> kv(128, 0.5f), pe(64, -2.0f);
  int64_t slot = 5;
  int64_t kvS[2] = {1, 128}, peS[2] = {1, 64}, one[1] = {1};
  mlart_cache_update_args a = {};
  a.kv_c = mlart_tensor_contiguous(kv.data(), MLART_DTYPE_F32, 2, kvS);
  a.k_pe = mlart_tensor_contiguous(pe.data(), MLART_DTYPE_F32, 2, peS);
  a.slot_mapping = mlart_tensor_contiguous(&slot, MLART_DTYPE_I64, 1, one);
  a.cache = cache;
  ASSERT_EQ(mlart_cache_update(dev, &a, nullptr), nullptr);
  const size_t at = size_t(block + gap + row);
  float first = 0, last = 0;
  std::memcpy(&first, mem.data() + at, 4);
  std::memcpy(&last, mem.data() + at + size_t(row) - 4, 4);
  EXPECT_EQ(first, 0.5f);
  EXPECT_EQ(last, -2.0f);
  for (size_t i = 0; i < mem.size(); ++i)
    if (i < at || i >= at + size_t(row))
      ASSERT_EQ(mem[i], 0xEE) << "byte " << i << " outside slot 5 changed";
  mlart_kv_cache_destroy(cache);
  // The memory is the caller's: destroying the handle leaves it intact.
  EXPECT_EQ(mem[0], 0xEE);
  mlart_device_destroy(dev);
}

} // namespace
} // namespace mlart
