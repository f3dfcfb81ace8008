//===- CuptiTrace.cpp - CUPTI activity records for mla-bench --------------===//
#include "CuptiTrace.h"

#include <cupti.h>

#include <cstdlib>
#include <iterator>
#include <mutex>
#include <string>

namespace mlart::bench {

namespace {

// CUPTI's buffer callbacks are plain functions, possibly called on a CUPTI
// thread: what they collect lives here, under a mutex.
std::mutex gMutex;
std::vector<TraceActivity> gActivities;
size_t gDropped = 0;
std::string gCallbackError;

constexpr size_t kBufferBytes = size_t(8) << 20;
constexpr size_t kAlign = 8; // activity records need 8-byte alignment

std::string resultText(CUptiResult r) {
  const char *text = nullptr;
  if (cuptiGetResultString(r, &text) != CUPTI_SUCCESS || !text)
    return "CUPTI error " + std::to_string(int(r));
  return text;
}

Status check(CUptiResult r, const char *what) {
  if (r == CUPTI_SUCCESS)
    return Status::success();
  return internalError(std::string(what) + ": " + resultText(r));
}

void CUPTIAPI bufferRequested(uint8_t **buffer, size_t *size,
                              size_t *maxNumRecords) {
  *buffer = static_cast<uint8_t *>(std::aligned_alloc(kAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *maxNumRecords = 0; // as many as fit
  if (!*buffer) {
    std::lock_guard<std::mutex> lock(gMutex);
    if (gCallbackError.empty())
      gCallbackError = "out of host memory for a CUPTI activity buffer";
  }
}

/// Copies what the timeline needs out of one record (CUPTI reuses names'
/// storage only while the buffer lives).
void collect(const CUpti_Activity *record, std::vector<TraceActivity> &out) {
  TraceActivity a;
  switch (record->kind) {
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
  case CUPTI_ACTIVITY_KIND_KERNEL: {
    const auto *k = reinterpret_cast<const CUpti_ActivityKernel10 *>(record);
    a.kind = TraceActivity::Kind::Kernel;
    a.name = k->name ? k->name : "?";
    a.stream = k->streamId;
    a.start = k->start;
    a.end = k->end;
    break;
  }
  case CUPTI_ACTIVITY_KIND_MEMCPY: {
    const auto *m = reinterpret_cast<const CUpti_ActivityMemcpy6 *>(record);
    a.kind = TraceActivity::Kind::Memcpy;
    a.name = "memcpy";
    a.stream = m->streamId;
    a.start = m->start;
    a.end = m->end;
    a.bytes = m->bytes;
    break;
  }
  case CUPTI_ACTIVITY_KIND_MEMSET: {
    const auto *m = reinterpret_cast<const CUpti_ActivityMemset4 *>(record);
    a.kind = TraceActivity::Kind::Memset;
    a.name = "memset";
    a.stream = m->streamId;
    a.start = m->start;
    a.end = m->end;
    a.bytes = m->bytes;
    break;
  }
  default:
    return; // kinds this trace did not ask for
  }
  out.push_back(std::move(a));
}

void CUPTIAPI bufferCompleted(CUcontext context, uint32_t streamId,
                              uint8_t *buffer, size_t /*size*/,
                              size_t validSize) {
  std::vector<TraceActivity> got;
  std::string error;
  CUpti_Activity *record = nullptr;
  for (;;) {
    const CUptiResult r = cuptiActivityGetNextRecord(buffer, validSize, &record);
    if (r == CUPTI_ERROR_MAX_LIMIT_REACHED)
      break; // the end of the buffer
    if (r != CUPTI_SUCCESS) {
      error = "cuptiActivityGetNextRecord: " + resultText(r);
      break;
    }
    collect(record, got);
  }
  size_t dropped = 0;
  const CUptiResult r =
      cuptiActivityGetNumDroppedRecords(context, streamId, &dropped);
  if (r != CUPTI_SUCCESS && error.empty())
    error = "cuptiActivityGetNumDroppedRecords: " + resultText(r);
  std::free(buffer);
  std::lock_guard<std::mutex> lock(gMutex);
  gActivities.insert(gActivities.end(), got.begin(), got.end());
  gDropped += dropped;
  if (!error.empty() && gCallbackError.empty())
    gCallbackError = error;
}

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};

} // namespace

Status CuptiTrace::start() {
  uint32_t version = 0;
  MLART_RETURN_IF_ERROR(check(cuptiGetVersion(&version), "cuptiGetVersion"));
  // The records are read through this header's structs
  // (CUpti_ActivityKernel10, ...): another library version may lay them out
  // differently.
  if (version != CUPTI_API_VERSION)
    return unavailable("the CUPTI library is version " +
                       std::to_string(version) + ", mla-bench was built " +
                       "against " + std::to_string(CUPTI_API_VERSION) +
                       " (put the matching libcupti next to mla-bench)");
  {
    std::lock_guard<std::mutex> lock(gMutex);
    gActivities.clear();
    gDropped = 0;
    gCallbackError.clear();
  }
  // Once per process: later traces reuse the registration.
  static bool registered = false;
  if (!registered) {
    MLART_RETURN_IF_ERROR(
        check(cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted),
              "cuptiActivityRegisterCallbacks"));
    registered = true;
  }
  for (size_t i = 0; i < std::size(kKinds); ++i) {
    Status s = check(cuptiActivityEnable(kKinds[i]), "cuptiActivityEnable");
    if (!s.ok()) {
      // Leave nothing half on; a failure to undo is reported as well.
      std::string message = s.message();
      for (size_t j = 0; j < i; ++j) {
        const CUptiResult r = cuptiActivityDisable(kKinds[j]);
        if (r != CUPTI_SUCCESS)
          message += "; then cuptiActivityDisable: " + resultText(r);
      }
      return Status(s.code(), message);
    }
  }
  return Status::success();
}

StatusOr<uint64_t> CuptiTrace::now() {
  uint64_t t = 0;
  MLART_RETURN_IF_ERROR(check(cuptiGetTimestamp(&t), "cuptiGetTimestamp"));
  return t;
}

StatusOr<std::vector<TraceActivity>> CuptiTrace::stop() {
  // Forced: also the buffers that are not full yet (the caller synchronized
  // the device, so their records are complete).
  Status flushed = check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED),
                         "cuptiActivityFlushAll");
  Status disabled = Status::success();
  for (CUpti_ActivityKind kind : kKinds) {
    Status s = check(cuptiActivityDisable(kind), "cuptiActivityDisable");
    if (!s.ok() && disabled.ok())
      disabled = s;
  }
  MLART_RETURN_IF_ERROR(flushed);
  MLART_RETURN_IF_ERROR(disabled);
  std::lock_guard<std::mutex> lock(gMutex);
  if (!gCallbackError.empty())
    return internalError(gCallbackError);
  if (gDropped)
    return resourceExhausted("CUPTI dropped " + std::to_string(gDropped) +
                             " activity records");
  return std::move(gActivities);
}

} // namespace mlart::bench
