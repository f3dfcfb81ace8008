//===- DecodeAttentionTest.cpp - CPU decode attention vs float64 ---------===//
#include "KernelTestUtil.h"
#include "cpu/CpuKernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

using namespace mlart;
using namespace mlart::kerneltest;

namespace {

constexpr int64_t kLatent = 512;
constexpr int64_t kRope = 64;
constexpr int64_t kRow = kLatent + kRope;

/// Everything one decode call needs, with random contents. Sequence b's pages
/// are a random permutation of the cache's blocks so page order matters; the
/// block-table entries past a sequence's pages are left at -1.
struct DecodeProblem {
  DecodeProblem(CacheLayout layout, DType cacheType, int64_t blockSize,
                int64_t heads, std::vector<int32_t> lens, DType qType,
                DType outType, uint32_t seed)
      : heads(heads), lens(lens),
        cache(layout, cacheType, totalBlocks(lens, blockSize) + 3, blockSize),
        rng(seed) {
    const int64_t batch = int64_t(lens.size());
    for (int32_t len : lens)
      maxBlocks = std::max(maxBlocks, (len + blockSize - 1) / blockSize + 1);
    cache.fillRandom(rng);
    std::vector<int32_t> perm(static_cast<size_t>(cache.desc().numBlocks));
    for (size_t i = 0; i < perm.size(); ++i)
      perm[i] = int32_t(i);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int32_t> table(static_cast<size_t>(batch * maxBlocks), -1);
    size_t next = 0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < (lens[b] + blockSize - 1) / blockSize; ++j)
        table[b * maxBlocks + j] = perm[next++];
    blockTable = HostTensor::i32({batch, maxBlocks}, table);
    seqLens = HostTensor::i32({batch}, lens);
    q = HostTensor(qType, {batch, heads, kRow});
    q.fillUniform(rng);
    out = HostTensor(outType, {batch, heads, kLatent});
    lse = HostTensor(DType::F32, {batch, heads});
  }

  static int64_t totalBlocks(const std::vector<int32_t> &lens, int64_t bs) {
    int64_t n = 0;
    for (int32_t len : lens)
      n += (len + bs - 1) / bs;
    return n;
  }

  DecodeAttentionArgs args(int numSplits) {
    DecodeAttentionArgs a;
    a.q = q.ref();
    a.cache = cache.ref();
    a.blockTable = blockTable.ref();
    a.seqLens = seqLens.ref();
    a.softmaxScale = scale;
    a.out = out.ref();
    a.lse = lse.ref();
    a.numSplits = numSplits;
    return a;
  }

  /// Runs the kernel on poisoned outputs and expects success.
  void run(int numSplits) {
    out.poison();
    lse.poison();
    Status s = cpu::decodeAttention(args(numSplits));
    ASSERT_TRUE(s.ok()) << s.toString();
  }

  /// Float64 reference: gathers each sequence's rows through the block table
  /// and takes V as the first kLatent channels of the same rows.
  void reference(std::vector<double> &refOut, std::vector<double> &refLse) {
    const int64_t batch = int64_t(lens.size()), bs = cache.desc().blockSize;
    refOut.assign(size_t(batch * heads * kLatent), 0.0);
    refLse.assign(size_t(batch * heads),
                  -std::numeric_limits<double>::infinity());
    const std::vector<double> qv = q.values();
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<const double *> rows;
      for (int64_t t = 0; t < lens[b]; ++t)
        rows.push_back(cache.row(
            int64_t(blockTable.getI32(b * maxBlocks + t / bs)) * bs + t % bs));
      if (rows.empty())
        continue;
      for (int64_t h = 0; h < heads; ++h) {
        const double *qh = qv.data() + (b * heads + h) * kRow;
        std::vector<double> s(rows.size());
        double m = -std::numeric_limits<double>::infinity();
        for (size_t j = 0; j < rows.size(); ++j) {
          double d = 0;
          for (int64_t c = 0; c < kRow; ++c)
            d += qh[c] * rows[j][c];
          s[j] = double(scale) * d;
          m = std::max(m, s[j]);
        }
        double sum = 0;
        for (double &x : s)
          sum += (x = std::exp(x - m));
        double *o = refOut.data() + (b * heads + h) * kLatent;
        for (size_t j = 0; j < rows.size(); ++j)
          for (int64_t c = 0; c < kLatent; ++c)
            o[c] += s[j] / sum * rows[j][c];
        refLse[b * heads + h] = m + std::log(sum);
      }
    }
  }

  int64_t heads;
  std::vector<int32_t> lens;
  TestCache cache;
  std::mt19937 rng;
  int64_t maxBlocks = 1;
  HostTensor blockTable, seqLens, q, out, lse;
  // Larger than DeepSeek's 1/sqrt(192) so the softmax is far from uniform.
  float scale = 0.15f;
};

