//===- CodegenKernelsTest.cpp - Generated vs library cache-write kernels --===//
//
// The compiler-generated kernels of the fixture artifact (Inputs/
// codegen-kernels.mlir, compiled by the top-level build or named by
// MLART_CODEGEN_ARTIFACT) must write caches, k_pe and q_pe bit-identical to
// the library kernels on fresh random inputs, also with k_pe a strided view
// of the kv rows (rotated in place, as lowered steps do); a call with a bad
// slot or position must return the error and write nothing (cache, k_pe and
// q_pe byte for byte unchanged), for small calls (each block's own vote) and
// large ones (the separate validation), synchronously and asynchronously.
// Kernels that do not match their operands or their argument binding are
// refused, and the driver's log is reported for PTX it rejects. With a
// latent norm (mla-fuse-kv-norm) both kernels are also compared with the
// CPU reference: its sum of squares runs in another order, so the
// normalised latent is within one bf16 rounding, everything else exact.
//
//===----------------------------------------------------------------------===//
#include "CudaTestUtil.h"

#include "cuda/Launch.h"
#include "mlart/Codegen.h"
#include "mlart/KVCache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>

namespace mlart::cudatest {
namespace {

/// The fixture artifact, or null with the reason.
const Artifact *fixture(std::string &why) {
  static std::string reason;
  static std::unique_ptr<Artifact> artifact = [] {
    std::string path;
    if (const char *env = std::getenv("MLART_CODEGEN_ARTIFACT"))
      path = env;
#ifdef MLART_CODEGEN_ARTIFACT
    if (path.empty())
      path = MLART_CODEGEN_ARTIFACT;
#endif
    if (path.empty()) {
      reason = "no codegen fixture (set MLART_CODEGEN_ARTIFACT to "
               "codegen-kernels.mlaa built by the top-level build)";
      return std::unique_ptr<Artifact>();
    }
    StatusOr<Artifact> a = Artifact::loadFile(path);
    if (!a.ok()) {
      reason = a.status().toString();
      return std::unique_ptr<Artifact>();
    }
    return std::make_unique<Artifact>(std::move(a).value());
  }();
  why = reason;
  return artifact.get();
}

#define REQUIRE_FIXTURE()                                                      \
  REQUIRE_GPU();                                                               \
  std::string fixtureWhy_;                                                     \
  const Artifact *art = fixture(fixtureWhy_);                                  \
  if (!art)                                                                    \
  GTEST_SKIP() << fixtureWhy_

const CodegenKernel *findKernel(const Artifact &a, const CodegenSignature &s) {
  const std::string name = codegenKernelName(s);
  for (const CodegenKernel &k : a.kernels())
    if (k.name == name)
      return &k;
  ADD_FAILURE() << "the fixture has no kernel " << name;
  return nullptr;
}

struct Case {
  CodegenSignature sig;
  int64_t T, N, Hq;
};

constexpr int64_t kBlocks = 96, kBlockSize = 16, kMaxPos = 512;
constexpr float kNormEpsilon = 1e-6f; // the fixture's latent norms

struct Result {
  std::vector<uint8_t> cache, kPe, q, kv, qProj;
};

/// One write: the same random inputs twice on the device.
struct Inputs {
  KVCacheDesc desc;
  Arr kv, kPe, slots, pos, cs, q;
  /// q_proj's output [T, Hq * 192 + 8]; with qOutOfPlace q_pe is read from
  /// its strided view (the last 64 of each head's 192 columns) and the
  /// rotation written to q (the lowering's out-of-place rotation).
  Arr qProj;
  /// The latent norm's weight (used by signatures with latentNorm).
  Arr normW;
  bool qOutOfPlace = false;
  std::vector<uint8_t> cacheInit;
  /// k_pe is the strided view of kv's last 64 columns (the layout the
  /// compiler rotates in place) instead of its own array.
  bool kPeInKv = false;

