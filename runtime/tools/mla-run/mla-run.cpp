//===- mla-run.cpp - Run a compiled step artifact, check it, time it ------===//
//
// Loads an MLAA artifact, makes a serving-like situation for it (requests
// with earlier context in a paged cache managed by the block manager, random
// weights and activations from a seed), runs one or more steps and prints a
// per-op time table. With --reference it runs a second artifact (e.g. the
// same model compiled without the optimizing passes) on identical inputs and
// copies of the caches and reports the largest relative output error and any
// cache difference; with --naive it checks every step, including the decode
// steps after a prefill (--decode-artifact), against a float64 reference:
// its outputs and the rows it wrote into the caches. A mismatch makes the
// exit code non-zero.
//
// The runtime alone: no MLIR here.
//
//===----------------------------------------------------------------------===//
#include "mlart/Artifact.h"
#include "mlart/BlockManager.h"
#include "mlart/Device.h"
#include "mlart/Executor.h"
#include "mlart/KVCache.h"

#include "CacheCheck.h"
#include "NaiveCheck.h"
#include "NaiveReference.h"
#include "NaiveReport.h"
#include "NpyIO.h"
#include "RunOptions.h"
#include "StepHarness.h"

#include "common/JsonWriter.h"
#include "common/ToolMain.h"

#ifdef MLA_RUN_HAVE_CUDA
#include "mlart/CudaDevice.h"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace mlart;

