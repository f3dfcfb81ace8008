//===- StreamPlanTest.cpp - Overlap tests and the stream planner ----------===//
#include "mlart/StreamPlan.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>

using namespace mlart;

namespace {

/// A view of `sizes` with `strides` (elements) at element `offset` of a
/// bf16 array at address `base`.
TensorRef view(uintptr_t base, int64_t offset, std::vector<int64_t> sizes,
               std::vector<int64_t> strides, DType dt = DType::BF16) {
  TensorRef t;
  t.data = reinterpret_cast<void *>(base + uintptr_t(offset) * dtypeSize(dt));
  t.dtype = dt;
  t.rank = int(sizes.size());
  for (int d = 0; d < t.rank; ++d) {
    t.sizes[d] = sizes[size_t(d)];
    t.strides[d] = strides[size_t(d)];
  }
  return t;
}

MemoryAccess rd(const TensorRef &t) { return MemoryAccess::ofView(t, false); }
MemoryAccess wr(const TensorRef &t) { return MemoryAccess::ofView(t, true); }

constexpr uintptr_t kBase = 0x100000;

} // namespace

TEST(StreamPlanOverlap, ColumnRangesOfOneTensorAreDisjoint) {
  // The assembled decode query [64, 16, 576]: q_absorb writes columns
  // [0, 512) of every head, the rope kernel columns [512, 576).
  const std::vector<int64_t> st = {16 * 576, 576, 1};
  TensorRef nope = view(kBase, 0, {64, 16, 512}, st);
  TensorRef rope = view(kBase, 512, {64, 16, 64}, st);
  EXPECT_FALSE(mayOverlap(wr(nope), wr(rope)));
  EXPECT_FALSE(mayOverlap(wr(rope), wr(nope)));
  // One column more and they share column 512.
  TensorRef wider = view(kBase, 0, {64, 16, 513}, st);
  EXPECT_TRUE(mayOverlap(wr(wider), wr(rope)));
  // The same column range of different heads: disjoint in dimension 1.
  TensorRef headsLow = view(kBase, 0, {64, 8, 576}, st);
  TensorRef headsHigh = view(kBase, 8 * 576, {64, 8, 576}, st);
  EXPECT_FALSE(mayOverlap(wr(headsLow), rd(headsHigh)));
  TensorRef headsMid = view(kBase, 7 * 576, {64, 8, 576}, st);
  EXPECT_TRUE(mayOverlap(wr(headsLow), rd(headsMid)));
}

TEST(StreamPlanOverlap, SlicesOfAFusedProjectionOfDifferentRanks) {
  // q_proj and kv_a_proj as one GEMM output [64, 3648]: the q heads
  // [64, 16, 192] in columns [0, 3072), kv_c [3072, 3584), k_pe [3584, 3648).
  const int64_t pitch = 3648;
  TensorRef qNope = view(kBase, 0, {64, 16, 128}, {pitch, 192, 1});
  TensorRef qPe = view(kBase, 128, {64, 16, 64}, {pitch, 192, 1});
  TensorRef kvC = view(kBase, 3072, {64, 512}, {pitch, 1});
  TensorRef kPe = view(kBase, 3584, {64, 64}, {pitch, 1});
  // The update rotates k_pe in place while q_absorb reads the q heads.
  EXPECT_FALSE(mayOverlap(wr(kPe), rd(qNope)));
  EXPECT_FALSE(mayOverlap(rd(qPe), wr(kPe)));
  EXPECT_FALSE(mayOverlap(wr(kvC), wr(kPe)));
  // One column to the left and k_pe's window meets kv_c's last column.
  TensorRef kPeShifted = view(kBase, 3583, {64, 64}, {pitch, 1});
  EXPECT_TRUE(mayOverlap(wr(kPeShifted), rd(kvC)));
  // q_pe's row window holds q_nope's later heads, but with one set of
  // strides the box test still separates them element by element.
  EXPECT_FALSE(mayOverlap(wr(qPe), rd(qNope)));
  // Of different ranks, intersecting windows are answered conservatively.
  TensorRef qPeFlat = view(kBase, 128, {64, 64}, {pitch, 1});
  EXPECT_TRUE(mayOverlap(wr(qPeFlat), rd(qNope)));
  // A window that wraps into the next row proves nothing.
  TensorRef wraps = view(kBase, 3600, {63, 64}, {pitch, 1});
  EXPECT_TRUE(mayOverlap(wr(wraps), rd(qNope)));
  // Different pitches: no common row lattice.
  TensorRef otherPitch = view(kBase, 3584, {64, 64}, {pitch + 64, 1});
  EXPECT_TRUE(mayOverlap(wr(otherPitch), rd(qNope)));
}

