//===- PrefillAttentionTest.cpp - CPU prefill attention vs float64 --------===//
#include "KernelTestUtil.h"
#include "cpu/CpuKernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>

using namespace mlart;
using namespace mlart::kerneltest;

namespace {

struct PrefillShape {
  int64_t heads, nope, rope, vDim, latent;
};
constexpr PrefillShape kDeepSeek{16, 128, 64, 128, 512};
constexpr PrefillShape kSmall{4, 32, 16, 24, 128};

/// Packed requests with optional paged context. `padding` tokens follow the
/// last request.
struct PrefillProblem {
  PrefillProblem(PrefillShape shape, std::vector<int32_t> qLens,
                 std::vector<int32_t> ctxLens, DType actType, DType outType,
                 uint32_t seed, int64_t padding = 0,
                 CacheLayout layout = CacheLayout::Plain,
                 DType cacheType = DType::BF16, int64_t blockSize = 16)
      : s(shape), qLens(qLens), ctxLens(ctxLens), rng(seed) {
    const int64_t requests = int64_t(qLens.size());
    std::vector<int32_t> starts{0};
    for (int32_t n : qLens)
      starts.push_back(starts.back() + n);
    tokens = starts.back() + padding;
    queryStartLoc = HostTensor::i32({requests + 1}, starts);
    const int64_t qk = s.nope + s.rope;
    q = HostTensor(actType, {tokens, s.heads, qk});
    k = HostTensor(actType, {tokens, s.heads, qk});
    v = HostTensor(actType, {tokens, s.heads, s.vDim});
    q.fillUniform(rng);
    k.fillUniform(rng);
    v.fillUniform(rng);
    out = HostTensor(outType, {tokens, s.heads, s.vDim});
    lse = HostTensor(DType::F32, {tokens, s.heads});
    if (ctxLens.empty())
      return;

    int64_t pages = 0;
    for (int32_t n : ctxLens) {
      pages += (n + blockSize - 1) / blockSize;
      maxBlocks = std::max(maxBlocks, (n + blockSize - 1) / blockSize);
    }
    cache = std::make_unique<TestCache>(layout, cacheType, pages + 2, blockSize,
                                        s.latent, s.rope);
    cache->fillRandom(rng);
    // Pages handed out back to front so the table is not the identity.
    std::vector<int32_t> table(static_cast<size_t>(requests * maxBlocks), -1);
    int32_t next = int32_t(pages + 1);
    for (int64_t r = 0; r < requests; ++r)
      for (int64_t j = 0; j < (ctxLens[r] + blockSize - 1) / blockSize; ++j)
        table[r * maxBlocks + j] = next--;
    blockTable = HostTensor::i32({requests, maxBlocks}, table);
    contextLens = HostTensor::i32({requests}, ctxLens);
    // Weights scaled like trained ones, so decompressed keys are O(1).
    const double w = std::sqrt(3.0 / double(s.latent));
    wUK = HostTensor(actType, {s.heads, s.nope, s.latent});
    wUV = HostTensor(actType, {s.heads, s.latent, s.vDim});
    wUK.fillUniform(rng, -w, w);
    wUV.fillUniform(rng, -w, w);
  }

  PrefillAttentionArgs args() {
    PrefillAttentionArgs a;
    a.q = q.ref();
    a.k = k.ref();
    a.v = v.ref();
    a.queryStartLoc = queryStartLoc.ref();
    a.softmaxScale = scale;
    a.out = out.ref();
    a.lse = lse.ref();
    if (cache) {
      a.cache = cache->ref();
      a.blockTable = blockTable.ref();
      a.contextLens = contextLens.ref();
      a.wUK = wUK.ref();
      a.wUV = wUV.ref();
    }
    return a;
  }

  void run() {
    out.poison();
    lse.poison();
    Status st = cpu::prefillAttention(args());
    ASSERT_TRUE(st.ok()) << st.toString();
  }

