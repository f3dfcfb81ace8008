//===- StridedCacheChecks.h - A strided cache view behaves like a dense one
//===//
//
// An engine's cache tensor may have a strided block dimension (a layer's
// [num_blocks, block_size, row] view of a layer-interleaved allocation).
// These checks run every kernel that touches a cache twice on one device:
// on a dense cache and on a KVCache::wrap view of the same rows whose blocks
// sit `gapBytes` apart inside a poisoned allocation. The results must agree
// (bit for bit where the same kernel runs, i.e. 16-byte-aligned strides) and
// no gap byte may change. The CPU and the CUDA suites share them.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_TEST_STRIDEDCACHECHECKS_H
#define MLART_TEST_STRIDEDCACHECHECKS_H

#include "KernelTestUtil.h"

#include "mlart/Device.h"
#include "mlart/KVCache.h"

#include <gtest/gtest.h>

#include <numeric>
#include <optional>
#include <string>

namespace mlart::stridedtest {

constexpr uint8_t kGapPoison = 0xA5;

struct StridedCase {
  CacheLayout layout;
  DType plainType;
  int64_t blockSize;
  int64_t gapBytes;
};

inline std::string caseName(const StridedCase &c) {
  return std::string(cacheLayoutName(c.layout)) + "_" + dtypeName(c.plainType) +
         "_bs" + std::to_string(c.blockSize) + "_gap" +
         std::to_string(c.gapBytes);
}

/// Host bytes mirrored into a device buffer of the same size.
class DeviceTensor {
public:
  DeviceTensor(Device &dev, kerneltest::HostTensor host)
      : host_(std::move(host)) {
    auto b = dev.allocate(host_.bytes().size());
    EXPECT_TRUE(b.ok()) << b.status().message();
    if (!b.ok())
      return;
    buffer_ = std::move(b).value();
    EXPECT_TRUE(dev.copyHostToDevice(buffer_.data(), host_.bytes().data(),
                                     host_.bytes().size())
                    .ok());
  }
  TensorRef ref() {
    TensorRef t = host_.ref();
    t.data = buffer_.data();
    return t;
  }
  std::vector<uint8_t> download(Device &dev) const {
    std::vector<uint8_t> out(host_.bytes().size());
    EXPECT_TRUE(
        dev.copyDeviceToHost(out.data(), buffer_.data(), out.size()).ok());
    return out;
  }

private:
  kerneltest::HostTensor host_;
  Buffer buffer_;
};

inline DeviceTensor uniform(Device &dev, std::mt19937 &rng, DType dtype,
                            std::vector<int64_t> sizes, double lo = -1.0,
                            double hi = 1.0) {
  kerneltest::HostTensor t(dtype, std::move(sizes));
  t.fillUniform(rng, lo, hi);
  return DeviceTensor(dev, std::move(t));
}

inline DeviceTensor poisoned(Device &dev, DType dtype,
                             std::vector<int64_t> sizes) {
  kerneltest::HostTensor t(dtype, std::move(sizes));
  t.poison();
  return DeviceTensor(dev, std::move(t));
}

inline DeviceTensor i32(Device &dev, std::vector<int64_t> sizes,
                        const std::vector<int32_t> &values) {
  return DeviceTensor(dev,
                      kerneltest::HostTensor::i32(std::move(sizes), values));
}

/// The same rows twice: a dense cache, and a wrapped view whose blocks are
/// blockBytes + gapBytes apart in an allocation poisoned with kGapPoison.
class CachePair {
public:
  CachePair(Device &dev, std::mt19937 &rng, const StridedCase &c,
            int64_t numBlocks)
      : dev_(dev), rows_(c.layout, c.plainType, numBlocks, c.blockSize) {
    rows_.fillRandom(rng);
    const KVCacheDesc &desc = rows_.desc();
    const float scale = rows_.ref().scale;
    auto dense = KVCache::create(dev, desc, scale);
    EXPECT_TRUE(dense.ok()) << dense.status().message();
    dense_.emplace(std::move(dense).value());
    stride_ = desc.blockSize * desc.rowBytes() + c.gapBytes;
    auto raw = dev.allocate(size_t(numBlocks * stride_));
    EXPECT_TRUE(raw.ok()) << raw.status().message();
    raw_ = std::move(raw).value();
    EXPECT_TRUE(dev.memset(raw_.data(), kGapPoison, raw_.size()).ok());
    auto view = KVCache::wrap(dev, desc, raw_.data(), stride_, scale);
    EXPECT_TRUE(view.ok()) << view.status().message();
    view_.emplace(std::move(view).value());
    for (KVCache *cache : {&*dense_, &*view_})
      EXPECT_TRUE(
          cache->writeBytes(0, rows_.bytes().data(), rows_.bytes().size())
              .ok());
  }

