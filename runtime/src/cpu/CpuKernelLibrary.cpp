//===- CpuKernelLibrary.cpp - The CPU KernelLibrary over the free kernels -===//
#include "cpu/CpuKernels.h"

namespace mlart {

namespace {
/// Stateless table: the CPU runs synchronously, so streams are ignored.
class CpuKernelLibrary final : public KernelLibrary {
public:
  const char *name() const override { return "cpu"; }
  // Every kernel is the free function of the same name in cpu/.
#define MLART_KERNEL_OPCODE(Enum, Value, name, ArgsType, Flags, Fields,        \
                            method)                                            \
  Status method(const ArgsType &a, StreamHandle) const override {              \
    return cpu::method(a);                                                     \
  }
#include "mlart/Opcodes.def"
};
} // namespace

const KernelLibrary &cpuKernelLibrary() {
  static const CpuKernelLibrary library;
  return library;
}

} // namespace mlart