  /// Float64 reference: one softmax per query over the decompressed context
  /// keys followed by the causal new keys (no split, no merge).
  void reference(std::vector<double> &refOut, std::vector<double> &refLse) {
    const int64_t qk = s.nope + s.rope, H = s.heads;
    refOut.assign(static_cast<size_t>(tokens * H * s.vDim), 0.0);
    refLse.assign(static_cast<size_t>(tokens * H),
                  -std::numeric_limits<double>::infinity());
    const std::vector<double> qv = q.values(), kv = k.values(), vv = v.values();
    const std::vector<double> uk = cache ? wUK.values() : std::vector<double>();
    const std::vector<double> uv = cache ? wUV.values() : std::vector<double>();
    int64_t start = 0;
    for (size_t r = 0; r < qLens.size(); ++r) {
      const int64_t ctx = cache ? ctxLens[r] : 0;
      for (int64_t h = 0; h < H; ++h) {
        std::vector<std::vector<double>> keys, values;
        for (int64_t j = 0; j < ctx; ++j) {
          const int64_t bs = cache->desc().blockSize;
          const double *c = cache->row(
              int64_t(blockTable.getI32(int64_t(r) * maxBlocks + j / bs)) * bs +
              j % bs);
          std::vector<double> key(static_cast<size_t>(qk), 0.0);
          std::vector<double> value(static_cast<size_t>(s.vDim), 0.0);
          for (int64_t n = 0; n < s.nope; ++n)
            for (int64_t l = 0; l < s.latent; ++l)
              key[n] += c[l] * uk[(h * s.nope + n) * s.latent + l];
          for (int64_t i = 0; i < s.rope; ++i)
            key[s.nope + i] = c[s.latent + i];
          for (int64_t l = 0; l < s.latent; ++l)
            for (int64_t d = 0; d < s.vDim; ++d)
              value[d] += c[l] * uv[(h * s.latent + l) * s.vDim + d];
          keys.push_back(key);
          values.push_back(value);
        }
        for (int64_t i = 0; i < qLens[r]; ++i) {
          const int64_t t = start + i;
          keys.emplace_back(kv.begin() + (t * H + h) * qk,
                            kv.begin() + (t * H + h + 1) * qk);
          values.emplace_back(vv.begin() + (t * H + h) * s.vDim,
                              vv.begin() + (t * H + h + 1) * s.vDim);
          // keys now holds the context and new tokens 0..i.
          std::vector<double> sc(keys.size());
          double m = -std::numeric_limits<double>::infinity();
          for (size_t j = 0; j < keys.size(); ++j) {
            double d = 0;
            for (int64_t c = 0; c < qk; ++c)
              d += qv[(t * H + h) * qk + c] * keys[j][c];
            sc[j] = double(scale) * d;
            m = std::max(m, sc[j]);
          }
          double sum = 0;
          for (double &x : sc)
            sum += (x = std::exp(x - m));
          double *o = refOut.data() + (t * H + h) * s.vDim;
          for (size_t j = 0; j < keys.size(); ++j)
            for (int64_t d = 0; d < s.vDim; ++d)
              o[d] += sc[j] / sum * values[j][d];
          refLse[t * H + h] = m + std::log(sum);
        }
      }
      start += qLens[r];
    }
  }

  /// Padding rows are defined as zeros with lse -inf.
  void check(double atol, double rtol) {
    std::vector<double> refOut, refLse;
    reference(refOut, refLse);
    run();
    expectNear(out.values(), refOut, atol, rtol, "out");
    expectNear(lse.values(), refLse, 1e-5, 1e-5, "lse");
  }

