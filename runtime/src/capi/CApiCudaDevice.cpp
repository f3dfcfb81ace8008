//===- CApiCudaDevice.cpp - C API: mlart_device_create_cuda over CUDA -----===//
//
// The provider of mlart_device_create_cuda for programs that link the CUDA
// backend: object library mlart_capi_cuda. Its counterpart without CUDA is
// CApiNoCudaDevice.cpp; a program links exactly one (docs/runtime.md).
//
//===----------------------------------------------------------------------===//
#include "CApiInternal.h"

#include "mlart/CudaDevice.h"

using namespace mlart;

extern "C" mlart_status mlart_device_create_cuda(int ordinal,
                                                 mlart_device **out_device) {
  return capi::guarded([&]() -> Status {
    MLART_RETURN_IF_ERROR(capi::checkCudaDeviceArgs(ordinal, out_device));
    MLART_ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> device,
                           createCudaDevice(ordinal));
    return capi::storeDevice(std::unique_ptr<Device>(std::move(device)),
                             out_device);
  });
}
