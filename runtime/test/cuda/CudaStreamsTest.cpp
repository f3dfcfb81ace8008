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

/// The two-branch step's inputs, weights, two outputs and two caches on
/// the device: executor 1 writes out1 / cache1, executor 2 out2 / cache2.
struct TwoBranchRig {
  explicit TwoBranchRig(CudaDevice *dev) : dev(dev) {
    for (Arr *a : {&wNorm, &wQ, &wKv, &wKvNorm, &wO}) {
      a->random(-0.2f, 0.2f);
      a->up(dev);
    }
    for (StatusOr<KVCache> *c : {&cache1, &cache2}) {
      EXPECT_TRUE(c->ok());
      if (c->ok())
        EXPECT_TRUE(dev->memset((*c)->data(), 0, (*c)->sizeBytes()).ok());
    }
  }
  /// An executor of the step with `streams` streams, bound to out1/cache1
  /// (which = 1) or out2/cache2.
  StatusOr<Executor> executor(int which, int streams) {
    MLART_ASSIGN_OR_RETURN(Executor e, Executor::create(twoBranchStep(), *dev));
    e.setMaxStreams(streams);
    Arr &out = which == 1 ? out1 : out2;
    KVCache &cache = which == 1 ? *cache1 : *cache2;
    for (auto [name, arr] : {std::pair<const char *, Arr *>{"x", &x},
                             {"slot_mapping", &slots},
                             {"w_norm", &wNorm},
                             {"w_q", &wQ},
                             {"w_kv", &wKv},
                             {"w_kv_norm", &wKvNorm},
                             {"w_o", &wO},
                             {"out", &out}})
      MLART_RETURN_IF_ERROR(e.bind(name, arr->d()));
    MLART_RETURN_IF_ERROR(e.bindCache("kv_cache", cache));
    return e;
  }
  /// Fresh x and slots (one of them -1) for `step`; both outputs poisoned.
  void newStep(int step) {
    x.random();
    std::vector<int64_t> s(T);
    for (int64_t t = 0; t < T; ++t)
      s[size_t(t)] = (t * 7 + step * 16) % (8 * 16);
    s[size_t(step % T)] = -1;
    slots.setI64(s);
    x.up(dev);
    slots.up(dev);
    poisonOutputs();
  }
  void poisonOutputs() {
    out1.poison();
    out2.poison();
    out1.up(dev);
    out2.up(dev);
    ASSERT_TRUE(dev->synchronize().ok());
  }
  /// Outputs and caches of the two executors are bit-identical, and the
  /// output is a real result, not poison.
  void expectSame(const char *what, int step) {
    EXPECT_EQ(out1.down(dev), out2.down(dev)) << what << " step " << step;
    EXPECT_EQ(cacheBytes(*cache1), cacheBytes(*cache2))
        << what << " step " << step;
    std::vector<uint8_t> o = out2.down(dev);
    for (int64_t i = 0; i < T * HID; ++i)
      ASSERT_FALSE(std::isnan(loadAsFloat(o.data(), DType::BF16, size_t(i))));
  }

  CudaDevice *dev;
  const DType bf = DType::BF16;
  Arr x{dev, bf, {T, HID}}, slots{dev, DType::I64, {T}}, wNorm{dev, bf, {HID}},
      wQ{dev, bf, {QN, HID}}, wKv{dev, bf, {LAT + ROPE, HID}},
      wKvNorm{dev, bf, {LAT}}, wO{dev, bf, {HID, QN}}, out1{dev, bf, {T, HID}},
      out2{dev, bf, {T, HID}};
  StatusOr<KVCache> cache1 = KVCache::create(*dev, streamsCacheDesc());
  StatusOr<KVCache> cache2 = KVCache::create(*dev, streamsCacheDesc());
};

} // namespace

