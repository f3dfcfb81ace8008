//===- Status.cpp - Status names and formatting ---------------------------===//
#include "mlart/Status.h"

namespace mlart {

const char *statusCodeName(StatusCode code) {
  switch (code) {
  case StatusCode::Ok:
    return "OK";
  case StatusCode::InvalidArgument:
    return "INVALID_ARGUMENT";
  case StatusCode::OutOfRange:
    return "OUT_OF_RANGE";
  case StatusCode::FailedPrecondition:
    return "FAILED_PRECONDITION";
  case StatusCode::PermissionDenied:
    return "PERMISSION_DENIED";
  case StatusCode::ResourceExhausted:
    return "RESOURCE_EXHAUSTED";
  case StatusCode::Unimplemented:
    return "UNIMPLEMENTED";
  case StatusCode::DataLoss:
    return "DATA_LOSS";
  case StatusCode::Unavailable:
    return "UNAVAILABLE";
  case StatusCode::Internal:
    return "INTERNAL";
  }
  return "UNKNOWN";
}

std::string Status::toString() const {
  if (ok())
    return "OK";
  return std::string(statusCodeName(code_)) + ": " + message_;
}

} // namespace mlart
