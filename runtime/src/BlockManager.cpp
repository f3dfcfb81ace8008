//===- BlockManager.cpp - Block allocation, tables, hashing and guarding --===//
#include "mlart/BlockManager.h"

#include <string>

namespace mlart {

namespace {
/// splitmix64 finaliser: cheap and well mixed, enough for a table key (the
/// stored tokens settle collisions).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string reqName(RequestId id) { return "request " + std::to_string(id); }
} // namespace

BlockManager::BlockManager(const BlockManagerConfig &config)
    : config_(config), blocks_(size_t(config.numBlocks)),
      protect_(size_t(config.numBlocks), 0),
      refused_(std::make_unique<uint64_t>(0)) {
  for (int64_t b = 1; b < config.numBlocks; ++b)
    freeList_.push_back(int32_t(b));
  // The null block is always protected: only padding points at it.
  protect_[0] = 1;
}

StatusOr<BlockManager> BlockManager::create(const BlockManagerConfig &config) {
  if (config.numBlocks < 2)
    return invalidArgument("block manager needs num_blocks >= 2 (block 0 is "
                           "the null block), got " +
                           std::to_string(config.numBlocks));
  if (config.numBlocks > INT32_MAX)
    return invalidArgument("block ids are i32: num_blocks too large");
  if (config.blockSize <= 0)
    return invalidArgument("block size must be > 0, got " +
                           std::to_string(config.blockSize));
  return BlockManager(config);
}

uint64_t BlockManager::hashBlock(uint64_t parent, const int32_t *tokens,
                                 int64_t n) {
  uint64_t h = mix(parent ^ 0x6d6c6172745f6b76ull);
  for (int64_t i = 0; i < n; ++i)
    h = mix(h ^ uint64_t(uint32_t(tokens[i])));
  // 0 means "no parent"; keep real hashes away from it.
  return h ? h : 1;
}

int32_t BlockManager::lookup(uint64_t hash, uint64_t parent,
                             const int32_t *tokens) const {
  auto it = hashToBlock_.find(hash);
  if (it == hashToBlock_.end())
    return -1;
  const BlockInfo &info = blocks_[size_t(it->second)];
  if (info.parentHash != parent)
    return -1;
  for (int64_t i = 0; i < config_.blockSize; ++i)
    if (info.tokens[size_t(i)] != tokens[i])
      return -1;
  return it->second;
}

void BlockManager::unregister(int32_t block) {
  BlockInfo &info = blocks_[size_t(block)];
  hashToBlock_.erase(info.hash);
  info.hashed = false;
  info.hash = 0;
  info.parentHash = 0;
  info.tokens.clear();
  protect_[size_t(block)] = 0;
}

int32_t BlockManager::takeBlock() {
  int32_t block;
  if (!freeList_.empty()) {
    block = freeList_.front();
    freeList_.pop_front();
  } else {
    block = evictable_.front();
    evictable_.pop_front();
    blocks_[size_t(block)].inLru = false;
    unregister(block);
    ++evictions_;
  }
  blocks_[size_t(block)].refCount = 1;
  return block;
}

void BlockManager::releaseBlock(int32_t block) {
  BlockInfo &info = blocks_[size_t(block)];
  if (--info.refCount > 0)
    return;
  if (info.hashed) {
    evictable_.push_back(block);
    info.lruPos = std::prev(evictable_.end());
    info.inLru = true;
  } else {
    freeList_.push_back(block);
  }
}

StatusOr<int64_t> BlockManager::addRequest(RequestId id, const int32_t *tokens,
                                           int64_t numTokens) {
  if (requests_.count(id))
    return failedPrecondition(reqName(id) + " already exists");
  if (numTokens < 0 || (numTokens > 0 && tokens == nullptr))
    return invalidArgument(reqName(id) + ": bad token array");

  // Longest cached prefix of whole blocks, leaving at least the last token
  // to compute (the step needs its logits; its block must be private).
  std::vector<int32_t> hits;
  uint64_t parent = 0;
  if (config_.enablePrefixCaching) {
    const int64_t bs = config_.blockSize;
    for (int64_t b = 0; (b + 1) * bs <= numTokens - 1; ++b) {
      uint64_t h = hashBlock(parent, tokens + b * bs, bs);
      int32_t block = lookup(h, parent, tokens + b * bs);
      if (block < 0)
        break;
      hits.push_back(block);
      parent = h;
    }
  }
  int64_t hitFromLru = 0;
  for (int32_t b : hits)
    if (blocks_[size_t(b)].refCount == 0)
      ++hitFromLru;
  const int64_t needed = blocksFor(numTokens) - int64_t(hits.size());
  if (needed > numFreeBlocks() - hitFromLru)
    return resourceExhausted(reqName(id) + " needs " + std::to_string(needed) +
                             " new blocks, " +
                             std::to_string(numFreeBlocks() - hitFromLru) +
                             " available");

  Request req;
  req.tokens.assign(tokens, tokens + numTokens);
  for (int32_t b : hits) {
    BlockInfo &info = blocks_[size_t(b)];
    if (info.refCount == 0 && info.inLru) {
      evictable_.erase(info.lruPos);
      info.inLru = false;
    }
    ++info.refCount;
    req.blocks.push_back(b);
  }
  for (int64_t i = 0; i < needed; ++i)
    req.blocks.push_back(takeBlock());
  const int64_t hitTokens = int64_t(hits.size()) * config_.blockSize;
  req.numComputed = hitTokens;
  req.numHashed = int64_t(hits.size());
  req.lastHash = parent;
  requests_.emplace(id, std::move(req));
  if (config_.enablePrefixCaching) {
    queriedTokens_ += numTokens;
    hitTokens_ += hitTokens;
  }
  return hitTokens;
}

Status BlockManager::appendTokens(RequestId id, const int32_t *tokens,
                                  int64_t numTokens) {
  auto it = requests_.find(id);
  if (it == requests_.end())
    return invalidArgument("unknown " + reqName(id));
  if (numTokens < 0 || (numTokens > 0 && tokens == nullptr))
    return invalidArgument(reqName(id) + ": bad token array");
  Request &req = it->second;
  const int64_t needed =
      blocksFor(int64_t(req.tokens.size()) + numTokens) -
      int64_t(req.blocks.size());
  if (needed > numFreeBlocks())
    return resourceExhausted(reqName(id) + " needs " + std::to_string(needed) +
                             " new blocks, " + std::to_string(numFreeBlocks()) +
                             " available");
  req.tokens.insert(req.tokens.end(), tokens, tokens + numTokens);
  for (int64_t i = 0; i < needed; ++i)
    req.blocks.push_back(takeBlock());
  return Status::success();
}

Status BlockManager::commitComputed(RequestId id, int64_t numComputed) {
  auto it = requests_.find(id);
  if (it == requests_.end())
    return invalidArgument("unknown " + reqName(id));
  Request &req = it->second;
  if (numComputed < req.numComputed ||
      numComputed > int64_t(req.tokens.size()))
    return invalidArgument(reqName(id) + ": computed tokens must grow within [" +
                           std::to_string(req.numComputed) + ", " +
                           std::to_string(req.tokens.size()) + "], got " +
                           std::to_string(numComputed));
  req.numComputed = numComputed;
  if (!config_.enablePrefixCaching)
    return Status::success();
  const int64_t bs = config_.blockSize;
  while ((req.numHashed + 1) * bs <= req.numComputed) {
    const int32_t *blockTokens = req.tokens.data() + req.numHashed * bs;
    uint64_t h = hashBlock(req.lastHash, blockTokens, bs);
    int32_t block = req.blocks[size_t(req.numHashed)];
    BlockInfo &info = blocks_[size_t(block)];
    // A concurrent request may have registered the same prefix first; this
    // copy then stays private (and writable) and is freed normally.
    if (!hashToBlock_.count(h) && !info.hashed) {
      info.hashed = true;
      info.hash = h;
      info.parentHash = req.lastHash;
      info.tokens.assign(blockTokens, blockTokens + bs);
      hashToBlock_.emplace(h, block);
      protect_[size_t(block)] = 1;
    }
    req.lastHash = h;
    ++req.numHashed;
  }
  return Status::success();
}

Status BlockManager::freeRequest(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end())
    return invalidArgument("unknown " + reqName(id));
  const std::vector<int32_t> &blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b)
    releaseBlock(*b);
  requests_.erase(it);
  return Status::success();
}

