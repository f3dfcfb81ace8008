//===- CudaGraphTest.cpp - Strided copies and CUDA-graph replay of a step -===//
#include "CudaTestUtil.h"

#include "mlart/ArtifactWriter.h"
#include "mlart/Executor.h"
#include "mlart/KVCache.h"

using namespace mlart;
using namespace mlart::cudatest;

namespace {

/// Runs copyView on the GPU and on the CPU (same strides, host copies of the
/// same bytes) and compares the destination bytes, poison included.
void checkCopy(CudaDevice *dev, DType dt, std::vector<int64_t> sizes,
               std::vector<int64_t> srcStrides,
               std::vector<int64_t> dstStrides, int64_t srcSpan,
               int64_t dstSpan, int64_t srcOff = 0, int64_t dstOff = 0) {
  Arr src(dev, dt, {srcSpan}), dst(dev, dt, {dstSpan});
  for (auto &b : src.host)
    b = uint8_t(rng()());
  std::memset(dst.host.data(), 0xa5, dst.host.size());
  src.up(dev);
  dst.up(dev);
  auto view = [&](void *base, const std::vector<int64_t> &st, int64_t off) {
    TensorRef t;
    t.data = static_cast<uint8_t *>(base) + off * int64_t(dtypeSize(dt));
    t.dtype = dt;
    t.rank = int(sizes.size());
    for (int d = 0; d < t.rank; ++d) {
      t.sizes[d] = sizes[size_t(d)];
      t.strides[d] = st[size_t(d)];
    }
    return t;
  };
  Status s = dev->copyView(view(src.dev.data(), srcStrides, srcOff),
                           view(dst.dev.data(), dstStrides, dstOff));
  ASSERT_TRUE(s.ok()) << s.toString();
  auto cpu = createCpuDevice();
  ASSERT_TRUE(cpu->copyView(view(src.host.data(), srcStrides, srcOff),
                            view(dst.host.data(), dstStrides, dstOff))
                  .ok());
  EXPECT_EQ(dst.down(dev), dst.host);
}

} // namespace

TEST(CudaCopyView, StridedBroadcastAndVectorizedMatchCpu) {
  REQUIRE_GPU();
  // q_pe out of q [64, 16, 192] bf16 (columns 128..191) into [64, 16, 64].
  checkCopy(dev, DType::BF16, {64, 16, 64}, {16 * 192, 192, 1},
            {16 * 64, 64, 1}, 64 * 16 * 192, 64 * 16 * 64, 128, 0);
  // Odd offset: no vectors possible.
  checkCopy(dev, DType::BF16, {5, 7, 3}, {40, 5, 1}, {21, 3, 1}, 256, 128, 1,
            3);
  // Transpose (inner destination stride != 1), f32, rank 2.
  checkCopy(dev, DType::F32, {33, 17}, {17, 1}, {1, 33}, 33 * 17, 33 * 17);
  // Broadcast source (stride 0) into rank 4, fp8 and i64.
  checkCopy(dev, DType::F8E4M3FN, {2, 3, 4, 32}, {0, 32, 0, 1},
            {384, 128, 32, 1}, 96, 768);
  checkCopy(dev, DType::I64, {3, 5}, {0, 1}, {5, 1}, 5, 15);
  // Rank 1 and empty.
  checkCopy(dev, DType::F16, {1000}, {1}, {1}, 1000, 1000);
  checkCopy(dev, DType::F16, {0, 4}, {4, 1}, {4, 1}, 4, 4);
}

