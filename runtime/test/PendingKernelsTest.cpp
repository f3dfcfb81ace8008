//===- PendingKernelsTest.cpp - Placeholders report Unimplemented ---------===//
//
// Deleted together with src/cpu/PendingKernels.cpp when the kernel branch
// merges.
//
//===----------------------------------------------------------------------===//
#include "mlart/Kernels.h"

#include <gtest/gtest.h>

using namespace mlart;

namespace {

TEST(KernelLibrary, PendingKernelsSayUnimplemented) {
  const KernelLibrary &k = cpuKernelLibrary();
  EXPECT_STREQ(k.name(), "cpu");
  Status s = k.decodeAttention({}, nullptr);
  EXPECT_EQ(s.code(), StatusCode::Unimplemented);
  EXPECT_NE(s.message().find("not merged yet"), std::string::npos);
  EXPECT_EQ(k.prefillAttention({}, nullptr).code(), StatusCode::Unimplemented);
  EXPECT_EQ(k.qAbsorb({}, nullptr).code(), StatusCode::Unimplemented);
  EXPECT_EQ(k.vUp({}, nullptr).code(), StatusCode::Unimplemented);
  EXPECT_EQ(k.rmsNorm({}, nullptr).code(), StatusCode::Unimplemented);
  EXPECT_EQ(k.linear({}, nullptr).code(), StatusCode::Unimplemented);
}

} // namespace
