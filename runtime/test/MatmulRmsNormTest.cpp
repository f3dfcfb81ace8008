//===- MatmulRmsNormTest.cpp - qAbsorb, vUp, linear, rmsNorm vs float64 ---===//
#include "KernelTestUtil.h"
#include "cpu/CpuKernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

using namespace mlart;
using namespace mlart::kerneltest;

namespace {

/// Float64 out[b, h, :] = x[b, h, :] @ w[h] for x [B, H, K], w [H, K, N].
std::vector<double> refPerHead(const HostTensor &x, const HostTensor &w,
                               int64_t batch, int64_t heads, int64_t k,
                               int64_t n) {
  const std::vector<double> xv = x.values(), wv = w.values();
  std::vector<double> out(static_cast<size_t>(batch * heads * n), 0.0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < n; ++j)
          out[(b * heads + h) * n + j] +=
              xv[(b * heads + h) * k + i] * wv[(h * k + i) * n + j];
  return out;
}

/// Sums of K products of values in [-1, 1] reach a few times sqrt(K); the
/// absolute tolerance covers float rounding of such sums.
double sumTolerance(int64_t k) { return 1e-6 * std::sqrt(double(k)) * 4; }

// DeepSeek sizes; out is the latent slice of the [B, H, 576] query buffer
// that qConcat would otherwise assemble, and its rope tail stays untouched.
TEST(QAbsorb, WritesIntoAStridedSliceOfTheFullQuery) {
  const int64_t B = 3, H = 16, nope = 128, latent = 512, rope = 64;
  std::mt19937 rng(31);
  HostTensor qNope(DType::BF16, {B, H, nope}),
      wUK(DType::BF16, {H, nope, latent});
  qNope.fillUniform(rng);
  wUK.fillUniform(rng);
  HostTensor full(DType::BF16, {B, H, latent + rope});
  full.fillUniform(rng);
  const std::vector<double> before = full.values();
  for (int64_t i = 0; i < B * H; ++i)
    for (int64_t c = 0; c < latent; ++c)
      full.set(i * (latent + rope) + c, std::nan(""));

  QAbsorbArgs a;
  a.qNope = qNope.ref();
  a.wUK = wUK.ref();
  a.out = full.ref();
  a.out.sizes[2] = latent; // strides stay those of [B, H, 576]
  Status s = cpu::qAbsorb(a);
  ASSERT_TRUE(s.ok()) << s.toString();

  const std::vector<double> ref = refPerHead(qNope, wUK, B, H, nope, latent);
  const std::vector<double> got = full.values();
  std::vector<double> gotLatent, gotRope, wantRope;
  for (int64_t i = 0; i < B * H; ++i) {
    for (int64_t c = 0; c < latent + rope; ++c) {
      const size_t idx = size_t(i * (latent + rope) + c);
      if (c < latent)
        gotLatent.push_back(got[idx]);
      else {
        gotRope.push_back(got[idx]);
        wantRope.push_back(before[idx]);
      }
    }
  }
  expectNear(gotLatent, ref, sumTolerance(nope), relTolerance(DType::BF16),
             "latent");
  EXPECT_EQ(gotRope, wantRope);
}

// The compiled step assembles the decode query in place: q_absorb's output
// is the [.., 0:L] view of [B, H, L + P] (row stride H * 576, head stride
// 576). The view changes only where results go, never their bits; the rope
// columns keep their (random, not NaN) values.
TEST(QAbsorb, StridedOutputEqualsContiguousBitForBit) {
  const int64_t H = 16, nope = 128, latent = 512, rope = 64, row = latent + rope;
  for (DType t : {DType::BF16, DType::F32})
    for (int64_t B : {1, 5}) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " B=" + std::to_string(B));
      std::mt19937 rng(unsigned(40 + B));
      HostTensor qNope(t, {B, H, nope}), wUK(t, {H, nope, latent});
      qNope.fillUniform(rng);
      wUK.fillUniform(rng);
      HostTensor contiguous(t, {B, H, latent}), full(t, {B, H, row});
      contiguous.poison();
      full.fillUniform(rng);
      for (int64_t r = 0; r < B * H; ++r)
        for (int64_t c = 0; c < latent; ++c)
          full.set(r * row + c, std::nan(""));
      const std::vector<uint8_t> before = full.bytes();

      ASSERT_TRUE(cpu::qAbsorb({qNope.ref(), wUK.ref(), contiguous.ref()}).ok());
      TensorRef view = full.ref();
      view.sizes[2] = latent;
      ASSERT_EQ(view.strides[0], H * row);
      ASSERT_EQ(view.strides[1], row);
      Status s = cpu::qAbsorb({qNope.ref(), wUK.ref(), view});
      ASSERT_TRUE(s.ok()) << s.toString();

