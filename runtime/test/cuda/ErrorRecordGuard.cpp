//===- ErrorRecordGuard.cpp - GPU tests leave the error record clean ------===//
//
// Kernels that check step data on the device (bad slot, bad position,
// checked-mode refusals) record into one per-device error record that the
// next synchronous check or checkErrors() reports and clears. A test that
// provokes an asynchronous error and never reads it back makes the next
// test's runGraph(wait) fail for no reason of its own. After every test this
// listener reads (and so clears) the record and names the test that left
// one ("[ERROR RECORD]" lines), so the next test starts clean and the
// culprit can be fixed.
//
//===----------------------------------------------------------------------===//
#include "CudaTestUtil.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace mlart::cudatest {
namespace {

class ErrorRecordGuard : public ::testing::EmptyTestEventListener {
  void OnTestEnd(const ::testing::TestInfo &info) override {
    CudaDevice *dev = gpu();
    if (!dev || info.result()->Skipped())
      return;
    Status s = dev->checkErrors(nullptr);
    if (s.ok())
      return;
    ++leftovers_;
    std::printf("[ERROR RECORD] %s.%s left an unread device error: %s\n",
                info.test_suite_name(), info.name(), s.toString().c_str());
  }
  void OnTestProgramEnd(const ::testing::UnitTest &) override {
    if (leftovers_)
      std::printf("[ERROR RECORD] %d test(s) left an unread device error\n",
                  leftovers_);
  }
  int leftovers_ = 0;
};

/// Registered before main runs (gtest_main), like a test.
const bool kRegistered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new ErrorRecordGuard);
  return true;
}();

} // namespace
} // namespace mlart::cudatest