TEST(CudaStreams, TwoStreamsMatchOneStreamBitForBit) {
  REQUIRE_GPU();
  TwoBranchRig rig(dev);
  StatusOr<Executor> one = rig.executor(1, 1);
  StatusOr<Executor> two = rig.executor(2, 2);
  ASSERT_TRUE(one.ok()) << one.status().toString();
  ASSERT_TRUE(two.ok()) << two.status().toString();

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
  for (int step = 0; step < 3; ++step) {
    rig.newStep(step);
    ASSERT_TRUE(one->run(st).ok());
    Status r = two->run(st);
    ASSERT_TRUE(r.ok()) << r.toString();
    ASSERT_TRUE(dev->synchronize(st).ok());
    rig.expectSame("eager", step);
  }
  ASSERT_TRUE(one->captureGraph(st).ok());
  Status cap = two->captureGraph(st);
  ASSERT_TRUE(cap.ok()) << cap.toString();
  for (int step = 3; step < 6; ++step) {
    rig.newStep(step);
    ASSERT_TRUE(one->runGraph(st).ok());
    Status r = two->runGraph(st);
    ASSERT_TRUE(r.ok()) << r.toString();
    rig.expectSame("graph", step);
  }

  // A bad slot on the side stream: reported by the joined replay, nothing
  // written.
  rig.newStep(6);
  std::vector<int64_t> bad(T, 3);
  bad[5] = 8 * 16;
  rig.slots.setI64(bad);
  rig.slots.up(dev);
  ASSERT_TRUE(dev->synchronize().ok());
  std::vector<uint8_t> before = cacheBytes(*rig.cache2);
  EXPECT_EQ(two->runGraph(st).code(), StatusCode::OutOfRange);
  EXPECT_EQ(cacheBytes(*rig.cache2), before);
  EXPECT_EQ(two->run(st).code(), StatusCode::OutOfRange);
  EXPECT_EQ(cacheBytes(*rig.cache2), before);
}

// tuneGraph picks each GEMM's cuBLASLt algorithm by replaying the whole
// two-stream step; the choice then holds for every call of that shape, so
// the tuned graph and an eager one-stream run of the same shapes agree bit
// for bit, over fresh steps. A choice outside the candidates is refused.
TEST(CudaStreams, TuneGraphChoosesEveryLinearInContext) {
  REQUIRE_GPU();
  TwoBranchRig rig(dev);
  StatusOr<Executor> one = rig.executor(1, 1);
  StatusOr<Executor> two = rig.executor(2, 2);
  ASSERT_TRUE(one.ok() && two.ok());
  StatusOr<Stream> stream = dev->createStream();
  ASSERT_TRUE(stream.ok());
  StreamHandle st = stream->handle();
  // Step 0 eagerly on both (loads cuBLAS, warms the allocator). The tuning
  // replays step 0 into cache 2 with every candidate, so step 0 runs again
  // on both once the choices are made.
  rig.newStep(0);
  ASSERT_TRUE(one->run(st).ok());
  ASSERT_TRUE(two->run(st).ok());

  EXPECT_EQ(two->tuneGraph(nullptr).status().code(),
            StatusCode::InvalidArgument);
  EXPECT_EQ(two->tuneGraph(st, 0).status().code(), StatusCode::InvalidArgument);
  StatusOr<std::vector<Executor::GemmChoice>> choices = two->tuneGraph(st, 3);
  ASSERT_TRUE(choices.ok()) << choices.status().toString();
  // cuBLASLt offers several algorithms for these bf16 shapes; the three
  // linears (q_proj, kv_a, o_proj) have different shapes.
  ASSERT_FALSE(choices->empty());
  const std::vector<Instruction> &program = two->artifact().instructions();
  for (const Executor::GemmChoice &c : *choices) {
    ASSERT_LT(c.instruction, program.size());
    EXPECT_EQ(program[c.instruction].opcode, Opcode::Linear);
    EXPECT_GT(c.candidates, 1);
    EXPECT_GE(c.chosen, 0);
    EXPECT_LT(c.chosen, c.candidates);
    EXPECT_TRUE(std::isfinite(c.microseconds) && c.microseconds > 0.0);
    std::printf("linear #%zu: %d candidates, chose %d, %.2f us a step\n",
                c.instruction, c.candidates, c.chosen, c.microseconds);
  }
  ASSERT_TRUE(two->hasGraph());

  for (int step = 0; step < 4; ++step) {
    if (step > 0)
      rig.newStep(step);
    else
      rig.poisonOutputs(); // step 0's inputs again
    ASSERT_TRUE(one->run(st).ok());
    Status r = two->runGraph(st);
    ASSERT_TRUE(r.ok()) << r.toString();
    rig.expectSame("tuned graph", step);
  }

  // The device refuses an index outside the shape's candidates.
  Arr q(dev, DType::BF16, {T, QN});
  const LinearArgs a{rig.x.d(), rig.wQ.d(), q.d()};
  StatusOr<int> n = dev->linearAlgorithmCount(a);
  ASSERT_TRUE(n.ok()) << n.status().toString();
  EXPECT_EQ(dev->chooseLinearAlgorithm(a, *n).code(), StatusCode::OutOfRange);
  EXPECT_EQ(dev->chooseLinearAlgorithm(a, -1).code(), StatusCode::OutOfRange);
}
