//===- CudaStridedCacheTest.cpp - Strided cache views on the GPU kernels
//---===//
//
// The checks of StridedCacheChecks.h on the CUDA device, with the decode
// forced onto each kernel family: the 16-head kernel, and the many-heads
// kernel in its cp.async and TMA (3-D tensor map) variants.
//
//===----------------------------------------------------------------------===//
#include "CudaTestUtil.h"
#include "StridedCacheChecks.h"
#include "cuda/Knobs.h"

namespace mlart {
namespace {

using stridedtest::StridedCase;

/// Sets a knob for one scope.
struct KnobSetting {
  KnobSetting(cuda::Knob knob, int value) : knob(knob) {
    cuda::setKnobOverride(knob, value);
  }
  ~KnobSetting() { cuda::setKnobOverride(knob, std::nullopt); }
  cuda::Knob knob;
};

class CudaStridedCache : public ::testing::TestWithParam<StridedCase> {};

TEST_P(CudaStridedCache, CacheWritesMatchDense) {
  REQUIRE_GPU();
  stridedtest::checkCacheWrites(*dev, cudatest::rng(), GetParam());
}

TEST_P(CudaStridedCache, DecodeMatchesDenseOnEveryKernel) {
  REQUIRE_GPU();
  stridedtest::checkDecode(*dev, cudatest::rng(), GetParam(), 16);
  for (int variant : {0, 1}) {
    SCOPED_TRACE("many-heads variant " + std::to_string(variant));
    const KnobSetting many(cuda::Knob::DecodeMany, cuda::kDecodeManyForce);
    const KnobSetting tma(cuda::Knob::DecodeManyVariant, variant);
    stridedtest::checkDecode(*dev, cudatest::rng(), GetParam(), 128);
  }
}

TEST_P(CudaStridedCache, PrefillContextMatchesDense) {
  REQUIRE_GPU();
  stridedtest::checkPrefillContext(*dev, cudatest::rng(), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaStridedCache,
                         ::testing::ValuesIn(stridedtest::stridedCases()),
                         [](const auto &info) {
                           return stridedtest::caseName(info.param);
                         });

} // namespace
} // namespace mlart
