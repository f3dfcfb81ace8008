//===- TensorRefUtilTest.cpp - Byte ranges and aliasing of views ----------===//
#include "TensorRefUtil.h"

#include <gtest/gtest.h>

#include <tuple>

using namespace mlart;

namespace {

TensorRef view(void *data, DType t, std::initializer_list<int64_t> sizes,
               std::initializer_list<int64_t> strides) {
  TensorRef v = TensorRef::contiguous(data, t, sizes);
  int d = 0;
  for (int64_t s : strides)
    v.strides[d++] = s;
  return v;
}

TEST(TensorRefUtil, ByteRangeCoversTheLastElement) {
  alignas(8) char buf[1024];
  const uintptr_t base = reinterpret_cast<uintptr_t>(buf);
  // [3, 4] bf16 with a row stride of 10: rows at 0, 20, 40 bytes.
  auto [lo, hi] = byteRange(view(buf, DType::BF16, {3, 4}, {10, 1}));
  EXPECT_EQ(lo, base);
  EXPECT_EQ(hi, base + (2 * 10 + 3 + 1) * 2);
  // A negative stride reaches below data.
  std::tie(lo, hi) = byteRange(view(buf + 64, DType::F32, {3}, {-2}));
  EXPECT_EQ(lo, base + 64 - 16);
  EXPECT_EQ(hi, base + 64 + 4);
  // Empty: no bytes at all.
  std::tie(lo, hi) = byteRange(view(buf, DType::F32, {0, 4}, {4, 1}));
  EXPECT_EQ(lo, hi);
}

TEST(TensorRefUtil, SameViewIgnoresStridesOfUnitDimensions) {
  alignas(8) char buf[256];
  const TensorRef a = view(buf, DType::F32, {1, 8}, {8, 1});
  EXPECT_TRUE(sameView(a, view(buf, DType::F32, {1, 8}, {99, 1})));
  EXPECT_FALSE(sameView(a, view(buf, DType::F16, {1, 8}, {8, 1})));
  EXPECT_FALSE(sameView(a, view(buf + 4, DType::F32, {1, 8}, {8, 1})));
  EXPECT_FALSE(sameView(a, view(buf, DType::F32, {2, 4}, {4, 1})));
  EXPECT_FALSE(sameView(view(buf, DType::F32, {2, 4}, {4, 1}),
                        view(buf, DType::F32, {2, 4}, {8, 1})));
}

TEST(TensorRefUtil, PartialOverlapExcludesTheSameView) {
  alignas(8) char buf[256];
  const TensorRef a = view(buf, DType::F32, {2, 4}, {4, 1});
  EXPECT_FALSE(partiallyOverlaps(a, a));
  EXPECT_TRUE(partiallyOverlaps(a, view(buf + 4, DType::F32, {2, 4}, {4, 1})));
  EXPECT_FALSE(partiallyOverlaps(a, view(buf + 32, DType::F32, {2, 4}, {4, 1})));
  // Touching ends do not overlap; one byte more does.
  EXPECT_FALSE(partiallyOverlaps(a, view(buf + 32, DType::F32, {1}, {1})));
  EXPECT_TRUE(partiallyOverlaps(a, view(buf + 28, DType::F32, {1}, {1})));
  // An empty view overlaps nothing.
  EXPECT_FALSE(partiallyOverlaps(a, view(buf, DType::F32, {0, 4}, {4, 1})));
}

} // namespace
