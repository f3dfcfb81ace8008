//===- Launch.cu - Launch configurations, the MLART_PDL knob --------------===//
#include "cuda/Launch.h"
#include "cuda/Knobs.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace mlart::cuda {

bool pdlEnabled() { return knobValue(Knob::Pdl) != 0; }

void setPdlOverrideForTesting(std::optional<bool> on) {
  setKnobOverride(Knob::Pdl,
                  on ? std::optional<int>(*on ? 1 : 0) : std::nullopt);
}

LaunchConfig::LaunchConfig(const LaunchShape &shape, cudaStream_t stream,
                           bool pdl)
    : config_{} {
  config_.gridDim = shape.grid;
  config_.blockDim = shape.block;
  config_.dynamicSmemBytes = shape.smemBytes;
  config_.stream = stream;
  config_.attrs = attrs_;
  config_.numAttrs = 0;
  if (shape.clusterX > 0) {
    cudaLaunchAttribute &cl = attrs_[config_.numAttrs++];
    cl.id = cudaLaunchAttributeClusterDimension;
    cl.val.clusterDim.x = shape.clusterX;
    cl.val.clusterDim.y = 1;
    cl.val.clusterDim.z = 1;
  }
  if (pdl) {
    cudaLaunchAttribute &pd = attrs_[config_.numAttrs++];
    pd.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    pd.val.programmaticStreamSerializationAllowed = 1;
  }
  if (config_.numAttrs == 0)
    config_.attrs = nullptr;
}

Status launchStatus(cudaError_t e, const char *name) {
  const cudaError_t last = cudaGetLastError();
  if (e == cudaSuccess)
    e = last;
  if (e != cudaSuccess)
    return cudaError(e, std::string("launch of ") + name);
  return Status::success();
}

Status allowDynamicSmem(const void *kernel, size_t bytes, const char *name) {
  int device = 0;
  MLART_CUDA_CHECK(cudaGetDevice(&device), "cudaGetDevice");
  static std::mutex mu;
  static std::map<std::pair<int, const void *>, size_t> allowed;
  std::lock_guard<std::mutex> lock(mu);
  size_t &have = allowed[{device, kernel}];
  if (bytes <= have)
    return Status::success();
  MLART_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           int(bytes)),
      std::string("cudaFuncSetAttribute(") + name + ")");
  have = bytes;
  return Status::success();
}

} // namespace mlart::cuda
