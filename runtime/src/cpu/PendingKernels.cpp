//===- PendingKernels.cpp - Placeholders for kernels of the rt-kern branch ===//
//
// decodeAttention, prefillAttention, qAbsorb, vUp, rmsNorm and linear live on
// the kernel branch; this file only keeps the rt-core branch linkable and is
// deleted when the branches merge.
//
//===----------------------------------------------------------------------===//
#include "cpu/CpuKernels.h"

namespace mlart::cpu {

Status decodeAttention(const DecodeAttentionArgs &) {
  return unimplemented("cpu decodeAttention: not merged yet");
}
Status prefillAttention(const PrefillAttentionArgs &) {
  return unimplemented("cpu prefillAttention: not merged yet");
}
Status qAbsorb(const QAbsorbArgs &) {
  return unimplemented("cpu qAbsorb: not merged yet");
}
Status vUp(const VUpArgs &) { return unimplemented("cpu vUp: not merged yet"); }
Status rmsNorm(const RmsNormArgs &) {
  return unimplemented("cpu rmsNorm: not merged yet");
}
Status linear(const LinearArgs &) {
  return unimplemented("cpu linear: not merged yet");
}

} // namespace mlart::cpu
