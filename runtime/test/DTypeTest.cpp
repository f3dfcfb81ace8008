//===- DTypeTest.cpp - Scalar conversion tests ----------------------------===//
#include "mlart/DType.h"
#include "mlart/KVCacheLayout.h"

#include <gtest/gtest.h>

#include <cmath>

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
