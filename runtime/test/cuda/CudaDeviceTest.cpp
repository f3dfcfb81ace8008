//===- CudaDeviceTest.cpp - CudaDevice: memory, copies, streams, events ---===//
#include "CudaTestUtil.h"

using namespace mlart;
using namespace mlart::cudatest;

TEST(CudaDevice, CreateOrReportUnavailable) {
  auto d = createCudaDevice(0);
  if (!d.ok()) {
    EXPECT_EQ(d.status().code(), StatusCode::Unavailable) << d.status().message();
    GTEST_SKIP() << "no GPU: " << d.status().message();
  }
  EXPECT_STREQ(d.value()->kindName(), "cuda");
  EXPECT_FALSE(d.value()->isHostAccessible());
  EXPECT_GT(d.value()->multiprocessorCount(), 0);
  std::printf("device: %s, %d SMs, L2 %zu bytes\n",
              d.value()->deviceName().c_str(),
              d.value()->multiprocessorCount(), d.value()->l2CacheBytes());
}

TEST(CudaDevice, BadOrdinalIsAnError) {
  auto d = createCudaDevice(1000);
  EXPECT_FALSE(d.ok());
}

TEST(CudaDevice, CopiesMemsetAndStreams) {
  REQUIRE_GPU();
  auto s = dev->createStream();
  ASSERT_TRUE(s.ok()) << s.status().message();
  const size_t n = (3u << 20) + 123;
  std::vector<uint8_t> src(n), back(n);
  for (size_t i = 0; i < n; ++i)
    src[i] = uint8_t(rng()());
  auto a = dev->allocate(n);
  auto b = dev->allocate(n);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.value().data()) % 64, 0u);
  StreamHandle h = s.value().handle();
  ASSERT_TRUE(dev->writeBuffer(a.value(), 0, src.data(), n, h).ok());
  ASSERT_TRUE(dev->copyDeviceToDevice(b.value().data(), a.value().data(), n, h).ok());
  ASSERT_TRUE(dev->memset(static_cast<uint8_t *>(b.value().data()) + 10, 0xab, 5, h).ok());
  ASSERT_TRUE(dev->readBuffer(b.value(), 0, back.data(), n, h).ok());
  for (int i = 10; i < 15; ++i)
    src[size_t(i)] = 0xab;
  EXPECT_EQ(src, back);
  // Out-of-range buffer access is refused on the host.
  EXPECT_EQ(dev->readBuffer(b.value(), n - 1, back.data(), 2).code(),
            StatusCode::OutOfRange);
  EXPECT_TRUE(dev->synchronize(h).ok());
}

TEST(CudaDevice, CachingAllocatorReusesFreedBlocks) {
  REQUIRE_GPU();
  ASSERT_TRUE(dev->synchronize().ok());
  void *first = nullptr;
  {
    auto a = dev->allocate(5u << 20);
    ASSERT_TRUE(a.ok());
    first = a.value().data();
  }
  ASSERT_TRUE(dev->synchronize().ok());
  EXPECT_GE(dev->cachedBytes(), size_t(5u << 20));
  auto b = dev->allocate(5u << 20);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.value().data(), first);
  b.value().reset();
  EXPECT_TRUE(dev->emptyCache().ok());
  EXPECT_EQ(dev->cachedBytes(), 0u);
}

TEST(CudaDevice, EventsTime) {
  REQUIRE_GPU();
  auto s = dev->createStream();
  auto e0 = dev->createEvent(), e1 = dev->createEvent();
  ASSERT_TRUE(s.ok() && e0.ok() && e1.ok());
  auto a = dev->allocate(64u << 20);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(dev->recordEvent(e0.value(), s.value().handle()).ok());
  ASSERT_TRUE(dev->memset(a.value().data(), 1, 64u << 20, s.value().handle()).ok());
  ASSERT_TRUE(dev->recordEvent(e1.value(), s.value().handle()).ok());
  ASSERT_TRUE(dev->synchronizeEvent(e1.value()).ok());
  auto ms = dev->elapsedMs(e0.value(), e1.value());
  ASSERT_TRUE(ms.ok());
  EXPECT_GT(ms.value(), 0.0f);
  dev->destroyEvent(e0.value());
  dev->destroyEvent(e1.value());
}
