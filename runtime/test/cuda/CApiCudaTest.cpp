//===- CApiCudaTest.cpp - The C API on a CUDA device, against the CPU -----===//
//
// Device work goes through mlart.h only (DType.h converts host bf16 values,
// ArtifactWriter builds the executor's program). Every comparison makes the
// same C calls on the C API's CPU device, with fresh random inputs and
// poisoned outputs. This binary links mlart_capi_cuda, so even without a GPU
// mlart_device_create_cuda must answer with the real provider's reason, not
// mlart_capi_nocuda's: that proves which provider the link picked.
//
//===----------------------------------------------------------------------===//
#include "CApiTestUtil.h"
#include "mlart/DType.h"
#include "mlart/mlart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace mlart;

using capitest::CStatus;

#define ASSERT_C_OK(call)                                                      \
  do {                                                                         \
    CStatus st_(call);                                                         \
    ASSERT_EQ(st_.code(), MLART_STATUS_OK) << #call << ": " << st_.message();  \
  } while (0)

std::mt19937 &rng() {
  static std::mt19937 r = [] {
    const unsigned seed = std::random_device{}();
    std::printf("[capi cuda tests] random seed %u\n", seed);
    return std::mt19937(seed);
  }();
  return r;
}

/// A device and one stream of it; the stream goes first.
struct DeviceAndStream {
  mlart_device *dev = nullptr;
  mlart_stream *stream = nullptr;
  DeviceAndStream() = default;
  DeviceAndStream(const DeviceAndStream &) = delete;
  DeviceAndStream &operator=(const DeviceAndStream &) = delete;
  ~DeviceAndStream() {
    mlart_stream_destroy(stream);
    mlart_device_destroy(dev);
  }
};

/// Opens CUDA device 0 through the C API, or says why not.
bool openCuda(DeviceAndStream &d, std::string &why) {
  mlart_status st = mlart_device_create_cuda(0, &d.dev);
  if (st) {
    why = mlart_status_message(st);
    mlart_status_free(st);
    return false;
  }
  return true;
}

#define REQUIRE_CUDA(d)                                                        \
  DeviceAndStream d;                                                           \
  {                                                                            \
    std::string why_;                                                          \
    if (!openCuda(d, why_))                                                    \
      GTEST_SKIP() << "no GPU through mlart_device_create_cuda: " << why_;     \
  }

/// A device buffer; must go before its device.
struct Buf {
  mlart_buffer *b = nullptr;
  Buf(mlart_device *dev, size_t bytes) {
    CStatus st(mlart_buffer_allocate(dev, bytes, &b));
    EXPECT_EQ(st.code(), MLART_STATUS_OK) << st.message();
  }
  Buf(const Buf &) = delete;
  Buf &operator=(const Buf &) = delete;
  ~Buf() { mlart_buffer_free(b); }
  mlart_tensor view(mlart_dtype t, std::vector<int64_t> sizes) const {
    return mlart_tensor_contiguous(mlart_buffer_data(b), t,
                                   int32_t(sizes.size()), sizes.data());
  }
};

std::vector<uint8_t> randomBf16(int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<uint8_t> v(size_t(n) * 2);
  for (int64_t i = 0; i < n; ++i)
    storeFromFloat(v.data(), DType::BF16, size_t(i), u(rng()));
  return v;
}

/// Inputs of one cache update + RMSNorm step.
struct StepInputs {
  mlart_cache_layout layout = MLART_CACHE_PLAIN;
  int64_t tokens = 0, hidden = 0;
  mlart_kv_cache_desc desc{};
  std::vector<uint8_t> kv, pe, x, w;
  std::vector<int64_t> slots;
};

/// What the step left in device memory, read back to the host.
struct StepOutputs {
  std::vector<uint8_t> cache, norm;
};

constexpr int64_t kLatent = 512, kRope = 64;