      const size_t es = dtypeSize(t);
      for (int64_t r = 0; r < B * H; ++r) {
        const uint8_t *got = full.bytes().data() + size_t(r * row) * es;
        const uint8_t *want =
            contiguous.bytes().data() + size_t(r * latent) * es;
        ASSERT_EQ(std::memcmp(got, want, size_t(latent) * es), 0)
            << "latent row " << r;
        ASSERT_EQ(std::memcmp(got + size_t(latent) * es,
                              before.data() + size_t(r * row + latent) * es,
                              size_t(rope) * es),
                  0)
            << "rope columns of row " << r;
      }
      // Not trivially equal: the product was written (no NaN left).
      EXPECT_FALSE(std::isnan(full.get(0)));
    }
}

TEST(QAbsorb, ContiguousF16InF32Out) {
  const int64_t B = 2, H = 4, nope = 40, latent = 72;
  std::mt19937 rng(32);
  HostTensor qNope(DType::F16, {B, H, nope}),
      wUK(DType::F16, {H, nope, latent});
  HostTensor out(DType::F32, {B, H, latent});
  qNope.fillUniform(rng);
  wUK.fillUniform(rng);
  out.poison();
  ASSERT_TRUE(cpu::qAbsorb({qNope.ref(), wUK.ref(), out.ref()}).ok());
  expectNear(out.values(), refPerHead(qNope, wUK, B, H, nope, latent),
             sumTolerance(nope), 1e-6, "out");
}

TEST(VUp, MatchesFloat64ForEachDType) {
  const int64_t B = 4, H = 16, latent = 512, vDim = 128;
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtypeName(t));
    std::mt19937 rng(33);
    HostTensor o(t, {B, H, latent}), wUV(t, {H, latent, vDim}),
        out(t, {B, H, vDim});
    o.fillUniform(rng);
    wUV.fillUniform(rng);
    out.poison();
    ASSERT_TRUE(cpu::vUp({o.ref(), wUV.ref(), out.ref()}).ok());
    expectNear(out.values(), refPerHead(o, wUV, B, H, latent, vDim),
               sumTolerance(latent), relTolerance(t), "out");
  }
}

TEST(VUp, RejectsMismatchedShapesWithoutWriting) {
  HostTensor o(DType::F32, {2, 4, 64}), wUV(DType::F32, {4, 63, 16});
  HostTensor out(DType::F32, {2, 4, 16});
  out.poison();
  const std::vector<uint8_t> before = out.bytes();
  EXPECT_EQ(cpu::vUp({o.ref(), wUV.ref(), out.ref()}).code(),
            StatusCode::InvalidArgument);
  HostTensor wHeads(DType::F32, {3, 64, 16});
  EXPECT_EQ(cpu::vUp({o.ref(), wHeads.ref(), out.ref()}).code(),
            StatusCode::InvalidArgument);
  EXPECT_EQ(out.bytes(), before);
}

/// Float64 out [T, N] = x [T, K] @ w[N, K]^T.
std::vector<double> refLinear(const HostTensor &x, const HostTensor &w,
                              int64_t T, int64_t K, int64_t N) {
  const std::vector<double> xv = x.values(), wv = w.values();
  std::vector<double> out(static_cast<size_t>(T * N), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k)
        out[t * N + n] += xv[t * K + k] * wv[n * K + k];
  return out;
}

// Token and output counts that are not multiples of the kernel's tiles.
TEST(Linear, MatchesFloat64AcrossTileEdges) {
  struct Case {
    int64_t T, K, N;
    DType x, w, out;
  };
  for (Case c : {Case{37, 300, 130, DType::BF16, DType::BF16, DType::BF16},
                 Case{1, 576, 64, DType::F32, DType::F32, DType::F32},
                 Case{16, 7, 65, DType::F16, DType::BF16, DType::F32},
                 Case{5, 2048, 3, DType::BF16, DType::BF16, DType::F32}}) {
    SCOPED_TRACE(std::to_string(c.T) + "x" + std::to_string(c.K) + "x" +
                 std::to_string(c.N));
    std::mt19937 rng(uint32_t(34 + c.T));
    HostTensor x(c.x, {c.T, c.K}), w(c.w, {c.N, c.K}), out(c.out, {c.T, c.N});
    x.fillUniform(rng);
    w.fillUniform(rng);
    out.poison();
    ASSERT_TRUE(cpu::linear({x.ref(), w.ref(), out.ref()}).ok());
    expectNear(out.values(), refLinear(x, w, c.T, c.K, c.N), sumTolerance(c.K),
               relTolerance(c.out), "out");
  }
}

