//===- CacheKernelsBench.cpp - Throughput of the CPU cache-write kernels --===//
//
// Bytes per token follow docs/DESIGN numbers: read kv_c + k_pe, write one
// row, read one slot. Run: mlart-bench-cpu --benchmark_filter=CacheUpdate
//
//===----------------------------------------------------------------------===//
#include "mlart/Device.h"
#include "mlart/KVCache.h"

#include <benchmark/benchmark.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

using namespace mlart;

namespace {

constexpr int64_t kLatent = 512, kRope = 64, kBlockSize = 64, kBlocks = 256;
constexpr int64_t kMaxPos = 4096;

/// Inputs and a cache for one benchmark configuration.
struct Setup {
  std::unique_ptr<Device> dev = createCpuDevice();
  KVCacheDesc desc;
  std::unique_ptr<KVCache> cache;
  std::vector<uint16_t> kvC, kPe, qPe;
  std::vector<int64_t> slots, positions;
  std::vector<float> cosSin;

  Setup(CacheLayout layout, int64_t tokens, int64_t qHeads = 0) {
    desc.numBlocks = kBlocks;
    desc.blockSize = kBlockSize;
    desc.latentRank = kLatent;
    desc.ropeDim = kRope;
    desc.layout = layout;
    desc.dtype = layout == CacheLayout::Plain ? DType::BF16 : DType::F8E4M3FN;
    cache = std::make_unique<KVCache>(
        std::move(KVCache::create(*dev, desc, 0.1f).value()));
    std::mt19937 rng(1);
    std::normal_distribution<float> dist;
    auto fill = [&](std::vector<uint16_t> &v, int64_t n) {
      v.resize(static_cast<size_t>(n));
      for (auto &x : v)
        x = floatToBf16(dist(rng));
    };
    fill(kvC, tokens * kLatent);
    fill(kPe, tokens * kRope);
    fill(qPe, tokens * qHeads * kRope);
    // Scattered, distinct slots, like a batch of decode requests.
    std::vector<int64_t> all(static_cast<size_t>(desc.numSlots()));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    slots.assign(all.begin(), all.begin() + tokens);
    positions.resize(static_cast<size_t>(tokens));
    for (auto &p : positions)
      p = int64_t(rng() % kMaxPos);
    cosSin = ropeCosSinTable(kMaxPos, kRope);
  }

  CacheUpdateArgs updateArgs() {
    const int64_t t = int64_t(slots.size());
    return {TensorRef::contiguous(kvC.data(), DType::BF16, {t, kLatent}),
            TensorRef::contiguous(kPe.data(), DType::BF16, {t, kRope}),
            TensorRef::contiguous(slots.data(), DType::I64, {t}),
            cache->ref()};
  }
};

void reportBytes(benchmark::State &state, int64_t tokens,
                 const KVCacheDesc &desc) {
  const int64_t perToken = (kLatent + kRope) * 2 + desc.rowBytes() + 8;
  state.SetBytesProcessed(int64_t(state.iterations()) * tokens * perToken);
  state.SetItemsProcessed(int64_t(state.iterations()) * tokens);
}

void runCacheUpdate(benchmark::State &state, CacheLayout layout) {
  const int64_t tokens = state.range(0);
  Setup s(layout, tokens);
  const CacheUpdateArgs args = s.updateArgs();
  for (auto _ : state) {
    Status st = s.dev->kernels().cacheUpdate(args, nullptr);
    benchmark::DoNotOptimize(st);
    benchmark::ClobberMemory();
  }
  reportBytes(state, tokens, s.desc);
}

void BM_CacheUpdatePlainBf16(benchmark::State &state) {
  runCacheUpdate(state, CacheLayout::Plain);
}
void BM_CacheUpdateFp8PerTensor(benchmark::State &state) {
  runCacheUpdate(state, CacheLayout::Fp8PerTensor);
}
void BM_CacheUpdateFp8DsMla(benchmark::State &state) {
  runCacheUpdate(state, CacheLayout::Fp8DsMla);
}

/// Fused rope + update with 128 q heads (DeepSeek-V3 shape). Rotating in
/// place repeatedly is fine for timing: the values stay bounded.
void BM_RopeCacheUpdateBf16(benchmark::State &state) {
  const int64_t tokens = state.range(0), heads = 128;
  Setup s(CacheLayout::Plain, tokens, heads);
  RopeCacheUpdateArgs args;
  const CacheUpdateArgs u = s.updateArgs();
  args.kvC = u.kvC;
  args.kPe = u.kPe;
  args.slotMapping = u.slotMapping;
  args.cache = u.cache;
  args.positions =
      TensorRef::contiguous(s.positions.data(), DType::I64, {tokens});
  args.cosSin =
      TensorRef::contiguous(s.cosSin.data(), DType::F32, {kMaxPos, kRope});
  args.qPe = TensorRef::contiguous(s.qPe.data(), DType::BF16,
                                   {tokens, heads, kRope});
  for (auto _ : state) {
    Status st = s.dev->kernels().ropeCacheUpdate(args, nullptr);
    benchmark::DoNotOptimize(st);
    benchmark::ClobberMemory();
  }
  reportBytes(state, tokens, s.desc);
}

} // namespace

BENCHMARK(BM_CacheUpdatePlainBf16)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(BM_CacheUpdateFp8PerTensor)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(BM_CacheUpdateFp8DsMla)->Arg(1)->Arg(64)->Arg(1024);
BENCHMARK(BM_RopeCacheUpdateBf16)->Arg(1)->Arg(64)->Arg(1024);

BENCHMARK_MAIN();
