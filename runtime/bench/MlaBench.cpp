//===- MlaBench.cpp - mla-bench: CUDA kernels against measured ceilings ---===//
//
// Usage: mla-bench [OUT.json | --output=OUT.json] [options]; the options
// (BenchOptions.cpp, mla-bench --help) narrow the rows.
// Times every kernel with CUDA events (warm-up, then the median of many
// individually bracketed calls), and measures in the same run the two
// ceilings: a large device-to-device copy (bytes read + written) and a cuBLAS
// bf16 GEMM 8192^3. Bytes and FLOPs are counted as FlashMLA does: 1152 bytes
// per cached token (bf16) + q + out; FLOPs 2*B*H*L*(576+512).
//
//===----------------------------------------------------------------------===//
#include "BenchOptions.h"
#include "DecodeTrace.h"
#include "StepBench.h"
#include "StepTimeline.h"
#include "cuda/CacheCopyKernel.h"
#include "cuda/DecodeCommon.h"
#include "cuda/Knobs.h"
#include "cuda/SkinnyGemmPlan.h"
#include "mlart/Codegen.h"
#include "mlart/CudaDevice.h"

#include "common/JsonWriter.h"
#include "common/ToolMain.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace mlart;

namespace {

CudaDevice *gDev;
StreamHandle gStream;

#define CHECK(expr)                                                            \
  do {                                                                         \
    Status s_ = (expr);                                                        \
    if (!s_.ok()) {                                                            \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,                  \
                   s_.message().c_str());                                      \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

Buffer alloc(size_t bytes) {
  auto b = gDev->allocate(bytes);
  CHECK(b.status());
  return std::move(b).value();
}

uint16_t bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/// Random bf16 in [-1, 1) (never zeros: zeros run faster than real data).
Buffer randomBf16(size_t n, std::mt19937 &rng) {
  // A 1 Mi-value random pattern, tiled with a rotating offset (generating
  // billions of values one by one would dominate the run).
  static std::vector<uint16_t> pattern;
  if (pattern.empty()) {
    std::uniform_real_distribution<float> u(-1, 1);
    pattern.resize(size_t(1) << 20);
    for (auto &v : pattern)
      v = bf16(u(rng));
  }
  std::vector<uint16_t> h(n);
  for (size_t i = 0, k = 0; i < n; i += pattern.size(), ++k) {
    const size_t len = std::min(pattern.size(), n - i);
    const size_t off = (k * 7919) % pattern.size();
    for (size_t j = 0; j < len; ++j)
      h[i + j] = pattern[(off + j) % pattern.size()];
  }
  Buffer b = alloc(n * 2);
  CHECK(gDev->writeBuffer(b, 0, h.data(), n * 2));
  return b;
}

template <typename T> Buffer upload(const std::vector<T> &v) {
  Buffer b = alloc(std::max<size_t>(16, v.size() * sizeof(T)));
  CHECK(gDev->writeBuffer(b, 0, v.data(), v.size() * sizeof(T)));
  return b;
}

/// Median milliseconds of `reps` calls, each bracketed by events.
double timeMs(const std::function<void()> &fn, int reps = 50, int warm = 5) {
  for (int i = 0; i < warm; ++i)
    fn();
  std::vector<EventHandle> a(static_cast<size_t>(reps)), b(static_cast<size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    a[size_t(i)] = gDev->createEvent().value();
    b[size_t(i)] = gDev->createEvent().value();
  }
  CHECK(gDev->synchronize(gStream));
  for (int i = 0; i < reps; ++i) {
    CHECK(gDev->recordEvent(a[size_t(i)], gStream));
    fn();
    CHECK(gDev->recordEvent(b[size_t(i)], gStream));
  }
  CHECK(gDev->synchronize(gStream));
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    ms.push_back(gDev->elapsedMs(a[size_t(i)], b[size_t(i)]).value());
    gDev->destroyEvent(a[size_t(i)]);
    gDev->destroyEvent(b[size_t(i)]);
  }
  CHECK(gDev->checkErrors(gStream));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

/// Per-kernel GPU time in a steady stream: `per` calls captured into one
/// CUDA graph, replays timed with events (median), divided by `per`. This is
/// how a decode step runs (executor graphs); it removes host launch latency,
/// which the per-call numbers include whenever the GPU would otherwise idle.
double graphMs(const std::function<void()> &fn, int per = 20, int reps = 20) {
  cudaStream_t s = static_cast<cudaStream_t>(gStream);
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  CHECK(gDev->synchronize(gStream));
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) != cudaSuccess)
    return NAN;
  for (int i = 0; i < per; ++i)
    fn();
  if (cudaStreamEndCapture(s, &g) != cudaSuccess ||
      cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) {
    cudaGetLastError();
    return NAN;
  }
  double ms = timeMs([&] { cudaGraphLaunch(ge, s); }, reps, 3);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  return ms / per;
}

struct Row {
  std::string kernel, shape;
  double us, gbs, tflops, pctCopy, pctGemm, usCall;
};
std::vector<Row> rows;
double copyGBs = 0, gemmTflops = 0;

/// `ms`: graph-replay time per call when available, else per-call time.
void add(const std::string &k, const std::string &shape, double ms,
         double bytes, double flops, double callMs = NAN) {
  Row r{k, shape, ms * 1e3, bytes / ms / 1e6, flops / ms / 1e9, 0, 0, callMs * 1e3};
  r.pctCopy = copyGBs > 0 ? 100.0 * r.gbs / copyGBs : 0;
  r.pctGemm = gemmTflops > 0 ? 100.0 * r.tflops / gemmTflops : 0;
  rows.push_back(r);
  std::printf("| %-18s | %-20s | %9.2f | %9.2f | %8.1f | %6.1f | %6.1f%% | %6.1f%% |\n",
              k.c_str(), shape.c_str(), r.us, r.usCall, r.gbs, r.tflops,
              r.pctCopy, r.pctGemm);
  std::fflush(stdout);
}

/// Writes every row, with the ceilings of this run, as JSON (a row a line);
/// false, with a message, when the file cannot be written.
bool writeJson(const std::string &path, const std::string &device) {
  using tool::NumberFormat;
  const NumberFormat f1 = NumberFormat::fixed(1), f2 = NumberFormat::fixed(2),
                     f3 = NumberFormat::fixed(3);
  tool::JsonWriter json(/*lineDepth=*/2);
  json.beginObject();
  json.member("device", device);
  json.memberNumber("copy_gbs", copyGBs, f1);
  json.memberNumber("gemm_tflops", gemmTflops, f1);
  json.key("rows");
  json.beginArray();
  for (const Row &r : rows) {
    json.beginObject();
    json.member("kernel", r.kernel);
    json.member("shape", r.shape);
    json.memberNumber("us", r.us, f3);
    json.memberNumber("gbs", r.gbs, f1);
    json.memberNumber("tflops", r.tflops, f2);
    json.memberNumber("pct_copy", r.pctCopy, f1);
    json.memberNumber("pct_gemm", r.pctGemm, f1);
    // -1: no per-call time (the ceilings), as the results files have it.
    json.memberNumber("us_per_call", std::isnan(r.usCall) ? -1.0 : r.usCall,
                      f3);
    json.endObject();
  }
  json.endArray();
  json.endObject();
  bool written = false;
  if (FILE *f = std::fopen(path.c_str(), "w")) {
    written =
        std::fputs(json.str().c_str(), f) >= 0 && std::fputc('\n', f) != EOF;
    written = std::fclose(f) == 0 && written;
  }
  if (!json.complete() || !written) {
    std::fprintf(stderr, "mla-bench: cannot write %s\n", path.c_str());
    return false;
  }
  std::printf("wrote %s\n", path.c_str());
  return true;
}

TensorRef ten(void *p, DType t, std::initializer_list<int64_t> s) {
  return TensorRef::contiguous(p, t, s);
}