struct DecodeCase {
  const char *name;
  CacheLayout layout;
  DType cacheType;
  DType qType;
  DType outType;
  int64_t blockSize;
  int64_t heads;
};

void PrintTo(const DecodeCase &c, std::ostream *os) {
  *os << c.name << " cache, block size " << c.blockSize << ", " << c.heads
      << " heads";
}

std::string caseName(const testing::TestParamInfo<DecodeCase> &info) {
  return std::string(info.param.name) + "_bs" +
         std::to_string(info.param.blockSize) + "_h" +
         std::to_string(info.param.heads);
}

class DecodeAttentionRef : public testing::TestWithParam<DecodeCase> {};

// Every layout, block size and head count against float64, for several split
// counts (1, a few, one page per split, the heuristic), with the LSE.
TEST_P(DecodeAttentionRef, MatchesFloat64ReferenceForEverySplitCount) {
  const DecodeCase &c = GetParam();
  // 128 heads cost 8x more per token, so they get a shorter batch; both
  // include length 1, 0, exact page multiples and ragged tails.
  std::vector<int32_t> lens =
      c.heads <= 16 ? std::vector<int32_t>{1, 0, 15, 64, 65, 200, 333, 97}
                    : std::vector<int32_t>{130, 1, 0, 64};
  DecodeProblem p(c.layout, c.cacheType, c.blockSize, c.heads, lens, c.qType,
                  c.outType, 1234 + uint32_t(c.blockSize + c.heads));
  std::vector<double> refOut, refLse;
  p.reference(refOut, refLse);
  std::vector<double> firstOut;
  for (int splits : {1, 0, 3, 1000}) {
    SCOPED_TRACE("numSplits " + std::to_string(splits));
    p.run(splits);
    expectNear(p.out.values(), refOut, 1e-5, relTolerance(c.outType), "out");
    expectNear(p.lse.values(), refLse, 1e-5, 1e-5, "lse");
    // Different split counts only reorder float sums.
    if (firstOut.empty())
      firstOut = p.out.values();
    else
      expectNear(p.out.values(), firstOut, 1e-6, 2 * relTolerance(c.outType),
                 "out vs numSplits 1");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, DecodeAttentionRef,
    testing::Values(
        DecodeCase{"bf16", CacheLayout::Plain, DType::BF16, DType::BF16,
                   DType::BF16, 16, 16},
        DecodeCase{"bf16", CacheLayout::Plain, DType::BF16, DType::BF16,
                   DType::F32, 64, 128},
        DecodeCase{"f32", CacheLayout::Plain, DType::F32, DType::F32,
                   DType::F32, 16, 128},
        DecodeCase{"f32", CacheLayout::Plain, DType::F32, DType::F32,
                   DType::F32, 64, 16},
        DecodeCase{"fp8", CacheLayout::Fp8PerTensor, DType::F8E4M3FN,
                   DType::BF16, DType::F32, 16, 16},
        DecodeCase{"fp8", CacheLayout::Fp8PerTensor, DType::F8E4M3FN,
                   DType::F16, DType::F16, 64, 128},
        DecodeCase{"fp8e5m2", CacheLayout::Fp8PerTensor, DType::F8E5M2,
                   DType::BF16, DType::F32, 16, 64},
        DecodeCase{"fp8dsmla", CacheLayout::Fp8DsMla, DType::F8E4M3FN,
                   DType::F16, DType::F32, 64, 16},
        DecodeCase{"fp8dsmla", CacheLayout::Fp8DsMla, DType::F8E4M3FN,
                   DType::BF16, DType::BF16, 16, 128}),
    caseName);

TEST(DecodeAttention, SingleSequenceAndEmptySequence) {
  DecodeProblem p(CacheLayout::Plain, DType::BF16, 16, 16, {1000}, DType::BF16,
                  DType::F32, 7);
  std::vector<double> refOut, refLse;
  p.reference(refOut, refLse);
  p.run(0);
  expectNear(p.out.values(), refOut, 1e-5, 1e-5, "out");
  expectNear(p.lse.values(), refLse, 1e-5, 1e-5, "lse");

  DecodeProblem empty(CacheLayout::Plain, DType::BF16, 16, 16, {0}, DType::BF16,
                      DType::F32, 8);
  empty.run(0);
  for (double v : empty.out.values())
    EXPECT_EQ(v, 0.0);
  for (double v : empty.lse.values())
    EXPECT_EQ(v, -std::numeric_limits<double>::infinity());
}

TEST(DecodeAttention, LseIsOptional) {
  DecodeProblem p(CacheLayout::Plain, DType::F32, 16, 16, {40, 3}, DType::F32,
                  DType::F32, 9);
  std::vector<double> refOut, refLse;
  p.reference(refOut, refLse);
  p.out.poison();
  DecodeAttentionArgs a = p.args(0);
  a.lse = TensorRef();
  ASSERT_TRUE(cpu::decodeAttention(a).ok());
  expectNear(p.out.values(), refOut, 1e-5, 1e-5, "out");
}

// Rows at or past each sequence's length, every unused page and every unused
// block-table entry hold garbage (NaN rows, out-of-range ids): the result must
// be finite and bit-identical to the run on clean data.
TEST(DecodeAttention, NeverReadsPastSequenceLength) {
  for (CacheLayout layout :
       {CacheLayout::Plain, CacheLayout::Fp8PerTensor, CacheLayout::Fp8DsMla}) {
    SCOPED_TRACE(cacheLayoutName(layout));
    DecodeProblem p(layout, DType::BF16, 16, 16, {1, 17, 0, 48, 100},
                    DType::BF16, DType::F32, 11);
    p.run(0);
    const std::vector<uint8_t> cleanOut = p.out.bytes();
    const std::vector<uint8_t> cleanLse = p.lse.bytes();

    const int64_t bs = 16, batch = int64_t(p.lens.size());
    std::vector<bool> used(static_cast<size_t>(p.cache.desc().numBlocks),
                           false);
    std::vector<int32_t> table(static_cast<size_t>(batch * p.maxBlocks));
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t pages = (p.lens[b] + bs - 1) / bs;
      for (int64_t j = 0; j < p.maxBlocks; ++j) {
        int32_t id = p.blockTable.getI32(b * p.maxBlocks + j);
        if (j < pages) {
          used[size_t(id)] = true;
          for (int64_t t = j * bs; t < (j + 1) * bs; ++t)
            if (t >= p.lens[b])
              p.cache.poisonRow(id * bs + t % bs);
        } else {
          id = (j % 2) ? -7 : (1 << 30);
        }
        table[b * p.maxBlocks + j] = id;
      }
    }
    for (int64_t blk = 0; blk < p.cache.desc().numBlocks; ++blk)
      if (!used[size_t(blk)])
        for (int64_t t = 0; t < bs; ++t)
          p.cache.poisonRow(blk * bs + t);
    p.blockTable = HostTensor::i32({batch, p.maxBlocks}, table);

    for (int splits : {0, 1, 2}) {
      p.run(splits);
      for (double v : p.out.values())
        ASSERT_TRUE(std::isfinite(v));
      if (splits == 0) {
        EXPECT_EQ(p.out.bytes(), cleanOut);
        EXPECT_EQ(p.lse.bytes(), cleanLse);
      }
    }
  }
}

