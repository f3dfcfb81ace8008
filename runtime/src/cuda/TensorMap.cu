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

/// Rank 2 or 3: dims {cols, rows[, planes]}, pitches {row[, plane]}, boxes
/// {boxCols, boxRows[, 1]}.
Status encodeBf16(CUtensorMap *map, const void *base, int rank,
                  const cuuint64_t *dims, const cuuint64_t *pitches,
                  uint32_t boxCols, uint32_t boxRows) {
  const EncodeFns &f = encodeFns();
  MLART_RETURN_IF_ERROR(f.status);
  const cuuint32_t box[3] = {boxCols, boxRows, 1};
  const cuuint32_t elementStrides[3] = {1, 1, 1};
  const CUresult r = f.encodeTiled(
      map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, cuuint32_t(rank),
      const_cast<void *>(base), dims, pitches, box, elementStrides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r == CUDA_SUCCESS)
    return Status::success();
  const char *name = nullptr;
  if (f.getErrorName)
    f.getErrorName(r, &name);
  std::string shape = std::to_string(dims[0]);
  std::string pitch;
  for (int d = 1; d < rank; ++d) {
    shape += " x " + std::to_string(dims[d]);
    pitch += (d > 1 ? ", " : "") + std::to_string(pitches[d - 1]);
  }
  return invalidArgument(
      "cuTensorMapEncodeTiled(" + shape + " bf16, pitch " + pitch + ", box " +
      std::to_string(boxCols) + " x " + std::to_string(boxRows) +
      "): " + (name ? name : "CUresult " + std::to_string(int(r))));
}

} // namespace

Status encodeBf16TensorMap2d(CUtensorMap *map, const void *base, uint64_t cols,
                             uint64_t rows, uint64_t pitchBytes,
                             uint32_t boxCols, uint32_t boxRows) {
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t pitches[1] = {pitchBytes};
  return encodeBf16(map, base, 2, dims, pitches, boxCols, boxRows);
}

Status encodeBf16TensorMap3d(CUtensorMap *map, const void *base, uint64_t cols,
                             uint64_t rows, uint64_t planes,
                             uint64_t pitchBytes, uint64_t planePitchBytes,
                             uint32_t boxCols, uint32_t boxRows) {
  const cuuint64_t dims[3] = {cols, rows, planes};
  const cuuint64_t pitches[2] = {pitchBytes, planePitchBytes};
  return encodeBf16(map, base, 3, dims, pitches, boxCols, boxRows);
}

} // namespace mlart::cuda