/// Inputs of one bf16 decode call: B sequences of L tokens, H heads, block
/// size 64 and a table of `perSeq` blocks a sequence (the compiled step's
/// 65 for L=4096), a random cache in shuffled pages, random queries.
struct BenchDecode {
  int64_t B, H, L, perSeq;
  static constexpr int64_t bs = 64;
  Buffer cacheBuf, table, lens, q, out, lse;
  std::vector<int32_t> tableHost;
  KVCacheRef cache;
  double tokens; ///< all sequences' lengths: B * L unless setLengths

  BenchDecode(int64_t B, int64_t H, int64_t L, int64_t perSeq,
              std::mt19937 &rng)
      : B(B), H(H), L(L), perSeq(perSeq), tokens(double(B) * double(L)) {
    const int64_t numBlocks = B * perSeq + 1;
    cache.desc.numBlocks = numBlocks;
    cache.desc.blockSize = bs;
    cacheBuf = randomBf16(size_t(numBlocks * bs * 576), rng);
    cache.data = cacheBuf.data();
    std::vector<int32_t> ids(static_cast<size_t>(numBlocks - 1));
    std::iota(ids.begin(), ids.end(), 1);
    std::shuffle(ids.begin(), ids.end(), rng);
    table = upload(ids);
    tableHost = ids;
    lens = upload(std::vector<int32_t>(size_t(B), int32_t(L)));
    q = randomBf16(size_t(B * H * 576), rng);
    out = alloc(size_t(B * H * 512 * 2));
    lse = alloc(size_t(B * H * 4));
  }
  /// Mixed lengths (each <= perSeq * bs) instead of L for every sequence.
  void setLengths(const std::vector<int32_t> &lengths) {
    lens = upload(lengths);
    tokens = 0;
    for (int32_t n : lengths)
      tokens += n;
  }
  /// The compiled step's shape: B=64, H=16, L=4096, 65 blocks a sequence.
  static BenchDecode stepShape(std::mt19937 &rng) {
    return BenchDecode(64, 16, 4096, 65, rng);
  }
  /// The call with `splits` (0: the heuristic).
  DecodeAttentionArgs args(int splits) const {
    DecodeAttentionArgs a;
    a.q = ten(q.data(), DType::BF16, {B, H, 576});
    a.cache = cache;
    a.blockTable = ten(table.data(), DType::I32, {B, perSeq});
    a.seqLens = ten(lens.data(), DType::I32, {B});
    a.softmaxScale = 0.1f;
    a.out = ten(out.data(), DType::BF16, {B, H, 512});
    a.lse = ten(lse.data(), DType::F32, {B, H});
    a.numSplits = splits;
    return a;
  }
  /// The slots of each sequence's last position (L - 1): where a decode
  /// step stores its new rows.
  std::vector<int32_t> lastSlots() const {
    std::vector<int32_t> slots;
    slots.reserve(size_t(B));
    for (int64_t b = 0; b < B; ++b)
      slots.push_back(tableHost[size_t(b * perSeq + (L - 1) / bs)] *
                          int32_t(bs) +
                      int32_t((L - 1) % bs));
    return slots;
  }
  /// Bytes and FLOPs as FlashMLA counts them.
  double bytes() const {
    return tokens * 1152 + double(B) * H * (576 + 512) * 2;
  }
  double flops() const { return 2.0 * H * tokens * (576 + 512); }
};

/// --decode-trace: the 16-head decode kernel's per-CTA timeline
/// (DecodeTrace.h) for the step's shape (B=64, H=16, L=4096, bs 64) alone,
/// then inside each compiled step of `steps` (eager and a graph replay).
void traceDecodes(const KernelLibrary &k, std::mt19937 &rng,
                  const std::vector<std::string> &steps, int64_t stepContext) {
  static_assert(size_t(cuda::kDecodeTraceFields) == bench::kDecodeTraceValues,
                "the kernel's trace record and the summary's agree");
  const size_t values = size_t(8192) * cuda::kDecodeTraceFields;
  Buffer trace = alloc(values * sizeof(uint64_t));
  auto record = [&](const std::string &title, const std::function<void()> &fn) {
    CHECK(gDev->memset(trace.data(), 0, values * sizeof(uint64_t), gStream));
    cuda::setDecodeTraceBuffer(static_cast<unsigned long long *>(trace.data()));
    fn();
    cuda::setDecodeTraceBuffer(nullptr);
    CHECK(gDev->synchronize(gStream));
    std::vector<uint64_t> raw(values);
    CHECK(gDev->readBuffer(trace, 0, raw.data(), values * sizeof(uint64_t)));
    std::printf("%s", bench::formatDecodeTrace(
                          title, bench::summarizeDecodeTrace(
                                     bench::parseDecodeTrace(raw)))
                          .c_str());
  };
  {
    const BenchDecode d = BenchDecode::stepShape(rng);
    for (int splits : {0, 1, 4}) {
      const DecodeAttentionArgs a = d.args(splits);
      for (int i = 0; i < 3; ++i) // warm
        CHECK(k.decodeAttention(a, gStream));
      record("alone, B=64 L=4096 splits=" +
                 (splits ? std::to_string(splits) : std::string("heuristic")),
             [&] { CHECK(k.decodeAttention(a, gStream)); });
    }
  }
  for (const std::string &path : steps) {
    auto step = bench::CompiledStep::load(*gDev, path, stepContext, rng);
    if (!step.ok()) {
      std::printf("step %s: %s\n", path.c_str(),
                  step.status().message().c_str());
      continue;
    }
    Executor &ex = step.value()->executor();
    ex.setMaxStreams(2);
    CHECK(ex.run(gStream));
    record("in the step, eager (" + path + ")", [&] { CHECK(ex.run(gStream)); });
    cuda::setDecodeTraceBuffer(static_cast<unsigned long long *>(trace.data()));
    CHECK(ex.captureGraph(gStream)); // the trace pointer is captured
    cuda::setDecodeTraceBuffer(nullptr);
    for (int i = 0; i < 3; ++i)
      CHECK(ex.runGraph(gStream, true));
    record("in the step, graph replay (" + path + ")",
           [&] { CHECK(ex.runGraph(gStream, false)); });
  }
}

