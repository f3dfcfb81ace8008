//===- CacheCopyKernelTest.cpp - The large-update kernels (streaming, bulk) -===//
//
// Large plain bf16/f16 cache updates take the copy kernel of
// CacheCopyKernel.cu (MLART_UPDATE_KERNEL=1) or the bulk-copy kernel of
// CacheBulkKernel.cu (=2, the default) (here: the test override).
// Every compiled variant must write exactly the CPU reference's bytes into
// a cache of random bytes (the whole cache is compared, so a stray write
// anywhere fails), write nothing for a call with a bad slot, and read its
// sources correctly right after the kernel that produced them (PDL chain,
// eager and in a CUDA graph). A launch counter proves the kernel ran.
//
//===----------------------------------------------------------------------===//
#include "CudaTestUtil.h"

#include "cuda/CacheCopyKernel.h"
#include "cuda/Knobs.h"
#include "cuda/Launch.h"

#include <numeric>
#include <string>

namespace mlart::cudatest {
namespace {

using cuda::CacheCopyConfig;

const KernelLibrary &cpu() { return cpuKernelLibrary(); }

/// Uses `c` for the calls in its lifetime.
struct ConfigOverride {
  explicit ConfigOverride(const CacheCopyConfig &c) {
    cuda::setCacheCopyConfigForTesting(c);
  }
  ~ConfigOverride() { cuda::setCacheCopyConfigForTesting(std::nullopt); }
};

CacheCopyConfig bulkVariant(int stages, int ctas, bool early, int hints) {
  CacheCopyConfig c;
  c.kernel = cuda::UpdateKernel::Bulk;
  c.stages = stages;
  c.ctasPerSm = ctas;
  c.early = early;
  c.hints = hints;
  return c;
}

/// Every compiled variant, enabled.
std::vector<CacheCopyConfig> allVariants() {
  std::vector<CacheCopyConfig> out;
  for (int u : {4, 8, 16})
    for (int ctas : {0, 1, 2, 4, 8})
      for (bool early : {false, true})
        for (int hints : {0, 1, 2}) {
          CacheCopyConfig c;
          c.kernel = cuda::UpdateKernel::Streaming;
          c.unroll = u;
          c.ctasPerSm = ctas;
          c.early = early;
          c.hints = hints;
          out.push_back(c);
        }
  // The bulk-copy kernel: one chunk a CTA (one stage), or persistent with
  // every ring depth.
  for (int ctas : {0, 1, 2, 4, 8})
    for (int stages : {1, 2, 3, 4, 6}) {
      if (ctas == 0 && stages != 1)
        continue;
      for (bool early : {false, true})
        for (int hints : {0, 1, 2})
          out.push_back(bulkVariant(stages, ctas, early, hints));
    }
  return out;
}

/// A streaming-kernel variant (CacheCopyKernel.cu).
CacheCopyConfig variant(int u, int ctas, bool early, int hints) {
  CacheCopyConfig c;
  c.kernel = cuda::UpdateKernel::Streaming;
  c.unroll = u;
  c.ctasPerSm = ctas;
  c.early = early;
  c.hints = hints;
  return c;
}

/// Where kv_c and k_pe live: separate tensors, kv_c a column slice of a
/// [T, 576] row (k_pe separate), or both slices of that row (the compiled
/// step's kv_a projection output).
enum class Source { Separate, KvSlice, BothSlices };
const char *name(Source s) {
  return s == Source::Separate ? "separate"
         : s == Source::KvSlice ? "kv_c slice" : "both slices";
}

/// A large update: inputs and a cache of random bytes, host and device.
struct Update {
  DType dt;
  int64_t T;
  KVCacheDesc desc;
  Arr cache, row, kv, kp, slots;
  Source src;

  Update(CudaDevice *d, DType t, int64_t tokens, int64_t mapped,
         bool sequential, Source s, bool i64, int64_t bs = 64)
      : dt(t), T(tokens), src(s) {
    desc.numBlocks = (2 * tokens + bs - 1) / bs + 1;
    desc.blockSize = bs;
    desc.latentRank = 512;
    desc.ropeDim = 64;
    desc.dtype = t;
    desc.layout = CacheLayout::Plain;
    cache = Arr(d, DType::F8E4M3FN, {desc.totalBytes()});
    for (auto &b : cache.host)
      b = uint8_t(rng()());
    cache.up(d);
    if (s != Source::Separate) {
      row = Arr(d, t, {tokens, 576});
      row.random(-3, 3);
      row.up(d);
    }
    if (s != Source::BothSlices) {
      kp = Arr(d, t, {tokens, 64});
      kp.random(-3, 3);
      kp.up(d);
    }
    if (s == Source::Separate) {
      kv = Arr(d, t, {tokens, 512});
      kv.random(-3, 3);
      kv.up(d);
    }
    std::vector<int64_t> sl;
    if (sequential) {
      sl.resize(size_t(mapped));
      std::iota(sl.begin(), sl.end(), int64_t(3));
      for (auto &x : sl)
        if (rng()() % 7 == 0)
          x = -1;
    } else {
      sl = randomSlots(mapped, desc.numSlots());
    }
    setSlots(d, sl, i64);
  }

