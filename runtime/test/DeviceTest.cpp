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

TEST(CpuDevice, CopyViewStridedAndBroadcast) {
  auto dev = createCpuDevice();
  // src: a [2, 3, 4] f32 slice (columns 1..4 of rows of 6) of a [2, 3, 6]
  // array; dst: the transpose-like layout [2, 3, 4] with strides {1, 2, 6}.
  std::vector<float> src(2 * 3 * 6), dst(2 * 3 * 4 + 10, -1.0f);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = float(i);
  TensorRef s;
  s.data = src.data() + 1;
  s.dtype = DType::F32;
  s.rank = 3;
  s.sizes[0] = 2, s.sizes[1] = 3, s.sizes[2] = 4;
  s.strides[0] = 18, s.strides[1] = 6, s.strides[2] = 1;
  TensorRef d = s;
  d.data = dst.data();
  d.strides[0] = 1, d.strides[1] = 2, d.strides[2] = 6;
  ASSERT_TRUE(dev->copyView(s, d).ok());
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 4; ++c)
        EXPECT_EQ(dst[size_t(a + 2 * b + 6 * c)],
                  float(a * 18 + b * 6 + c + 1));
  EXPECT_EQ(dst[24], -1.0f); // nothing past the view

  // Broadcast: a [4] bf16 row repeated over 3 rows (source stride 0).
  std::vector<uint16_t> row = {1, 2, 3, 4}, out(12, 0);
  TensorRef bs = TensorRef::contiguous(row.data(), DType::BF16, {3, 4});
  bs.strides[0] = 0;
  TensorRef bd = TensorRef::contiguous(out.data(), DType::BF16, {3, 4});
  ASSERT_TRUE(dev->copyView(bs, bd).ok());
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(out[i], row[i % 4]);
}

TEST(CpuDevice, CopyViewRejectsMismatchesAndGraphsAreUnimplemented) {
  auto dev = createCpuDevice();
  std::vector<float> a(8), b(8);
  TensorRef s = TensorRef::contiguous(a.data(), DType::F32, {2, 4});
  TensorRef d = TensorRef::contiguous(b.data(), DType::F32, {4, 2});
  EXPECT_EQ(dev->copyView(s, d).code(), StatusCode::InvalidArgument);
  d = TensorRef::contiguous(b.data(), DType::I32, {2, 4});
  EXPECT_EQ(dev->copyView(s, d).code(), StatusCode::InvalidArgument);
  d = TensorRef::contiguous(b.data(), DType::F32, {2, 4});
  d.strides[0] = 0; // two rows into one: refused
  EXPECT_EQ(dev->copyView(s, d).code(), StatusCode::InvalidArgument);
  EXPECT_EQ(dev->beginCapture(nullptr).code(), StatusCode::Unimplemented);
  EXPECT_EQ(dev->endCapture(nullptr).status().code(),
            StatusCode::Unimplemented);
  EXPECT_EQ(dev->launchGraph(nullptr, nullptr).code(),
            StatusCode::Unimplemented);
  EXPECT_TRUE(dev->checkErrors(nullptr).ok());
}

// A size read from an artifact is refused by the memory limit before any
// byte is allocated or touched, and freed Buffers give their bytes back.
TEST(CpuDevice, MemoryLimitRefusesBeforeAllocating) {
  auto dev = createCpuDevice();
  EXPECT_GT(dev->memoryLimit(), uint64_t(1) << 20); // the host's memory
  dev->setMemoryLimit(4096);
  EXPECT_EQ(dev->memoryLimit(), 4096u);
  StatusOr<Buffer> a = dev->allocate(3000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(dev->bytesAllocated(), 3000u);
  StatusOr<Buffer> b = dev->allocate(2000);
  EXPECT_EQ(b.status().code(), StatusCode::ResourceExhausted);
  EXPECT_NE(b.status().message().find("memory limit of 4096"),
            std::string::npos);
  EXPECT_EQ(dev->bytesAllocated(), 3000u); // the refusal reserved nothing
  a->reset();
  EXPECT_EQ(dev->bytesAllocated(), 0u);
  EXPECT_TRUE(dev->allocate(4096).ok());
  EXPECT_EQ(dev->allocate(SIZE_MAX).status().code(),
            StatusCode::ResourceExhausted);
  dev->setMemoryLimit(0); // back to the default
  EXPECT_GT(dev->memoryLimit(), 4096u);

  // A cache an artifact declares with 2^40 blocks: refused at once.
  KVCacheDesc d;
  d.numBlocks = int64_t(1) << 40;
  d.blockSize = 64;
  EXPECT_EQ(KVCache::create(*dev, d).status().code(),
            StatusCode::ResourceExhausted);
}