TEST(StreamPlanOverlap, IntervalsAndConservativeCases) {
  // Disjoint byte ranges.
  TensorRef a = view(kBase, 0, {8, 64}, {64, 1});
  TensorRef b = view(kBase, 8 * 64, {8, 64}, {64, 1});
  EXPECT_FALSE(mayOverlap(wr(a), wr(b)));
  // Same memory as another dtype: intervals meet, no box argument.
  TensorRef asF32 = view(kBase, 0, {8, 32}, {32, 1}, DType::F32);
  EXPECT_TRUE(mayOverlap(wr(asF32), rd(a)));
  // Interleaved columns (even vs odd) never touch, but the offset is not on
  // the common lattice: answered conservatively.
  TensorRef even = view(kBase, 0, {8, 32}, {64, 2});
  TensorRef odd = view(kBase, 1, {8, 32}, {64, 2});
  EXPECT_TRUE(mayOverlap(rd(even), wr(odd)));
  // Strides that do not nest (rows overlap each other): conservative.
  TensorRef sliding = view(kBase, 0, {8, 64}, {32, 1});
  TensorRef sliding2 = view(kBase, 48, {8, 16}, {32, 1});
  EXPECT_TRUE(mayOverlap(rd(sliding), wr(sliding2)));
  // Empty views touch nothing.
  TensorRef empty = view(kBase, 0, {0, 64}, {64, 1});
  EXPECT_FALSE(mayOverlap(wr(empty), wr(a)));
  // Opaque intervals.
  EXPECT_TRUE(mayOverlap(MemoryAccess::ofInterval(0, 1, true),
                         MemoryAccess::ofInterval(0, 1, true)));
  EXPECT_FALSE(mayOverlap(MemoryAccess::ofInterval(0, 1, true), wr(a)));
  EXPECT_TRUE(mayOverlap(MemoryAccess::ofInterval(kBase + 10, kBase + 11,
                                                  false),
                         wr(a)));
}

TEST(StreamPlanOverlap, ReadsNeverOrder) {
  TensorRef a = view(kBase, 0, {8, 64}, {64, 1});
  EXPECT_FALSE(mustFollow({rd(a)}, {rd(a)}));
  EXPECT_TRUE(mustFollow({rd(a)}, {wr(a)}));
  EXPECT_TRUE(mustFollow({wr(a)}, {rd(a)}));
}