  Inputs(CudaDevice *dev, const Case &c)
      : kv(dev, DType::BF16, {c.T, 576}), kPe(dev, DType::BF16, {c.T, 64}),
        slots(dev, c.sig.slots, {c.N}), pos(dev, c.sig.positions, {c.T}),
        cs(dev, DType::F32, {kMaxPos, 64}),
        q(dev, DType::BF16, {c.T, std::max<int64_t>(c.Hq, 1), 64}),
        qProj(dev, DType::BF16, {c.T, std::max<int64_t>(c.Hq, 1) * 192 + 8}),
        normW(dev, DType::BF16, {512}) {
    desc.numBlocks = kBlocks;
    desc.blockSize = kBlockSize;
    desc.latentRank = 512;
    desc.ropeDim = 64;
    desc.layout = c.sig.layout;
    desc.dtype = c.sig.cacheDType;
    // Wide value range: exercises fp8 saturation-free rounding and tiles
    // with very different scales.
    kv.random(-4.0f, 4.0f);
    for (int64_t t = 0; t < c.T; t += 5) // some tiny tiles
      for (int64_t i = 0; i < 128; ++i)
        kv.set(t * 576 + i, kv.get(t * 576 + i) * 1e-6f);
    kPe.random(-2.0f, 2.0f);
    cs.random(-1.0f, 1.0f);
    q.random(-2.0f, 2.0f);
    qProj.random(-2.0f, 2.0f);
    normW.random(-0.5f, 2.0f); // a trained norm's weights: around 1
    std::vector<int64_t> perm(size_t(kBlocks * kBlockSize));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng());
    std::uniform_int_distribution<int64_t> p(0, kMaxPos - 1);
    std::uniform_int_distribution<int> neg(0, 9);
    for (int64_t i = 0; i < c.N; ++i) {
      // Token 0 always writes, so every case changes the cache.
      const int64_t s = (i > 0 && neg(rng()) == 0) ? -1 : perm[size_t(i)];
      if (c.sig.slots == DType::I32)
        reinterpret_cast<int32_t *>(slots.host.data())[i] = int32_t(s);
      else
        reinterpret_cast<int64_t *>(slots.host.data())[i] = s;
    }
    for (int64_t t = 0; t < c.T; ++t) {
      if (c.sig.positions == DType::I32)
        reinterpret_cast<int32_t *>(pos.host.data())[t] = int32_t(p(rng()));
      else
        reinterpret_cast<int64_t *>(pos.host.data())[t] = p(rng());
    }
    cacheInit.resize(size_t(desc.numSlots() * desc.rowBytes()));
    std::uniform_int_distribution<int> byte(0, 255);
    for (uint8_t &b : cacheInit)
      b = uint8_t(byte(rng()));
  }

  void upload(CudaDevice *dev) {
    kv.up(dev);
    kPe.up(dev);
    slots.up(dev);
    pos.up(dev);
    cs.up(dev);
    q.up(dev);
    qProj.up(dev);
    normW.up(dev);
  }

  /// The q_pe source view of qProj.
  TensorRef qSource(TensorRef t, int64_t T, int64_t Hq) const {
    t.data = static_cast<uint8_t *>(t.data) + 128 * 2;
    t.rank = 3;
    t.sizes[0] = T, t.sizes[1] = Hq, t.sizes[2] = 64;
    t.strides[0] = Hq * 192 + 8, t.strides[1] = 192, t.strides[2] = 1;
    return t;
  }

  RopeCacheUpdateArgs args(const Case &c, KVCache &cache) {
    RopeCacheUpdateArgs a;
    a.kvC = kv.d();
    a.kvC.sizes[1] = 512; // the latent part of the [T, 576] rows
    a.kPe = kPe.d();
    if (kPeInKv) {
      a.kPe = kv.d();
      a.kPe.data = static_cast<uint8_t *>(a.kPe.data) + 512 * 2;
      a.kPe.sizes[1] = 64;
    }
    a.slotMapping = slots.d();
    a.cache = cache.ref();
    if (c.sig.op == Opcode::RopeCacheUpdate) {
      a.positions = pos.d();
      a.cosSin = cs.d();
      a.style = c.sig.style;
      if (c.sig.rotatesQ)
        a.qPe = q.d();
      if (c.sig.rotatesQ && qOutOfPlace)
        a.qPeIn = qSource(qProj.d(), c.T, c.Hq);
      if (c.sig.latentNorm) {
        a.latentNormWeight = normW.d();
        a.latentNormEpsilon = kNormEpsilon;
      }
    }
    return a;
  }

