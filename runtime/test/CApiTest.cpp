//===- CApiTest.cpp - The C API, exercised through mlart.h only -----------===//
//
// Uses nothing but the C header (no mlart:: types), plus CApiSmoke.c which
// is compiled as C.
//
//===----------------------------------------------------------------------===//
#include "mlart/mlart.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" int mlart_capi_smoke_c(char *msg, size_t cap);

namespace {

/// Takes ownership of a status and returns "CODE: message".
std::string take(mlart_status st) {
  std::string s = std::to_string(int(mlart_status_get_code(st))) + ": " +
                  mlart_status_message(st);
  mlart_status_free(st);
  return s;
}

TEST(CApi, CompiledAsCReportsErrorsWithMessages) {
  char msg[512];
  EXPECT_EQ(mlart_capi_smoke_c(msg, sizeof msg), 0) << msg;
  EXPECT_NE(std::strstr(msg, "slot_mapping[1] = 4096"), nullptr) << msg;
}

TEST(CApi, VersionIsTheHeadersAndReadsAsItsString) {
  EXPECT_EQ(mlart_version(), MLART_VERSION);
  EXPECT_EQ(std::to_string(MLART_VERSION_MAJOR) + "." +
                std::to_string(MLART_VERSION_MINOR) + "." +
                std::to_string(MLART_VERSION_PATCH),
            mlart_version_string());
  EXPECT_EQ(MLART_VERSION, MLART_VERSION_MAJOR * 10000 +
                               MLART_VERSION_MINOR * 100 + MLART_VERSION_PATCH);
}

TEST(CApi, NullStatusIsOk) {
  EXPECT_EQ(mlart_status_get_code(nullptr), MLART_STATUS_OK);
  EXPECT_STREQ(mlart_status_message(nullptr), "");
  mlart_status_free(nullptr);
}

TEST(CApi, BadArgumentsBecomeStatuses) {
  EXPECT_EQ(take(mlart_device_create_cpu(nullptr)),
            "1: out_device must not be NULL");
  mlart_device *dev = nullptr;
  ASSERT_EQ(mlart_device_create_cpu(&dev), nullptr);

  mlart_kv_cache_desc desc = {4, 16, 500, 64, MLART_DTYPE_F8E4M3FN,
                              MLART_CACHE_FP8_DS_MLA};
  mlart_kv_cache *cache = nullptr;
  mlart_status st = mlart_kv_cache_create(dev, &desc, 1.0f, &cache);
  EXPECT_EQ(mlart_status_get_code(st), MLART_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mlart_status_message(st)).find("divisible by 128"),
            std::string::npos);
  mlart_status_free(st);
  EXPECT_EQ(cache, nullptr);

  mlart_buffer *buf = nullptr;
  ASSERT_EQ(mlart_buffer_allocate(dev, 16, &buf), nullptr);
  char bytes[32] = {};
  st = mlart_buffer_write(buf, 8, bytes, 16);
  EXPECT_EQ(mlart_status_get_code(st), MLART_STATUS_OUT_OF_RANGE);
  mlart_status_free(st);
  EXPECT_EQ(mlart_buffer_write(buf, 0, bytes, 16), nullptr);
  EXPECT_EQ(mlart_buffer_size(buf), 16u);

  // A tensor of rank 7 is refused before any kernel runs.
  mlart_quantize_args q = {};
  q.x.rank = 7;
  st = mlart_quantize(dev, &q, nullptr);
  EXPECT_EQ(mlart_status_get_code(st), MLART_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mlart_status_message(st)).find("rank 7"),
            std::string::npos);
  mlart_status_free(st);

  // Kernels of the other branch answer Unimplemented, not a crash.
  mlart_decode_attention_args d = {};
  st = mlart_decode_attention(dev, &d, nullptr);
  EXPECT_NE(mlart_status_get_code(st), MLART_STATUS_OK);
  mlart_status_free(st);

  mlart_buffer_free(buf);
  mlart_device_destroy(dev);
}

