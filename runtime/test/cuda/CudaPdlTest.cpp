//===- CudaPdlTest.cpp - Programmatic dependent launch: knob and chains ---===//
//
// Every library kernel is launched with programmatic dependent launch
// (cuda/Launch.h) unless MLART_PDL=0. A kernel may then start while the
// one before it still runs; it must wait before touching memory. A chain of
// dependent kernels (rmsNorm -> add -> rope in place -> cache update ->
// decode attention reading the row just written -> add feeding the output
// back into the chain's input) run eagerly and as CUDA-graph replays
// (back to back: each replay reads what the previous one wrote) must give
// the same bytes with PDL on as with it off. A kernel that touched memory
// before its wait would race and, with these sizes, differ.
//
//===----------------------------------------------------------------------===//
#include "CudaTestUtil.h"

#include "cuda/Knobs.h"
#include "cuda/Launch.h"

#include <cstdlib>
#include <numeric>

namespace mlart::cudatest {
namespace {

using cuda::pdlEnabled;
using cuda::setPdlOverrideForTesting;

/// Forces PDL on or off for its lifetime.
struct PdlOverride {
  explicit PdlOverride(bool on) { setPdlOverrideForTesting(on); }
  ~PdlOverride() { setPdlOverrideForTesting(std::nullopt); }
};

// MLART_PDL's parsing is tested with the other knobs (KnobsTest.cpp).
TEST(CudaPdl, KnobOverride) {
  // No GPU needed.
  {
    PdlOverride off(false);
    EXPECT_FALSE(pdlEnabled());
  }
  {
    PdlOverride on(true);
    EXPECT_TRUE(pdlEnabled());
  }
  // Back to the environment (default on).
  EXPECT_EQ(pdlEnabled(),
            cuda::parseKnob(cuda::Knob::Pdl, std::getenv("MLART_PDL")).value !=
                0);
}

/// The state of the chain; B sequences decode one token each.
struct Chain {
  static constexpr int64_t B = 8, H = 128, D = 576, L = 512, R = 64;
  static constexpr int64_t BS = 64, MB = 20, kMaxPos = 2048;
  KVCacheDesc desc;
  Arr x, w, r, n, s, pos, cs, slots, q, tab, lens, o, lse, cache;

  explicit Chain(CudaDevice *d)
      : x(d, DType::BF16, {B, D}), w(d, DType::BF16, {D}),
        r(d, DType::BF16, {B, D}), n(d, DType::BF16, {B, D}),
        s(d, DType::BF16, {B, D}), pos(d, DType::I64, {B}),
        cs(d, DType::F32, {kMaxPos, R}), slots(d, DType::I64, {B}),
        q(d, DType::BF16, {B, H, D}), tab(d, DType::I32, {B, MB}),
        lens(d, DType::I32, {B}), o(d, DType::BF16, {B, H, L}),
        lse(d, DType::F32, {B, H}),
        cache(d, DType::BF16, {(B * MB + 1) * BS, D}) {
    desc.numBlocks = B * MB + 1;
    desc.blockSize = BS;
    desc.latentRank = L;
    desc.ropeDim = R;
    desc.dtype = DType::BF16;
    desc.layout = CacheLayout::Plain;
    x.random(-1, 1);
    w.random(0.5f, 1.5f);
    r.random(-1, 1);
    q.random(-1, 1);
    cache.random(-1, 1);
    const std::vector<float> table = ropeCosSinTable(kMaxPos, R);
    std::memcpy(cs.host.data(), table.data(), table.size() * sizeof(float));
    std::vector<int32_t> ids(static_cast<size_t>(B * MB));
    std::iota(ids.begin(), ids.end(), 1);
    std::shuffle(ids.begin(), ids.end(), rng());
    std::vector<int32_t> ls(static_cast<size_t>(B));
    std::vector<int64_t> ps(static_cast<size_t>(B)), ss(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
      // Long enough for split KV (and its combine kernel).
      ls[size_t(b)] = int32_t(600 + rng()() % (MB * BS - 600 + 1));
      const int64_t p = ls[size_t(b)] - 1; // the token this step appends
      ps[size_t(b)] = p;
      ss[size_t(b)] = int64_t(ids[size_t(b * MB + p / BS)]) * BS + p % BS;
    }
    tab.setI32(ids);
    lens.setI32(ls);
    pos.setI64(ps);
    slots.setI64(ss);
    n.poison();
    s.poison();
    o.poison();
    lse.poison();
  }

  /// Uploads the initial state: every run starts from the same bytes.
  void reset(CudaDevice *d) {
    for (Arr *a : {&x, &w, &r, &n, &s, &pos, &cs, &slots, &q, &tab, &lens, &o,
                   &lse, &cache})
      a->up(d);
  }

  static TensorRef view(Arr &a, int64_t offset, std::vector<int64_t> sizes,
                        std::vector<int64_t> strides) {
    TensorRef t = a.d();
    t.data = static_cast<uint8_t *>(t.data) + offset * int64_t(dtypeSize(a.dt));
    t.rank = int(sizes.size());
    for (int i = 0; i < t.rank; ++i) {
      t.sizes[i] = sizes[size_t(i)];
      t.strides[i] = strides[size_t(i)];
    }
    return t;
  }