namespace {

using Options = mlarun::RunOptions;

using mlarun::DeviceTensor;
using mlarun::Harness;
using mlarun::HarnessOptions;

HarnessOptions harnessOptions(const Options &o) {
  HarnessOptions h;
  h.seed = uint64_t(o.seed);
  h.steps = o.steps;
  h.context = o.context;
  for (const auto &[name, path] : o.inputs)
    h.inputs.push_back({name, path, "--input", ""});
  h.sharedPrefix = o.sharedPrefix;
  h.dummySlots = o.dummySlots;
  h.separateWeights = o.separateWeights;
  return h;
}

/// The decode steps after a prefill read --decode-input's files, and every
/// --input the decode step also declares and --decode-input does not name
/// (an input keeps its file's data at every step; a prefill-shaped file
/// then fails the shape check with a hint instead of being ignored).
HarnessOptions decodeHarnessOptions(const Options &o, const Artifact &decode) {
  HarnessOptions h = harnessOptions(o);
  h.inputs.clear();
  for (const auto &[name, path] : o.decodeInputs)
    h.inputs.push_back({name, path, "--decode-input", ""});
  for (const auto &input : o.inputs) {
    const std::string &name = input.first, &path = input.second;
    const bool overridden =
        std::any_of(o.decodeInputs.begin(), o.decodeInputs.end(),
                    [&](const auto &d) { return d.first == name; });
    const int index = decode.findBuffer(name);
    if (overridden || index < 0 ||
        decode.buffers()[size_t(index)].role != BufferRole::Input)
      continue; // weights come from the prefill step
    h.inputs.push_back({name, path, "--input",
                        " (the decode steps read it too; give them their "
                        "own file with --decode-input " +
                            name + "=FILE.npy)"});
  }
  return h;
}

int fail(const std::string &what, const Status &status) {
  std::fprintf(stderr, "mla-run: %s: %s\n", what.c_str(),
               status.toString().c_str());
  return 1;
}

/// Reads an output to host floats.
StatusOr<std::vector<float>> readOutput(Device &device, const DeviceTensor &t) {
  std::vector<uint8_t> bytes(t.bytes());
  MLART_RETURN_IF_ERROR(device.copyDeviceToHost(bytes.data(), t.data,
                                                bytes.size()));
  std::vector<float> values(size_t(t.decl.numElements()));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = loadAsFloat(bytes.data(), t.decl.dtype, i);
  return values;
}

/// The scalars of the step, read back from the artifact's instructions.
void stepScalars(const Artifact &artifact, mlarun::NaiveStep &step) {
  bool scale = false, eps = false, style = false;
  for (const Instruction &inst : artifact.instructions()) {
    if (!scale && (inst.opcode == Opcode::DecodeAttention ||
                   inst.opcode == Opcode::PrefillAttention)) {
      step.softmaxScale = inst.floatAttr;
      scale = true;
    } else if (!eps && inst.opcode == Opcode::RmsNorm) {
      step.epsilon = inst.floatAttr;
      eps = true;
    } else if (!style && (inst.opcode == Opcode::Rope ||
                          inst.opcode == Opcode::RopeCacheUpdate)) {
      step.style = RopeStyle(inst.intAttr);
      style = true;
    }
  }
}

/// Every output of the step `harness` ran, as host floats.
StatusOr<std::map<std::string, std::vector<float>>> readOutputs(Device &device,
                                                               Harness &harness) {
  std::map<std::string, std::vector<float>> outputs;
  for (auto &[name, t] : harness.tensors())
    if (t.decl.role == BufferRole::Output) {
      StatusOr<std::vector<float>> v = readOutput(device, t);
      if (!v.ok())
        return Status(v.status().code(),
                      "reading " + name + ": " + v.status().message());
      outputs[name] = std::move(v).value();
    }
  return outputs;
}

/// What the naive reference needs for the step `harness` has prepared: its
/// host data and a copy of the caches as they are now, before the step runs
/// (the reference must read what the compiled step read).
StatusOr<mlarun::NaiveStep> snapshotForNaive(Harness &harness,
                                             const Options &options) {
  mlarun::NaiveStep step;
  for (auto &[name, t] : harness.tensors()) {
    mlarun::HostTensorView view;
    view.dtype = t.decl.dtype;
    view.sizes.assign(t.decl.sizes, t.decl.sizes + t.decl.rank);
    view.data = t.host.data();
    step.tensors[name] = view;
  }
  for (KVCache &cache : harness.caches()) {
    mlarun::CacheSnapshot snap;
    snap.desc = cache.desc();
    snap.scale = cache.scale();
    snap.bytes.resize(cache.sizeBytes());
    MLART_RETURN_IF_ERROR(
        cache.readBytes(0, snap.bytes.data(), snap.bytes.size()));
    step.caches.push_back(std::move(snap));
  }
  stepScalars(harness.artifact(), step);
  if (options.naiveSoftmaxScale > 0)
    step.softmaxScale = options.naiveSoftmaxScale;
  return step;
}

/// Checks the step `harness` just ran against the reference on `step` (its
/// inputs and the caches before it) and adds it to `report`: its outputs,
/// unless it is a dummy step, and what it wrote into the caches.
Status checkStep(Device &device, Harness &harness,
                 const mlarun::NaiveStep &step, int index, double tolerance,
                 mlarun::NaiveReport &report) {
  MLART_ASSIGN_OR_RETURN(bool dummy, mlarun::isDummyStep(step));
  std::optional<mlarun::NaiveCheck> check;
  std::vector<mlarun::NaiveCacheRows> rows;
  if (!dummy) {
    MLART_ASSIGN_OR_RETURN(auto outputs, readOutputs(device, harness));
    MLART_ASSIGN_OR_RETURN(check,
                           mlarun::checkAgainstNaive(step, outputs, &rows));
  }
  std::vector<std::vector<uint8_t>> after;
  for (KVCache &cache : harness.caches()) {
    after.emplace_back(cache.sizeBytes());
    MLART_RETURN_IF_ERROR(
        cache.readBytes(0, after.back().data(), after.back().size()));
  }
  MLART_ASSIGN_OR_RETURN(
      mlarun::CacheCheck cache,
      mlarun::checkCacheWrites(step, rows, after, tolerance));
  report.add(index, std::move(check), cache);
  return Status::success();
}

/// --dump-output: the step's hidden_states_out as float32 .npy.
Status dumpOutput(Device &device, Harness &harness, const std::string &path) {
  auto it = harness.tensors().find("hidden_states_out");
  if (it == harness.tensors().end())
    return invalidArgument("the artifact has no output named "
                           "hidden_states_out");
  MLART_ASSIGN_OR_RETURN(std::vector<float> values,
                         readOutput(device, it->second));
  const BufferDecl &decl = it->second.decl;
  return mlarun::writeNpyF32(
      path, std::vector<int64_t>(decl.sizes, decl.sizes + decl.rank), values);
}

/// What the decode steps after a prefill did.
struct DecodePhase {
  double medianSeconds = 0.0;
  int64_t changedCacheBytes = 0;
  mlarun::NaiveReport naive;