TEST(CApi, BlockManagerRoundTrip) {
  mlart_block_manager *bm = nullptr;
  mlart_status st = mlart_block_manager_create(1, 16, 1, &bm);
  EXPECT_EQ(mlart_status_get_code(st), MLART_STATUS_INVALID_ARGUMENT);
  mlart_status_free(st);
  ASSERT_EQ(mlart_block_manager_create(8, 4, 1, &bm), nullptr);

  std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6};
  int64_t cached = -1;
  ASSERT_EQ(mlart_block_manager_add_request(bm, 7, prompt.data(), 6, &cached),
            nullptr);
  EXPECT_EQ(cached, 0);
  mlart_scheduled_chunk chunk = {7, 0, 6};
  int64_t slots[8];
  ASSERT_EQ(mlart_block_manager_build_slot_mapping(bm, &chunk, 1, 8, slots),
            nullptr);
  int32_t table[4];
  int64_t n = 0;
  ASSERT_EQ(mlart_block_manager_get_block_table(bm, 7, table, 4, &n), nullptr);
  ASSERT_EQ(n, 2);
  EXPECT_EQ(slots[0], int64_t(table[0]) * 4);
  EXPECT_EQ(slots[5], int64_t(table[1]) * 4 + 1);
  EXPECT_EQ(slots[6], -1);
  EXPECT_EQ(take(mlart_block_manager_get_block_table(bm, 7, table, 1, &n)),
            "2: block table has 2 entries, capacity is 1");

  ASSERT_EQ(mlart_block_manager_commit_computed(bm, 7, 6), nullptr);
  ASSERT_EQ(mlart_block_manager_add_request(bm, 8, prompt.data(), 6, &cached),
            nullptr);
  EXPECT_EQ(cached, 4);
  mlart_prefix_cache_stats stats;
  ASSERT_EQ(mlart_block_manager_get_stats(bm, &stats), nullptr);
  EXPECT_EQ(stats.hit_tokens, 4);
  EXPECT_EQ(stats.cached_blocks, 1);
  EXPECT_EQ(mlart_block_manager_num_free_blocks(bm), 7 - 3);
  EXPECT_EQ(take(mlart_block_manager_free_request(bm, 99)),
            "1: unknown request 99");
  ASSERT_EQ(mlart_block_manager_free_request(bm, 7), nullptr);
  ASSERT_EQ(mlart_block_manager_free_request(bm, 8), nullptr);
  mlart_block_manager_destroy(bm);
}

namespace {

/// One token's rope + cache update through the C header on the CPU device:
/// a 2-block f32 plain cache (latent 128, rope 64) and a 4-position cos/sin
/// table of the identity rotation (cos 1, sin 0). Owns device and cache;
/// args() points into this object, so it stays where it was made.
struct OneTokenRope {
  mlart_device *dev = nullptr;
  mlart_kv_cache *cache = nullptr;
  std::vector<float> kv = std::vector<float>(128),
                     pe = std::vector<float>(64), cs = identityCosSin();
  int64_t slot = 0, pos = 0;
  int64_t kvS[2] = {1, 128}, peS[2] = {1, 64}, one[1] = {1},
          csS[2] = {4, 64};

