//===- CApiNoCudaDevice.cpp - C API: mlart_device_create_cuda without CUDA ===//
//
// The provider of mlart_device_create_cuda for programs without the CUDA
// backend: object library mlart_capi_nocuda, always built. It answers
// Unavailable; CApiCudaDevice.cpp is the real one (docs/runtime.md).
//
//===----------------------------------------------------------------------===//
#include "CApiInternal.h"

using namespace mlart;

extern "C" mlart_status mlart_device_create_cuda(int ordinal,
                                                 mlart_device **out_device) {
  return capi::guarded([&]() -> Status {
    MLART_RETURN_IF_ERROR(capi::checkCudaDeviceArgs(ordinal, out_device));
    return unavailable(
        "CUDA device " + std::to_string(ordinal) +
        " is unavailable: this program was linked without the CUDA backend "
        "(mlart_capi_nocuda); link mlart_capi_cuda, built when nvcc is "
        "found, to use GPUs");
  });
}
