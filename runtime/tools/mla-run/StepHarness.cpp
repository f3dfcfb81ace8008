//===- StepHarness.cpp - The serving situation a step artifact runs in ----===//
#include "StepHarness.h"

#include "NpyIO.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

namespace mlarun {

using namespace mlart;

namespace {
/// A per-tensor fp8 cache's scale unless an --input file sets it. Rows of
/// unit variance then span a few dozen fp8 steps; 1 would hide a kernel
/// that forgot the scale.
constexpr float kDefaultCacheScale = 0.05f;

/// How to fill weight `name` if it is a rope table: the artifact's record
/// for it, else (an artifact whose compiler recorded none) plain base-10000
/// rope for a 2-D buffer named like vLLM's cos_sin_cache. Null otherwise.
const RopeTableParams *ropeTableParams(const Artifact &artifact,
                                       const std::string &name,
                                       const BufferDecl &decl) {
  static const RopeTableParams kPlain;
  const int index = artifact.findBuffer(name);
  if (index >= 0)
    if (const RopeTableParams *recorded = artifact.ropeTableOf(uint32_t(index)))
      return recorded;
  if (name.find("cos_sin") != std::string::npos && decl.rank == 2)
    return &kPlain;
  return nullptr;
}
} // namespace

Status Harness::loadBoundInputs() {
  for (const auto &[name, path, flag, hint] : options_.inputs) {
    auto it = tensors_.find(name);
    if (it == tensors_.end())
      return invalidArgument(flag + " " + name +
                             ": the artifact has no "
                             "buffer named '" +
                             name + "'");
    const BufferDecl &decl = it->second.decl;
    if (decl.role == BufferRole::StepMetadata || decl.role == BufferRole::Output)
      return invalidArgument(flag + " " + name + ": '" + name + "' is " +
                             bufferRoleName(decl.role) +
                             " (mla-run computes it); only inputs and "
                             "weights can be bound");
    StatusOr<mlarun::NpyArray> array =
        mlarun::readNpy(path, uint64_t(decl.sizeBytes()) + kMaxNpyHeaderBytes);
    if (!array.ok())
      return Status(array.status().code(),
                    flag + " " + name + ": " + array.status().message());
    if (Status s = mlarun::checkNpyMatches(array.value(), decl.dtype,
                                           decl.sizes, decl.rank);
        !s.ok())
      return invalidArgument(flag + " " + name + "=" + path + ": " +
                             s.message() + hint);
    bound_[name] = std::move(array.value().data);
  }
  return Status::success();
}

/// The declared buffers, and their host mirrors, must fit the device's
/// memory limit before anything is allocated for them: an artifact's sizes
/// are input.
static Status checkDeclaredBytes(const Artifact &artifact,
                                 const Device &device) {
  // The loader bounds each size below 2^62, not their sum: saturate.
  uint64_t declared = 0;
  for (const BufferDecl &decl : artifact.buffers())
    declared =
        std::min(declared + uint64_t(decl.sizeBytes()), uint64_t(1) << 62);
  // On a host-accessible device the mirrors share its memory.
  const uint64_t needed = device.isHostAccessible() ? 2 * declared : declared;
  const uint64_t limit = device.memoryLimit();
  const uint64_t free =
      limit > device.bytesAllocated() ? limit - device.bytesAllocated() : 0;
  if (needed > free)
    return resourceExhausted(
        "the artifact's buffers need " + std::to_string(needed) +
        " bytes with their host copies; the " + device.kindName() +
        " device's memory limit leaves " + std::to_string(free) +
        " (--memory-limit)");
  return Status::success();
}

/// One step-data buffer the harness writes: its dtype, rank and, where the
/// harness knows it, its length must be what it writes, or it would write
/// past the allocation.
static Status checkStepBuffer(const BufferDecl &decl, DType dtype, int rank,
                              int64_t length) {
  const bool ok = decl.dtype == dtype && decl.rank == rank &&
                  (length < 0 || decl.sizes[0] == length) &&
                  decl.sizes[0] >= 1 && (rank < 2 || decl.sizes[1] >= 1);
  if (ok)
    return Status::success();
  std::string expected =
      std::string(dtypeName(dtype)) + " of rank " + std::to_string(rank);
  if (length >= 0)
    expected += " and length " + std::to_string(length);
  else
    expected += ", not empty";
  std::string declared = std::string(dtypeName(decl.dtype)) + " [";
  for (int d = 0; d < decl.rank; ++d)
    declared += (d ? ", " : "") + std::to_string(decl.sizes[d]);
  return invalidArgument("step buffer '" + decl.name + "' is declared " +
                         declared + "]; mla-run writes it as " + expected);
}

Status Harness::allocateTensors(const Artifact &artifact) {
  artifact_ = &artifact;
  MLART_RETURN_IF_ERROR(checkDeclaredBytes(artifact, device_));
  // Weights go back to back into one pool, in declaration order, each at a
  // 256-byte aligned offset (GEMM kernels want aligned rows); adjacent
  // whole weights of a fused projection then need no prepared copy.
  constexpr int64_t kAlign = 256;
  std::vector<int64_t> poolOffset(artifact.buffers().size(), -1);
  int64_t poolBytes = 0;
  if (!options_.separateWeights)
    for (size_t i = 0; i < artifact.buffers().size(); ++i) {
      const BufferDecl &decl = artifact.buffers()[i];
      if (decl.role != BufferRole::Weight)
        continue;
      poolBytes = (poolBytes + kAlign - 1) / kAlign * kAlign;
      poolOffset[i] = poolBytes;
      poolBytes += decl.sizeBytes();
    }
  if (poolBytes > 0) {
    MLART_ASSIGN_OR_RETURN(weightPool_, device_.allocate(size_t(poolBytes)));
  }
  for (size_t i = 0; i < artifact.buffers().size(); ++i) {
    const BufferDecl &decl = artifact.buffers()[i];
    DeviceTensor t;
    t.decl = decl;
    t.host.assign(size_t(decl.sizeBytes()), 0);
    if (poolOffset[i] >= 0) {
      t.data = static_cast<uint8_t *>(weightPool_.data()) + poolOffset[i];
    } else {
      // Separate weights get a gap after them, so that two of them are
      // never back to back by chance (an allocator may place them so).
      const size_t gap = decl.role == BufferRole::Weight ? kAlign : 0;
      MLART_ASSIGN_OR_RETURN(t.owned, device_.allocate(t.host.size() + gap));
      t.data = t.owned.data();
    }
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
  auto decl = [&](const char *name) -> const BufferDecl & {
    return tensors_.at(name).decl;
  };
  MLART_RETURN_IF_ERROR(
      checkStepBuffer(decl("slot_mapping"), DType::I64, 1, -1));
  MLART_RETURN_IF_ERROR(
      checkStepBuffer(decl("block_table"), DType::I32, 2, -1));
  tokens_ = decl("slot_mapping").sizes[0];
  requests_ = decl("block_table").sizes[0];
  maxBlocks_ = decl("block_table").sizes[1];
  MLART_RETURN_IF_ERROR(
      checkStepBuffer(decl("positions"), DType::I64, 1, tokens_));
  MLART_RETURN_IF_ERROR(
      checkStepBuffer(decl("seq_lens"), DType::I32, 1, requests_));
  if (prefill_) {
    MLART_RETURN_IF_ERROR(
        checkStepBuffer(decl("query_start_loc"), DType::I32, 1, requests_ + 1));
    if (tokens_ < requests_)
      return invalidArgument("a prefill step needs at least one new token a "
                             "request (" +
                             std::to_string(tokens_) + " tokens, " +
                             std::to_string(requests_) + " requests)");
  }
  if (!prefill_ && tokens_ != requests_)
    return invalidArgument("a decode step has one token a request");
  if (artifact_->caches().empty())
    return invalidArgument("the artifact declares no cache");
  // Token counts the harness computes from these (positions, sequence
  // lengths, cache blocks) must stay far from int32 and int64 overflow.
  constexpr int64_t kMaxTableTokens = int64_t(1) << 30;
  const int64_t blockSize = artifact_->caches()[0].desc.blockSize;
  if (blockSize < 1 || maxBlocks_ > kMaxTableTokens / blockSize ||
      requests_ > kMaxTableTokens / maxBlocks_)
    return invalidArgument("the block table [" + std::to_string(requests_) +
                           ", " + std::to_string(maxBlocks_) +
                           "] with blocks of " + std::to_string(blockSize) +
                           " tokens is larger than mla-run serves");
  return Status::success();
}

Status Harness::continueFrom(Harness &prefill, const Artifact &artifact,
                             int64_t steps) {
  MLART_RETURN_IF_ERROR(allocateTensors(artifact));
  MLART_RETURN_IF_ERROR(loadBoundInputs());
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
  // Each term is bounded first, so the sum cannot overflow.
  const int64_t capacity = maxBlocks_ * blockSize;
  const int64_t needed = options_.context < 0 || options_.context > capacity ||
                                 options_.steps < 0 || options_.steps > capacity
                             ? capacity + 1
                             : options_.context + perRequest * options_.steps;
  if (needed > capacity)
    return invalidArgument(
        "--context " + std::to_string(options_.context) + " plus --steps " +
        std::to_string(options_.steps) + " of " + std::to_string(perRequest) +
        " tokens a request exceed the block table's capacity of " +
        std::to_string(capacity) + " tokens");

  // Weights and other inputs: fixed for the whole run.
  std::set<std::string> cacheScales;
  for (const CacheDecl &decl : artifact.caches())
    if (decl.scaleBuffer != kNoIndex)
      cacheScales.insert(artifact.buffers()[decl.scaleBuffer].name);
  for (auto &[name, t] : tensors_) {
    if (t.decl.role == BufferRole::Weight) {
      if (cacheScales.count(name)) {
        storeFromFloat(t.host.data(), t.decl.dtype, 0, kDefaultCacheScale);
      } else if (const RopeTableParams *rope =
                     ropeTableParams(artifact, name, t.decl)) {
        // The table the model expects: plain or YaRN rope, cos then sin.
        MLART_ASSIGN_OR_RETURN(
            const std::vector<float> table,
            ropeCosSinTable(t.decl.sizes[0], t.decl.sizes[1], *rope));
        for (size_t i = 0; i < table.size(); ++i)
          storeFromFloat(t.host.data(), t.decl.dtype, i, table[i]);
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
    // The context rows are written with the scale the step will read: the
    // artifact's scale buffer (an --input file may set it), else the default.
    float scale = kDefaultCacheScale;
    if (decl.scaleBuffer != kNoIndex) {
      const std::string &name = artifact.buffers()[decl.scaleBuffer].name;
      scale = loadAsFloat(tensors_.at(name).host.data(), DType::F32, 0);
      if (!std::isfinite(scale) || scale <= 0.0f)
        return invalidArgument("the scale of cache '" + decl.name + "' ('" +
                               name + "') is " + std::to_string(scale) +
                               "; it must be finite and > 0");
    }
    MLART_ASSIGN_OR_RETURN(KVCache cache,
                           KVCache::create(device_, desc, scale));
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
        MLART_ASSIGN_OR_RETURN(t->owned, device_.allocate(t->host.size()));
        t->data = t->owned.data();
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
      MLART_RETURN_IF_ERROR(device_.memset(t.data, 0xff,
                                           t.bytes())); // poison
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

} // namespace mlarun