// Each invalid argument is refused before any output is written.
TEST(DecodeAttention, RejectsInvalidArgumentsWithoutWriting) {
  DecodeProblem p(CacheLayout::Plain, DType::BF16, 16, 16, {20, 33},
                  DType::BF16, DType::F32, 13);
  const int64_t maxBlocks = p.maxBlocks; // 4: pages 2 and 3, plus one spare
  HostTensor q575(DType::BF16, {2, 16, kRow - 1});
  HostTensor qI32(DType::I32, {2, 16, kRow});
  HostTensor out2d(DType::F32, {2, 16 * kLatent});
  HostTensor outShort(DType::F32, {2, 16, kLatent - 1});
  HostTensor lseBf16(DType::BF16, {2, 16});
  HostTensor tableI64(DType::I64, {2, maxBlocks});
  HostTensor lens3 = HostTensor::i32({3}, {1, 1, 1});
  auto tableWith = [&](int64_t b, int64_t j, int32_t id) {
    std::vector<int32_t> t(static_cast<size_t>(2 * maxBlocks));
    for (int64_t i = 0; i < 2 * maxBlocks; ++i)
      t[i] = p.blockTable.getI32(i);
    t[b * maxBlocks + j] = id;
    return HostTensor::i32({2, maxBlocks}, t);
  };
  HostTensor tooBig = tableWith(1, 2, int32_t(p.cache.desc().numBlocks));
  HostTensor negative = tableWith(1, 0, -1);
  HostTensor lensOverCapacity =
      HostTensor::i32({2}, {20, int32_t(maxBlocks * 16 + 1)});
  HostTensor lensNegative = HostTensor::i32({2}, {-1, 33});

  struct Mutation {
    const char *what;
    StatusCode code;
    std::function<void(DecodeAttentionArgs &)> apply;
  };
  const std::vector<Mutation> mutations = {
      {"q rank 2", StatusCode::InvalidArgument, [&](auto &a) { a.q.rank = 2; }},
      {"q i32", StatusCode::InvalidArgument,
       [&](auto &a) { a.q = qI32.ref(); }},
      {"q last dim != latent + rope", StatusCode::InvalidArgument,
       [&](auto &a) { a.q = q575.ref(); }},
      {"out rank 2", StatusCode::InvalidArgument,
       [&](auto &a) { a.out = out2d.ref(); }},
      {"out last dim", StatusCode::InvalidArgument,
       [&](auto &a) { a.out = outShort.ref(); }},
      {"lse bf16", StatusCode::InvalidArgument,
       [&](auto &a) { a.lse = lseBf16.ref(); }},
      {"blockTable i64", StatusCode::InvalidArgument,
       [&](auto &a) { a.blockTable = tableI64.ref(); }},
      {"seqLens batch mismatch", StatusCode::InvalidArgument,
       [&](auto &a) { a.seqLens = lens3.ref(); }},
      {"block id == numBlocks", StatusCode::OutOfRange,
       [&](auto &a) { a.blockTable = tooBig.ref(); }},
      {"block id -1", StatusCode::OutOfRange,
       [&](auto &a) { a.blockTable = negative.ref(); }},
      {"seqLen > capacity", StatusCode::OutOfRange,
       [&](auto &a) { a.seqLens = lensOverCapacity.ref(); }},
      {"seqLen < 0", StatusCode::OutOfRange,
       [&](auto &a) { a.seqLens = lensNegative.ref(); }},
      {"no cache data", StatusCode::InvalidArgument,
       [&](auto &a) { a.cache.data = nullptr; }},
      {"bad cache desc", StatusCode::InvalidArgument,
       [&](auto &a) { a.cache.desc.blockSize = 0; }},
      {"numSplits < 0", StatusCode::InvalidArgument,
       [&](auto &a) { a.numSplits = -1; }},
      {"schedule outside the enum", StatusCode::InvalidArgument,
       [&](auto &a) { a.schedule = static_cast<DecodeSchedule>(3); }},
  };
  for (const Mutation &m : mutations) {
    SCOPED_TRACE(m.what);
    p.out.poison();
    p.lse.poison();
    const std::vector<uint8_t> out = p.out.bytes(), lse = p.lse.bytes();
    DecodeAttentionArgs a = p.args(0);
    m.apply(a);
    Status s = cpu::decodeAttention(a);
    EXPECT_EQ(s.code(), m.code) << s.toString();
    EXPECT_EQ(p.out.bytes(), out);
    EXPECT_EQ(p.lse.bytes(), lse);
  }
}

} // namespace