  PrefillShape s;
  std::vector<int32_t> qLens, ctxLens;
  std::mt19937 rng;
  int64_t tokens = 0, maxBlocks = 1;
  HostTensor queryStartLoc, q, k, v, out, lse;
  std::unique_ptr<TestCache> cache;
  HostTensor blockTable, contextLens, wUK, wUV;
  float scale = 0.125f;
};

TEST(PrefillAttention, CausalWithoutContextDeepSeekSizes) {
  PrefillProblem p(kDeepSeek, {1, 7, 40}, {}, DType::BF16, DType::F32, 21);
  p.check(1e-5, 1e-5);
}

TEST(PrefillAttention, ChunkedWithContextDeepSeekSizes) {
  // Request 0 has no context, request 2 has more context than new tokens.
  PrefillProblem p(kDeepSeek, {5, 12, 3}, {0, 37, 70}, DType::BF16, DType::BF16,
                   22);
  p.check(1e-5, relTolerance(DType::BF16));
}

TEST(PrefillAttention, ContextFromEveryCacheLayout) {
  struct Layout {
    CacheLayout layout;
    DType type;
    int64_t blockSize;
  };
  for (Layout c : {Layout{CacheLayout::Plain, DType::F32, 64},
                   Layout{CacheLayout::Plain, DType::F16, 16},
                   Layout{CacheLayout::Fp8PerTensor, DType::F8E4M3FN, 16},
                   Layout{CacheLayout::Fp8PerTensor, DType::F8E5M2, 32},
                   Layout{CacheLayout::Fp8DsMla, DType::F8E4M3FN, 64}}) {
    SCOPED_TRACE(std::string(cacheLayoutName(c.layout)) + " " +
                 dtypeName(c.type));
    // An empty request in the middle and two padding tokens at the end.
    PrefillProblem p(kSmall, {3, 0, 9, 1}, {65, 4, 0, 130}, DType::F16,
                     DType::F32, 23, /*padding=*/2, c.layout, c.type,
                     c.blockSize);
    p.check(1e-5, 1e-5);
  }
}

TEST(PrefillAttention, LseIsOptional) {
  PrefillProblem p(kSmall, {4, 6}, {10, 0}, DType::F32, DType::F32, 24);
  std::vector<double> refOut, refLse;
  p.reference(refOut, refLse);
  p.out.poison();
  PrefillAttentionArgs a = p.args();
  a.lse = TensorRef();
  ASSERT_TRUE(cpu::prefillAttention(a).ok());
  expectNear(p.out.values(), refOut, 1e-5, 1e-5, "out");
}

// A bound at least every request's context is only a hint: the result is
// bit for bit the unbounded one, with context or total lengths.
TEST(PrefillAttention, ContextBoundThatHoldsChangesNothing) {
  PrefillProblem p(kSmall, {4, 6}, {10, 20}, DType::F32, DType::F32, 26);
  p.run();
  const std::vector<uint8_t> out = p.out.bytes(), lse = p.lse.bytes();
  for (int64_t bound : {20, 21, 1000}) {
    SCOPED_TRACE(bound);
    p.out.poison();
    p.lse.poison();
    PrefillAttentionArgs a = p.args();
    a.contextLenBound = bound;
    ASSERT_TRUE(cpu::prefillAttention(a).ok());
    EXPECT_EQ(p.out.bytes(), out);
    EXPECT_EQ(p.lse.bytes(), lse);
  }
  // Total lengths: the bound applies to the context, not the total.
  HostTensor total = HostTensor::i32({2}, {10 + 4, 20 + 6});
  p.out.poison();
  PrefillAttentionArgs a = p.args();
  a.contextLens = total.ref();
  a.lensIncludeNewTokens = true;
  a.contextLenBound = 20;
  ASSERT_TRUE(cpu::prefillAttention(a).ok());
  EXPECT_EQ(p.out.bytes(), out);
}

// With total lengths only the cached context is read, so only it must fit
// the block table (as on CUDA): request 1's 30 cached + 6 new tokens pass a
// 32-token table, and give what context lengths give.
TEST(PrefillAttention, TotalLengthsAreCheckedByTheirContext) {
  PrefillProblem p(kSmall, {4, 6}, {10, 30}, DType::F32, DType::F32, 27);
  ASSERT_EQ(p.maxBlocks * 16, 32);
  p.run();
  const std::vector<uint8_t> out = p.out.bytes();
  HostTensor total = HostTensor::i32({2}, {10 + 4, 30 + 6});
  p.out.poison();
  PrefillAttentionArgs a = p.args();
  a.contextLens = total.ref();
  a.lensIncludeNewTokens = true;
  Status st = cpu::prefillAttention(a);
  ASSERT_TRUE(st.ok()) << st.toString();
  EXPECT_EQ(p.out.bytes(), out);
  // A context past the table is still refused, naming the request.
  HostTensor over = HostTensor::i32({2}, {10 + 4, 33 + 6});
  a.contextLens = over.ref();
  st = cpu::prefillAttention(a);
  EXPECT_EQ(st.code(), StatusCode::OutOfRange);
  EXPECT_NE(st.message().find("request 1's cached context = 33"),
            std::string::npos)
      << st.toString();
}

TEST(PrefillAttention, RejectsInvalidArgumentsWithoutWriting) {
  PrefillProblem p(kSmall, {4, 6}, {10, 20}, DType::F32, DType::F32, 25);
  HostTensor decreasing = HostTensor::i32({3}, {0, 6, 4});
  HostTensor pastEnd = HostTensor::i32({3}, {0, 4, 11});
  HostTensor notFromZero = HostTensor::i32({3}, {1, 4, 10});
  HostTensor vShort(DType::F32, {9, kSmall.heads, kSmall.vDim});
  HostTensor wUKWrong(DType::F32, {kSmall.heads, kSmall.nope + 1, 128});
  HostTensor wUVWrong(DType::F32, {kSmall.heads, 128, kSmall.vDim + 1});
  HostTensor ctxOverCapacity =
      HostTensor::i32({2}, {10, int32_t(p.maxBlocks * 16 + 1)});
  std::vector<int32_t> table;
  for (int64_t i = 0; i < 2 * p.maxBlocks; ++i)
    table.push_back(p.blockTable.getI32(i));
  table[size_t(p.maxBlocks)] = int32_t(p.cache->desc().numBlocks);
  HostTensor badBlock = HostTensor::i32({2, p.maxBlocks}, table);

  struct Mutation {
    const char *what;
    StatusCode code;
    std::function<void(PrefillAttentionArgs &)> apply;
  };
  const std::vector<Mutation> mutations = {
      {"queryStartLoc decreasing", StatusCode::InvalidArgument,
       [&](auto &a) { a.queryStartLoc = decreasing.ref(); }},
      {"queryStartLoc past T", StatusCode::OutOfRange,
       [&](auto &a) { a.queryStartLoc = pastEnd.ref(); }},
      {"queryStartLoc[0] != 0", StatusCode::InvalidArgument,
       [&](auto &a) { a.queryStartLoc = notFromZero.ref(); }},
      {"v token count", StatusCode::InvalidArgument,
       [&](auto &a) { a.v = vShort.ref(); }},
      {"k dtype i32", StatusCode::InvalidArgument,
       [&](auto &a) { a.k.dtype = DType::I32; }},
      {"wUK shape", StatusCode::InvalidArgument,
       [&](auto &a) { a.wUK = wUKWrong.ref(); }},
      {"wUV shape", StatusCode::InvalidArgument,
       [&](auto &a) { a.wUV = wUVWrong.ref(); }},
      {"context over capacity", StatusCode::OutOfRange,
       [&](auto &a) { a.contextLens = ctxOverCapacity.ref(); }},
      {"context block out of range", StatusCode::OutOfRange,
       [&](auto &a) { a.blockTable = badBlock.ref(); }},
      {"context without weights", StatusCode::InvalidArgument,
       [&](auto &a) { a.wUK = TensorRef(); }},
      {"context over contextLenBound", StatusCode::OutOfRange,
       [&](auto &a) { a.contextLenBound = 19; }},
      {"negative contextLenBound", StatusCode::InvalidArgument,
       [&](auto &a) { a.contextLenBound = -1; }},
  };
  for (const Mutation &m : mutations) {
    SCOPED_TRACE(m.what);
    p.out.poison();
    p.lse.poison();
    const std::vector<uint8_t> out = p.out.bytes(), lse = p.lse.bytes();
    PrefillAttentionArgs a = p.args();
    m.apply(a);
    Status st = cpu::prefillAttention(a);
    EXPECT_EQ(st.code(), m.code) << st.toString();
    EXPECT_EQ(p.out.bytes(), out);
    EXPECT_EQ(p.lse.bytes(), lse);
  }
}

} // namespace
