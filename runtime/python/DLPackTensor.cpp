//===- DLPackTensor.cpp - Tensors of Python objects, by DLPack, no copy ---===//
#include "DLPackTensor.h"

#include "mlart/CudaDevice.h"

#include <dlpack/dlpack.h>

#include <string>

namespace py = pybind11;

namespace mlart::python {
namespace {

const char *deviceTypeName(int type) {
  switch (type) {
  case kDLCPU:
    return "cpu";
  case kDLCUDA:
    return "cuda";
  case kDLCUDAHost:
    return "cuda pinned host";
  case kDLCUDAManaged:
    return "cuda managed";
  default:
    return "non-cpu, non-cuda";
  }
}

std::optional<DType> toDType(const DLDataType &t) {
  if (t.lanes != 1)
    return std::nullopt;
  switch (t.code) {
  case kDLFloat:
    if (t.bits == 32)
      return DType::F32;
    if (t.bits == 16)
      return DType::F16;
    if (t.bits == 64)
      return DType::F64;
    return std::nullopt;
  case kDLBfloat:
    return t.bits == 16 ? std::optional(DType::BF16) : std::nullopt;
  case kDLInt:
    if (t.bits == 32)
      return DType::I32;
    if (t.bits == 64)
      return DType::I64;
    return std::nullopt;
  case kDLUInt:
    if (t.bits == 16)
      return DType::BF16;
    if (t.bits == 8)
      return DType::F8E4M3FN;
    return std::nullopt;
  default:
    return std::nullopt;
  }
}

std::string dtypeText(const DLDataType &t) {
  return "DLPack type code " + std::to_string(int(t.code)) + ", " +
         std::to_string(int(t.bits)) + " bits x " + std::to_string(t.lanes);
}

} // namespace

void adoptFp8Encoding(ImportedTensor &t, DType want) {
  if (t.fp8Bytes && isFp8(want))
    t.ref.dtype = want;
}

StatusOr<ImportedTensor> importTensor(py::handle object,
                                      std::optional<intptr_t> stream,
                                      const std::string &what) {
  if (!py::hasattr(object, "__dlpack__"))
    return invalidArgument(
        what + ": a " +
        std::string(py::str(py::type::of(object).attr("__name__"))) +
        " is not a tensor (it has no __dlpack__)");
  int deviceType = kDLCPU;
  if (py::hasattr(object, "__dlpack_device__")) {
    py::tuple dev = object.attr("__dlpack_device__")();
    deviceType = dev[0].cast<int>();
  }
  // Only a CUDA producer takes a stream; NumPy refuses any argument.
  py::object capsule =
      deviceType == kDLCUDA && stream
          ? object.attr("__dlpack__")(py::arg("stream") = *stream)
          : object.attr("__dlpack__")();
  auto *managed = static_cast<DLManagedTensor *>(
      PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (!managed) {
    PyErr_Clear();
    return invalidArgument(what + ": __dlpack__ did not return a DLPack "
                                  "capsule");
  }
  const DLTensor &t = managed->dl_tensor;
  ImportedTensor out;
  out.owner = capsule;
  out.deviceType = int(t.device.device_type);
  out.deviceId = int(t.device.device_id);
  std::optional<DType> dtype = toDType(t.dtype);
  if (!dtype)
    return invalidArgument(what + ": element type (" + dtypeText(t.dtype) +
                           ") has no runtime equivalent");
  if (t.ndim < 0 || t.ndim > kMaxRank)
    return invalidArgument(what + ": rank " + std::to_string(t.ndim) +
                           "; the runtime takes at most " +
                           std::to_string(kMaxRank) + " dimensions");
  TensorRef &ref = out.ref;
  ref.dtype = *dtype;
  out.fp8Bytes = t.dtype.code == kDLUInt && t.dtype.bits == 8;
  ref.rank = int(t.ndim);
  int64_t compact = 1;
  for (int d = ref.rank - 1; d >= 0; --d) {
    if (t.shape[d] < 0)
      return invalidArgument(what + ": negative size");
    ref.sizes[d] = t.shape[d];
    ref.strides[d] = t.strides ? t.strides[d] : compact;
    compact *= t.shape[d];
  }
  ref.data = static_cast<char *>(t.data) + t.byte_offset;
  return out;
}

std::optional<intptr_t> dlpackStream(const Device &device,
                                     StreamHandle stream) {
  if (device.kind() == DeviceKind::Cpu)
    return std::nullopt;
  if (!stream)
    return 1;
  return reinterpret_cast<intptr_t>(stream);
}

Status checkDevice(const ImportedTensor &tensor, const Device &device,
                   const std::string &what) {
  std::string where = deviceTypeName(tensor.deviceType);
  if (tensor.deviceType != kDLCPU)
    where += ":" + std::to_string(tensor.deviceId);
  if (device.kind() == DeviceKind::Cpu) {
    if (tensor.deviceType == kDLCPU)
      return Status::success();
    return invalidArgument(what + ": a " + where +
                           " tensor cannot be used on the cpu device");
  }
  const int ordinal = static_cast<const CudaDevice &>(device).ordinal();
  if ((tensor.deviceType == kDLCUDA || tensor.deviceType == kDLCUDAManaged) &&
      tensor.deviceId == ordinal)
    return Status::success();
  return invalidArgument(
      what + ": a " + where +
      " tensor cannot be used on cuda:" + std::to_string(ordinal));
}

} // namespace mlart::python