  void setSlots(CudaDevice *d, const std::vector<int64_t> &sl, bool i64) {
    slots = Arr(d, i64 ? DType::I64 : DType::I32, {int64_t(sl.size())});
    if (i64)
      slots.setI64(sl);
    else
      slots.setI32(std::vector<int32_t>(sl.begin(), sl.end()));
    slots.up(d);
  }

  static TensorRef cols(TensorRef t, int64_t first, int64_t n) {
    t.data = static_cast<uint8_t *>(t.data) +
             first * int64_t(dtypeSize(t.dtype));
    t.sizes[1] = n;
    return t;
  }
  KVCacheRef cacheRef(bool device) {
    KVCacheRef r;
    r.desc = desc;
    r.data = device ? cache.dev.data() : cache.host.data();
    return r;
  }
  /// The call's arguments; `sl` replaces the slots when given.
  CacheUpdateArgs args(bool device, Arr *sl = nullptr) {
    auto ref = [&](Arr &a) { return device ? a.d() : a.h(); };
    TensorRef kvC = src == Source::Separate ? ref(kv) : cols(ref(row), 0, 512);
    TensorRef kPe = src == Source::BothSlices ? cols(ref(row), 512, 64) : ref(kp);
    return {kvC, kPe, ref(sl ? *sl : slots), cacheRef(device)};
  }
};

TEST(CacheCopyConfig, DefaultsAreTheKnobTable) {
  // No GPU needed: the struct's defaults and the knobs' (Knobs.h) agree,
  // and with no override the configuration is the knobs' values.
  const CacheCopyConfig def;
  // The H200 sweeps' best variant.
  EXPECT_EQ(def.kernel, cuda::UpdateKernel::Bulk);
  EXPECT_EQ(def.unroll, 8);
  EXPECT_EQ(def.ctasPerSm, 0);
  EXPECT_EQ(int(def.kernel),
            cuda::knobSpec(cuda::Knob::UpdateKernel).defaultValue);
  EXPECT_EQ(def.unroll, cuda::knobSpec(cuda::Knob::UpdateUnroll).defaultValue);
  EXPECT_EQ(def.ctasPerSm,
            cuda::knobSpec(cuda::Knob::UpdateCtasPerSm).defaultValue);
  EXPECT_EQ(int(def.early), cuda::knobSpec(cuda::Knob::UpdateEarly).defaultValue);
  EXPECT_EQ(def.hints, cuda::knobSpec(cuda::Knob::UpdateHints).defaultValue);
  cuda::setKnobOverride(cuda::Knob::UpdateUnroll, 16);
  cuda::setKnobOverride(cuda::Knob::UpdateKernel, 0);
  CacheCopyConfig c = cuda::cacheCopyConfig();
  EXPECT_EQ(c.unroll, 16);
  EXPECT_EQ(c.kernel, cuda::UpdateKernel::General);
  cuda::setKnobOverride(cuda::Knob::UpdateUnroll, std::nullopt);
  cuda::setKnobOverride(cuda::Knob::UpdateKernel, std::nullopt);
  EXPECT_EQ(cuda::describe(variant(8, 4, true, 1)), "U=8 ctas/SM=4 early hints=1");
  EXPECT_EQ(cuda::describe(variant(16, 0, false, 0)), "U=16 tile/CTA wait hints=0");
  EXPECT_EQ(cuda::describe(bulkVariant(3, 2, true, 1)), "bulk S=3 ctas/SM=2 early hints=1");
  EXPECT_EQ(cuda::describe(bulkVariant(3, 0, false, 2)), "bulk S=1 chunk/CTA wait hints=2");
  EXPECT_EQ(def.stages, cuda::knobSpec(cuda::Knob::UpdateStages).defaultValue);
  cuda::setKnobOverride(cuda::Knob::UpdateKernel, 2);
  EXPECT_EQ(cuda::cacheCopyConfig().kernel, cuda::UpdateKernel::Bulk);
  cuda::setKnobOverride(cuda::Knob::UpdateKernel, 1);
  EXPECT_EQ(cuda::cacheCopyConfig().kernel, cuda::UpdateKernel::Streaming);
  cuda::setKnobOverride(cuda::Knob::UpdateKernel, std::nullopt);
}

/// Runs `u` on both devices, expects the copy kernel to have run once and
/// the whole cache to match the CPU's bytes.
void expectMatches(CudaDevice *dev, Update &u, const std::string &what) {
  ASSERT_TRUE(cpu().cacheUpdate(u.args(false), nullptr).ok());
  const uint64_t before = cuda::cacheCopyLaunchCount();
  Status s = dev->kernels().cacheUpdate(u.args(true), nullptr);
  ASSERT_TRUE(s.ok()) << what << ": " << s.message();
  EXPECT_EQ(cuda::cacheCopyLaunchCount(), before + 1)
      << what << ": the copy kernel did not run";
  EXPECT_TRUE(u.cache.down(dev) == u.cache.host)
      << what << ": cache differs from the CPU reference";
}

// The shapes that matter, for a few variants: sizes around the inline
// validation limit and the benchmark's, random and sequential slots with
// -1 mixed in, both dtypes, all three source layouts, i32 and i64 slots,
// fewer slots than tokens.
TEST(CudaCacheCopy, ShapesMatchCpuBitForBit) {
  REQUIRE_GPU();
  for (const CacheCopyConfig &cfg :
       {variant(8, 4, true, 1), variant(4, 0, false, 0), variant(16, 1, true, 2),
        bulkVariant(1, 0, true, 1), bulkVariant(3, 2, true, 1),
        bulkVariant(6, 1, false, 0)}) {
    ConfigOverride use(cfg);
    int i = 0;
    for (int64_t T : {1025, 4096, 65536})
      for (bool seq : {false, true})
        for (DType dt : {DType::BF16, DType::F16}) {
          const Source src = Source(i % 3);
          const bool i64 = i % 2 == 0;
          // Padded tokens past the mapping (still > 1024: prevalidated).
          const int64_t mapped = i % 4 == 3 && T > 2048 ? T - 37 : T;
          ++i;
          Update u(dev, dt, T, mapped, seq, src, i64);
          expectMatches(dev, u,
                        cuda::describe(cfg) + ", T=" + std::to_string(T) +
                            (seq ? " sequential" : " random") + ", " +
                            dtypeName(dt) + ", " + name(src) +
                            (i64 ? ", i64" : ", i32") + " slots, " +
                            std::to_string(mapped) + " mapped");
          if (HasFatalFailure())
            return;
        }
  }
}

// Every compiled variant (unroll x grid x early loads x cache hints).
TEST(CudaCacheCopy, EveryVariantMatchesCpuBitForBit) {
  REQUIRE_GPU();
  int i = 0;
  for (const CacheCopyConfig &cfg : allVariants()) {
    ConfigOverride use(cfg);
    const DType dt = i % 2 ? DType::F16 : DType::BF16;
    const Source src = Source(i % 3);
    const bool seq = i % 5 == 0;
    ++i;
    Update u(dev, dt, 4096 + 37, 4096 + 37, seq, src, i % 2 == 0, 16);
    expectMatches(dev, u, cuda::describe(cfg) + ", " + dtypeName(dt) + ", " +
                              name(src));
    if (HasFatalFailure())
      return;
  }
}

// A bad slot anywhere in a large call: OutOfRange naming it, not one cache
// byte changed, and the device still usable. Also a slot whose low 32 bits
// are a valid row (the kernel's row indices are int).
TEST(CudaCacheCopy, BadSlotWritesNothing) {
  REQUIRE_GPU();
  int i = 0;
  for (const CacheCopyConfig &cfg : allVariants()) {
    ConfigOverride use(cfg);
    const int64_t T = 2000 + 13 * (i % 7);
    Update u(dev, DType::BF16, T, T, i % 2 == 0, Source(i % 3), true, 16);
    std::vector<int64_t> sl(static_cast<size_t>(T));
    std::memcpy(sl.data(), u.slots.host.data(), sl.size() * 8);
    const int64_t at = i % 3 == 0 ? 0 : i % 3 == 1 ? T - 1 : int64_t(rng()() % T);
    const int64_t bad = i % 2 ? u.desc.numSlots() + i : (int64_t(1) << 32) + 5;
    sl[size_t(at)] = bad;
    u.setSlots(dev, sl, true);
    ++i;
    const std::string what = cuda::describe(cfg) + ", bad slot " +
                             std::to_string(bad) + " at " + std::to_string(at);
    const uint64_t before = cuda::cacheCopyLaunchCount();
    Status s = dev->kernels().cacheUpdate(u.args(true), nullptr);
    EXPECT_EQ(s.code(), StatusCode::OutOfRange) << what << ": " << s.message();
    EXPECT_NE(s.message().find(std::to_string(bad)), std::string::npos)
        << what << ": " << s.message();
    EXPECT_EQ(cuda::cacheCopyLaunchCount(), before + 1) << what;
    EXPECT_TRUE(u.cache.down(dev) == u.cache.host) << what << ": cache was touched";
    sl[size_t(at)] = -1;
    u.setSlots(dev, sl, true);
    expectMatches(dev, u, what + ", then fixed");
    if (HasFatalFailure())
      return;
  }
}

// Asynchronous checks (the bench's and a graph's mode): the verdict still
// stops every CTA; checkErrors reports it.
TEST(CudaCacheCopy, BadSlotWithAsynchronousChecks) {
  REQUIRE_GPU();
  for (const CacheCopyConfig &cfg :
       {variant(8, 4, true, 1), bulkVariant(3, 2, true, 1)}) {
    ConfigOverride use(cfg);
    Update u(dev, DType::F16, 8192, 8192, false, Source::BothSlices, false);
    std::vector<int32_t> sl(8192);
    std::memcpy(sl.data(), u.slots.host.data(), sl.size() * 4);
    sl[4321] = int32_t(u.desc.numSlots());
    u.setSlots(dev, std::vector<int64_t>(sl.begin(), sl.end()), false);
    dev->setSynchronousChecks(false);
    Status s = dev->kernels().cacheUpdate(u.args(true), nullptr);
    dev->setSynchronousChecks(true);
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(dev->synchronize().ok());
    EXPECT_EQ(dev->checkErrors(nullptr).code(), StatusCode::OutOfRange);
    EXPECT_TRUE(u.cache.down(dev) == u.cache.host)
        << cuda::describe(cfg) << ": cache was touched";
  }
}

// Calls the kernel does not take fall back to the general one (and are
// right): small calls (inline validation), f32, checked mode; and with the
// knob off nothing takes it.
TEST(CudaCacheCopy, OtherCallsTakeTheGeneralKernel) {
  REQUIRE_GPU();
  auto expectGeneral = [&](Update &u, const KVCacheRef &ref, const char *what) {
    ASSERT_TRUE(cpu().cacheUpdate(u.args(false), nullptr).ok());
    CacheUpdateArgs g = u.args(true);
    g.cache = ref;
    const uint64_t before = cuda::cacheCopyLaunchCount();
    Status s = dev->kernels().cacheUpdate(g, nullptr);
    ASSERT_TRUE(s.ok()) << what << ": " << s.message();
    EXPECT_EQ(cuda::cacheCopyLaunchCount(), before) << what;
    EXPECT_TRUE(u.cache.down(dev) == u.cache.host) << what;
  };
  {
    ConfigOverride use(variant(8, 4, true, 1));
    Update small(dev, DType::BF16, 1024, 1024, false, Source::Separate, true);
    expectGeneral(small, small.cacheRef(true), "1024 slots (inline validation)");
    Update f32(dev, DType::F32, 3000, 3000, false, Source::BothSlices, true);
    expectGeneral(f32, f32.cacheRef(true), "f32");
    Update wp(dev, DType::BF16, 3000, 3000, false, Source::KvSlice, true);
    Arr flags(dev, DType::F8E4M3FN, {wp.desc.numBlocks});
    std::fill(flags.host.begin(), flags.host.end(), 0);
    flags.up(dev);
    KVCacheRef ref = wp.cacheRef(true);
    ref.writeProtect = static_cast<const uint8_t *>(flags.dev.data());
    expectGeneral(wp, ref, "checked mode");
  }
  {
    CacheCopyConfig off = variant(8, 4, true, 1);
    off.kernel = cuda::UpdateKernel::General;
    ConfigOverride use(off);
    Update u(dev, DType::BF16, 5000, 5000, false, Source::Separate, true);
    expectGeneral(u, u.cacheRef(true), "MLART_UPDATE_KERNEL=0");
  }
}

// The sources are produced by the kernel right before the update (add:
// row = a + b_i), three steps back to back without a host round trip, PDL
// on, eagerly and as a graph: a load issued before the producer finished
// would read the previous step's row. Each step writes its own slots, so
// every step's rows are compared.
TEST(CudaCacheCopy, ReadsWhatThePreviousKernelWrote) {
  REQUIRE_GPU();
  constexpr int64_t T = 8192;
  constexpr int kSteps = 3;
  for (bool bulk : {false, true})
  for (bool early : {true, false})
    for (bool graph : {false, true}) {
      const CacheCopyConfig cfg =
          bulk ? bulkVariant(3, 2, early, 1) : variant(8, 4, early, 1);
      SCOPED_TRACE(cuda::describe(cfg) + (graph ? ", graph" : ", eager"));
      ConfigOverride use(cfg);
      // PDL on and asynchronous checks (no host round trip) for this case.
      struct Mode {
        CudaDevice *d;
        Mode(CudaDevice *dv) : d(dv) {
          cuda::setPdlOverrideForTesting(true);
          d->setSynchronousChecks(false);
        }
        ~Mode() {
          d->setSynchronousChecks(true);
          cuda::setPdlOverrideForTesting(std::nullopt);
        }
      } mode(dev);
      Update u(dev, DType::BF16, T, T, false, Source::BothSlices, true);
      Arr a(dev, DType::BF16, {T, 576});
      a.random(-2, 2);
      a.up(dev);
      std::vector<Arr> b;
      std::vector<Arr> slots;
      std::vector<int64_t> perm(static_cast<size_t>(u.desc.numSlots()));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng());
      for (int i = 0; i < kSteps; ++i) {
        b.emplace_back(dev, DType::BF16, std::vector<int64_t>{T, 576});
        b.back().random(-2, 2);
        b.back().up(dev);
        // Slots of step i: the permutation from i * T on (wrapping, so a
        // few rows are written twice, last step wins), some -1.
        std::vector<int64_t> sl(static_cast<size_t>(T));
        for (int64_t k = 0; k < T; ++k)
          sl[size_t(k)] = rng()() % 9 == 0
                              ? -1
                              : perm[size_t((i * T + k) % u.desc.numSlots())];
        slots.emplace_back(dev, DType::I64, std::vector<int64_t>{T});
        slots.back().setI64(sl);
        slots.back().up(dev);
      }
      // CPU: the same steps.
      for (int i = 0; i < kSteps; ++i) {
        ASSERT_TRUE(cpu().add({a.h(), b[size_t(i)].h(), u.row.h()}, nullptr).ok());
        ASSERT_TRUE(cpu().cacheUpdate(u.args(false, &slots[size_t(i)]), nullptr).ok());
      }
      StatusOr<Stream> stream = dev->createStream();
      ASSERT_TRUE(stream.ok()) << stream.status().toString();
      StreamHandle st = stream->handle();
      const uint64_t before = cuda::cacheCopyLaunchCount();
      auto enqueue = [&]() -> Status {
        for (int i = 0; i < kSteps; ++i) {
          MLART_RETURN_IF_ERROR(
              dev->kernels().add({a.d(), b[size_t(i)].d(), u.row.d()}, st));
          MLART_RETURN_IF_ERROR(
              dev->kernels().cacheUpdate(u.args(true, &slots[size_t(i)]), st));
        }
        return Status::success();
      };
      Status s;
      if (graph) {
        ASSERT_TRUE(dev->beginCapture(st).ok());
        s = enqueue();
        StatusOr<GraphHandle> g = dev->endCapture(st);
        ASSERT_TRUE(g.ok()) << g.status().toString();
        if (s.ok())
          s = dev->launchGraph(*g, st);
        EXPECT_TRUE(dev->synchronize(st).ok());
        dev->destroyGraph(*g);
      } else {
        s = enqueue();
      }
      EXPECT_TRUE(s.ok()) << s.toString();
      EXPECT_TRUE(dev->synchronize(st).ok());
      EXPECT_TRUE(dev->checkErrors(st).ok());
      EXPECT_EQ(cuda::cacheCopyLaunchCount(), before + kSteps);
      EXPECT_TRUE(u.row.down(dev) == u.row.host) << "add differs";
      EXPECT_TRUE(u.cache.down(dev) == u.cache.host)
          << "cache differs from the CPU reference";
    }
}

} // namespace
} // namespace mlart::cudatest