namespace {

/// One decode step's new rows: token b is the last position of sequence b
/// (seqLens already counts it), written through slot_mapping. With
/// `extra`, four more tokens: one rewrites a middle row of the last
/// sequence, two write its first row (the later one wins) and one is
/// padding (slot -1).
struct NewTokens {
  NewTokens(DecodeProblem &p, std::mt19937 &rng, bool extra = false) {
    const int64_t batch = int64_t(p.lens.size());
    const int64_t bs = p.cache.desc().blockSize;
    auto slotOf = [&](int64_t b, int32_t pos) {
      return p.blockTable.getI32(b * p.maxBlocks + pos / bs) * int32_t(bs) +
             pos % int32_t(bs);
    };
    std::vector<int32_t> slots;
    slots.reserve(size_t(batch + 4));
    for (int64_t b = 0; b < batch; ++b)
      slots.push_back(slotOf(b, p.lens[b] - 1));
    if (extra) {
      const int64_t last = batch - 1;
      slots.push_back(slotOf(last, p.lens[last] / 2));
      slots.push_back(slotOf(last, 0));
      slots.push_back(slotOf(last, 0));
      slots.push_back(-1);
    }
    const int64_t tokens = int64_t(slots.size());
    kvC = HostTensor(DType::BF16, {tokens, kLatent});
    kPe = HostTensor(DType::BF16, {tokens, kRope});
    kvC.fillUniform(rng);
    kPe.fillUniform(rng);
    slotMapping = HostTensor::i32({tokens}, slots);
  }