  OneTokenRope() = default;
  OneTokenRope(const OneTokenRope &) = delete;
  OneTokenRope &operator=(const OneTokenRope &) = delete;
  ~OneTokenRope() {
    if (cache)
      mlart_kv_cache_destroy(cache);
    if (dev)
      mlart_device_destroy(dev);
  }
  /// Creates the device and the cache (use with ASSERT_NO_FATAL_FAILURE).
  void create() {
    ASSERT_EQ(mlart_device_create_cpu(&dev), nullptr);
    mlart_kv_cache_desc desc = {2, 16, 128, 64, MLART_DTYPE_F32,
                                MLART_CACHE_PLAIN};
    ASSERT_EQ(mlart_kv_cache_create(dev, &desc, 1.0f, &cache), nullptr);
  }
  mlart_rope_cache_update_args args() {
    mlart_rope_cache_update_args a = {};
    a.kv_c = mlart_tensor_contiguous(kv.data(), MLART_DTYPE_F32, 2, kvS);
    a.k_pe = mlart_tensor_contiguous(pe.data(), MLART_DTYPE_F32, 2, peS);
    a.slot_mapping = mlart_tensor_contiguous(&slot, MLART_DTYPE_I64, 1, one);
    a.cache = cache;
    a.positions = mlart_tensor_contiguous(&pos, MLART_DTYPE_I64, 1, one);
    a.cos_sin = mlart_tensor_contiguous(cs.data(), MLART_DTYPE_F32, 2, csS);
    a.style = MLART_ROPE_NEOX;
    return a;
  }

private:
  static std::vector<float> identityCosSin() {
    std::vector<float> c(4 * 64, 0.0f);
    for (int p = 0; p < 4; ++p)
      for (int i = 0; i < 32; ++i)
        c[size_t(p * 64 + i)] = 1.0f;
    return c;
  }
};

} // namespace

TEST(CApi, RopeCacheUpdateThroughTheCHeader) {
  OneTokenRope t;
  ASSERT_NO_FATAL_FAILURE(t.create());
  EXPECT_EQ(mlart_kv_cache_row_bytes(t.cache), (128 + 64) * 4);
  std::fill(t.kv.begin(), t.kv.end(), 0.5f);
  std::fill(t.pe.begin(), t.pe.end(), 1.0f);
  t.slot = 17;
  t.pos = 2;
  mlart_rope_cache_update_args a = t.args();
  ASSERT_EQ(mlart_rope_cache_update(t.dev, &a, nullptr), nullptr);
  std::vector<float> row(192);
  ASSERT_EQ(mlart_kv_cache_read_bytes(t.cache, 17 * 768, row.data(), 768),
            nullptr);
  EXPECT_EQ(row[0], 0.5f);
  EXPECT_EQ(row[128], 1.0f);

  t.pos = 4; // past the 4-row table
  mlart_status st = mlart_rope_cache_update(t.dev, &a, nullptr);
  EXPECT_EQ(mlart_status_get_code(st), MLART_STATUS_OUT_OF_RANGE);
  EXPECT_NE(std::string(mlart_status_message(st)).find("positions[0] = 4"),
            std::string::npos);
  mlart_status_free(st);
}