TEST(Linear, RejectsMismatchedShapesWithoutWriting) {
  HostTensor x(DType::F32, {4, 32}), w(DType::F32, {8, 31});
  HostTensor out(DType::F32, {4, 8});
  out.poison();
  const std::vector<uint8_t> before = out.bytes();
  EXPECT_EQ(cpu::linear({x.ref(), w.ref(), out.ref()}).code(),
            StatusCode::InvalidArgument);
  HostTensor xi(DType::I32, {4, 32});
  HostTensor w32(DType::F32, {8, 32});
  EXPECT_EQ(cpu::linear({xi.ref(), w32.ref(), out.ref()}).code(),
            StatusCode::InvalidArgument);
  EXPECT_EQ(out.bytes(), before);
}

/// LinearArgs with an addend.
LinearArgs linearWith(HostTensor &x, HostTensor &w, HostTensor &out,
                      HostTensor &addend) {
  LinearArgs a;
  a.x = x.ref();
  a.weight = w.ref();
  a.out = out.ref();
  a.addend = addend.ref();
  return a;
}

// out = x @ W^T + addend, against float64, at tile edges; the addend is only
// read.
TEST(Linear, AddendMatchesFloat64) {
  struct Case {
    int64_t T, K, N;
    DType x, out;
  };
  for (Case c : {Case{37, 300, 130, DType::BF16, DType::BF16},
                 Case{1, 576, 64, DType::F32, DType::F32},
                 Case{7, 2048, 65, DType::BF16, DType::F16},
                 Case{64, 256, 200, DType::BF16, DType::BF16}}) {
    SCOPED_TRACE(std::to_string(c.T) + "x" + std::to_string(c.K) + "x" +
                 std::to_string(c.N));
    std::mt19937 rng(uint32_t(71 + c.T));
    HostTensor x(c.x, {c.T, c.K}), w(c.x, {c.N, c.K}), out(c.out, {c.T, c.N});
    HostTensor r(c.out, {c.T, c.N});
    x.fillUniform(rng);
    w.fillUniform(rng);
    r.fillUniform(rng, -4.0, 4.0);
    out.poison();
    const std::vector<uint8_t> addendBefore = r.bytes();
    ASSERT_TRUE(cpu::linear(linearWith(x, w, out, r)).ok());
    std::vector<double> ref = refLinear(x, w, c.T, c.K, c.N);
    const std::vector<double> rv = r.values();
    for (size_t i = 0; i < ref.size(); ++i)
      ref[i] += rv[i];
    expectNear(out.values(), ref, sumTolerance(c.K), relTolerance(c.out),
               "out");
    EXPECT_EQ(r.bytes(), addendBefore);
  }
}

// The sum is rounded once: x @ W^T = 1 + 2^-8 is a bf16 tie that rounds to 1
// on its own, so adding 2^-8 after rounding would give 1 again; one rounding
// of the float sum gives 1 + 2^-7.
TEST(Linear, AddendIsRoundedOnceWithTheProduct) {
  HostTensor x(DType::F32, {1, 1}), w(DType::F32, {1, 1});
  HostTensor out(DType::BF16, {1, 1}), r(DType::BF16, {1, 1});
  x.set(0, 1.0);
  w.set(0, 1.0 + std::ldexp(1.0, -8));
  r.set(0, std::ldexp(1.0, -8));
  out.poison();
  ASSERT_TRUE(cpu::linear(linearWith(x, w, out, r)).ok());
  EXPECT_EQ(out.get(0), 1.0 + std::ldexp(1.0, -7));
  // Without the addend the product alone rounds to 1.
  ASSERT_TRUE(cpu::linear({x.ref(), w.ref(), out.ref()}).ok());
  EXPECT_EQ(out.get(0), 1.0);
}

// The addend may be out itself (the same view): each element is read before
// it is written, so the result equals the out-of-place one bit for bit.
TEST(Linear, AddendInPlaceEqualsOutOfPlace) {
  std::mt19937 rng(91);
  HostTensor x(DType::BF16, {20, 96}), w(DType::BF16, {70, 96});
  HostTensor r(DType::BF16, {20, 70}), out(DType::BF16, {20, 70});
  x.fillUniform(rng);
  w.fillUniform(rng);
  r.fillUniform(rng);
  out.poison();
  ASSERT_TRUE(cpu::linear(linearWith(x, w, out, r)).ok());
  ASSERT_TRUE(cpu::linear(linearWith(x, w, r, r)).ok());
  EXPECT_EQ(r.bytes(), out.bytes());
}

