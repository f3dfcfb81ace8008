//===- BlockManager.h - Paged-cache block allocator with prefix caching ---===//
//
// Host-side bookkeeping for the paged KV cache: which physical block holds
// which tokens of which request. Block 0 is the null block: it is never
// handed out and every unused block-table entry points at it, so a kernel
// that reads a padded table reads harmless memory instead of a live page.
//
// Prefix caching: once every token of a full block has been written
// (commitComputed), the block gets a chained hash of (parent hash, token
// ids). A later request whose prompt starts with the same tokens shares the
// same physical blocks (reference count + 1). A hashed block whose last user
// is freed stays cached until an allocation needs the space (LRU eviction).
//
// Checked mode guards those cached pages (vLLM #36282, #39444): the null
// block and every hashed block are flagged in a per-block write-protect
// array that kernels receive through KVCacheRef::writeProtect; a write into
// a flagged block is refused with PermissionDenied and counted.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_BLOCKMANAGER_H
#define MLART_BLOCKMANAGER_H

#include "mlart/Kernels.h"
#include "mlart/StatusOr.h"

#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

namespace mlart {

/// Caller-chosen request identifier.
using RequestId = int64_t;

/// Static configuration of a BlockManager.
struct BlockManagerConfig {
  /// Physical blocks including the null block 0; must be >= 2.
  int64_t numBlocks = 0;
  /// Tokens per block.
  int64_t blockSize = 16;
  /// Hash full blocks and share them between requests.
  bool enablePrefixCaching = true;
};

/// Tokens [start, start + count) of one request scheduled in a step.
struct ScheduledChunk {
  RequestId request = 0;
  int64_t start = 0;
  int64_t count = 0;
};

/// Counters of the prefix cache and of checked mode.
struct PrefixCacheStats {
  int64_t queriedTokens = 0;  ///< prompt tokens looked up by addRequest
  int64_t hitTokens = 0;      ///< of those, found in the cache
  int64_t cachedBlocks = 0;   ///< blocks currently registered by hash
  int64_t evictions = 0;      ///< hashed blocks reclaimed for new data
  int64_t freeBlocks = 0;     ///< blocks an allocation could use now
  uint64_t refusedWrites = 0; ///< rows refused by checked mode
};

/// Allocator, block tables, slot mappings and prefix cache of one paged
/// cache (all layers share one block manager). Not thread-safe: the
/// scheduler owns it. Movable; the write-protect array and the refused-write
/// counter keep their addresses across moves.
class BlockManager {
public:
  /// Validates `config` and creates a manager with every block but 0 free.
  static StatusOr<BlockManager> create(const BlockManagerConfig &config);

  BlockManager(BlockManager &&) = default;
  BlockManager &operator=(BlockManager &&) = default;

  int64_t numBlocks() const { return config_.numBlocks; }
  int64_t blockSize() const { return config_.blockSize; }
  bool prefixCachingEnabled() const { return config_.enablePrefixCaching; }
  /// Blocks an allocation could use now (free plus evictable cached ones).
  int64_t numFreeBlocks() const {
    return int64_t(freeList_.size() + evictable_.size());
  }

  /// Registers request `id` with its prompt and allocates blocks for every
  /// prompt token, sharing cached prefix blocks. Returns the number of
  /// leading tokens already in the cache (a multiple of the block size; at
  /// most numTokens - 1, so the last token is always computed and its block
  /// is never a shared one). On error nothing changes.
  StatusOr<int64_t> addRequest(RequestId id, const int32_t *tokens,
                               int64_t numTokens);
  /// Appends tokens (e.g. one decoded token) and allocates blocks as needed.
  Status appendTokens(RequestId id, const int32_t *tokens, int64_t numTokens);
  /// Declares that tokens [0, numComputed) of `id` are now in the cache.
  /// Full blocks among them get hashed, registered and (in checked mode)
  /// write-protected. Hashing waits for this call because a block must not
  /// be protected before the step that fills it has run.
  Status commitComputed(RequestId id, int64_t numComputed);
  /// Releases the request's blocks (tail first, so tails are evicted first).
  Status freeRequest(RequestId id);