  /// What the CPU reference kernel writes from these inputs (host copies).
  Result cpuReference(const Case &c) const;
};

Result Inputs::cpuReference(const Case &c) const {
  Result r;
  r.cache = cacheInit;
  r.kPe = kPe.host;
  r.q = q.host;
  r.kv = kv.host;
  r.qProj = qProj.host;
  // The CPU kernel only reads slots, positions, cos/sin and the weight.
  auto ro = [](const Arr &a) {
    return a.ref(const_cast<uint8_t *>(a.host.data()));
  };
  RopeCacheUpdateArgs a;
  a.kvC = kv.ref(r.kv.data());
  a.kvC.sizes[1] = 512;
  a.kPe = kPe.ref(r.kPe.data());
  a.slotMapping = ro(slots);
  a.cache.desc = desc;
  a.cache.data = r.cache.data();
  a.positions = ro(pos);
  a.cosSin = ro(cs);
  a.style = c.sig.style;
  if (c.sig.rotatesQ)
    a.qPe = q.ref(r.q.data());
  if (c.sig.latentNorm) {
    a.latentNormWeight = ro(normW);
    a.latentNormEpsilon = kNormEpsilon;
  }
  static std::unique_ptr<Device> cpu = createCpuDevice();
  Status s = cpu->kernels().ropeCacheUpdate(a, nullptr);
  EXPECT_TRUE(s.ok()) << s.toString();
  return r;
}

/// Runs the write through the library (kernel == null) or the generated
/// kernel, on identical inputs; returns its status and what the device
/// holds afterwards.
std::pair<Status, Result> attempt(CudaDevice *dev, const Case &c, Inputs &in,
                                  const Artifact *art,
                                  const CodegenKernel *kernel) {
  in.upload(dev);
  StatusOr<KVCache> cache = KVCache::create(*dev, in.desc);
  EXPECT_TRUE(cache.ok()) << cache.status().toString();
  if (!cache.ok())
    return {cache.status(), {}};
  EXPECT_TRUE(cache->writeBytes(0, in.cacheInit.data(), in.cacheInit.size()).ok());
  RopeCacheUpdateArgs a = in.args(c, *cache);
  Status s;
  if (kernel) {
    const uint64_t before = dev->codegenLaunches();
    s = dev->launchCodegenCacheWrite(art->modules()[kernel->module], *kernel, a,
                                     nullptr);
    EXPECT_EQ(dev->codegenLaunches(), before + 1) << "the generated kernel "
                                                     "did not run";
  } else if (c.sig.op == Opcode::RopeCacheUpdate) {
    s = dev->kernels().ropeCacheUpdate(a, nullptr);
  } else {
    s = dev->kernels().cacheUpdate({a.kvC, a.kPe, a.slotMapping, a.cache},
                                   nullptr);
  }
  EXPECT_TRUE(dev->synchronize(nullptr).ok());
  Result r;
  r.cache.resize(in.cacheInit.size());
  EXPECT_TRUE(cache->readBytes(0, r.cache.data(), r.cache.size()).ok());
  r.kPe = in.kPe.down(dev);
  r.q = in.q.down(dev);
  r.kv = in.kv.down(dev);
  r.qProj = in.qProj.down(dev);
  return {s, r};
}

/// attempt() of a write that must succeed.
Result run(CudaDevice *dev, const Case &c, Inputs &in, const Artifact *art,
           const CodegenKernel *kernel) {
  auto [s, r] = attempt(dev, c, in, art, kernel);
  EXPECT_TRUE(s.ok()) << s.toString();
  return r;
}

/// The five kernels of the fixture.
std::vector<CodegenSignature> signatures() {
  auto sig = [](Opcode op, CacheLayout layout, DType slots, RopeStyle style,
                DType pos, bool q) {
    CodegenSignature s;
    s.op = op;
    s.layout = layout;
    s.cacheDType = layout == CacheLayout::Plain ? DType::BF16 : DType::F8E4M3FN;
    s.latentRank = 512;
    s.ropeDim = 64;
    s.slots = slots;
    s.style = style;
    s.positions = pos;
    s.rotatesQ = q;
    return s;
  };
  const CodegenSignature sigs[] = {
      sig(Opcode::CacheUpdate, CacheLayout::Plain, DType::I64, RopeStyle::NeoX,
          DType::I64, false),
      sig(Opcode::RopeCacheUpdate, CacheLayout::Plain, DType::I32,
          RopeStyle::GptJ, DType::I64, false),
      sig(Opcode::RopeCacheUpdate, CacheLayout::Plain, DType::I64,
          RopeStyle::NeoX, DType::I32, true),
      sig(Opcode::CacheUpdate, CacheLayout::Fp8DsMla, DType::I64,
          RopeStyle::NeoX, DType::I64, false),
      sig(Opcode::RopeCacheUpdate, CacheLayout::Fp8DsMla, DType::I64,
          RopeStyle::GptJ, DType::I64, true)};
  return std::vector<CodegenSignature>(std::begin(sigs), std::end(sigs));
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const CodegenSignature &s : signatures())
    for (auto [T, N, Hq] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 16},
                            {7, 5, 16},
                            {64, 64, 128},
                            {300, 297, 3},
                            {1100, 700, 16}, // validated first: T > 1024
                            {1500, 1500, 16}})
      out.push_back({s, T, N, s.rotatesQ ? Hq : 0});
  return out;
}

TEST(CudaCodegen, MatchesTheLibraryBitForBit) {
  REQUIRE_FIXTURE();
  for (const Case &c : cases()) {
    SCOPED_TRACE(codegenKernelName(c.sig) + " T=" + std::to_string(c.T) +
                 " N=" + std::to_string(c.N) + " Hq=" + std::to_string(c.Hq));
    const CodegenKernel *k = findKernel(*art, c.sig);
    ASSERT_NE(k, nullptr);
    Inputs in(dev, c);
    const Result lib = run(dev, c, in, art, nullptr);
    const Result gen = run(dev, c, in, art, k);
    ASSERT_FALSE(lib.cache.empty());
    EXPECT_TRUE(lib.cache == gen.cache) << "cache bytes differ";
    EXPECT_TRUE(lib.kPe == gen.kPe) << "rotated k_pe differs";
    EXPECT_TRUE(lib.q == gen.q) << "rotated q_pe differs";
    // The write did something: rows with a valid slot changed.
    EXPECT_FALSE(gen.cache == in.cacheInit);
  }
}

