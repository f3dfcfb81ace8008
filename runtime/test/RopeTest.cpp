//===- RopeTest.cpp - CPU rope against a float64 reference ----------------===//
#include "TestUtil.h"

#include "mlart/Device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

using namespace mlart;
using namespace mlart::test;

namespace {

class RopeGrid
    : public ::testing::TestWithParam<std::tuple<bool, DType, int64_t>> {};

TEST_P(RopeGrid, MatchesFloat64Reference) {
  const auto [neox, dtype, rope] = GetParam();
  const int64_t tokens = 13, heads = 3, maxPos = 8192;
  std::mt19937 rng(unsigned(rope) + (neox ? 1u : 0u));
  const HostTensor &table = cosSinTable(maxPos, rope, 10000.0);
  HostTensor x(dtype, {tokens, heads, rope});
  fillRandom(x, rng);
  const HostTensor original = x;
  std::vector<int64_t> pos(static_cast<size_t>(tokens));
  std::uniform_int_distribution<int64_t> posDist(0, maxPos - 1);
  for (auto &p : pos)
    p = posDist(rng);
  HostTensor positions = indexTensor(pos, DType::I32);
  RopeArgs args{x.ref, positions.ref, table.ref,
                neox ? RopeStyle::NeoX : RopeStyle::GptJ};
  ASSERT_TRUE(cpuKernelLibrary().rope(args, nullptr).ok());

  // One rounding to the output type is all the error the kernel may add.
  const double tol = dtype == DType::F32 ? 1e-5 : 1.0 / 128;
  std::vector<float> in(static_cast<size_t>(rope));
  std::vector<double> ref(static_cast<size_t>(rope));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t base = (t * heads + h) * rope;
      for (int64_t i = 0; i < rope; ++i)
        in[size_t(i)] = original.get(base + i);
      ropeReference(in.data(), ref.data(), rope,
                    reinterpret_cast<const float *>(table.bytes.data()) +
                        pos[size_t(t)] * rope,
                    neox);
      for (int64_t i = 0; i < rope; ++i)
        ASSERT_NEAR(x.get(base + i), ref[size_t(i)],
                    tol * (1.0 + std::fabs(ref[size_t(i)])))
            << "t " << t << " h " << h << " i " << i;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Styles, RopeGrid,
    ::testing::Combine(::testing::Bool(),
                       ::testing::Values(DType::F32, DType::BF16),
                       ::testing::Values(int64_t(64), int64_t(128))),
    [](const auto &info) {
      return std::string(std::get<0>(info.param) ? "neox" : "gptj") + "_" +
             dtypeName(std::get<1>(info.param)) + "_" +
             std::to_string(std::get<2>(info.param));
    });

TEST(Rope, PositionZeroIsIdentityAndStylesDiffer) {
  const HostTensor &table = cosSinTable(16, 8, 10000.0);
  HostTensor x(DType::F32, {2, 8});
  for (int64_t i = 0; i < 16; ++i)
    x.set(i, float(i + 1));
  HostTensor gptj = x, neox = x;
  HostTensor positions = indexTensor({0, 5});
  ASSERT_TRUE(cpuKernelLibrary()
                  .rope({gptj.ref, positions.ref, table.ref, RopeStyle::GptJ},
                        nullptr)
                  .ok());
  ASSERT_TRUE(cpuKernelLibrary()
                  .rope({neox.ref, positions.ref, table.ref, RopeStyle::NeoX},
                        nullptr)
                  .ok());
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(gptj.get(i), x.get(i));
    EXPECT_EQ(neox.get(i), x.get(i));
  }
  EXPECT_NE(gptj.get(9), neox.get(9));
}