  bool hasRequest(RequestId id) const { return requests_.count(id) != 0; }
  /// Tokens of the request (prompt + appended).
  StatusOr<int64_t> numTokens(RequestId id) const;
  /// Tokens already committed to the cache.
  StatusOr<int64_t> numComputedTokens(RequestId id) const;
  /// The physical blocks of the request, in logical order.
  StatusOr<std::vector<int32_t>> blockTable(RequestId id) const;

  /// Writes `numRequests` rows of `maxBlocks` i32 block ids; entries past a
  /// request's table point at the null block 0.
  Status buildBlockTable(const RequestId *ids, int64_t numRequests,
                         int64_t maxBlocks, int32_t *out) const;
  /// Writes the slot of every scheduled token, chunk after chunk, into
  /// `out[paddedLength]` i64; entries after the last token are -1 (padding).
  /// slot = table[pos / blockSize] * blockSize + pos % blockSize.
  Status buildSlotMapping(const ScheduledChunk *chunks, int64_t numChunks,
                          int64_t paddedLength, int64_t *out) const;
  /// Same, into a new vector of `paddedLength` entries.
  StatusOr<std::vector<int64_t>>
  buildSlotMapping(const std::vector<ScheduledChunk> &chunks,
                   int64_t paddedLength) const;

  /// Reference count of a physical block (0 for free and cached-free ones).
  int32_t refCount(int32_t block) const;
  /// True when `block` is registered in the prefix cache.
  bool isCached(int32_t block) const;
  PrefixCacheStats stats() const;

  /// Turns checked mode on or off.
  void setCheckedMode(bool enabled) { checked_ = enabled; }
  bool checkedMode() const { return checked_; }
  /// numBlocks flags (null block and hashed blocks set) in checked mode,
  /// nullptr otherwise.
  const uint8_t *writeProtect() const {
    return checked_ ? protect_.data() : nullptr;
  }
  /// Rows refused so far by kernels that received guard()'s ref.
  uint64_t refusedWrites() const { return *refused_; }
  /// Returns `ref` with this manager's write-protect flags and refused-write
  /// counter attached in checked mode (unchanged otherwise). Fails if the
  /// cache has a different number of blocks.
  StatusOr<KVCacheRef> guard(KVCacheRef ref);

private:
  explicit BlockManager(const BlockManagerConfig &config);

  struct Request {
    std::vector<int32_t> tokens;
    std::vector<int32_t> blocks;
    int64_t numComputed = 0;
    /// Leading blocks already hashed (matched or registered).
    int64_t numHashed = 0;
    /// Hash of block numHashed - 1 (the chain's parent), 0 for none.
    uint64_t lastHash = 0;
  };
  struct BlockInfo {
    int32_t refCount = 0;
    bool hashed = false;
    uint64_t hash = 0;
    uint64_t parentHash = 0;
    /// Token ids of a hashed block, compared on lookup so that a hash
    /// collision can never alias two different prefixes.
    std::vector<int32_t> tokens;
    /// Position in evictable_ when hashed and unreferenced.
    std::list<int32_t>::iterator lruPos;
    bool inLru = false;
  };

  static uint64_t hashBlock(uint64_t parent, const int32_t *tokens,
                            int64_t n);
  /// The cached block holding exactly these tokens after `parent`, or -1.
  int32_t lookup(uint64_t hash, uint64_t parent, const int32_t *tokens) const;
  int64_t blocksFor(int64_t numTokens) const {
    return (numTokens + config_.blockSize - 1) / config_.blockSize;
  }
  /// Takes a free block, evicting the least recently used cached one if
  /// needed. Callers check numFreeBlocks() first.
  int32_t takeBlock();
  void releaseBlock(int32_t block);
  void unregister(int32_t block);

  BlockManagerConfig config_;
  std::vector<BlockInfo> blocks_;
  /// Never-hashed free blocks, handed out first so cached data lives longer.
  std::list<int32_t> freeList_;
  /// Hashed blocks with no user; front = least recently used.
  std::list<int32_t> evictable_;
  std::unordered_map<uint64_t, int32_t> hashToBlock_;
  std::unordered_map<RequestId, Request> requests_;
  std::vector<uint8_t> protect_;
  std::unique_ptr<uint64_t> refused_;
  bool checked_ = false;
  int64_t queriedTokens_ = 0;
  int64_t hitTokens_ = 0;
  int64_t evictions_ = 0;
};

} // namespace mlart

#endif // MLART_BLOCKMANAGER_H