TEST(Linear, RejectsBadAddendWithoutWriting) {
  HostTensor x(DType::BF16, {4, 32}), w(DType::BF16, {8, 32});
  HostTensor out(DType::BF16, {4, 8});
  out.poison();
  const std::vector<uint8_t> before = out.bytes();
  HostTensor wrongType(DType::F32, {4, 8}), wrongRows(DType::BF16, {5, 8}),
      wrongCols(DType::BF16, {4, 9}), rank1(DType::BF16, {32}),
      ints(DType::I32, {4, 8});
  for (HostTensor *bad : {&wrongType, &wrongRows, &wrongCols, &rank1, &ints})
    EXPECT_EQ(cpu::linear(linearWith(x, w, out, *bad)).code(),
              StatusCode::InvalidArgument);
  // A view of out shifted by one row overlaps it without being it.
  HostTensor big(DType::BF16, {5, 8});
  big.poison();
  LinearArgs shifted;
  shifted.x = x.ref();
  shifted.weight = w.ref();
  shifted.out = big.ref();
  shifted.out.sizes[0] = 4;
  shifted.addend = shifted.out;
  shifted.addend.data = static_cast<uint8_t *>(shifted.out.data) + 8 * 2;
  const std::vector<uint8_t> bigBefore = big.bytes();
  Status s = cpu::linear(shifted);
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  EXPECT_NE(s.message().find("partially overlaps"), std::string::npos)
      << s.message();
  EXPECT_EQ(out.bytes(), before);
  EXPECT_EQ(big.bytes(), bigBefore);
}

TEST(RmsNorm, MatchesFloat64ForEachDType) {
  const int64_t T = 6;
  for (int64_t D : {512, 1000}) {
    for (DType t : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " D=" + std::to_string(D));
      std::mt19937 rng(uint32_t(35 + D));
      HostTensor x(t, {T, D}), w(t, {D}), out(t, {T, D});
      x.fillUniform(rng, -3.0, 3.0);
      w.fillUniform(rng, 0.5, 1.5);
      out.poison();
      const float eps = 1e-6f;
      RmsNormArgs a;
      a.x = x.ref();
      a.weight = w.ref();
      a.epsilon = eps;
      a.out = out.ref();
      ASSERT_TRUE(cpu::rmsNorm(a).ok());
      const std::vector<double> xv = x.values(), wv = w.values();
      std::vector<double> ref(static_cast<size_t>(T * D));
      for (int64_t i = 0; i < T; ++i) {
        double ms = 0;
        for (int64_t d = 0; d < D; ++d)
          ms += xv[i * D + d] * xv[i * D + d];
        const double inv = 1.0 / std::sqrt(ms / double(D) + eps);
        for (int64_t d = 0; d < D; ++d)
          ref[i * D + d] = xv[i * D + d] * inv * wv[d];
      }
      expectNear(out.values(), ref, 1e-6, relTolerance(t) + 1e-6, "out");
    }
  }
}

TEST(RmsNorm, RejectsMismatchedShapesWithoutWriting) {
  HostTensor x(DType::F32, {2, 16}), w(DType::F32, {15}),
      out(DType::F32, {2, 16});
  out.poison();
  const std::vector<uint8_t> before = out.bytes();
  RmsNormArgs a;
  a.x = x.ref();
  a.weight = w.ref();
  a.out = out.ref();
  EXPECT_EQ(cpu::rmsNorm(a).code(), StatusCode::InvalidArgument);
  EXPECT_EQ(out.bytes(), before);
}

} // namespace

TEST(Add, MatchesFloat64AndRejectsShapes) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t rows = 5, cols = 37;
  std::vector<uint16_t> a(rows * cols), b(rows * cols), out(rows * cols, 0x7fc0);
  std::vector<double> ref(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) {
    a[i] = mlart::floatToBf16(dist(rng));
    b[i] = mlart::floatToBf16(dist(rng));
    ref[i] = double(mlart::bf16ToFloat(a[i])) + double(mlart::bf16ToFloat(b[i]));
  }
  auto view = [&](std::vector<uint16_t> &v) {
    return mlart::TensorRef::contiguous(v.data(), mlart::DType::BF16, {rows, cols});
  };
  mlart::AddArgs args{view(a), view(b), view(out)};
  ASSERT_TRUE(mlart::cpu::add(args).ok());
  for (int64_t i = 0; i < rows * cols; ++i)
    EXPECT_NEAR(mlart::bf16ToFloat(out[i]), ref[i], std::abs(ref[i]) * 1e-2 + 1e-6) << i;
  std::vector<uint16_t> small(rows * (cols - 1)), before = out;
  args.b = mlart::TensorRef::contiguous(small.data(), mlart::DType::BF16, {rows, cols - 1});
  EXPECT_EQ(mlart::cpu::add(args).code(), mlart::StatusCode::InvalidArgument);
  EXPECT_EQ(out, before);
}