StatusOr<int64_t> BlockManager::numTokens(RequestId id) const {
  auto it = requests_.find(id);
  if (it == requests_.end())
    return invalidArgument("unknown " + reqName(id));
  return int64_t(it->second.tokens.size());
}

StatusOr<int64_t> BlockManager::numComputedTokens(RequestId id) const {
  auto it = requests_.find(id);
  if (it == requests_.end())
    return invalidArgument("unknown " + reqName(id));
  return it->second.numComputed;
}

StatusOr<std::vector<int32_t>> BlockManager::blockTable(RequestId id) const {
  auto it = requests_.find(id);
  if (it == requests_.end())
    return invalidArgument("unknown " + reqName(id));
  return it->second.blocks;
}

Status BlockManager::buildBlockTable(const RequestId *ids, int64_t numRequests,
                                     int64_t maxBlocks, int32_t *out) const {
  if (numRequests < 0 || maxBlocks < 0 ||
      (numRequests > 0 && (ids == nullptr || out == nullptr)))
    return invalidArgument("buildBlockTable: bad arguments");
  for (int64_t r = 0; r < numRequests; ++r) {
    auto it = requests_.find(ids[r]);
    if (it == requests_.end())
      return invalidArgument("buildBlockTable: unknown " + reqName(ids[r]));
    if (int64_t(it->second.blocks.size()) > maxBlocks)
      return outOfRange("buildBlockTable: " + reqName(ids[r]) + " has " +
                        std::to_string(it->second.blocks.size()) +
                        " blocks, table has room for " +
                        std::to_string(maxBlocks));
  }
  for (int64_t r = 0; r < numRequests; ++r) {
    const std::vector<int32_t> &blocks = requests_.at(ids[r]).blocks;
    for (int64_t j = 0; j < maxBlocks; ++j)
      out[r * maxBlocks + j] =
          j < int64_t(blocks.size()) ? blocks[size_t(j)] : 0;
  }
  return Status::success();
}