/// The decode step's dense projections at B = 64 (DeepSeek-V2-Lite), each
/// through cuBLAS and through each variant of the skinny kernel
/// (the MLART_SKINNY_GEMM and MLART_SKINNY_VARIANT knobs, forced per row). As in the step, the weights come from DRAM: calls
/// rotate over copies of each weight spanning 128 MB (> 2x the 60 MB L2),
/// else a 20-call graph would re-read one weight from L2. Bytes: the
/// weights only, what must stream once per call. A last row per path sums
/// the five.
void benchStepGemms(const KernelLibrary &k, std::mt19937 &rng) {
  const int64_t B = 64, H = 16;
  const double kColdBytes = 128.0 * (1 << 20);
  std::vector<Buffer> keep;
  auto random = [&](int64_t n) { keep.push_back(randomBf16(size_t(n), rng)); return keep.back().data(); };
  auto empty = [&](int64_t n) { keep.push_back(alloc(size_t(n) * 2)); return keep.back().data(); };
  struct Call {
    std::string name, shape;
    double weightBytes;
    std::function<Status(void *w)> fn; // the call with weight copy w
    std::vector<void *> copies;
    size_t next = 0;
    bool inSum = true; // one of the step's five projections
  };
  std::vector<Call> calls;
  auto weights = [&](Call &c, int64_t elems) {
    const int n = std::max(1, int(std::ceil(kColdBytes / (2.0 * double(elems)))));
    for (int i = 0; i < n; ++i)
      c.copies.push_back(random(elems));
  };
  struct Lin { int64_t n, k; const char *name; };
  // q_kv_a_proj: q_proj and kv_a_proj as one GEMM over their concatenated
  // weights (mla-fuse-projections); not part of the five-GEMM sums.
  for (Lin l : {Lin{3072, 2048, "q_proj"}, Lin{576, 2048, "kv_a_proj"},
                Lin{2048, 2048, "o_proj"}, Lin{3648, 2048, "q_kv_a_proj"}}) {
    TensorRef x = ten(random(B * l.k), DType::BF16, {B, l.k});
    TensorRef out = ten(empty(B * l.n), DType::BF16, {B, l.n});
    Call c{std::string("linear ") + l.name,
           "64x" + std::to_string(l.k) + "->" + std::to_string(l.n),
           double(l.n * l.k) * 2, [&k, x, out, l](void *w) {
             LinearArgs a{x, ten(w, DType::BF16, {l.n, l.k}), out};
             a.staticWeight = true; // as in the step: weights are constant
             return k.linear(a, gStream);
           }};
    c.inSum = std::string(l.name) != "q_kv_a_proj";
    weights(c, l.n * l.k);
    calls.push_back(std::move(c));
  }
  {
    TensorRef q = ten(empty(B * H * 576), DType::BF16, {B, H, 576});
    q.sizes[2] = 512; // q_absorb writes the latent part of the assembled query
    TensorRef qn = ten(random(B * H * 128), DType::BF16, {B, H, 128});
    Call c{"q_absorb", "64x16x128->512", double(H * 128 * 512) * 2,
           [&k, qn, q, H](void *w) {
             return k.qAbsorb({qn, ten(w, DType::BF16, {H, 128, 512}), q, true},
                              gStream);
           }};
    weights(c, H * 128 * 512);
    calls.push_back(std::move(c));
    TensorRef ol = ten(random(B * H * 512), DType::BF16, {B, H, 512});
    TensorRef vo = ten(empty(B * H * 128), DType::BF16, {B, H, 128});
    Call v{"v_up", "64x16x512->128", double(H * 512 * 128) * 2,
           [&k, ol, vo, H](void *w) {
             return k.vUp({ol, ten(w, DType::BF16, {H, 512, 128}), vo, true},
                          gStream);
           }};
    weights(v, H * 512 * 128);
    calls.push_back(std::move(v));
  }
  // cuBLAS, then every skinny variant (MLART_SKINNY_VARIANT, SkinnyGemmPlan.h).
  for (int mode = -1; mode < mlart::cuda::kSkinnyVariants; ++mode) {
    mlart::cuda::setKnobOverride(mlart::cuda::Knob::SkinnyGemm, mode < 0 ? 0 : 1);
    mlart::cuda::setKnobOverride(mlart::cuda::Knob::SkinnyVariant, std::max(0, mode));
    const std::string digit(1, char('0' + std::max(0, mode)));
    std::string tag = " [cublas]";
    if (mode >= 0) {
      const mlart::cuda::SkinnyVariant v = mlart::cuda::skinnyVariant(mode);
      tag = " [skinny v" + digit + " sp<=" + std::to_string(v.maxSplit) +
            (v.earlyWeights ? " early-w" : " late-w") +
            (v.tma ? " tma]" : " mma]");
    }
    Status s = calls[0].fn(calls[0].copies[0]);
    if (!s.ok()) { // no cuBLAS: the library reports Unavailable
      std::printf("(step GEMM rows%s skipped: %s)\n", tag.c_str(), s.message().c_str());
      continue;
    }
    double sumMs = 0, sumBytes = 0;
    for (Call &c : calls) {
      auto fn = [&c] {
        CHECK(c.fn(c.copies[c.next]));
        c.next = (c.next + 1) % c.copies.size();
      };
      double ms = graphMs(fn);
      const double call = timeMs(fn);
      if (std::isnan(ms))
        ms = call;
      add("step " + c.name + tag, c.shape, ms, c.weightBytes, 0, call);
      if (c.inSum) {
        sumMs += ms;
        sumBytes += c.weightBytes;
      }
    }
    add("step gemms sum" + tag, "5 projections", sumMs, sumBytes, 0);
    if (mode >= 0)
      continue;
    // The same calls with one weight copy each, so the weight stays in L2:
    // the bound on what an L2 prefetch ahead of a GEMM can win.
    double warmMs = 0;
    for (Call &c : calls) {
      auto fn = [&c] { CHECK(c.fn(c.copies[0])); };
      double ms = graphMs(fn);
      if (std::isnan(ms))
        ms = timeMs(fn);
      add("step " + c.name + " [cublas L2-warm]", c.shape, ms, c.weightBytes, 0);
      if (c.inSum)
        warmMs += ms;
    }
    add("step gemms sum [cublas L2-warm]", "5 projections", warmMs, sumBytes, 0);
  }
  mlart::cuda::setKnobOverride(mlart::cuda::Knob::SkinnyGemm, std::nullopt);
  mlart::cuda::setKnobOverride(mlart::cuda::Knob::SkinnyVariant, std::nullopt);
}

/// o_proj + residual at B = 64 (DeepSeek-V2-Lite: 2048 -> 2048): the
/// unfused pair (linear through cublasGemmEx, then the add kernel) against
/// the fused linear with an addend (cuBLASLt epilogue), plain and with
/// MLART_GEMM_AUTOTUNE, and the plain linear through cuBLASLt
/// (MLART_GEMM_LT=1). Cold weights as in benchStepGemms.
void benchResidualGemm(const KernelLibrary &k, std::mt19937 &rng) {
  const int64_t B = 64, N = 2048, K = 2048;
  const double kColdBytes = 128.0 * (1 << 20);
  std::vector<Buffer> keep;
  keep.push_back(randomBf16(size_t(B * K), rng));
  TensorRef x = ten(keep.back().data(), DType::BF16, {B, K});
  keep.push_back(randomBf16(size_t(B * N), rng));
  TensorRef r = ten(keep.back().data(), DType::BF16, {B, N});
  keep.push_back(alloc(size_t(B * N) * 2));
  TensorRef tmp = ten(keep.back().data(), DType::BF16, {B, N});
  keep.push_back(alloc(size_t(B * N) * 2));
  TensorRef out = ten(keep.back().data(), DType::BF16, {B, N});
  std::vector<TensorRef> ws;
  const int copies = std::max(1, int(std::ceil(kColdBytes / (2.0 * N * K))));
  for (int i = 0; i < copies; ++i) {
    keep.push_back(randomBf16(size_t(N * K), rng));
    ws.push_back(ten(keep.back().data(), DType::BF16, {N, K}));
  }
  size_t next = 0;
  auto weight = [&] {
    const TensorRef w = ws[next];
    next = (next + 1) % ws.size();
    return w;
  };
  struct Variant {
    const char *name;
    int lt, tune;
    bool fused;
  };
  for (Variant v : {Variant{"linear+add [cublas]", 0, 0, false},
                    Variant{"linear+add [lt]", 1, 0, false},
                    Variant{"linear addend [lt]", 0, 0, true},
                    Variant{"linear addend [lt tuned]", 0, 1, true}}) {
    mlart::cuda::setKnobOverride(mlart::cuda::Knob::GemmLt, v.lt);
    mlart::cuda::setKnobOverride(mlart::cuda::Knob::GemmAutotune, v.tune);
    auto fn = [&] {
      if (v.fused) {
        LinearArgs a{x, weight(), out, r};
        CHECK(k.linear(a, gStream));
      } else {
        CHECK(k.linear({x, weight(), tmp}, gStream));
        CHECK(k.add({r, tmp, out}, gStream));
      }
    };
    for (size_t i = 0; i < ws.size(); ++i) // plans, autotune, workspace
      fn();
    double ms = graphMs(fn);
    const double call = timeMs(fn);
    if (std::isnan(ms))
      ms = call;
    add(std::string("o_proj+residual ") + v.name, "64x2048->2048", ms,
        double(N * K) * 2, 2.0 * double(B) * N * K, call);
  }
  mlart::cuda::setKnobOverride(mlart::cuda::Knob::GemmLt, std::nullopt);
  mlart::cuda::setKnobOverride(mlart::cuda::Knob::GemmAutotune, std::nullopt);
}

