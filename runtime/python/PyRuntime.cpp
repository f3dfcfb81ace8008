//===- PyRuntime.cpp - What the mla.runtime bindings share ----------------===//
#include "PyRuntime.h"

#include "mlart/CudaDevice.h"

#include <algorithm>

namespace py = pybind11;

namespace mlart::python {
namespace {
/// The C++ side of mla.runtime.Error (only its Python type is used).
struct RuntimeErrorTag {};
py::object errorType;
} // namespace

void defineErrorType(py::module_ &m) {
  errorType = py::exception<RuntimeErrorTag>(m, "Error", PyExc_RuntimeError);
}

void check(const Status &s) {
  if (s.ok())
    return;
  PyErr_SetString(errorType.ptr(), s.toString().c_str());
  throw py::error_already_set();
}

PyDevice::PyDevice(const std::string &spec) {
  if (spec == "cpu") {
    device_ = createCpuDevice();
    return;
  }
  int ordinal = 0;
  if (spec != "cuda") {
    const std::string prefix = "cuda:";
    const std::string digits =
        spec.rfind(prefix, 0) == 0 ? spec.substr(prefix.size()) : "";
    if (digits.empty() || digits.size() > 6 ||
        !std::all_of(digits.begin(), digits.end(),
                     [](char c) { return c >= '0' && c <= '9'; }))
      throw py::value_error("Device: expected 'cpu', 'cuda' or 'cuda:N', "
                            "got '" +
                            spec + "'");
    ordinal = std::stoi(digits);
  }
#ifdef MLART_PYTHON_HAVE_CUDA
  device_ = value(createCudaDevice(ordinal));
#else
  check(unavailable("Device('" + spec +
                    "'): this mla.runtime was built without the CUDA "
                    "backend"));
#endif
}

std::string PyDevice::name() const {
  if (device_->kind() == DeviceKind::Cpu)
    return "cpu";
  return "cuda:" +
         std::to_string(static_cast<const CudaDevice &>(*device_).ordinal());
}

Status PyDevice::setSynchronousChecks(bool on) {
  if (device_->kind() == DeviceKind::Cpu) {
    if (!on)
      return invalidArgument("synchronous_checks: the cpu device checks every "
                             "call before it writes; it has no asynchronous "
                             "mode");
    return Status::success();
  }
  static_cast<CudaDevice &>(*device_).setSynchronousChecks(on);
  synchronousChecks_ = on;
  return Status::success();
}

StreamHandle PyDevice::stream(py::handle s) const {
  if (s.is_none())
    return nullptr;
  py::object handle = py::reinterpret_borrow<py::object>(s);
  if (py::hasattr(s, "cuda_stream"))
    handle = s.attr("cuda_stream");
  if (!py::isinstance<py::int_>(handle))
    throw py::type_error("stream: expected None, an int (cudaStream_t) or "
                         "an object with .cuda_stream");
  const intptr_t raw = handle.cast<intptr_t>();
  if (raw != 0 && device_->kind() == DeviceKind::Cpu)
    throw py::value_error("stream: the cpu device has no streams");
  return reinterpret_cast<StreamHandle>(raw);
}

} // namespace mlart::python