Status BlockManager::buildSlotMapping(const ScheduledChunk *chunks,
                                      int64_t numChunks, int64_t paddedLength,
                                      int64_t *out) const {
  if (numChunks < 0 || paddedLength < 0 ||
      (numChunks > 0 && chunks == nullptr) ||
      (paddedLength > 0 && out == nullptr))
    return invalidArgument("buildSlotMapping: bad arguments");
  int64_t total = 0;
  for (int64_t c = 0; c < numChunks; ++c) {
    const ScheduledChunk &ch = chunks[c];
    auto it = requests_.find(ch.request);
    if (it == requests_.end())
      return invalidArgument("buildSlotMapping: unknown " +
                             reqName(ch.request));
    const int64_t n = int64_t(it->second.tokens.size());
    if (ch.start < 0 || ch.count < 0 || ch.start + ch.count > n)
      return outOfRange("buildSlotMapping: " + reqName(ch.request) +
                        " schedules tokens [" + std::to_string(ch.start) +
                        ", " + std::to_string(ch.start + ch.count) +
                        ") but has " + std::to_string(n));
    total += ch.count;
  }
  if (total > paddedLength)
    return invalidArgument("buildSlotMapping: " + std::to_string(total) +
                           " scheduled tokens exceed the padded length " +
                           std::to_string(paddedLength));
  const int64_t bs = config_.blockSize;
  int64_t k = 0;
  for (int64_t c = 0; c < numChunks; ++c) {
    const std::vector<int32_t> &blocks = requests_.at(chunks[c].request).blocks;
    for (int64_t pos = chunks[c].start; pos < chunks[c].start + chunks[c].count;
         ++pos)
      out[k++] = int64_t(blocks[size_t(pos / bs)]) * bs + pos % bs;
  }
  for (; k < paddedLength; ++k)
    out[k] = -1;
  return Status::success();
}

StatusOr<std::vector<int64_t>>
BlockManager::buildSlotMapping(const std::vector<ScheduledChunk> &chunks,
                               int64_t paddedLength) const {
  if (paddedLength < 0)
    return invalidArgument("buildSlotMapping: negative padded length");
  std::vector<int64_t> out(static_cast<size_t>(paddedLength));
  MLART_RETURN_IF_ERROR(buildSlotMapping(chunks.data(), int64_t(chunks.size()),
                                         paddedLength, out.data()));
  return out;
}

int32_t BlockManager::refCount(int32_t block) const {
  if (block < 0 || block >= config_.numBlocks)
    return 0;
  return blocks_[size_t(block)].refCount;
}

bool BlockManager::isCached(int32_t block) const {
  return block >= 0 && block < config_.numBlocks &&
         blocks_[size_t(block)].hashed;
}

PrefixCacheStats BlockManager::stats() const {
  PrefixCacheStats s;
  s.queriedTokens = queriedTokens_;
  s.hitTokens = hitTokens_;
  s.cachedBlocks = int64_t(hashToBlock_.size());
  s.evictions = evictions_;
  s.freeBlocks = numFreeBlocks();
  s.refusedWrites = *refused_;
  return s;
}

StatusOr<KVCacheRef> BlockManager::guard(KVCacheRef ref) {
  if (ref.desc.numBlocks != config_.numBlocks ||
      ref.desc.blockSize != config_.blockSize)
    return invalidArgument(
        "guard: cache has " + std::to_string(ref.desc.numBlocks) + " blocks of " +
        std::to_string(ref.desc.blockSize) + ", block manager " +
        std::to_string(config_.numBlocks) + " of " +
        std::to_string(config_.blockSize));
  if (checked_) {
    ref.writeProtect = protect_.data();
    ref.refusedWrites = refused_.get();
  }
  return ref;
}

} // namespace mlart
