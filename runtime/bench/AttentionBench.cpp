//===- AttentionBench.cpp - Timings of the CPU reference kernels ----------===//
//
// The CPU kernels are references, not production paths; these numbers tell
// how large a problem a test or a CPU fallback run can afford, and catch
// accidental slowdowns (a lost vectorised loop, a per-element dtype switch).
//
//===----------------------------------------------------------------------===//
#include "cpu/CpuKernels.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

using namespace mlart;

namespace {

/// A bf16 buffer of uniform values in [-1, 1) and its contiguous view.
struct Bf16Buffer {
  Bf16Buffer(std::vector<int64_t> sizes, std::mt19937 &rng) {
    int64_t n = 1;
    for (int64_t s : sizes)
      n *= s;
    bits.resize(static_cast<size_t>(n));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (uint16_t &b : bits)
      b = floatToBf16(dist(rng));
    ref.data = bits.data();
    ref.dtype = DType::BF16;
    ref.rank = int(sizes.size());
    int64_t stride = 1;
    for (int d = ref.rank - 1; d >= 0; --d) {
      ref.sizes[d] = sizes[d];
      ref.strides[d] = stride;
      stride *= sizes[d];
    }
  }
  std::vector<uint16_t> bits;
  TensorRef ref;
};

TensorRef i32View(std::vector<int32_t> &v,
                  std::initializer_list<int64_t> sizes) {
  return TensorRef::contiguous(v.data(), DType::I32, sizes);
}

// Args: heads, batch, sequence length. bf16 cache with 64-token pages.
void BM_DecodeAttention(benchmark::State &state) {
  const int64_t heads = state.range(0), batch = state.range(1);
  const int64_t len = state.range(2), blockSize = 64;
  const int64_t pages = (len + blockSize - 1) / blockSize;
  std::mt19937 rng(1);
  KVCacheRef cache;
  cache.desc.numBlocks = batch * pages;
  cache.desc.blockSize = blockSize;
  Bf16Buffer cacheData({cache.desc.numSlots(), cache.desc.rowValues()}, rng);
  cache.data = cacheData.bits.data();
  std::vector<int32_t> table(static_cast<size_t>(batch * pages));
  for (size_t i = 0; i < table.size(); ++i)
    table[i] = int32_t(i);
  std::vector<int32_t> lens(static_cast<size_t>(batch), int32_t(len));
  Bf16Buffer q({batch, heads, 576}, rng), out({batch, heads, 512}, rng);

  DecodeAttentionArgs a;
  a.q = q.ref;
  a.cache = cache;
  a.blockTable = i32View(table, {batch, pages});
  a.seqLens = i32View(lens, {batch});
  a.softmaxScale = 0.0722f;
  a.out = out.ref;
  for (auto _ : state) {
    Status s = cpu::decodeAttention(a);
    if (!s.ok())
      state.SkipWithError(s.toString().c_str());
  }
  // Cache rows read per second, the quantity decode is bound by on a GPU.
  state.SetItemsProcessed(state.iterations() * batch * len);
}
BENCHMARK(BM_DecodeAttention)
    ->ArgNames({"H", "B", "L"})
    ->ArgsProduct({{16, 128}, {1, 8}, {1024, 4096}})
    ->Unit(benchmark::kMillisecond);

// Args: new tokens, context tokens; one request, DeepSeek head sizes.
void BM_PrefillAttention(benchmark::State &state) {
  const int64_t tokens = state.range(0), context = state.range(1);
  const int64_t heads = 16, nope = 128, rope = 64, vDim = 128, latent = 512;
  const int64_t blockSize = 64;
  std::mt19937 rng(2);
  Bf16Buffer q({tokens, heads, nope + rope}, rng);
  Bf16Buffer k({tokens, heads, nope + rope}, rng);
  Bf16Buffer v({tokens, heads, vDim}, rng), out({tokens, heads, vDim}, rng);
  std::vector<int32_t> starts{0, int32_t(tokens)};
  PrefillAttentionArgs a;
  a.q = q.ref;
  a.k = k.ref;
  a.v = v.ref;
  a.queryStartLoc = i32View(starts, {2});
  a.softmaxScale = 0.0722f;
  a.out = out.ref;

  const int64_t pages =
      std::max<int64_t>(1, (context + blockSize - 1) / blockSize);
  Bf16Buffer cacheData({pages * blockSize, latent + rope}, rng);
  Bf16Buffer wUK({heads, nope, latent}, rng), wUV({heads, latent, vDim}, rng);
  std::vector<int32_t> table(static_cast<size_t>(pages)),
      ctxLens{int32_t(context)};
  for (size_t i = 0; i < table.size(); ++i)
    table[i] = int32_t(i);
  if (context > 0) {
    a.cache.desc.numBlocks = pages;
    a.cache.desc.blockSize = blockSize;
    a.cache.data = cacheData.bits.data();
    a.blockTable = i32View(table, {1, pages});
    a.contextLens = i32View(ctxLens, {1});
    a.wUK = wUK.ref;
    a.wUV = wUV.ref;
  }
  for (auto _ : state) {
    Status s = cpu::prefillAttention(a);
    if (!s.ok())
      state.SkipWithError(s.toString().c_str());
  }
  state.SetItemsProcessed(state.iterations() * tokens);
}
BENCHMARK(BM_PrefillAttention)
    ->ArgNames({"T", "ctx"})
    ->Args({256, 0})
    ->Args({1024, 0})
    ->Args({256, 1024})
    ->Unit(benchmark::kMillisecond);

// Args: tokens, in features, out features (DeepSeek-V2-Lite's q projection
// and the first dense MLP matrix).
void BM_Linear(benchmark::State &state) {
  const int64_t tokens = state.range(0), k = state.range(1), n = state.range(2);
  std::mt19937 rng(3);
  Bf16Buffer x({tokens, k}, rng), w({n, k}, rng), out({tokens, n}, rng);
  for (auto _ : state) {
    Status s = cpu::linear({x.ref, w.ref, out.ref});
    if (!s.ok())
      state.SkipWithError(s.toString().c_str());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      double(2 * tokens * k * n) * double(state.iterations()),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Linear)
    ->ArgNames({"T", "K", "N"})
    ->Args({1, 2048, 3072})
    ->Args({64, 2048, 3072})
    ->Args({16, 2048, 10944})
    ->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
