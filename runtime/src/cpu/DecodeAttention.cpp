//===- DecodeAttention.cpp - Absorbed MLA decode attention, split-KV ------===//
//
// Each (sequence, split) pair attends over a contiguous range of pages and
// leaves a partial output normalised by its own softmax sum, plus the log of
// that sum (LSE); a combine step merges the partials with LSE weights. This is
// the shape of the GPU kernels (FlashMLA, FlashInfer), so the reference runs
// the same arithmetic over the same split boundaries.
//
//===----------------------------------------------------------------------===//
#include "cpu/CacheWrite.h"
#include "cpu/CpuKernels.h"
#include "cpu/IndexAccess.h"
#include "cpu/TensorAccess.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <vector>

namespace mlart::cpu {
namespace {

/// The heuristic aims for splits of about this many tokens: long enough to
/// amortise the combine, short enough to spread one sequence over many SMs.
constexpr int64_t kTargetSplitTokens = 256;
/// Caps the heuristic, bounding the partial buffers the combine reads.
constexpr int64_t kMaxHeuristicSplits = 64;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// Pages per split for a sequence of `usedBlocks` pages, from the requested
/// split count (0: heuristic). Rounding the page count up means the last
/// split may be shorter and none is empty.
int64_t blocksPerSplit(int64_t seqLen, int64_t usedBlocks, int numSplits) {
  int64_t splits = numSplits > 0
                       ? int64_t(numSplits)
                       : std::clamp<int64_t>((seqLen + kTargetSplitTokens - 1) /
                                                 kTargetSplitTokens,
                                             1, kMaxHeuristicSplits);
  splits = std::min(splits, usedBlocks);
  return (usedBlocks + splits - 1) / splits;
}

} // namespace

Status checkDecodeAttentionShapes(const DecodeAttentionArgs &a) {
  const KVCacheDesc &desc = a.cache.desc;
  MLART_RETURN_IF_ERROR(desc.validate());
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.q, "q", 3));
  const int64_t batch = a.q.sizes[0], heads = a.q.sizes[1];
  MLART_RETURN_IF_ERROR(checkDim(a.q, "q", 2, desc.rowValues()));
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.out, "out", 3));
  MLART_RETURN_IF_ERROR(checkDim(a.out, "out", 0, batch));
  MLART_RETURN_IF_ERROR(checkDim(a.out, "out", 1, heads));
  MLART_RETURN_IF_ERROR(checkDim(a.out, "out", 2, desc.latentRank));
  if (a.lse.present()) {
    MLART_RETURN_IF_ERROR(checkTypedTensor(a.lse, "lse", 2, DType::F32));
    MLART_RETURN_IF_ERROR(checkDim(a.lse, "lse", 0, batch));
    MLART_RETURN_IF_ERROR(checkDim(a.lse, "lse", 1, heads));
  }
  if (a.numSplits < 0)
    return invalidArgument("numSplits must be >= 0, got " +
                           std::to_string(a.numSplits));
  // The schedule is the device's business (the CPU computes one way), but
  // a value outside the enum is a caller's error on every device.
  if (!isDecodeSchedule(int(a.schedule)))
    return invalidArgument("unknown decode schedule " +
                           std::to_string(int(a.schedule)));
  return checkPagedLayout(a.cache, a.blockTable, a.seqLens, "seqLens", batch);
}

namespace {

/// The shapes, then every sequence's rows (host memory on the CPU).
Status validate(const DecodeAttentionArgs &a) {
  MLART_RETURN_IF_ERROR(checkDecodeAttentionShapes(a));
  return checkPagedRead(a.cache, a.blockTable, a.seqLens, "seqLens",
                        a.q.sizes[0]);
}

/// The rows a decode step writes, encoded as the cache stores them and
/// looked up by slot: the one-pass decodeAttentionWithUpdate attends over
/// these instead of reading the cache back, the shape of the CUDA kernel
/// that writes and attends in one launch. The last token of a slot wins,
/// as in cacheUpdate.
class StepRows {
public:
  explicit StepRows(const DecodeAttentionWithUpdateArgs &a) : cache_(a.cache) {
    std::unordered_map<int64_t, int64_t> lastToken;
    for (int64_t t = 0; t < a.slotMapping.sizes[0]; ++t) {
      const int64_t slot = loadIndex(a.slotMapping, t);
      if (slot >= 0)
        lastToken[slot] = t;
    }
    // A dense one-row-per-block view over the staging rows: the same
    // encoder as the cache (writeCacheRow), so the bits are the cache's.
    KVCacheRef staged = a.cache;
    staged.desc.blockSize = 1;
    staged.desc.numBlocks = std::max<int64_t>(1, int64_t(lastToken.size()));
    staged.blockStride = 0;
    staged.writeProtect = nullptr;
    staged.refusedWrites = nullptr;
    const int64_t rowBytes = a.cache.desc.rowBytes();
    bytes_.resize(size_t(staged.desc.numBlocks * rowBytes));
    staged.data = bytes_.data();
    int64_t index = 0;
    for (const auto &[slot, t] : lastToken) {
      writeCacheRow(staged, index, a.kvC, a.kPe, t);
      rowOf_[slot] = bytes_.data() + index++ * rowBytes;
    }
  }

