//===- CApiExecutorTest.cpp - Artifacts and the executor through mlart.h --===//
#include "CApiTestUtil.h"
#include "PreparedTestUtil.h"
#include "mlart/mlart.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace mlart;
using capitest::CStatus;


constexpr int64_t kT = 3, kLatent = 8, kRope = 4, kRow = kLatent + kRope;

mlart_kv_cache_desc cDesc() {
  mlart_kv_cache_desc d;
  d.num_blocks = 2;
  d.block_size = 4;
  d.latent_rank = kLatent;
  d.rope_dim = kRope;
  d.dtype = MLART_DTYPE_F32;
  d.layout = MLART_CACHE_PLAIN;
  return d;
}

std::vector<uint8_t> program() {
  return capitest::addAndCacheProgram("capi", kT, kLatent, kRope);
}

void onTiming(void *user, int64_t index, const char *opcode,
              const char *location, double seconds) {
  auto *log = static_cast<std::vector<std::string> *>(user);
  log->push_back(std::to_string(index) + ":" + opcode + ":" + location);
  EXPECT_GE(seconds, 0.0);
}

TEST(CApiExecutor, LoadBindRunThroughTheCHeader) {
  mlart_device *dev = nullptr;
  ASSERT_EQ(mlart_device_create_cpu(&dev), nullptr);
  const std::vector<uint8_t> bytes = program();
  mlart_artifact *art = nullptr;
  ASSERT_EQ(mlart_artifact_load_memory(bytes.data(), bytes.size(), &art),
            nullptr);
  EXPECT_EQ(mlart_artifact_num_instructions(art), 2);
  mlart_executor *exec = nullptr;
  ASSERT_EQ(mlart_executor_create(dev, art, &exec), nullptr);
  mlart_artifact_free(art); // the executor keeps its own copy

  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(kT * kRow), b(kT * kRow), out(kT * kRow, 0.0f),
      expected(kT * kRow);
  for (float &v : a)
    v = dist(rng);
  for (float &v : b)
    v = dist(rng);
  std::vector<int64_t> slots = {5, -1, 2};
  const int64_t sizes[2] = {kT, kRow}, slotSizes[1] = {kT};
  mlart_tensor ta =
      mlart_tensor_contiguous(a.data(), MLART_DTYPE_F32, 2, sizes);
  mlart_tensor tb =
      mlart_tensor_contiguous(b.data(), MLART_DTYPE_F32, 2, sizes);
  mlart_tensor to =
      mlart_tensor_contiguous(out.data(), MLART_DTYPE_F32, 2, sizes);
  mlart_tensor ts =
      mlart_tensor_contiguous(slots.data(), MLART_DTYPE_I64, 1, slotSizes);

  {
    CStatus s(mlart_executor_run(exec, nullptr));
    EXPECT_EQ(s.code(), MLART_STATUS_FAILED_PRECONDITION);
  }
  ASSERT_EQ(mlart_executor_bind(exec, "a", &ta), nullptr);
  ASSERT_EQ(mlart_executor_bind(exec, "b", &tb), nullptr);
  ASSERT_EQ(mlart_executor_bind(exec, "out", &to), nullptr);
  {
    CStatus s(mlart_executor_bind(exec, "slots", &ta));
    EXPECT_EQ(s.code(), MLART_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(s.message().find("declared [3] i64"), std::string::npos)
        << s.message();
  }
  ASSERT_EQ(mlart_executor_bind(exec, "slots", &ts), nullptr);

  mlart_kv_cache_desc desc = cDesc();
  mlart_kv_cache *cache = nullptr;
  ASSERT_EQ(mlart_kv_cache_create(dev, &desc, 1.0f, &cache), nullptr);
  mlart_kv_cache_desc wrong = desc;
  wrong.block_size = 8;
  mlart_kv_cache *other = nullptr;
  ASSERT_EQ(mlart_kv_cache_create(dev, &wrong, 1.0f, &other), nullptr);
  {
    CStatus s(mlart_executor_bind_cache(exec, "cache", other));
    EXPECT_EQ(s.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
  ASSERT_EQ(mlart_executor_bind_cache(exec, "cache", cache), nullptr);

  std::vector<std::string> log;
  ASSERT_EQ(mlart_executor_set_timing_callback(exec, onTiming, &log), nullptr);
  ASSERT_EQ(mlart_executor_run(exec, nullptr), nullptr);
  EXPECT_EQ(log,
            (std::vector<std::string>{"0:add:sum", "1:cache_update:write"}));

  // A stream of its own device works; one of another device is refused
  // before any instruction runs.
  mlart_stream *stream = nullptr;
  ASSERT_EQ(mlart_stream_create(dev, &stream), nullptr);
  ASSERT_EQ(mlart_executor_run(exec, stream), nullptr);
  EXPECT_EQ(log.size(), 4u);
  mlart_device *otherDev = nullptr;
  ASSERT_EQ(mlart_device_create_cpu(&otherDev), nullptr);
  mlart_stream *foreign = nullptr;
  ASSERT_EQ(mlart_stream_create(otherDev, &foreign), nullptr);
  {
    CStatus s(mlart_executor_run(exec, foreign));
    EXPECT_EQ(s.code(), MLART_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(s.message(),
              "mlart_executor_run: the stream belongs to another device");
  }
  EXPECT_EQ(log.size(), 4u);
  mlart_stream_destroy(foreign);
  mlart_device_destroy(otherDev);
  mlart_stream_destroy(stream);

  // The same sum through the direct kernel entry point.
  mlart_tensor te =
      mlart_tensor_contiguous(expected.data(), MLART_DTYPE_F32, 2, sizes);
  mlart_add_args add = {ta, tb, te};
  ASSERT_EQ(mlart_add(dev, &add, nullptr), nullptr);
  EXPECT_EQ(0, std::memcmp(out.data(), expected.data(), out.size() * 4));
  std::vector<float> row(kRow);
  ASSERT_EQ(
      mlart_kv_cache_read_bytes(cache, 5 * kRow * 4, row.data(), kRow * 4),
      nullptr);
  EXPECT_EQ(0, std::memcmp(row.data(), &out[0], kRow * 4));
  ASSERT_EQ(
      mlart_kv_cache_read_bytes(cache, 2 * kRow * 4, row.data(), kRow * 4),
      nullptr);
  EXPECT_EQ(0, std::memcmp(row.data(), &out[2 * kRow], kRow * 4));

  // A kernel error names the instruction.
  slots[0] = 8;
  {
    CStatus s(mlart_executor_run(exec, nullptr));
    EXPECT_EQ(s.code(), MLART_STATUS_OUT_OF_RANGE);
    EXPECT_NE(s.message().find("instruction #1 cache_update (write)"),
              std::string::npos)
        << s.message();
  }
  ASSERT_EQ(mlart_executor_set_timing_callback(exec, nullptr, nullptr),
            nullptr);
  {
    CStatus s(mlart_executor_set_max_streams(exec, 0));
    EXPECT_EQ(s.code(), MLART_STATUS_INVALID_ARGUMENT);
    CStatus n(mlart_executor_set_max_streams(nullptr, 2));
    EXPECT_EQ(n.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
  ASSERT_EQ(mlart_executor_set_max_streams(exec, 1), nullptr);
  // The decode schedule: the three values, nothing else; the CPU ignores
  // it (this program has no decode instruction).
  for (int bad : {-1, 3, 1000}) {
    CStatus s(mlart_executor_set_decode_schedule(exec, bad));
    EXPECT_EQ(s.code(), MLART_STATUS_INVALID_ARGUMENT) << bad;
  }
  {
    CStatus n(mlart_executor_set_decode_schedule(
        nullptr, MLART_DECODE_SCHEDULE_BALANCED));
    EXPECT_EQ(n.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
  for (int ok : {MLART_DECODE_SCHEDULE_PER_SEQUENCE,
                 MLART_DECODE_SCHEDULE_BALANCED, MLART_DECODE_SCHEDULE_DEFAULT})
    ASSERT_EQ(mlart_executor_set_decode_schedule(exec, ok), nullptr) << ok;

  // Graphs need a created device stream: the CPU's streams are NULL.
  {
    CStatus c(mlart_executor_capture_graph(exec, nullptr));
    EXPECT_EQ(c.code(), MLART_STATUS_INVALID_ARGUMENT);
    CStatus r(mlart_executor_run_graph(exec, nullptr));
    EXPECT_EQ(r.code(), MLART_STATUS_FAILED_PRECONDITION) << r.message();
    CStatus t(mlart_executor_tune_graph(exec, nullptr, -1, nullptr));
    EXPECT_EQ(t.code(), MLART_STATUS_INVALID_ARGUMENT);
    int tuned = -1;
    CStatus u(mlart_executor_tune_graph(exec, nullptr, 0, &tuned));
    EXPECT_EQ(u.code(), MLART_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(tuned, -1) << "nothing written on failure";
    for (mlart_status n : {mlart_executor_capture_graph(nullptr, nullptr),
                           mlart_executor_run_graph(nullptr, nullptr),
                           mlart_executor_tune_graph(nullptr, nullptr, 0,
                                                     nullptr)}) {
      CStatus s(n);
      EXPECT_EQ(s.code(), MLART_STATUS_INVALID_ARGUMENT);
    }
  }

  mlart_executor_free(exec);
  mlart_kv_cache_destroy(other);
  mlart_kv_cache_destroy(cache);
  mlart_device_destroy(dev);
}

TEST(CApiExecutor, BadArtifactsAndArguments) {
  std::vector<uint8_t> bytes = program();
  mlart_artifact *art = nullptr;
  {
    CStatus s(mlart_artifact_load_memory(bytes.data(), bytes.size() - 1, &art));
    EXPECT_EQ(s.code(), MLART_STATUS_DATA_LOSS);
    EXPECT_EQ(art, nullptr);
  }
  bytes[40] ^= 1;
  {
    CStatus s(mlart_artifact_load_memory(bytes.data(), bytes.size(), &art));
    EXPECT_EQ(s.code(), MLART_STATUS_DATA_LOSS);
  }
  {
    CStatus s(mlart_artifact_load_file("/nonexistent/x.mlaa", &art));
    EXPECT_EQ(s.code(), MLART_STATUS_UNAVAILABLE);
  }
  {
    CStatus s(mlart_artifact_load_memory(bytes.data(), bytes.size(), nullptr));
    EXPECT_EQ(s.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
  {
    CStatus s(mlart_executor_create(nullptr, nullptr, nullptr));
    EXPECT_EQ(s.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
  {
    CStatus s(mlart_executor_run(nullptr, nullptr));
    EXPECT_EQ(s.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
  // Round trip through a file.
  const std::vector<uint8_t> good = program();
  const std::string path = ::testing::TempDir() + "mlart_capi_test.mlaa";
  ASSERT_TRUE(writeArtifactFile(path, good).ok());
  ASSERT_EQ(mlart_artifact_load_file(path.c_str(), &art), nullptr);
  EXPECT_EQ(mlart_artifact_num_instructions(art), 2);
  mlart_artifact_free(art);
  std::remove(path.c_str());
  mlart_artifact_free(nullptr);
  mlart_executor_free(nullptr);
}

// The prepare program through the C API: y = x @ [w1; w2]^T with the two
// weights concatenated once by mlart_executor_prepare (or the first run).
TEST(CApiExecutor, PrepareConcatenatesTheWeightsOnce) {
  constexpr int64_t T = 2, K = 4, N1 = 2, N2 = 1, N = N1 + N2;
  StatusOr<std::vector<uint8_t>> bytes =
      test::fusedProjectionBytes(DType::F32, T, K, N1, N2);
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();

  mlart_device *dev = nullptr;
  ASSERT_EQ(mlart_device_create_cpu(&dev), nullptr);
  mlart_artifact *art = nullptr;
  ASSERT_EQ(mlart_artifact_load_memory(bytes->data(), bytes->size(), &art),
            nullptr);
  mlart_executor *exec = nullptr;
  ASSERT_EQ(mlart_executor_create(dev, art, &exec), nullptr);
  mlart_artifact_free(art);
  {
    CStatus s(mlart_executor_prepare(nullptr, nullptr));
    EXPECT_EQ(s.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
  {
    CStatus s(mlart_executor_prepare(exec, nullptr));
    EXPECT_EQ(s.code(), MLART_STATUS_FAILED_PRECONDITION);
  }

  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> xs(T * K), ws1(N1 * K), ws2(N2 * K), ys(T * N);
  for (std::vector<float> *v : {&xs, &ws1, &ws2})
    for (float &e : *v)
      e = dist(rng);
  const int64_t xSizes[2] = {T, K}, w1Sizes[2] = {N1, K},
                w2Sizes[2] = {N2, K}, ySizes[2] = {T, N};
  mlart_tensor tx = mlart_tensor_contiguous(xs.data(), MLART_DTYPE_F32, 2, xSizes);
  mlart_tensor tw1 =
      mlart_tensor_contiguous(ws1.data(), MLART_DTYPE_F32, 2, w1Sizes);
  mlart_tensor tw2 =
      mlart_tensor_contiguous(ws2.data(), MLART_DTYPE_F32, 2, w2Sizes);
  mlart_tensor ty = mlart_tensor_contiguous(ys.data(), MLART_DTYPE_F32, 2, ySizes);
  ASSERT_EQ(mlart_executor_bind(exec, "x", &tx), nullptr);
  ASSERT_EQ(mlart_executor_bind(exec, "w1", &tw1), nullptr);
  ASSERT_EQ(mlart_executor_bind(exec, "w2", &tw2), nullptr);
  ASSERT_EQ(mlart_executor_bind(exec, "y", &ty), nullptr);

  auto expectProduct = [&](const std::vector<float> &a,
                           const std::vector<float> &b) {
    std::fill(ys.begin(), ys.end(), NAN);
    ASSERT_EQ(mlart_executor_run(exec, nullptr), nullptr);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n) {
        const float *row = n < N1 ? &a[size_t(n * K)] : &b[size_t((n - N1) * K)];
        double acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += double(xs[size_t(t * K + k)]) * double(row[k]);
        EXPECT_NEAR(ys[size_t(t * N + n)], acc, 1e-5) << t << "," << n;
      }
  };
  expectProduct(ws1, ws2); // the first run prepares
  const std::vector<float> old2 = ws2;
  for (float &e : ws2)
    e = dist(rng);
  expectProduct(ws1, old2); // changed in place: not seen yet
  ASSERT_EQ(mlart_executor_prepare(exec, nullptr), nullptr);
  expectProduct(ws1, ws2);
  mlart_executor_free(exec);
  mlart_device_destroy(dev);
}

} // namespace