  /// One step, every kernel reading what the one before it wrote.
  Status enqueue(CudaDevice *d, StreamHandle st) {
    const KernelLibrary &k = d->kernels();
    KVCacheRef c;
    c.desc = desc;
    c.data = cache.dev.data();
    const TensorRef kvC = view(s, 0, {B, L}, {D, 1});
    const TensorRef kPe = view(s, L, {B, R}, {D, 1});
    const TensorRef xLat = view(x, 0, {B, L}, {D, 1});
    const TensorRef o0 = view(o, 0, {B, L}, {H * L, 1}); // head 0
    MLART_RETURN_IF_ERROR(k.rmsNorm({x.d(), w.d(), 1e-6f, n.d()}, st));
    MLART_RETURN_IF_ERROR(k.add({n.d(), r.d(), s.d()}, st));
    MLART_RETURN_IF_ERROR(k.rope({kPe, pos.d(), cs.d(), RopeStyle::NeoX}, st));
    MLART_RETURN_IF_ERROR(k.cacheUpdate({kvC, kPe, slots.d(), c}, st));
    MLART_RETURN_IF_ERROR(k.decodeAttention(
        {q.d(), c, tab.d(), lens.d(), 0.0625f, o.d(), lse.d(), 0}, st));
    return k.add({xLat, o0, xLat}, st);
  }

  std::vector<std::vector<uint8_t>> snapshot(CudaDevice *d) const {
    return {x.down(d), s.down(d), o.down(d), lse.down(d), cache.down(d)};
  }
};

constexpr int kReplays = 6;

/// Runs the chain kReplays times from the initial state, eagerly or as
/// replays of one captured graph, and returns the state after the first
/// and after the last step.
std::vector<std::vector<std::vector<uint8_t>>>
runChain(CudaDevice *dev, Chain &chain, bool pdl, bool graph) {
  PdlOverride mode(pdl);
  chain.reset(dev);
  EXPECT_TRUE(dev->synchronize().ok());
  StatusOr<Stream> stream = dev->createStream();
  EXPECT_TRUE(stream.ok()) << stream.status().toString();
  if (!stream.ok())
    return {};
  StreamHandle st = stream->handle();
  // Asynchronous checks: no host round trip between the kernels.
  dev->setSynchronousChecks(false);
  struct Restore {
    CudaDevice *d;
    ~Restore() { d->setSynchronousChecks(true); }
  } restore{dev};
  GraphHandle g = nullptr;
  if (graph) {
    EXPECT_TRUE(dev->beginCapture(st).ok());
    Status s = chain.enqueue(dev, st);
    StatusOr<GraphHandle> captured = dev->endCapture(st);
    EXPECT_TRUE(s.ok()) << s.toString();
    EXPECT_TRUE(captured.ok()) << captured.status().toString();
    if (!s.ok() || !captured.ok())
      return {};
    g = *captured;
  }
  std::vector<std::vector<std::vector<uint8_t>>> out;
  for (int i = 0; i < kReplays; ++i) {
    Status s = graph ? dev->launchGraph(g, st) : chain.enqueue(dev, st);
    EXPECT_TRUE(s.ok()) << s.toString();
    if (i == 0 || i == kReplays - 1) {
      EXPECT_TRUE(dev->synchronize(st).ok());
      Status e = dev->checkErrors(st);
      EXPECT_TRUE(e.ok()) << e.toString();
      out.push_back(chain.snapshot(dev));
    }
  }
  if (g)
    dev->destroyGraph(g);
  return out;
}

TEST(CudaPdl, DependentChainMatchesPlainLaunchesBitForBit) {
  REQUIRE_GPU();
  Chain chain(dev);
  const auto want = runChain(dev, chain, /*pdl=*/false, /*graph=*/false);
  ASSERT_EQ(want.size(), 2u);
  // The chain computes something: finite outputs, and the feedback moves x
  // from step to step.
  const std::vector<uint8_t> &o = want[0][2];
  for (int64_t i = 0; i < chain.o.numel(); ++i)
    ASSERT_TRUE(std::isfinite(loadAsFloat(o.data(), DType::BF16, size_t(i))))
        << "o[" << i << "]";
  EXPECT_NE(want[0][0], want[1][0]);
  EXPECT_NE(want[0][0], chain.x.host);

  const char *names[] = {"x", "s", "out", "lse", "cache"};
  for (bool graph : {false, true})
    for (bool pdl : {false, true}) {
      if (!graph && !pdl)
        continue;
      SCOPED_TRACE(std::string(graph ? "graph" : "eager") +
                   (pdl ? ", PDL on" : ", PDL off"));
      const auto got = runChain(dev, chain, pdl, graph);
      ASSERT_EQ(got.size(), want.size());
      for (size_t step = 0; step < got.size(); ++step)
        for (size_t b = 0; b < got[step].size(); ++b)
          EXPECT_TRUE(got[step][b] == want[step][b])
              << names[b] << " differs after step "
              << (step == 0 ? 1 : kReplays);
    }
}

} // namespace
} // namespace mlart::cudatest
