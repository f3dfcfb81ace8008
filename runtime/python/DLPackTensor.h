//===- DLPackTensor.h - Tensors of Python objects, by DLPack, no copy -----===//
//
// The Python package binds the caller's tensors (NumPy arrays, torch
// tensors, anything with __dlpack__) where they are: this reads a DLPack
// capsule into a TensorRef of the same memory and keeps the capsule, which
// keeps the producer's memory alive while the tensor is bound.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_PYTHON_DLPACKTENSOR_H
#define MLART_PYTHON_DLPACKTENSOR_H

#include "mlart/Device.h"
#include "mlart/StatusOr.h"
#include "mlart/TensorRef.h"

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>

namespace mlart::python {

/// A caller's tensor seen through DLPack.
struct ImportedTensor {
  /// The DLPack capsule: the producer frees the memory only once it is
  /// released.
  pybind11::object owner;
  TensorRef ref;
  int deviceType = 0; ///< DLDeviceType
  int deviceId = 0;
  /// Imported from 8-bit unsigned integers: fp8 bits of either encoding
  /// (ref.dtype says f8E4M3FN until adoptFp8Encoding says otherwise).
  bool fp8Bytes = false;
};

/// Reads `t`'s bytes as the fp8 encoding `want` when `t` came as uint8 and
/// `want` is an fp8 type (a DLPack producer has no fp8 type code).
void adoptFp8Encoding(ImportedTensor &t, DType want);

/// Imports `object` (anything with __dlpack__) without copying. A CUDA
/// producer is told that the tensor will be used on `stream` (DLPack's
/// `stream` argument), so it orders its own work before it. Element types:
/// DLPack's float (16, 32, 64 bits), bfloat16, int32 and int64 map to the
/// runtime's; unsigned 16- and 8-bit integers carry the bits of bf16 and
/// fp8 (f8E4M3FN unless adoptFp8Encoding names f8E5M2) values, the types
/// NumPy lacks and engines keep fp8 caches in.
/// `what` names the tensor in errors.
StatusOr<ImportedTensor> importTensor(pybind11::handle object,
                                      std::optional<intptr_t> stream,
                                      const std::string &what);

/// DLPack's `stream` argument for work on `stream` of `device`: none on
/// the CPU; on CUDA the handle, where the legacy default stream (null) is
/// 1, as the protocol spells it (0 is ambiguous there and refused).
std::optional<intptr_t> dlpackStream(const Device &device, StreamHandle stream);

/// OK when `device` can address the tensor's memory (host memory for the
/// CPU device, memory of its GPU for a CUDA device).
Status checkDevice(const ImportedTensor &tensor, const Device &device,
                   const std::string &what);

} // namespace mlart::python

#endif // MLART_PYTHON_DLPACKTENSOR_H