// mlart_rope_cache_update_full: the latent norm and the out-of-place q_pe
// source reach the kernel through the C struct: the written row is kv_c
// RMS-normalised (float64 check), q_pe is rotated from q_pe_in (identity
// rotation: a copy), and an epsilon without a weight, or a weight with
// epsilon 0, is rejected with nothing written.
TEST(CApi, RopeCacheUpdateLatentNormAndQPeSource) {
  OneTokenRope t;
  ASSERT_NO_FATAL_FAILURE(t.create());
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> w(128), qIn(2 * 64), q(2 * 64, NAN);
  for (std::vector<float> *v : {&t.kv, &t.pe, &w, &qIn})
    for (float &e : *v)
      e = u(rng);
  t.slot = 5;
  t.pos = 1;
  int64_t wS[1] = {128}, qS[3] = {1, 2, 64};
  mlart_rope_cache_update_full_args a = {};
  a.base = t.args();
  a.base.q_pe = mlart_tensor_contiguous(q.data(), MLART_DTYPE_F32, 3, qS);
  a.q_pe_in = mlart_tensor_contiguous(qIn.data(), MLART_DTYPE_F32, 3, qS);
  a.latent_norm_weight = mlart_tensor_contiguous(w.data(), MLART_DTYPE_F32, 1,
                                                 wS);
  const float eps = 1e-6f;
  const size_t rowBytes = (128 + 64) * 4;
  std::vector<float> before(192), row(192);
  ASSERT_EQ(mlart_kv_cache_read_bytes(t.cache, t.slot * rowBytes, before.data(),
                                      rowBytes),
            nullptr);

  // Must not write: a weight with epsilon 0, an epsilon without a weight.
  mlart_status st = mlart_rope_cache_update_full(t.dev, &a, nullptr);
  EXPECT_EQ(mlart_status_get_code(st), MLART_STATUS_INVALID_ARGUMENT);
  mlart_status_free(st);
  mlart_rope_cache_update_full_args noWeight = a;
  noWeight.latent_norm_weight = mlart_tensor{};
  noWeight.latent_norm_epsilon = eps;
  st = mlart_rope_cache_update_full(t.dev, &noWeight, nullptr);
  EXPECT_EQ(mlart_status_get_code(st), MLART_STATUS_INVALID_ARGUMENT);
  mlart_status_free(st);
  ASSERT_EQ(mlart_kv_cache_read_bytes(t.cache, t.slot * rowBytes, row.data(),
                                      rowBytes),
            nullptr);
  EXPECT_EQ(std::memcmp(row.data(), before.data(), rowBytes), 0);

  a.latent_norm_epsilon = eps;
  ASSERT_EQ(mlart_rope_cache_update_full(t.dev, &a, nullptr), nullptr);
  ASSERT_EQ(mlart_kv_cache_read_bytes(t.cache, t.slot * rowBytes, row.data(),
                                      rowBytes),
            nullptr);
  double ss = 0;
  for (float v : t.kv)
    ss += double(v) * v;
  const double inv = 1.0 / std::sqrt(ss / 128 + eps);
  for (int i = 0; i < 128; ++i)
    EXPECT_NEAR(row[size_t(i)], t.kv[size_t(i)] * inv * w[size_t(i)], 1e-5) << i;
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(row[size_t(128 + i)], t.pe[size_t(i)]) << i;
  EXPECT_EQ(q, qIn) << "q_pe rotated (identity) from q_pe_in";
}