  explicit DecodePhase(double tolerance) : naive("decode", tolerance) {}
};

/// --decode-artifact: continues `prefill`'s requests with decode steps on
/// its caches and block manager, each checked with --naive. Returns the exit
/// code of a failure (not of a mismatch), 0 when the steps ran.
int runDecodePhase(Device &device, const Options &options, Harness &prefill,
                   DecodePhase &result) {
  StatusOr<Artifact> artifact = Artifact::loadFile(options.decodeArtifact);
  if (!artifact.ok())
    return fail("loading " + options.decodeArtifact, artifact.status());
  Harness harness(device, decodeHarnessOptions(options, artifact.value()));
  if (Status s = harness.continueFrom(prefill, artifact.value(),
                                      options.decodeSteps);
      !s.ok())
    return fail("setting up the decode steps", s);
  StatusOr<Executor> executor = Executor::create(artifact.value(), device);
  if (!executor.ok())
    return fail("creating the decode executor", executor.status());
  if (Status s = harness.bind(executor.value(), harness.caches()); !s.ok())
    return fail("binding the decode step", s);
  executor.value().setMaxStreams(options.streams);
  executor.value().setDecodeSchedule(options.decodeSchedule);
  std::vector<std::vector<uint8_t>> before;
  for (KVCache &cache : harness.caches()) {
    before.emplace_back(cache.sizeBytes());
    if (Status s = cache.readBytes(0, before.back().data(), cache.sizeBytes());
        !s.ok())
      return fail("reading caches", s);
  }
  std::vector<double> seconds;
  for (int step = 0; step < options.decodeSteps; ++step) {
    if (Status s = harness.prepareStep(step); !s.ok())
      return fail("preparing decode step " + std::to_string(step), s);
    mlarun::NaiveStep naiveStep;
    if (options.naive) {
      StatusOr<mlarun::NaiveStep> snap = snapshotForNaive(harness, options);
      if (!snap.ok())
        return fail("reading caches", snap.status());
      naiveStep = std::move(snap).value();
    }
    auto start = std::chrono::steady_clock::now();
    if (Status s = executor.value().run(); !s.ok())
      return fail("decode step " + std::to_string(step), s);
    if (Status s = device.synchronize(); !s.ok())
      return fail("synchronizing", s);
    seconds.push_back(std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count());
    if (options.naive) {
      if (Status s = checkStep(device, harness, naiveStep, step,
                               options.tolerance, result.naive);
          !s.ok())
        return fail("naive reference, decode step " + std::to_string(step),
                    s);
    }
    if (Status s = harness.finishStep(); !s.ok())
      return fail("committing decode step " + std::to_string(step), s);
  }
  if (!options.dumpOutput.empty())
    if (Status s = dumpOutput(device, harness, options.dumpOutput); !s.ok())
      return fail("--dump-output", s);
  for (size_t i = 0; i < harness.caches().size(); ++i) {
    std::vector<uint8_t> after(harness.caches()[i].sizeBytes());
    if (Status s = harness.caches()[i].readBytes(0, after.data(), after.size());
        !s.ok())
      return fail("reading caches", s);
    for (size_t k = 0; k < after.size(); ++k)
      result.changedCacheBytes += after[k] != before[i][k];
  }
  std::sort(seconds.begin(), seconds.end());
  result.medianSeconds = seconds[seconds.size() / 2];
  return 0;
}

int runMain(int argc, char **argv) {
  Options options;
  if (std::optional<int> exit = mlarun::parseRunOptions(argc, argv, options))
    return *exit;
  // With --json, stdout carries the JSON document alone.
  std::FILE *messages = options.json ? stderr : stdout;
  std::unique_ptr<Device> device;
  if (options.device == "cpu") { // or "cuda": --device takes no other name
    device = createCpuDevice();
  } else {
#ifdef MLA_RUN_HAVE_CUDA
    StatusOr<std::unique_ptr<CudaDevice>> cuda = createCudaDevice();
    if (!cuda.ok())
      return fail("creating the CUDA device", cuda.status());
    device = std::move(cuda).value();
#else
    return fail("creating the CUDA device",
                unavailable("mla-run was built without CUDA (no nvcc)"));
#endif
  }

  device->setMemoryLimit(uint64_t(options.memoryLimitMiB) << 20);

  StatusOr<Artifact> artifact = Artifact::loadFile(options.artifact);
  if (!artifact.ok())
    return fail("loading " + options.artifact, artifact.status());
  Harness harness(*device, harnessOptions(options));
  if (Status s = harness.setUp(artifact.value()); !s.ok())
    return fail("setting up the step", s);

  StatusOr<Executor> executor = Executor::create(artifact.value(), *device);
  if (!executor.ok())
    return fail("creating the executor", executor.status());
  if (Status s = harness.bind(executor.value(), harness.caches()); !s.ok())
    return fail("binding", s);
  executor.value().setMaxStreams(options.streams);
  executor.value().setDecodeSchedule(options.decodeSchedule);
  if (Status s =
          executor.value().setPrefillContextBound(options.prefillContextBound);
      !s.ok())
    return fail("setting the prefill context bound", s);

  // The reference runs on its own copy of the caches.
  std::unique_ptr<Executor> reference;
  std::vector<KVCache> referenceCaches;
  if (!options.reference.empty()) {
    StatusOr<Artifact> ref = Artifact::loadFile(options.reference);
    if (!ref.ok())
      return fail("loading " + options.reference, ref.status());
    StatusOr<Executor> refExec = Executor::create(std::move(ref).value(), *device);
    if (!refExec.ok())
      return fail("creating the reference executor", refExec.status());
    reference = std::make_unique<Executor>(std::move(refExec).value());
    StatusOr<std::vector<KVCache>> clones = harness.cloneCaches();
    if (!clones.ok())
      return fail("copying the caches", clones.status());
    referenceCaches = std::move(clones).value();
    if (Status s = harness.bind(*reference, referenceCaches); !s.ok())
      return fail("binding the reference", s);
  }

  // Per-op time, aggregated by opcode (synchronizes after every op).
  const bool timePerOp = options.perOp.value_or(options.device == "cpu");
  std::map<std::string, std::pair<int64_t, double>> perOp;
  if (timePerOp)
    executor.value().setTimingCallback(
        [&](size_t, const Instruction &inst, double seconds) {
          auto &entry = perOp[opcodeName(inst.opcode)];
          entry.first += 1;
          entry.second += seconds;
        });

  // --graph: the executor's work goes to a created stream (the default
  // stream cannot be captured).
  Stream graphStream;
  StreamHandle stream = nullptr;
  if (options.graph) {
    if (options.device != "cuda")
      return fail("--graph", unimplemented("graphs need --device cuda"));
    StatusOr<Stream> created = device->createStream();
    if (!created.ok())
      return fail("creating a stream", created.status());
    graphStream = std::move(created).value();
    stream = graphStream.handle();
  }
  std::vector<double> graphSeconds;

  // What the steps change in the caches (a dummy run must change nothing).
  std::vector<std::vector<uint8_t>> cachesBefore;
  for (KVCache &cache : harness.caches()) {
    cachesBefore.emplace_back(cache.sizeBytes());
    if (Status s = cache.readBytes(0, cachesBefore.back().data(),
                                   cache.sizeBytes());
        !s.ok())
      return fail("reading caches", s);
  }

  std::vector<double> stepSeconds;
  double maxRelError = 0.0;
  mlarun::NaiveReport naive(
      harness.isPrefill() ? "prefill" : "decode",
      mlarun::naiveOutputTolerance(harness.artifact().caches(),
                                   options.tolerance));
  int64_t differingCacheBytes = 0;
  for (int step = 0; step < options.steps; ++step) {
    if (Status s = harness.prepareStep(step); !s.ok())
      return fail("preparing step " + std::to_string(step), s);
    // The independent reference reads the caches as they were before.
    mlarun::NaiveStep naiveStep;
    if (options.naive) {
      StatusOr<mlarun::NaiveStep> snap = snapshotForNaive(harness, options);
      if (!snap.ok())
        return fail("reading caches", snap.status());
      naiveStep = std::move(snap).value();
    }
    const bool replay = options.graph && step > 0;
    if (replay && !executor.value().hasGraph()) {
      // Capture once, after the eager warm-up step (no per-op timing in a
      // graph: it would synchronize inside the capture).
      executor.value().setTimingCallback(nullptr);
      if (options.tune) {
        // Replays this step's data while choosing (the same cache slots,
        // the same values), then leaves it captured.
        auto choices = executor.value().tuneGraph(stream);
        if (!choices.ok())
          return fail("tuning the step graph", choices.status());
        for (const Executor::GemmChoice &c : *choices)
          std::fprintf(messages, "tuned %s\n",
                       executor.value().describeGemmChoice(c).c_str());
      }
      if (!executor.value().hasGraph())
        if (Status s = executor.value().captureGraph(stream); !s.ok())
          return fail("capturing the step graph", s);
    }
    auto start = std::chrono::steady_clock::now();
    if (replay) {
      if (Status s = executor.value().runGraph(stream, /*wait=*/false);
          !s.ok())
        return fail("step " + std::to_string(step) + " (graph)", s);
    } else if (Status s = executor.value().run(stream); !s.ok()) {
      return fail("step " + std::to_string(step), s);
    }
    if (Status s = device->synchronize(stream); !s.ok())
      return fail("synchronizing", s);
    const double seconds = std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - start)
                               .count();
    (replay ? graphSeconds : stepSeconds).push_back(seconds);
    if (step == 0 && !executor.value().artifact().prepareInstructions().empty())
      std::fprintf(
          messages, "prepared weights: %s\n",
          executor.value().preparedArenaBytes() == 0
              ? "read in place (bound back to back, no copy)"
              : ("copied once (" +
                 std::to_string(executor.value().preparedArenaBytes()) +
                 " bytes)")
                    .c_str());
    if (replay)
      if (Status s = device->checkErrors(stream); !s.ok())
        return fail("step " + std::to_string(step) + " (graph replay)", s);
    if (options.naive) {
      if (Status s = checkStep(*device, harness, naiveStep, step,
                               options.tolerance, naive);
          !s.ok())
        return fail("naive reference", s);
    }
    if (!options.dumpOutput.empty() && options.decodeArtifact.empty() &&
        step + 1 == options.steps)
      if (Status s = dumpOutput(*device, harness, options.dumpOutput); !s.ok())
        return fail("--dump-output", s);
    if (reference) {
      // Keep the optimized outputs, then run the reference on the same data.
      StatusOr<std::map<std::string, std::vector<float>>> read =
          readOutputs(*device, harness);
      if (!read.ok())
        return fail("reading outputs", read.status());
      std::map<std::string, std::vector<float>> outputs =
          std::move(read).value();
      // Poison again so an output the reference fails to write shows up.
      for (auto &[name, t] : harness.tensors())
        if (t.decl.role == BufferRole::Output)
          if (Status s = device->memset(t.data, 0xff, t.bytes());
              !s.ok())
            return fail("poisoning " + name, s);
      if (Status s = reference->run(); !s.ok())
        return fail("reference step " + std::to_string(step), s);
      for (auto &[name, got] : outputs) {
        StatusOr<std::vector<float>> want =
            readOutput(*device, harness.tensors().at(name));
        if (!want.ok())
          return fail("reading " + name, want.status());
        double maxDiff = 0.0, maxRef = 0.0;
        for (size_t i = 0; i < got.size(); ++i) {
          double diff = std::fabs(double(got[i]) - double(want.value()[i]));
          if (std::isnan(diff))
            diff = INFINITY;
          maxDiff = std::max(maxDiff, diff);
          maxRef = std::max(maxRef, std::fabs(double(want.value()[i])));
        }
        maxRelError = std::max(maxRelError, maxRef > 0 ? maxDiff / maxRef
                                                       : maxDiff);
      }
    }
    if (Status s = harness.finishStep(); !s.ok())
      return fail("committing step " + std::to_string(step), s);
  }
  if (reference) {
    for (size_t i = 0; i < harness.caches().size(); ++i) {
      KVCache &a = harness.caches()[i], &b = referenceCaches[i];
      std::vector<uint8_t> x(a.sizeBytes()), y(b.sizeBytes());
      if (!a.readBytes(0, x.data(), x.size()).ok() ||
          !b.readBytes(0, y.data(), y.size()).ok())
        return fail("reading caches", internalError("cache read failed"));
      for (size_t k = 0; k < x.size(); ++k)
        differingCacheBytes += x[k] != y[k];
    }
  }