TEST(Rope, OutOfRangePositionIsAnErrorAndWritesNothing) {
  const HostTensor &table = cosSinTable(16, 8, 10000.0);
  HostTensor x(DType::F32, {3, 2, 8});
  std::mt19937 rng(3);
  fillRandom(x, rng);
  const HostTensor before = x;
  for (int64_t bad : {int64_t(16), int64_t(-1)}) {
    HostTensor positions = indexTensor({1, 2, bad});
    Status s = cpuKernelLibrary().rope(
        {x.ref, positions.ref, table.ref, RopeStyle::NeoX}, nullptr);
    EXPECT_EQ(s.code(), StatusCode::OutOfRange);
    EXPECT_NE(s.message().find("positions[2]"), std::string::npos);
    EXPECT_EQ(x.bytes, before.bytes);
  }
}

TEST(Rope, RejectsMismatchedTables) {
  const HostTensor &table = cosSinTable(16, 8, 10000.0);
  HostTensor x(DType::F32, {2, 16});
  HostTensor positions = indexTensor({0, 1});
  EXPECT_EQ(cpuKernelLibrary()
                .rope({x.ref, positions.ref, table.ref, RopeStyle::NeoX},
                      nullptr)
                .code(),
            StatusCode::InvalidArgument);
  HostTensor ok(DType::F32, {2, 8});
  EXPECT_EQ(cpuKernelLibrary()
                .rope({ok.ref, positions.ref, table.ref, RopeStyle(7)},
                      nullptr)
                .code(),
            StatusCode::InvalidArgument);
  HostTensor x2(DType::F32, {3, 8});
  EXPECT_EQ(cpuKernelLibrary()
                .rope({x2.ref, positions.ref, table.ref, RopeStyle::NeoX},
                      nullptr)
                .code(),
            StatusCode::InvalidArgument);
}

} // namespace

// The table layout the rope kernels read: cos halves then sin halves, the
// first frequency is 1 and the last base^(-(rope-2)/rope).
TEST(RopeCosSinTable, CosThenSinPerPosition) {
  const int64_t maxPos = 300, rope = 8;
  const std::vector<float> t = ropeCosSinTable(maxPos, rope, 10000.0);
  ASSERT_EQ(t.size(), size_t(maxPos * rope));
  for (int64_t i = 0; i < rope / 2; ++i) {
    EXPECT_EQ(t[size_t(i)], 1.0f);
    EXPECT_EQ(t[size_t(rope / 2 + i)], 0.0f);
  }
  for (int64_t p = 0; p < maxPos; ++p) {
    EXPECT_FLOAT_EQ(t[size_t(p * rope)], float(std::cos(double(p))));
    EXPECT_FLOAT_EQ(t[size_t(p * rope + rope / 2)], float(std::sin(double(p))));
    const double last = double(p) * std::pow(10000.0, -6.0 / 8.0);
    EXPECT_FLOAT_EQ(t[size_t(p * rope + 3)], float(std::cos(last)));
    EXPECT_FLOAT_EQ(t[size_t(p * rope + 7)], float(std::sin(last)));
  }
}

namespace {
/// DeepSeek-V2-Lite's rope_scaling (YaRN by 40 from 4096 positions).
RopeTableParams v2LiteYarn() {
  RopeTableParams p;
  p.factor = 40.0;
  p.originalMaxPosition = 4096;
  p.mscale = 0.707;
  p.mscaleAllDim = 0.707;
  return p;
}

/// The frequency of pair i read back from the table's row 1 (angle = f_i).
double frequencyOf(const std::vector<float> &t, int64_t rope, int64_t i) {
  return std::atan2(double(t[size_t(rope + rope / 2 + i)]),
                    double(t[size_t(rope + i)]));
}
} // namespace

// Factor 1 is plain rope whatever the YaRN fields say.
TEST(RopeCosSinTable, FactorOneIsPlainRope) {
  RopeTableParams p = v2LiteYarn();
  p.factor = 1.0;
  p.theta = 5000.0;
  StatusOr<std::vector<float>> yarn = ropeCosSinTable(40, 64, p);
  ASSERT_TRUE(yarn.ok()) << yarn.status().toString();
  EXPECT_EQ(*yarn, ropeCosSinTable(40, 64, 5000.0));
}