StepInputs makeInputs(mlart_cache_layout layout) {
  StepInputs in;
  in.layout = layout;
  in.tokens = 67;
  in.hidden = 2048;
  in.desc = {16,
             16,
             kLatent,
             kRope,
             layout == MLART_CACHE_PLAIN ? MLART_DTYPE_BF16
                                         : MLART_DTYPE_F8E4M3FN,
             layout};
  in.kv = randomBf16(in.tokens * kLatent, -3, 3);
  in.pe = randomBf16(in.tokens * kRope, -3, 3);
  in.x = randomBf16(in.tokens * in.hidden, -2, 2);
  in.w = randomBf16(in.hidden, 0.5f, 1.5f);
  // Distinct random slots of the 256, every fifth token padding (-1).
  std::vector<int64_t> all(size_t(in.desc.num_blocks * in.desc.block_size));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng());
  for (int64_t t = 0; t < in.tokens; ++t)
    in.slots.push_back(t % 5 == 4 ? -1 : all[size_t(t)]);
  return in;
}

/// Runs cache_update and rms_norm on `stream` of `dev`, entirely through the
/// C API, and reads the cache and the output back.
void runStep(mlart_device *dev, mlart_stream *stream, const StepInputs &in,
             StepOutputs &out) {
  const int64_t T = in.tokens, H = in.hidden;
  Buf kv(dev, in.kv.size()), pe(dev, in.pe.size()), slots(dev, size_t(T) * 8),
      x(dev, in.x.size()), w(dev, in.w.size()), norm(dev, in.x.size());
  ASSERT_C_OK(
      mlart_buffer_write_on(kv.b, 0, in.kv.data(), in.kv.size(), stream));
  ASSERT_C_OK(
      mlart_buffer_write_on(pe.b, 0, in.pe.data(), in.pe.size(), stream));
  ASSERT_C_OK(mlart_buffer_write_on(slots.b, 0, in.slots.data(),
                                    in.slots.size() * 8, stream));
  ASSERT_C_OK(mlart_buffer_write_on(x.b, 0, in.x.data(), in.x.size(), stream));
  ASSERT_C_OK(mlart_buffer_write_on(w.b, 0, in.w.data(), in.w.size(), stream));
  // Poison: NaN outputs, 0xa5 in every cache byte.
  std::vector<uint8_t> nan(in.x.size());
  for (size_t i = 0; i < nan.size() / 2; ++i)
    storeFromFloat(nan.data(), DType::BF16, i, NAN);
  ASSERT_C_OK(mlart_buffer_write_on(norm.b, 0, nan.data(), nan.size(), stream));

  mlart_kv_cache *cache = nullptr;
  ASSERT_C_OK(mlart_kv_cache_create(dev, &in.desc, 1.0f, &cache));
  const size_t cacheBytes = mlart_kv_cache_size_bytes(cache);
  std::vector<uint8_t> poison(cacheBytes, 0xa5);
  {
    CStatus st(mlart_kv_cache_write_bytes_on(cache, 0, poison.data(),
                                             poison.size(), stream));
    EXPECT_EQ(st.code(), MLART_STATUS_OK) << st.message();
  }

  mlart_cache_update_args cu;
  cu.kv_c = kv.view(MLART_DTYPE_BF16, {T, kLatent});
  cu.k_pe = pe.view(MLART_DTYPE_BF16, {T, kRope});
  cu.slot_mapping = slots.view(MLART_DTYPE_I64, {T});
  cu.cache = cache;
  mlart_rms_norm_args rn;
  rn.x = x.view(MLART_DTYPE_BF16, {T, H});
  rn.weight = w.view(MLART_DTYPE_BF16, {H});
  rn.epsilon = 1e-6f;
  rn.out = norm.view(MLART_DTYPE_BF16, {T, H});
  {
    CStatus a(mlart_cache_update(dev, &cu, stream));
    EXPECT_EQ(a.code(), MLART_STATUS_OK) << a.message();
    CStatus b(mlart_rms_norm(dev, &rn, stream));
    EXPECT_EQ(b.code(), MLART_STATUS_OK) << b.message();
  }
  // No synchronize: the cache read is ordered on the stream, the output read
  // on the default stream, which waits for the API's (blocking) streams.
  out.cache.assign(cacheBytes, 0);
  {
    CStatus st(mlart_kv_cache_read_bytes_on(cache, 0, out.cache.data(),
                                            cacheBytes, stream));
    EXPECT_EQ(st.code(), MLART_STATUS_OK) << st.message();
  }
  out.norm.assign(in.x.size(), 0);
  {
    CStatus st(mlart_buffer_read(norm.b, 0, out.norm.data(), out.norm.size()));
    EXPECT_EQ(st.code(), MLART_STATUS_OK) << st.message();
  }
  mlart_kv_cache_destroy(cache);
}

