//===- ConcurrencyTest.cpp - Executors of one device on several threads ---===//
//
// docs/runtime.md, "Thread safety": a Device and a loaded Artifact may be
// shared by any number of threads; an Executor belongs to one thread at a
// time, and steps that run at once may share a KVCache only where they
// touch disjoint blocks. These tests do exactly that on threads and compare
// every output and cache byte with the same work done one caller after the
// other. CI also runs them under ThreadSanitizer (scripts/tsan.sh), which
// reports any unsynchronised access of the runtime's own state.
//
//===----------------------------------------------------------------------===//
#include "DecodeLayerFixture.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <thread>

namespace mlart {
namespace {

using namespace test::decode_layer;
using test::HostTensor;

constexpr int kSteps = 2;

/// What one caller (an engine's worker thread) runs: its own inputs and
/// metadata, a block table into the cache it is given, kSteps decode steps.
struct Caller {
  explicit Caller(std::mt19937 &rng) : data(rng) {}
  LayerData data;
  /// Out after each step.
  std::vector<std::vector<uint8_t>> outs;
  Status status = Status::success();
};

/// `count` callers with random inputs from `seed`, each with two requests
/// of contexts 1 and 5 in three blocks of four (room for kSteps more
/// tokens): blocks [1, 4) for every caller, or with `disjointBlocks` caller
/// `i`'s own blocks [1 + 3i, 4 + 3i) of one shared cache.
std::vector<std::unique_ptr<Caller>> makeCallers(int count, uint32_t seed,
                                                 bool disjointBlocks) {
  std::mt19937 rng(seed);
  std::vector<std::unique_ptr<Caller>> callers;
  for (int i = 0; i < count; ++i) {
    auto c = std::make_unique<Caller>(rng);
    const int32_t first = disjointBlocks ? 1 + 3 * i : 1;
    const int32_t table[T][MAX_BLOCKS] = {{first, 0, 0, 0},
                                          {first + 1, first + 2, 0, 0}};
    std::memcpy(c->data.blockTable.bytes.data(), table, sizeof(table));
    c->data.contextLens = {1, 5};
    c->data.setStep();
    callers.push_back(std::move(c));
  }
  return callers;
}

/// One caller's whole run: an executor made from the shared artifact, the
/// shared weights bound next to the caller's own buffers, kSteps steps.
/// Only runtime calls, so that a thread runs nothing else at once.
void runCaller(const Artifact &artifact, Device &device,
               const LayerData &weights, KVCache &cache, Caller &caller) {
  auto fail = [&](Status s) { caller.status = std::move(s); };
  StatusOr<Executor> exec = Executor::create(artifact, device);
  if (!exec.ok())
    return fail(exec.status());
  LayerData &data = caller.data;
  Status s = data.bindAll(*exec);
  const std::pair<const char *, const HostTensor *> shared[] = {
      {"w_norm", &weights.wNorm}, {"w_q", &weights.wQ},
      {"w_kv_a", &weights.wKva},  {"w_kv_norm", &weights.wKvNorm},
      {"w_uk", &weights.wUK},     {"w_uv", &weights.wUV},
      {"w_o", &weights.wO},       {"cos_sin", &weights.cosSin}};
  for (const auto &[name, t] : shared)
    if (s.ok())
      s = exec->bind(name, t->ref);
  if (s.ok())
    s = exec->bindCache("kv_cache", cache);
  for (int step = 0; step < kSteps && s.ok(); ++step) {
    if (step > 0) {
      // The caller's next token: new inputs in the same bound memory.
      for (int64_t &len : data.contextLens)
        ++len;
      data.setStep();
    }
    s = exec->run();
    caller.outs.push_back(data.out.bytes);
  }
  fail(std::move(s));
}

/// Runs every caller on its own thread, released together so that their
/// steps overlap, over cache `cacheOf(i)`.
template <typename CacheOf>
void runOnThreads(const Artifact &artifact, Device &device,
                  const LayerData &weights,
                  std::vector<std::unique_ptr<Caller>> &callers,
                  CacheOf cacheOf) {
  std::atomic<size_t> waiting{callers.size()};
  std::vector<std::thread> threads;
  threads.reserve(callers.size());
  for (size_t i = 0; i < callers.size(); ++i)
    threads.emplace_back([&, i] {
      waiting.fetch_sub(1);
      while (waiting.load() != 0)
        std::this_thread::yield();
      runCaller(artifact, device, weights, cacheOf(i), *callers[i]);
    });
  for (std::thread &t : threads)
    t.join();
}

/// A cache whose every row holds random bf16 values from `seed`, so that
/// attention reads context that the step did not write.
KVCache randomCache(Device &device, uint32_t seed) {
  StatusOr<KVCache> cache = KVCache::create(device, cacheDesc());
  EXPECT_TRUE(cache.ok()) << cache.status().toString();
  std::mt19937 rng(seed);
  HostTensor rows(DType::BF16, {BLOCKS * BLOCK, ROW});
  test::fillRandom(rows, rng);
  EXPECT_TRUE(cache->writeBytes(0, rows.bytes.data(), cache->sizeBytes()).ok());
  return std::move(*cache);
}

class Concurrency : public ::testing::Test {
protected:
  void SetUp() override {
    device = createCpuDevice();
    Arena ar;
    StatusOr<std::vector<uint8_t>> bytes = decodeLayer(false, ar).finish();
    ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
    StatusOr<Artifact> a = Artifact::load(bytes->data(), bytes->size());
    ASSERT_TRUE(a.ok()) << a.status().toString();
    artifact.emplace(std::move(*a));
  }