namespace {

/// The V2-Lite decode step's instruction shape, with small buffers at
/// distinct addresses: x -> norm -> {q_proj, kv_a}; kv_a -> norm(kv_c);
/// rope_cache_update(kv_c norm, k_pe, q_pe) -> cache, query[.., 512:];
/// q_absorb(q_nope) -> query[.., :512]; decode(query, cache) -> o;
/// v_up, o_proj, add.
std::vector<std::vector<MemoryAccess>> decodeStepAccesses() {
  uintptr_t next = kBase;
  auto buffer = [&](int64_t elements) {
    uintptr_t at = next;
    next += uintptr_t(elements) * 2 + 256;
    return at;
  };
  const uintptr_t x = buffer(64 * 2048), h = buffer(64 * 2048),
                  q = buffer(64 * 3072), kv = buffer(64 * 576),
                  kvn = buffer(64 * 512), query = buffer(64 * 16 * 576),
                  o = buffer(64 * 16 * 512), v = buffer(64 * 2048),
                  proj = buffer(64 * 2048), out = buffer(64 * 2048),
                  weights = buffer(1 << 20), cache = buffer(1 << 20);
  const uintptr_t record = 0;
  TensorRef X = view(x, 0, {64, 2048}, {2048, 1});
  TensorRef H = view(h, 0, {64, 2048}, {2048, 1});
  TensorRef Q = view(q, 0, {64, 3072}, {3072, 1});
  TensorRef qNope = view(q, 0, {64, 16, 128}, {3072, 192, 1});
  TensorRef qPe = view(q, 128, {64, 16, 64}, {3072, 192, 1});
  TensorRef KV = view(kv, 0, {64, 576}, {576, 1});
  TensorRef kvC = view(kv, 0, {64, 512}, {576, 1});
  TensorRef kPe = view(kv, 512, {64, 64}, {576, 1});
  TensorRef KVN = view(kvn, 0, {64, 512}, {512, 1});
  TensorRef Query = view(query, 0, {64, 16, 576}, {16 * 576, 576, 1});
  TensorRef qAbs = view(query, 0, {64, 16, 512}, {16 * 576, 576, 1});
  TensorRef qRot = view(query, 512, {64, 16, 64}, {16 * 576, 576, 1});
  TensorRef O = view(o, 0, {64, 16, 512}, {16 * 512, 512, 1});
  TensorRef V = view(v, 0, {64, 2048}, {2048, 1});
  TensorRef P = view(proj, 0, {64, 2048}, {2048, 1});
  TensorRef Out = view(out, 0, {64, 2048}, {2048, 1});
  TensorRef W = view(weights, 0, {1 << 19}, {1});
  auto cacheAccess = [&](bool write) {
    return MemoryAccess::ofInterval(cache, cache + (1 << 20), write);
  };
  auto recordAccess = MemoryAccess::ofInterval(record, record + 1, true);
  return {
      {rd(X), rd(W), wr(H)},                                   // 0 norm
      {rd(H), rd(W), wr(Q)},                                   // 1 q_proj
      {rd(H), rd(W), wr(KV)},                                  // 2 kv_a
      {rd(kvC), rd(W), wr(KVN)},                               // 3 kv norm
      {rd(KVN), rd(kPe), rd(qPe), wr(qRot), cacheAccess(true),
       recordAccess},                                          // 4 rope
      {rd(qNope), rd(W), wr(qAbs)},                            // 5 q_absorb
      {rd(Query), wr(O), cacheAccess(false), recordAccess},    // 6 decode
      {rd(O), rd(W), wr(V)},                                   // 7 v_up
      {rd(V), rd(W), wr(P)},                                   // 8 o_proj
      {rd(P), rd(X), wr(Out)},                                 // 9 add
  };
}

/// happensBefore[i][j]: instruction j completes before i starts under
/// `plan` (same stream and earlier, or through waits, transitively).
std::vector<std::vector<bool>> happensBefore(const StreamPlan &plan) {
  const size_t n = plan.stream.size();
  std::vector<std::vector<bool>> hb(n, std::vector<bool>(n, false));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < i; ++j)
      if (plan.stream[j] == plan.stream[i])
        for (size_t k = 0; k <= j; ++k)
          hb[i][k] = hb[i][k] || k == j || hb[j][k];
    for (uint32_t w : plan.waitFor[i]) {
      EXPECT_LT(w, i);
      EXPECT_NE(plan.stream[w], plan.stream[i]);
      EXPECT_TRUE(plan.recordAfter[w]);
      hb[i][w] = true;
      for (size_t k = 0; k < w; ++k)
        hb[i][k] = hb[i][k] || hb[w][k];
    }
  }
  return hb;
}

void expectOrdered(const std::vector<std::vector<MemoryAccess>> &acc,
                   const StreamPlan &plan) {
  std::vector<std::vector<bool>> hb = happensBefore(plan);
  for (size_t i = 0; i < acc.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (mustFollow(acc[i], acc[j]))
        EXPECT_TRUE(hb[i][j]) << "instruction " << i << " must follow " << j;
}

} // namespace

TEST(StreamPlan, DecodeStepRunsTheLatentBranchBesideTheQueryBranch) {
  auto acc = decodeStepAccesses();
  StreamPlan plan = planStreams(acc, 2);
  EXPECT_EQ(plan.numStreams, 2);
  const std::vector<int> want = {0, 0, 1, 1, 1, 0, 0, 0, 0, 0};
  EXPECT_EQ(plan.stream, want);
  // kv_a waits for the norm; the rope kernel for q_proj (its q_pe); decode
  // for the rope kernel (cache row, query columns). Nothing else.
  EXPECT_EQ(plan.waitFor[2], std::vector<uint32_t>{0});
  EXPECT_EQ(plan.waitFor[4], std::vector<uint32_t>{1});
  EXPECT_EQ(plan.waitFor[6], std::vector<uint32_t>{4});
  for (size_t i : {0, 1, 3, 5, 7, 8, 9})
    EXPECT_TRUE(plan.waitFor[i].empty()) << i;
  expectOrdered(acc, plan);
}