/// Relative L2 error of bf16 `got` against `ref`; a NaN anywhere is +inf.
double relErrBf16(const std::vector<uint8_t> &ref,
                  const std::vector<uint8_t> &got) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size() / 2; ++i) {
    const double r = loadAsFloat(ref.data(), DType::BF16, i);
    const double g = loadAsFloat(got.data(), DType::BF16, i);
    if (std::isnan(r) || std::isnan(g))
      return INFINITY;
    num += (g - r) * (g - r);
    den += r * r;
  }
  return std::sqrt(num / den);
}

TEST(CApiCuda, LinksTheRealProvider) {
  mlart_device *dev = nullptr;
  CStatus st(mlart_device_create_cuda(0, &dev));
  if (st.code() == MLART_STATUS_OK) {
    EXPECT_STREQ(mlart_device_kind_name(dev), "cuda");
    mlart_device_destroy(dev);
    return;
  }
  EXPECT_EQ(st.code(), MLART_STATUS_UNAVAILABLE) << st.message();
  EXPECT_FALSE(st.mentions("linked without the CUDA backend"))
      << "mlart-cuda-tests got mlart_capi_nocuda's provider: " << st.message();
  EXPECT_EQ(dev, nullptr);
  std::printf("no GPU (expected on a CPU machine): %s\n", st.message().c_str());
}

