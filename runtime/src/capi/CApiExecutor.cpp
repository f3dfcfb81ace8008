//===- CApiExecutor.cpp - C API: artifacts and the executor ---------------===//
#include "CApiInternal.h"

#include "mlart/Executor.h"

struct mlart_artifact_s {
  mlart::Artifact artifact;
};

struct mlart_executor_s {
  mlart::Executor executor;
  /// The device it runs on, to check the stream of a run.
  mlart::Device *device;
};

using namespace mlart;
using mlart::capi::guarded;
using mlart::capi::toCacheRef;
using mlart::capi::toTensorRef;

namespace {
Status nullArg(const char *what) {
  return invalidArgument(std::string(what) + " must not be NULL");
}

/// What every executor call that takes a stream checks first (a non-NULL
/// executor, a stream of its device; `what` names the call in messages),
/// then `body(handle)`.
template <class Body>
mlart_status onExecutorStream(mlart_executor *executor, mlart_stream *stream,
                              const char *what, Body &&body) {
  return guarded([&]() -> Status {
    if (!executor)
      return nullArg("executor");
    StreamHandle h;
    MLART_RETURN_IF_ERROR(
        capi::toStreamHandle(*executor->device, stream, what, h));
    return body(h);
  });
}

Status storeArtifact(StatusOr<Artifact> loaded, mlart_artifact **out) {
  if (!loaded.ok())
    return loaded.status();
  *out = new mlart_artifact_s{std::move(loaded).value()};
  return Status::success();
}
} // namespace

