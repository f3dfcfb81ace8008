//===- CpuKernelLibrary.cpp - The CPU KernelLibrary over the free kernels -===//
#include "cpu/CpuKernels.h"

#include <cmath>
#include <string>
#include <type_traits>
#include <utility>

namespace mlart {

namespace {
template <typename Args, typename = void> struct HasCache : std::false_type {};
template <typename Args>
struct HasCache<Args, std::void_t<decltype(std::declval<Args>().cache)>>
    : std::true_type {};

/// Runs `kernel` on `a`, with a cache's device scale (host memory on the
/// CPU) read once, checked and passed on as the plain scale, so the kernels
/// only ever see KVCacheRef::scale.
template <typename Args, typename F>
Status withHostScale(const Args &a, F &&kernel) {
  if constexpr (HasCache<Args>::value) {
    if (a.cache.scaleTensor) {
      Args resolved = a;
      const float scale = *a.cache.scaleTensor;
      if (!std::isfinite(scale) || scale <= 0.0f)
        return invalidArgument("the cache's scale tensor holds " +
                               std::to_string(scale) +
                               "; it must be finite and > 0");
      resolved.cache.scale = scale;
      resolved.cache.scaleTensor = nullptr;
      return kernel(resolved);
    }
  }
  return kernel(a);
}

/// Stateless table: the CPU runs synchronously, so streams are ignored.
class CpuKernelLibrary final : public KernelLibrary {
public:
  const char *name() const override { return "cpu"; }
  // Every kernel is the free function of the same name in cpu/.
#define MLART_KERNEL_OPCODE(Enum, Value, name, ArgsType, Flags, Fields,        \
                            method)                                            \
  Status method(const ArgsType &a, StreamHandle) const override {              \
    return withHostScale(a, [](const ArgsType &r) { return cpu::method(r); }); \
  }
#include "mlart/Opcodes.def"
};
} // namespace

const KernelLibrary &cpuKernelLibrary() {
  static const CpuKernelLibrary library;
  return library;
}

} // namespace mlart