TEST(CApiCuda, BadArgumentsAreStatuses) {
  {
    CStatus st(mlart_device_create_cuda(0, nullptr));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
  mlart_device *dev = nullptr;
  {
    CStatus st(mlart_device_create_cuda(-1, &dev));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT) << st.message();
  }
  {
    // No such GPU: InvalidArgument with GPUs, Unavailable without.
    CStatus st(mlart_device_create_cuda(99, &dev));
    EXPECT_TRUE(st.code() == MLART_STATUS_INVALID_ARGUMENT ||
                st.code() == MLART_STATUS_UNAVAILABLE)
        << st.message();
    EXPECT_EQ(dev, nullptr);
  }
  mlart_stream *stream = nullptr;
  {
    CStatus st(mlart_stream_create(nullptr, &stream));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
  mlart_rms_norm_args rn = {};
  {
    CStatus st(mlart_rms_norm(nullptr, &rn, nullptr));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
}

TEST(CApiCuda, DevicesStreamsAndCopies) {
  REQUIRE_CUDA(gpu);
  EXPECT_STREQ(mlart_device_kind_name(gpu.dev), "cuda");
  mlart_device *missing = nullptr;
  {
    CStatus st(mlart_device_create_cuda(99, &missing));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT) << st.message();
    EXPECT_TRUE(st.mentions("does not exist")) << st.message();
    EXPECT_EQ(missing, nullptr);
  }
  {
    CStatus st(mlart_stream_create(gpu.dev, nullptr));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
  ASSERT_C_OK(mlart_stream_create(gpu.dev, &gpu.stream));
  EXPECT_NE(mlart_stream_native_handle(gpu.stream), nullptr);

  // A 3 MiB + odd round trip through a second buffer, on the stream, with
  // offsets; the destination is poisoned first.
  const size_t n = (3u << 20) + 123;
  std::vector<uint8_t> src(n), back(n, 0x5a);
  for (uint8_t &b : src)
    b = uint8_t(rng()());
  Buf a(gpu.dev, n);
  ASSERT_C_OK(mlart_buffer_write_on(a.b, 0, back.data(), n, gpu.stream));
  ASSERT_C_OK(mlart_buffer_write_on(a.b, 7, src.data() + 7, n - 7, nullptr));
  ASSERT_C_OK(mlart_buffer_read_on(a.b, 0, back.data(), n, gpu.stream));
  for (size_t i = 0; i < 7; ++i)
    EXPECT_EQ(back[i], 0x5a) << i;
  EXPECT_EQ(0, std::memcmp(back.data() + 7, src.data() + 7, n - 7));
  {
    CStatus st(mlart_buffer_write_on(a.b, n - 1, src.data(), 2, gpu.stream));
    EXPECT_EQ(st.code(), MLART_STATUS_OUT_OF_RANGE) << st.message();
  }
  ASSERT_C_OK(mlart_stream_synchronize(gpu.stream));
  ASSERT_C_OK(mlart_device_synchronize(gpu.dev, gpu.stream));
  ASSERT_C_OK(mlart_device_synchronize(gpu.dev, nullptr));

  // Streams of the CPU device are refused by CUDA calls and vice versa.
  DeviceAndStream cpu;
  ASSERT_C_OK(mlart_device_create_cpu(&cpu.dev));
  ASSERT_C_OK(mlart_stream_create(cpu.dev, &cpu.stream));
  {
    CStatus st(mlart_buffer_write_on(a.b, 0, src.data(), 16, cpu.stream));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT) << st.message();
  }
  Buf x(gpu.dev, 4 * 64 * 2), w(gpu.dev, 64 * 2), o(gpu.dev, 4 * 64 * 2);
  mlart_rms_norm_args rn;
  rn.x = x.view(MLART_DTYPE_BF16, {4, 64});
  rn.weight = w.view(MLART_DTYPE_BF16, {64});
  rn.epsilon = 1e-6f;
  rn.out = o.view(MLART_DTYPE_BF16, {4, 64});
  {
    CStatus st(mlart_rms_norm(gpu.dev, &rn, cpu.stream));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT) << st.message();
    EXPECT_TRUE(st.mentions("another device")) << st.message();
  }
  {
    CStatus st(mlart_device_synchronize(cpu.dev, gpu.stream));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT) << st.message();
  }
}

TEST(CApiCuda, CacheUpdateAndRmsNormMatchTheCpuDevice) {
  REQUIRE_CUDA(gpu);
  ASSERT_C_OK(mlart_stream_create(gpu.dev, &gpu.stream));
  DeviceAndStream cpu;
  ASSERT_C_OK(mlart_device_create_cpu(&cpu.dev));
  ASSERT_C_OK(mlart_stream_create(cpu.dev, &cpu.stream));
  for (mlart_cache_layout layout :
       {MLART_CACHE_PLAIN, MLART_CACHE_FP8_DS_MLA}) {
    SCOPED_TRACE(layout == MLART_CACHE_PLAIN ? "plain bf16" : "fp8_ds_mla");
    const StepInputs in = makeInputs(layout);
    StepOutputs want, got;
    ASSERT_NO_FATAL_FAILURE(runStep(cpu.dev, cpu.stream, in, want));
    ASSERT_NO_FATAL_FAILURE(runStep(gpu.dev, gpu.stream, in, got));
    // The reference wrote its rows and left the others poisoned, so the
    // comparison below covers both.
    const int64_t numSlots = in.desc.num_blocks * in.desc.block_size;
    const size_t rowBytes = want.cache.size() / size_t(numSlots);
    const std::vector<uint8_t> poisonRow(rowBytes, 0xa5);
    std::vector<bool> used(size_t(numSlots), false);
    for (int64_t s : in.slots)
      if (s >= 0)
        used[size_t(s)] = true;
    for (int64_t s = 0; s < numSlots; ++s) {
      const bool poisoned = std::memcmp(&want.cache[size_t(s) * rowBytes],
                                        poisonRow.data(), rowBytes) == 0;
      ASSERT_EQ(poisoned, !used[size_t(s)]) << "CPU reference, slot " << s;
    }
    EXPECT_TRUE(got.cache == want.cache)
        << "the CUDA cache differs from the CPU device's";
    EXPECT_LT(relErrBf16(want.norm, got.norm), 8e-3);
  }
}