TEST(StreamPlan, OneStreamIsProgramOrder) {
  auto acc = decodeStepAccesses();
  StreamPlan plan = planStreams(acc, 1);
  EXPECT_EQ(plan.numStreams, 1);
  EXPECT_EQ(plan.stream, std::vector<int>(acc.size(), 0));
  for (const auto &w : plan.waitFor)
    EXPECT_TRUE(w.empty());
}

TEST(StreamPlan, TwoLayersKeepOverlappingTheLatentBranch) {
  // The second layer reads the first one's output: its latent branch must
  // wait for the add and may then run beside its query branch again.
  auto layer = decodeStepAccesses();
  auto acc = layer;
  std::vector<std::vector<MemoryAccess>> second = layer;
  // Second layer: reads layer one's out (index 9's write) as its x.
  second[0][0] = MemoryAccess::ofView(layer[9].back().view, false);
  acc.insert(acc.end(), second.begin(), second.end());
  StreamPlan plan = planStreams(acc, 2);
  EXPECT_NE(plan.stream[12], plan.stream[11]) << "kv_a beside q_proj";
  expectOrdered(acc, plan);
}

TEST(StreamPlan, RandomProgramsKeepEveryConflictOrdered) {
  std::mt19937 gen(1234);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t n = 2 + gen() % 30;
    std::vector<std::vector<MemoryAccess>> acc(n);
    for (auto &a : acc) {
      const int k = 1 + int(gen() % 4);
      for (int r = 0; r < k; ++r) {
        const int64_t row = int64_t(gen() % 8), rows = 1 + int64_t(gen() % 3);
        const int64_t col = int64_t(gen() % 4) * 16, cols = 16;
        a.push_back(MemoryAccess::ofView(
            view(kBase, row * 64 + col, {rows, cols}, {64, 1}),
            gen() % 3 == 0));
      }
    }
    for (int streams : {2, 3, 4}) {
      StreamPlan plan = planStreams(acc, streams);
      EXPECT_LE(plan.numStreams, streams);
      EXPECT_EQ(plan.stream[0], 0);
      expectOrdered(acc, plan);
    }
  }
}

namespace {

/// mustFollow over every earlier instruction: the scan
/// instructionDependencies replaces.
std::vector<std::vector<uint32_t>>
pairwiseDependencies(const std::vector<std::vector<MemoryAccess>> &acc) {
  std::vector<std::vector<uint32_t>> deps(acc.size());
  for (size_t i = 0; i < acc.size(); ++i)
    for (size_t j = i; j-- > 0;)
      if (mustFollow(acc[i], acc[j]))
        deps[i].push_back(uint32_t(j));
  return deps;
}

/// A random access: a view of one of three arrays (two strides, some
/// empty), or an interval (a cache, the error record).
MemoryAccess randomAccess(std::mt19937 &gen) {
  const bool write = gen() % 3 == 0;
  const uintptr_t base = kBase + uintptr_t(gen() % 3) * 0x10000;
  switch (gen() % 6) {
  case 0:
    return MemoryAccess::ofInterval(0, 1, true); // the error record
  case 1: {
    const uintptr_t lo = base + uintptr_t(gen() % 512) * 2;
    return MemoryAccess::ofInterval(lo, lo + 1 + gen() % 600, write);
  }
  case 2:
    return MemoryAccess::ofView(
        view(base, int64_t(gen() % 64), {int64_t(gen() % 3), 8}, {32, 1}),
        write); // may be empty
  default: {
    const int64_t row = int64_t(gen() % 8), rows = 1 + int64_t(gen() % 3);
    const int64_t col = int64_t(gen() % 4) * 16;
    return MemoryAccess::ofView(
        view(base, row * 64 + col, {rows, 16}, {64, 1}), write);
  }
  }
}

/// Vector clocks of `plan`: clocks[i][s] is the last instruction of stream
/// s known to be complete when instruction i starts (-1: none).
std::vector<std::vector<int64_t>> planClocks(const StreamPlan &plan) {
  const size_t n = plan.stream.size(), streams = size_t(plan.numStreams);
  std::vector<std::vector<int64_t>> clocks(n);
  std::vector<int64_t> tail(streams, -1);
  for (size_t i = 0; i < n; ++i) {
    const size_t s = size_t(plan.stream[i]);
    std::vector<int64_t> now = tail[s] >= 0 ? clocks[size_t(tail[s])]
                                            : std::vector<int64_t>(streams, -1);
    if (tail[s] >= 0)
      now[s] = tail[s];
    for (uint32_t w : plan.waitFor[i]) {
      const size_t t = size_t(plan.stream[w]);
      for (size_t u = 0; u < streams; ++u)
        now[u] = std::max(now[u], clocks[w][u]);
      now[t] = std::max(now[t], int64_t(w));
    }
    clocks[i] = std::move(now);
    tail[s] = int64_t(i);
  }
  return clocks;
}

} // namespace

