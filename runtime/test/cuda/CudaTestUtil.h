//===- CudaTestUtil.h - Host/device tensor pairs for the GPU tests --------===//
//
// Every GPU test runs a kernel on the device and the CPU reference kernel
// on host copies of the same fresh random inputs, then compares. Outputs are
// poisoned (NaN / 0xff bytes) on both sides before the run. Tests skip with a
// clear message when there is no GPU.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_TEST_CUDATESTUTIL_H
#define MLART_TEST_CUDATESTUTIL_H

#include "mlart/CudaDevice.h"
#include "mlart/Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

namespace mlart::cudatest {

/// The process-wide device, or null (with the reason) when unavailable.
inline CudaDevice *gpu(std::string *why = nullptr) {
  static std::string reason;
  static std::unique_ptr<CudaDevice> dev = [] {
    auto d = createCudaDevice(0);
    if (!d.ok()) {
      reason = d.status().message();
      return std::unique_ptr<CudaDevice>();
    }
    return std::move(d).value();
  }();
  if (why)
    *why = reason;
  return dev.get();
}

#define REQUIRE_GPU()                                                          \
  std::string why_;                                                            \
  CudaDevice *dev = ::mlart::cudatest::gpu(&why_);                             \
  if (!dev)                                                                    \
  GTEST_SKIP() << "no GPU: " << why_

inline std::mt19937 &rng() {
  static std::mt19937 r = [] {
    const unsigned seed = std::random_device{}();
    std::printf("[cuda tests] random seed %u\n", seed);
    return std::mt19937(seed);
  }();
  return r;
}

/// A host tensor mirrored on the device.
struct Arr {
  DType dt = DType::F32;
  std::vector<int64_t> sizes;
  std::vector<uint8_t> host;
  Buffer dev;

  Arr() = default;
  Arr(CudaDevice *d, DType t, std::vector<int64_t> s) : dt(t), sizes(std::move(s)) {
    int64_t n = 1;
    for (int64_t x : sizes)
      n *= x;
    host.resize(std::max<size_t>(16, size_t(n) * dtypeSize(dt)));
    auto b = d->allocate(host.size());
    EXPECT_TRUE(b.ok()) << b.status().message();
    if (b.ok())
      dev = std::move(b).value();
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t x : sizes)
      n *= x;
    return n;
  }
  TensorRef ref(void *p) const {
    TensorRef t;
    t.data = p;
    t.dtype = dt;
    t.rank = int(sizes.size());
    int64_t st = 1;
    for (int d = t.rank - 1; d >= 0; --d) {
      t.sizes[d] = sizes[size_t(d)];
      t.strides[d] = st;
      st *= sizes[size_t(d)];
    }
    return t;
  }
  TensorRef h() { return ref(host.data()); }
  TensorRef d() { return ref(dev.data()); }
  void up(CudaDevice *d) {
    ASSERT_TRUE(d->writeBuffer(dev, 0, host.data(), host.size()).ok());
  }
  std::vector<uint8_t> down(CudaDevice *d) const {
    std::vector<uint8_t> out(host.size());
    Status s = d->readBuffer(dev, 0, out.data(), out.size());
    EXPECT_TRUE(s.ok()) << s.message();
    return out;
  }
  float get(int64_t i) const { return loadAsFloat(host.data(), dt, size_t(i)); }
  void set(int64_t i, float v) { storeFromFloat(host.data(), dt, size_t(i), v); }
  void random(float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> u(lo, hi);
    for (int64_t i = 0; i < numel(); ++i)
      set(i, u(rng()));
  }
  void poison() {
    if (dt == DType::F32 || dt == DType::F16 || dt == DType::BF16)
      for (int64_t i = 0; i < numel(); ++i)
        set(i, NAN);
    else
      std::memset(host.data(), 0xff, host.size());
  }
  void setI32(const std::vector<int32_t> &v) {
    std::memcpy(host.data(), v.data(), v.size() * 4);
  }
  void setI64(const std::vector<int64_t> &v) {
    std::memcpy(host.data(), v.data(), v.size() * 8);
  }
};

/// Relative L2 error of device output `got` (bytes of a float type) against
/// the host reference; NaN anywhere fails (returns +inf).
inline double relErr(const Arr &ref, const std::vector<uint8_t> &got) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double r = loadAsFloat(ref.host.data(), ref.dt, size_t(i));
    const double g = loadAsFloat(got.data(), ref.dt, size_t(i));
    if (std::isnan(g) != std::isnan(r))
      return INFINITY;
    if (std::isnan(g) || (std::isinf(r) && r == g))
      continue;
    num += (g - r) * (g - r);
    den += r * r;
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

/// Distinct random slots (some negative) for n tokens.
inline std::vector<int64_t> randomSlots(int64_t n, int64_t numSlots, int64_t firstSlot = 0) {
  std::vector<int64_t> all(static_cast<size_t>(numSlots - firstSlot));
  std::iota(all.begin(), all.end(), firstSlot);
  std::shuffle(all.begin(), all.end(), rng());
  std::vector<int64_t> s(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    s[size_t(i)] = (rng()() % 7 == 0) ? -1 : all[size_t(i)];
  return s;
}

} // namespace mlart::cudatest

#endif