/// Inputs of one bf16 linear with addend: x [T, K], w [N, K], r [T, N].
struct LinearInputs {
  int64_t T = 0, K = 0, N = 0;
  std::vector<uint8_t> x, w, r;
};

/// Runs mlart_linear_addend on `stream` of `dev` through buffers (out
/// poisoned with NaN first; in place: out starts as the addend and is passed
/// as both). Returns out and the addend read back afterwards.
void runLinearAddend(mlart_device *dev, mlart_stream *stream,
                     const LinearInputs &in, bool inPlace,
                     std::vector<uint8_t> &out, std::vector<uint8_t> &addend) {
  Buf bx(dev, in.x.size()), bw(dev, in.w.size()), br(dev, in.r.size()),
      bo(dev, in.r.size());
  ASSERT_C_OK(mlart_buffer_write_on(bx.b, 0, in.x.data(), in.x.size(), stream));
  ASSERT_C_OK(mlart_buffer_write_on(bw.b, 0, in.w.data(), in.w.size(), stream));
  ASSERT_C_OK(mlart_buffer_write_on(br.b, 0, in.r.data(), in.r.size(), stream));
  std::vector<uint8_t> nan(in.r.size());
  for (size_t i = 0; i < nan.size() / 2; ++i)
    storeFromFloat(nan.data(), DType::BF16, i, NAN);
  ASSERT_C_OK(mlart_buffer_write_on(bo.b, 0, nan.data(), nan.size(), stream));
  mlart_linear_addend_args a = {};
  a.x = bx.view(MLART_DTYPE_BF16, {in.T, in.K});
  a.weight = bw.view(MLART_DTYPE_BF16, {in.N, in.K});
  a.addend = br.view(MLART_DTYPE_BF16, {in.T, in.N});
  a.out = inPlace ? a.addend : bo.view(MLART_DTYPE_BF16, {in.T, in.N});
  ASSERT_C_OK(mlart_linear_addend(dev, &a, stream));
  ASSERT_C_OK(mlart_stream_synchronize(stream));
  out.assign(in.r.size(), 0);
  addend.assign(in.r.size(), 0);
  ASSERT_C_OK(mlart_buffer_read_on(inPlace ? br.b : bo.b, 0, out.data(),
                                   out.size(), stream));
  ASSERT_C_OK(
      mlart_buffer_read_on(br.b, 0, addend.data(), addend.size(), stream));
}