  /// This step's encoded row for `slot`, or null when the step leaves the
  /// slot alone.
  const uint8_t *find(int64_t slot) const {
    auto it = rowOf_.find(slot);
    return it == rowOf_.end() ? nullptr : it->second;
  }

  /// Stores every staged row in its cache slot.
  void commit() const {
    const int64_t rowBytes = cache_.desc.rowBytes();
    for (const auto &[slot, row] : rowOf_)
      std::memcpy(static_cast<uint8_t *>(cache_.data) + cache_.slotOffset(slot),
                  row, size_t(rowBytes));
  }

private:
  const KVCacheRef &cache_;
  std::vector<uint8_t> bytes_;
  std::unordered_map<int64_t, const uint8_t *> rowOf_;
};

/// Online-softmax attention of every head of one sequence over pages
/// [firstBlock, endBlock). Writes the split's normalised output [H, latent]
/// and its LSE [H]. With `stepRows`, a row the step writes is read from it
/// instead of the cache.
class SplitAttention {
public:
  SplitAttention(const DecodeAttentionArgs &a, int64_t heads,
                 const StepRows *stepRows)
      : a_(a), stepRows_(stepRows), heads_(heads),
        rowValues_(a.cache.desc.rowValues()), latent_(a.cache.desc.latentRank),
        blockSize_(a.cache.desc.blockSize),
        rows_(size_t(blockSize_ * rowValues_)), scores_(size_t(blockSize_)),
        max_(size_t(heads)), sum_(size_t(heads)) {}

  void run(int64_t seq, int64_t seqLen, const float *q, int64_t firstBlock,
           int64_t endBlock, float *out, float *lse) {
    std::fill(max_.begin(), max_.end(), kNegInf);
    std::fill(sum_.begin(), sum_.end(), 0.0f);
    std::fill(out, out + heads_ * latent_, 0.0f);
    for (int64_t blk = firstBlock; blk < endBlock; ++blk) {
      // Decode each valid row of the page once and reuse it for every head;
      // rows at or past seqLen are never touched.
      const int64_t first = blk * blockSize_;
      const int64_t valid = std::min(blockSize_, seqLen - first);
      for (int64_t j = 0; j < valid; ++j)
        decodeCacheRow(a_.cache.desc, row(seq, first + j), a_.cache.scale,
                       rows_.data() + j * rowValues_);
      for (int64_t h = 0; h < heads_; ++h)
        accumulate(h, q + h * rowValues_, valid, out + h * latent_);
    }
    for (int64_t h = 0; h < heads_; ++h) {
      const float inv = 1.0f / sum_[h];
      for (int64_t c = 0; c < latent_; ++c)
        out[h * latent_ + c] *= inv;
      lse[h] = max_[h] + std::log(sum_[h]);
    }
  }

private:
  const uint8_t *row(int64_t seq, int64_t pos) const {
    if (stepRows_)
      if (const uint8_t *staged =
              stepRows_->find(pagedSlot(a_.cache, a_.blockTable, seq, pos)))
        return staged;
    return pagedRow(a_.cache, a_.blockTable, seq, pos);
  }

  /// Folds `valid` decoded rows into head h's running max, sum and output.
  void accumulate(int64_t h, const float *q, int64_t valid, float *acc) {
    float blockMax = kNegInf;
    for (int64_t j = 0; j < valid; ++j) {
      scores_[j] =
          a_.softmaxScale * dot(q, rows_.data() + j * rowValues_, rowValues_);
      blockMax = std::max(blockMax, scores_[j]);
    }
    const float newMax = std::max(max_[h], blockMax);
    // exp(-inf) = 0 on the first page: the empty accumulator is discarded.
    const float rescale = std::exp(max_[h] - newMax);
    if (rescale != 1.0f) {
      for (int64_t c = 0; c < latent_; ++c)
        acc[c] *= rescale;
    }
    float blockSum = 0.0f;
    for (int64_t j = 0; j < valid; ++j) {
      const float p = std::exp(scores_[j] - newMax);
      blockSum += p;
      // V is the latent prefix of the same row.
      axpy(p, rows_.data() + j * rowValues_, acc, latent_);
    }
    sum_[h] = sum_[h] * rescale + blockSum;
    max_[h] = newMax;
  }