// YaRN keeps the fast pairs' frequencies, divides the slow pairs' by the
// factor and ramps between DeepSeek's correction dims (for V2-Lite's
// parameters: floor(10.2) = 10 and ceil(22.9) = 23 of rope 64).
TEST(RopeCosSinTable, YarnBlendsFrequenciesBetweenCorrectionDims) {
  const int64_t rope = 64;
  StatusOr<std::vector<float>> t = ropeCosSinTable(2, rope, v2LiteYarn());
  ASSERT_TRUE(t.ok()) << t.status().toString();
  const double low = 10.0, high = 23.0;
  for (int64_t i = 0; i < rope / 2; ++i) {
    SCOPED_TRACE(i);
    const double plain = std::pow(10000.0, -2.0 * double(i) / double(rope));
    const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    const double expected = plain / 40.0 * ramp + plain * (1.0 - ramp);
    EXPECT_NEAR(frequencyOf(*t, rope, i), expected, 1e-6 * plain + 1e-9);
  }
  // mscale == mscale_all_dim: unit amplitude at position 0.
  EXPECT_EQ((*t)[0], 1.0f);
}

// The amplitude is mscale(factor, mscale) / mscale(factor, mscale_all_dim).
TEST(RopeCosSinTable, YarnAmplitudeIsTheMscaleRatio) {
  RopeTableParams p = v2LiteYarn();
  p.mscale = 1.0;
  p.mscaleAllDim = 0.0;
  StatusOr<std::vector<float>> t = ropeCosSinTable(3, 8, p);
  ASSERT_TRUE(t.ok()) << t.status().toString();
  const double amplitude = 0.1 * std::log(40.0) + 1.0;
  for (int64_t pos = 0; pos < 3; ++pos)
    for (int64_t i = 0; i < 4; ++i) {
      const double c = (*t)[size_t(pos * 8 + i)],
                   s = (*t)[size_t(pos * 8 + 4 + i)];
      EXPECT_NEAR(std::sqrt(c * c + s * s), amplitude, 1e-6);
    }
}

TEST(RopeCosSinTable, BadParametersAreErrors) {
  auto code = [](int64_t maxPos, int64_t rope, RopeTableParams p) {
    return ropeCosSinTable(maxPos, rope, p).status().code();
  };
  RopeTableParams ok = v2LiteYarn();
  EXPECT_EQ(code(4, 64, ok), StatusCode::Ok);
  EXPECT_EQ(code(4, 63, ok), StatusCode::InvalidArgument);
  EXPECT_EQ(code(4, 0, ok), StatusCode::InvalidArgument);
  EXPECT_EQ(code(-1, 64, ok), StatusCode::InvalidArgument);
  EXPECT_EQ(code(int64_t(1) << 40, 64, ok), StatusCode::InvalidArgument);
  RopeTableParams p = ok;
  p.theta = 1.0;
  EXPECT_EQ(code(4, 64, p), StatusCode::InvalidArgument);
  p = ok;
  p.factor = 0.5;
  EXPECT_EQ(code(4, 64, p), StatusCode::InvalidArgument);
  p = ok;
  p.originalMaxPosition = 0;
  EXPECT_EQ(code(4, 64, p), StatusCode::InvalidArgument);
  p = ok;
  p.betaFast = 0.5;
  EXPECT_EQ(code(4, 64, p), StatusCode::InvalidArgument);
  p = ok;
  p.mscale = std::nan("");
  EXPECT_EQ(code(4, 64, p), StatusCode::InvalidArgument);
  p = ok;
  p.mscaleAllDim = -1.0 / (0.1 * std::log(40.0));
  EXPECT_EQ(code(4, 64, p), StatusCode::InvalidArgument);
}
