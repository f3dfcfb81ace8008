//===- StatusOrTest.cpp - StatusOr value/error behaviour ------------------===//
#include "mlart/StatusOr.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

using namespace mlart;

namespace {
StatusOr<int> half(int x) {
  if (x % 2)
    return invalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Status quarter(int x, int &out) {
  MLART_ASSIGN_OR_RETURN(int h, half(x));
  MLART_ASSIGN_OR_RETURN(out, half(h));
  return Status::success();
}
} // namespace

TEST(StatusOr, HoldsAValue) {
  StatusOr<int> v = half(8);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 4);
  EXPECT_EQ(v.value(), 4);
  EXPECT_TRUE(v.status().ok());
}

TEST(StatusOr, HoldsAnError) {
  StatusOr<int> v = half(3);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::InvalidArgument);
  EXPECT_EQ(v.status().message(), "odd: 3");
  EXPECT_EQ(v.valueOr(-1), -1);
}

TEST(StatusOr, OkStatusBecomesInternalError) {
  StatusOr<int> v{Status::success()};
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::Internal);
}

TEST(StatusOr, MoveOnlyValues) {
  StatusOr<std::unique_ptr<int>> v = std::make_unique<int>(7);
  ASSERT_TRUE(v.ok());
  std::unique_ptr<int> p = std::move(v).value();
  EXPECT_EQ(*p, 7);
}

TEST(StatusOr, AssignOrReturnPropagates) {
  int out = 0;
  EXPECT_TRUE(quarter(12, out).ok());
  EXPECT_EQ(out, 3);
  Status s = quarter(6, out); // 6 -> 3 -> odd
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  EXPECT_EQ(s.message(), "odd: 3");
}
