//===- NpyFuzzer.cpp - libFuzzer target: mla-run's .npy reader -----------===//
//
// parseNpy on arbitrary bytes, then the declaration check mla-run applies
// before binding the data: errors are expected, crashes are not.
//
//===----------------------------------------------------------------------===//
#include "NpyIO.h"

#include <cstdint>

using namespace mlart;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  StatusOr<mlarun::NpyArray> array = mlarun::parseNpy(data, size);
  if (!array.ok())
    return 0;
  const int64_t sizes[] = {2, 256};
  for (DType dtype : {DType::BF16, DType::F32, DType::I64})
    (void)mlarun::checkNpyMatches(*array, dtype, sizes, 2);
  return 0;
}
