// mla.linear with an addend lowers to one linear instruction whose fourth
// operand slot is the addend's view; without one the slot stays empty (and
// the listing shows three operands, as before the slot existed).
//
// RUN: mla-translate %s -split-input-file --mla-to-artifact-listing | FileCheck %s
// RUN: mla-opt %s -split-input-file -mla-fuse-linear-addend | mla-translate -split-input-file --mla-to-artifact-listing | FileCheck %s --check-prefix=FUSED

// The residual is a function argument, the result the function's output.
// CHECK-LABEL: artifact @residual
// CHECK: 0: linear buffer0+0[4x64] buffer1+0[32x64] buffer3+0[4x32] buffer2+0[4x32]
// CHECK-NOT: add
func.func @residual(%x: tensor<4x64xbf16>, %w: tensor<32x64xbf16>, %r: tensor<4x32xbf16>) -> tensor<4x32xbf16> {
  %y = mla.linear %x, %w addend(%r : tensor<4x32xbf16>) : tensor<4x64xbf16>, tensor<32x64xbf16> -> tensor<4x32xbf16>
  return %y : tensor<4x32xbf16>
}

// -----

// The addend is a temporary of the step (an arena value) and a strided view
// of it; it is live through the linear, so the output does not share its
// bytes.
// CHECK-LABEL: artifact @temporary_addend
// CHECK: 0: linear buffer0+0[4x64] buffer2+0[64x64] arena+[[#R:]][4x64]
// CHECK-NEXT: 1: linear buffer0+0[4x64] buffer1+0[32x64] buffer3+0[4x32] arena+[[#R]][4x32]{64,1}
func.func @temporary_addend(%x: tensor<4x64xbf16>, %w: tensor<32x64xbf16>, %w2: tensor<64x64xbf16>) -> tensor<4x32xbf16> {
  %p = mla.linear %x, %w2 : tensor<4x64xbf16>, tensor<64x64xbf16> -> tensor<4x64xbf16>
  %r = tensor.extract_slice %p[0, 0] [4, 32] [1, 1] : tensor<4x64xbf16> to tensor<4x32xbf16>
  %y = mla.linear %x, %w addend(%r : tensor<4x32xbf16>) : tensor<4x64xbf16>, tensor<32x64xbf16> -> tensor<4x32xbf16>
  return %y : tensor<4x32xbf16>
}

// -----

// Before the fusion: a linear and an add; after it, one linear.
// CHECK-LABEL: artifact @unfused
// CHECK: 0: linear buffer0+0[4x64] buffer1+0[32x64] arena+[[#P:]][4x32]
// CHECK-NEXT: 1: add buffer2+0[4x32] arena+[[#P]][4x32] buffer3+0[4x32]
// FUSED-LABEL: artifact @unfused
// FUSED: 0: linear buffer0+0[4x64] buffer1+0[32x64] buffer3+0[4x32] buffer2+0[4x32]
// FUSED-NOT: add
func.func @unfused(%x: tensor<4x64xbf16>, %w: tensor<32x64xbf16>, %r: tensor<4x32xbf16>) -> tensor<4x32xbf16> {
  %p = mla.linear %x, %w : tensor<4x64xbf16>, tensor<32x64xbf16> -> tensor<4x32xbf16>
  %y = arith.addf %r, %p : tensor<4x32xbf16>
  return %y : tensor<4x32xbf16>
}