/// Generated (docs/codegen.md) vs library cache-write kernels, side by side,
/// when MLART_CODEGEN_ARTIFACT names the fixture artifact
/// (runtime/test/cuda/Inputs/codegen-kernels.mlir compiled by mla-opt +
/// mla-translate).
void benchCodegen(CudaDevice &dev, bool quick, std::mt19937 &rng) {
  const char *path = std::getenv("MLART_CODEGEN_ARTIFACT");
  if (!path) {
    std::printf("(codegen rows skipped: MLART_CODEGEN_ARTIFACT is not set)\n");
    return;
  }
  StatusOr<Artifact> art = Artifact::loadFile(path);
  CHECK(art.status());
  const KernelLibrary &k = dev.kernels();
  const int64_t maxT = 65536;
  auto kernelFor = [&](const CodegenSignature &sig) -> const CodegenKernel * {
    for (const CodegenKernel &kern : art->kernels())
      if (kern.name == codegenKernelName(sig))
        return &kern;
    std::printf("fixture lacks %s\n", codegenKernelName(sig).c_str());
    return nullptr;
  };
  std::vector<int64_t> perm(static_cast<size_t>(2 * maxT));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  perm.resize(size_t(maxT));
  Buffer slots = upload(perm);
  std::vector<int32_t> pos32(static_cast<size_t>(maxT));
  for (auto &p : pos32)
    p = int32_t(rng() % 8192);
  Buffer pos = upload(pos32);
  std::vector<float> cs(static_cast<size_t>(8192 * 64));
  for (auto &c : cs)
    c = float(rng() % 2001) / 1000.0f - 1.0f;
  Buffer csB = upload(cs);
  Buffer kv = randomBf16(size_t(maxT * 512), rng);
  Buffer kp = randomBf16(size_t(maxT * 64), rng);
  Buffer q = randomBf16(size_t(4096) * 128 * 64, rng);
  for (CacheLayout layout : {CacheLayout::Plain, CacheLayout::Fp8DsMla}) {
    KVCacheRef cache;
    cache.desc.numBlocks = 2 * maxT / 64;
    cache.desc.blockSize = 64;
    cache.desc.layout = layout;
    cache.desc.dtype =
        layout == CacheLayout::Plain ? DType::BF16 : DType::F8E4M3FN;
    Buffer cacheBuf = alloc(size_t(cache.desc.totalBytes()));
    cache.data = cacheBuf.data();
    const char *lname = layout == CacheLayout::Plain ? "bf16" : "ds_mla";
    CodegenSignature sig;
    sig.layout = layout;
    sig.cacheDType = cache.desc.dtype;
    sig.latentRank = 512;
    sig.ropeDim = 64;
    // Update only.
    if (const CodegenKernel *kern = kernelFor(sig))
      for (int64_t T : {1, 16, 256, 4096, 65536}) {
        RopeCacheUpdateArgs a;
        a.kvC = ten(kv.data(), DType::BF16, {T, 512});
        a.kPe = ten(kp.data(), DType::BF16, {T, 64});
        a.slotMapping = ten(slots.data(), DType::I64, {T});
        a.cache = cache;
        const CodegenModule &mod = art->modules()[kern->module];
        for (int gen = 0; gen < 2; ++gen) {
          auto fn = [&] {
            CHECK(gen ? dev.launchCodegenCacheWrite(mod, *kern, a, gStream)
                      : k.cacheUpdate({a.kvC, a.kPe, a.slotMapping, cache},
                                      gStream));
          };
          double call = timeMs(fn, quick ? 20 : 100);
          double ms = graphMs(fn);
          add(std::string("update ") + lname + (gen ? " [gen]" : " [lib]"),
              "T=" + std::to_string(T), std::isnan(ms) ? call : ms,
              double(T) * (1152 + double(cache.desc.rowBytes())), 0, call);
        }
      }
    // Fused rope + update with q (NeoX, i32 positions for the plain
    // fixture kernel; GPT-J for fp8_ds_mla).
    sig.op = Opcode::RopeCacheUpdate;
    sig.rotatesQ = true;
    sig.style = layout == CacheLayout::Plain ? RopeStyle::NeoX : RopeStyle::GptJ;
    sig.positions = layout == CacheLayout::Plain ? DType::I32 : DType::I64;
    std::vector<int64_t> pos64(pos32.begin(), pos32.begin() + 4096);
    Buffer posB64 = upload(pos64);
    if (const CodegenKernel *kern = kernelFor(sig))
      for (int Hq : {16, 128})
        for (int64_t T : {1, 16, 256, 4096}) {
          RopeCacheUpdateArgs a;
          a.kvC = ten(kv.data(), DType::BF16, {T, 512});
          a.kPe = ten(kp.data(), DType::BF16, {T, 64});
          a.slotMapping = ten(slots.data(), DType::I64, {T});
          a.cache = cache;
          a.positions = sig.positions == DType::I32
                            ? ten(pos.data(), DType::I32, {T})
                            : ten(posB64.data(), DType::I64, {T});
          a.cosSin = ten(csB.data(), DType::F32, {8192, 64});
          a.style = sig.style;
          a.qPe = ten(q.data(), DType::BF16, {T, Hq, 64});
          const CodegenModule &mod = art->modules()[kern->module];
          for (int gen = 0; gen < 2; ++gen) {
            auto fn = [&] {
              CHECK(gen ? dev.launchCodegenCacheWrite(mod, *kern, a, gStream)
                        : k.ropeCacheUpdate(a, gStream));
            };
            double call = timeMs(fn, quick ? 20 : 100);
            double ms = graphMs(fn);
            add(std::string("rope+upd ") + lname + (gen ? " [gen]" : " [lib]"),
                "T=" + std::to_string(T) + " Hq=" + std::to_string(Hq),
                std::isnan(ms) ? call : ms,
                double(T) * (1152 + 128 + double(cache.desc.rowBytes()) +
                             256.0 * Hq),
                0, call);
          }
        }
  }
}

