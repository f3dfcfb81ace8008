//===- CudaKernelsTest.cpp - Every CUDA kernel against the CPU reference --===//
#include "CudaTestUtil.h"
#include "cuda/DecodeCommon.h"
#include "cuda/Knobs.h"
#include "cuda/PrefillContext.h"
#include "cuda/PrefillFlash.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>

using namespace mlart;
using namespace mlart::cudatest;

namespace {

const KernelLibrary &cpu() { return cpuKernelLibrary(); }

/// A paged cache mirrored host/device, filled with random bytes (random
/// finite values for plain caches).
struct Cache {
  KVCacheDesc desc;
  Arr bytes;
  float scale = 1.0f;
  Cache(CudaDevice *d, CacheLayout layout, DType t, int64_t blocks, int64_t bs) {
    desc.numBlocks = blocks;
    desc.blockSize = bs;
    desc.layout = layout;
    // t is the plain rows' type, or a per-tensor cache's fp8 encoding
    // (e4m3fn unless t is an fp8 type).
    desc.dtype = layout == CacheLayout::Plain ? t
                 : layout == CacheLayout::Fp8PerTensor && isFp8(t)
                     ? t
                     : DType::F8E4M3FN;
    bytes = Arr(d, DType::F8E4M3FN, {desc.totalBytes()});
    for (auto &b : bytes.host)
      b = uint8_t(rng()() & 0x77); // finite in every encoding
    bytes.up(d);
  }
  KVCacheRef h() {
    KVCacheRef r;
    r.desc = desc;
    r.data = bytes.host.data();
    r.scale = scale;
    return r;
  }
  KVCacheRef d() {
    KVCacheRef r = h();
    r.data = bytes.dev.data();
    return r;
  }
};

Arr randomArr(CudaDevice *d, DType t, std::vector<int64_t> s, float lo = -1,
              float hi = 1) {
  Arr a(d, t, std::move(s));
  a.random(lo, hi);
  a.up(d);
  return a;
}

Arr slotArr(CudaDevice *d, const std::vector<int64_t> &s, bool i64) {
  Arr a(d, i64 ? DType::I64 : DType::I32, {int64_t(s.size())});
  if (i64)
    a.setI64(s);
  else
    a.setI32(std::vector<int32_t>(s.begin(), s.end()));
  a.up(d);
  return a;
}

struct UpdateCase {
  CacheLayout layout;
  DType dtype;
  int64_t tokens, mapped, blockSize;
  bool i64;
  DType cacheFp8 = DType::F8E4M3FN; ///< a per-tensor cache's encoding
};

class CudaCacheUpdate : public ::testing::TestWithParam<UpdateCase> {};

TEST_P(CudaCacheUpdate, MatchesCpuBitForBit) {
  REQUIRE_GPU();
  const UpdateCase c = GetParam();
  Cache cache(dev, c.layout,
              c.layout == CacheLayout::Fp8PerTensor ? c.cacheFp8 : c.dtype,
              4 + (c.tokens + c.blockSize - 1) / c.blockSize * 2, c.blockSize);
  cache.scale = 0.037f;
  const DType in = c.layout == CacheLayout::Plain ? c.dtype : c.dtype;
  Arr kv = randomArr(dev, in, {c.tokens, 512}, -3, 3);
  Arr kp = randomArr(dev, in, {c.tokens, 64}, -3, 3);
  Arr slots = slotArr(dev, randomSlots(c.mapped, cache.desc.numSlots()), c.i64);
  CacheUpdateArgs h{kv.h(), kp.h(), slots.h(), cache.h()};
  CacheUpdateArgs g{kv.d(), kp.d(), slots.d(), cache.d()};
  ASSERT_TRUE(cpu().cacheUpdate(h, nullptr).ok());
  Status s = dev->kernels().cacheUpdate(g, nullptr);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(cache.bytes.down(dev) == cache.bytes.host)
      << "cache differs from the CPU reference";
}

INSTANTIATE_TEST_SUITE_P(
    Grid, CudaCacheUpdate,
    ::testing::Values(
        UpdateCase{CacheLayout::Plain, DType::BF16, 37, 37, 16, true},
        UpdateCase{CacheLayout::Plain, DType::BF16, 300, 250, 64, false},
        UpdateCase{CacheLayout::Plain, DType::BF16, 3000, 3000, 32, true},
        UpdateCase{CacheLayout::Plain, DType::F16, 129, 100, 16, false},
        UpdateCase{CacheLayout::Plain, DType::F32, 77, 77, 32, true},
        UpdateCase{CacheLayout::Fp8PerTensor, DType::BF16, 65, 60, 16, true},
        UpdateCase{CacheLayout::Fp8PerTensor, DType::F32, 2000, 2000, 64,
                   false},
        UpdateCase{CacheLayout::Fp8PerTensor, DType::BF16, 300, 280, 32, true,
                   DType::F8E5M2},
        // Already-quantised inputs, stored as they are.
        UpdateCase{CacheLayout::Fp8PerTensor, DType::F8E5M2, 100, 90, 16, false,
                   DType::F8E5M2},
        UpdateCase{CacheLayout::Fp8PerTensor, DType::F8E4M3FN, 70, 70, 64,
                   true},
        UpdateCase{CacheLayout::Fp8DsMla, DType::BF16, 90, 90, 64, true},
        UpdateCase{CacheLayout::Fp8DsMla, DType::F16, 1500, 1400, 16, false}));

// Large pre-validated updates take the flat 16-byte copy kernel: kv_c and
// k_pe as strided views of one kv_a row (the compiled step's layout), fewer
// slots than tokens, f32 and bf16, every block size.
TEST(CudaCacheUpdateLarge, StridedViewsMatchCpuBitForBit) {
  REQUIRE_GPU();
  for (DType dt : {DType::BF16, DType::F32})
    for (int64_t bs : {16, 64}) {
      const int64_t tokens = 9000, mapped = 8500;
      Cache cache(dev, CacheLayout::Plain, dt, 2 * tokens / bs + 3, bs);
      Arr kvA = randomArr(dev, dt, {tokens, 576}, -3, 3);
      Arr slots = slotArr(dev, randomSlots(mapped, cache.desc.numSlots()), true);
      auto split = [&](TensorRef t, int64_t off, int64_t n) {
        t.data = static_cast<uint8_t *>(t.data) + off * int64_t(dtypeSize(dt));
        t.sizes[1] = n;
        return t;
      };
      CacheUpdateArgs h{split(kvA.h(), 0, 512), split(kvA.h(), 512, 64), slots.h(), cache.h()};
      CacheUpdateArgs g{split(kvA.d(), 0, 512), split(kvA.d(), 512, 64), slots.d(), cache.d()};
      ASSERT_TRUE(cpu().cacheUpdate(h, nullptr).ok());
      Status s = dev->kernels().cacheUpdate(g, nullptr);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_TRUE(cache.bytes.down(dev) == cache.bytes.host)
          << "cache differs from the CPU reference (" << dtypeName(dt) << ", bs " << bs << ")";
    }
}

// Out-of-range slots (device data) are caught on the device: error status,
// the cache untouched -- for the inline check (small) and the separate
// validation kernel (large).
TEST(CudaCacheUpdateErrors, OutOfRangeSlotWritesNothing) {
  REQUIRE_GPU();
  for (int64_t tokens : {5, 40, 2500}) {
    Cache cache(dev, CacheLayout::Plain, DType::BF16, 200, 16);
    Arr kv = randomArr(dev, DType::BF16, {tokens, 512});
    Arr kp = randomArr(dev, DType::BF16, {tokens, 64});
    auto sl = randomSlots(tokens, cache.desc.numSlots());
    sl[size_t(tokens / 2)] = cache.desc.numSlots() + 3;
    Arr slots = slotArr(dev, sl, true);
    Status s = dev->kernels().cacheUpdate({kv.d(), kp.d(), slots.d(), cache.d()}, nullptr);
    EXPECT_EQ(s.code(), StatusCode::OutOfRange) << s.message();
    EXPECT_NE(s.message().find(std::to_string(cache.desc.numSlots() + 3)), std::string::npos)
        << s.message();
    EXPECT_TRUE(cache.bytes.down(dev) == cache.bytes.host) << "cache was touched";
    // The device stays usable.
    sl[size_t(tokens / 2)] = -1;
    Arr ok = slotArr(dev, sl, true);
    EXPECT_TRUE(dev->kernels().cacheUpdate({kv.d(), kp.d(), ok.d(), cache.d()}, nullptr).ok());
  }
}

// A synchronous check that reports an error consumes it: a later
// asynchronous check (checkErrors after a graph replay) must not report a
// call that already failed as its own.
TEST(CudaCacheUpdateErrors, AReportedErrorIsNotReportedAgain) {
  REQUIRE_GPU();
  Cache cache(dev, CacheLayout::Plain, DType::BF16, 20, 16);
  Arr kv = randomArr(dev, DType::BF16, {4, 512});
  Arr kp = randomArr(dev, DType::BF16, {4, 64});
  Arr slots = slotArr(dev, {0, 1, cache.desc.numSlots() + 7, 3}, true);
  Status s = dev->kernels().cacheUpdate(
      {kv.d(), kp.d(), slots.d(), cache.d()}, nullptr);
  ASSERT_EQ(s.code(), StatusCode::OutOfRange) << s.toString();
  Status again = dev->checkErrors(nullptr);
  EXPECT_TRUE(again.ok()) << again.toString();
}

TEST(CudaCacheUpdateErrors, CheckedModeRefusesProtectedBlocks) {
  REQUIRE_GPU();
  for (int64_t tokens : {8, 2100}) {
    Cache cache(dev, CacheLayout::Plain, DType::BF16, 300, 16);
    Arr wp(dev, DType::F8E4M3FN, {cache.desc.numBlocks});
    std::fill(wp.host.begin(), wp.host.end(), 0);
    wp.host[0] = 1;
    wp.host[7] = 1;
    wp.up(dev);
    Arr kv = randomArr(dev, DType::BF16, {tokens, 512});
    Arr kp = randomArr(dev, DType::BF16, {tokens, 64});
    auto sl = randomSlots(tokens, cache.desc.numSlots(), 16 * 8);
    sl[1] = 7 * 16 + 3;
    Arr slots = slotArr(dev, sl, false);
    uint64_t refused = 0;
    KVCacheRef ref = cache.d();
    ref.writeProtect = static_cast<const uint8_t *>(wp.dev.data());
    ref.refusedWrites = &refused;
    Status s = dev->kernels().cacheUpdate({kv.d(), kp.d(), slots.d(), ref}, nullptr);
    EXPECT_EQ(s.code(), StatusCode::PermissionDenied) << s.message();
    EXPECT_EQ(refused, 1u);
    EXPECT_TRUE(cache.bytes.down(dev) == cache.bytes.host) << "cache was touched";
    // Host-memory flags cannot be read by the kernel: refused up front.
    ref.writeProtect = wp.host.data();
    EXPECT_EQ(dev->kernels().cacheUpdate({kv.d(), kp.d(), slots.d(), ref}, nullptr).code(),
              StatusCode::InvalidArgument);
  }
}

TEST(CudaCacheUpdateErrors, ShapeErrorsAreCaughtOnTheHost) {
  REQUIRE_GPU();
  Cache cache(dev, CacheLayout::Plain, DType::BF16, 4, 16);
  Arr kv = randomArr(dev, DType::BF16, {4, 500});
  Arr kp = randomArr(dev, DType::BF16, {4, 64});
  Arr slots = slotArr(dev, {0, 1, 2, 3}, true);
  EXPECT_EQ(dev->kernels().cacheUpdate({kv.d(), kp.d(), slots.d(), cache.d()}, nullptr).code(),
            StatusCode::InvalidArgument);
}

Arr cosSinTable(CudaDevice *d, int64_t maxPos, int64_t rope) {
  Arr t(d, DType::F32, {maxPos, rope});
  for (int64_t p = 0; p < maxPos; ++p)
    for (int64_t i = 0; i < rope / 2; ++i) {
      const double f = p * std::pow(10000.0, -2.0 * double(i) / double(rope));
      t.set(p * rope + i, float(std::cos(f)));
      t.set(p * rope + rope / 2 + i, float(std::sin(f)));
    }
  t.up(d);
  return t;
}

TEST(CudaRope, MatchesCpuBitForBit) {
  REQUIRE_GPU();
  for (RopeStyle style : {RopeStyle::NeoX, RopeStyle::GptJ})
    for (DType t : {DType::BF16, DType::F32})
      for (int heads : {0, 1, 16}) {
        const int64_t T = 33;
        Arr cs = cosSinTable(dev, 4096, 64);
        Arr x = heads ? randomArr(dev, t, {T, heads, 64}, -2, 2)
                      : randomArr(dev, t, {T, 64}, -2, 2);
        Arr pos(dev, DType::I64, {T});
        std::vector<int64_t> p(static_cast<size_t>(T));
        for (auto &v : p)
          v = int64_t(rng()() % 4096);
        pos.setI64(p);
        pos.up(dev);
        ASSERT_TRUE(cpu().rope({x.h(), pos.h(), cs.h(), style}, nullptr).ok());
        Status s = dev->kernels().rope({x.d(), pos.d(), cs.d(), style}, nullptr);
        ASSERT_TRUE(s.ok()) << s.message();
        EXPECT_TRUE(x.down(dev) == x.host) << "rope differs, heads " << heads;
      }
}

TEST(CudaRope, BadPositionWritesNothing) {
  REQUIRE_GPU();
  Arr cs = cosSinTable(dev, 128, 64);
  Arr x = randomArr(dev, DType::BF16, {9, 4, 64});
  Arr pos(dev, DType::I32, {9});
  pos.setI32({0, 1, 2, 3, 128, 5, 6, 7, 8});
  pos.up(dev);
  Status s = dev->kernels().rope({x.d(), pos.d(), cs.d(), RopeStyle::NeoX}, nullptr);
  EXPECT_EQ(s.code(), StatusCode::OutOfRange) << s.message();
  EXPECT_TRUE(x.down(dev) == x.host);
}

TEST(CudaRopeCacheUpdate, MatchesCpuBitForBit) {
  REQUIRE_GPU();
  struct C {
    CacheLayout layout;
    int64_t T, N;
    int Hq;
    RopeStyle style;
  };
  for (C c : {C{CacheLayout::Plain, 7, 7, 16, RopeStyle::NeoX},
              C{CacheLayout::Plain, 64, 64, 16, RopeStyle::GptJ}, // the V2-Lite step
              C{CacheLayout::Plain, 1, 1, 128, RopeStyle::NeoX},
              C{CacheLayout::Plain, 256, 200, 128, RopeStyle::GptJ},
              C{CacheLayout::Plain, 2100, 2000, 8, RopeStyle::GptJ},
              C{CacheLayout::Plain, 1500, 1500, 16, RopeStyle::NeoX},
              C{CacheLayout::Fp8PerTensor, 40, 40, 16, RopeStyle::NeoX},
              C{CacheLayout::Fp8DsMla, 64, 60, 8, RopeStyle::GptJ}}) {
    Cache cache(dev, c.layout, DType::BF16, 128, 32);
    cache.scale = 0.05f;
    Arr kv = randomArr(dev, DType::BF16, {c.T, 512}, -2, 2);
    Arr kp = randomArr(dev, DType::BF16, {c.T, 64}, -2, 2);
    Arr q = randomArr(dev, DType::BF16, {c.T, c.Hq, 64}, -2, 2);
    Arr kOut(dev, DType::BF16, {c.T, 64});
    kOut.poison();
    kOut.up(dev);
    Arr cs = cosSinTable(dev, 8192, 64);
    Arr pos(dev, DType::I64, {c.T});
    std::vector<int64_t> p(static_cast<size_t>(c.T));
    for (auto &v : p)
      v = int64_t(rng()() % 8192);
    pos.setI64(p);
    pos.up(dev);
    Arr slots = slotArr(dev, randomSlots(c.N, cache.desc.numSlots()), true);
    RopeCacheUpdateArgs h{kv.h(), kp.h(), slots.h(), cache.h(), pos.h(), cs.h(),
                          c.style, q.h(), kOut.h()};
    RopeCacheUpdateArgs g{kv.d(), kp.d(), slots.d(), cache.d(), pos.d(), cs.d(),
                          c.style, q.d(), kOut.d()};
    ASSERT_TRUE(cpu().ropeCacheUpdate(h, nullptr).ok());
    Status s = dev->kernels().ropeCacheUpdate(g, nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(cache.bytes.down(dev) == cache.bytes.host) << "cache, T=" << c.T;
    EXPECT_TRUE(kp.down(dev) == kp.host) << "k_pe, T=" << c.T;
    EXPECT_TRUE(q.down(dev) == q.host) << "q_pe, T=" << c.T;
    EXPECT_TRUE(kOut.down(dev) == kOut.host) << "k_pe_out, T=" << c.T;
  }
}

// The latent norm on the library kernel, every layout: against the CPU
// reference (which normalises exactly like rmsNorm), rows nobody writes
// unchanged, rope and q_pe bit for bit, latent values within one rounding
// of kv_c's type (the sum of squares runs in another order) and, for fp8,
// one fp8 step (tile scales within one bf16 rounding).
TEST(CudaRopeCacheUpdate, LatentNormMatchesCpu) {
  REQUIRE_GPU();
  struct C {
    CacheLayout layout;
    DType weight;
    int64_t T, N;
  };
  for (C c : {C{CacheLayout::Plain, DType::BF16, 7, 6},
              C{CacheLayout::Plain, DType::F32, 64, 64}, // the V2-Lite step
              C{CacheLayout::Plain, DType::BF16, 1500, 1400}, // validated first
              C{CacheLayout::Fp8PerTensor, DType::BF16, 40, 40},
              C{CacheLayout::Fp8DsMla, DType::BF16, 64, 60},
              C{CacheLayout::Fp8DsMla, DType::F32, 1100, 1100}}) {
    SCOPED_TRACE("layout " + std::to_string(int(c.layout)) + " T=" +
                 std::to_string(c.T));
    Cache cache(dev, c.layout, DType::BF16, 128, 32);
    cache.scale = 0.05f;
    const std::vector<uint8_t> init = cache.bytes.host;
    Arr kv = randomArr(dev, DType::BF16, {c.T, 576}, -3, 3);
    Arr kp = randomArr(dev, DType::BF16, {c.T, 64}, -2, 2);
    Arr q = randomArr(dev, DType::BF16, {c.T, 16, 64}, -2, 2);
    Arr w = randomArr(dev, c.weight, {512}, -0.5f, 2.0f);
    Arr cs = cosSinTable(dev, 8192, 64);
    Arr pos(dev, DType::I64, {c.T});
    std::vector<int64_t> p(static_cast<size_t>(c.T));
    for (auto &v : p)
      v = int64_t(rng()() % 8192);
    pos.setI64(p);
    pos.up(dev);
    Arr slots = slotArr(dev, randomSlots(c.N, cache.desc.numSlots()), true);
    auto latent = [](TensorRef t) { // the first 512 of the 576 columns
      t.sizes[1] = 512;
      return t;
    };
    RopeCacheUpdateArgs h{latent(kv.h()), kp.h(), slots.h(), cache.h(),
                          pos.h(), cs.h(), RopeStyle::GptJ, q.h()};
    RopeCacheUpdateArgs g{latent(kv.d()), kp.d(), slots.d(), cache.d(),
                          pos.d(), cs.d(), RopeStyle::GptJ, q.d()};
    h.latentNormWeight = w.h();
    g.latentNormWeight = w.d();
    h.latentNormEpsilon = g.latentNormEpsilon = 1e-6f;
    ASSERT_TRUE(cpu().ropeCacheUpdate(h, nullptr).ok());
    Status s = dev->kernels().ropeCacheUpdate(g, nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(kp.down(dev) == kp.host) << "k_pe";
    EXPECT_TRUE(q.down(dev) == q.host) << "q_pe";
    EXPECT_TRUE(kv.down(dev) == kv.host) << "kv_c was written";

    const std::vector<uint8_t> got = cache.bytes.down(dev);
    const std::vector<uint8_t> &want = cache.bytes.host;
    const KVCacheDesc &d = cache.desc;
    const int64_t row = d.rowBytes();
    // Bytes of the latent values and of the rest (scales, rope) of a row.
    const int64_t latentBytes = c.layout == CacheLayout::Plain ? 1024 : 512;
    const DType latentType =
        c.layout == CacheLayout::Plain ? DType::BF16 : DType::F8E4M3FN;
    int64_t written = 0;
    for (int64_t r = 0; r < d.numSlots(); ++r) {
      const uint8_t *e = want.data() + r * row, *g0 = got.data() + r * row;
      if (std::memcmp(e, init.data() + r * row, size_t(row)) == 0) {
        ASSERT_EQ(std::memcmp(g0, e, size_t(row)), 0) << "unwritten row " << r;
        continue;
      }
      ++written;
      const int64_t rest = c.layout == CacheLayout::Fp8DsMla ? 16 : 0;
      // Rope (and nothing else past the latent and tile scales): exact.
      ASSERT_EQ(std::memcmp(g0 + latentBytes + rest, e + latentBytes + rest,
                            size_t(row - latentBytes - rest)),
                0)
          << "rope part of row " << r;
      for (int64_t t = 0; t < rest / 4; ++t) {
        float se, sg;
        std::memcpy(&se, e + latentBytes + 4 * t, 4);
        std::memcpy(&sg, g0 + latentBytes + 4 * t, 4);
        ASSERT_LE(std::fabs(sg - se), se / 128) << "tile scale " << t;
      }
      // One step of the stored type (1/128 for bf16, 1/8 for e4m3, whose
      // smallest subnormal is 1/512).
      const bool bf16 = latentType == DType::BF16;
      const float step = bf16 ? 1.0f / 128 : 1.0f / 8;
      const float tiny = bf16 ? 1e-30f : 1.0f / 512;
      for (int64_t i = 0; i < 512; ++i) {
        const float ve = loadAsFloat(e, latentType, size_t(i));
        const float vg = loadAsFloat(g0, latentType, size_t(i));
        ASSERT_LE(std::fabs(vg - ve),
                  std::max(std::fabs(ve), std::fabs(vg)) * step + tiny)
            << "row " << r << " latent " << i;
      }
    }
    EXPECT_GT(written, 0);
  }
}

// Rows that are not 16-byte aligned (kv_c row stride 577) with a table
// that allows float4 loads: the row is written element by element, never
// with 16-byte copies (the cos/sin and q_pe bits of the vector mask say
// nothing about the rows).
TEST(CudaRopeCacheUpdate, UnalignedRowsMatchCpu) {
  REQUIRE_GPU();
  const int64_t T = 9;
  Cache cache(dev, CacheLayout::Plain, DType::BF16, 16, 16);
  Arr kv = randomArr(dev, DType::BF16, {T, 577}, -2, 2);
  Arr kp = randomArr(dev, DType::BF16, {T, 64}, -2, 2);
  Arr q = randomArr(dev, DType::BF16, {T, 16, 64}, -2, 2);
  Arr cs = cosSinTable(dev, 128, 64);
  Arr pos(dev, DType::I64, {T});
  std::vector<int64_t> p(static_cast<size_t>(T));
  for (auto &v : p)
    v = int64_t(rng()() % 128);
  pos.setI64(p);
  pos.up(dev);
  Arr slots = slotArr(dev, randomSlots(T, cache.desc.numSlots()), true);
  auto latent = [](TensorRef t) {
    t.sizes[1] = 512;
    return t;
  };
  RopeCacheUpdateArgs h{latent(kv.h()), kp.h(), slots.h(), cache.h(),
                        pos.h(), cs.h(), RopeStyle::NeoX, q.h()};
  RopeCacheUpdateArgs g{latent(kv.d()), kp.d(), slots.d(), cache.d(),
                        pos.d(), cs.d(), RopeStyle::NeoX, q.d()};
  ASSERT_TRUE(cpu().ropeCacheUpdate(h, nullptr).ok());
  Status s = dev->kernels().ropeCacheUpdate(g, nullptr);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(dev->synchronize(nullptr).ok());
  EXPECT_TRUE(cache.bytes.down(dev) == cache.bytes.host) << "cache";
  EXPECT_TRUE(kp.down(dev) == kp.host) << "k_pe";
  EXPECT_TRUE(q.down(dev) == q.host) << "q_pe";
}

// The q_pe rotation issues its loads before the validation vote: a bad
// position (or slot) must still leave q_pe, k_pe and the cache untouched,
// for small (voted) and large (pre-validated) calls; also with a cos/sin
// table whose row stride rules out float4 loads.
TEST(CudaRopeCacheUpdate, BadPositionOrSlotWritesNothing) {
  REQUIRE_GPU();
  for (int64_t T : {9, 64, 1300})
    for (int bad : {0, 1}) {
      Cache cache(dev, CacheLayout::Plain, DType::BF16, 128, 32);
      Arr kv = randomArr(dev, DType::BF16, {T, 512});
      Arr kp = randomArr(dev, DType::BF16, {T, 64});
      Arr q = randomArr(dev, DType::BF16, {T, 16, 64});
      Arr csWide = randomArr(dev, DType::F32, {200, 66});
      TensorRef cs = csWide.d();
      cs.sizes[1] = 64; // row stride 66: scalar cos/sin loads
      std::vector<int64_t> p(static_cast<size_t>(T));
      for (auto &v : p)
        v = int64_t(rng()() % 200);
      auto sl = randomSlots(T, cache.desc.numSlots());
      if (bad == 0)
        p[size_t(T / 2)] = 200 + 1000000; // far out of range
      else
        sl[size_t(T / 3)] = cache.desc.numSlots();
      Arr pos(dev, DType::I64, {T});
      pos.setI64(p);
      pos.up(dev);
      Arr slots = slotArr(dev, sl, true);
      RopeCacheUpdateArgs g{kv.d(), kp.d(), slots.d(), cache.d(), pos.d(), cs,
                            RopeStyle::GptJ, q.d(), TensorRef()};
      Status s = dev->kernels().ropeCacheUpdate(g, nullptr);
      EXPECT_EQ(s.code(), StatusCode::OutOfRange) << s.message();
      EXPECT_TRUE(cache.bytes.down(dev) == cache.bytes.host) << "cache, T=" << T;
      EXPECT_TRUE(kp.down(dev) == kp.host) << "k_pe, T=" << T;
      EXPECT_TRUE(q.down(dev) == q.host) << "q_pe, T=" << T;
      // With the bad entry fixed, the same call matches the CPU bit for bit.
      p[size_t(T / 2)] = 3;
      sl[size_t(T / 3)] = -1;
      pos.setI64(p);
      pos.up(dev);
      Arr okSlots = slotArr(dev, sl, true);
      TensorRef csH = csWide.h();
      csH.sizes[1] = 64;
      RopeCacheUpdateArgs h{kv.h(), kp.h(), okSlots.h(), cache.h(), pos.h(), csH,
                            RopeStyle::GptJ, q.h(), TensorRef()};
      g.slotMapping = okSlots.d();
      ASSERT_TRUE(cpu().ropeCacheUpdate(h, nullptr).ok());
      s = dev->kernels().ropeCacheUpdate(g, nullptr);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_TRUE(cache.bytes.down(dev) == cache.bytes.host) << "cache, T=" << T;
      EXPECT_TRUE(kp.down(dev) == kp.host) << "k_pe, T=" << T;
      EXPECT_TRUE(q.down(dev) == q.host) << "q_pe, T=" << T;
    }
}

// --- Decode attention. -------------------------------------------------------
struct DecodeCase {
  int64_t B, H, blockSize;
  CacheLayout layout;
  DType cacheType, qType;
  int numSplits;
  int64_t maxLen;
  int64_t edgeLens = 0; // 1: lengths 0, 1, 63, 64, 65, 127, 129, ... (int64: no padding bytes in the printed test name)
};

/// The inputs of one decode call, host and device: random finite cache rows,
/// pages in random order, lengths per the case (including 0 and the
/// maximum). Rows past seq_len are NaN (plain caches) and block-table
/// entries past a sequence's last block are garbage: no kernel may read
/// either. refill() draws new values into the same buffers (graph replay).
struct DecodeInputs {
  DecodeCase c;
  int64_t maxBlocks, numBlocks;
  Cache cache;
  Arr tab, len, q, out, lse;
  static constexpr float kScale = 0.07216878f; // 1 / sqrt(192)

  DecodeInputs(CudaDevice *d, const DecodeCase &dc)
      : c(dc), maxBlocks((dc.maxLen + dc.blockSize - 1) / dc.blockSize),
        numBlocks(dc.B * maxBlocks + 3),
        cache(d, dc.layout, dc.cacheType, numBlocks, dc.blockSize),
        tab(d, DType::I32, {dc.B, maxBlocks}), len(d, DType::I32, {dc.B}),
        q(d, dc.qType, {dc.B, dc.H, 576}), out(d, dc.qType, {dc.B, dc.H, 512}),
        lse(d, DType::F32, {dc.B, dc.H}) {
    cache.scale = 0.02f;
    refill(d);
  }

  void refill(CudaDevice *d) {
    // Random finite rows: write random values through the CPU cache update.
    {
      const int64_t n = cache.desc.numSlots();
      const DType in = c.layout == CacheLayout::Plain ? c.cacheType : DType::F32;
      Arr kv(d, in, {n, 512}), kp(d, in, {n, 64});
      kv.random(-1, 1);
      kp.random(-1, 1);
      std::vector<int64_t> s(static_cast<size_t>(n));
      std::iota(s.begin(), s.end(), 0);
      Arr sl(d, DType::I64, {n});
      sl.setI64(s);
      ASSERT_TRUE(cpu().cacheUpdate({kv.h(), kp.h(), sl.h(), cache.h()}, nullptr).ok());
    }
    std::vector<int32_t> ids(static_cast<size_t>(numBlocks - 1));
    std::iota(ids.begin(), ids.end(), 1);
    std::shuffle(ids.begin(), ids.end(), rng());
    std::vector<int32_t> table(static_cast<size_t>(c.B * maxBlocks)),
        lens(static_cast<size_t>(c.B));
    for (int64_t b = 0; b < c.B; ++b) {
      lens[size_t(b)] = b == 0 ? int32_t(c.maxLen)
                               : (b == 1 && c.B > 2 ? 0 : int32_t(rng()() % (c.maxLen + 1)));
      if (c.edgeLens) {
        const int64_t edge[] = {c.maxLen, 0, 1, 63, 64, 65, 127, 129, -1};
        const int64_t e = edge[b % 9];
        lens[size_t(b)] = e < 0 ? int32_t(rng()() % (c.maxLen + 1))
                                : int32_t(std::min(e, c.maxLen));
      }
      for (int64_t j = 0; j < maxBlocks; ++j)
        table[size_t(b * maxBlocks + j)] = ids[size_t(b * maxBlocks + j)];
    }
    if (c.layout == CacheLayout::Plain)
      for (int64_t b = 0; b < c.B; ++b)
        for (int64_t pos = lens[size_t(b)]; pos < maxBlocks * c.blockSize; ++pos) {
          const int64_t slot = table[size_t(b * maxBlocks + pos / c.blockSize)] * c.blockSize +
                               pos % c.blockSize;
          for (int64_t i = 0; i < 576; ++i)
            storeFromFloat(cache.bytes.host.data() + slot * cache.desc.rowBytes(),
                           c.cacheType, size_t(i), NAN);
        }
    const int32_t garbage[] = {-1, INT32_MAX, int32_t(numBlocks), INT32_MIN};
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t j = (lens[size_t(b)] + c.blockSize - 1) / c.blockSize; j < maxBlocks; ++j)
        table[size_t(b * maxBlocks + j)] = garbage[(b + j) % 4];
    cache.bytes.up(d);
    tab.setI32(table);
    tab.up(d);
    len.setI32(lens);
    len.up(d);
    q.random(-1, 1);
    q.up(d);
    out.poison();
    lse.poison();
    out.up(d);
    lse.up(d);
  }
  DecodeAttentionArgs hostArgs() {
    return {q.h(), cache.h(), tab.h(), len.h(), kScale, out.h(), lse.h(), c.numSplits};
  }
  DecodeAttentionArgs deviceArgs() {
    return {q.d(), cache.d(), tab.d(), len.d(), kScale, out.d(), lse.d(), c.numSplits};
  }
  /// Runs the CPU reference on the host copies and compares the device's
  /// out and lse with it.
  void expectMatchesCpu(CudaDevice *d, const std::string &what) {
    ASSERT_TRUE(cpu().decodeAttention(hostArgs(), nullptr).ok());
    const double eOut = relErr(out, out.down(d));
    EXPECT_LT(eOut, c.qType == DType::F32 ? 1e-4 : 1.5e-2) << "out, " << what;
    auto lg = lse.down(d);
    double maxDiff = 0;
    for (int64_t i = 0; i < lse.numel(); ++i) {
      const float r = lse.get(i), gv = loadAsFloat(lg.data(), DType::F32, size_t(i));
      if (std::isinf(r) && r == gv)
        continue;
      maxDiff = std::max(maxDiff, std::isnan(gv) ? INFINITY : double(std::fabs(r - gv)));
    }
    EXPECT_LT(maxDiff, 2e-2) << "lse, " << what;
  }
};

class CudaDecode : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(CudaDecode, MatchesCpu) {
  REQUIRE_GPU();
  DecodeInputs in(dev, GetParam());
  Status s = dev->kernels().decodeAttention(in.deviceArgs(), nullptr);
  ASSERT_TRUE(s.ok()) << s.message();
  in.expectMatchesCpu(dev, "eager");
}

INSTANTIATE_TEST_SUITE_P(
    Grid, CudaDecode,
    ::testing::Values(
        DecodeCase{4, 16, 16, CacheLayout::Plain, DType::BF16, DType::BF16, 0,
                   1000},
        DecodeCase{3, 16, 32, CacheLayout::Plain, DType::BF16, DType::BF16, 1,
                   300},
        DecodeCase{5, 32, 64, CacheLayout::Plain, DType::BF16, DType::BF16, 3,
                   777},
        DecodeCase{2, 128, 64, CacheLayout::Plain, DType::BF16, DType::BF16, 0,
                   2048},
        DecodeCase{3, 128, 16, CacheLayout::Plain, DType::BF16, DType::BF16, 2,
                   200},
        // H a multiple of 64: the many-heads (wgmma) kernel.
        DecodeCase{9, 64, 64, CacheLayout::Plain, DType::BF16, DType::BF16, 0,
                   200, 1},
        DecodeCase{9, 128, 64, CacheLayout::Plain, DType::BF16, DType::BF16, 1,
                   130, 1},
        DecodeCase{7, 64, 32, CacheLayout::Plain, DType::BF16, DType::BF16, 3,
                   300, 1},
        DecodeCase{5, 128, 16, CacheLayout::Plain, DType::BF16, DType::BF16, 0,
                   777},
        DecodeCase{1, 64, 64, CacheLayout::Plain, DType::BF16, DType::BF16, 5,
                   4001},
        DecodeCase{3, 192, 64, CacheLayout::Plain, DType::BF16, DType::BF16, 0,
                   1500},
        // Block size 16 (four TMA boxes a tile), 128 (a tile is part of a
        // block) and 8 (below the TMA kernel's minimum: the cp.async one).
        DecodeCase{9, 64, 16, CacheLayout::Plain, DType::BF16, DType::BF16, 2,
                   300, 1},
        DecodeCase{9, 64, 128, CacheLayout::Plain, DType::BF16, DType::BF16, 3,
                   400, 1},
        DecodeCase{9, 64, 8, CacheLayout::Plain, DType::BF16, DType::BF16, 0,
                   150, 1},
        DecodeCase{2, 64, 64, CacheLayout::Plain, DType::BF16, DType::F32, 2,
                   333},
        DecodeCase{3, 5, 16, CacheLayout::Plain, DType::F32, DType::F32, 0,
                   150},
        DecodeCase{3, 16, 32, CacheLayout::Plain, DType::BF16, DType::F32, 0,
                   150},
        DecodeCase{2, 3, 16, CacheLayout::Fp8DsMla, DType::BF16, DType::BF16, 0,
                   100},
        DecodeCase{2, 4, 64, CacheLayout::Fp8PerTensor, DType::BF16, DType::F32,
                   0, 130},
        DecodeCase{3, 16, 32, CacheLayout::Fp8PerTensor, DType::F8E5M2,
                   DType::BF16, 2, 300}));

/// A length past the block table and a block id outside the cache are
/// reported as OutOfRange (and the bad block never read).
void expectBadSeqLenReported(CudaDevice *dev, int64_t H,
                             DecodeSchedule schedule = DecodeSchedule::Default) {
  SCOPED_TRACE("H=" + std::to_string(H));
  Cache cache(dev, CacheLayout::Plain, DType::BF16, 8, 16);
  Arr tab(dev, DType::I32, {1, 2});
  tab.setI32({1, 2});
  tab.up(dev);
  Arr len(dev, DType::I32, {1});
  len.setI32({33});
  len.up(dev);
  Arr q = randomArr(dev, DType::BF16, {1, H, 576});
  Arr out(dev, DType::BF16, {1, H, 512});
  Status s = dev->kernels().decodeAttention(
      {q.d(), cache.d(), tab.d(), len.d(), 0.1f, out.d(), {}, 0, schedule},
      nullptr);
  EXPECT_EQ(s.code(), StatusCode::OutOfRange) << s.message();
  tab.setI32({1, 99});
  tab.up(dev);
  len.setI32({20});
  len.up(dev);
  s = dev->kernels().decodeAttention(
      {q.d(), cache.d(), tab.d(), len.d(), 0.1f, out.d(), {}, 0, schedule},
      nullptr);
  EXPECT_EQ(s.code(), StatusCode::OutOfRange) << s.message();
}

TEST(CudaDecodeErrors, BadSeqLenIsReported) {
  REQUIRE_GPU();
  for (int64_t H : {16, 64})
    expectBadSeqLenReported(dev, H);
}

// The many-heads decode inside a CUDA graph (H=128, B=9: that path without
// forcing; its TMA descriptor is a __grid_constant__ launch argument, copied
// at capture): replays after new values were written into the same buffers
// (cache, block table, lengths, q) match the CPU, unsplit and split.
TEST(CudaDecodeGraph, ManyHeadsReplaysWithNewData) {
  REQUIRE_GPU();
  StatusOr<Stream> stream = dev->createStream();
  ASSERT_TRUE(stream.ok()) << stream.status().message();
  StreamHandle st = stream->handle();
  for (int splits : {1, 3}) {
    const std::string tag = "splits " + std::to_string(splits);
    DecodeInputs in(dev, DecodeCase{9, 128, 32, CacheLayout::Plain, DType::BF16,
                                    DType::BF16, splits, 300, 1});
    Status s = dev->kernels().decodeAttention(in.deviceArgs(), st);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_TRUE(dev->synchronize(st).ok());
    in.expectMatchesCpu(dev, "eager, " + tag);
    ASSERT_TRUE(dev->beginCapture(st).ok());
    s = dev->kernels().decodeAttention(in.deviceArgs(), st);
    StatusOr<GraphHandle> graph = dev->endCapture(st);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_TRUE(graph.ok()) << graph.status().message();
    for (int replay = 0; replay < 3; ++replay) {
      in.refill(dev);
      ASSERT_TRUE(dev->synchronize().ok());
      s = dev->launchGraph(*graph, st);
      ASSERT_TRUE(s.ok()) << s.message();
      ASSERT_TRUE(dev->synchronize(st).ok());
      in.expectMatchesCpu(dev, "replay " + std::to_string(replay) + ", " + tag);
    }
    dev->destroyGraph(*graph);
  }
}

// --- Decode splits merged inside a thread-block cluster. --------------------
// The 16-head kernel merges 2..8 splits through distributed shared memory;
// setDecodeClusterMerge (the MLART_DECODE_CLUSTER knob) switches back to the
// workspace + combine kernel, so every case runs both ways.
struct ClusterMergeSetting {
  bool previous;
  explicit ClusterMergeSetting(bool on)
      : previous(cuda::setDecodeClusterMerge(on)) {}
  ~ClusterMergeSetting() { cuda::setDecodeClusterMerge(previous); }
};

/// Scales the valid rows of split `s(b)` of every sequence by `factor`
/// (latent and rope: keys and values), so that split's scores and hence its
/// LSE dwarf the others': a merge with wrong weights is far off.
void scaleOneSplit(DecodeInputs &in, CudaDevice *d, int splits, float factor) {
  const auto lens = in.len.host;
  for (int64_t b = 0; b < in.c.B; ++b) {
    int32_t len;
    std::memcpy(&len, lens.data() + 4 * b, 4);
    const int64_t tiles = (len + 63) / 64, per = (tiles + splits - 1) / splits;
    const int64_t s = b % splits;
    const int64_t p1 = std::min<int64_t>(len, (s + 1) * per * 64);
    for (int64_t pos = s * per * 64; pos < p1; ++pos) {
      int32_t id;
      std::memcpy(&id,
                  in.tab.host.data() +
                      4 * (b * in.maxBlocks + pos / in.c.blockSize),
                  4);
      uint8_t *row = in.cache.bytes.host.data() +
                     (id * in.c.blockSize + pos % in.c.blockSize) *
                         in.cache.desc.rowBytes();
      for (size_t i = 0; i < 576; ++i)
        storeFromFloat(row, in.c.cacheType, i,
                       factor * loadAsFloat(row, in.c.cacheType, i));
    }
  }
  in.cache.bytes.up(d);
}

// How many clusters of each size the device holds (logged: the split
// heuristic counts waves of smCount CTAs; with the cluster merge a wave is
// clusters x size CTAs). Every size must fit, or the merge never runs.
TEST(CudaDecodeCluster, EverySizeFits) {
  REQUIRE_GPU();
  for (int size = 1; size <= cuda::kMaxClusterSplits; ++size) {
    StatusOr<int> n = cuda::decodeMaxActiveClusters(size);
    ASSERT_TRUE(n.ok()) << n.status().message();
    std::printf("[cluster] size %d: %d clusters = %d CTAs a wave\n", size, *n,
                *n * size);
    EXPECT_GT(*n, 0) << "size " << size;
  }
}

// The cluster merge is taken only when it costs no extra wave.
TEST(CudaDecodeCluster, MergeOnlyWithoutAnExtraWave) {
  // No GPU needed: the rule itself, with the H200's capacities.
  EXPECT_TRUE(cuda::clusterMergeKeepsWaves(128, 2, 66, 132));   // step shape
  EXPECT_FALSE(cuda::clusterMergeKeepsWaves(128, 4, 30, 132));  // 2 waves
  EXPECT_TRUE(cuda::clusterMergeKeepsWaves(96, 4, 30, 132));    // 24 clusters
  EXPECT_TRUE(cuda::clusterMergeKeepsWaves(288, 8, 15, 132));   // 3 = 3 waves
  EXPECT_FALSE(cuda::clusterMergeKeepsWaves(252, 7, 15, 132));  // 3 > 2
  EXPECT_FALSE(cuda::clusterMergeKeepsWaves(16, 2, 0, 132));    // no capacity
}

// Forced splits 2..8 (the cluster sizes) on the 16-head kernel, H 16 and 32,
// lengths 0, 1, 63, 64, 65, 127, 129, the maximum and random (so some
// splits hold no tile), bf16 and f32 output, with and without the cluster
// merge; once with one split of each sequence dominating the softmax. With
// 18 sequences some sizes would need an extra wave of clusters and take the
// combine kernel; with 4 every size merges in its cluster.
TEST(CudaDecodeCluster, ForcedSplitsMatchCpuBothWays) {
  REQUIRE_GPU();
  int merged = 0;
  for (bool cluster : {true, false}) {
    ClusterMergeSetting setting(cluster);
    for (int64_t B : {4, 18})
    for (int splits = 2; splits <= cuda::kMaxClusterSplits; ++splits)
      for (int64_t H : {16, 32})
        for (int variant = 0; variant < 3; ++variant) {
          const std::string tag = std::string(cluster ? "cluster" : "combine") +
                                  ", B " + std::to_string(B) +
                                  ", splits " + std::to_string(splits) +
                                  ", H " + std::to_string(H) +
                                  (variant == 1 ? ", f32 out" : "") +
                                  (variant == 2 ? ", one split dominates" : "");
          SCOPED_TRACE(tag);
          StatusOr<int> capacity = cuda::decodeMaxActiveClusters(splits);
          ASSERT_TRUE(capacity.ok());
          const bool expectCluster =
              cluster && cuda::clusterMergeKeepsWaves(
                             splits * B * (H / 16), splits, *capacity,
                             dev->multiprocessorCount());
          merged += expectCluster;
          DecodeInputs in(dev, DecodeCase{B, H, variant == 1 ? 32 : 64,
                                          CacheLayout::Plain, DType::BF16,
                                          DType::BF16, splits, 600, 1});
          if (variant == 1) {
            in.out = Arr(dev, DType::F32, {in.c.B, H, 512});
            in.out.poison();
            in.out.up(dev);
          }
          if (variant == 2)
            scaleOneSplit(in, dev, splits, 8.0f);
          const uint64_t before = cuda::decodeClusterLaunchCount();
          Status s = dev->kernels().decodeAttention(in.deviceArgs(), nullptr);
          ASSERT_TRUE(s.ok()) << s.message();
          EXPECT_EQ(cuda::decodeClusterLaunchCount() - before,
                    expectCluster ? 1u : 0u)
              << "the cluster path was (not) taken";
          in.expectMatchesCpu(dev, tag);
        }
  }
  EXPECT_GE(merged, 2 * 7 * 3) << "B=4 merges at every size";
}

// Above 8 splits the combine kernel runs even with the cluster merge on.
TEST(CudaDecodeCluster, MoreThanEightSplitsUseTheCombineKernel) {
  REQUIRE_GPU();
  ClusterMergeSetting setting(true);
  for (int splits : {9, 16}) {
    SCOPED_TRACE("splits " + std::to_string(splits));
    DecodeInputs in(dev, DecodeCase{9, 16, 64, CacheLayout::Plain, DType::BF16,
                                    DType::BF16, splits, 1100, 1});
    scaleOneSplit(in, dev, splits, 8.0f);
    const uint64_t before = cuda::decodeClusterLaunchCount();
    Status s = dev->kernels().decodeAttention(in.deviceArgs(), nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(cuda::decodeClusterLaunchCount(), before);
    in.expectMatchesCpu(dev, "splits " + std::to_string(splits));
  }
}

// The cluster launch inside a CUDA graph: replays with new data match.
TEST(CudaDecodeGraph, ClusterMergeReplaysWithNewData) {
  REQUIRE_GPU();
  ClusterMergeSetting setting(true);
  StatusOr<Stream> stream = dev->createStream();
  ASSERT_TRUE(stream.ok()) << stream.status().message();
  StreamHandle st = stream->handle();
  for (int splits : {2, 8}) {
    const std::string tag = "splits " + std::to_string(splits);
    DecodeInputs in(dev, DecodeCase{9, 32, 64, CacheLayout::Plain, DType::BF16,
                                    DType::BF16, splits, 700, 1});
    Status s = dev->kernels().decodeAttention(in.deviceArgs(), st);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_TRUE(dev->synchronize(st).ok());
    in.expectMatchesCpu(dev, "eager, " + tag);
    const uint64_t before = cuda::decodeClusterLaunchCount();
    ASSERT_TRUE(dev->beginCapture(st).ok());
    s = dev->kernels().decodeAttention(in.deviceArgs(), st);
    StatusOr<GraphHandle> graph = dev->endCapture(st);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_TRUE(graph.ok()) << graph.status().message();
    EXPECT_EQ(cuda::decodeClusterLaunchCount() - before, 1u);
    for (int replay = 0; replay < 3; ++replay) {
      in.refill(dev);
      if (replay == 2)
        scaleOneSplit(in, dev, splits, 8.0f);
      ASSERT_TRUE(dev->synchronize().ok());
      s = dev->launchGraph(*graph, st);
      ASSERT_TRUE(s.ok()) << s.message();
      ASSERT_TRUE(dev->synchronize(st).ok());
      in.expectMatchesCpu(dev, "replay " + std::to_string(replay) + ", " + tag);
    }
    dev->destroyGraph(*graph);
  }
}

// --- The balanced schedule (DecodeSchedule.h). ------------------------------
// DecodeAttentionArgs::schedule = Balanced cuts all sequences' tiles evenly
// over the SMs; the MLART_DECODE_BALANCE knob makes it the default.
DecodeAttentionArgs balancedArgs(DecodeInputs &in) {
  DecodeAttentionArgs a = in.deviceArgs();
  a.schedule = DecodeSchedule::Balanced;
  return a;
}

/// Overrides MLART_DECODE_BALANCE for a scope.
struct BalanceKnob {
  explicit BalanceKnob(bool on) {
    cuda::setKnobOverride(cuda::Knob::DecodeBalance, on ? 1 : 0);
  }
  ~BalanceKnob() { cuda::setKnobOverride(cuda::Knob::DecodeBalance, std::nullopt); }
};

// Mixed lengths (the maximum, 0 and random, or the edge set), 16 to 48
// heads, block sizes 64 and 32, bf16 and f32 output: one short sequence
// (fewer tiles than CTAs, every CTA a piece of it), one long one (132
// pieces), batches whose CTA ranges cut sequences anywhere, and more than
// 128 items (the start search's second chunk). Once with a third of every
// sequence dominating its softmax, so that a wrong merge weight shows, and
// once with every length 0.
TEST(CudaDecodeBalanced, MatchesCpu) {
  REQUIRE_GPU();
  struct Case {
    int64_t B, H, maxLen, edge;
  };
  const Case cases[] = {{1, 16, 100, 0},   {1, 16, 8000, 0}, {3, 16, 5000, 0},
                        {9, 16, 700, 1},   {18, 32, 1100, 1}, {64, 16, 4096, 0},
                        {150, 16, 300, 0}, {5, 48, 2000, 0}};
  for (const Case &k : cases)
    for (int variant = 0; variant < 4; ++variant) {
      const std::string tag = "B " + std::to_string(k.B) + ", H " +
                              std::to_string(k.H) + ", L " +
                              std::to_string(k.maxLen) +
                              (variant == 1 ? ", f32 out, block 32" : "") +
                              (variant == 2 ? ", a third dominates" : "") +
                              (variant == 3 ? ", every length 0" : "");
      SCOPED_TRACE(tag);
      DecodeInputs in(dev, DecodeCase{k.B, k.H, variant == 1 ? 32 : 64,
                                      CacheLayout::Plain, DType::BF16,
                                      DType::BF16, 0, k.maxLen, k.edge});
      if (variant == 1) {
        in.out = Arr(dev, DType::F32, {in.c.B, k.H, 512});
        in.out.poison();
        in.out.up(dev);
      }
      if (variant == 2)
        scaleOneSplit(in, dev, 3, 8.0f);
      if (variant == 3) {
        in.len.setI32(std::vector<int32_t>(size_t(k.B), 0));
        in.len.up(dev);
      }
      const uint64_t before = cuda::decodeBalancedLaunchCount();
      Status s = dev->kernels().decodeAttention(balancedArgs(in), nullptr);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(cuda::decodeBalancedLaunchCount() - before, 1u)
          << "the balanced schedule was not taken";
      in.expectMatchesCpu(dev, tag);
    }
}

// A forced split count keeps the per-sequence splits; bad lengths and
// block ids are reported from the balanced kernel as from the others.
TEST(CudaDecodeBalanced, ForcedSplitsAndErrors) {
  REQUIRE_GPU();
  DecodeInputs in(dev, DecodeCase{4, 16, 64, CacheLayout::Plain, DType::BF16,
                                  DType::BF16, 3, 900, 1});
  const uint64_t before = cuda::decodeBalancedLaunchCount();
  Status s = dev->kernels().decodeAttention(balancedArgs(in), nullptr);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(cuda::decodeBalancedLaunchCount(), before);
  in.expectMatchesCpu(dev, "forced 3 splits");
  expectBadSeqLenReported(dev, 16, DecodeSchedule::Balanced);
  EXPECT_GT(cuda::decodeBalancedLaunchCount(), before);
}

// The per-call schedule (DecodeAttentionArgs::schedule) overrides the knob
// both ways; a value outside the enum is refused and writes nothing.
TEST(CudaDecodeBalanced, PerCallScheduleOverridesTheKnob) {
  REQUIRE_GPU();
  for (bool knob : {false, true}) {
    BalanceKnob setting(knob);
    for (DecodeSchedule sched : {DecodeSchedule::PerSequence,
                                 DecodeSchedule::Balanced}) {
      const std::string tag =
          std::string(knob ? "knob on, " : "knob off, ") +
          (sched == DecodeSchedule::Balanced ? "balanced" : "per-sequence");
      SCOPED_TRACE(tag);
      DecodeInputs in(dev, DecodeCase{11, 16, 64, CacheLayout::Plain,
                                      DType::BF16, DType::BF16, 0, 1500, 1});
      DecodeAttentionArgs a = in.deviceArgs();
      a.schedule = sched;
      const uint64_t before = cuda::decodeBalancedLaunchCount();
      Status s = dev->kernels().decodeAttention(a, nullptr);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(cuda::decodeBalancedLaunchCount() - before,
                sched == DecodeSchedule::Balanced ? 1u : 0u);
      in.expectMatchesCpu(dev, tag);
    }
  }
  DecodeInputs in(dev, DecodeCase{2, 16, 64, CacheLayout::Plain, DType::BF16,
                                  DType::BF16, 0, 200, 0});
  DecodeAttentionArgs a = in.deviceArgs();
  a.schedule = static_cast<DecodeSchedule>(7);
  const std::vector<uint8_t> poisoned = in.out.down(dev);
  EXPECT_EQ(dev->kernels().decodeAttention(a, nullptr).code(),
            StatusCode::InvalidArgument);
  EXPECT_EQ(in.out.down(dev), poisoned) << "a refused call wrote the output";
}

// Captured once, replayed with new lengths: the schedule is computed on the
// device, so each replay cuts the new mix where it falls.
TEST(CudaDecodeGraph, BalancedReplaysWithNewLengths) {
  REQUIRE_GPU();
  StatusOr<Stream> stream = dev->createStream();
  ASSERT_TRUE(stream.ok()) << stream.status().message();
  StreamHandle st = stream->handle();
  DecodeInputs in(dev, DecodeCase{37, 16, 64, CacheLayout::Plain, DType::BF16,
                                  DType::BF16, 0, 3000, 0});
  ASSERT_TRUE(dev->beginCapture(st).ok());
  Status s = dev->kernels().decodeAttention(balancedArgs(in), st);
  StatusOr<GraphHandle> graph = dev->endCapture(st);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(graph.ok()) << graph.status().message();
  for (int replay = 0; replay < 4; ++replay) {
    in.refill(dev);
    if (replay == 3)
      scaleOneSplit(in, dev, 2, 8.0f);
    ASSERT_TRUE(dev->synchronize().ok());
    s = dev->launchGraph(*graph, st);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_TRUE(dev->synchronize(st).ok());
    in.expectMatchesCpu(dev, "replay " + std::to_string(replay));
  }
  dev->destroyGraph(*graph);
}

// --- decode_attention_with_update in one launch (DecodeStepWrite.h). --------
/// Overrides MLART_DECODE_STEP_WRITE for a scope.
struct StepWriteKnob {
  explicit StepWriteKnob(bool on) {
    cuda::setKnobOverride(cuda::Knob::DecodeStepWrite, on ? 1 : 0);
  }
  ~StepWriteKnob() {
    cuda::setKnobOverride(cuda::Knob::DecodeStepWrite, std::nullopt);
  }
};

/// Which rows a test step writes besides each sequence's last one.
enum class Extra {
  None,
  /// A row in the middle of sequence 0 (a tile of another CTA than its
  /// last) and a padding token (slot -1).
  OtherTile,
  /// Those, and two tokens writing sequence 0's first row: the later one
  /// must win (the CPU's and the one launch's rule; cacheUpdate's CUDA
  /// kernel keeps one of them).
  OtherTileAndTwice,
};

/// One decode step's rows for `in` (bf16, i32 slots): token b writes the
/// last position of sequence b (slot -1 for an empty one), plus `extra`.
struct StepRows {
  Arr kv, kp, slots;
  StepRows(CudaDevice *d, DecodeInputs &in, Extra extra) {
    const int64_t bs = in.c.blockSize;
    std::vector<int32_t> table(size_t(in.c.B * in.maxBlocks)),
        lens(size_t(in.c.B));
    std::memcpy(table.data(), in.tab.host.data(), table.size() * 4);
    std::memcpy(lens.data(), in.len.host.data(), lens.size() * 4);
    auto slotOf = [&](int64_t b, int64_t pos) {
      return table[size_t(b * in.maxBlocks + pos / bs)] * int32_t(bs) +
             int32_t(pos % bs);
    };
    std::vector<int32_t> s;
    s.reserve(size_t(in.c.B + 4));
    for (int64_t b = 0; b < in.c.B; ++b)
      s.push_back(lens[size_t(b)] > 0 ? slotOf(b, lens[size_t(b)] - 1) : -1);
    if (extra != Extra::None && lens[0] > 2) {
      s.push_back(slotOf(0, lens[0] / 2));
      s.push_back(-1);
    }
    if (extra == Extra::OtherTileAndTwice && lens[0] > 2) {
      s.push_back(slotOf(0, 0));
      s.push_back(slotOf(0, 0));
    }
    const int64_t T = int64_t(s.size());
    kv = randomArr(d, DType::BF16, {T, 512});
    kp = randomArr(d, DType::BF16, {T, 64});
    slots = Arr(d, DType::I32, {T});
    slots.setI32(s);
    slots.up(d);
  }
  DecodeAttentionWithUpdateArgs args(const DecodeAttentionArgs &a,
                                     bool device) {
    DecodeAttentionWithUpdateArgs f;
    f.kvC = device ? kv.d() : kv.h();
    f.kPe = device ? kp.d() : kp.h();
    f.slotMapping = device ? slots.d() : slots.h();
    f.q = a.q;
    f.cache = a.cache;
    f.blockTable = a.blockTable;
    f.seqLens = a.seqLens;
    f.softmaxScale = a.softmaxScale;
    f.out = a.out;
    f.lse = a.lse;
    f.numSplits = a.numSplits;
    f.schedule = a.schedule;
    return f;
  }
};

/// Runs decodeAttentionWithUpdate on the device (asynchronous checks: the
/// one-launch path's mode) and on the CPU, and compares the whole cache bit
/// for bit and the outputs within tolerance; `fused`: the one-launch path
/// must (not) have been taken.
void expectStepWriteMatchesCpu(CudaDevice *d, DecodeInputs &in, StepRows &rows,
                               DecodeSchedule schedule, bool fused,
                               const std::string &what) {
  DecodeAttentionArgs da = in.deviceArgs(), ha = in.hostArgs();
  da.schedule = ha.schedule = schedule;
  const uint64_t before = cuda::decodeStepWriteLaunchCount();
  d->setSynchronousChecks(false);
  Status s =
      d->kernels().decodeAttentionWithUpdate(rows.args(da, true), nullptr);
  d->setSynchronousChecks(true);
  ASSERT_TRUE(s.ok()) << what << ": " << s.message();
  ASSERT_TRUE(d->synchronize().ok());
  ASSERT_TRUE(d->checkErrors(nullptr).ok()) << what;
  EXPECT_EQ(cuda::decodeStepWriteLaunchCount() - before, fused ? 1u : 0u)
      << what << ": the one-launch path was (not) taken";
  ASSERT_TRUE(
      cpu().decodeAttentionWithUpdate(rows.args(ha, false), nullptr).ok());
  EXPECT_TRUE(in.cache.bytes.down(d) == in.cache.bytes.host)
      << what << ": the cache differs from the CPU's";
  // The CPU's outputs, against which expectMatchesCpu compares, come from
  // the updated cache (its decodeAttention re-runs on it).
  in.expectMatchesCpu(d, what);
}

// The one launch stores the step's rows and attends over them: the cache
// is the CPU's bit for bit and the outputs match, across block sizes (16:
// four pages a tile; 128: a tile inside a page), split counts (the cluster
// merge and the combine kernel), head counts, the balanced schedule, and
// tokens that write another CTA's tile or one slot twice.
TEST(CudaDecodeStepWrite, OneLaunchMatchesCpu) {
  REQUIRE_GPU();
  struct Case {
    int64_t B, H, blockSize, maxLen;
    int splits;
    DecodeSchedule schedule;
  };
  const Case cases[] = {
      {4, 16, 64, 1000, 0, DecodeSchedule::Default},
      {9, 16, 16, 700, 3, DecodeSchedule::Default},
      {5, 32, 128, 900, 2, DecodeSchedule::Default},
      {3, 16, 64, 2000, 12, DecodeSchedule::Default},
      {18, 16, 32, 1100, 0, DecodeSchedule::Balanced},
      {130, 16, 64, 300, 0, DecodeSchedule::Default},
  };
  for (const Case &k : cases)
    for (Extra extra : {Extra::None, Extra::OtherTileAndTwice}) {
      const std::string tag =
          "B " + std::to_string(k.B) + ", H " + std::to_string(k.H) +
          ", page " + std::to_string(k.blockSize) + ", splits " +
          std::to_string(k.splits) +
          (k.schedule == DecodeSchedule::Balanced ? ", balanced" : "") +
          (extra != Extra::None ? ", extra rows" : "");
      SCOPED_TRACE(tag);
      DecodeInputs in(dev, DecodeCase{k.B, k.H, k.blockSize, CacheLayout::Plain,
                                      DType::BF16, DType::BF16, k.splits,
                                      k.maxLen, 1});
      StepRows rows(dev, in, extra);
      expectStepWriteMatchesCpu(dev, in, rows, k.schedule, true, tag);
    }
}

// Calls the one launch does not take run cacheUpdate first and are right:
// the knob off, checked mode, the many-heads kernel, an fp8 cache.
TEST(CudaDecodeStepWrite, OtherCallsUpdateFirst) {
  REQUIRE_GPU();
  {
    StepWriteKnob off(false);
    DecodeInputs in(dev, DecodeCase{4, 16, 64, CacheLayout::Plain, DType::BF16,
                                    DType::BF16, 0, 500, 1});
    StepRows rows(dev, in, Extra::OtherTile);
    expectStepWriteMatchesCpu(dev, in, rows, DecodeSchedule::Default, false,
                              "knob off");
  }
  {
    DecodeInputs in(dev, DecodeCase{9, 128, 64, CacheLayout::Plain, DType::BF16,
                                    DType::BF16, 0, 300, 1});
    StepRows rows(dev, in, Extra::OtherTile);
    expectStepWriteMatchesCpu(dev, in, rows, DecodeSchedule::Default, false,
                              "many heads");
  }
  {
    // Checked mode: the update's validation first, then the decode.
    DecodeInputs in(dev, DecodeCase{4, 16, 64, CacheLayout::Plain, DType::BF16,
                                    DType::BF16, 0, 500, 1});
    StepRows rows(dev, in, Extra::OtherTile);
    const uint64_t before = cuda::decodeStepWriteLaunchCount();
    Status s = dev->kernels().decodeAttentionWithUpdate(
        rows.args(in.deviceArgs(), true), nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(cuda::decodeStepWriteLaunchCount(), before);
    ASSERT_TRUE(
        cpu()
            .decodeAttentionWithUpdate(rows.args(in.hostArgs(), false), nullptr)
            .ok());
    EXPECT_TRUE(in.cache.bytes.down(dev) == in.cache.bytes.host);
    in.expectMatchesCpu(dev, "checked mode");
  }
}

// A slot outside the cache: the one launch stores no row and substitutes
// none (the outputs are the old cache's), and checkErrors reports it.
TEST(CudaDecodeStepWrite, BadSlotStoresNothing) {
  REQUIRE_GPU();
  DecodeInputs in(dev, DecodeCase{4, 16, 64, CacheLayout::Plain, DType::BF16,
                                  DType::BF16, 0, 500, 1});
  StepRows rows(dev, in, Extra::None);
  std::vector<int32_t> s(size_t(rows.slots.numel()));
  std::memcpy(s.data(), rows.slots.host.data(), s.size() * 4);
  s.back() = int32_t(in.cache.desc.numSlots());
  rows.slots.setI32(s);
  rows.slots.up(dev);
  dev->setSynchronousChecks(false);
  Status st = dev->kernels().decodeAttentionWithUpdate(
      rows.args(in.deviceArgs(), true), nullptr);
  dev->setSynchronousChecks(true);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(dev->synchronize().ok());
  EXPECT_EQ(dev->checkErrors(nullptr).code(), StatusCode::OutOfRange);
  EXPECT_TRUE(in.cache.bytes.down(dev) == in.cache.bytes.host)
      << "a row was stored";
  in.expectMatchesCpu(dev, "bad slot: the old cache's attention");
}

// The one launch inside a CUDA graph: replays with new rows, lengths and
// slots store and attend like the CPU.
TEST(CudaDecodeGraph, StepWriteReplaysWithNewData) {
  REQUIRE_GPU();
  StatusOr<Stream> stream = dev->createStream();
  ASSERT_TRUE(stream.ok()) << stream.status().message();
  StreamHandle st = stream->handle();
  DecodeInputs in(dev, DecodeCase{9, 16, 64, CacheLayout::Plain, DType::BF16,
                                  DType::BF16, 0, 700, 1});
  StepRows rows(dev, in, Extra::None);
  const uint64_t before = cuda::decodeStepWriteLaunchCount();
  ASSERT_TRUE(dev->beginCapture(st).ok());
  Status s = dev->kernels().decodeAttentionWithUpdate(
      rows.args(in.deviceArgs(), true), st);
  StatusOr<GraphHandle> graph = dev->endCapture(st);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(graph.ok()) << graph.status().message();
  EXPECT_EQ(cuda::decodeStepWriteLaunchCount() - before, 1u);
  for (int replay = 0; replay < 3; ++replay) {
    SCOPED_TRACE("replay " + std::to_string(replay));
    in.refill(dev);
    StepRows fresh(dev, in, Extra::None);
    // Same buffers, new values: the graph's pointers stay valid.
    std::memcpy(rows.kv.host.data(), fresh.kv.host.data(), rows.kv.host.size());
    std::memcpy(rows.kp.host.data(), fresh.kp.host.data(), rows.kp.host.size());
    std::memcpy(rows.slots.host.data(), fresh.slots.host.data(),
                rows.slots.host.size());
    rows.kv.up(dev);
    rows.kp.up(dev);
    rows.slots.up(dev);
    ASSERT_TRUE(dev->synchronize().ok());
    ASSERT_TRUE(dev->launchGraph(*graph, st).ok());
    ASSERT_TRUE(dev->synchronize(st).ok());
    ASSERT_TRUE(dev->checkErrors(nullptr).ok());
    ASSERT_TRUE(
        cpu()
            .decodeAttentionWithUpdate(rows.args(in.hostArgs(), false), nullptr)
            .ok());
    EXPECT_TRUE(in.cache.bytes.down(dev) == in.cache.bytes.host);
    in.expectMatchesCpu(dev, "replay " + std::to_string(replay));
  }
  dev->destroyGraph(*graph);
}

// --- Prefill. ----------------------------------------------------------------
// One packed prefill batch: requests by queryStartLoc (tokens past its end
// are padding), optional cached context per request.
struct PrefillCase {
  DType dt = DType::BF16;    ///< q, k, v
  DType outDt = DType::BF16; ///< out
  int64_t H = 4;
  std::vector<int32_t> qsl;
  int64_t T = 0;
  std::vector<int32_t> ctxLens; ///< empty: no context
  std::optional<DType> weightDt; ///< W_UK, W_UV; unset: q's dtype
  bool totalLens = false; ///< pass ctx + new tokens (lensIncludeNewTokens)
  CacheLayout layout = CacheLayout::Plain; ///< of the cached context
  DType cacheFp8 = DType::F8E4M3FN;        ///< a per-tensor cache's encoding
  int64_t ctxBound = 0; ///< PrefillAttentionArgs::contextLenBound
  DType weights() const { return weightDt.value_or(dt); }
};

/// The prefill forces MLART_PREFILL_FLASH to `flash` while alive.
struct PrefillFlashKnob {
  explicit PrefillFlashKnob(bool flash) {
    cuda::setKnobOverride(cuda::Knob::PrefillFlash, flash ? 1 : 0);
  }
  ~PrefillFlashKnob() {
    cuda::setKnobOverride(cuda::Knob::PrefillFlash, std::nullopt);
  }
};

/// Runs `c` on the CPU and the GPU (fresh random inputs, poisoned outputs)
/// and compares out and LSE.
void expectPrefillMatchesCpu(CudaDevice *dev, const PrefillCase &c) {
  const int64_t H = c.H, nope = 128, rope = 64, vDim = 128, T = c.T;
  const int64_t R = int64_t(c.qsl.size()) - 1;
  Arr q = randomArr(dev, c.dt, {T, H, nope + rope});
  Arr k = randomArr(dev, c.dt, {T, H, nope + rope});
  Arr v = randomArr(dev, c.dt, {T, H, vDim});
  Arr loc(dev, DType::I32, {R + 1});
  loc.setI32(c.qsl);
  loc.up(dev);
  Arr out(dev, c.outDt, {T, H, vDim}), lse(dev, DType::F32, {T, H});
  out.poison();
  out.up(dev);
  lse.poison();
  lse.up(dev);
  const float scale = 1.0f / std::sqrt(192.0f);
  PrefillAttentionArgs h{q.h(), k.h(), v.h(), loc.h(), scale, out.h(), lse.h()};
  PrefillAttentionArgs g{q.d(), k.d(), v.d(), loc.d(), scale, out.d(), lse.d()};
  const int64_t maxBlocks = 8, blockSize = 16;
  Cache cache(dev, c.layout,
              c.layout == CacheLayout::Fp8PerTensor ? c.cacheFp8 : DType::BF16,
              40, blockSize);
  if (c.layout == CacheLayout::Fp8PerTensor)
    cache.scale = 0.02f;
  Arr tab(dev, DType::I32, {std::max<int64_t>(R, 1), maxBlocks});
  Arr clen(dev, DType::I32, {std::max<int64_t>(R, 1)});
  Arr wuk = randomArr(dev, c.weights(), {H, nope, 512}, -0.1f, 0.1f);
  Arr wuv = randomArr(dev, c.weights(), {H, 512, vDim}, -0.1f, 0.1f);
  if (!c.ctxLens.empty()) {
    {
      const int64_t n = cache.desc.numSlots();
      Arr kv(dev, DType::BF16, {n, 512}), kp(dev, DType::BF16, {n, 64});
      kv.random();
      kp.random();
      std::vector<int64_t> sl(static_cast<size_t>(n));
      std::iota(sl.begin(), sl.end(), 0);
      Arr slots(dev, DType::I64, {n});
      slots.setI64(sl);
      ASSERT_TRUE(
          cpu().cacheUpdate({kv.h(), kp.h(), slots.h(), cache.h()}, nullptr).ok());
      cache.bytes.up(dev);
    }
    std::vector<int32_t> t(static_cast<size_t>(R * maxBlocks));
    for (size_t i = 0; i < t.size(); ++i)
      t[i] = int32_t(1 + (i * 7) % 39);
    tab.setI32(t);
    tab.up(dev);
    std::vector<int32_t> lens = c.ctxLens;
    if (c.totalLens)
      for (size_t r = 0; r < lens.size(); ++r)
        lens[r] += c.qsl[r + 1] - c.qsl[r];
    clen.setI32(lens);
    clen.up(dev);
    h.lensIncludeNewTokens = g.lensIncludeNewTokens = c.totalLens;
    h.contextLenBound = g.contextLenBound = c.ctxBound;
    h.cache = cache.h();
    g.cache = cache.d();
    h.blockTable = tab.h();
    g.blockTable = tab.d();
    h.contextLens = clen.h();
    g.contextLens = clen.d();
    h.wUK = wuk.h();
    g.wUK = wuk.d();
    h.wUV = wuv.h();
    g.wUV = wuv.d();
  }
  ASSERT_TRUE(cpu().prefillAttention(h, nullptr).ok());
  Status s = dev->kernels().prefillAttention(g, nullptr);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_LT(relErr(out, out.down(dev)), 1.5e-2);
  auto lg = lse.down(dev);
  int lseBad = 0;
  for (int64_t i = 0; i < lse.numel(); ++i) {
    const float r = lse.get(i), gv = loadAsFloat(lg.data(), DType::F32, size_t(i));
    const bool ok = std::isinf(r) ? r == gv : std::fabs(r - gv) <= 2e-2;
    if (!ok && ++lseBad <= 5)
      ADD_FAILURE() << "lse " << i << ": cpu " << r << ", gpu " << gv;
  }
}

TEST(CudaPrefill, MatchesCpuWithAndWithoutContext) {
  REQUIRE_GPU();
  for (bool flash : {true, false}) {
    const PrefillFlashKnob knob(flash);
    for (bool ctx : {false, true}) {
      SCOPED_TRACE(std::string(flash ? "flash" : "CUDA cores") +
                   (ctx ? ", context" : ""));
      const uint64_t before = cuda::prefillFlashLaunchCount();
      const uint64_t expanded = cuda::prefillContextExpansionCount();
      PrefillCase c;
      c.qsl = {0, 5, 5, 37, 40};
      c.T = 42; // two padding tokens
      if (ctx)
        c.ctxLens = {17, 0, 64, 3};
      expectPrefillMatchesCpu(dev, c);
      // With context the flash route is two launches: context, new tokens.
      EXPECT_EQ(cuda::prefillFlashLaunchCount() - before,
                flash ? (ctx ? 2u : 1u) : 0u);
      EXPECT_EQ(cuda::prefillContextExpansionCount() - expanded,
                flash && ctx ? 1u : 0u);
    }
  }
}

// The tensor-core kernel's 64-token chunks: requests of 1, 63, 64, 65 and
// 200 tokens that start and end inside chunks, an empty request, padding,
// context of 0..128 tokens, both input dtypes and three output dtypes.
TEST(CudaPrefillFlash, MatchesCpuAcrossChunksAndRequests) {
  REQUIRE_GPU();
  const PrefillFlashKnob knob(true);
  for (DType dt : {DType::BF16, DType::F16})
    for (DType outDt : {DType::BF16, DType::F32, DType::F16})
      for (bool ctx : {false, true}) {
        if (outDt == DType::F16 && dt == DType::BF16)
          continue;
        SCOPED_TRACE(std::string(dtypeName(dt)) + " -> " + dtypeName(outDt) +
                     (ctx ? ", context" : ""));
        const uint64_t before = cuda::prefillFlashLaunchCount();
        const uint64_t expanded = cuda::prefillContextExpansionCount();
        PrefillCase c;
        c.dt = dt;
        c.outDt = outDt;
        c.H = 3;
        c.qsl = {0, 1, 64, 128, 128, 193, 393};
        c.T = 400;
        if (ctx)
          c.ctxLens = {0, 17, 128, 5, 64, 1};
        expectPrefillMatchesCpu(dev, c);
        EXPECT_EQ(cuda::prefillFlashLaunchCount() - before, ctx ? 2u : 1u);
        EXPECT_EQ(cuda::prefillContextExpansionCount() - expanded,
                  ctx ? 1u : 0u);
      }
}

// One long request: whole unmasked tiles far from the diagonal.
TEST(CudaPrefillFlash, LongRequestMatchesCpu) {
  REQUIRE_GPU();
  const PrefillFlashKnob knob(true);
  PrefillCase c;
  c.H = 2;
  c.qsl = {0, 1000};
  c.T = 1000;
  expectPrefillMatchesCpu(dev, c);
}

// The compiler's artifacts pass total lengths (context + new tokens):
// every route must subtract the new tokens (the CUDA kernels used to read
// the new tokens' slots as context).
TEST(CudaPrefillFlash, TotalLengthsMatchCpu) {
  REQUIRE_GPU();
  for (bool flash : {true, false}) {
    const PrefillFlashKnob knob(flash);
    SCOPED_TRACE(flash ? "flash" : "CUDA cores");
    PrefillCase c;
    c.qsl = {0, 30, 100, 101};
    c.T = 101;
    c.ctxLens = {40, 0, 27};
    c.totalLens = true;
    expectPrefillMatchesCpu(dev, c);
  }
}

// The expansion's gather dequantises every cache layout.
TEST(CudaPrefillFlash, ContextFromFp8CachesMatchesCpu) {
  REQUIRE_GPU();
  const PrefillFlashKnob knob(true);
  struct Layout {
    CacheLayout layout;
    DType fp8;
  };
  for (Layout l : {Layout{CacheLayout::Fp8PerTensor, DType::F8E4M3FN},
                   Layout{CacheLayout::Fp8PerTensor, DType::F8E5M2},
                   Layout{CacheLayout::Fp8DsMla, DType::F8E4M3FN}}) {
    SCOPED_TRACE(std::string(cacheLayoutName(l.layout)) + " " +
                 dtypeName(l.fp8));
    const uint64_t expanded = cuda::prefillContextExpansionCount();
    PrefillCase c;
    c.layout = l.layout;
    c.cacheFp8 = l.fp8;
    c.qsl = {0, 64, 100};
    c.T = 100;
    c.ctxLens = {100, 7};
    expectPrefillMatchesCpu(dev, c);
    EXPECT_EQ(cuda::prefillContextExpansionCount() - expanded, 1u);
  }
}

// Weights of another dtype than q cannot feed the expansion GEMMs: the
// flash kernel takes the new tokens and the CUDA-core kernel the context.
TEST(CudaPrefillFlash, ContextWithF32WeightsTakesTheMixedRoute) {
  REQUIRE_GPU();
  const PrefillFlashKnob knob(true);
  const uint64_t before = cuda::prefillFlashLaunchCount();
  const uint64_t expanded = cuda::prefillContextExpansionCount();
  PrefillCase c;
  c.qsl = {0, 70, 90};
  c.T = 96;
  c.ctxLens = {33, 128};
  c.weightDt = DType::F32;
  expectPrefillMatchesCpu(dev, c);
  EXPECT_EQ(cuda::prefillFlashLaunchCount() - before, 1u);
  EXPECT_EQ(cuda::prefillContextExpansionCount() - expanded, 0u);
}

// The expanded context lives in the device's scratch pool, which keeps it
// between calls: an eager prefill must not re-map its workspace after
// every synchronisation (the default pool returns everything, ~1 ms for a
// 230 MB expansion), and emptyCache gives it back.
TEST(CudaPrefillFlash, ContextWorkspaceStaysInTheScratchPool) {
  REQUIRE_GPU();
  const PrefillFlashKnob knob(true);
  ASSERT_TRUE(dev->synchronize().ok());
  ASSERT_TRUE(dev->emptyCache().ok());
  EXPECT_EQ(dev->scratchBytes(), 0u);
  PrefillCase c;
  c.qsl = {0, 40, 64};
  c.T = 64;
  c.ctxLens = {90, 128};
  expectPrefillMatchesCpu(dev, c);
  ASSERT_TRUE(dev->synchronize().ok());
  // Two requests x 128 padded rows: the latent rows alone are 256 KiB.
  const size_t held = dev->scratchBytes();
  EXPECT_GE(held, size_t(2 * 128 * 512 * 2));
  expectPrefillMatchesCpu(dev, c);
  ASSERT_TRUE(dev->synchronize().ok());
  EXPECT_EQ(dev->scratchBytes(), held) << "the second call re-reserved";
  ASSERT_TRUE(dev->emptyCache().ok());
  EXPECT_EQ(dev->scratchBytes(), 0u);
}

// A host-side bound on the context shrinks the expansion from the block
// table's capacity (8 blocks x 16 = 128 rows a request) to the bound, with
// the same result; total lengths are bounded by their context part (and
// must themselves fit the table: 80 + 40 <= 128).
TEST(CudaPrefillFlash, ContextBoundShrinksTheExpansion) {
  REQUIRE_GPU();
  const PrefillFlashKnob knob(true);
  PrefillCase c;
  c.qsl = {0, 40, 64};
  c.T = 64;
  c.ctxLens = {80, 37};
  uint64_t calls = cuda::prefillContextExpansionCount();
  uint64_t rows = cuda::prefillContextExpandedRows();
  expectPrefillMatchesCpu(dev, c);
  EXPECT_EQ(cuda::prefillContextExpansionCount() - calls, 1u);
  EXPECT_EQ(cuda::prefillContextExpandedRows() - rows, 2u * 128u);
  for (bool total : {false, true}) {
    SCOPED_TRACE(total ? "total lengths" : "context lengths");
    c.totalLens = total;
    c.ctxBound = 80;
    calls = cuda::prefillContextExpansionCount();
    rows = cuda::prefillContextExpandedRows();
    expectPrefillMatchesCpu(dev, c);
    EXPECT_EQ(cuda::prefillContextExpansionCount() - calls, 1u);
    EXPECT_EQ(cuda::prefillContextExpandedRows() - rows, 2u * 80u);
  }
}

// Context lengths and block ids are device data too: a length past the
// block table's capacity, a negative context (total lengths shorter than
// the new tokens) and a block id outside the cache are reported on every
// route, and nothing outside the cache is read (memcheck).
TEST(CudaPrefillFlash, MalformedContextIsReported) {
  REQUIRE_GPU();
  const int64_t T = 40, H = 2, maxBlocks = 4, blockSize = 16;
  Arr q = randomArr(dev, DType::BF16, {T, H, 192});
  Arr k = randomArr(dev, DType::BF16, {T, H, 192});
  Arr v = randomArr(dev, DType::BF16, {T, H, 128});
  Arr out(dev, DType::BF16, {T, H, 128});
  Arr loc(dev, DType::I32, {3});
  loc.setI32({0, 20, 40});
  loc.up(dev);
  Cache cache(dev, CacheLayout::Plain, DType::BF16, 10, blockSize);
  Arr wuk = randomArr(dev, DType::BF16, {H, 128, 512}, -0.1f, 0.1f);
  Arr wuv = randomArr(dev, DType::BF16, {H, 512, 128}, -0.1f, 0.1f);
  struct Bad {
    const char *what;
    std::vector<int32_t> lens, table;
    bool total;
    int64_t bound = 0;
  };
  const std::vector<int32_t> goodTable = {0, 1, 2, 3, 4, 5, 6, 7};
  for (const Bad &bad :
       {Bad{"length past capacity", {10, 65}, goodTable, false},
        Bad{"negative context", {10, 5}, goodTable, true},
        Bad{"block id outside the cache", {10, 40},
            {0, 1, 2, 3, 4, 5, 1000, 7}, false},
        Bad{"length past the host-side bound", {10, 40}, goodTable, false,
            39}})
    for (bool flash : {true, false}) {
      const PrefillFlashKnob knob(flash);
      SCOPED_TRACE(std::string(bad.what) + (flash ? ", flash" : ", CUDA cores"));
      Arr tab(dev, DType::I32, {2, maxBlocks});
      tab.setI32(bad.table);
      tab.up(dev);
      Arr clen(dev, DType::I32, {2});
      clen.setI32(bad.lens);
      clen.up(dev);
      PrefillAttentionArgs g{q.d(), k.d(), v.d(), loc.d(), 0.1f, out.d(), {}};
      g.cache = cache.d();
      g.blockTable = tab.d();
      g.contextLens = clen.d();
      g.wUK = wuk.d();
      g.wUV = wuv.d();
      g.lensIncludeNewTokens = bad.total;
      g.contextLenBound = bad.bound;
      Status s = dev->kernels().prefillAttention(g, nullptr);
      EXPECT_EQ(s.code(), StatusCode::OutOfRange) << s.message();
    }
}

// Request bounds are device data: bounds that decrease, or an end past the
// tokens, are reported, and no row outside [0, T) is read (memcheck).
TEST(CudaPrefillFlash, MalformedBoundsAreReported) {
  REQUIRE_GPU();
  for (bool flash : {true, false}) {
    const PrefillFlashKnob knob(flash);
    SCOPED_TRACE(flash ? "flash" : "CUDA cores");
    const int64_t T = 70, H = 2;
    Arr q = randomArr(dev, DType::BF16, {T, H, 192});
    Arr k = randomArr(dev, DType::BF16, {T, H, 192});
    Arr v = randomArr(dev, DType::BF16, {T, H, 128});
    Arr out(dev, DType::BF16, {T, H, 128});
    for (const std::vector<int32_t> &qsl :
         {std::vector<int32_t>{0, 50, 20, 70}, std::vector<int32_t>{-5, 30, 70},
          std::vector<int32_t>{0, 30, 71}}) {
      Arr loc(dev, DType::I32, {int64_t(qsl.size())});
      loc.setI32(qsl);
      loc.up(dev);
      Status s = dev->kernels().prefillAttention(
          {q.d(), k.d(), v.d(), loc.d(), 0.1f, out.d(), {}}, nullptr);
      EXPECT_EQ(s.code(), StatusCode::OutOfRange)
          << qsl[1] << ": " << s.message();
    }
  }
}

// --- Small kernels. ----------------------------------------------------------
// Shapes for the 16-byte bf16 paths (the V2-Lite step's) and for their
// fallbacks (widths not a multiple of 8, rows too long for registers).
TEST(CudaSmallKernels, VectorAndFallbackPaths) {
  REQUIRE_GPU();
  for (int64_t dim : {2048, 512, 8, 13, 4104, 8200}) {
    const int64_t rows = dim > 4096 ? 3 : 64;
    Arr x = randomArr(dev, DType::BF16, {rows, dim}, -2, 2);
    Arr w = randomArr(dev, DType::BF16, {dim}, 0.5f, 1.5f);
    Arr o(dev, DType::BF16, {rows, dim});
    o.poison();
    o.up(dev);
    ASSERT_TRUE(cpu().rmsNorm({x.h(), w.h(), 1e-6f, o.h()}, nullptr).ok());
    ASSERT_TRUE(dev->kernels().rmsNorm({x.d(), w.d(), 1e-6f, o.d()}, nullptr).ok());
    EXPECT_LT(relErr(o, o.down(dev)), 8e-3) << "rmsNorm dim " << dim;
    Arr y = randomArr(dev, DType::BF16, {rows, dim});
    Arr s(dev, DType::BF16, {rows, dim});
    s.poison();
    s.up(dev);
    ASSERT_TRUE(cpu().add({x.h(), y.h(), s.h()}, nullptr).ok());
    ASSERT_TRUE(dev->kernels().add({x.d(), y.d(), s.d()}, nullptr).ok());
    EXPECT_TRUE(s.down(dev) == s.host) << "add dim " << dim;
  }
  struct QC { DType t; int64_t B, H, La, Lb; };
  for (QC c : {QC{DType::BF16, 64, 16, 512, 64}, QC{DType::F32, 5, 3, 512, 64},
               QC{DType::BF16, 7, 5, 12, 4}, QC{DType::F16, 3, 2, 16, 8}}) {
    Arr a = randomArr(dev, c.t, {c.B, c.H, c.La});
    Arr b = randomArr(dev, c.t, {c.B, c.H, c.Lb});
    Arr o(dev, c.t, {c.B, c.H, c.La + c.Lb});
    o.poison();
    o.up(dev);
    ASSERT_TRUE(cpu().qConcat({a.h(), b.h(), o.h()}, nullptr).ok());
    ASSERT_TRUE(dev->kernels().qConcat({a.d(), b.d(), o.d()}, nullptr).ok());
    EXPECT_TRUE(o.down(dev) == o.host) << "qConcat La " << c.La << " Lb " << c.Lb;
  }
}

TEST(CudaSmallKernels, RmsNormAddConcatQuantize) {
  REQUIRE_GPU();
  for (DType t : {DType::BF16, DType::F32}) {
    Arr x = randomArr(dev, t, {37, 1000}, -2, 2);
    Arr w = randomArr(dev, t, {1000}, 0.5f, 1.5f);
    Arr o(dev, t, {37, 1000});
    o.poison();
    o.up(dev);
    ASSERT_TRUE(cpu().rmsNorm({x.h(), w.h(), 1e-6f, o.h()}, nullptr).ok());
    ASSERT_TRUE(dev->kernels().rmsNorm({x.d(), w.d(), 1e-6f, o.d()}, nullptr).ok());
    EXPECT_LT(relErr(o, o.down(dev)), t == DType::F32 ? 1e-6 : 8e-3) << "rmsNorm";

    Arr y = randomArr(dev, t, {37, 1000});
    Arr s(dev, t, {37, 1000});
    s.poison();
    s.up(dev);
    ASSERT_TRUE(cpu().add({x.h(), y.h(), s.h()}, nullptr).ok());
    ASSERT_TRUE(dev->kernels().add({x.d(), y.d(), s.d()}, nullptr).ok());
    EXPECT_TRUE(s.down(dev) == s.host) << "add";
  }
  {
    Arr a = randomArr(dev, DType::BF16, {9, 16, 512});
    Arr b = randomArr(dev, DType::BF16, {9, 16, 64});
    for (DType ot : {DType::BF16, DType::F8E4M3FN, DType::F32}) {
      Arr o(dev, ot, {9, 16, 576});
      o.poison();
      o.up(dev);
      ASSERT_TRUE(cpu().qConcat({a.h(), b.h(), o.h()}, nullptr).ok());
      ASSERT_TRUE(dev->kernels().qConcat({a.d(), b.d(), o.d()}, nullptr).ok());
      EXPECT_TRUE(o.down(dev) == o.host) << "qConcat " << dtypeName(ot);
    }
  }
  {
    Arr x = randomArr(dev, DType::BF16, {3, 5, 7, 11}, -500, 500);
    Arr sc(dev, DType::F32, {1});
    sc.set(0, 0.7f);
    sc.up(dev);
    Arr o(dev, DType::F8E4M3FN, {3, 5, 7, 11});
    o.poison();
    o.up(dev);
    ASSERT_TRUE(cpu().quantize({x.h(), sc.h(), o.h()}, nullptr).ok());
    ASSERT_TRUE(dev->kernels().quantize({x.d(), sc.d(), o.d()}, nullptr).ok());
    EXPECT_TRUE(o.down(dev) == o.host) << "quantize";
    sc.set(0, 0.0f);
    sc.up(dev);
    auto before = o.down(dev);
    EXPECT_EQ(dev->kernels().quantize({x.d(), sc.d(), o.d()}, nullptr).code(),
              StatusCode::InvalidArgument);
    EXPECT_TRUE(o.down(dev) == before);
  }
}

TEST(CudaGemm, QAbsorbVUpLinear) {
  REQUIRE_GPU();
  const int64_t B = 7, H = 16;
  Arr qn = randomArr(dev, DType::BF16, {B, H, 128});
  Arr wuk = randomArr(dev, DType::BF16, {H, 128, 512}, -0.2f, 0.2f);
  // Strided output: the latent part of the assembled [B, H, 576] query.
  Arr qfull(dev, DType::BF16, {B, H, 576});
  qfull.poison();
  qfull.up(dev);
  auto view = [](TensorRef t) {
    t.sizes[2] = 512;
    return t;
  };
  Status s = cpu().qAbsorb({qn.h(), wuk.h(), view(qfull.h())}, nullptr);
  ASSERT_TRUE(s.ok()) << s.message();
  s = dev->kernels().qAbsorb({qn.d(), wuk.d(), view(qfull.d())}, nullptr);
  if (s.code() == StatusCode::Unavailable)
    GTEST_SKIP() << s.message();
  ASSERT_TRUE(s.ok()) << s.message();
  {
    auto got = qfull.down(dev);
    double num = 0, den = 0;
    for (int64_t r = 0; r < B * H; ++r)
      for (int64_t c = 0; c < 576; ++c) {
        const int64_t i = r * 576 + c;
        const float ref = qfull.get(i), g = loadAsFloat(got.data(), DType::BF16, size_t(i));
        if (c >= 512) {
          EXPECT_TRUE(std::isnan(g)) << "wrote past the view";
          continue;
        }
        num += (g - ref) * (g - ref);
        den += ref * ref;
      }
    EXPECT_LT(std::sqrt(num / den), 1e-2);
  }
  Arr ol = randomArr(dev, DType::BF16, {B, H, 512});
  Arr wuv = randomArr(dev, DType::BF16, {H, 512, 128}, -0.2f, 0.2f);
  Arr vo(dev, DType::BF16, {B, H, 128});
  vo.poison();
  vo.up(dev);
  ASSERT_TRUE(cpu().vUp({ol.h(), wuv.h(), vo.h()}, nullptr).ok());
  ASSERT_TRUE(dev->kernels().vUp({ol.d(), wuv.d(), vo.d()}, nullptr).ok());
  EXPECT_LT(relErr(vo, vo.down(dev)), 1e-2);

  Arr x = randomArr(dev, DType::BF16, {33, 300});
  Arr w = randomArr(dev, DType::BF16, {200, 300}, -0.1f, 0.1f);
  Arr lo(dev, DType::BF16, {33, 200});
  lo.poison();
  lo.up(dev);
  ASSERT_TRUE(cpu().linear({x.h(), w.h(), lo.h()}, nullptr).ok());
  ASSERT_TRUE(dev->kernels().linear({x.d(), w.d(), lo.d()}, nullptr).ok());
  EXPECT_LT(relErr(lo, lo.down(dev)), 1e-2);
}

// The compiled decode step assembles its query in place (no q_concat):
// q_absorb writes the [.., 0:512] view of [B, H, 576] (row stride H * 576,
// head stride 576; for B = 1 cuBLAS gets ldc = max(stride, N)). The latent
// columns start as NaN, the rope columns as random values that must survive
// bit for bit.
TEST(CudaGemm, QAbsorbIntoTheAssembledQuery) {
  REQUIRE_GPU();
  const int64_t latent = 512, rope = 64, row = latent + rope;
  struct C {
    int64_t B, H;
  };
  for (C c : {C{1, 16}, C{64, 16}, C{2, 128}}) {
    SCOPED_TRACE("B=" + std::to_string(c.B) + " H=" + std::to_string(c.H));
    Arr qn = randomArr(dev, DType::BF16, {c.B, c.H, 128});
    Arr wuk = randomArr(dev, DType::BF16, {c.H, 128, latent}, -0.2f, 0.2f);
    Arr query(dev, DType::BF16, {c.B, c.H, row});
    query.random();
    for (int64_t r = 0; r < c.B * c.H; ++r)
      for (int64_t col = 0; col < latent; ++col)
        query.set(r * row + col, NAN);
    query.up(dev);
    const std::vector<uint8_t> before = query.host;
    auto view = [&](TensorRef t) {
      t.sizes[2] = latent;
      return t;
    };
    ASSERT_EQ(view(query.d()).strides[0], c.H * row);
    ASSERT_EQ(view(query.d()).strides[1], row);
    Status s = cpu().qAbsorb({qn.h(), wuk.h(), view(query.h())}, nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    s = dev->kernels().qAbsorb({qn.d(), wuk.d(), view(query.d())}, nullptr);
    if (s.code() == StatusCode::Unavailable)
      GTEST_SKIP() << s.message();
    ASSERT_TRUE(s.ok()) << s.message();
    const std::vector<uint8_t> got = query.down(dev);
    double num = 0, den = 0;
    for (int64_t r = 0; r < c.B * c.H; ++r) {
      for (int64_t col = 0; col < latent; ++col) {
        const size_t i = size_t(r * row + col);
        const double g = loadAsFloat(got.data(), DType::BF16, i);
        const double ref = query.get(int64_t(i));
        ASSERT_FALSE(std::isnan(g)) << "row " << r << " col " << col;
        num += (g - ref) * (g - ref);
        den += ref * ref;
      }
      const size_t tail = size_t(r * row + latent) * 2;
      ASSERT_EQ(std::memcmp(got.data() + tail, before.data() + tail,
                            size_t(rope) * 2),
                0)
          << "rope columns of row " << r;
    }
    EXPECT_LT(std::sqrt(num / den), 1e-2);
  }
}

// The same assembled query's rope columns: the fused rope + update rotates
// q_pe through the strided view [.., 512:576] (row stride H * 576) exactly
// as the CPU does, and leaves the latent columns untouched.
TEST(CudaRopeCacheUpdate, StridedQPeViewMatchesCpuBitForBit) {
  REQUIRE_GPU();
  const int64_t latent = 512, rope = 64, row = latent + rope;
  struct C {
    int64_t T;
    int H;
    RopeStyle style;
  };
  for (C c : {C{1, 16, RopeStyle::GptJ}, C{64, 16, RopeStyle::GptJ},
              C{7, 128, RopeStyle::NeoX}, C{300, 16, RopeStyle::NeoX}}) {
    SCOPED_TRACE("T=" + std::to_string(c.T) + " H=" + std::to_string(c.H));
    Cache cache(dev, CacheLayout::Plain, DType::BF16, 128, 32);
    Arr kv = randomArr(dev, DType::BF16, {c.T, latent}, -2, 2);
    Arr kp = randomArr(dev, DType::BF16, {c.T, rope}, -2, 2);
    Arr query = randomArr(dev, DType::BF16, {c.T, c.H, row}, -2, 2);
    const std::vector<uint8_t> before = query.host;
    Arr cs = cosSinTable(dev, 8192, rope);
    Arr pos(dev, DType::I64, {c.T});
    std::vector<int64_t> p(static_cast<size_t>(c.T));
    for (auto &v : p)
      v = 1 + int64_t(rng()() % 8191); // position 0 would not rotate
    pos.setI64(p);
    pos.up(dev);
    Arr slots = slotArr(dev, randomSlots(c.T, cache.desc.numSlots()), true);
    auto view = [&](TensorRef t) {
      t.data = static_cast<uint8_t *>(t.data) + latent * 2;
      t.sizes[2] = rope;
      return t;
    };
    RopeCacheUpdateArgs h{kv.h(), kp.h(), slots.h(), cache.h(), pos.h(),
                          cs.h(), c.style, view(query.h()), TensorRef()};
    RopeCacheUpdateArgs g{kv.d(), kp.d(), slots.d(), cache.d(), pos.d(),
                          cs.d(), c.style, view(query.d()), TensorRef()};
    ASSERT_TRUE(cpu().ropeCacheUpdate(h, nullptr).ok());
    Status s = dev->kernels().ropeCacheUpdate(g, nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    const std::vector<uint8_t> got = query.down(dev);
    EXPECT_TRUE(got == query.host) << "assembled query";
    EXPECT_TRUE(cache.bytes.down(dev) == cache.bytes.host) << "cache";
    EXPECT_TRUE(kp.down(dev) == kp.host) << "k_pe";
    bool rotated = false;
    for (int64_t r = 0; r < c.T * c.H; ++r) {
      const size_t at = size_t(r * row) * 2;
      ASSERT_EQ(std::memcmp(got.data() + at, before.data() + at,
                            size_t(latent) * 2),
                0)
          << "latent columns of row " << r;
      rotated = rotated || std::memcmp(got.data() + at + latent * 2,
                                       before.data() + at + latent * 2,
                                       size_t(rope) * 2) != 0;
    }
    EXPECT_TRUE(rotated);
  }
}

// Out-of-place q_pe (what the compiled decode step does, no copy before the
// call): q_pe is read from the strided view of q_proj's output [T, H * 192]
// (the last 64 of each head's 192 columns) and its rotation written to the
// rope columns of the assembled query [T, H, 576], whose old contents are
// poison. Bit-identical to the CPU reference (itself equal to the in-place
// rotation), the source and the latent columns untouched; small (voted) and
// large (pre-validated) calls, the vector path (bf16, 16-byte rows) and the
// generic one (f16; and a source that is not 16-byte aligned); a bad slot
// writes nothing, neither the destination nor the source.
TEST(CudaRopeCacheUpdate, OutOfPlaceQPeMatchesCpuBitForBit) {
  REQUIRE_GPU();
  const int64_t latent = 512, rope = 64, nope = 128, row = latent + rope;
  struct C {
    int64_t T;
    int H;
    RopeStyle style;
    DType type;
    int64_t skew; // elements the source is shifted by (1: unaligned)
  };
  for (C c : {C{1, 16, RopeStyle::GptJ, DType::BF16, 0},
              C{4, 16, RopeStyle::GptJ, DType::BF16, 0}, // the V2-Lite step
              C{7, 128, RopeStyle::NeoX, DType::BF16, 0},
              C{1300, 16, RopeStyle::NeoX, DType::BF16, 0},
              C{9, 16, RopeStyle::GptJ, DType::BF16, 1},
              C{33, 8, RopeStyle::NeoX, DType::F16, 0}}) {
    SCOPED_TRACE("T=" + std::to_string(c.T) + " H=" + std::to_string(c.H) +
                 " skew=" + std::to_string(c.skew));
    const int64_t qRow = c.H * (nope + rope) + 8; // room for the skew
    Cache cache(dev, CacheLayout::Plain, c.type, 128, 32);
    Arr kv = randomArr(dev, c.type, {c.T, latent}, -2, 2);
    Arr kp = randomArr(dev, c.type, {c.T, rope}, -2, 2);
    Arr qProj = randomArr(dev, c.type, {c.T, qRow}, -2, 2);
    Arr query = randomArr(dev, c.type, {c.T, c.H, row}, -2, 2);
    query.poison(); // every byte, then random latent columns again
    Arr latentCols = randomArr(dev, c.type, {c.T, c.H, row}, -2, 2);
    for (int64_t r = 0; r < c.T * c.H; ++r)
      std::memcpy(query.host.data() + r * row * 2,
                  latentCols.host.data() + r * row * 2, size_t(latent) * 2);
    query.up(dev);
    const std::vector<uint8_t> queryBefore = query.host, srcBefore = qProj.host;
    Arr cs = cosSinTable(dev, 8192, rope);
    Arr pos(dev, DType::I64, {c.T});
    std::vector<int64_t> p(static_cast<size_t>(c.T));
    for (auto &v : p)
      v = 1 + int64_t(rng()() % 8191);
    pos.setI64(p);
    pos.up(dev);
    std::vector<int64_t> sl = randomSlots(c.T, cache.desc.numSlots());
    Arr slots = slotArr(dev, sl, true);
    auto src = [&](TensorRef t) {
      t.data = static_cast<uint8_t *>(t.data) + (nope + c.skew) * 2;
      t.rank = 3;
      t.sizes[0] = c.T, t.sizes[1] = c.H, t.sizes[2] = rope;
      t.strides[0] = qRow, t.strides[1] = nope + rope, t.strides[2] = 1;
      return t;
    };
    auto dst = [&](TensorRef t) {
      t.data = static_cast<uint8_t *>(t.data) + latent * 2;
      t.sizes[2] = rope;
      return t;
    };
    RopeCacheUpdateArgs h{kv.h(),  kp.h(),           slots.h(),   cache.h(),
                          pos.h(), cs.h(),           c.style,     dst(query.h()),
                          TensorRef(), src(qProj.h())};
    RopeCacheUpdateArgs g{kv.d(),  kp.d(),           slots.d(),   cache.d(),
                          pos.d(), cs.d(),           c.style,     dst(query.d()),
                          TensorRef(), src(qProj.d())};

    // A bad slot first: nothing is written anywhere.
    std::vector<int64_t> badSl = sl;
    badSl[size_t(c.T / 2)] = cache.desc.numSlots();
    Arr badSlots = slotArr(dev, badSl, true);
    g.slotMapping = badSlots.d();
    Status s = dev->kernels().ropeCacheUpdate(g, nullptr);
    EXPECT_EQ(s.code(), StatusCode::OutOfRange) << s.message();
    EXPECT_TRUE(query.down(dev) == queryBefore) << "destination after a bad slot";
    EXPECT_TRUE(qProj.down(dev) == srcBefore) << "source after a bad slot";
    EXPECT_TRUE(kp.down(dev) == kp.host) << "k_pe after a bad slot";
    EXPECT_TRUE(cache.bytes.down(dev) == cache.bytes.host) << "cache after a bad slot";

    g.slotMapping = slots.d();
    ASSERT_TRUE(cpu().ropeCacheUpdate(h, nullptr).ok());
    s = dev->kernels().ropeCacheUpdate(g, nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    const std::vector<uint8_t> got = query.down(dev);
    EXPECT_TRUE(got == query.host) << "assembled query";
    EXPECT_TRUE(qProj.down(dev) == srcBefore) << "the source was written";
    EXPECT_TRUE(cache.bytes.down(dev) == cache.bytes.host) << "cache";
    EXPECT_TRUE(kp.down(dev) == kp.host) << "k_pe";
    // Not vacuous: the rope columns were poison and now hold rotated values.
    EXPECT_NE(std::memcmp(got.data() + latent * 2, queryBefore.data() + latent * 2,
                          size_t(rope) * 2),
              0);
  }
}

// A source that partially overlaps the destination is refused on the host,
// before any launch; the same view as source and destination is in place.
TEST(CudaRopeCacheUpdate, OutOfPlaceQPeRefusesPartialOverlap) {
  REQUIRE_GPU();
  Cache cache(dev, CacheLayout::Plain, DType::BF16, 16, 16);
  Arr kv = randomArr(dev, DType::BF16, {2, 512});
  Arr kp = randomArr(dev, DType::BF16, {2, 64});
  Arr q = randomArr(dev, DType::BF16, {2, 5, 64});
  Arr cs = cosSinTable(dev, 64, 64);
  Arr pos = slotArr(dev, {3, 4}, true);
  Arr slots = slotArr(dev, {0, 1}, true);
  TensorRef lo = q.d(), hi = q.d();
  lo.sizes[1] = hi.sizes[1] = 4;
  hi.data = static_cast<uint8_t *>(hi.data) + 64 * 2;
  RopeCacheUpdateArgs g{kv.d(), kp.d(), slots.d(), cache.d(), pos.d(), cs.d(),
                        RopeStyle::NeoX, lo, TensorRef(), hi};
  Status s = dev->kernels().ropeCacheUpdate(g, nullptr);
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument) << s.message();
  EXPECT_TRUE(q.down(dev) == q.host);
  EXPECT_TRUE(kp.down(dev) == kp.host);
  EXPECT_TRUE(cache.bytes.down(dev) == cache.bytes.host);

  RopeCacheUpdateArgs h{kv.h(), kp.h(), slots.h(), cache.h(), pos.h(), cs.h(),
                        RopeStyle::NeoX, q.h(), TensorRef(), q.h()};
  g.qPe = g.qPeIn = q.d();
  ASSERT_TRUE(cpu().ropeCacheUpdate(h, nullptr).ok());
  s = dev->kernels().ropeCacheUpdate(g, nullptr);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(q.down(dev) == q.host);
  EXPECT_TRUE(kp.down(dev) == kp.host);
  EXPECT_TRUE(cache.bytes.down(dev) == cache.bytes.host);
}

} // namespace

// q_absorb as the fused V2-Lite step runs it: q_nope read in place from the
// fused q + kv_a GEMM output (row pitch 3648, head pitch 192) into the
// latent columns of the assembled query. Every cuBLASLt candidate that
// Executor::tuneGraph may choose must compute the same product.
TEST(CudaGemm, EveryPerHeadCandidateMatchesTheCpu) {
  REQUIRE_GPU();
  const int64_t B = 64, H = 16, NOPE = 128, LAT = 512, PITCH = 3648;
  Arr fused = randomArr(dev, DType::BF16, {B, PITCH});
  Arr wuk = randomArr(dev, DType::BF16, {H, NOPE, LAT}, -0.2f, 0.2f);
  Arr query(dev, DType::BF16, {B, H, LAT + 64});
  auto qNope = [&](TensorRef t) {
    t.rank = 3;
    t.sizes[0] = B, t.sizes[1] = H, t.sizes[2] = NOPE;
    t.strides[0] = PITCH, t.strides[1] = 192, t.strides[2] = 1;
    return t;
  };
  auto latent = [&](TensorRef t) {
    t.sizes[2] = LAT;
    return t;
  };
  query.poison();
  ASSERT_TRUE(cpu().qAbsorb({qNope(fused.h()), wuk.h(), latent(query.h())},
                            nullptr)
                  .ok());
  const std::vector<uint8_t> want = query.host;
  const PerHeadGemmArgs a{qNope(fused.d()), wuk.d(), latent(query.d())};
  StatusOr<int> n = dev->perHeadAlgorithmCount(a);
  if (n.status().code() == StatusCode::Unavailable)
    GTEST_SKIP() << n.status().message();
  ASSERT_TRUE(n.ok()) << n.status().toString();
  EXPECT_GT(*n, 1) << "cuBLASLt offers a choice for this shape";
  for (int c = 0; c < *n; ++c) {
    SCOPED_TRACE("candidate " + std::to_string(c));
    ASSERT_TRUE(dev->choosePerHeadAlgorithm(a, c).ok());
    query.poison();
    query.up(dev);
    ASSERT_TRUE(
        dev->kernels().qAbsorb({a.x, a.w, a.out, true}, nullptr).ok());
    const std::vector<uint8_t> got = query.down(dev);
    double num = 0, den = 0;
    for (int64_t r = 0; r < B * H; ++r)
      for (int64_t col = 0; col < LAT + 64; ++col) {
        const size_t i = size_t(r * (LAT + 64) + col);
        const double g = loadAsFloat(got.data(), DType::BF16, i);
        if (col >= LAT) {
          ASSERT_TRUE(std::isnan(g)) << "wrote past the latent columns";
          continue;
        }
        const double ref = loadAsFloat(want.data(), DType::BF16, i);
        num += (g - ref) * (g - ref);
        den += ref * ref;
      }
    EXPECT_LT(std::sqrt(num / den), 1e-2);
  }
  EXPECT_EQ(dev->choosePerHeadAlgorithm(a, *n).code(), StatusCode::OutOfRange);
  EXPECT_EQ(dev->choosePerHeadAlgorithm(a, -1).code(), StatusCode::OutOfRange);
  ASSERT_TRUE(dev->choosePerHeadAlgorithm(a, 0).ok());
}
