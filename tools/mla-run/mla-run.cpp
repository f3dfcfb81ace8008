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
  int perOp = -1; ///< -1: on for the CPU device, off for CUDA
  double naiveSoftmaxScale = 0.0; ///< 0: read it from the artifact
  /// --input NAME=FILE.npy: host data of buffer NAME (instead of random).
  std::vector<std::pair<std::string, std::string>> inputs;
  std::string dumpOutput;     ///< --dump-output: last hidden_states_out
  std::string decodeArtifact; ///< --decode-artifact: decode after prefill
  int decodeSteps = 0;        ///< with --decode-artifact: --steps
  int64_t sharedPrefix = 0;   ///< --shared-prefix: common prompt tokens
  bool dummySlots = false;    ///< --dummy-slots: every slot -1
};

int usage() {
  std::fprintf(stderr,
               "usage: mla-run ARTIFACT [--reference ARTIFACT] [--seed N] "
               "[--steps N] [--context N] [--tolerance X] [--device cpu|cuda] "
               "[--naive] [--json] [--graph] [--per-op|--no-per-op]\n"
               "  --graph  (cuda) run step 0 eagerly, capture the step as a "
               "CUDA graph and replay it for the other steps; the step time "
               "is the median over the replays\n"
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
         o.sharedPrefix >= 0;
}

int fail(const std::string &what, const Status &status) {
  std::fprintf(stderr, "mla-run: %s: %s\n", what.c_str(),
               status.toString().c_str());
  return 1;
}

/// One device allocation holding a host-initialised tensor.
struct DeviceTensor {
  BufferDecl decl;
  Buffer buffer;
  std::vector<uint8_t> host;

  TensorRef ref() const {
    TensorRef t;
    t.data = buffer.data();
    t.dtype = decl.dtype;
    t.rank = decl.rank;
    int64_t stride = 1;
    for (int d = decl.rank - 1; d >= 0; --d) {
      t.sizes[d] = decl.sizes[d];
      t.strides[d] = stride;
      stride *= decl.sizes[d];
    }
    return t;
  }
};

/// The serving situation one artifact runs in.
class Harness {
public:
  Harness(Device &device, const Options &options)
      : device_(device), options_(options), rng_(options.seed) {}

  Status setUp(const Artifact &artifact);
  /// Fills step metadata and activations for step `step`.
  Status prepareStep(int step);
  Status finishStep();
  /// Binds everything to `executor` using `caches`.
  Status bind(Executor &executor, std::vector<KVCache> &caches);
  /// Fresh caches with the same bytes as the harness's initial caches.
  StatusOr<std::vector<KVCache>> cloneCaches() const;

  std::vector<KVCache> &caches() { return caches_; }
  const Artifact &artifact() const { return *artifact_; }
  /// The artifact is a prefill step (it has query_start_loc).
  bool isPrefill() const { return prefill_; }
  std::map<std::string, DeviceTensor> &tensors() { return tensors_; }
  /// Takes over `prefill`'s caches, block manager and requests (whose
  /// prompts are committed) to run `artifact`, a decode step, next; weights
  /// of the same name and shape keep the prefill's values.
  Status continueFrom(Harness &prefill, const Artifact &artifact,
                      int64_t steps);
  /// Full blocks the prefix cache found for prompts so far.
  int64_t prefixHitBlocks() const {
    return blocks_ ? blocks_->stats().hitTokens / blocks_->blockSize() : 0;
  }

private:
  void fillRandom(DeviceTensor &t, float scale, float mean = 0.0f);
  Status upload(DeviceTensor &t) {
    return device_.copyHostToDevice(t.buffer.data(), t.host.data(),
                                    t.host.size());
  }
  template <typename T> T *hostAs(const std::string &name) {
    return reinterpret_cast<T *>(tensors_.at(name).host.data());
  }
  bool has(const std::string &name) const { return tensors_.count(name); }

  Device &device_;
  const Options &options_;
  std::mt19937_64 rng_;
  const Artifact *artifact_ = nullptr;
  std::map<std::string, DeviceTensor> tensors_;
  std::vector<KVCache> caches_;
  std::unique_ptr<BlockManager> blocks_;
  int64_t requests_ = 0, tokens_ = 0, maxBlocks_ = 0;
  bool prefill_ = false;
  /// --input data by buffer name, checked against the declarations.
  std::map<std::string, std::vector<uint8_t>> bound_;
  Status loadBoundInputs();
  void applyBound(DeviceTensor &t, const std::string &name) {
    auto it = bound_.find(name);
    if (it != bound_.end())
      t.host = it->second;
  }
  Status allocateTensors(const Artifact &artifact);
  Status readShapes();
};

Status Harness::loadBoundInputs() {
  for (const auto &[name, path] : options_.inputs) {
    auto it = tensors_.find(name);
    if (it == tensors_.end())
      return invalidArgument("--input " + name + ": the artifact has no "
                             "buffer named '" + name + "'");
    const BufferDecl &decl = it->second.decl;
    if (decl.role == BufferRole::StepMetadata || decl.role == BufferRole::Output)
      return invalidArgument("--input " + name + ": '" + name + "' is " +
                             bufferRoleName(decl.role) +
                             " (mla-run computes it); only inputs and "
                             "weights can be bound");
    StatusOr<mlarun::NpyArray> array = mlarun::readNpy(path);
    if (!array.ok())
      return Status(array.status().code(),
                    "--input " + name + ": " + array.status().message());
    if (Status s = mlarun::checkNpyMatches(array.value(), decl.dtype,
                                           decl.sizes, decl.rank);
        !s.ok())
      return invalidArgument("--input " + name + "=" + path + ": " +
                             s.message());
    bound_[name] = std::move(array.value().data);
  }
  return Status::success();
}

Status Harness::allocateTensors(const Artifact &artifact) {
  artifact_ = &artifact;
  for (const BufferDecl &decl : artifact.buffers()) {
    DeviceTensor t;
    t.decl = decl;
    t.host.assign(size_t(decl.sizeBytes()), 0);
    MLART_ASSIGN_OR_RETURN(t.buffer, device_.allocate(t.host.size()));
    tensors_.emplace(decl.name, std::move(t));
  }
  return readShapes();
}

Status Harness::readShapes() {
  for (const char *needed : {"slot_mapping", "positions", "block_table",
                             "seq_lens"})
    if (!has(needed))
      return invalidArgument(std::string("the artifact has no buffer named '") +
                             needed + "' (name step data with mla.name)");
  prefill_ = has("query_start_loc");
  tokens_ = tensors_.at("slot_mapping").decl.sizes[0];
  requests_ = tensors_.at("block_table").decl.sizes[0];
  maxBlocks_ = tensors_.at("block_table").decl.sizes[1];
  if (!prefill_ && tokens_ != requests_)
    return invalidArgument("a decode step has one token a request");
  if (artifact_->caches().empty())
    return invalidArgument("the artifact declares no cache");
  return Status::success();
}

Status Harness::continueFrom(Harness &prefill, const Artifact &artifact,
                             int64_t steps) {
  MLART_RETURN_IF_ERROR(allocateTensors(artifact));
  if (prefill_)
    return invalidArgument("--decode-artifact: the artifact is a prefill "
                           "step (it has query_start_loc); give a decode step");
  if (requests_ != prefill.requests_)
    return invalidArgument(
        "--decode-artifact: the decode step's batch (" +
        std::to_string(requests_) + ") must equal the prefill's request "
        "count (" + std::to_string(prefill.requests_) + ")");
  if (artifact.caches().size() != prefill.caches_.size())
    return invalidArgument("--decode-artifact: the decode step has " +
                           std::to_string(artifact.caches().size()) +
                           " caches, the prefill step " +
                           std::to_string(prefill.caches_.size()));
  caches_ = std::move(prefill.caches_);
  blocks_ = std::move(prefill.blocks_);
  for (int64_t r = 0; r < requests_; ++r) {
    MLART_ASSIGN_OR_RETURN(int64_t n, blocks_->numTokens(r));
    if (n + steps > maxBlocks_ * blocks_->blockSize())
      return invalidArgument(
          "--decode-artifact: request " + std::to_string(r) + " has " +
          std::to_string(n) + " tokens; " + std::to_string(steps) +
          " decode steps exceed the decode block table's capacity of " +
          std::to_string(maxBlocks_ * blocks_->blockSize()));
  }
  for (auto &[name, t] : tensors_) {
    if (t.decl.role != BufferRole::Weight)
      continue;
    auto it = prefill.tensors_.find(name);
    if (it == prefill.tensors_.end() || it->second.decl.dtype != t.decl.dtype ||
        it->second.host.size() != t.host.size())
      return invalidArgument("--decode-artifact: weight '" + name +
                             "' is not in the prefill step with the same "
                             "dtype and shape");
    t.host = it->second.host;
    MLART_RETURN_IF_ERROR(upload(t));
  }
  rng_ = prefill.rng_;
  return device_.synchronize();
}

void Harness::fillRandom(DeviceTensor &t, float scale, float mean) {
  // Uniform on [-sqrt(3), sqrt(3)] (unit variance) from splitmix64: a whole
  // model's weights are hundreds of millions of values, and this is ~30x
  // faster than std::normal_distribution.
  uint64_t state = rng_();
  const float unit = std::sqrt(3.0f) / float(1u << 23);
  int64_t n = t.decl.numElements();
  for (int64_t i = 0; i < n; ++i) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    float u = float(int32_t(z >> 40) - (1 << 23)) * unit;
    storeFromFloat(t.host.data(), t.decl.dtype, size_t(i), mean + scale * u);
  }
}