// The artifact lowering rotates k_pe where it lies in the kv_a projection:
// a [T, 64] view with row stride 576. Generated and library kernels must
// write the cache and q_pe exactly as with a contiguous copy of k_pe, rotate
// those 64 columns like the copy, and leave the latent columns alone.
TEST(CudaCodegen, KPeAsAViewOfTheKvRowsMatchesACopy) {
  REQUIRE_FIXTURE();
  for (const CodegenSignature &sig : signatures()) {
    if (sig.op != Opcode::RopeCacheUpdate)
      continue;
    for (auto [T, N] : {std::pair<int64_t, int64_t>{7, 5}, {64, 64},
                        {1100, 700}}) {
      const Case c{sig, T, N, sig.rotatesQ ? 16 : 0};
      SCOPED_TRACE(codegenKernelName(c.sig) + " T=" + std::to_string(T));
      const CodegenKernel *k = findKernel(*art, c.sig);
      ASSERT_NE(k, nullptr);
      Inputs in(dev, c);
      for (int64_t t = 0; t < T; ++t) // the copy the lowering no longer makes
        std::memcpy(in.kPe.host.data() + t * 64 * 2,
                    in.kv.host.data() + (t * 576 + 512) * 2, 64 * 2);
      const Result copied = run(dev, c, in, art, k);
      in.kPeInKv = true;
      const Result gen = run(dev, c, in, art, k);
      const Result lib = run(dev, c, in, art, nullptr);
      ASSERT_FALSE(copied.cache == in.cacheInit);
      EXPECT_TRUE(gen.cache == copied.cache) << "cache bytes differ";
      EXPECT_TRUE(lib.cache == copied.cache) << "cache bytes differ (library)";
      EXPECT_TRUE(gen.q == copied.q) << "rotated q_pe differs";
      EXPECT_TRUE(gen.kv == lib.kv) << "kv rows differ (library)";
      int64_t badRows = 0;
      for (int64_t t = 0; t < T; ++t) {
        const uint8_t *row = gen.kv.data() + t * 576 * 2;
        badRows += std::memcmp(row, in.kv.host.data() + t * 576 * 2,
                               512 * 2) != 0 ||
                   std::memcmp(row + 512 * 2,
                               copied.kPe.data() + t * 64 * 2, 64 * 2) != 0;
      }
      EXPECT_EQ(badRows, 0) << "latent columns changed or k_pe columns not "
                               "rotated like the copy";
    }
  }
}

TEST(CudaCodegen, BadSlotsAndPositionsAreReported) {
  REQUIRE_FIXTURE();
  const Case c{signatures()[1], 8, 8, 0}; // rope gptj plain, i32 slots
  const CodegenKernel *k = findKernel(*art, c.sig);
  ASSERT_NE(k, nullptr);
  {
    Inputs in(dev, c);
    reinterpret_cast<int32_t *>(in.slots.host.data())[3] =
        int32_t(kBlocks * kBlockSize + 7);
    in.upload(dev);
    StatusOr<KVCache> cache = KVCache::create(*dev, in.desc);
    ASSERT_TRUE(cache.ok());
    Status s = dev->launchCodegenCacheWrite(art->modules()[k->module], *k,
                                            in.args(c, *cache), nullptr);
    EXPECT_EQ(s.code(), StatusCode::OutOfRange) << s.toString();
    EXPECT_NE(s.message().find("slot_mapping[3] = 1543"), std::string::npos)
        << s.toString();
  }
  {
    Inputs in(dev, c);
    reinterpret_cast<int64_t *>(in.pos.host.data())[6] = kMaxPos;
    in.upload(dev);
    StatusOr<KVCache> cache = KVCache::create(*dev, in.desc);
    ASSERT_TRUE(cache.ok());
    Status s = dev->launchCodegenCacheWrite(art->modules()[k->module], *k,
                                            in.args(c, *cache), nullptr);
    EXPECT_EQ(s.code(), StatusCode::OutOfRange) << s.toString();
    EXPECT_NE(s.message().find("positions[6] = 512"), std::string::npos)
        << s.toString();
  }
  // The device is still usable.
  Inputs in(dev, c);
  const Result lib = run(dev, c, in, art, nullptr);
  const Result gen = run(dev, c, in, art, k);
  EXPECT_TRUE(lib.cache == gen.cache);
}

/// One out-of-range index planted in fresh random inputs.
struct BadIndex {
  bool slot; ///< a slot past the cache, else a position outside the table
  int64_t index, value;
  std::string message() const {
    return (slot ? "slot_mapping[" : "positions[") + std::to_string(index) +
           "] = " + std::to_string(value);
  }
};

BadIndex plant(Inputs &in, const Case &c, bool slot) {
  BadIndex b;
  b.slot = slot;
  std::uniform_int_distribution<int64_t> extra(0, 100000);
  b.index = std::uniform_int_distribution<int64_t>(
      0, (slot ? c.N : c.T) - 1)(rng());
  if (slot) {
    b.value = kBlocks * kBlockSize + extra(rng());
    if (c.sig.slots == DType::I32)
      reinterpret_cast<int32_t *>(in.slots.host.data())[b.index] =
          int32_t(b.value);
    else
      reinterpret_cast<int64_t *>(in.slots.host.data())[b.index] = b.value;
  } else {
    // Past the table or negative (a negative slot is a skip, a negative
    // position an error).
    b.value = extra(rng()) % 2 ? kMaxPos + extra(rng()) : -1 - extra(rng());
    if (c.sig.positions == DType::I32)
      reinterpret_cast<int32_t *>(in.pos.host.data())[b.index] =
          int32_t(b.value);
    else
      reinterpret_cast<int64_t *>(in.pos.host.data())[b.index] = b.value;
  }
  return b;
}