  DecodeAttentionWithUpdateArgs args(DecodeProblem &p, int numSplits) {
    DecodeAttentionArgs a = p.args(numSplits);
    DecodeAttentionWithUpdateArgs f;
    f.kvC = kvC.ref();
    f.kPe = kPe.ref();
    f.slotMapping = slotMapping.ref();
    f.q = a.q;
    f.cache = a.cache;
    f.blockTable = a.blockTable;
    f.seqLens = a.seqLens;
    f.softmaxScale = a.softmaxScale;
    f.out = a.out;
    f.lse = a.lse;
    f.numSplits = a.numSplits;
    return f;
  }

  HostTensor kvC, kPe, slotMapping;
};

} // namespace

// The fused op is cacheUpdate followed by decodeAttention: the same cache
// bits and the same output bits as the two calls, for every cache layout and
// several split counts, and within tolerance of float64 on the updated cache.
TEST(DecodeAttentionWithUpdate, EqualsCacheUpdateThenDecodeAttention) {
  for (CacheLayout layout :
       {CacheLayout::Plain, CacheLayout::Fp8PerTensor, CacheLayout::Fp8DsMla}) {
    for (int splits : {0, 1, 3})
      for (bool extra : {false, true}) {
        SCOPED_TRACE(std::string(cacheLayoutName(layout)) + ", " +
                     std::to_string(splits) + " splits" +
                     (extra ? ", rows of other tiles, one slot twice" : ""));
        const uint32_t seed = 101 + uint32_t(splits);
        DecodeProblem fused(layout, DType::BF16, 16, 16, {1, 20, 33, 64},
                            DType::BF16, DType::F32, seed);
        DecodeProblem twoCalls(layout, DType::BF16, 16, 16, {1, 20, 33, 64},
                               DType::BF16, DType::F32, seed);
        std::mt19937 rngA(seed + 1000), rngB(seed + 1000);
        NewTokens tokA(fused, rngA, extra), tokB(twoCalls, rngB, extra);

        fused.out.poison();
        fused.lse.poison();
        Status s = cpu::decodeAttentionWithUpdate(tokA.args(fused, splits));
        ASSERT_TRUE(s.ok()) << s.toString();

        twoCalls.out.poison();
        twoCalls.lse.poison();
        DecodeAttentionWithUpdateArgs b = tokB.args(twoCalls, splits);
        ASSERT_TRUE(cpu::cacheUpdate(b.update()).ok());
        ASSERT_TRUE(cpu::decodeAttention(b.attention()).ok());

        EXPECT_EQ(fused.cache.bytes(), twoCalls.cache.bytes());
        EXPECT_EQ(fused.out.bytes(), twoCalls.out.bytes());
        EXPECT_EQ(fused.lse.bytes(), twoCalls.lse.bytes());
        // The write happened: the cache differs from the one before the step.
        DecodeProblem before(layout, DType::BF16, 16, 16, {1, 20, 33, 64},
                             DType::BF16, DType::F32, seed);
        EXPECT_NE(fused.cache.bytes(), before.cache.bytes());
      }
  }
}

