//===- TensorMap.cu - TMA descriptors built on the host -------------------===//
#include "cuda/TensorMap.h"

#include "cuda/DriverEntryPoints.h"

namespace mlart::cuda {
namespace {

struct EncodeFns {
  decltype(&::cuTensorMapEncodeTiled) encodeTiled = nullptr;
  decltype(&::cuGetErrorName) getErrorName = nullptr;
  Status status = Status::success();
};

const EncodeFns &encodeFns() {
  static const EncodeFns fns = [] {
    EncodeFns r;
    r.status = resolveDriverEntryPoint("cuTensorMapEncodeTiled", r.encodeTiled);
    // Only for messages: its absence is no error.
    (void)resolveDriverEntryPoint("cuGetErrorName", r.getErrorName);
    return r;
  }();
  return fns;
}

} // namespace

Status encodeBf16TensorMap2d(CUtensorMap *map, const void *base, uint64_t cols,
                             uint64_t rows, uint64_t pitchBytes,
                             uint32_t boxCols, uint32_t boxRows) {
  const EncodeFns &f = encodeFns();
  MLART_RETURN_IF_ERROR(f.status);
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {pitchBytes};
  const cuuint32_t box[2] = {boxCols, boxRows};
  const cuuint32_t elementStrides[2] = {1, 1};
  const CUresult r = f.encodeTiled(
      map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void *>(base), dims,
      strides, box, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    const char *name = nullptr;
    if (f.getErrorName)
      f.getErrorName(r, &name);
    return invalidArgument(
        "cuTensorMapEncodeTiled(" + std::to_string(cols) + " x " +
        std::to_string(rows) + " bf16, pitch " + std::to_string(pitchBytes) +
        ", box " + std::to_string(boxCols) + " x " + std::to_string(boxRows) +
        "): " + (name ? name : "CUresult " + std::to_string(int(r))));
  }
  return Status::success();
}

} // namespace mlart::cuda