/// Nothing the call may write changed: cache, k_pe and q_pe byte for byte.
void expectUntouched(const Inputs &in, const Result &r) {
  EXPECT_TRUE(r.cache == in.cacheInit) << "the cache changed";
  EXPECT_TRUE(r.kPe == in.kPe.host) << "k_pe changed";
  EXPECT_TRUE(r.q == in.q.host) << "q_pe changed";
}

// The lowering reads q_pe where it lies in q_proj's output and writes the
// rotation into the assembled query (no copy): generated and library
// kernels read q_pe_in and write q_pe bit-identical to the in-place
// rotation of a contiguous copy, leave the source alone, and a bad slot or
// position writes nothing (destination, source, k_pe, cache).
TEST(CudaCodegen, OutOfPlaceQPeMatchesTheInPlaceRotation) {
  REQUIRE_FIXTURE();
  for (const CodegenSignature &sig : signatures()) {
    if (!sig.rotatesQ)
      continue;
    for (auto [T, N, Hq] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 16},
                            {4, 4, 16}, // the V2-Lite step
                            {7, 5, 128},
                            {1100, 700, 16}}) { // validated first
      const Case c{sig, T, N, Hq};
      SCOPED_TRACE(codegenKernelName(c.sig) + " T=" + std::to_string(T) +
                   " Hq=" + std::to_string(Hq));
      const CodegenKernel *k = findKernel(*art, c.sig);
      ASSERT_NE(k, nullptr);
      Inputs in(dev, c);
      for (int64_t r = 0; r < T * Hq; ++r) // the copy the lowering no longer makes
        std::memcpy(in.q.host.data() + r * 64 * 2,
                    in.qProj.host.data() +
                        ((r / Hq) * (Hq * 192 + 8) + (r % Hq) * 192 + 128) * 2,
                    64 * 2);
      const Result inPlace = run(dev, c, in, art, nullptr);
      ASSERT_FALSE(inPlace.q == in.q.host) << "q_pe was not rotated";
      in.q.poison();
      in.qOutOfPlace = true;
      const std::vector<uint8_t> source = in.qProj.host;
      for (const CodegenKernel *kernel :
           {k, static_cast<const CodegenKernel *>(nullptr)}) {
        SCOPED_TRACE(kernel ? "generated" : "library");
        const Result r = run(dev, c, in, art, kernel);
        EXPECT_TRUE(r.q == inPlace.q) << "rotated q_pe differs";
        EXPECT_TRUE(r.qProj == source) << "the source was written";
        EXPECT_TRUE(r.kPe == inPlace.kPe) << "rotated k_pe differs";
        EXPECT_TRUE(r.cache == inPlace.cache) << "cache bytes differ";
      }
      for (bool slot : {true, false}) {
        Inputs bad(dev, c);
        bad.q.poison();
        bad.qOutOfPlace = true;
        const BadIndex b = plant(bad, c, slot);
        SCOPED_TRACE(b.message());
        for (const CodegenKernel *kernel :
             {k, static_cast<const CodegenKernel *>(nullptr)}) {
          SCOPED_TRACE(kernel ? "generated" : "library");
          auto [s, r] = attempt(dev, c, bad, art, kernel);
          EXPECT_EQ(s.code(), StatusCode::OutOfRange) << s.toString();
          expectUntouched(bad, r);
          EXPECT_TRUE(r.qProj == bad.qProj.host) << "the source was written";
        }
      }
    }
  }
}

TEST(CudaCodegen, BadIndicesWriteNothing) {
  REQUIRE_FIXTURE();
  // Small calls (<= 1024 slots and positions) vote in every block; larger
  // ones are validated by a separate kernel first.
  for (const CodegenSignature &sig : signatures())
    for (auto [T, N] : {std::pair<int64_t, int64_t>{1, 1},
                        {37, 37},
                        {300, 211},
                        {1024, 1024},
                        {1100, 700},
                        {1536, 1536}}) {
      const bool rope = sig.op == Opcode::RopeCacheUpdate;
      const Case c{sig, T, rope ? N : T, sig.rotatesQ ? 16 : 0};
      const CodegenKernel *k = findKernel(*art, c.sig);
      ASSERT_NE(k, nullptr);
      for (bool slot : {true, false}) {
        if (!slot && !rope)
          continue;
        Inputs in(dev, c);
        const BadIndex bad = plant(in, c, slot);
        SCOPED_TRACE(codegenKernelName(c.sig) + " T=" + std::to_string(c.T) +
                     " N=" + std::to_string(c.N) + " " + bad.message());
        for (const CodegenKernel *kernel :
             {k, static_cast<const CodegenKernel *>(nullptr)}) {
          SCOPED_TRACE(kernel ? "generated" : "library");
          auto [s, r] = attempt(dev, c, in, art, kernel);
          EXPECT_EQ(s.code(), StatusCode::OutOfRange) << s.toString();
          EXPECT_NE(s.message().find(bad.message()), std::string::npos)
              << s.toString();
          expectUntouched(in, r);
        }
        // The next call of the same size writes again (the call flag of a
        // validated call does not leak into the next one).
        Inputs good(dev, c);
        const Result lib = run(dev, c, good, art, nullptr);
        const Result gen = run(dev, c, good, art, k);
        EXPECT_TRUE(lib.cache == gen.cache) << "cache bytes differ";
        EXPECT_TRUE(lib.kPe == gen.kPe) << "rotated k_pe differs";
        EXPECT_TRUE(lib.q == gen.q) << "rotated q_pe differs";
        EXPECT_FALSE(gen.cache == good.cacheInit);
      }
    }
}