Status Harness::setUp(const Artifact &artifact) {
  MLART_RETURN_IF_ERROR(allocateTensors(artifact));
  MLART_RETURN_IF_ERROR(loadBoundInputs());
  int64_t blockSize = artifact.caches()[0].desc.blockSize;
  int64_t perRequest = prefill_ ? (tokens_ + requests_ - 1) / requests_ : 1;
  int64_t needed = options_.context + perRequest * options_.steps;
  if (needed > maxBlocks_ * blockSize)
    return invalidArgument("context + steps (" + std::to_string(needed) +
                           " tokens) exceed the block table's capacity of " +
                           std::to_string(maxBlocks_ * blockSize));

  // Weights and other inputs: fixed for the whole run.
  for (auto &[name, t] : tensors_) {
    if (t.decl.role == BufferRole::Weight) {
      if (name.find("cos_sin") != std::string::npos && t.decl.rank == 2) {
        // A real rotary table, base 10000: cos then sin halves.
        int64_t rows = t.decl.sizes[0], rope = t.decl.sizes[1];
        for (int64_t p = 0; p < rows; ++p)
          for (int64_t i = 0; i < rope / 2; ++i) {
            double freq = std::pow(10000.0, -2.0 * double(i) / double(rope));
            storeFromFloat(t.host.data(), t.decl.dtype, size_t(p * rope + i),
                           float(std::cos(double(p) * freq)));
            storeFromFloat(t.host.data(), t.decl.dtype,
                           size_t(p * rope + rope / 2 + i),
                           float(std::sin(double(p) * freq)));
          }
      } else if (name.find("norm") != std::string::npos || t.decl.rank == 1) {
        fillRandom(t, 0.1f, 1.0f);
      } else {
        // Keep activations O(1): scale by 1/sqrt(fan-in).
        int64_t fanIn = t.decl.rank == 3 ? t.decl.sizes[1]
                                         : t.decl.sizes[t.decl.rank - 1];
        fillRandom(t, 1.0f / std::sqrt(float(std::max<int64_t>(fanIn, 1))));
      }
      applyBound(t, name);
      MLART_RETURN_IF_ERROR(upload(t));
    }
  }

  // Caches and the block manager that hands out their slots.
  int64_t numBlocks = requests_ * maxBlocks_ + 1;
  for (const CacheDecl &decl : artifact.caches()) {
    KVCacheDesc desc = decl.desc;
    if (desc.numBlocks == 0)
      desc.numBlocks = numBlocks;
    if (desc.numBlocks < numBlocks)
      return invalidArgument("cache '" + decl.name + "' has too few blocks");
    MLART_ASSIGN_OR_RETURN(KVCache cache,
                           KVCache::create(device_, desc, 0.05f));
    caches_.push_back(std::move(cache));
  }
  BlockManagerConfig config;
  config.numBlocks = caches_[0].desc().numBlocks;
  config.blockSize = blockSize;
  MLART_ASSIGN_OR_RETURN(BlockManager manager, BlockManager::create(config));
  blocks_ = std::make_unique<BlockManager>(std::move(manager));

  // Earlier context: each request's prompt is already in every cache. With
  // --shared-prefix the prompts start alike; each request is added after the
  // previous one is committed, so its prefix hits the previous one's blocks
  // and only the rest of its prompt is written.
  std::uniform_int_distribution<int32_t> token(1, 100000);
  std::vector<int32_t> shared(size_t(std::min(options_.sharedPrefix,
                                              options_.context)));
  for (int32_t &id : shared)
    id = token(rng_);
  auto writeContext = [&](const std::vector<ScheduledChunk> &chunks,
                          int64_t contextTokens) -> Status {
    if (contextTokens == 0)
      return Status::success();
    MLART_ASSIGN_OR_RETURN(std::vector<int64_t> slots,
                           blocks_->buildSlotMapping(chunks, contextTokens));
    for (KVCache &cache : caches_) {
      const KVCacheDesc &d = cache.desc();
      DType inType = d.layout == CacheLayout::Plain ? d.dtype : DType::BF16;
      DeviceTensor kvC, kPe, slotBuf;
      kvC.decl.dtype = kPe.decl.dtype = inType;
      kvC.decl.rank = kPe.decl.rank = 2;
      kvC.decl.sizes[0] = kPe.decl.sizes[0] = contextTokens;
      kvC.decl.sizes[1] = d.latentRank;
      kPe.decl.sizes[1] = d.ropeDim;
      slotBuf.decl.dtype = DType::I64;
      slotBuf.decl.rank = 1;
      slotBuf.decl.sizes[0] = contextTokens;
      for (DeviceTensor *t : {&kvC, &kPe, &slotBuf}) {
        t->host.assign(size_t(t->decl.sizeBytes()), 0);
        MLART_ASSIGN_OR_RETURN(t->buffer, device_.allocate(t->host.size()));
      }
      fillRandom(kvC, 1.0f);
      fillRandom(kPe, 1.0f);
      std::memcpy(slotBuf.host.data(), slots.data(), slotBuf.host.size());
      for (DeviceTensor *t : {&kvC, &kPe, &slotBuf})
        MLART_RETURN_IF_ERROR(upload(*t));
      CacheUpdateArgs args{kvC.ref(), kPe.ref(), slotBuf.ref(), cache.ref()};
      MLART_RETURN_IF_ERROR(device_.kernels().cacheUpdate(args, nullptr));
    }
    return device_.synchronize();
  };
  std::vector<ScheduledChunk> chunks;
  int64_t contextTokens = 0;
  for (int64_t r = 0; r < requests_; ++r) {
    std::vector<int32_t> prompt(size_t(options_.context));
    for (size_t i = 0; i < prompt.size(); ++i)
      prompt[i] = i < shared.size() ? shared[i] : token(rng_);
    MLART_ASSIGN_OR_RETURN(
        int64_t hit, blocks_->addRequest(r, options_.context > 0
                                                ? prompt.data()
                                                : nullptr,
                                         options_.context));
    if (options_.context > 0) {
      chunks.push_back({r, hit, options_.context - hit});
      contextTokens += options_.context - hit;
    }
    if (!shared.empty()) {
      MLART_RETURN_IF_ERROR(writeContext(chunks, contextTokens));
      MLART_RETURN_IF_ERROR(blocks_->commitComputed(r, options_.context));
      chunks.clear();
      contextTokens = 0;
    }
  }
  if (shared.empty()) {
    MLART_RETURN_IF_ERROR(writeContext(chunks, contextTokens));
    if (options_.context > 0)
      for (int64_t r = 0; r < requests_; ++r)
        MLART_RETURN_IF_ERROR(blocks_->commitComputed(r, options_.context));
  }
  return device_.synchronize();
}