namespace {

constexpr int64_t T = 8, LAT = 512, ROPE = 64;

KVCacheDesc graphCacheDesc() {
  KVCacheDesc d;
  d.numBlocks = 8;
  d.blockSize = 16;
  d.latentRank = LAT;
  d.ropeDim = ROPE;
  d.dtype = DType::BF16;
  d.layout = CacheLayout::Plain;
  return d;
}

/// A step with a strided copy (the first ROPE columns of kv_c into `out`)
/// and a cache update.
Artifact graphStep() {
  ArtifactWriter w("graph_step");
  uint32_t kvC = w.addBuffer("kv_c", BufferRole::Input, DType::BF16, {T, LAT});
  uint32_t kPe = w.addBuffer("k_pe", BufferRole::Input, DType::BF16, {T, ROPE});
  uint32_t slots =
      w.addBuffer("slot_mapping", BufferRole::StepMetadata, DType::I64, {T});
  uint32_t out = w.addBuffer("out", BufferRole::Output, DType::BF16, {T, ROPE});
  uint32_t cache = w.addCache("kv_cache", graphCacheDesc());
  w.copy(w.bufferView(kvC, 0, DType::BF16, {T, ROPE}, {LAT, 1}),
         w.bufferView(out));
  w.cacheUpdate(cache, w.bufferView(kvC), w.bufferView(kPe),
                w.bufferView(slots));
  StatusOr<std::vector<uint8_t>> bytes = w.finish();
  EXPECT_TRUE(bytes.ok()) << bytes.status().toString();
  StatusOr<Artifact> a = Artifact::load(bytes->data(), bytes->size());
  EXPECT_TRUE(a.ok()) << a.status().toString();
  return std::move(a).value();
}

std::vector<uint8_t> cacheBytes(KVCache &c) {
  std::vector<uint8_t> b(c.sizeBytes());
  EXPECT_TRUE(c.readBytes(0, b.data(), b.size()).ok());
  return b;
}

} // namespace