  int64_t changedCacheBytes = 0;
  for (size_t i = 0; i < harness.caches().size(); ++i) {
    std::vector<uint8_t> after(harness.caches()[i].sizeBytes());
    if (Status s = harness.caches()[i].readBytes(0, after.data(), after.size());
        !s.ok())
      return fail("reading caches", s);
    for (size_t k = 0; k < after.size(); ++k)
      changedCacheBytes += after[k] != cachesBefore[i][k];
  }

  const bool graphTimed = !graphSeconds.empty();
  if (graphTimed)
    stepSeconds = graphSeconds; // the eager warm-up step is not counted
  std::sort(stepSeconds.begin(), stepSeconds.end());
  double median = stepSeconds[stepSeconds.size() / 2];
  const int timedSteps = int(stepSeconds.size());
  double total = 0.0;
  for (auto &[name, entry] : perOp)
    total += entry.second;
  bool mismatch = (reference && (!(maxRelError <= options.tolerance) ||
                                 differingCacheBytes != 0)) ||
                  (options.naive && !naive.ok());
  if (!options.json) {
    if (timePerOp) {
      std::printf("%-28s %8s %12s %7s\n", "op", "calls", "time (ms)", "share");
      for (auto &[name, entry] : perOp)
        std::printf("%-28s %8lld %12.3f %6.1f%%\n", name.c_str(),
                    (long long)entry.first, entry.second * 1e3,
                    total > 0 ? 100.0 * entry.second / total : 0.0);
      if (options.device != "cpu")
        std::printf("(per-op timing synchronizes after every op: the step "
                    "time below includes that)\n");
    }
    std::printf("step time (median of %d%s, %s): %.3f ms\n", timedSteps,
                graphTimed ? " graph replays" : "", options.device.c_str(),
                median * 1e3);
    std::printf("cache bytes changed by the steps: %lld\n",
                (long long)changedCacheBytes);
#ifdef MLA_RUN_HAVE_CUDA
    // Generated kernels (docs/codegen.md): proof that they, not the library
    // fallback, ran.
    if (auto *cuda = dynamic_cast<CudaDevice *>(device.get()))
      std::printf("generated-kernel launches: %llu (%zu PTX module(s) "
                  "loaded)\n",
                  (unsigned long long)cuda->codegenLaunches(),
                  cuda->codegenModulesLoaded());
#endif
    naive.printText(stdout);
    if (reference)
      std::printf("vs reference: max relative error %.3e (tolerance %.1e), "
                  "cache bytes differing %lld -> %s\n",
                  maxRelError, options.tolerance,
                  (long long)differingCacheBytes, mismatch ? "MISMATCH" : "OK");
  }
  if (options.sharedPrefix > 0)
    std::fprintf(messages, "prefix cache: hits %lld blocks\n",
                 (long long)harness.prefixHitBlocks());

