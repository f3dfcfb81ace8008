//===- TestUtil.h - Host tensors, random data and cache helpers for tests -===//
#ifndef MLART_TEST_TESTUTIL_H
#define MLART_TEST_TESTUTIL_H

#include "mlart/DType.h"
#include "mlart/KVCache.h"
#include "mlart/TensorRef.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

namespace mlart::test {

/// Byte written over a cache before a test so untouched rows are visible.
constexpr uint8_t kPoison = 0xA5;

/// Owns the bytes of a row-major host tensor of up to 4 dims.
struct HostTensor {
  std::vector<uint8_t> bytes;
  TensorRef ref;

  HostTensor() = default;
  HostTensor(DType dtype, std::vector<int64_t> sizes) {
    int64_t n = 1;
    for (int64_t s : sizes)
      n *= s;
    bytes.assign(size_t(n) * dtypeSize(dtype) + 1, 0); // +1: never empty
    ref.data = bytes.data();
    ref.dtype = dtype;
    ref.rank = int(sizes.size());
    int64_t stride = 1;
    for (int d = ref.rank - 1; d >= 0; --d) {
      ref.sizes[d] = sizes[size_t(d)];
      ref.strides[d] = stride;
      stride *= sizes[size_t(d)];
    }
  }
  HostTensor(const HostTensor &o) : bytes(o.bytes), ref(o.ref) {
    ref.data = bytes.data();
  }
  HostTensor &operator=(const HostTensor &o) {
    bytes = o.bytes;
    ref = o.ref;
    ref.data = bytes.data();
    return *this;
  }
  int64_t numel() const { return ref.numElements(); }
  float get(int64_t i) const { return loadAsFloat(ref.data, ref.dtype, size_t(i)); }
  void set(int64_t i, float v) { storeFromFloat(ref.data, ref.dtype, size_t(i), v); }
};

/// Standard-normal values, never exactly zero (a zero would hide a kernel
/// that forgot to write).
inline void fillRandom(HostTensor &t, std::mt19937 &rng, float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = dist(rng);
    if (std::fabs(v) < 1e-3f)
      v = v < 0 ? -0.5f : 0.5f;
    t.set(i, v);
  }
}

/// An i64 or i32 1-D tensor holding `values`.
inline HostTensor indexTensor(const std::vector<int64_t> &values,
                              DType dtype = DType::I64) {
  HostTensor t(dtype, {int64_t(values.size())});
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::I64)
      reinterpret_cast<int64_t *>(t.bytes.data())[i] = values[i];
    else
      reinterpret_cast<int32_t *>(t.bytes.data())[i] = int32_t(values[i]);
  }
  return t;
}

/// `n` distinct random slots in [0, numSlots).
inline std::vector<int64_t> distinctSlots(int64_t n, int64_t numSlots,
                                          std::mt19937 &rng) {
  std::vector<int64_t> all(static_cast<size_t>(numSlots));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(size_t(n));
  return all;
}

/// The whole cache as host bytes.
inline std::vector<uint8_t> cacheBytes(const KVCache &cache) {
  std::vector<uint8_t> out(cache.sizeBytes());
  (void)cache.readBytes(0, out.data(), out.size());
  return out;
}

/// cos/sin table [maxPos, rope] f32 (cos first half), base^(-2i/rope).
/// Memoised: the fused-kernel grid asks for the same 8192-row tables often.
inline const HostTensor &cosSinTable(int64_t maxPos, int64_t rope,
                                     double base) {
  static std::map<std::tuple<int64_t, int64_t, double>, HostTensor> memo;
  auto key = std::make_tuple(maxPos, rope, base);
  auto it = memo.find(key);
  if (it != memo.end())
    return it->second;
  HostTensor &t = memo[key];
  t = HostTensor(DType::F32, {maxPos, rope});
  float *p = reinterpret_cast<float *>(t.bytes.data());
  std::vector<double> invFreq(static_cast<size_t>(rope / 2));
  for (int64_t i = 0; i < rope / 2; ++i)
    invFreq[size_t(i)] = std::pow(base, -2.0 * double(i) / double(rope));
  for (int64_t pos = 0; pos < maxPos; ++pos)
    for (int64_t i = 0; i < rope / 2; ++i) {
      const double angle = double(pos) * invFreq[size_t(i)];
      p[pos * rope + i] = float(std::cos(angle));
      p[pos * rope + rope / 2 + i] = float(std::sin(angle));
    }
  return t;
}

/// float64 rotation of one rope row (the reference for the kernels).
inline void ropeReference(const float *in, double *out, int64_t rope,
                          const float *cs, bool neox) {
  const int64_t half = rope / 2;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t a = neox ? i : 2 * i;
    const int64_t b = neox ? i + half : 2 * i + 1;
    const double c = cs[i], s = cs[half + i];
    out[a] = double(in[a]) * c - double(in[b]) * s;
    out[b] = double(in[b]) * c + double(in[a]) * s;
  }
}

} // namespace mlart::test

#endif // MLART_TEST_TESTUTIL_H