TEST(StreamPlan, DependenciesMatchThePairwiseScan) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 gen(seed);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = 1 + gen() % 40;
    std::vector<std::vector<MemoryAccess>> acc(n);
    for (auto &a : acc)
      for (int k = int(gen() % 5); k > 0; --k) // some have no access
        a.push_back(randomAccess(gen));
    size_t compared = 0;
    EXPECT_EQ(instructionDependencies(acc, &compared),
              pairwiseDependencies(acc))
        << "trial " << trial;
    for (int streams : {2, 3}) {
      StreamPlan plan = planStreams(acc, streams);
      expectOrdered(acc, plan);
    }
  }
}

TEST(StreamPlan, LargeProgramIsPlannedWithoutAQuadraticScan) {
  // 200 layers of 25 instructions: per layer its own weights and
  // temporaries, metadata read by all, the hidden state read and written
  // by each layer, one cache per layer, the error record on two ops.
  constexpr size_t kLayers = 200, kPerLayer = 25;
  constexpr uintptr_t kMeta = 0x1000000, kHidden = 0x2000000,
                      kLayerBase = 0x10000000, kLayerStride = 0x200000;
  const TensorRef meta = view(kMeta, 0, {64}, {1}, DType::I64);
  const TensorRef hidden = view(kHidden, 0, {64, 2048}, {2048, 1});
  std::vector<std::vector<MemoryAccess>> acc;
  for (size_t l = 0; l < kLayers; ++l) {
    const uintptr_t base = kLayerBase + l * kLayerStride;
    auto temp = [&](size_t k) { // [64, 256] bf16, 32 KiB apart
      return view(base + 0x40000 + k * 0x8000, 0, {64, 256}, {256, 1});
    };
    auto weight = [&](size_t k) { // 4 KiB each
      return view(base + k * 0x1000, 0, {2048}, {1});
    };
    const auto cache = MemoryAccess::ofInterval(base + 0x20000,
                                                base + 0x30000, true);
    for (size_t k = 0; k < kPerLayer; ++k) {
      std::vector<MemoryAccess> a = {rd(weight(k)), rd(meta)};
      a.push_back(k == 0 ? rd(hidden) : rd(temp(k - 1)));
      a.push_back(k + 1 == kPerLayer ? wr(hidden) : wr(temp(k)));
      if (k == 10 || k == 11) {
        a.push_back(cache);
        a.push_back(MemoryAccess::ofInterval(0, 1, true));
      }
      acc.push_back(std::move(a));
    }
  }
  ASSERT_EQ(acc.size(), 5000u);
  const auto start = std::chrono::steady_clock::now();
  size_t compared = 0;
  const auto deps = instructionDependencies(acc, &compared);
  StreamPlan plan = planStreams(acc, 2);
  const double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count();
  // The pairwise scan compares 12.5 million instruction pairs; per
  // resource, the shared error record (400 writers, 80k pairs) dominates.
  EXPECT_LT(compared, size_t(250000));
  EXPECT_LT(seconds, 2.0);
  std::printf("5000 instructions: %zu access pairs compared, %.1f ms\n",
              compared, seconds * 1e3);

  // Each instruction follows its producer, and the error-record ops every
  // earlier one; the plan orders every dependency.
  for (size_t l = 0; l < kLayers; ++l)
    for (size_t k = 0; k < kPerLayer; ++k) {
      const size_t i = l * kPerLayer + k;
      if (i == 0)
        continue;
      ASSERT_FALSE(deps[i].empty()) << i;
      EXPECT_EQ(deps[i].front(), uint32_t(i - 1)) << i;
      if (k == 10)
        EXPECT_EQ(deps[i].size(), 1 + 2 * l) << i; // producer + records
    }
  const auto clocks = planClocks(plan);
  for (size_t i = 0; i < acc.size(); ++i)
    for (uint32_t j : deps[i])
      ASSERT_GE(clocks[i][size_t(plan.stream[j])], int64_t(j))
          << "instruction " << i << " must follow " << j;
}
