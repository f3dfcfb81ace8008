//===- Status.h - Error status returned by every runtime entry point ------===//
//
// The runtime never throws across its API: every fallible call returns a
// Status that carries a code and a human-readable message.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_STATUS_H
#define MLART_STATUS_H

#include <string>
#include <utility>

namespace mlart {

/// Status codes; the numeric values are part of the C API (mlart_status_code).
enum class StatusCode : int {
  Ok = 0,
  InvalidArgument = 1,  ///< Bad shape, dtype, layout or option.
  OutOfRange = 2,       ///< An index (slot, block, position) is out of range.
  FailedPrecondition = 3, ///< Object not in a state that allows the call.
  PermissionDenied = 4, ///< Checked mode refused a write (null/cached block).
  ResourceExhausted = 5, ///< Out of blocks or memory.
  Unimplemented = 6,    ///< Combination not supported on this device.
  DataLoss = 7,         ///< Truncated or corrupted artifact.
  Unavailable = 8,      ///< Device or driver not present.
  Internal = 9,         ///< A bug in the runtime.
};

/// Returns a stable name such as "INVALID_ARGUMENT".
const char *statusCodeName(StatusCode code);

/// Result of a runtime call: Ok, or a code plus a message.
class [[nodiscard]] Status {
public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status success() { return Status(); }

  bool ok() const { return code_ == StatusCode::Ok; }
  StatusCode code() const { return code_; }
  const std::string &message() const { return message_; }
  /// "CODE: message", or "OK".
  std::string toString() const;

private:
  StatusCode code_ = StatusCode::Ok;
  std::string message_;
};

inline Status invalidArgument(std::string msg) {
  return Status(StatusCode::InvalidArgument, std::move(msg));
}
inline Status outOfRange(std::string msg) {
  return Status(StatusCode::OutOfRange, std::move(msg));
}
inline Status failedPrecondition(std::string msg) {
  return Status(StatusCode::FailedPrecondition, std::move(msg));
}
inline Status permissionDenied(std::string msg) {
  return Status(StatusCode::PermissionDenied, std::move(msg));
}
inline Status resourceExhausted(std::string msg) {
  return Status(StatusCode::ResourceExhausted, std::move(msg));
}
inline Status unimplemented(std::string msg) {
  return Status(StatusCode::Unimplemented, std::move(msg));
}
inline Status dataLoss(std::string msg) {
  return Status(StatusCode::DataLoss, std::move(msg));
}
inline Status unavailable(std::string msg) {
  return Status(StatusCode::Unavailable, std::move(msg));
}
inline Status internalError(std::string msg) {
  return Status(StatusCode::Internal, std::move(msg));
}

} // namespace mlart

/// Propagates a non-Ok status to the caller.
#define MLART_RETURN_IF_ERROR(expr)                                            \
  do {                                                                         \
    ::mlart::Status mlartStatus_ = (expr);                                     \
    if (!mlartStatus_.ok())                                                    \
      return mlartStatus_;                                                     \
  } while (0)

#endif // MLART_STATUS_H