  /// What each caller's steps give when the callers run one after the
  /// other, each over `cacheOf(i)`.
  template <typename CacheOf>
  void runSerially(std::vector<std::unique_ptr<Caller>> &callers,
                   CacheOf cacheOf) {
    for (size_t i = 0; i < callers.size(); ++i)
      runCaller(*artifact, *device, weights, cacheOf(i), *callers[i]);
  }

  std::unique_ptr<Device> device;
  std::optional<Artifact> artifact;
  std::mt19937 rng{2024};
  LayerData weights{rng};
};

void expectSameOutputs(const std::vector<std::unique_ptr<Caller>> &threaded,
                       const std::vector<std::unique_ptr<Caller>> &serial) {
  ASSERT_EQ(threaded.size(), serial.size());
  for (size_t i = 0; i < threaded.size(); ++i) {
    ASSERT_TRUE(threaded[i]->status.ok())
        << "caller " << i << ": " << threaded[i]->status.toString();
    ASSERT_TRUE(serial[i]->status.ok()) << serial[i]->status.toString();
    ASSERT_EQ(threaded[i]->outs.size(), size_t(kSteps));
    EXPECT_EQ(threaded[i]->outs, serial[i]->outs) << "caller " << i;
  }
  // Different callers computed different things (the comparison above
  // would hold trivially if every caller's output were the same).
  EXPECT_NE(serial[0]->outs, serial[1]->outs);
}

TEST_F(Concurrency, ExecutorsOnThreadsOverTheirOwnCachesMatchSerialRuns) {
  constexpr int kCallers = 4;
  const uint64_t baseline = device->bytesAllocated();
  std::vector<KVCache> caches, serialCaches;
  for (int i = 0; i < kCallers; ++i) {
    caches.push_back(randomCache(*device, 100 + i));
    serialCaches.push_back(randomCache(*device, 100 + i));
  }
  auto threaded = makeCallers(kCallers, 7, /*disjointBlocks=*/false);
  auto serial = makeCallers(kCallers, 7, /*disjointBlocks=*/false);
  runOnThreads(*artifact, *device, weights, threaded,
               [&](size_t i) -> KVCache & { return caches[i]; });
  runSerially(serial, [&](size_t i) -> KVCache & { return serialCaches[i]; });

  expectSameOutputs(threaded, serial);
  for (int i = 0; i < kCallers; ++i)
    EXPECT_EQ(test::cacheBytes(caches[size_t(i)]),
              test::cacheBytes(serialCaches[size_t(i)]))
        << "caller " << i;
  // Every executor's arena went back to the device, whichever thread
  // allocated and freed it.
  caches.clear();
  serialCaches.clear();
  EXPECT_EQ(device->bytesAllocated(), baseline);
}

TEST_F(Concurrency, TwoExecutorsOnOneCacheWithDisjointBlocksMatchSerialRuns) {
  KVCache shared = randomCache(*device, 5);
  KVCache serialShared = randomCache(*device, 5);
  const std::vector<uint8_t> before = test::cacheBytes(shared);
  static_assert(1 + 3 * 2 <= BLOCKS, "two callers' blocks fit");
  auto threaded = makeCallers(2, 9, /*disjointBlocks=*/true);
  auto serial = makeCallers(2, 9, /*disjointBlocks=*/true);
  runOnThreads(*artifact, *device, weights, threaded,
               [&](size_t) -> KVCache & { return shared; });
  runSerially(serial, [&](size_t) -> KVCache & { return serialShared; });

  expectSameOutputs(threaded, serial);
  EXPECT_EQ(test::cacheBytes(shared), test::cacheBytes(serialShared));
  EXPECT_NE(test::cacheBytes(shared), before) << "both callers wrote rows";
}

} // namespace
} // namespace mlart