TEST(CudaGraph, ReplaysAStepWithNewDataAndReportsErrors) {
  REQUIRE_GPU();
  StatusOr<Stream> stream = dev->createStream();
  ASSERT_TRUE(stream.ok());
  StreamHandle st = stream->handle();
  StatusOr<Executor> exec = Executor::create(graphStep(), *dev);
  ASSERT_TRUE(exec.ok()) << exec.status().toString();
  StatusOr<KVCache> cache = KVCache::create(*dev, graphCacheDesc());
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE(dev->memset(cache->data(), 0, cache->sizeBytes()).ok());
  Arr kvC(dev, DType::BF16, {T, LAT}), kPe(dev, DType::BF16, {T, ROPE}),
      slots(dev, DType::I64, {T}), out(dev, DType::BF16, {T, ROPE});
  ASSERT_TRUE(exec->bind("kv_c", kvC.d()).ok());
  ASSERT_TRUE(exec->bind("k_pe", kPe.d()).ok());
  ASSERT_TRUE(exec->bind("slot_mapping", slots.d()).ok());
  ASSERT_TRUE(exec->bind("out", out.d()).ok());
  ASSERT_TRUE(exec->bindCache("kv_cache", *cache).ok());
  EXPECT_EQ(exec->runGraph(st).code(), StatusCode::FailedPrecondition);

  const int64_t rowBytes = graphCacheDesc().rowBytes();
  auto newStep = [&](std::vector<int64_t> s) {
    kvC.random();
    kPe.random();
    slots.setI64(s);
    out.poison();
    kvC.up(dev);
    kPe.up(dev);
    slots.up(dev);
    out.up(dev);
    ASSERT_TRUE(dev->synchronize().ok());
  };
  auto expectStep = [&](const std::vector<int64_t> &s,
                        const std::vector<uint8_t> &before) {
    std::vector<uint8_t> got = cacheBytes(*cache), want = before;
    for (int64_t t = 0; t < T; ++t)
      if (s[size_t(t)] >= 0) {
        std::memcpy(want.data() + s[size_t(t)] * rowBytes,
                    kvC.host.data() + t * LAT * 2, LAT * 2);
        std::memcpy(want.data() + s[size_t(t)] * rowBytes + LAT * 2,
                    kPe.host.data() + t * ROPE * 2, ROPE * 2);
      }
    EXPECT_EQ(got, want);
    std::vector<uint8_t> o = out.down(dev);
    for (int64_t t = 0; t < T; ++t)
      EXPECT_EQ(0, std::memcmp(o.data() + t * ROPE * 2,
                               kvC.host.data() + t * LAT * 2, ROPE * 2));
  };

  // Warm-up step, eager.
  std::vector<int64_t> s0 = {0, 1, 2, 3, 4, 5, 6, 7};
  newStep(s0);
  std::vector<uint8_t> before = cacheBytes(*cache);
  ASSERT_TRUE(exec->run(st).ok());
  ASSERT_TRUE(dev->synchronize().ok());
  expectStep(s0, before);

  // Capture runs nothing.
  before = cacheBytes(*cache);
  Status cap = exec->captureGraph(st);
  ASSERT_TRUE(cap.ok()) << cap.toString();
  ASSERT_TRUE(exec->hasGraph());
  EXPECT_EQ(cacheBytes(*cache), before);

  // New values into the same buffers, then replay: the new data lands.
  for (int step = 0; step < 3; ++step) {
    std::vector<int64_t> s = {17 + step, 40, 63, 100 + step, 127, 16, 31, -1};
    newStep(s);
    before = cacheBytes(*cache);
    Status r = exec->runGraph(st);
    ASSERT_TRUE(r.ok()) << r.toString();
    expectStep(s, before);
  }

  // A dummy step (all slots -1) writes no cache byte.
  newStep(std::vector<int64_t>(T, -1));
  before = cacheBytes(*cache);
  ASSERT_TRUE(exec->runGraph(st).ok());
  EXPECT_EQ(cacheBytes(*cache), before);

  // A bad slot: the replay reports OutOfRange (asynchronous checks inside
  // the graph), writes nothing, and the next replay is clean again.
  std::vector<int64_t> bad = {3, 4, 5, 6, 7, 8, 9, 8 * 16};
  newStep(bad);
  before = cacheBytes(*cache);
  Status r = exec->runGraph(st);
  EXPECT_EQ(r.code(), StatusCode::OutOfRange) << r.toString();
  EXPECT_EQ(cacheBytes(*cache), before);
  // Also through the asynchronous path: launch, then checkErrors.
  ASSERT_TRUE(exec->runGraph(st, /*wait=*/false).ok());
  ASSERT_TRUE(dev->synchronize(st).ok());
  EXPECT_EQ(dev->checkErrors(st).code(), StatusCode::OutOfRange);
  std::vector<int64_t> good = {9, 10, 11, 12, 13, 14, 15, 0};
  newStep(good);
  before = cacheBytes(*cache);
  ASSERT_TRUE(exec->runGraph(st).ok());
  expectStep(good, before);

  // Eager runs still use synchronous checks after a capture.
  newStep(bad);
  EXPECT_EQ(exec->run(st).code(), StatusCode::OutOfRange);
}

TEST(CudaGraph, CaptureNeedsACreatedStream) {
  REQUIRE_GPU();
  StatusOr<Executor> exec = Executor::create(graphStep(), *dev);
  ASSERT_TRUE(exec.ok());
  EXPECT_EQ(exec->captureGraph(nullptr).code(), StatusCode::FailedPrecondition)
      << "unbound buffers are reported first";
  EXPECT_EQ(dev->beginCapture(nullptr).code(), StatusCode::InvalidArgument);
}