TEST(CApiCuda, LinearAddendMatchesTheCpuDevice) {
  REQUIRE_CUDA(gpu);
  ASSERT_C_OK(mlart_stream_create(gpu.dev, &gpu.stream));
  DeviceAndStream cpu;
  ASSERT_C_OK(mlart_device_create_cpu(&cpu.dev));
  ASSERT_C_OK(mlart_stream_create(cpu.dev, &cpu.stream));
  struct Shape {
    int64_t T, K, N;
  };
  for (Shape sh : {Shape{1, 512, 2048}, Shape{7, 2048, 512},
                   Shape{64, 1536, 2048}}) {
    SCOPED_TRACE("T=" + std::to_string(sh.T) + " K=" + std::to_string(sh.K) +
                 " N=" + std::to_string(sh.N));
    LinearInputs in;
    in.T = sh.T;
    in.K = sh.K;
    in.N = sh.N;
    in.x = randomBf16(sh.T * sh.K, -1.0f, 1.0f);
    in.w = randomBf16(sh.N * sh.K, -0.05f, 0.05f);
    in.r = randomBf16(sh.T * sh.N, -2.0f, 2.0f);
    std::vector<uint8_t> want, wantAddend;
    ASSERT_NO_FATAL_FAILURE(
        runLinearAddend(cpu.dev, cpu.stream, in, false, want, wantAddend));
    ASSERT_EQ(wantAddend, in.r) << "the CPU device modified the addend";
    for (bool inPlace : {false, true}) {
      SCOPED_TRACE(inPlace ? "in place" : "separate out");
      std::vector<uint8_t> got, gotAddend;
      ASSERT_NO_FATAL_FAILURE(
          runLinearAddend(gpu.dev, gpu.stream, in, inPlace, got, gotAddend));
      EXPECT_LT(relErrBf16(want, got), 1e-2);
      if (!inPlace)
        EXPECT_TRUE(gotAddend == in.r) << "the CUDA device modified the addend";
    }
  }
  // A malformed addend is refused before any launch.
  Buf x(gpu.dev, 4 * 64 * 2), w(gpu.dev, 32 * 64 * 2), o(gpu.dev, 4 * 32 * 2);
  mlart_linear_addend_args a = {};
  a.x = x.view(MLART_DTYPE_BF16, {4, 64});
  a.weight = w.view(MLART_DTYPE_BF16, {32, 64});
  a.out = o.view(MLART_DTYPE_BF16, {4, 32});
  a.addend = x.view(MLART_DTYPE_BF16, {4, 33});
  CStatus st(mlart_linear_addend(gpu.dev, &a, gpu.stream));
  EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT) << st.message();
  EXPECT_TRUE(st.mentions("addend")) << st.message();
}

constexpr int64_t kT = 5, kRow = 24, kLatentSmall = 16;

std::vector<uint8_t> addAndCacheProgram() {
  return capitest::addAndCacheProgram("capi-cuda", kT, kLatentSmall,
                                      kRow - kLatentSmall);
}

/// Frees an executor and a cache at scope exit (before their buffers).
struct ExecutorAndCache {
  mlart_executor *exec = nullptr;
  mlart_kv_cache *cache = nullptr;
  ~ExecutorAndCache() {
    mlart_executor_free(exec);
    mlart_kv_cache_destroy(cache);
  }
};