/// Prefill attention (bf16, q/k 192, v 128: the DeepSeek heads) over
/// `lens` new tokens a request with `ctx` cached tokens each (bs 64), on the
/// tensor-core kernel and on the CUDA-core one (MLART_PREFILL_FLASH forced).
/// FLOPs as executed: the causal new-token part in MHA form, 2 * H *
/// n(n+1)/2 * (192 + 128) a request, and the context: on the CUDA cores in
/// absorbed form, 2 * H * n * ctx * (576 + 512); on the tensor-core route
/// expanded (2 * rows * 512 * (128 + 128) * H, rows = the block table's
/// capacity a request, or the host-side bound when smaller) and attended in
/// MHA form, 2 * H * n * ctx * 320. The "table 32k" rows give each request
/// a block table for 32768 tokens, as an engine sized for long sequences
/// does, with and without PrefillAttentionArgs::contextLenBound; they run
/// the tensor-core route only. Bytes: q, k, v, out and the context rows.
void benchPrefill(const KernelLibrary &k, std::mt19937 &rng, bool quick) {
  struct Shape {
    int64_t H;
    std::vector<int32_t> lens;
    int32_t ctx;
    const char *name;
    int32_t tableTokens = 0; ///< block table capacity; 0: ctx rounded up
    int64_t bound = 0;       ///< contextLenBound
  };
  const std::vector<int32_t> fourShort = {256, 256, 256, 256};
  const Shape shapes[] = {
      {16, {4096}, 0, "H=16 T=4096"},
      {16, {1024, 1024, 1024, 1024}, 0, "H=16 4x1024"},
      {128, {4096}, 0, "H=128 T=4096"},
      {16, fourShort, 2048, "H=16 4x256 ctx 2048"},
      {16, {1024, 1024}, 8192, "H=16 2x1024 ctx 8192"},
      {16, fourShort, 2048, "H=16 4x256 ctx 2048 table 32k", 32768},
      {16, fourShort, 2048, "H=16 4x256 ctx 2048 table 32k bound", 32768,
       2048},
  };
  for (const Shape &sh : shapes) {
    const int64_t H = sh.H, R = int64_t(sh.lens.size());
    std::vector<int32_t> qsl{0};
    double flops = 0, ctxAbsorbed = 0, ctxExpanded = 0;
    const int64_t tableBlocks =
        (sh.tableTokens > 0 ? sh.tableTokens : (sh.ctx + 63)) / 64;
    const double capacity =
        sh.bound > 0 ? double(std::min<int64_t>(sh.bound, tableBlocks * 64))
                     : double(tableBlocks * 64);
    for (int32_t n : sh.lens) {
      qsl.push_back(qsl.back() + n);
      flops += 2.0 * H * (double(n) * (n + 1) / 2) * (192 + 128);
      ctxAbsorbed += 2.0 * H * double(n) * sh.ctx * (576 + 512);
      ctxExpanded += 2.0 * H * double(n) * sh.ctx * (192 + 128) +
                     (sh.ctx > 0 ? 2.0 * capacity * 512 * 256 * H : 0.0);
    }
    const int64_t T = qsl.back();
    Buffer q = randomBf16(size_t(T * H * 192), rng);
    Buffer kk = randomBf16(size_t(T * H * 192), rng);
    Buffer v = randomBf16(size_t(T * H * 128), rng);
    Buffer out = alloc(size_t(T * H * 128 * 2)), lse = alloc(size_t(T * H * 4));
    Buffer loc = upload(qsl);
    PrefillAttentionArgs a;
    a.q = ten(q.data(), DType::BF16, {T, H, 192});
    a.k = ten(kk.data(), DType::BF16, {T, H, 192});
    a.v = ten(v.data(), DType::BF16, {T, H, 128});
    a.queryStartLoc = ten(loc.data(), DType::I32, {R + 1});
    a.softmaxScale = 1.0f / std::sqrt(192.0f);
    a.out = ten(out.data(), DType::BF16, {T, H, 128});
    a.lse = ten(lse.data(), DType::F32, {T, H});
    double bytes = double(T) * H * (192 * 2 + 128 * 2) * 2;
    Buffer cacheBuf, table, ctxLens, wuk, wuv;
    if (sh.ctx > 0) {
      const int64_t perSeq = (sh.ctx + 63) / 64, blocks = R * perSeq + 1;
      cacheBuf = randomBf16(size_t(blocks * 64 * 576), rng);
      a.cache.data = cacheBuf.data();
      a.cache.desc.numBlocks = blocks;
      a.cache.desc.blockSize = 64;
      std::vector<int32_t> ids(size_t(blocks - 1));
      std::iota(ids.begin(), ids.end(), 1);
      std::shuffle(ids.begin(), ids.end(), rng);
      // Rows past a request's context are never read; block 0 fills them.
      std::vector<int32_t> rows(size_t(R * tableBlocks), 0);
      for (int64_t r = 0; r < R; ++r)
        std::copy_n(ids.begin() + r * perSeq, perSeq,
                    rows.begin() + r * tableBlocks);
      table = upload(rows);
      ctxLens = upload(std::vector<int32_t>(size_t(R), sh.ctx));
      wuk = randomBf16(size_t(H * 128 * 512), rng);
      wuv = randomBf16(size_t(H * 512 * 128), rng);
      a.blockTable = ten(table.data(), DType::I32, {R, tableBlocks});
      a.contextLenBound = sh.bound;
      a.contextLens = ten(ctxLens.data(), DType::I32, {R});
      a.wUK = ten(wuk.data(), DType::BF16, {H, 128, 512});
      a.wUV = ten(wuv.data(), DType::BF16, {H, 512, 128});
      bytes += double(R) * sh.ctx * 1152;
    }
    for (int flash : {1, 0}) {
      if (!flash && sh.tableTokens > 0)
        continue; // the CUDA-core route reads only the context either way
      cuda::setKnobOverride(cuda::Knob::PrefillFlash, flash);
      auto fn = [&] { CHECK(k.prefillAttention(a, gStream)); };
      const bool slow = !flash && (H > 16 || sh.ctx > 0);
      const double ms = timeMs(fn, quick || slow ? 3 : 10, slow ? 1 : 2);
      add(flash ? "prefill [flash]" : "prefill [CUDA cores]", sh.name, ms,
          bytes, flops + (flash ? ctxExpanded : ctxAbsorbed), ms);
    }
    cuda::setKnobOverride(cuda::Knob::PrefillFlash, std::nullopt);
  }
}