// A large update (more slots than one kernel block validates inline) runs
// a validation kernel, then the write kernel, which reads its verdict.
// Captured in a graph it must replay with new data, refuse a bad slot
// without writing, and leave the verdict reset for the next replay (the
// validation kernel's last block resets it; no memset node).
TEST(CudaGraph, LargeUpdateReplaysAllOrNothing) {
  REQUIRE_GPU();
  constexpr int64_t kT = 3000, kBlocks = 4 * kT / 16;
  KVCacheDesc desc = graphCacheDesc();
  desc.numBlocks = kBlocks;
  ArtifactWriter w("large_update");
  uint32_t kvC = w.addBuffer("kv_c", BufferRole::Input, DType::BF16, {kT, LAT});
  uint32_t kPe = w.addBuffer("k_pe", BufferRole::Input, DType::BF16, {kT, ROPE});
  uint32_t sl = w.addBuffer("slot_mapping", BufferRole::StepMetadata, DType::I64, {kT});
  uint32_t cacheId = w.addCache("kv_cache", desc);
  w.cacheUpdate(cacheId, w.bufferView(kvC), w.bufferView(kPe), w.bufferView(sl));
  StatusOr<std::vector<uint8_t>> bytes = w.finish();
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  StatusOr<Artifact> art = Artifact::load(bytes->data(), bytes->size());
  ASSERT_TRUE(art.ok()) << art.status().toString();
  StatusOr<Stream> stream = dev->createStream();
  ASSERT_TRUE(stream.ok());
  StreamHandle st = stream->handle();
  StatusOr<Executor> exec = Executor::create(std::move(art).value(), *dev);
  ASSERT_TRUE(exec.ok()) << exec.status().toString();
  StatusOr<KVCache> cache = KVCache::create(*dev, desc);
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE(dev->memset(cache->data(), 0x5a, cache->sizeBytes()).ok());
  Arr kv(dev, DType::BF16, {kT, LAT}), kp(dev, DType::BF16, {kT, ROPE}),
      slots(dev, DType::I64, {kT});
  ASSERT_TRUE(exec->bind("kv_c", kv.d()).ok());
  ASSERT_TRUE(exec->bind("k_pe", kp.d()).ok());
  ASSERT_TRUE(exec->bind("slot_mapping", slots.d()).ok());
  ASSERT_TRUE(exec->bindCache("kv_cache", *cache).ok());
  const int64_t rowBytes = desc.rowBytes();
  auto setStep = [&](const std::vector<int64_t> &s) {
    kv.random();
    kp.random();
    slots.setI64(s);
    kv.up(dev);
    kp.up(dev);
    slots.up(dev);
    ASSERT_TRUE(dev->synchronize().ok());
  };
  auto expected = [&](const std::vector<int64_t> &s, std::vector<uint8_t> want) {
    for (int64_t t = 0; t < kT; ++t)
      if (s[size_t(t)] >= 0) {
        std::memcpy(want.data() + s[size_t(t)] * rowBytes, kv.host.data() + t * LAT * 2, LAT * 2);
        std::memcpy(want.data() + s[size_t(t)] * rowBytes + LAT * 2,
                    kp.host.data() + t * ROPE * 2, ROPE * 2);
      }
    return want;
  };
  auto slotsFor = [&](int step) {
    std::vector<int64_t> s = randomSlots(kT, desc.numSlots());
    s[size_t(step)] = -1; // a skipped token as well
    return s;
  };
  std::vector<int64_t> s0 = slotsFor(0);
  setStep(s0);
  std::vector<uint8_t> before = cacheBytes(*cache);
  ASSERT_TRUE(exec->run(st).ok());
  ASSERT_TRUE(dev->synchronize().ok());
  EXPECT_EQ(cacheBytes(*cache), expected(s0, before)) << "eager";
  Status cap = exec->captureGraph(st);
  ASSERT_TRUE(cap.ok()) << cap.toString();
  for (int step = 1; step <= 4; ++step) {
    std::vector<int64_t> s = slotsFor(step);
    const bool bad = step == 2;
    if (bad)
      s[size_t(kT - 7)] = desc.numSlots() + 11;
    setStep(s);
    before = cacheBytes(*cache);
    Status r = exec->runGraph(st);
    if (bad) {
      EXPECT_EQ(r.code(), StatusCode::OutOfRange) << r.toString();
      EXPECT_EQ(cacheBytes(*cache), before) << "a refused replay wrote";
    } else {
      ASSERT_TRUE(r.ok()) << "step " << step << ": " << r.toString();
      EXPECT_EQ(cacheBytes(*cache), expected(s, before)) << "step " << step;
    }
  }
}