/// Asynchronous checks (graph replays, setSynchronousChecks(false)): the
/// call returns success, checkErrors reports, and nothing was written.
TEST(CudaCodegen, BadIndicesWriteNothingAsynchronously) {
  REQUIRE_FIXTURE();
  struct Restore {
    CudaDevice *dev;
    ~Restore() { dev->setSynchronousChecks(true); }
  } restore{dev};
  ASSERT_TRUE(dev->checkErrors(nullptr).ok()); // a clean record
  dev->setSynchronousChecks(false);
  const std::vector<CodegenSignature> sigs = signatures();
  for (const CodegenSignature &sig : {sigs[0], sigs[4]})
    for (int64_t T : {37, 1500})
      for (bool slot : {true, false}) {
        const Case c{sig, T, T, sig.rotatesQ ? 16 : 0};
        if (!slot && sig.op != Opcode::RopeCacheUpdate)
          continue;
        const CodegenKernel *k = findKernel(*art, c.sig);
        ASSERT_NE(k, nullptr);
        Inputs in(dev, c);
        const BadIndex bad = plant(in, c, slot);
        SCOPED_TRACE(codegenKernelName(c.sig) + " T=" + std::to_string(T) +
                     " " + bad.message());
        auto [s, r] = attempt(dev, c, in, art, k);
        EXPECT_TRUE(s.ok()) << s.toString();
        expectUntouched(in, r);
        const Status checked = dev->checkErrors(nullptr);
        EXPECT_EQ(checked.code(), StatusCode::OutOfRange) << checked.toString();
        EXPECT_NE(checked.message().find(
                      (slot ? "slot_mapping[" : "positions[") +
                      std::to_string(bad.index) + "]"),
                  std::string::npos)
            << checked.toString();
        EXPECT_TRUE(dev->checkErrors(nullptr).ok())
            << "the record was not cleared";
      }
}

TEST(CudaCodegen, RefusesAKernelGeneratedForOtherOperands) {
  REQUIRE_FIXTURE();
  Case c = cases()[0]; // plain bf16 update, i64 slots
  const CodegenKernel *k = findKernel(*art, c.sig);
  ASSERT_NE(k, nullptr);
  c.sig.layout = CacheLayout::Fp8DsMla;
  c.sig.cacheDType = DType::F8E4M3FN;
  Inputs in(dev, c);
  in.upload(dev);
  StatusOr<KVCache> cache = KVCache::create(*dev, in.desc);
  ASSERT_TRUE(cache.ok());
  Status s = dev->launchCodegenCacheWrite(art->modules()[k->module], *k,
                                          in.args(c, *cache), nullptr);
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  EXPECT_NE(s.message().find("does not match its operands"), std::string::npos)
      << s.toString();
}

TEST(CudaCodegen, RejectedPtxReportsTheDriverLog) {
  REQUIRE_FIXTURE();
  Case c = cases()[0];
  const CodegenKernel *k = findKernel(*art, c.sig);
  ASSERT_NE(k, nullptr);
  CodegenModule bad;
  bad.ptx = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry " +
            k->name + "()\n{\n\tnot_an_instruction %r1;\n\tret;\n}\n";
  bad.hash = fnv1a64(bad.ptx.data(), bad.ptx.size());
  Inputs in(dev, c);
  in.upload(dev);
  StatusOr<KVCache> cache = KVCache::create(*dev, in.desc);
  ASSERT_TRUE(cache.ok());
  Status s = dev->launchCodegenCacheWrite(bad, *k, in.args(c, *cache), nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cuModuleLoadDataEx"), std::string::npos)
      << s.toString();
  EXPECT_NE(s.message().find("JIT log"), std::string::npos) << s.toString();
  // A good module still loads and runs afterwards.
  const Result gen = run(dev, c, in, art, k);
  EXPECT_FALSE(gen.cache.empty());
}

TEST(CudaCodegen, RefusesAKernelOfAnotherArgumentBinding) {
  REQUIRE_FIXTURE();
  Case c = cases()[0];
  const CodegenKernel *k = findKernel(*art, c.sig);
  ASSERT_NE(k, nullptr);
  // Valid PTX whose entry has the parameters of an older binding: 57
  // (before call_failed / prevalidated) or 63 (before q_pe_in).
  for (int params : {57, 63}) {
    SCOPED_TRACE(params);
    CodegenModule old;
    old.ptx = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry " +
              k->name + "(\n";
    for (int i = 0; i < params; ++i)
      old.ptx += "\t.param .u64 " + k->name + "_param_" + std::to_string(i) +
                 (i < params - 1 ? ",\n" : "\n");
    old.ptx += ")\n{\n\tret;\n}\n";
    old.hash = fnv1a64(old.ptx.data(), old.ptx.size());
    Inputs in(dev, c);
    in.upload(dev);
    StatusOr<KVCache> cache = KVCache::create(*dev, in.desc);
    ASSERT_TRUE(cache.ok());
    ASSERT_TRUE(
        cache->writeBytes(0, in.cacheInit.data(), in.cacheInit.size()).ok());
    const uint64_t before = dev->codegenLaunches();
    Status s = dev->launchCodegenCacheWrite(old, *k, in.args(c, *cache), nullptr);
    EXPECT_EQ(s.code(), StatusCode::InvalidArgument) << s.toString();
    EXPECT_NE(s.message().find("takes " + std::to_string(params) +
                               " parameters, this runtime passes " +
                               std::to_string(kCodegenParams)),
              std::string::npos)
        << s.toString();
    EXPECT_EQ(dev->codegenLaunches(), before);
    std::vector<uint8_t> after(in.cacheInit.size());
    ASSERT_TRUE(cache->readBytes(0, after.data(), after.size()).ok());
    EXPECT_TRUE(after == in.cacheInit);
  }
}

TEST(CudaCodegen, ModulesAreLoadedOncePerDevice) {
  REQUIRE_FIXTURE();
  Case c = cases()[0];
  const CodegenKernel *k = findKernel(*art, c.sig);
  ASSERT_NE(k, nullptr);
  Inputs in(dev, c);
  (void)run(dev, c, in, art, k);
  const size_t loaded = dev->codegenModulesLoaded();
  CodegenModule copy = art->modules()[k->module]; // same text, new object
  in.upload(dev);
  StatusOr<KVCache> cache = KVCache::create(*dev, in.desc);
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE(
      dev->launchCodegenCacheWrite(copy, *k, in.args(c, *cache), nullptr).ok());
  EXPECT_EQ(dev->codegenModulesLoaded(), loaded);
}

/// Removes every occurrence of `what` from `text`.
std::string without(std::string text, const std::string &what) {
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at))
    text.erase(at, what.size());
  return text;
}