int runMain(int argc, char **argv) {
  bench::BenchOptions options;
  if (std::optional<int> exit = bench::parseBenchOptions(argc, argv, options))
    return *exit;
  const std::string &jsonPath = options.output;
  const bool quick = options.quick, noCeilings = options.noCeilings,
             codegenOnly = options.codegenOnly, stepOnly = options.stepOnly,
             gemmOnly = options.gemmOnly, prefillOnly = options.prefillOnly,
             cacheOnly = options.cacheOnly;
  bool decodeOnly = options.decodeOnly, noH128 = options.noH128;
  const std::vector<std::string> &stepPaths = options.steps;
  const int64_t stepContext = options.stepContext, updateT = options.updateT;
  const int decodeH = options.decodeH, decodeB = options.decodeB;
  const int64_t decodeL = options.decodeL;
  const std::string &timelinePath = options.timelinePath;
#ifndef MLA_BENCH_HAVE_CUPTI
  if (!timelinePath.empty()) {
    std::fprintf(stderr, "mla-bench: --timeline: built without CUPTI (CMake "
                         "found no libcupti in the CUDA toolkit)\n");
    return 2;
  }
#endif
  auto d = createCudaDevice(0);
  if (!d.ok()) {
    std::printf("mla-bench: no GPU: %s\n", d.status().message().c_str());
    return timelinePath.empty() ? 0 : 1;
  }
  std::unique_ptr<CudaDevice> dev = std::move(d).value();
  gDev = dev.get();
  auto st = dev->createStream();
  CHECK(st.status());
  gStream = st.value().handle();
  dev->setSynchronousChecks(false); // timing: no host sync per call
  const KernelLibrary &k = dev->kernels();
  std::mt19937 rng(1234);
  std::printf("device: %s, %d SMs, L2 %zu MB\n", dev->deviceName().c_str(),
              dev->multiprocessorCount(), dev->l2CacheBytes() >> 20);
#ifdef MLA_BENCH_HAVE_CUPTI
  if (!timelinePath.empty()) {
    bench::StepTimelineOptions o;
    o.steps = stepPaths;
    o.context = stepContext;
    if (options.timelineStreams > 0)
      o.streams = {options.timelineStreams};
    o.replays = options.timelineReplays;
    o.path = timelinePath;
    Status s = bench::runStepTimeline(*dev, gStream, o, rng);
    if (!s.ok()) {
      std::fprintf(stderr, "mla-bench: --timeline: %s\n", s.message().c_str());
      return 1;
    }
    return 0;
  }
#endif

  if (options.decodeTrace) {
    traceDecodes(k, rng, stepPaths, stepContext);
    return 0;
  }

  std::printf("us = GPU time per call in a captured graph (20 calls/graph, median of 20 replays);\n"
              "us/call = one call bracketed by events (median), includes host launch latency\n");
  std::printf("| kernel             | shape                |        us |   us/call |     GB/s | TFLOP/s | %% copy | %% gemm |\n"
              "|---|---|---:|---:|---:|---:|---:|---:|\n");
  // Ceilings.
  if (!noCeilings) {
    const size_t n = size_t(2) << 30;
    Buffer a = randomBf16(n / 2, rng), b = alloc(n);
    double ms = timeMs([&] {
      CHECK(dev->copyDeviceToDevice(b.data(), a.data(), n, gStream));
    }, 20, 3);
    copyGBs = 2.0 * double(n) / ms / 1e6;
    add("ceiling:copy", "2 GiB d2d (r+w)", ms, 2.0 * double(n), 0);
  }
  // Generated (PTX) cache writers beside the library's (docs/codegen.md).
  if ((!decodeOnly || codegenOnly) && !updateT && !gemmOnly && !prefillOnly)
    benchCodegen(*dev, quick, rng);
  if (codegenOnly)
    return 0;
  if (!noCeilings) {
    const int64_t n = 8192;
    Buffer x = randomBf16(size_t(n * n), rng), w = randomBf16(size_t(n * n), rng),
           o = alloc(size_t(n * n * 2));
    LinearArgs la{ten(x.data(), DType::BF16, {n, n}),
                  ten(w.data(), DType::BF16, {n, n}),
                  ten(o.data(), DType::BF16, {n, n})};
    Status s = k.linear(la, gStream);
    if (!s.ok()) {
      std::printf("cuBLAS unavailable: %s\n", s.message().c_str());
    } else {
      double ms = timeMs([&] { CHECK(k.linear(la, gStream)); }, 20, 3);
      gemmTflops = 2.0 * double(n) * n * n / ms / 1e9;
      add("ceiling:gemm", "bf16 8192^3 (cuBLAS)", ms, 3.0 * n * n * 2,
          2.0 * double(n) * n * n);
    }
  }
  if (prefillOnly) {
    benchPrefill(k, rng, quick);
    return writeJson(jsonPath, dev->deviceName()) ? 0 : 1;
  }
  if (gemmOnly) {
    benchStepGemms(k, rng);
    benchResidualGemm(k, rng);
    return writeJson(jsonPath, dev->deviceName()) ? 0 : 1;
  }

  // Whole compiled decode steps (mla-gen | mla-opt | mla-translate), eager
  // (one Executor::run per call, host launches included) and replayed as
  // the executor's CUDA graph.
  // Kept for the tuned rows below.
  std::vector<std::pair<std::string, std::unique_ptr<bench::CompiledStep>>>
      loadedSteps;
  for (const std::string &path : stepPaths) {
    auto step = bench::CompiledStep::load(*dev, path, stepContext, rng);
    if (!step.ok()) {
      std::printf("step %s: %s\n", path.c_str(), step.status().message().c_str());
      continue;
    }
    Executor &ex = step.value()->executor();
    const std::string base = path.substr(path.find_last_of('/') + 1);
    const std::string shape = "B=" + std::to_string(step.value()->batch()) +
                              " L=" + std::to_string(stepContext + 1);
    // One stream (program order) and the executor's default of two
    // (docs/runtime.md, "Concurrent streams"), in the same run.
    for (int streams : {1, 2}) {
      ex.setMaxStreams(streams);
      const std::string tag = " streams=" + std::to_string(streams);
      CHECK(ex.run(gStream)); // loads cuBLAS, warms the allocator
      double eager =
          timeMs([&] { CHECK(ex.run(gStream)); }, quick ? 10 : 30);
      add("step " + base + " eager" + tag, shape, eager,
          step.value()->bytes(), step.value()->flops(), eager);
      CHECK(ex.captureGraph(gStream));
      double graph = timeMs([&] { CHECK(ex.runGraph(gStream, false)); },
                            quick ? 10 : 30);
      add("step " + base + " graph" + tag, shape, graph,
          step.value()->bytes(), step.value()->flops(), graph);
    }
    loadedSteps.emplace_back(path, std::move(step).value());
  }
  // The same steps with each GEMM's cuBLASLt algorithm chosen by
  // replaying the step (Executor::tuneGraph), after every untuned row: the
  // choice holds for the rest of the process.
  for (auto &[path, step] : loadedSteps) {
    Executor &ex = step->executor();
    const std::string base = path.substr(path.find_last_of('/') + 1);
    const std::string shape = "B=" + std::to_string(step->batch()) +
                              " L=" + std::to_string(stepContext + 1);
    ex.setMaxStreams(2);
    auto choices = ex.tuneGraph(gStream);
    CHECK(choices.status());
    for (const Executor::GemmChoice &c : *choices)
      std::printf("tuned %s: %s\n", base.c_str(),
                  ex.describeGemmChoice(c).c_str());
    double graph = timeMs([&] { CHECK(ex.runGraph(gStream, false)); },
                          quick ? 10 : 30);
    add("step " + base + " graph streams=2 tuned", shape, graph,
        step->bytes(), step->flops(), graph);
  }
  if (stepOnly) {
    return writeJson(jsonPath, dev->deviceName()) ? 0 : 1;
  }

  // Cache update (plain bf16) and fused rope + update.
  if (!decodeOnly) {
    const int64_t maxT = 65536, slotsN = 2 * maxT, bs = 64;
    KVCacheRef cache;
    cache.desc.numBlocks = slotsN / bs;
    cache.desc.blockSize = bs;
    Buffer cacheBuf = alloc(size_t(cache.desc.totalBytes()));
    cache.data = cacheBuf.data();
    std::vector<int64_t> perm(static_cast<size_t>(slotsN));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    perm.resize(size_t(maxT));
    Buffer slots = upload(perm);
    Buffer kv = randomBf16(size_t(maxT * 512), rng), kp = randomBf16(size_t(maxT * 64), rng);
    std::vector<int64_t> pos(static_cast<size_t>(maxT));
    for (auto &p : pos)
      p = int64_t(rng() % 8192);
    Buffer posB = upload(pos);
    Buffer csB = upload(ropeCosSinTable(8192, 64));
    Buffer q = randomBf16(size_t(4096) * 128 * 64, rng);
      for (int64_t T : {int64_t(1), int64_t(16), int64_t(256), int64_t(4096), int64_t(65536)}) {
      if (updateT && T != updateT)
        continue;
      CacheUpdateArgs a{ten(kv.data(), DType::BF16, {T, 512}),
                        ten(kp.data(), DType::BF16, {T, 64}),
                        ten(slots.data(), DType::I64, {T}), cache};
      auto fn = [&] { CHECK(k.cacheUpdate(a, gStream)); };
      double call = timeMs(fn, quick ? 20 : 100);
      double ms = graphMs(fn);
      add("cache_update bf16", "T=" + std::to_string(T), std::isnan(ms) ? call : ms,
          double(T) * 2312, 0, call);
    }
    if (updateT) { // one update shape only (for profilers)
      return writeJson(jsonPath, dev->deviceName()) ? 0 : 1;
    }
    {
      // The copy ceiling at the update's own size (65536 rows of 1152 bytes,
      // timed like the update: inside a 20-call graph). A 151 MB copy has
      // ramp-up and tail that the 2 GiB ceiling amortizes: this row says
      // how much of the gap to 100 % is the size, not the scatter.
      const size_t n = size_t(maxT) * 1152;
      Buffer src = randomBf16(n / 2, rng), dst = alloc(n);
      auto fn = [&] { CHECK(dev->copyDeviceToDevice(dst.data(), src.data(), n, gStream)); };
      double call = timeMs(fn, quick ? 20 : 100);
      double ms = graphMs(fn);
      add("copy (update size)", "75.5 MB d2d (r+w)", std::isnan(ms) ? call : ms,
          2.0 * double(n), 0, call);
    }
    {
      // Same T=65536 update into slots 0..T-1 in order: the cost of the
      // random-row write pattern (the row above) against sequential rows.
      std::vector<int64_t> seq(static_cast<size_t>(maxT));
      std::iota(seq.begin(), seq.end(), 0);
      Buffer seqSlots = upload(seq);
      CacheUpdateArgs a{ten(kv.data(), DType::BF16, {maxT, 512}),
                        ten(kp.data(), DType::BF16, {maxT, 64}),
                        ten(seqSlots.data(), DType::I64, {maxT}), cache};
      auto fn = [&] { CHECK(k.cacheUpdate(a, gStream)); };
      double call = timeMs(fn, quick ? 20 : 100);
      double ms = graphMs(fn);
      add("cache_update bf16", "T=65536 seq slots", std::isnan(ms) ? call : ms,
          double(maxT) * 2312, 0, call);
      // Prefill's pattern: whole 64-token blocks in random order, tokens in
      // order inside a block (a paged allocator's slots), default kernel.
      {
        std::vector<int64_t> blocks(static_cast<size_t>(slotsN / bs));
        std::iota(blocks.begin(), blocks.end(), 0);
        std::shuffle(blocks.begin(), blocks.end(), rng);
        std::vector<int64_t> paged(static_cast<size_t>(maxT));
        for (int64_t t = 0; t < maxT; ++t)
          paged[size_t(t)] = blocks[size_t(t / bs)] * bs + t % bs;
        Buffer pagedSlots = upload(paged);
        CacheUpdateArgs pa{ten(kv.data(), DType::BF16, {maxT, 512}),
                           ten(kp.data(), DType::BF16, {maxT, 64}),
                           ten(pagedSlots.data(), DType::I64, {maxT}), cache};
        auto pf = [&] { CHECK(k.cacheUpdate(pa, gStream)); };
        double pcall = timeMs(pf, quick ? 20 : 100);
        double pms = graphMs(pf);
        add("cache_update bf16", "T=65536 paged slots", std::isnan(pms) ? pcall : pms,
            double(maxT) * 2312, 0, pcall);
      }
      // The large-update kernels side by side (docs/cuda.md, "Large plain
      // updates"): the general kernel, then every copy-kernel variant worth
      // timing, T=65536 random slots (and the default variant in order).
      std::vector<cuda::CacheCopyConfig> sweep;
      auto variant = [](bool on, int u, int ctas, bool early, int hints) {
        cuda::CacheCopyConfig c;
        // The streaming kernel (or the general one); bulk() below
        // switches to the bulk-copy kernel.
        c.kernel = on ? cuda::UpdateKernel::Streaming : cuda::UpdateKernel::General;
        c.unroll = u;
        c.ctasPerSm = ctas;
        c.early = early;
        c.hints = hints;
        return c;
      };
      sweep.push_back(variant(false, 8, 4, true, 1));
      for (int u : {4, 8, 16})
        for (int ctas : {0, 1, 2, 4, 8})
          sweep.push_back(variant(true, u, ctas, true, 1));
      for (int u : {8, 16}) {
        sweep.push_back(variant(true, u, 2, false, 1));
        sweep.push_back(variant(true, u, 2, true, 0));
        sweep.push_back(variant(true, u, 2, true, 2));
      }
      // The bulk-copy kernel (CacheBulkKernel.cu): one chunk a CTA, and
      // persistent grids with every ring depth that fits.
      auto bulk = [&](int stages, int ctas, bool early, int hints) {
        cuda::CacheCopyConfig c = variant(true, 8, ctas, early, hints);
        c.kernel = cuda::UpdateKernel::Bulk;
        c.stages = stages;
        return c;
      };
      for (int hints : {0, 1, 2})
        sweep.push_back(bulk(1, 0, true, hints));
      for (int ctas : {1, 2, 4, 8})
        for (int stages : {1, 2, 3, 4, 6})
          if (stages * 36 * ctas <= 228)
            sweep.push_back(bulk(stages, ctas, true, 1));
      sweep.push_back(bulk(3, 2, true, 0));
      sweep.push_back(bulk(3, 2, false, 1));
      CacheUpdateArgs rnd{ten(kv.data(), DType::BF16, {maxT, 512}),
                          ten(kp.data(), DType::BF16, {maxT, 64}),
                          ten(slots.data(), DType::I64, {maxT}), cache};
      for (size_t i = 0; i <= sweep.size(); ++i) {
        // Last: the default copy variant with slots in order.
        const bool seqRow = i == sweep.size();
        const cuda::CacheCopyConfig c =
            seqRow ? variant(true, 8, 4, true, 1) : sweep[i];
        cuda::setCacheCopyConfigForTesting(c);
        const CacheUpdateArgs &ua = seqRow ? a : rnd;
        auto f = [&] { CHECK(k.cacheUpdate(ua, gStream)); };
        double call = timeMs(f, quick ? 20 : 100);
        double ms = graphMs(f);
        // T=65536 in every row; "seq": slots in order.
        const bool general = c.kernel == cuda::UpdateKernel::General;
        add(c.kernel == cuda::UpdateKernel::Bulk ? "update65536 bulk"
            : general                            ? "update65536 general"
                                                 : "update65536 copy",
            (seqRow ? "seq " : "") + (general ? std::string("-") : cuda::describe(c)),
            std::isnan(ms) ? call : ms, double(maxT) * 2312, 0, call);
      }
      cuda::setCacheCopyConfigForTesting(std::nullopt);
      // The update kernels alone, without the validation launch in front
      // (a verdict of 0 in device memory, launched directly): how much of
      // the gap to the copy is the kernel and how much the validation.
      cuda::CudaContext ctx;
      CHECK(cudaDeviceGetAttribute(&ctx.smCount, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess
                ? Status::success()
                : internalError("cudaDeviceGetAttribute"));
      Buffer verdict = upload(std::vector<int32_t>{0});
      for (const bool seq : {false, true})
        for (const cuda::CacheCopyConfig &c :
             {variant(true, 8, 0, true, 1), bulk(1, 0, true, 1), bulk(3, 2, true, 1)}) {
          cuda::CacheCopyParams cp;
          cp.kv = static_cast<const uint8_t *>(kv.data());
          cp.kvStride = 1024;
          cp.kp = static_cast<const uint8_t *>(kp.data());
          cp.kpStride = 128;
          cp.slots = seq ? seqSlots.data() : slots.data();
          cp.slot64 = 1;
          cp.slotStride = 1;
          cp.T = maxT;
          cp.cache = static_cast<uint8_t *>(cache.data);
          cp.numSlots = cache.desc.numSlots();
          cp.kvChunks = 64;
          cp.callFailed = static_cast<const int *>(verdict.data());
          auto f = [&] {
            CHECK(cuda::launchCacheCopy(ctx, cp, c, static_cast<cudaStream_t>(gStream)));
          };
          double call = timeMs(f, quick ? 20 : 100);
          double ms = graphMs(f);
          add("update65536 kernel only", (seq ? "seq " : "") + cuda::describe(c),
              std::isnan(ms) ? call : ms, double(maxT) * 2312, 0, call);
        }
    }
    for (int Hq : {0, 16, 128})
      for (int64_t T : {1, 16, 256, 4096}) {
        RopeCacheUpdateArgs a;
        a.kvC = ten(kv.data(), DType::BF16, {T, 512});
        a.kPe = ten(kp.data(), DType::BF16, {T, 64});
        a.slotMapping = ten(slots.data(), DType::I64, {T});
        a.cache = cache;
        a.positions = ten(posB.data(), DType::I64, {T});
        a.cosSin = ten(csB.data(), DType::F32, {8192, 64});
        if (Hq)
          a.qPe = ten(q.data(), DType::BF16, {T, Hq, 64});
        auto fn = [&] { CHECK(k.ropeCacheUpdate(a, gStream)); };
        double call = timeMs(fn, quick ? 20 : 100);
        double ms = graphMs(fn);
        const double bytes = double(T) * (2312 + 128 + 8 + 256.0 * Hq);
        add("rope+cache_update", "T=" + std::to_string(T) + " Hq=" + std::to_string(Hq),
            std::isnan(ms) ? call : ms, bytes, 0, call);
      }
  }

  if (cacheOnly)
    decodeOnly = true, noH128 = true;
  // The decode step's other kernels at DeepSeek-V2-Lite shapes, B=64 (what
  // one replay of the compiled layer runs besides decode attention). Bytes:
  // weights + activations read + written.
  if (!decodeOnly) {
    const int64_t B = 64, D = 2048, H = 16;
    Buffer x = randomBf16(size_t(B * D), rng), w = randomBf16(size_t(D), rng),
           o = alloc(size_t(B * 3072 * 2)), y = randomBf16(size_t(B * D), rng);
    {
      RmsNormArgs a{ten(x.data(), DType::BF16, {B, D}), ten(w.data(), DType::BF16, {D}),
                    1e-6f, ten(o.data(), DType::BF16, {B, D})};
      auto fn = [&] { CHECK(k.rmsNorm(a, gStream)); };
      add("step rms_norm", "64x2048", graphMs(fn), 2.0 * B * D * 2 + D * 2, 0, timeMs(fn));
      RmsNormArgs a2{ten(x.data(), DType::BF16, {B, 512}), ten(w.data(), DType::BF16, {512}),
                     1e-6f, ten(o.data(), DType::BF16, {B, 512})};
      auto fn2 = [&] { CHECK(k.rmsNorm(a2, gStream)); };
      add("step rms_norm", "64x512", graphMs(fn2), 2.0 * B * 512 * 2, 0, timeMs(fn2));
      AddArgs aa{ten(x.data(), DType::BF16, {B, D}), ten(y.data(), DType::BF16, {B, D}),
                 ten(o.data(), DType::BF16, {B, D})};
      auto fn3 = [&] { CHECK(k.add(aa, gStream)); };
      add("step add", "64x2048", graphMs(fn3), 3.0 * B * D * 2, 0, timeMs(fn3));
    }
    {
      Buffer ql = randomBf16(size_t(B * H * 512), rng), qp = randomBf16(size_t(B * H * 64), rng),
             qo = alloc(size_t(B * H * 576 * 2));
      QConcatArgs a{ten(ql.data(), DType::BF16, {B, H, 512}), ten(qp.data(), DType::BF16, {B, H, 64}),
                    ten(qo.data(), DType::BF16, {B, H, 576})};
      auto fn = [&] { CHECK(k.qConcat(a, gStream)); };
      add("step q_concat", "64x16x(512+64)", graphMs(fn), 2.0 * B * H * 576 * 2, 0, timeMs(fn));
    }
  }
  if (!decodeOnly)
    benchStepGemms(k, rng);
  if (!decodeOnly && !cacheOnly)
    benchPrefill(k, rng, quick);

  // Decode attention at the step's shape (B=64, H=16, L=4096, 65-block
  // table as the compiled step has), heuristic (splits=0) and forced splits.
  if (!cacheOnly) {
    const BenchDecode d = BenchDecode::stepShape(rng);
    for (int splits : {0, 1, 2, 3, 4, 5, 6, 8}) {
      const DecodeAttentionArgs a = d.args(splits);
      auto fn = [&] { CHECK(k.decodeAttention(a, gStream)); };
      double call = timeMs(fn, 20);
      double ms = graphMs(fn, 10, 10);
      add("decode step-shape", "B=64 L=4096 s=" + std::to_string(splits), ms,
          d.bytes(), d.flops(), call);
    }
  }

  // decode_attention_with_update at the step shape and the decode grid:
  // the step's rows stored by cacheUpdate's own launch before the decode
  // (MLART_DECODE_STEP_WRITE=0), or inside the decode launch (=1).
  if (!cacheOnly) {
    struct Shape {
      int64_t B, L, perSeq;
    };
    for (const Shape &s :
         {Shape{64, 4096, 65}, Shape{1, 1024, 16}, Shape{32, 1024, 16},
          Shape{128, 1024, 16}, Shape{1, 8192, 128}, Shape{32, 8192, 128},
          Shape{128, 8192, 128}}) {
      const BenchDecode d(s.B, 16, s.L, s.perSeq, rng);
      Buffer kv = randomBf16(size_t(s.B * 512), rng),
             kp = randomBf16(size_t(s.B * 64), rng),
             slots = upload(d.lastSlots());
      const DecodeAttentionArgs a = d.args(0);
      DecodeAttentionWithUpdateArgs f;
      f.kvC = ten(kv.data(), DType::BF16, {s.B, 512});
      f.kPe = ten(kp.data(), DType::BF16, {s.B, 64});
      f.slotMapping = ten(slots.data(), DType::I32, {s.B});
      f.q = a.q;
      f.cache = a.cache;
      f.blockTable = a.blockTable;
      f.seqLens = a.seqLens;
      f.softmaxScale = a.softmaxScale;
      f.out = a.out;
      f.lse = a.lse;
      for (int oneLaunch : {0, 1}) {
        cuda::setKnobOverride(cuda::Knob::DecodeStepWrite, oneLaunch);
        auto fn = [&] { CHECK(k.decodeAttentionWithUpdate(f, gStream)); };
        const double call = timeMs(fn, 20);
        double ms = graphMs(fn, 10, 10);
        if (std::isnan(ms))
          ms = call;
        add(oneLaunch ? "decode+update [one launch]"
                      : "decode+update [two launches]",
            "H=16 B=" + std::to_string(s.B) + " L=" + std::to_string(s.L), ms,
            d.bytes() + double(s.B) * 1152 * 2, d.flops(), call);
      }
      cuda::setKnobOverride(cuda::Knob::DecodeStepWrite, std::nullopt);
    }
  }

  // The 16-head decode's two schedules (DecodeAttentionArgs::schedule, per
  // row): the step shape, and mixed lengths, where the per-sequence split
  // count (chosen from the table width) leaves SMs idle behind the longest
  // sequences and the balanced schedule cuts all tiles evenly.
  if (!cacheOnly) {
    struct Mix {
      const char *name;
      int64_t B, maxLen;
      std::function<int32_t(int64_t b)> len;
    };
    std::mt19937 lenRng(7);
    std::vector<int32_t> uniform(256);
    for (auto &n : uniform)
      n = int32_t(1 + lenRng() % 8192);
    const Mix mixes[] = {
        {"B=64 L=4096", 64, 4096, [](int64_t) { return 4096; }},
        {"B=64 L~U[1,8192]", 64, 8192,
         [&](int64_t b) { return uniform[size_t(b)]; }},
        {"B=128 L~U[1,8192]", 128, 8192,
         [&](int64_t b) { return uniform[size_t(b)]; }},
        {"B=64 8x8192+56x1024", 64, 8192,
         [](int64_t b) { return b % 8 == 0 ? 8192 : 1024; }},
        {"B=4 L=8192", 4, 8192, [](int64_t) { return 8192; }},
    };
    for (const Mix &m : mixes) {
      BenchDecode d(m.B, 16, m.maxLen, m.maxLen / BenchDecode::bs + 1, rng);
      std::vector<int32_t> lengths(size_t(m.B));
      for (int64_t b = 0; b < m.B; ++b)
        lengths[size_t(b)] = m.len(b);
      d.setLengths(lengths);
      for (int balanced : {0, 1}) {
        DecodeAttentionArgs a = d.args(0);
        a.schedule = balanced ? DecodeSchedule::Balanced
                              : DecodeSchedule::PerSequence;
        auto fn = [&] { CHECK(k.decodeAttention(a, gStream)); };
        double call = timeMs(fn, 20);
        double ms = graphMs(fn, 10, 10);
        if (std::isnan(ms))
          ms = call;
        add(std::string("decode H=16 ") +
                (balanced ? "[balanced]" : "[per-seq splits]"),
            m.name, ms, d.bytes(), d.flops(), call);
      }
    }
  }

  // Decode attention.
  for (int H : {16, 128})
    if (!cacheOnly)
    for (int64_t B : decodeB ? std::vector<int64_t>{decodeB}
                             : std::vector<int64_t>{1, 32, 128})
      if (!decodeH || decodeH == H)
      for (int64_t L : decodeL ? std::vector<int64_t>{decodeL}
                               : std::vector<int64_t>{1024, 8192}) {
        if (noH128 && H == 128 && B * L > 32 * 1024)
          continue;
        const BenchDecode d(B, H, L, L / BenchDecode::bs, rng);
        const DecodeAttentionArgs a = d.args(0);
        auto fn = [&] { CHECK(k.decodeAttention(a, gStream)); };
        double call = timeMs(fn, quick ? 10 : 30);
        double ms = graphMs(fn, B * L >= 32 * 8192 ? 4 : 20, 10);
        if (std::isnan(ms))
          ms = call;
        add("decode bf16 bs64", "H=" + std::to_string(H) + " B=" + std::to_string(B) +
                                    " L=" + std::to_string(L),
            ms, d.bytes(), d.flops(), call);
      }

  return writeJson(jsonPath, dev->deviceName()) ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  return tool::runToolMain("mla-bench", argc, argv, runMain);
}