/// Runs the program on `stream` of `dev`; returns out and the cache bytes.
/// With `graph`, after the eager step the output is poisoned again and the
/// step is tuned (nothing to choose: no linear), captured and replayed.
void runExecutor(mlart_device *dev, mlart_stream *stream,
                 const std::vector<float> &a, const std::vector<float> &b,
                 const std::vector<int64_t> &slots, std::vector<float> &out,
                 std::vector<uint8_t> &cacheBytes, bool graph = false) {
  Buf ba(dev, a.size() * 4), bb(dev, b.size() * 4), bo(dev, a.size() * 4),
      bs(dev, slots.size() * 8);
  ExecutorAndCache ec;
  const std::vector<uint8_t> program = addAndCacheProgram();
  mlart_artifact *art = nullptr;
  ASSERT_C_OK(mlart_artifact_load_memory(program.data(), program.size(), &art));
  CStatus created(mlart_executor_create(dev, art, &ec.exec));
  mlart_artifact_free(art);
  ASSERT_EQ(created.code(), MLART_STATUS_OK) << created.message();

  const std::vector<float> nan(a.size(), NAN);
  ASSERT_C_OK(mlart_buffer_write_on(ba.b, 0, a.data(), a.size() * 4, stream));
  ASSERT_C_OK(mlart_buffer_write_on(bb.b, 0, b.data(), b.size() * 4, stream));
  ASSERT_C_OK(
      mlart_buffer_write_on(bo.b, 0, nan.data(), nan.size() * 4, stream));
  ASSERT_C_OK(
      mlart_buffer_write_on(bs.b, 0, slots.data(), slots.size() * 8, stream));
  mlart_kv_cache_desc desc = {2,
                              4,
                              kLatentSmall,
                              kRow - kLatentSmall,
                              MLART_DTYPE_F32,
                              MLART_CACHE_PLAIN};
  ASSERT_C_OK(mlart_kv_cache_create(dev, &desc, 1.0f, &ec.cache));
  const mlart_tensor ta = ba.view(MLART_DTYPE_F32, {kT, kRow});
  const mlart_tensor tb = bb.view(MLART_DTYPE_F32, {kT, kRow});
  const mlart_tensor to = bo.view(MLART_DTYPE_F32, {kT, kRow});
  const mlart_tensor ts = bs.view(MLART_DTYPE_I64, {kT});
  ASSERT_C_OK(mlart_executor_bind(ec.exec, "a", &ta));
  ASSERT_C_OK(mlart_executor_bind(ec.exec, "b", &tb));
  ASSERT_C_OK(mlart_executor_bind(ec.exec, "out", &to));
  ASSERT_C_OK(mlart_executor_bind(ec.exec, "slots", &ts));
  ASSERT_C_OK(mlart_executor_bind_cache(ec.exec, "cache", ec.cache));
  ASSERT_C_OK(mlart_executor_run(ec.exec, stream));
  ASSERT_C_OK(mlart_stream_synchronize(stream));
  if (graph) {
    CStatus noGraph(mlart_executor_run_graph(ec.exec, stream));
    EXPECT_EQ(noGraph.code(), MLART_STATUS_FAILED_PRECONDITION);
    int tuned = -1;
    ASSERT_C_OK(mlart_executor_tune_graph(ec.exec, stream, 2, &tuned));
    EXPECT_EQ(tuned, 0);
    ASSERT_C_OK(
        mlart_buffer_write_on(bo.b, 0, nan.data(), nan.size() * 4, stream));
    ASSERT_C_OK(mlart_executor_capture_graph(ec.exec, stream));
    ASSERT_C_OK(mlart_executor_run_graph(ec.exec, stream));
  }
  out.assign(a.size(), 0.0f);
  cacheBytes.assign(mlart_kv_cache_size_bytes(ec.cache), 0);
  ASSERT_C_OK(
      mlart_buffer_read_on(bo.b, 0, out.data(), out.size() * 4, stream));
  ASSERT_C_OK(mlart_kv_cache_read_bytes_on(ec.cache, 0, cacheBytes.data(),
                                           cacheBytes.size(), stream));
}

TEST(CApiCuda, ExecutorRunsOnAStreamLikeTheCpuDevice) {
  REQUIRE_CUDA(gpu);
  ASSERT_C_OK(mlart_stream_create(gpu.dev, &gpu.stream));
  DeviceAndStream cpu;
  ASSERT_C_OK(mlart_device_create_cpu(&cpu.dev));
  ASSERT_C_OK(mlart_stream_create(cpu.dev, &cpu.stream));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(kT * kRow), b(kT * kRow);
  for (float &v : a)
    v = u(rng());
  for (float &v : b)
    v = u(rng());
  const std::vector<int64_t> slots = {5, -1, 2, 7, 0};
  std::vector<float> wantOut, gotOut;
  std::vector<uint8_t> wantCache, gotCache;
  ASSERT_NO_FATAL_FAILURE(
      runExecutor(cpu.dev, cpu.stream, a, b, slots, wantOut, wantCache));
  ASSERT_NO_FATAL_FAILURE(
      runExecutor(gpu.dev, gpu.stream, a, b, slots, gotOut, gotCache));
  ASSERT_EQ(gotOut.size(), a.size());
  EXPECT_EQ(0, std::memcmp(gotOut.data(), wantOut.data(), a.size() * 4));
  EXPECT_TRUE(gotCache == wantCache);
  EXPECT_EQ(wantOut[0], a[0] + b[0]);

  // The same step captured and replayed as a CUDA graph.
  ASSERT_NO_FATAL_FAILURE(
      runExecutor(gpu.dev, gpu.stream, a, b, slots, gotOut, gotCache, true));
  EXPECT_EQ(0, std::memcmp(gotOut.data(), wantOut.data(), a.size() * 4));
  EXPECT_TRUE(gotCache == wantCache);
}

} // namespace