// Programmatic dependent launch (docs/cuda.md): every fixture kernel waits
// for the previous grid before touching memory, so it is launched with PDL
// when PDL is on, plainly when off; the same kernel without the wait (an
// artifact from before the compiler emitted it) always runs plainly, and
// all three write what the library writes.
TEST(CudaCodegen, LaunchesWithPdlOnlyKernelsThatWait) {
  REQUIRE_FIXTURE();
  for (const CodegenKernel &k : art->kernels())
    EXPECT_TRUE(codegenEntryWaitsForGrids(art->modules()[k.module].ptx, k.name))
        << k.name;
  const Case c{signatures()[2], 64, 64, 128}; // rope + q_pe, i32 positions
  const CodegenKernel *k = findKernel(*art, c.sig);
  ASSERT_NE(k, nullptr);
  Inputs in(dev, c);
  const Result lib = run(dev, c, in, art, nullptr);
  struct Restore {
    ~Restore() { cuda::setPdlOverrideForTesting(std::nullopt); }
  } restore;
  for (bool pdl : {true, false}) {
    SCOPED_TRACE(pdl ? "PDL on" : "PDL off");
    cuda::setPdlOverrideForTesting(pdl);
    const uint64_t before = dev->codegenPdlLaunches();
    const Result gen = run(dev, c, in, art, k);
    EXPECT_EQ(dev->codegenPdlLaunches(), before + (pdl ? 1 : 0));
    EXPECT_TRUE(gen.cache == lib.cache && gen.kPe == lib.kPe &&
                gen.q == lib.q && gen.kv == lib.kv);
  }
  cuda::setPdlOverrideForTesting(true);
  CodegenModule old = art->modules()[k->module];
  old.ptx = without(without(old.ptx, "griddepcontrol.wait;"),
                    "griddepcontrol.launch_dependents;");
  ASSERT_NE(old.ptx, art->modules()[k->module].ptx);
  ASSERT_FALSE(codegenEntryWaitsForGrids(old.ptx, k->name));
  old.hash = fnv1a64(old.ptx.data(), old.ptx.size());
  in.upload(dev);
  StatusOr<KVCache> cache = KVCache::create(*dev, in.desc);
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE(
      cache->writeBytes(0, in.cacheInit.data(), in.cacheInit.size()).ok());
  const uint64_t launches = dev->codegenLaunches(),
                 pdlLaunches = dev->codegenPdlLaunches();
  Status s = dev->launchCodegenCacheWrite(old, *k, in.args(c, *cache), nullptr);
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_TRUE(dev->synchronize(nullptr).ok());
  EXPECT_EQ(dev->codegenLaunches(), launches + 1);
  EXPECT_EQ(dev->codegenPdlLaunches(), pdlLaunches);
  std::vector<uint8_t> bytes(in.cacheInit.size());
  ASSERT_TRUE(cache->readBytes(0, bytes.data(), bytes.size()).ok());
  EXPECT_TRUE(bytes == lib.cache);
  EXPECT_TRUE(in.q.down(dev) == lib.q);
  EXPECT_TRUE(in.kPe.down(dev) == lib.kPe);
}

} // namespace
} // namespace mlart::cudatest

