//===- DTypeTest.cpp - Scalar conversion tests ----------------------------===//
#include "mlart/DType.h"
#include "mlart/KVCacheLayout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace mlart;

TEST(DType, Bf16RoundTripsEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    float f = bf16ToFloat(uint16_t(h));
    if (std::isnan(f))
      continue;
    EXPECT_EQ(floatToBf16(f), uint16_t(h)) << h;
  }
}

TEST(DType, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is exactly half-way between bf16 1.0 and 1.0078125: ties to even.
  EXPECT_EQ(floatToBf16(1.0f + std::ldexp(1.0f, -8)), floatToBf16(1.0f));
  EXPECT_EQ(bf16ToFloat(floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8))),
            1.015625f);
}

TEST(DType, F16RoundTripsEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    float f = f16ToFloat(uint16_t(h));
    if (std::isnan(f))
      continue;
    EXPECT_EQ(floatToF16(f), uint16_t(h)) << h;
  }
}

TEST(DType, Fp8RoundTripsAndSaturates) {
  for (uint32_t v = 0; v < 256; ++v) {
    float f = fp8e4m3ToFloat(uint8_t(v));
    if (std::isnan(f))
      continue;
    EXPECT_EQ(floatToFp8e4m3(f), uint8_t(v)) << v;
  }
  EXPECT_EQ(fp8e4m3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(floatToFp8e4m3(1e6f), 0x7e);
  EXPECT_EQ(floatToFp8e4m3(-1e6f), 0xfe);
  EXPECT_EQ(fp8e4m3ToFloat(0x01), std::ldexp(1.0f, -9));
}

namespace {

/// The value of fp8 code `v` from the format's definition, independently of
/// the runtime's codec: sign, `expBits` exponent bits of bias `bias`, the
/// rest mantissa; subnormals at exponent 0.
double referenceFp8Value(uint32_t v, int expBits, int bias) {
  const int mantBits = 7 - expBits;
  const int exp = int(v >> mantBits) & ((1 << expBits) - 1);
  const int mant = int(v) & ((1 << mantBits) - 1);
  const double frac = double(mant) / double(1 << mantBits);
  const double mag = exp == 0 ? std::ldexp(frac, 1 - bias)
                              : std::ldexp(1.0 + frac, exp - bias);
  return (v & 0x80u) ? -mag : mag;
}

/// The code a round-to-nearest-even, saturating conversion must give for
/// `x`: the nearest finite code by value, ties to the even mantissa.
uint8_t referenceFp8Code(double x, int expBits, int bias, uint32_t maxCode) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::fabs(x) >= referenceFp8Value(maxCode, expBits, bias))
    return uint8_t(sign | maxCode);
  uint8_t best = 0;
  double bestDistance = INFINITY;
  for (uint32_t v = 0; v < 256; ++v) {
    if ((v & 0x7fu) > maxCode)
      continue;
    const double d = std::fabs(referenceFp8Value(v, expBits, bias) - x);
    if (d < bestDistance ||
        (d == bestDistance && (v & 1u) == 0 && (best & 1u) == 1)) {
      best = uint8_t(v);
      bestDistance = d;
    }
  }
  // Zero keeps the input's sign.
  if ((best & 0x7fu) == 0)
    best = sign;
  return best;
}

} // namespace

TEST(DType, Fp8DecodesEveryCodeAsDefined) {
  for (uint32_t v = 0; v < 256; ++v) {
    if ((v & 0x7fu) != 0x7fu) {
      EXPECT_EQ(double(fp8e4m3ToFloat(uint8_t(v))), referenceFp8Value(v, 4, 7))
          << v;
    }
    if ((v & 0x7cu) != 0x7cu) {
      EXPECT_EQ(double(fp8e5m2ToFloat(uint8_t(v))), referenceFp8Value(v, 5, 15))
          << v;
    }
  }
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(0x7f)));
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(0xff)));
  EXPECT_EQ(fp8e5m2ToFloat(0x7c), INFINITY);
  EXPECT_EQ(fp8e5m2ToFloat(0xfc), -INFINITY);
  EXPECT_TRUE(std::isnan(fp8e5m2ToFloat(0x7d)));
  EXPECT_EQ(fp8e5m2ToFloat(0x7b), kFp8E5M2Max);
}

TEST(DType, Fp8EncodesToTheNearestEvenCodeAndSaturates) {
  // Every code, every midpoint between neighbours (the ties), points a
  // quarter step either side, and random magnitudes across both ranges.
  std::vector<float> xs;
  for (uint32_t v = 0; v < 0x7b; ++v)
    for (int expBits : {4, 5}) {
      const int bias = expBits == 4 ? 7 : 15;
      const double lo = referenceFp8Value(v, expBits, bias);
      const double hi = referenceFp8Value(v + 1, expBits, bias);
      xs.push_back(float(lo));
      for (double t : {0.25, 0.5, 0.75})
        xs.push_back(float(lo + t * (hi - lo)));
    }
  uint32_t state = 12345;
  for (int i = 0; i < 20000; ++i) {
    state = state * 1664525u + 1013904223u;
    xs.push_back(
        std::ldexp(float(state >> 8) / float(1 << 24), int(state % 40) - 24));
  }
  for (float big : {448.0f, 460.0f, 1e6f, 57344.0f, 61440.0f, 1e30f, INFINITY})
    xs.push_back(big);
  for (float x : std::vector<float>(xs))
    xs.push_back(-x);
  for (float x : xs) {
    EXPECT_EQ(floatToFp8e4m3(x), referenceFp8Code(x, 4, 7, 0x7e)) << x;
    EXPECT_EQ(floatToFp8e5m2(x), referenceFp8Code(x, 5, 15, 0x7b)) << x;
  }
  EXPECT_EQ(floatToFp8e4m3(NAN), 0x7f);
  EXPECT_EQ(floatToFp8e5m2(NAN), 0x7f);
}

TEST(KVCacheLayout, RowBytesMatchTheDocumentedLayouts) {
  KVCacheDesc d;
  d.numBlocks = 4;
  d.blockSize = 16;
  EXPECT_EQ(d.rowBytes(), 1152);
  d.dtype = DType::F8E4M3FN;
  d.layout = CacheLayout::Fp8DsMla;
  EXPECT_EQ(d.rowBytes(), 656);
  EXPECT_TRUE(d.validate().ok());
  d.latentRank = 500;
  EXPECT_EQ(d.validate().code(), StatusCode::InvalidArgument);
}
