//===- QuantizeConcatTest.cpp - CPU quantize and qConcat ------------------===//
#include "TestUtil.h"

#include "mlart/Kernels.h"

#include <gtest/gtest.h>

using namespace mlart;
using namespace mlart::test;

namespace {

TEST(Quantize, SaturatesAndMatchesScalarConversion) {
  std::mt19937 rng(1);
  HostTensor x(DType::BF16, {3, 4, 40});
  fillRandom(x, rng, 20.0f);
  x.set(0, 1e5f);
  x.set(1, -1e5f);
  HostTensor out(DType::F8E4M3FN, {3, 4, 40});
  HostTensor scale(DType::F32, {1});
  scale.set(0, 0.25f);
  ASSERT_TRUE(
      cpuKernelLibrary().quantize({x.ref, scale.ref, out.ref}, nullptr).ok());
  EXPECT_EQ(out.bytes[0], 0x7e);
  EXPECT_EQ(out.bytes[1], 0xfe);
  for (int64_t i = 0; i < x.numel(); ++i)
    ASSERT_EQ(out.bytes[size_t(i)], floatToFp8e4m3(x.get(i) / 0.25f));
}

TEST(Quantize, StridedInputAndScalarScale) {
  HostTensor x(DType::F32, {2, 8});
  for (int64_t i = 0; i < 16; ++i)
    x.set(i, float(i) - 7.5f);
  TensorRef view = x.ref; // columns 0..3 of each row
  view.sizes[1] = 4;
  HostTensor out(DType::F8E4M3FN, {2, 4});
  HostTensor scale(DType::F32, {});
  scale.set(0, 2.0f);
  ASSERT_TRUE(
      cpuKernelLibrary().quantize({view, scale.ref, out.ref}, nullptr).ok());
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 4; ++c)
      EXPECT_EQ(out.bytes[size_t(r * 4 + c)],
                floatToFp8e4m3(x.get(r * 8 + c) / 2.0f));
}

TEST(Quantize, RejectsBadScaleAndShape) {
  HostTensor x(DType::F32, {4}), out(DType::F8E4M3FN, {4}),
      wrong(DType::F8E4M3FN, {5}), scale(DType::F32, {1});
  scale.set(0, 0.0f);
  Status s = cpuKernelLibrary().quantize({x.ref, scale.ref, out.ref}, nullptr);
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  EXPECT_NE(s.message().find("scale"), std::string::npos);
  scale.set(0, 1.0f);
  EXPECT_EQ(
      cpuKernelLibrary().quantize({x.ref, scale.ref, wrong.ref}, nullptr).code(),
      StatusCode::InvalidArgument);
}

TEST(QConcat, ConcatenatesIntoAStridedOutput) {
  std::mt19937 rng(2);
  HostTensor lat(DType::BF16, {2, 3, 8}), pe(DType::BF16, {2, 3, 4});
  fillRandom(lat, rng);
  fillRandom(pe, rng);
  HostTensor out(DType::BF16, {2, 3, 12});
  ASSERT_TRUE(
      cpuKernelLibrary().qConcat({lat.ref, pe.ref, out.ref}, nullptr).ok());
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t i = 0; i < 12; ++i) {
        const float want = i < 8 ? lat.get((b * 3 + h) * 8 + i)
                                 : pe.get((b * 3 + h) * 4 + i - 8);
        ASSERT_EQ(out.get((b * 3 + h) * 12 + i), want);
      }
  // To f32 (converting) and with mismatched heads (error).
  HostTensor outF(DType::F32, {2, 3, 12});
  ASSERT_TRUE(
      cpuKernelLibrary().qConcat({lat.ref, pe.ref, outF.ref}, nullptr).ok());
  EXPECT_EQ(outF.get(13), lat.get(9));
  HostTensor bad(DType::BF16, {2, 2, 12});
  EXPECT_EQ(cpuKernelLibrary().qConcat({lat.ref, pe.ref, bad.ref}, nullptr).code(),
            StatusCode::InvalidArgument);
}

} // namespace