TEST(CApi, LinearWithAddendMatchesFloat64) {
  mlart_device *dev = nullptr;
  ASSERT_EQ(mlart_device_create_cpu(&dev), nullptr);
  const int64_t T = 3, K = 5, N = 4;
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float &e : v)
      e = u(rng);
    return v;
  };
  std::vector<float> x = random(T * K), w = random(N * K), r = random(T * N);
  std::vector<double> want(T * N);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double acc = r[size_t(t * N + n)];
      for (int64_t k = 0; k < K; ++k)
        acc += double(x[size_t(t * K + k)]) * w[size_t(n * K + k)];
      want[size_t(t * N + n)] = acc;
    }
  std::vector<float> out(T * N, NAN);
  const std::vector<float> addend = r;
  int64_t xS[2] = {T, K}, wS[2] = {N, K}, oS[2] = {T, N};
  mlart_linear_addend_args a = {};
  a.x = mlart_tensor_contiguous(x.data(), MLART_DTYPE_F32, 2, xS);
  a.weight = mlart_tensor_contiguous(w.data(), MLART_DTYPE_F32, 2, wS);
  a.out = mlart_tensor_contiguous(out.data(), MLART_DTYPE_F32, 2, oS);
  a.addend = mlart_tensor_contiguous(r.data(), MLART_DTYPE_F32, 2, oS);
  ASSERT_EQ(mlart_linear_addend(dev, &a, nullptr), nullptr);
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_NEAR(out[i], want[i], 1e-5) << i;
  EXPECT_EQ(r, addend) << "the addend was modified";

  // In place: the addend is out's own view.
  std::vector<float> inPlace = r;
  a.out = mlart_tensor_contiguous(inPlace.data(), MLART_DTYPE_F32, 2, oS);
  a.addend = a.out;
  ASSERT_EQ(mlart_linear_addend(dev, &a, nullptr), nullptr);
  for (size_t i = 0; i < inPlace.size(); ++i)
    EXPECT_NEAR(inPlace[i], want[i], 1e-5) << i;

  // An absent addend is the plain linear, like mlart_linear.
  std::vector<float> plain(T * N, NAN), viaLinear(T * N, NAN);
  a.out = mlart_tensor_contiguous(plain.data(), MLART_DTYPE_F32, 2, oS);
  a.addend = mlart_tensor{};
  ASSERT_EQ(mlart_linear_addend(dev, &a, nullptr), nullptr);
  mlart_linear_args l = {a.x, a.weight,
                         mlart_tensor_contiguous(viaLinear.data(),
                                                 MLART_DTYPE_F32, 2, oS)};
  ASSERT_EQ(mlart_linear(dev, &l, nullptr), nullptr);
  EXPECT_EQ(plain, viaLinear);
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_NEAR(plain[i], want[i] - r[i], 1e-5) << i;

  // Malformed addends are statuses: wrong dtype, wrong shape, a shifted
  // overlap with out.
  std::vector<uint16_t> r16(T * N, 0);
  a.out = mlart_tensor_contiguous(out.data(), MLART_DTYPE_F32, 2, oS);
  a.addend = mlart_tensor_contiguous(r16.data(), MLART_DTYPE_F16, 2, oS);
  std::string msg = take(mlart_linear_addend(dev, &a, nullptr));
  EXPECT_NE(msg.find("must have out's dtype"), std::string::npos) << msg;
  int64_t badS[2] = {T, N + 1};
  std::vector<float> big(T * (N + 1), 0.0f);
  a.addend = mlart_tensor_contiguous(big.data(), MLART_DTYPE_F32, 2, badS);
  msg = take(mlart_linear_addend(dev, &a, nullptr));
  EXPECT_EQ(msg.rfind("1: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("addend"), std::string::npos) << msg;
  std::vector<float> shared(T * N + 1, 0.0f);
  a.out = mlart_tensor_contiguous(shared.data(), MLART_DTYPE_F32, 2, oS);
  a.addend = mlart_tensor_contiguous(shared.data() + 1, MLART_DTYPE_F32, 2, oS);
  msg = take(mlart_linear_addend(dev, &a, nullptr));
  EXPECT_NE(msg.find("partially overlaps out"), std::string::npos) << msg;
  a.addend.rank = 9;
  msg = take(mlart_linear_addend(dev, &a, nullptr));
  EXPECT_NE(msg.find("addend: rank 9"), std::string::npos) << msg;
  EXPECT_EQ(take(mlart_linear_addend(dev, nullptr, nullptr)),
            "1: device and args must not be NULL");

  mlart_device_destroy(dev);
}

} // namespace

