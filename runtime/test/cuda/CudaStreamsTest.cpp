//===- CudaStreamsTest.cpp - The executor's concurrent streams on the GPU -===//
//
// A step shaped like the V2-Lite decode layer's projections: a norm feeding
// two GEMMs, one of which continues through a norm into a cache write while
// the other continues through a GEMM and the residual add. With two streams
// the latent branch runs beside the query branch; the results (output and
// every cache byte) must be bit-identical to one stream, eager and replayed
// as a graph, over several steps with fresh inputs.
//
//===----------------------------------------------------------------------===//
#include "CudaTestUtil.h"

#include "mlart/ArtifactWriter.h"
#include "mlart/Executor.h"
#include "mlart/KVCache.h"

using namespace mlart;
using namespace mlart::cudatest;

namespace {

constexpr int64_t T = 16, HID = 256, QN = 384, LAT = 512, ROPE = 64;

KVCacheDesc streamsCacheDesc() {
  KVCacheDesc d;
  d.numBlocks = 8;
  d.blockSize = 16;
  d.latentRank = LAT;
  d.ropeDim = ROPE;
  d.dtype = DType::BF16;
  d.layout = CacheLayout::Plain;
  return d;
}

Artifact twoBranchStep() {
  ArtifactWriter w("two_branches");
  const DType bf = DType::BF16;
  uint32_t x = w.addBuffer("x", BufferRole::Input, bf, {T, HID});
  uint32_t slots = w.addBuffer("slot_mapping", BufferRole::StepMetadata,
                               DType::I64, {T});
  uint32_t wNorm = w.addBuffer("w_norm", BufferRole::Weight, bf, {HID});
  uint32_t wQ = w.addBuffer("w_q", BufferRole::Weight, bf, {QN, HID});
  uint32_t wKv = w.addBuffer("w_kv", BufferRole::Weight, bf,
                             {LAT + ROPE, HID});
  uint32_t wKvNorm = w.addBuffer("w_kv_norm", BufferRole::Weight, bf, {LAT});
  uint32_t wO = w.addBuffer("w_o", BufferRole::Weight, bf, {HID, QN});
  uint32_t out = w.addBuffer("out", BufferRole::Output, bf, {T, HID});
  uint32_t cache = w.addCache("kv_cache", streamsCacheDesc());

  auto arena = [&](std::initializer_list<int64_t> sizes, int64_t elements) {
    return w.arenaView(w.allocateArena(elements * 2), bf, sizes);
  };
  uint32_t h = arena({T, HID}, T * HID);
  uint32_t q = arena({T, QN}, T * QN);
  int64_t kvOff = w.allocateArena(T * (LAT + ROPE) * 2);
  uint32_t kv = w.arenaView(kvOff, bf, {T, LAT + ROPE});
  uint32_t kvC = w.arenaView(kvOff, bf, {T, LAT}, {LAT + ROPE, 1});
  uint32_t kPe = w.arenaView(kvOff + LAT * 2, bf, {T, ROPE}, {LAT + ROPE, 1});
  uint32_t kvN = arena({T, LAT}, T * LAT);
  uint32_t y = arena({T, HID}, T * HID);

  w.rmsNorm(w.bufferView(x), w.bufferView(wNorm), h, 1e-6f, "norm");
  w.linear(h, w.bufferView(wQ), q, "q_proj");
  w.linear(h, w.bufferView(wKv), kv, "kv_a");
  w.rmsNorm(kvC, w.bufferView(wKvNorm), kvN, 1e-6f, "kv_norm");
  w.cacheUpdate(cache, kvN, kPe, w.bufferView(slots), "cache_write");
  w.linear(q, w.bufferView(wO), y, "o_proj");
  w.add(y, w.bufferView(x), w.bufferView(out), "residual");
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

TEST(CudaStreams, TwoStreamsMatchOneStreamBitForBit) {
  REQUIRE_GPU();
  const DType bf = DType::BF16;
  Arr x(dev, bf, {T, HID}), slots(dev, DType::I64, {T}),
      wNorm(dev, bf, {HID}), wQ(dev, bf, {QN, HID}),
      wKv(dev, bf, {LAT + ROPE, HID}), wKvNorm(dev, bf, {LAT}),
      wO(dev, bf, {HID, QN}), out1(dev, bf, {T, HID}), out2(dev, bf, {T, HID});
  for (Arr *a : {&wNorm, &wQ, &wKv, &wKvNorm, &wO}) {
    a->random(-0.2f, 0.2f);
    a->up(dev);
  }
  StatusOr<KVCache> cache1 = KVCache::create(*dev, streamsCacheDesc());
  StatusOr<KVCache> cache2 = KVCache::create(*dev, streamsCacheDesc());
  ASSERT_TRUE(cache1.ok() && cache2.ok());
  ASSERT_TRUE(dev->memset(cache1->data(), 0, cache1->sizeBytes()).ok());
  ASSERT_TRUE(dev->memset(cache2->data(), 0, cache2->sizeBytes()).ok());

  StatusOr<Executor> one = Executor::create(twoBranchStep(), *dev);
  StatusOr<Executor> two = Executor::create(twoBranchStep(), *dev);
  ASSERT_TRUE(one.ok() && two.ok());
  one->setMaxStreams(1);
  two->setMaxStreams(2);
  auto bindAll = [&](Executor &e, Arr &out, KVCache &cache) {
    ASSERT_TRUE(e.bind("x", x.d()).ok());
    ASSERT_TRUE(e.bind("slot_mapping", slots.d()).ok());
    ASSERT_TRUE(e.bind("w_norm", wNorm.d()).ok());
    ASSERT_TRUE(e.bind("w_q", wQ.d()).ok());
    ASSERT_TRUE(e.bind("w_kv", wKv.d()).ok());
    ASSERT_TRUE(e.bind("w_kv_norm", wKvNorm.d()).ok());
    ASSERT_TRUE(e.bind("w_o", wO.d()).ok());
    ASSERT_TRUE(e.bind("out", out.d()).ok());
    ASSERT_TRUE(e.bindCache("kv_cache", cache).ok());
  };
  bindAll(*one, out1, *cache1);
  bindAll(*two, out2, *cache2);

  StatusOr<const StreamPlan *> plan = two->streamPlan();
  ASSERT_TRUE(plan.ok()) << plan.status().toString();
  EXPECT_EQ((*plan)->numStreams, 2);
  // kv_a, its norm and the cache write run on the side stream.
  EXPECT_EQ((*plan)->stream, (std::vector<int>{0, 0, 1, 1, 1, 0, 0}));
  StatusOr<const StreamPlan *> plan1 = one->streamPlan();
  ASSERT_TRUE(plan1.ok());
  EXPECT_EQ((*plan1)->numStreams, 1);

  StatusOr<Stream> stream = dev->createStream();
  ASSERT_TRUE(stream.ok());
  StreamHandle st = stream->handle();
  auto newStep = [&](int step) {
    x.random();
    std::vector<int64_t> s(T);
    for (int64_t t = 0; t < T; ++t)
      s[size_t(t)] = (t * 7 + step * 16) % (8 * 16);
    s[size_t(step % T)] = -1;
    slots.setI64(s);
    out1.poison();
    out2.poison();
    for (Arr *a : {&x, &slots, &out1, &out2})
      a->up(dev);
    ASSERT_TRUE(dev->synchronize().ok());
  };
  auto expectSame = [&](const char *what, int step) {
    EXPECT_EQ(out1.down(dev), out2.down(dev)) << what << " step " << step;
    EXPECT_EQ(cacheBytes(*cache1), cacheBytes(*cache2))
        << what << " step " << step;
    // The output is a real result, not poison.
    std::vector<uint8_t> o = out2.down(dev);
    for (int64_t i = 0; i < T * HID; ++i)
      ASSERT_FALSE(std::isnan(loadAsFloat(o.data(), bf, size_t(i))));
  };

  for (int step = 0; step < 3; ++step) {
    newStep(step);
    ASSERT_TRUE(one->run(st).ok());
    Status r = two->run(st);
    ASSERT_TRUE(r.ok()) << r.toString();
    ASSERT_TRUE(dev->synchronize(st).ok());
    expectSame("eager", step);
  }
  ASSERT_TRUE(one->captureGraph(st).ok());
  Status cap = two->captureGraph(st);
  ASSERT_TRUE(cap.ok()) << cap.toString();
  for (int step = 3; step < 6; ++step) {
    newStep(step);
    ASSERT_TRUE(one->runGraph(st).ok());
    Status r = two->runGraph(st);
    ASSERT_TRUE(r.ok()) << r.toString();
    expectSame("graph", step);
  }

  // A bad slot on the side stream: reported by the joined replay, nothing
  // written.
  newStep(6);
  std::vector<int64_t> bad(T, 3);
  bad[5] = 8 * 16;
  slots.setI64(bad);
  slots.up(dev);
  ASSERT_TRUE(dev->synchronize().ok());
  std::vector<uint8_t> before = cacheBytes(*cache2);
  EXPECT_EQ(two->runGraph(st).code(), StatusCode::OutOfRange);
  EXPECT_EQ(cacheBytes(*cache2), before);
  EXPECT_EQ(two->run(st).code(), StatusCode::OutOfRange);
  EXPECT_EQ(cacheBytes(*cache2), before);
}