namespace mlart::cudatest {
namespace {

/// The fixture's two kernels with a latent norm.
std::vector<CodegenSignature> normSignatures() {
  std::vector<CodegenSignature> out;
  for (bool q : {false, true}) {
    CodegenSignature s;
    s.op = Opcode::RopeCacheUpdate;
    s.latentRank = 512;
    s.ropeDim = 64;
    s.slots = q ? DType::I32 : DType::I64;
    s.positions = q ? DType::I32 : DType::I64;
    s.style = q ? RopeStyle::GptJ : RopeStyle::NeoX;
    s.rotatesQ = q;
    s.latentNorm = true;
    out.push_back(s);
  }
  return out;
}

/// `got` against the CPU reference: rows nobody writes unchanged, the rope
/// part of written rows and k_pe / q_pe bit for bit, the normalised latent
/// within one bf16 rounding (the sum of squares runs in another order).
void expectMatchesCpu(const Inputs &in, const Result &ref, const Result &got) {
  const int64_t rowBytes = in.desc.rowBytes();
  int64_t latentMismatches = 0, written = 0;
  for (int64_t r = 0; r < in.desc.numSlots(); ++r) {
    const uint8_t *g = got.cache.data() + r * rowBytes;
    const uint8_t *e = ref.cache.data() + r * rowBytes;
    const uint8_t *init = in.cacheInit.data() + r * rowBytes;
    if (std::memcmp(e, init, size_t(rowBytes)) == 0) {
      ASSERT_EQ(std::memcmp(g, init, size_t(rowBytes)), 0)
          << "row " << r << " is written by nobody in the reference";
      continue;
    }
    ++written;
    ASSERT_EQ(std::memcmp(g + 1024, e + 1024, 128), 0)
        << "rope part of row " << r;
    for (int64_t i = 0; i < 512; ++i) {
      const float want = loadAsFloat(e, DType::BF16, size_t(i));
      const float have = loadAsFloat(g, DType::BF16, size_t(i));
      ASSERT_LE(std::fabs(have - want), std::fabs(want) / 128 + 1e-30f)
          << "row " << r << " latent " << i;
      latentMismatches += have != want;
    }
  }
  EXPECT_GT(written, 0);
  // One rounding apart is rare: most values are identical.
  EXPECT_LE(latentMismatches, written * 512 / 20);
  EXPECT_TRUE(got.kPe == ref.kPe) << "rotated k_pe differs";
  EXPECT_TRUE(got.q == ref.q) << "rotated q_pe differs";
  EXPECT_TRUE(got.kv == in.kv.host) << "kv_c was written";
}

// Library and generated kernels with a latent norm against the CPU
// reference, on fresh random inputs over a cache of random bytes, with
// negative slots, padded tokens past the mapping and calls small (each
// block votes) and large (validated first).
TEST(CudaCodegen, LatentNormMatchesTheCpuReference) {
  REQUIRE_FIXTURE();
  for (const CodegenSignature &sig : normSignatures())
    for (auto [T, N, Hq] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 16},
                            {4, 4, 16}, // the V2-Lite step's tokens per block
                            {7, 5, 16},
                            {64, 64, 16},
                            {300, 297, 3},
                            {1100, 700, 16}}) {
      const Case c{sig, T, N, sig.rotatesQ ? Hq : 0};
      SCOPED_TRACE(codegenKernelName(c.sig) + " T=" + std::to_string(T) +
                   " N=" + std::to_string(N));
      const CodegenKernel *k = findKernel(*art, c.sig);
      ASSERT_NE(k, nullptr);
      Inputs in(dev, c);
      const Result ref = in.cpuReference(c);
      const Result gen = run(dev, c, in, art, k);
      const Result lib = run(dev, c, in, art, nullptr);
      {
        SCOPED_TRACE("generated");
        expectMatchesCpu(in, ref, gen);
      }
      {
        SCOPED_TRACE("library");
        expectMatchesCpu(in, ref, lib);
      }
      // The two GPU kernels sum the squares in the same order (8-value
      // chunks, a tree over 8 chunks, groups in order): bit for bit.
      EXPECT_TRUE(gen.cache == lib.cache) << "generated and library differ";
    }
}

// A bad slot or position anywhere: the error, and nothing written.
TEST(CudaCodegen, LatentNormBadIndicesWriteNothing) {
  REQUIRE_FIXTURE();
  for (const CodegenSignature &sig : normSignatures())
    for (auto [T, N] : {std::pair<int64_t, int64_t>{7, 5}, {1100, 700}})
      for (bool slot : {true, false}) {
        const Case c{sig, T, N, sig.rotatesQ ? int64_t(16) : 0};
        Inputs in(dev, c);
        const BadIndex b = plant(in, c, slot);
        SCOPED_TRACE(codegenKernelName(c.sig) + " T=" + std::to_string(T) +
                     " " + b.message());
        const CodegenKernel *k = findKernel(*art, c.sig);
        ASSERT_NE(k, nullptr);
        for (const CodegenKernel *kernel :
             {k, static_cast<const CodegenKernel *>(nullptr)}) {
          SCOPED_TRACE(kernel ? "generated" : "library");
          auto [s, r] = attempt(dev, c, in, art, kernel);
          EXPECT_EQ(s.code(), StatusCode::OutOfRange) << s.toString();
          expectUntouched(in, r);
        }
      }
}

} // namespace
} // namespace mlart::cudatest