Status Harness::prepareStep(int step) {
  (void)step;
  std::uniform_int_distribution<int32_t> token(1, 100000);
  std::vector<ScheduledChunk> chunks;
  int64_t *positions = hostAs<int64_t>("positions");
  int32_t *seqLens = hostAs<int32_t>("seq_lens");
  int32_t *qsl = prefill_ ? hostAs<int32_t>("query_start_loc") : nullptr;
  int64_t next = 0;
  for (int64_t r = 0; r < requests_; ++r) {
    int64_t count = prefill_ ? tokens_ / requests_ +
                                   (r < tokens_ % requests_ ? 1 : 0)
                             : 1;
    MLART_ASSIGN_OR_RETURN(int64_t start, blocks_->numTokens(r));
    std::vector<int32_t> newTokens(static_cast<size_t>(count));
    for (int32_t &id : newTokens)
      id = token(rng_);
    MLART_RETURN_IF_ERROR(blocks_->appendTokens(r, newTokens.data(), count));
    chunks.push_back({r, start, count});
    if (qsl)
      qsl[r] = int32_t(next);
    for (int64_t i = 0; i < count; ++i)
      positions[next + i] = start + i;
    next += count;
    seqLens[r] = int32_t(start + count);
  }
  if (qsl)
    qsl[requests_] = int32_t(next);
  MLART_RETURN_IF_ERROR(blocks_->buildSlotMapping(
      chunks.data(), int64_t(chunks.size()), tokens_,
      hostAs<int64_t>("slot_mapping")));
  if (options_.dummySlots)
    std::fill_n(hostAs<int64_t>("slot_mapping"), tokens_, int64_t(-1));
  std::vector<RequestId> ids;
  for (int64_t r = 0; r < requests_; ++r)
    ids.push_back(r);
  MLART_RETURN_IF_ERROR(blocks_->buildBlockTable(
      ids.data(), requests_, maxBlocks_, hostAs<int32_t>("block_table")));
  for (auto &[name, t] : tensors_) {
    if (t.decl.role == BufferRole::Input) {
      fillRandom(t, 1.0f);
      applyBound(t, name);
    }
    if (t.decl.role == BufferRole::Input ||
        t.decl.role == BufferRole::StepMetadata)
      MLART_RETURN_IF_ERROR(upload(t));
    if (t.decl.role == BufferRole::Output)
      MLART_RETURN_IF_ERROR(device_.memset(t.buffer.data(), 0xff,
                                           t.buffer.size())); // poison
  }
  return device_.synchronize();
}