  KVCacheRef dense() const { return dense_->ref(); }
  KVCacheRef view() const { return view_->ref(); }
  const KVCacheDesc &desc() const { return rows_.desc(); }

  /// Both caches hold the same rows and the view's gaps are untouched.
  void expectSameRowsAndGapsIntact() const {
    std::vector<uint8_t> a(dense_->sizeBytes()), b(view_->sizeBytes());
    ASSERT_TRUE(dense_->readBytes(0, a.data(), a.size()).ok());
    ASSERT_TRUE(view_->readBytes(0, b.data(), b.size()).ok());
    const auto diff = std::mismatch(a.begin(), a.end(), b.begin());
    EXPECT_TRUE(diff.first == a.end())
        << "the strided view's rows differ from the dense cache's at byte "
        << (diff.first - a.begin()) << " (row "
        << (diff.first - a.begin()) / desc().rowBytes() << ")";
    std::vector<uint8_t> raw(raw_.size());
    ASSERT_TRUE(
        dev_.copyDeviceToHost(raw.data(), raw_.data(), raw.size()).ok());
    const int64_t blockBytes = desc().blockSize * desc().rowBytes();
    int64_t changed = 0;
    for (int64_t blk = 0; blk < desc().numBlocks; ++blk)
      for (int64_t i = blockBytes; i < stride_; ++i)
        changed += raw[size_t(blk * stride_ + i)] != kGapPoison;
    EXPECT_EQ(changed, 0) << "bytes between the view's blocks were written";
  }

private:
  Device &dev_;
  kerneltest::TestCache rows_;
  std::optional<KVCache> dense_, view_;
  Buffer raw_;
  int64_t stride_ = 0;
};

/// Largest |a - b| relative to max |a| over two tensors' elements.
inline double relDiff(const std::vector<uint8_t> &a,
                      const std::vector<uint8_t> &b, DType dtype) {
  const size_t n = a.size() / dtypeSize(dtype);
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = loadAsFloat(a.data(), dtype, i),
                 y = loadAsFloat(b.data(), dtype, i);
    if (std::isnan(x) || std::isnan(y))
      return INFINITY;
    diff = std::max(diff, std::fabs(x - y));
    scale = std::max(scale, std::fabs(x));
  }
  return scale > 0 ? diff / scale : diff;
}

/// Outputs of the dense and the strided run: bit for bit when the stride
/// keeps 16-byte alignment (the same kernel runs), else within bf16
/// rounding of each other (a device may pick an unaligned-row kernel).
inline void expectSameOutput(const std::vector<uint8_t> &dense,
                             const std::vector<uint8_t> &strided, DType dtype,
                             const StridedCase &c, const std::string &what) {
  if (c.gapBytes % 16 == 0)
    EXPECT_TRUE(dense == strided) << what << " differs";
  else
    EXPECT_LT(relDiff(dense, strided, dtype), 2e-2) << what;
}

/// Random distinct slots over the cache, a few -1 (skipped) among them.
inline std::vector<int32_t> randomSlots(std::mt19937 &rng, int64_t numSlots,
                                        int64_t count) {
  std::vector<int32_t> all(static_cast<size_t>(numSlots));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(size_t(count));
  for (size_t i = 3; i < all.size(); i += 7)
    all[i] = -1;
  return all;
}

