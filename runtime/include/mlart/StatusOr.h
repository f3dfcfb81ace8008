//===- StatusOr.h - A value or the Status that explains its absence -------===//
//
// Fallible factories (allocate, create) return StatusOr<T> so that callers
// cannot use a half-built object; modelled on absl::StatusOr without the
// exceptions.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_STATUSOR_H
#define MLART_STATUSOR_H

#include "mlart/Status.h"

#include <cassert>
#include <optional>
#include <type_traits>
#include <utility>

namespace mlart {

/// Holds either a T or a non-Ok Status.
template <typename T> class [[nodiscard]] StatusOr {
  static_assert(!std::is_same_v<std::decay_t<T>, Status>,
                "StatusOr<Status> is meaningless");

public:
  /// An error. Passing an Ok status is a bug; it becomes an Internal error so
  /// that `ok()` never claims a value that is not there.
  StatusOr(Status status) : status_(std::move(status)) {
    if (status_.ok())
      status_ = internalError("StatusOr constructed from an Ok status");
  }
  /// A value.
  StatusOr(T value) : value_(std::move(value)) {}
  /// A value of a convertible type (e.g. a derived unique_ptr).
  template <typename U,
            typename = std::enable_if_t<std::is_constructible_v<T, U &&> &&
                                        !std::is_same_v<std::decay_t<U>, T> &&
                                        !std::is_same_v<std::decay_t<U>, Status>>>
  StatusOr(U &&value) : value_(T(std::forward<U>(value))) {}

  StatusOr(StatusOr &&) = default;
  StatusOr &operator=(StatusOr &&) = default;
  StatusOr(const StatusOr &) = default;
  StatusOr &operator=(const StatusOr &) = default;

  bool ok() const { return status_.ok(); }
  /// Ok when a value is present.
  const Status &status() const { return status_; }

  /// The value; only valid when ok().
  T &value() & {
    assert(ok() && "StatusOr::value() on an error");
    return *value_;
  }
  const T &value() const & {
    assert(ok() && "StatusOr::value() on an error");
    return *value_;
  }
  T &&value() && {
    assert(ok() && "StatusOr::value() on an error");
    return std::move(*value_);
  }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T &&operator*() && { return std::move(*this).value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }

  /// The value, or `fallback` on error.
  template <typename U> T valueOr(U &&fallback) const & {
    return ok() ? *value_ : T(std::forward<U>(fallback));
  }

private:
  Status status_;
  std::optional<T> value_;
};

} // namespace mlart

#define MLART_STATUSOR_CONCAT_INNER_(a, b) a##b
#define MLART_STATUSOR_CONCAT_(a, b) MLART_STATUSOR_CONCAT_INNER_(a, b)

/// `MLART_ASSIGN_OR_RETURN(auto x, makeX());` declares x from the value or
/// returns the error Status from the enclosing function.
#define MLART_ASSIGN_OR_RETURN(lhs, expr)                                      \
  MLART_ASSIGN_OR_RETURN_IMPL_(                                                \
      MLART_STATUSOR_CONCAT_(mlartStatusOr_, __LINE__), lhs, expr)
#define MLART_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr)                           \
  auto tmp = (expr);                                                           \
  if (!tmp.ok())                                                               \
    return tmp.status();                                                       \
  lhs = std::move(tmp).value()

#endif // MLART_STATUSOR_H