Status Harness::finishStep() {
  for (int64_t r = 0; r < requests_; ++r) {
    MLART_ASSIGN_OR_RETURN(int64_t n, blocks_->numTokens(r));
    MLART_RETURN_IF_ERROR(blocks_->commitComputed(r, n));
  }
  return Status::success();
}

Status Harness::bind(Executor &executor, std::vector<KVCache> &caches) {
  for (auto &[name, t] : tensors_)
    MLART_RETURN_IF_ERROR(executor.bind(name, t.ref()));
  for (size_t i = 0; i < caches.size(); ++i)
    MLART_RETURN_IF_ERROR(
        executor.bindCache(artifact_->caches()[i].name, caches[i]));
  return Status::success();
}

StatusOr<std::vector<KVCache>> Harness::cloneCaches() const {
  std::vector<KVCache> copies;
  for (const KVCache &cache : caches_) {
    MLART_ASSIGN_OR_RETURN(KVCache copy,
                           KVCache::create(device_, cache.desc(),
                                           cache.scale()));
    MLART_RETURN_IF_ERROR(device_.copyDeviceToDevice(
        copy.data(), cache.data(), cache.sizeBytes()));
    copies.push_back(std::move(copy));
  }
  return copies;
}

/// Reads an output to host floats.
StatusOr<std::vector<float>> readOutput(Device &device, const DeviceTensor &t) {
  std::vector<uint8_t> bytes(t.buffer.size());
  MLART_RETURN_IF_ERROR(device.copyDeviceToHost(bytes.data(), t.buffer.data(),
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
  Harness harness(device, options);
  if (Status s = harness.continueFrom(prefill, artifact.value(),
                                      options.decodeSteps);
      !s.ok())
    return fail("setting up the decode steps", s);
  StatusOr<Executor> executor = Executor::create(artifact.value(), device);
  if (!executor.ok())
    return fail("creating the decode executor", executor.status());
  if (Status s = harness.bind(executor.value(), harness.caches()); !s.ok())
    return fail("binding the decode step", s);
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
  Harness harness(*device, options);
  if (Status s = harness.setUp(artifact.value()); !s.ok())
    return fail("setting up the step", s);

  StatusOr<Executor> executor = Executor::create(artifact.value(), *device);
  if (!executor.ok())
    return fail("creating the executor", executor.status());
  if (Status s = harness.bind(executor.value(), harness.caches()); !s.ok())
    return fail("binding", s);

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
          if (Status s = device->memset(t.buffer.data(), 0xff, t.buffer.size());
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
      std::printf("%-20s %8s %12s %7s\n", "op", "calls", "time (ms)",
                  "share");
      for (auto &[name, entry] : perOp)
        std::printf("%-20s %8lld %12.3f %6.1f%%\n", name.c_str(),
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
