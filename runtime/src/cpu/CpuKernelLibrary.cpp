//===- CpuKernelLibrary.cpp - The CPU KernelLibrary over the free kernels -===//
#include "cpu/CpuKernels.h"

namespace mlart {

namespace {
/// Stateless table: the CPU runs synchronously, so streams are ignored.
class CpuKernelLibrary final : public KernelLibrary {
public:
  const char *name() const override { return "cpu"; }
  Status cacheUpdate(const CacheUpdateArgs &a, StreamHandle) const override {
    return cpu::cacheUpdate(a);
  }
  Status rope(const RopeArgs &a, StreamHandle) const override {
    return cpu::rope(a);
  }
  Status ropeCacheUpdate(const RopeCacheUpdateArgs &a,
                         StreamHandle) const override {
    return cpu::ropeCacheUpdate(a);
  }
  Status decodeAttention(const DecodeAttentionArgs &a,
                         StreamHandle) const override {
    return cpu::decodeAttention(a);
  }
  Status prefillAttention(const PrefillAttentionArgs &a,
                          StreamHandle) const override {
    return cpu::prefillAttention(a);
  }
  Status qAbsorb(const QAbsorbArgs &a, StreamHandle) const override {
    return cpu::qAbsorb(a);
  }
  Status vUp(const VUpArgs &a, StreamHandle) const override {
    return cpu::vUp(a);
  }
  Status qConcat(const QConcatArgs &a, StreamHandle) const override {
    return cpu::qConcat(a);
  }
  Status quantize(const QuantizeArgs &a, StreamHandle) const override {
    return cpu::quantize(a);
  }
  Status rmsNorm(const RmsNormArgs &a, StreamHandle) const override {
    return cpu::rmsNorm(a);
  }
  Status linear(const LinearArgs &a, StreamHandle) const override {
    return cpu::linear(a);
  }
  Status add(const AddArgs &a, StreamHandle) const override {
    return cpu::add(a);
  }
};
} // namespace

const KernelLibrary &cpuKernelLibrary() {
  static const CpuKernelLibrary library;
  return library;
}

} // namespace mlart
