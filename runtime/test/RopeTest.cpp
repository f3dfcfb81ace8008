//===- RopeTest.cpp - CPU rope against a float64 reference ----------------===//
#include "TestUtil.h"

#include "mlart/Device.h"

#include <gtest/gtest.h>

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
