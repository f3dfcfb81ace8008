//===- CApiStreams.cpp - C API: streams and the stream checks of calls ----===//
#include "CApiInternal.h"

using namespace mlart;
using mlart::capi::guarded;

namespace mlart::capi {

Status toStreamHandle(const Device &device, const mlart_stream *stream,
                      const char *what, StreamHandle &out) {
  out = nullptr;
  if (!stream)
    return Status::success();
  // A CUDA stream of another device (or a CPU "stream" handed to a GPU
  // call) would silently run the work in the wrong place.
  if (!stream->device || stream->device->device.get() != &device)
    return invalidArgument(std::string(what) +
                           ": the stream belongs to another device");
  out = stream->stream.handle();
  return Status::success();
}

} // namespace mlart::capi

extern "C" {

mlart_status mlart_stream_create(mlart_device *device,
                                 mlart_stream **out_stream) {
  return guarded([&]() -> Status {
    if (!device || !out_stream)
      return invalidArgument("device and out_stream must not be NULL");
    *out_stream = nullptr;
    MLART_ASSIGN_OR_RETURN(Stream s, device->device->createStream());
    *out_stream = new mlart_stream_s{std::move(s), device};
    return Status::success();
  });
}

void mlart_stream_destroy(mlart_stream *stream) { delete stream; }

mlart_status mlart_stream_synchronize(mlart_stream *stream) {
  return guarded([&]() -> Status {
    if (!stream || !stream->device)
      return invalidArgument("stream must not be NULL");
    return stream->device->device->synchronize(stream->stream.handle());
  });
}

void *mlart_stream_native_handle(const mlart_stream *stream) {
  return stream ? stream->stream.handle() : nullptr;
}

} // extern "C"