// mlart_prefill_attention_full: total lengths and the host-side context
// bound reach the kernel through the C struct. Total lengths with a bound
// equal to the context give bit for bit what the base entry point gives
// with context lengths; a context longer than the bound is OUT_OF_RANGE and
// a negative bound INVALID_ARGUMENT, with out left as it was.
TEST(CApi, PrefillAttentionTotalLengthsAndContextBound) {
  mlart_device *dev = nullptr;
  ASSERT_EQ(mlart_device_create_cpu(&dev), nullptr);
  mlart_kv_cache_desc desc = {2, 16, 128, 64, MLART_DTYPE_F32,
                              MLART_CACHE_PLAIN};
  mlart_kv_cache *cache = nullptr;
  ASSERT_EQ(mlart_kv_cache_create(dev, &desc, 1.0f, &cache), nullptr);
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (float &e : v)
      e = u(rng);
    return v;
  };
  std::vector<float> rows = random(2 * 16 * 192);
  ASSERT_EQ(mlart_kv_cache_write_bytes(cache, 0, rows.data(), rows.size() * 4),
            nullptr);
  // One request: 2 new tokens after 20 cached ones; 2 heads, nope 32.
  const int32_t ctx = 20;
  std::vector<float> q = random(2 * 2 * 96), k = random(2 * 2 * 96),
                     v = random(2 * 2 * 16), wuk = random(2 * 32 * 128),
                     wuv = random(2 * 128 * 16);
  for (float &w : wuk)
    w *= 0.1f;
  for (float &w : wuv)
    w *= 0.1f;
  std::vector<float> out1(2 * 2 * 16, NAN), out2(out1);
  int32_t qsl[2] = {0, 2}, table[2] = {1, 0}, ctxLen = ctx,
          totalLen = ctx + 2;
  int64_t qS[3] = {2, 2, 96}, vS[3] = {2, 2, 16}, locS[1] = {2},
          tabS[2] = {1, 2}, lenS[1] = {1}, ukS[3] = {2, 32, 128},
          uvS[3] = {2, 128, 16};
  mlart_prefill_attention_args a = {};
  a.q = mlart_tensor_contiguous(q.data(), MLART_DTYPE_F32, 3, qS);
  a.k = mlart_tensor_contiguous(k.data(), MLART_DTYPE_F32, 3, qS);
  a.v = mlart_tensor_contiguous(v.data(), MLART_DTYPE_F32, 3, vS);
  a.query_start_loc = mlart_tensor_contiguous(qsl, MLART_DTYPE_I32, 1, locS);
  a.softmax_scale = 0.1f;
  a.out = mlart_tensor_contiguous(out1.data(), MLART_DTYPE_F32, 3, vS);
  a.cache = cache;
  a.block_table = mlart_tensor_contiguous(table, MLART_DTYPE_I32, 2, tabS);
  a.context_lens = mlart_tensor_contiguous(&ctxLen, MLART_DTYPE_I32, 1, lenS);
  a.w_uk = mlart_tensor_contiguous(wuk.data(), MLART_DTYPE_F32, 3, ukS);
  a.w_uv = mlart_tensor_contiguous(wuv.data(), MLART_DTYPE_F32, 3, uvS);
  ASSERT_EQ(mlart_prefill_attention(dev, &a, nullptr), nullptr);
  for (float o : out1)
    ASSERT_TRUE(std::isfinite(o));

  mlart_prefill_attention_full_args f = {};
  f.base = a;
  f.base.out = mlart_tensor_contiguous(out2.data(), MLART_DTYPE_F32, 3, vS);
  f.base.context_lens =
      mlart_tensor_contiguous(&totalLen, MLART_DTYPE_I32, 1, lenS);
  f.lens_include_new_tokens = 1;
  f.context_len_bound = ctx - 1;
  mlart_status st = mlart_prefill_attention_full(dev, &f, nullptr);
  EXPECT_EQ(mlart_status_get_code(st), MLART_STATUS_OUT_OF_RANGE);
  EXPECT_NE(std::string(mlart_status_message(st)).find("contextLenBound"),
            std::string::npos)
      << mlart_status_message(st);
  mlart_status_free(st);
  f.context_len_bound = -1;
  st = mlart_prefill_attention_full(dev, &f, nullptr);
  EXPECT_EQ(mlart_status_get_code(st), MLART_STATUS_INVALID_ARGUMENT);
  mlart_status_free(st);
  for (float o : out2)
    ASSERT_TRUE(std::isnan(o)) << "a refused call wrote out";

  f.context_len_bound = ctx;
  ASSERT_EQ(mlart_prefill_attention_full(dev, &f, nullptr), nullptr);
  EXPECT_EQ(std::memcmp(out1.data(), out2.data(), out1.size() * 4), 0);
  mlart_kv_cache_destroy(cache);
  mlart_device_destroy(dev);
}

namespace {

/// Float64 decode attention of one head query over `rows` (each latent +
/// rope values); V is the first `latent` values of each row.
std::vector<double> attendRows(const std::vector<float> &q,
                               const std::vector<std::vector<float>> &rows,
                               int latent, double scale) {
  std::vector<double> s;
  double m = -INFINITY;
  for (const auto &r : rows) {
    double d = 0;
    for (size_t c = 0; c < q.size(); ++c)
      d += double(q[c]) * r[c];
    s.push_back(scale * d);
    m = std::max(m, s.back());
  }
  double sum = 0;
  for (double &x : s)
    sum += (x = std::exp(x - m));
  std::vector<double> out(size_t(latent), 0.0);
  for (size_t j = 0; j < rows.size(); ++j)
    for (int c = 0; c < latent; ++c)
      out[size_t(c)] += s[j] / sum * rows[j][size_t(c)];
  return out;
}

} // namespace

