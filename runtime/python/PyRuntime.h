//===- PyRuntime.h - What the mla.runtime bindings share --------*- C++ -*-===//
//
// The error convention (every runtime Status that is not OK becomes an
// mla.runtime.Error whose message starts with the status code) and the
// Device wrapper, shared by the module's object bindings (MlartModule.cpp)
// and its kernel ops (Ops.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MLART_PYTHON_PYRUNTIME_H
#define MLART_PYTHON_PYRUNTIME_H

#include "mlart/Device.h"
#include "mlart/StatusOr.h"

#include <pybind11/pybind11.h>

#include <memory>
#include <string>

namespace mlart::python {

/// Registers mla.runtime.Error in `m`; check() raises it.
void defineErrorType(pybind11::module_ &m);

/// Raises mla.runtime.Error (message: the status) unless `s` is OK.
void check(const Status &s);

template <typename T> T value(StatusOr<T> s) {
  check(s.status());
  return std::move(*s);
}

/// A device and, for the CUDA device, the GPU it drives.
class PyDevice {
public:
  /// "cpu", "cuda" or "cuda:N"; ValueError for anything else.
  explicit PyDevice(const std::string &spec);

  Device &device() { return *device_; }
  /// "cpu" or "cuda:N".
  std::string name() const;
  /// Device-side checks of CUDA calls: synchronous (each call returns their
  /// verdict) or recorded for checkErrors. The CPU checks every call before
  /// it writes: it is always synchronous and refuses to be switched.
  bool synchronousChecks() const { return synchronousChecks_; }
  Status setSynchronousChecks(bool on);

  /// The stream handle a Python stream argument names: None (the default
  /// stream), an int (a cudaStream_t, e.g. torch.cuda.Stream.cuda_stream)
  /// or an object with a `cuda_stream` attribute (a torch.cuda.Stream).
  StreamHandle stream(pybind11::handle s) const;

private:
  std::unique_ptr<Device> device_;
  bool synchronousChecks_ = true;
};

/// Registers the kernel ops behind mla.ops (Ops.cpp).
void defineOps(pybind11::module_ &m);

} // namespace mlart::python

#endif // MLART_PYTHON_PYRUNTIME_H
