//===- DeviceTest.cpp - CpuDevice buffers, copies, streams and KVCache ----===//
#include "mlart/Device.h"
#include "mlart/KVCache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

using namespace mlart;

TEST(CpuDevice, DescribesItself) {
  auto dev = createCpuDevice();
  EXPECT_EQ(dev->kind(), DeviceKind::Cpu);
  EXPECT_STREQ(dev->kindName(), "cpu");
  EXPECT_TRUE(dev->isHostAccessible());
  EXPECT_STREQ(dev->kernels().name(), "cpu");
}

TEST(CpuDevice, AllocatesAlignedBuffersAndCopies) {
  auto dev = createCpuDevice();
  StatusOr<Buffer> a = dev->allocate(100);
  ASSERT_TRUE(a.ok()) << a.status().toString();
  EXPECT_EQ(a->size(), 100u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data()) % 64, 0u);
  EXPECT_EQ(a->device(), dev.get());

  std::vector<uint8_t> src(100);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = uint8_t(i * 7 + 1);
  ASSERT_TRUE(dev->writeBuffer(*a, 0, src.data(), 100).ok());
  StatusOr<Buffer> b = dev->allocate(100);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(dev->copyDeviceToDevice(b->data(), a->data(), 100).ok());
  ASSERT_TRUE(dev->memset(static_cast<uint8_t *>(b->data()) + 90, 0xEE, 10).ok());
  ASSERT_TRUE(dev->synchronize().ok());
  std::vector<uint8_t> back(100);
  ASSERT_TRUE(dev->readBuffer(*b, 0, back.data(), 100).ok());
  for (size_t i = 0; i < 90; ++i)
    EXPECT_EQ(back[i], src[i]);
  for (size_t i = 90; i < 100; ++i)
    EXPECT_EQ(back[i], 0xEE);
}

TEST(CpuDevice, BoundsCheckedBufferAccess) {
  auto dev = createCpuDevice();
  StatusOr<Buffer> a = dev->allocate(16);
  ASSERT_TRUE(a.ok());
  uint8_t tmp[32] = {};
  Status s = dev->writeBuffer(*a, 8, tmp, 9);
  EXPECT_EQ(s.code(), StatusCode::OutOfRange);
  EXPECT_NE(s.message().find("exceeds"), std::string::npos);
  EXPECT_EQ(dev->readBuffer(*a, 17, tmp, 0).code(), StatusCode::OutOfRange);
  EXPECT_EQ(dev->copyHostToDevice(nullptr, tmp, 4).code(),
            StatusCode::InvalidArgument);
}

TEST(CpuDevice, BufferIsMoveOnlyRaii) {
  auto dev = createCpuDevice();
  Buffer outer;
  {
    StatusOr<Buffer> a = dev->allocate(64);
    ASSERT_TRUE(a.ok());
    void *p = a->data();
    outer = std::move(*a);
    EXPECT_EQ(outer.data(), p);
    EXPECT_TRUE(a->empty());
  }
  EXPECT_FALSE(outer.empty());
  outer.reset();
  EXPECT_TRUE(outer.empty());
  StatusOr<Buffer> zero = dev->allocate(0);
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(zero->empty());
}

TEST(CpuDevice, StreamsAreNullHandles) {
  auto dev = createCpuDevice();
  StatusOr<Stream> s = dev->createStream();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->handle(), nullptr);
  EXPECT_TRUE(dev->synchronize(s->handle()).ok());
}

TEST(KVCache, CreatesZeroedCacheAndRefs) {
  auto dev = createCpuDevice();
  KVCacheDesc d;
  d.numBlocks = 4;
  d.blockSize = 16;
  d.dtype = DType::F8E4M3FN;
  d.layout = CacheLayout::Fp8PerTensor;
  StatusOr<KVCache> c = KVCache::create(*dev, d, 0.5f);
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ(c->sizeBytes(), size_t(4 * 16 * 576));
  std::vector<uint8_t> bytes(c->sizeBytes(), 1);
  ASSERT_TRUE(c->readBytes(0, bytes.data(), bytes.size()).ok());
  for (uint8_t b : bytes)
    ASSERT_EQ(b, 0);
  KVCacheRef r = c->ref();
  EXPECT_EQ(r.data, c->data());
  EXPECT_EQ(r.scale, 0.5f);
  EXPECT_EQ(r.writeProtect, nullptr);
  EXPECT_EQ(r.refusedWrites, nullptr);

  ASSERT_TRUE(c->fill(0x5A).ok());
  uint8_t row[4] = {1, 2, 3, 4};
  ASSERT_TRUE(c->writeBytes(576, row, 4).ok());
  ASSERT_TRUE(c->readBytes(0, bytes.data(), bytes.size()).ok());
  EXPECT_EQ(bytes[575], 0x5A);
  EXPECT_EQ(bytes[576], 1);
  EXPECT_EQ(bytes[579], 4);
  EXPECT_EQ(c->writeBytes(c->sizeBytes() - 2, row, 4).code(),
            StatusCode::OutOfRange);
}

TEST(KVCache, RejectsBadDescAndScale) {
  auto dev = createCpuDevice();
  KVCacheDesc d;
  d.numBlocks = 0;
  d.blockSize = 16;
  EXPECT_EQ(KVCache::create(*dev, d).status().code(),
            StatusCode::InvalidArgument);
  d.numBlocks = 2;
  EXPECT_EQ(KVCache::create(*dev, d, 0.0f).status().code(),
            StatusCode::InvalidArgument);
  d.dtype = DType::I32;
  StatusOr<KVCache> c = KVCache::create(*dev, d);
  EXPECT_EQ(c.status().code(), StatusCode::InvalidArgument);
  EXPECT_NE(c.status().message().find("bf16"), std::string::npos);
}
