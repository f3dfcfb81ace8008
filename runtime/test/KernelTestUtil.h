//===- KernelTestUtil.h - Host tensors, paged caches and comparisons ------===//
//
// Kernel tests keep every input twice: as the stored bits the kernel reads and
// as the exact values those bits represent, in double, for the float64
// references. Outputs start poisoned with NaN so an element a kernel forgets
// to write fails the comparison.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_TEST_KERNELTESTUTIL_H
#define MLART_TEST_KERNELTESTUTIL_H

#include "mlart/Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace mlart::kerneltest {

/// An owning, contiguous host tensor.
class HostTensor {
public:
  HostTensor() = default;
  HostTensor(DType dtype, std::vector<int64_t> sizes)
      : dtype_(dtype), sizes_(std::move(sizes)) {
    numel_ = 1;
    for (int64_t s : sizes_)
      numel_ *= s;
    // At least one byte so that even an empty tensor has a non-null pointer.
    bytes_.resize(std::max<size_t>(1, size_t(numel_) * dtypeSize(dtype_)));
  }

  static HostTensor i32(std::vector<int64_t> sizes,
                        const std::vector<int32_t> &values) {
    HostTensor t(DType::I32, std::move(sizes));
    EXPECT_EQ(int64_t(values.size()), t.numel());
    std::memcpy(t.bytes_.data(), values.data(), values.size() * 4);
    return t;
  }

  TensorRef ref() {
    TensorRef t;
    t.data = bytes_.data();
    t.dtype = dtype_;
    t.rank = int(sizes_.size());
    int64_t stride = 1;
    for (int d = t.rank - 1; d >= 0; --d) {
      t.sizes[d] = sizes_[d];
      t.strides[d] = stride;
      stride *= sizes_[d];
    }
    return t;
  }

  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  const std::vector<uint8_t> &bytes() const { return bytes_; }

  double get(int64_t i) const {
    return loadAsFloat(bytes_.data(), dtype_, size_t(i));
  }
  void set(int64_t i, double v) {
    storeFromFloat(bytes_.data(), dtype_, size_t(i), float(v));
  }
  int32_t getI32(int64_t i) const {
    int32_t v;
    std::memcpy(&v, bytes_.data() + 4 * i, 4);
    return v;
  }

  /// Uniform values in [lo, hi), rounded to the storage type.
  void fillUniform(std::mt19937 &rng, double lo = -1.0, double hi = 1.0) {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (int64_t i = 0; i < numel_; ++i)
      set(i, dist(rng));
  }
  void poison() {
    for (int64_t i = 0; i < numel_; ++i)
      set(i, std::numeric_limits<double>::quiet_NaN());
  }
  /// The stored values, exactly, in double.
  std::vector<double> values() const {
    std::vector<double> v(static_cast<size_t>(numel_));
    for (int64_t i = 0; i < numel_; ++i)
      v[i] = get(i);
    return v;
  }

private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> sizes_;
  int64_t numel_ = 0;
  std::vector<uint8_t> bytes_;
};

/// A paged cache filled by encoding rows the way the cache-update kernels do,
/// with the decoded value of every slot kept in double.
class TestCache {
public:
  TestCache(CacheLayout layout, DType plainType, int64_t numBlocks,
            int64_t blockSize, int64_t latent = 512, int64_t rope = 64) {
    desc_.numBlocks = numBlocks;
    desc_.blockSize = blockSize;
    desc_.latentRank = latent;
    desc_.ropeDim = rope;
    desc_.layout = layout;
    // plainType names the fp8 encoding of a per-tensor cache (e4m3fn
    // unless it is an fp8 type).
    desc_.dtype = layout == CacheLayout::Plain ? plainType
                  : layout == CacheLayout::Fp8PerTensor && isFp8(plainType)
                      ? plainType
                      : DType::F8E4M3FN;
    // A per-tensor scale other than 1 so that forgetting it shows.
    scale_ = layout == CacheLayout::Fp8PerTensor ? 0.0125f : 1.0f;
    data_.resize(size_t(desc_.totalBytes()));
    values_.resize(size_t(desc_.numSlots() * desc_.rowValues()));
  }

  KVCacheRef ref() {
    KVCacheRef r;
    r.desc = desc_;
    r.data = data_.data();
    r.scale = scale_;
    return r;
  }
  const KVCacheDesc &desc() const { return desc_; }
  /// The stored bits, for bit-exact comparisons.
  const std::vector<uint8_t> &bytes() const { return data_; }
  /// Decoded values of a slot's row.
  const double *row(int64_t slot) const {
    return values_.data() + slot * desc_.rowValues();
  }

