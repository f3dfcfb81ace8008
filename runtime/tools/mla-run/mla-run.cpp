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
#include "StepHarness.h"

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

struct Options {
  std::string artifact;
  std::string reference;
  std::string device = "cpu";
  uint64_t seed = 0;
  int steps = 2;
  int64_t context = 40;
  double tolerance = 1e-2;
  bool json = false;
  bool naive = false;
  bool graph = false;
  bool tune = false; ///< --tune: capture through Executor::tuneGraph
  int perOp = -1; ///< -1: on for the CPU device, off for CUDA
  double naiveSoftmaxScale = 0.0; ///< 0: read it from the artifact
  /// --input NAME=FILE.npy: host data of buffer NAME (instead of random).
  std::vector<std::pair<std::string, std::string>> inputs;
  std::string dumpOutput;     ///< --dump-output: last hidden_states_out
  std::string decodeArtifact; ///< --decode-artifact: decode after prefill
  int decodeSteps = 0;        ///< with --decode-artifact: --steps
  int64_t sharedPrefix = 0;   ///< --shared-prefix: common prompt tokens
  bool dummySlots = false;    ///< --dummy-slots: every slot -1
  int streams = 2;            ///< --streams: Executor::setMaxStreams
  bool separateWeights = false; ///< --separate-weights
  /// --decode-schedule: Executor::setDecodeSchedule
  DecodeSchedule decodeSchedule = DecodeSchedule::Default;
  /// --prefill-context-bound: Executor::setPrefillContextBound
  int64_t prefillContextBound = 0;
};

/// --decode-schedule's names.
bool parseDecodeSchedule(const std::string &name, DecodeSchedule &out) {
  if (name == "default")
    out = DecodeSchedule::Default;
  else if (name == "per-sequence")
    out = DecodeSchedule::PerSequence;
  else if (name == "balanced")
    out = DecodeSchedule::Balanced;
  else
    return false;
  return true;
}

int usage() {
  std::fprintf(stderr,
               "usage: mla-run ARTIFACT [--reference ARTIFACT] [--seed N] "
               "[--steps N] [--context N] [--tolerance X] [--device cpu|cuda] "
               "[--naive] [--json] [--graph] [--per-op|--no-per-op] "
               "[--streams N]\n"
               "  --graph  (cuda) run step 0 eagerly, capture the step as a "
               "CUDA graph and replay it for the other steps; the step time "
               "is the median over the replays\n"
               "  --tune  (with --graph) choose each GEMM's algorithm (linear, "
               "q_absorb, v_up) "
               "by replaying the step (Executor::tuneGraph) when capturing; "
               "prints the choices\n"
               "  --per-op  time every op (synchronizes after each one, so "
               "the step time includes that); default on for cpu, off for "
               "cuda\n"
               "  --naive  also compare every step with a float64 "
               "non-absorbed reference (decode and prefill steps of mla-gen "
               "models, and the decode steps of --decode-artifact); compares "
               "the attention layers' contribution, output - input, and the "
               "cache rows each step wrote (no other cache byte may change)\n"
               "  --softmax-scale X  the model's scale for --naive (default: "
               "the artifact's)\n"
               "  --input NAME=FILE.npy  bind buffer NAME's data from a .npy "
               "file (repeatable; dtype and shape must match)\n"
               "  --dump-output FILE.npy  write the last step's "
               "hidden_states_out as float32\n"
               "  --decode-artifact FILE  after one step of ARTIFACT (a "
               "prefill), run FILE (a decode step) for --steps steps on the "
               "same caches\n"
               "  --shared-prefix N  all requests share their first N prompt "
               "tokens (prefix caching)\n"
               "  --dummy-slots  every step's slot_mapping is -1 (a warm-up "
               "or profile step: it may write no cache byte)\n"
               "  --streams N  (cuda) spread independent instructions over "
               "at most N streams (default 2; 1: program order on one "
               "stream)\n"
               "  --separate-weights  allocate each weight on its own (default: "
               "all back to back in one allocation, so fused weights are read "
               "in place)\n"
               "  --decode-schedule default|per-sequence|balanced  (cuda) how "
               "decode attention spreads over the GPU: balanced cuts all "
               "sequences' tiles evenly (mixed lengths), per-sequence splits "
               "every sequence alike (alike lengths)\n"
               "  --prefill-context-bound N  every request's cached context "
               "is at most N tokens (prefill steps; 0: none): the CUDA "
               "prefill expands N rows a request, not the block table's "
               "capacity; a longer context is an error\n"
               "  (see docs/mla-run.md)\n");
  return 2;
}