  // After a prefill that passed its checks, the decode steps (checked too).
  // The decode steps run on the prefill's caches: the same encodings.
  DecodePhase decode(mlarun::naiveOutputTolerance(harness.artifact().caches(),
                                                  options.tolerance));
  const bool decoded = !options.decodeArtifact.empty() && !mismatch;
  if (!options.decodeArtifact.empty() && mismatch && !options.json)
    std::printf("decode after prefill: not run (the prefill step failed its "
                "check)\n");
  if (decoded) {
    if (int rc = runDecodePhase(*device, options, harness, decode))
      return rc;
    mismatch = !decode.naive.ok();
    if (!options.json) {
      std::printf("decode after prefill: %d steps of %s, step time (median): "
                  "%.3f ms\n",
                  options.decodeSteps, options.decodeArtifact.c_str(),
                  decode.medianSeconds * 1e3);
      std::printf("cache bytes changed by the decode steps: %lld\n",
                  (long long)decode.changedCacheBytes);
      decode.naive.printText(stdout);
    }
  }

  if (options.json) {
    // The keys and number formats scripts and tests read (docs/mla-run.md).
    using mlart::tool::NumberFormat;
    mlart::tool::JsonWriter json;
    json.beginObject();
    json.member("artifact", options.artifact);
    json.member("device", options.device);
    json.memberInt("steps", options.steps);
    json.memberBool("graph", graphTimed);
    json.memberInt("timed_steps", timedSteps);
    json.memberNumber("step_ms_median", median * 1e3, NumberFormat::fixed(4));
    json.key("ops");
    json.beginObject();
    for (auto &[name, entry] : perOp) {
      json.key(name);
      json.beginObject();
      json.memberInt("calls", entry.first);
      json.memberNumber("ms", entry.second * 1e3, NumberFormat::fixed(4));
      json.endObject();
    }
    json.endObject();
    if (reference) {
      json.memberNumber("max_rel_error", maxRelError,
                        NumberFormat::scientific(3));
      json.memberInt("cache_bytes_differing", differingCacheBytes);
    }
    json.memberInt("cache_bytes_changed", changedCacheBytes);
    if (decoded) {
      json.key("decode_after_prefill");
      json.beginObject();
      json.member("artifact", options.decodeArtifact);
      json.memberInt("steps", options.decodeSteps);
      json.memberNumber("step_ms_median", decode.medianSeconds * 1e3,
                        NumberFormat::fixed(4));
      json.memberInt("cache_bytes_changed", decode.changedCacheBytes);
      json.endObject();
    }
    if (options.naive)
      mlarun::writeNaiveJson(json, {&naive, &decode.naive});
    json.memberBool("ok", !mismatch);
    json.endObject();
    if (!json.complete())
      return fail("--json", internalError("the JSON document is malformed"));
    std::printf("%s\n", json.str().c_str());
  }
  return mismatch ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  return mlart::tool::runToolMain("mla-run", argc, argv, runMain);
}
