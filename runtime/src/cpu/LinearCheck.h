//===- LinearCheck.h - Operand checks of the linear kernels (internal) ----===//
//
// Shared by the CPU and CUDA linear kernels so both reject the same calls
// with the same messages.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CPU_LINEARCHECK_H
#define MLART_CPU_LINEARCHECK_H

#include "mlart/Kernels.h"

namespace mlart::cpu {

/// x [T, K], weight [N, K], out [T, N], all float; the optional addend has
/// out's shape and dtype and is either out itself (the same view: in place)
/// or shares no byte with it.
Status validateLinear(const LinearArgs &args);

} // namespace mlart::cpu

#endif // MLART_CPU_LINEARCHECK_H