extern "C" {

mlart_status mlart_artifact_load_file(const char *path,
                                      mlart_artifact **out_artifact) {
  return guarded([&]() -> Status {
    if (!path || !out_artifact)
      return nullArg("path and out_artifact");
    *out_artifact = nullptr;
    return storeArtifact(Artifact::loadFile(path), out_artifact);
  });
}

mlart_status mlart_artifact_load_memory(const void *data, size_t size,
                                        mlart_artifact **out_artifact) {
  return guarded([&]() -> Status {
    if (!out_artifact)
      return nullArg("out_artifact");
    *out_artifact = nullptr;
    return storeArtifact(Artifact::load(data, size), out_artifact);
  });
}

void mlart_artifact_free(mlart_artifact *artifact) { delete artifact; }

int64_t mlart_artifact_num_instructions(const mlart_artifact *artifact) {
  return artifact ? int64_t(artifact->artifact.instructions().size()) : 0;
}

mlart_status mlart_executor_create(mlart_device *device,
                                   const mlart_artifact *artifact,
                                   mlart_executor **out_executor) {
  return guarded([&]() -> Status {
    if (!device || !artifact || !out_executor)
      return nullArg("device, artifact and out_executor");
    *out_executor = nullptr;
    MLART_ASSIGN_OR_RETURN(
        Executor e, Executor::create(artifact->artifact, *device->device));
    *out_executor = new mlart_executor_s{std::move(e), device->device.get()};
    return Status::success();
  });
}

void mlart_executor_free(mlart_executor *executor) { delete executor; }

mlart_status mlart_executor_bind(mlart_executor *executor, const char *name,
                                 const mlart_tensor *tensor) {
  return guarded([&]() -> Status {
    if (!executor || !name || !tensor)
      return nullArg("executor, name and tensor");
    TensorRef t;
    MLART_RETURN_IF_ERROR(toTensorRef(*tensor, name, t));
    return executor->executor.bind(name, t);
  });
}

mlart_status mlart_executor_bind_cache(mlart_executor *executor,
                                       const char *name,
                                       mlart_kv_cache *cache) {
  return guarded([&]() -> Status {
    if (!executor || !name)
      return nullArg("executor and name");
    KVCacheRef ref;
    MLART_RETURN_IF_ERROR(toCacheRef(cache, ref));
    return executor->executor.bindCache(name, ref);
  });
}

mlart_status mlart_executor_run(mlart_executor *executor,
                                mlart_stream *stream) {
  return onExecutorStream(executor, stream, "mlart_executor_run",
                          [&](StreamHandle h) {
                            return executor->executor.run(h);
                          });
}

mlart_status mlart_executor_prepare(mlart_executor *executor,
                                    mlart_stream *stream) {
  return onExecutorStream(executor, stream, "mlart_executor_prepare",
                          [&](StreamHandle h) {
                            return executor->executor.prepare(h);
                          });
}

mlart_status mlart_executor_set_timing_callback(mlart_executor *executor,
                                                mlart_instruction_timing_fn fn,
                                                void *user_data) {
  return guarded([&]() -> Status {
    if (!executor)
      return nullArg("executor");
    if (!fn) {
      executor->executor.setTimingCallback(nullptr);
      return Status::success();
    }
    executor->executor.setTimingCallback(
        [fn, user_data](size_t index, const Instruction &inst, double seconds) {
          fn(user_data, int64_t(index), opcodeName(inst.opcode),
             inst.location.c_str(), seconds);
        });
    return Status::success();
  });
}

mlart_status mlart_executor_set_decode_schedule(mlart_executor *executor,
                                                int schedule) {
  static_assert(int(DecodeSchedule::Default) == MLART_DECODE_SCHEDULE_DEFAULT &&
                    int(DecodeSchedule::PerSequence) ==
                        MLART_DECODE_SCHEDULE_PER_SEQUENCE &&
                    int(DecodeSchedule::Balanced) ==
                        MLART_DECODE_SCHEDULE_BALANCED,
                "the C and C++ schedule values agree");
  return guarded([&]() -> Status {
    if (!executor)
      return nullArg("executor");
    if (!isDecodeSchedule(schedule))
      return invalidArgument("set_decode_schedule: unknown schedule " +
                             std::to_string(schedule));
    executor->executor.setDecodeSchedule(DecodeSchedule(schedule));
    return Status::success();
  });
}

mlart_status mlart_executor_set_prefill_context_bound(mlart_executor *executor,
                                                      int64_t bound) {
  return guarded([&]() -> Status {
    if (!executor)
      return nullArg("executor");
    return executor->executor.setPrefillContextBound(bound);
  });
}

mlart_status mlart_executor_set_max_streams(mlart_executor *executor,
                                            int streams) {
  return guarded([&]() -> Status {
    if (!executor)
      return nullArg("executor");
    if (streams < 1)
      return invalidArgument("set_max_streams: need at least 1 stream, got " +
                             std::to_string(streams));
    executor->executor.setMaxStreams(streams);
    return Status::success();
  });
}

mlart_status mlart_executor_capture_graph(mlart_executor *executor,
                                          mlart_stream *stream) {
  return onExecutorStream(executor, stream, "mlart_executor_capture_graph",
                          [&](StreamHandle h) {
                            return executor->executor.captureGraph(h);
                          });
}

mlart_status mlart_executor_run_graph(mlart_executor *executor,
                                      mlart_stream *stream) {
  return onExecutorStream(executor, stream, "mlart_executor_run_graph",
                          [&](StreamHandle h) {
                            return executor->executor.runGraph(h, true);
                          });
}

mlart_status mlart_executor_tune_graph(mlart_executor *executor,
                                       mlart_stream *stream, int replays,
                                       int *out_num_tuned) {
  return onExecutorStream(
      executor, stream, "mlart_executor_tune_graph",
      [&](StreamHandle h) -> Status {
        if (replays < 0)
          return invalidArgument("tune_graph: replays must be >= 0 (0: " +
                                 std::to_string(Executor::kDefaultTuneReplays) +
                                 "), got " + std::to_string(replays));
        MLART_ASSIGN_OR_RETURN(
            std::vector<Executor::GemmChoice> choices,
            executor->executor.tuneGraph(
                h, replays == 0 ? Executor::kDefaultTuneReplays : replays));
        if (out_num_tuned)
          *out_num_tuned = int(choices.size());
        return Status::success();
      });
}

} // extern "C"
