//===- Launch.cu - The MLART_PDL knob -------------------------------------===//
#include "cuda/Launch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace mlart::cuda {
namespace {

/// -1: no override; 0 / 1: forced off / on by a test.
std::atomic<int> pdlOverride{-1};

} // namespace

std::optional<bool> parsePdlKnob(const char *value) {
  if (value && std::strcmp(value, "0") == 0)
    return false;
  if (value && std::strcmp(value, "1") == 0)
    return true;
  return std::nullopt;
}

bool pdlEnabled() {
  static const bool fromEnv =
      parsePdlKnob(std::getenv("MLART_PDL")).value_or(true);
  const int o = pdlOverride.load(std::memory_order_relaxed);
  return o < 0 ? fromEnv : o != 0;
}

void setPdlOverrideForTesting(std::optional<bool> on) {
  pdlOverride.store(on ? int(*on) : -1, std::memory_order_relaxed);
}

} // namespace mlart::cuda