/// cache_update and rope_cache_update (with q_pe) write the same rows.
inline void checkCacheWrites(Device &dev, std::mt19937 &rng,
                             const StridedCase &c) {
  const int64_t T = 40, numBlocks = 6, Hq = 4;
  CachePair caches(dev, rng, c, numBlocks);
  const KVCacheDesc &desc = caches.desc();
  const DType in = c.layout == CacheLayout::Plain ? c.plainType : DType::BF16;
  DeviceTensor kvC = uniform(dev, rng, in, {T, desc.latentRank});
  kerneltest::HostTensor kPeHost(in, {T, desc.ropeDim});
  kPeHost.fillUniform(rng);
  DeviceTensor kPe(dev, kPeHost);
  DeviceTensor slots = i32(dev, {T}, randomSlots(rng, desc.numSlots(), T));
  for (const KVCacheRef &cache : {caches.dense(), caches.view()}) {
    Status s = dev.kernels().cacheUpdate(
        {kvC.ref(), kPe.ref(), slots.ref(), cache}, nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  ASSERT_TRUE(dev.synchronize().ok());
  caches.expectSameRowsAndGapsIntact();

  // Rope + update: new slots, and the rotated q of both runs compared. Both
  // k_pe and q_pe are rotated in place, so each run gets fresh copies.
  std::vector<int32_t> positions(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t)
    positions[size_t(t)] = int32_t((t * 37) % 200);
  DeviceTensor pos = i32(dev, {T}, positions);
  kerneltest::HostTensor table(DType::F32, {200, desc.ropeDim});
  const std::vector<float> cs = ropeCosSinTable(200, desc.ropeDim);
  for (size_t i = 0; i < cs.size(); ++i)
    table.set(int64_t(i), cs[i]);
  DeviceTensor cosSin(dev, std::move(table));
  DeviceTensor slots2 = i32(dev, {T}, randomSlots(rng, desc.numSlots(), T));
  kerneltest::HostTensor qHost(DType::BF16, {T, Hq, desc.ropeDim});
  qHost.fillUniform(rng);
  std::vector<std::vector<uint8_t>> q;
  for (const KVCacheRef &cache : {caches.dense(), caches.view()}) {
    DeviceTensor qPe(dev, qHost), kPeRun(dev, kPeHost);
    RopeCacheUpdateArgs a;
    a.kvC = kvC.ref();
    a.kPe = kPeRun.ref();
    a.slotMapping = slots2.ref();
    a.cache = cache;
    a.positions = pos.ref();
    a.cosSin = cosSin.ref();
    a.qPe = qPe.ref();
    Status s = dev.kernels().ropeCacheUpdate(a, nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    q.push_back(qPe.download(dev));
  }
  caches.expectSameRowsAndGapsIntact();
  EXPECT_TRUE(q[0] == q[1]) << "rotated q_pe differs";
}

/// Block tables that scatter each sequence over the cache in random order.
inline std::vector<int32_t> randomTables(std::mt19937 &rng, int64_t batch,
                                         int64_t maxBlocks, int64_t numBlocks) {
  std::vector<int32_t> table(size_t(batch * maxBlocks));
  std::vector<int32_t> ids(static_cast<size_t>(numBlocks));
  std::iota(ids.begin(), ids.end(), 0);
  for (int64_t b = 0; b < batch; ++b) {
    std::shuffle(ids.begin(), ids.end(), rng);
    std::copy_n(ids.begin(), maxBlocks, table.begin() + b * maxBlocks);
  }
  return table;
}

/// decode_attention over the two caches gives the same out and lse.
inline void checkDecode(Device &dev, std::mt19937 &rng, const StridedCase &c,
                        int64_t heads) {
  const int64_t B = 3, numBlocks = 24;
  const int64_t maxBlocks = std::min<int64_t>(numBlocks, 320 / c.blockSize);
  CachePair caches(dev, rng, c, numBlocks);
  const KVCacheDesc &desc = caches.desc();
  const int64_t capacity = maxBlocks * c.blockSize;
  const std::vector<int32_t> lens = {int32_t(capacity),
                                     int32_t(capacity / 2 + 3), 1};
  DeviceTensor table =
      i32(dev, {B, maxBlocks}, randomTables(rng, B, maxBlocks, numBlocks));
  DeviceTensor seqLens = i32(dev, {B}, lens);
  DeviceTensor q = uniform(dev, rng, DType::BF16, {B, heads, desc.rowValues()});
  std::vector<std::vector<uint8_t>> out, lse;
  for (const KVCacheRef &cache : {caches.dense(), caches.view()}) {
    DeviceTensor o = poisoned(dev, DType::BF16, {B, heads, desc.latentRank});
    DeviceTensor l = poisoned(dev, DType::F32, {B, heads});
    DecodeAttentionArgs a;
    a.q = q.ref();
    a.cache = cache;
    a.blockTable = table.ref();
    a.seqLens = seqLens.ref();
    a.softmaxScale = 0.07f;
    a.out = o.ref();
    a.lse = l.ref();
    Status s = dev.kernels().decodeAttention(a, nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    out.push_back(o.download(dev));
    lse.push_back(l.download(dev));
  }
  expectSameOutput(out[0], out[1], DType::BF16, c,
                   "decode out, H=" + std::to_string(heads));
  expectSameOutput(lse[0], lse[1], DType::F32, c,
                   "decode lse, H=" + std::to_string(heads));
  caches.expectSameRowsAndGapsIntact();
}

/// prefill_attention whose context comes from the two caches.
inline void checkPrefillContext(Device &dev, std::mt19937 &rng,
                                const StridedCase &c) {
  const int64_t H = 4, nope = 128, rope = 64, vDim = 128, R = 2;
  const int64_t numBlocks = 16,
                maxBlocks = std::max<int64_t>(1, 96 / c.blockSize);
  CachePair caches(dev, rng, c, numBlocks);
  const KVCacheDesc &desc = caches.desc();
  const std::vector<int32_t> starts = {0, 5, 12};
  const int64_t T = starts.back();
  const int32_t capacity = int32_t(maxBlocks * c.blockSize);
  DeviceTensor q = uniform(dev, rng, DType::BF16, {T, H, nope + rope});
  DeviceTensor k = uniform(dev, rng, DType::BF16, {T, H, nope + rope});
  DeviceTensor v = uniform(dev, rng, DType::BF16, {T, H, vDim});
  DeviceTensor startLoc = i32(dev, {R + 1}, starts);
  DeviceTensor table =
      i32(dev, {R, maxBlocks}, randomTables(rng, R, maxBlocks, numBlocks));
  DeviceTensor ctxLens = i32(dev, {R}, {capacity, capacity / 2 + 1});
  DeviceTensor wUK =
      uniform(dev, rng, DType::BF16, {H, nope, desc.latentRank}, -0.1, 0.1);
  DeviceTensor wUV =
      uniform(dev, rng, DType::BF16, {H, desc.latentRank, vDim}, -0.1, 0.1);
  std::vector<std::vector<uint8_t>> out;
  for (const KVCacheRef &cache : {caches.dense(), caches.view()}) {
    DeviceTensor o = poisoned(dev, DType::BF16, {T, H, vDim});
    PrefillAttentionArgs a;
    a.q = q.ref();
    a.k = k.ref();
    a.v = v.ref();
    a.queryStartLoc = startLoc.ref();
    a.softmaxScale = 0.07f;
    a.out = o.ref();
    a.cache = cache;
    a.blockTable = table.ref();
    a.contextLens = ctxLens.ref();
    a.wUK = wUK.ref();
    a.wUV = wUV.ref();
    Status s = dev.kernels().prefillAttention(a, nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    out.push_back(o.download(dev));
  }
  expectSameOutput(out[0], out[1], DType::BF16, c, "prefill out");
  caches.expectSameRowsAndGapsIntact();
}

/// The cases both suites run: dense-aligned and odd gaps, each layout.
inline std::vector<StridedCase> stridedCases() {
  return {{CacheLayout::Plain, DType::BF16, 64, 4096},
          {CacheLayout::Plain, DType::BF16, 16, 1152},
          {CacheLayout::Plain, DType::BF16, 32, 8},
          {CacheLayout::Plain, DType::F32, 16, 64},
          {CacheLayout::Fp8PerTensor, DType::BF16, 64, 576},
          {CacheLayout::Fp8DsMla, DType::BF16, 64, 656}};
}

} // namespace mlart::stridedtest

#endif // MLART_TEST_STRIDEDCACHECHECKS_H