// mlart_decode_attention_with_update writes the step's row and attends over
// it with the two rows already cached (float64 check); a slot past the cache
// is refused with neither the cache nor the output written.
TEST(CApi, DecodeAttentionWithUpdateWritesThenAttends) {
  constexpr int kLat = 128, kRope = 64, kRow = kLat + kRope;
  mlart_device *dev = nullptr;
  mlart_kv_cache *cache = nullptr;
  ASSERT_EQ(mlart_device_create_cpu(&dev), nullptr);
  mlart_kv_cache_desc desc = {
      2, 16, kLat, kRope, MLART_DTYPE_F32, MLART_CACHE_PLAIN};
  ASSERT_EQ(mlart_kv_cache_create(dev, &desc, 1.0f, &cache), nullptr);

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (float &x : v)
      x = dist(rng);
    return v;
  };
  // The sequence's pages are blocks 1 then 0; its first two rows are cached.
  std::vector<std::vector<float>> rows = {random(kRow), random(kRow)};
  for (int t = 0; t < 2; ++t)
    ASSERT_EQ(mlart_kv_cache_write_bytes(cache, size_t(16 + t) * kRow * 4,
                                         rows[size_t(t)].data(), kRow * 4),
              nullptr);
  std::vector<float> kv = random(kLat), pe = random(kRope), q = random(kRow);
  std::vector<float> out(kLat, NAN);
  int64_t slot = 18; // block 1, offset 2: token 2
  int32_t table[2] = {1, 0}, len = 3;
  int64_t kvS[2] = {1, kLat}, peS[2] = {1, kRope}, one[1] = {1},
          qS[3] = {1, 1, kRow}, oS[3] = {1, 1, kLat}, btS[2] = {1, 2};
  mlart_decode_attention_with_update_args a = {};
  a.kv_c = mlart_tensor_contiguous(kv.data(), MLART_DTYPE_F32, 2, kvS);
  a.k_pe = mlart_tensor_contiguous(pe.data(), MLART_DTYPE_F32, 2, peS);
  a.slot_mapping = mlart_tensor_contiguous(&slot, MLART_DTYPE_I64, 1, one);
  a.q = mlart_tensor_contiguous(q.data(), MLART_DTYPE_F32, 3, qS);
  a.cache = cache;
  a.block_table = mlart_tensor_contiguous(table, MLART_DTYPE_I32, 2, btS);
  a.seq_lens = mlart_tensor_contiguous(&len, MLART_DTYPE_I32, 1, one);
  a.softmax_scale = 0.2f;
  a.out = mlart_tensor_contiguous(out.data(), MLART_DTYPE_F32, 3, oS);

  // Refused first: nothing written anywhere.
  std::vector<uint8_t> before(size_t(2 * 16 * kRow * 4)), after(before.size());
  ASSERT_EQ(mlart_kv_cache_read_bytes(cache, 0, before.data(), before.size()),
            nullptr);
  slot = 32;
  mlart_status st = mlart_decode_attention_with_update(dev, &a, nullptr);
  EXPECT_EQ(mlart_status_get_code(st), MLART_STATUS_OUT_OF_RANGE);
  mlart_status_free(st);
  ASSERT_EQ(mlart_kv_cache_read_bytes(cache, 0, after.data(), after.size()),
            nullptr);
  EXPECT_EQ(before, after);
  for (float v : out)
    ASSERT_TRUE(std::isnan(v));

  slot = 18;
  ASSERT_EQ(mlart_decode_attention_with_update(dev, &a, nullptr), nullptr);
  std::vector<float> row(kRow);
  ASSERT_EQ(mlart_kv_cache_read_bytes(cache, size_t(slot) * kRow * 4,
                                      row.data(), kRow * 4),
            nullptr);
  EXPECT_TRUE(std::equal(kv.begin(), kv.end(), row.begin()));
  EXPECT_TRUE(std::equal(pe.begin(), pe.end(), row.begin() + kLat));
  rows.push_back(row);
  std::vector<double> want = attendRows(q, rows, kLat, 0.2);
  for (int c = 0; c < kLat; ++c)
    EXPECT_NEAR(out[size_t(c)], want[size_t(c)], 1e-5) << c;

  mlart_kv_cache_destroy(cache);
  mlart_device_destroy(dev);
}