bool parseOptions(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char * {
      return i + 1 < argc ? argv[++i] : nullptr;
    };
    const char *v = nullptr;
    if (a == "--json")
      o.json = true;
    else if (a == "--naive")
      o.naive = true;
    else if (a == "--graph")
      o.graph = true;
    else if (a == "--tune")
      o.tune = true;
    else if (a == "--per-op")
      o.perOp = 1;
    else if (a == "--no-per-op")
      o.perOp = 0;
    else if (a == "--softmax-scale" && (v = next()))
      o.naiveSoftmaxScale = std::atof(v);
    else if (a == "--reference" && (v = next()))
      o.reference = v;
    else if (a == "--device" && (v = next()))
      o.device = v;
    else if (a == "--seed" && (v = next()))
      o.seed = std::strtoull(v, nullptr, 10);
    else if (a == "--steps" && (v = next()))
      o.steps = std::atoi(v);
    else if (a == "--streams" && (v = next())) {
      o.streams = std::atoi(v);
      if (o.streams < 1) {
        std::fprintf(stderr, "mla-run: --streams needs a count >= 1\n");
        return false;
      }
    }
    else if (a == "--prefill-context-bound" && (v = next())) {
      char *end = nullptr;
      o.prefillContextBound = std::strtoll(v, &end, 10);
      if (*v == '\0' || *end != '\0' || o.prefillContextBound < 0) {
        std::fprintf(stderr,
                     "mla-run: --prefill-context-bound needs a token count "
                     ">= 0, not '%s'\n",
                     v);
        return false;
      }
    }
    else if (a == "--context" && (v = next()))
      o.context = std::atoll(v);
    else if (a == "--tolerance" && (v = next()))
      o.tolerance = std::atof(v);
    else if (a == "--input" && (v = next())) {
      std::string kv = v;
      size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size())
        return false;
      o.inputs.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else if (a == "--dump-output" && (v = next()))
      o.dumpOutput = v;
    else if (a == "--decode-artifact" && (v = next()))
      o.decodeArtifact = v;
    else if (a == "--shared-prefix" && (v = next()))
      o.sharedPrefix = std::atoll(v);
    else if (a == "--dummy-slots")
      o.dummySlots = true;
    else if (a == "--separate-weights")
      o.separateWeights = true;
    else if (a == "--decode-schedule" && (v = next())) {
      if (!parseDecodeSchedule(v, o.decodeSchedule)) {
        std::fprintf(stderr,
                     "mla-run: --decode-schedule is default, per-sequence or "
                     "balanced, not '%s'\n",
                     v);
        return false;
      }
    }
    else if (!a.empty() && a[0] != '-' && o.artifact.empty())
      o.artifact = a;
    else
      return false;
  }
  if (!o.decodeArtifact.empty()) {
    // One prefill step, then --steps decode steps.
    o.decodeSteps = o.steps;
    o.steps = 1;
  }
  return !o.artifact.empty() && o.steps > 0 && o.context >= 0 &&
         o.sharedPrefix >= 0 && (o.graph || !o.tune); // --tune needs --graph
}

using mlarun::DeviceTensor;
using mlarun::Harness;
using mlarun::HarnessOptions;

HarnessOptions harnessOptions(const Options &o) {
  HarnessOptions h;
  h.seed = o.seed;
  h.steps = o.steps;
  h.context = o.context;
  h.inputs = o.inputs;
  h.sharedPrefix = o.sharedPrefix;
  h.dummySlots = o.dummySlots;
  h.separateWeights = o.separateWeights;
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
  Harness harness(device, harnessOptions(options));
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

} // namespace

int main(int argc, char **argv) {
  Options options;
  if (!parseOptions(argc, argv, options))
    return usage();
  std::unique_ptr<Device> device;
  if (options.device == "cpu") {
    device = createCpuDevice();
  } else if (options.device == "cuda") {
#ifdef MLA_RUN_HAVE_CUDA
    StatusOr<std::unique_ptr<CudaDevice>> cuda = createCudaDevice();
    if (!cuda.ok())
      return fail("creating the CUDA device", cuda.status());
    device = std::move(cuda).value();
#else
    return fail("creating the CUDA device",
                unavailable("mla-run was built without CUDA (no nvcc)"));
#endif
  } else {
    std::fprintf(stderr, "mla-run: unknown device '%s' (cpu or cuda)\n",
                 options.device.c_str());
    return 1;
  }

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
  const bool timePerOp =
      options.perOp < 0 ? options.device == "cpu" : options.perOp == 1;
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
  mlarun::NaiveReport naive(harness.isPrefill() ? "prefill" : "decode",
                            options.tolerance);
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
          std::printf("tuned %s\n",
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
      std::printf("prepared weights: %s\n",
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
    std::fprintf(options.json ? stderr : stdout,
                 "prefix cache: hits %lld blocks\n",
                 (long long)harness.prefixHitBlocks());

  // After a prefill that passed its checks, the decode steps (checked too).
  DecodePhase decode(options.tolerance);
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
    std::printf("{\"artifact\": \"%s\", \"device\": \"%s\", \"steps\": %d, "
                "\"graph\": %s, \"timed_steps\": %d, "
                "\"step_ms_median\": %.4f, \"ops\": {",
                options.artifact.c_str(), options.device.c_str(),
                options.steps, graphTimed ? "true" : "false", timedSteps,
                median * 1e3);
    bool first = true;
    for (auto &[name, entry] : perOp) {
      std::printf("%s\"%s\": {\"calls\": %lld, \"ms\": %.4f}",
                  first ? "" : ", ", name.c_str(), (long long)entry.first,
                  entry.second * 1e3);
      first = false;
    }
    std::printf("}");
    if (reference)
      std::printf(", \"max_rel_error\": %.3e, \"cache_bytes_differing\": %lld",
                  maxRelError, (long long)differingCacheBytes);
    std::printf(", \"cache_bytes_changed\": %lld",
                (long long)changedCacheBytes);
    if (decoded)
      std::printf(", \"decode_after_prefill\": {\"artifact\": \"%s\", "
                  "\"steps\": %d, \"step_ms_median\": %.4f, "
                  "\"cache_bytes_changed\": %lld}",
                  options.decodeArtifact.c_str(), options.decodeSteps,
                  decode.medianSeconds * 1e3,
                  (long long)decode.changedCacheBytes);
    if (options.naive)
      mlarun::printNaiveJson(stdout, {&naive, &decode.naive});
    std::printf(", \"ok\": %s}\n", mismatch ? "false" : "true");
  }
  return mismatch ? 1 : 0;
}