  const DecodeAttentionArgs &a_;
  const StepRows *stepRows_;
  const int64_t heads_, rowValues_, latent_, blockSize_;
  std::vector<float> rows_, scores_, max_, sum_;
};

} // namespace

namespace {
/// decodeAttention over validated arguments, reading this step's rows from
/// `stepRows` when given.
void attend(const DecodeAttentionArgs &args, const StepRows *stepRows) {
  const int64_t batch = args.q.sizes[0], heads = args.q.sizes[1];
  const int64_t rowValues = args.cache.desc.rowValues();
  const int64_t latent = args.cache.desc.latentRank;
  const int64_t blockSize = args.cache.desc.blockSize;

  SplitAttention split(args, heads, stepRows);
  std::vector<float> q(static_cast<size_t>(heads * rowValues));
  std::vector<float> partialOut, partialLse;
  std::vector<float> out(static_cast<size_t>(latent));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t seqLen = loadI32(args.seqLens, b);
    const int64_t usedBlocks = (seqLen + blockSize - 1) / blockSize;
    int64_t numSplits = 0;
    if (usedBlocks > 0) {
      for (int64_t h = 0; h < heads; ++h)
        loadRow(args.q, args.q.offset({b, h, 0}), rowValues,
                q.data() + h * rowValues);
      const int64_t perSplit =
          blocksPerSplit(seqLen, usedBlocks, args.numSplits);
      numSplits = (usedBlocks + perSplit - 1) / perSplit;
      partialOut.resize(size_t(numSplits * heads * latent));
      partialLse.resize(size_t(numSplits * heads));
      for (int64_t s = 0; s < numSplits; ++s)
        split.run(b, seqLen, q.data(), s * perSplit,
                  std::min(usedBlocks, (s + 1) * perSplit),
                  partialOut.data() + s * heads * latent,
                  partialLse.data() + s * heads);
    }

    // Combine: weight each split by exp(lse_s - max lse); an empty sequence
    // has no splits and yields zeros with lse -inf.
    for (int64_t h = 0; h < heads; ++h) {
      float maxLse = kNegInf;
      for (int64_t s = 0; s < numSplits; ++s)
        maxLse = std::max(maxLse, partialLse[s * heads + h]);
      std::fill(out.begin(), out.end(), 0.0f);
      float total = 0.0f;
      for (int64_t s = 0; s < numSplits; ++s) {
        const float w = std::exp(partialLse[s * heads + h] - maxLse);
        total += w;
        axpy(w, partialOut.data() + (s * heads + h) * latent, out.data(),
             latent);
      }
      if (total > 0.0f) {
        const float inv = 1.0f / total;
        for (float &v : out)
          v *= inv;
      }
      storeRow(args.out, args.out.offset({b, h, 0}), latent, out.data());
      if (args.lse.present())
        *reinterpret_cast<float *>(args.lse.bytesAt(args.lse.offset({b, h}))) =
            numSplits > 0 ? maxLse + std::log(total) : kNegInf;
    }
  }
}
} // namespace

Status decodeAttention(const DecodeAttentionArgs &args) {
  MLART_RETURN_IF_ERROR(validate(args));
  attend(args, nullptr);
  return Status::success();
}

Status decodeAttentionWithUpdate(const DecodeAttentionWithUpdateArgs &args) {
  const CacheUpdateArgs update = args.update();
  const DecodeAttentionArgs attention = args.attention();
  // Everything both halves check comes first (the lengths are inputs the
  // write does not change): a call refused on its arguments writes nothing.
  int64_t numTokens = 0;
  MLART_RETURN_IF_ERROR(validateCacheWrite(
      update.kvC, update.kPe, update.slotMapping, update.cache, numTokens));
  MLART_RETURN_IF_ERROR(validate(attention));
  // One pass, as the CUDA kernel: the attention takes this step's rows from
  // the inputs (encoded as the cache stores them), not from the cache, and
  // the rows are stored after it; the result is that of cacheUpdate then
  // decodeAttention, bit for bit.
  const StepRows stepRows(args);
  attend(attention, &stepRows);
  stepRows.commit();
  return Status::success();
}

} // namespace mlart::cpu