  /// Encodes `v[rowValues]` into `slot`.
  void writeRow(int64_t slot, const std::vector<float> &v) {
    uint8_t *p = data_.data() + slot * desc_.rowBytes();
    double *dec = values_.data() + slot * desc_.rowValues();
    const int64_t latent = desc_.latentRank, n = desc_.rowValues();
    switch (desc_.layout) {
    case CacheLayout::Plain:
      for (int64_t i = 0; i < n; ++i) {
        storeFromFloat(p, desc_.dtype, size_t(i), v[i]);
        dec[i] = loadAsFloat(p, desc_.dtype, size_t(i));
      }
      return;
    case CacheLayout::Fp8PerTensor:
      for (int64_t i = 0; i < n; ++i) {
        storeFromFloat(p, desc_.dtype, size_t(i), v[i] / scale_);
        dec[i] = double(loadAsFloat(p, desc_.dtype, size_t(i))) * scale_;
      }
      return;
    case CacheLayout::Fp8DsMla: {
      uint8_t *scales = p + latent;
      uint8_t *rope = scales + 4 * (latent / kDsMlaTile);
      for (int64_t tile = 0; tile < latent / kDsMlaTile; ++tile) {
        float amax = 0.0f;
        for (int64_t i = 0; i < kDsMlaTile; ++i)
          amax = std::max(amax, std::fabs(v[tile * kDsMlaTile + i]));
        const float s = amax > 0.0f ? amax / kFp8E4M3Max : 1.0f;
        std::memcpy(scales + 4 * tile, &s, 4);
        for (int64_t i = tile * kDsMlaTile; i < (tile + 1) * kDsMlaTile; ++i) {
          p[i] = floatToFp8e4m3(v[i] / s);
          dec[i] = double(fp8e4m3ToFloat(p[i])) * s;
        }
      }
      for (int64_t i = 0; i < desc_.ropeDim; ++i) {
        const uint16_t bits = floatToBf16(v[latent + i]);
        std::memcpy(rope + 2 * i, &bits, 2);
        dec[latent + i] = bf16ToFloat(bits);
      }
      return;
    }
    }
  }

  void fillRandom(std::mt19937 &rng) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(static_cast<size_t>(desc_.rowValues()));
    for (int64_t slot = 0; slot < desc_.numSlots(); ++slot) {
      for (float &x : v)
        x = dist(rng);
      writeRow(slot, v);
    }
  }

  /// Overwrites a slot with NaN in every stored field (values and scales).
  void poisonRow(int64_t slot) {
    std::vector<float> nan(static_cast<size_t>(desc_.rowValues()),
                           std::numeric_limits<float>::quiet_NaN());
    writeRow(slot, nan);
    if (desc_.layout == CacheLayout::Fp8DsMla) {
      const float s = std::numeric_limits<float>::quiet_NaN();
      uint8_t *scales =
          data_.data() + slot * desc_.rowBytes() + desc_.latentRank;
      for (int64_t tile = 0; tile < desc_.latentRank / kDsMlaTile; ++tile)
        std::memcpy(scales + 4 * tile, &s, 4);
    }
  }

private:
  KVCacheDesc desc_;
  float scale_ = 1.0f;
  std::vector<uint8_t> data_;
  std::vector<double> values_;
};

/// Expects |got - want| <= atol + rtol * |want| element-wise; infinities
/// must match exactly. Reports the count and the first few mismatches.
inline void expectNear(const std::vector<double> &got,
                       const std::vector<double> &want, double atol,
                       double rtol, const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0;
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    bool ok;
    if (std::isinf(want[i]))
      ok = got[i] == want[i];
    else {
      const double err = std::fabs(got[i] - want[i]);
      ok = err <= atol + rtol * std::fabs(want[i]); // false for NaN
      if (ok)
        worst = std::max(worst, err);
    }
    if (!ok && ++bad <= 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want "
                    << want[i];
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size()
                    << " elements out of tolerance (worst passing error "
                    << worst << ")";
}

/// Tolerances for an output rounded to `t`: a few ulps of float
/// accumulation, plus half an ulp of the storage type.
inline double relTolerance(DType t) {
  switch (t) {
  case DType::BF16:
    return 1.0 / 256;
  case DType::F16:
    return 1.0 / 2048;
  default:
    return 1e-5;
  }
}

} // namespace mlart::kerneltest

#endif // MLART_TEST_KERNELTESTUTIL_H