namespace {

/// One fp8 per-tensor cache_update of a fixed token into slot 3 of `cache`.
mlart_status writeOneFp8Token(mlart_device *dev, mlart_kv_cache *cache) {
  static std::vector<float> kv(128, 0.3f), pe(64, -0.7f);
  static int64_t slot = 3, kvS[2] = {1, 128}, peS[2] = {1, 64}, one[1] = {1};
  mlart_cache_update_args a = {};
  a.kv_c = mlart_tensor_contiguous(kv.data(), MLART_DTYPE_F32, 2, kvS);
  a.k_pe = mlart_tensor_contiguous(pe.data(), MLART_DTYPE_F32, 2, peS);
  a.slot_mapping = mlart_tensor_contiguous(&slot, MLART_DTYPE_I64, 1, one);
  a.cache = cache;
  return mlart_cache_update(dev, &a, nullptr);
}

std::vector<uint8_t> cacheBytes(const mlart_kv_cache *cache) {
  std::vector<uint8_t> bytes(mlart_kv_cache_size_bytes(cache));
  EXPECT_EQ(mlart_kv_cache_read_bytes(cache, 0, bytes.data(), bytes.size()),
            nullptr);
  return bytes;
}

} // namespace

TEST(CApi, ScaleTensorIsReadWhenTheKernelRuns) {
  mlart_device *dev = nullptr;
  ASSERT_EQ(mlart_device_create_cpu(&dev), nullptr);
  const mlart_kv_cache_desc desc = {
      1, 16, 128, 64, MLART_DTYPE_F8E4M3FN, MLART_CACHE_FP8_PER_TENSOR};
  mlart_kv_cache *byTensor = nullptr, *byNumber = nullptr;
  ASSERT_EQ(mlart_kv_cache_create(dev, &desc, 1.0f, &byTensor), nullptr);
  ASSERT_EQ(mlart_kv_cache_create(dev, &desc, 0.05f, &byNumber), nullptr);
  float kScale = 0.05f; // host memory is the CPU device's memory
  ASSERT_EQ(mlart_kv_cache_set_scale_tensor(byTensor, &kScale), nullptr);
  ASSERT_EQ(writeOneFp8Token(dev, byTensor), nullptr);
  ASSERT_EQ(writeOneFp8Token(dev, byNumber), nullptr);
  const std::vector<uint8_t> written = cacheBytes(byTensor);
  EXPECT_EQ(written, cacheBytes(byNumber));

  // Not finite and > 0 when the kernel reads it: refused, nothing written.
  kScale = -1.0f;
  mlart_status st = writeOneFp8Token(dev, byTensor);
  EXPECT_EQ(mlart_status_get_code(st), MLART_STATUS_INVALID_ARGUMENT);
  mlart_status_free(st);
  EXPECT_EQ(cacheBytes(byTensor), written);
  // NULL returns to the creation scale (1.0): a different encoding.
  ASSERT_EQ(mlart_kv_cache_set_scale_tensor(byTensor, nullptr), nullptr);
  ASSERT_EQ(writeOneFp8Token(dev, byTensor), nullptr);
  EXPECT_NE(cacheBytes(byTensor), written);
  mlart_kv_cache_destroy(byTensor);
  mlart_kv_cache_destroy(byNumber);
  mlart_device_destroy(dev);
}