// A call refused on either half's arguments writes neither the cache nor the
// outputs; in particular a bad attention argument must not let the update
// through.
TEST(DecodeAttentionWithUpdate, RefusedCallWritesNothing) {
  DecodeProblem p(CacheLayout::Plain, DType::BF16, 16, 16, {20, 33},
                  DType::BF16, DType::F32, 17);
  std::mt19937 rng(18);
  NewTokens tok(p, rng);
  HostTensor slotOutOfRange =
      HostTensor::i32({2}, {0, int32_t(p.cache.desc().numSlots())});
  HostTensor lensOverCapacity =
      HostTensor::i32({2}, {20, int32_t(p.maxBlocks * 16 + 1)});
  HostTensor tableOutOfRange = [&] {
    std::vector<int32_t> t(static_cast<size_t>(2 * p.maxBlocks));
    for (int64_t i = 0; i < 2 * p.maxBlocks; ++i)
      t[i] = p.blockTable.getI32(i);
    t[p.maxBlocks] = int32_t(p.cache.desc().numBlocks);
    return HostTensor::i32({2, p.maxBlocks}, t);
  }();
  HostTensor q575(DType::BF16, {2, 16, kRow - 1});
  HostTensor kvCShort(DType::BF16, {2, kLatent - 1});

  struct Mutation {
    const char *what;
    StatusCode code;
    std::function<void(DecodeAttentionWithUpdateArgs &)> apply;
  };
  const std::vector<Mutation> mutations = {
      {"slot == numSlots", StatusCode::OutOfRange,
       [&](auto &a) { a.slotMapping = slotOutOfRange.ref(); }},
      {"kv_c last dim", StatusCode::InvalidArgument,
       [&](auto &a) { a.kvC = kvCShort.ref(); }},
      {"seqLen > capacity", StatusCode::OutOfRange,
       [&](auto &a) { a.seqLens = lensOverCapacity.ref(); }},
      {"block id == numBlocks", StatusCode::OutOfRange,
       [&](auto &a) { a.blockTable = tableOutOfRange.ref(); }},
      {"q last dim", StatusCode::InvalidArgument,
       [&](auto &a) { a.q = q575.ref(); }},
  };
  const std::vector<uint8_t> cacheBefore = p.cache.bytes();
  for (const Mutation &m : mutations) {
    SCOPED_TRACE(m.what);
    p.out.poison();
    p.lse.poison();
    const std::vector<uint8_t> outBefore = p.out.bytes();
    const std::vector<uint8_t> lseBefore = p.lse.bytes();
    DecodeAttentionWithUpdateArgs a = tok.args(p, 0);
    m.apply(a);
    EXPECT_EQ(cpu::decodeAttentionWithUpdate(a).code(), m.code);
    EXPECT_EQ(p.cache.bytes(), cacheBefore);
    EXPECT_EQ(p.out.bytes(), outBefore);
    EXPECT_EQ(p.lse.bytes(), lseBefore);
  }
}
