// RUN: mla-opt %s -split-input-file -mla-fuse-linear-addend | FileCheck %s
// RUN: mla-opt %s -split-input-file -mla-fuse-linear-addend -mla-fuse-linear-addend | FileCheck %s

// Product on the left: the add becomes the linear's addend, at the add, with
// the linear's location.
// CHECK-LABEL: func.func @product_left
// CHECK-SAME: (%[[X:[^:]*]]: tensor<8x64xbf16>, %[[W:[^:]*]]: tensor<32x64xbf16>, %[[R:[^:]*]]: tensor<8x32xbf16>)
// CHECK-NEXT: %[[Y:.*]] = mla.linear %[[X]], %[[W]] addend(%[[R]] : tensor<8x32xbf16>) : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
// CHECK-NEXT: return %[[Y]]
// CHECK-NOT: arith.addf
func.func @product_left(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>, %r: tensor<8x32xbf16>) -> tensor<8x32xbf16> {
  %p = mla.linear %x, %w : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  %s = arith.addf %p, %r : tensor<8x32xbf16>
  return %s : tensor<8x32xbf16>
}

// -----

// Product on the right (the residual form `x + o_proj(attn)`).
// CHECK-LABEL: func.func @product_right
// CHECK-SAME: (%[[X:[^:]*]]: tensor<8x64xf32>, %[[W:[^:]*]]: tensor<32x64xf32>, %[[R:[^:]*]]: tensor<8x32xf32>)
// CHECK-NEXT: %[[Y:.*]] = mla.linear %[[X]], %[[W]] addend(%[[R]] : tensor<8x32xf32>)
// CHECK-NEXT: return %[[Y]]
func.func @product_right(%x: tensor<8x64xf32>, %w: tensor<32x64xf32>, %r: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %p = mla.linear %x, %w : tensor<8x64xf32>, tensor<32x64xf32> -> tensor<8x32xf32>
  %s = arith.addf %r, %p : tensor<8x32xf32>
  return %s : tensor<8x32xf32>
}

// -----

// The addend is defined after the linear: the fused op sits at the add, so
// it still dominates its use.
// CHECK-LABEL: func.func @addend_defined_later
// CHECK: %[[P:.*]] = mla.linear %arg0, %arg1 : tensor<8x64xbf16>
// CHECK-NEXT: %[[R:.*]] = mla.linear %arg0, %arg2 : tensor<8x64xbf16>
// CHECK-NEXT: %[[Y:.*]] = mla.linear %arg0, %arg1 addend(%[[R]] : tensor<8x32xbf16>)
// CHECK-NEXT: return %[[Y]], %[[P]]
func.func @addend_defined_later(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>, %w2: tensor<32x64xbf16>)
    -> (tensor<8x32xbf16>, tensor<8x32xbf16>) {
  // %p has a second use (returned), so it is not fused; %q is.
  %p = mla.linear %x, %w : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  %q = mla.linear %x, %w : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  %r = mla.linear %x, %w2 : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  %s = arith.addf %q, %r : tensor<8x32xbf16>
  return %s, %p : tensor<8x32xbf16>, tensor<8x32xbf16>
}

// -----

// A chain of residuals: each add folds into its own linear, the second one
// takes the first fused result as its addend.
// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %[[A:.*]] = mla.linear %arg0, %arg1 addend(%arg2 : tensor<8x32xbf16>)
// CHECK-NEXT: %[[B:.*]] = mla.linear %arg3, %arg4 addend(%[[A]] : tensor<8x32xbf16>)
// CHECK-NEXT: return %[[B]]
func.func @chain(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>, %r: tensor<8x32xbf16>,
                 %x2: tensor<8x64xbf16>, %w2: tensor<32x64xbf16>) -> tensor<8x32xbf16> {
  %p = mla.linear %x, %w : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  %s = arith.addf %r, %p : tensor<8x32xbf16>
  %p2 = mla.linear %x2, %w2 : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  %s2 = arith.addf %s, %p2 : tensor<8x32xbf16>
  return %s2 : tensor<8x32xbf16>
}

// -----

// Negative: the product has a second use, so it must be materialised anyway.
// CHECK-LABEL: func.func @two_uses
// CHECK-NEXT: %[[P:.*]] = mla.linear %arg0, %arg1 : tensor<8x64xbf16>
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[P]], %arg2
// CHECK-NEXT: return %[[S]], %[[P]]
// CHECK-NOT: addend(
func.func @two_uses(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>, %r: tensor<8x32xbf16>)
    -> (tensor<8x32xbf16>, tensor<8x32xbf16>) {
  %p = mla.linear %x, %w : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  %s = arith.addf %p, %r : tensor<8x32xbf16>
  return %s, %p : tensor<8x32xbf16>, tensor<8x32xbf16>
}

// -----

// Negative: the product is both operands of the add (two uses).
// CHECK-LABEL: func.func @doubled
// CHECK-NEXT: %[[P:.*]] = mla.linear %arg0, %arg1 : tensor<8x64xbf16>
// CHECK-NEXT: arith.addf %[[P]], %[[P]]
func.func @doubled(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>) -> tensor<8x32xbf16> {
  %p = mla.linear %x, %w : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  %s = arith.addf %p, %p : tensor<8x32xbf16>
  return %s : tensor<8x32xbf16>
}

// -----

// Negative: the linear already has an addend; a second add stays an add.
// CHECK-LABEL: func.func @already_fused
// CHECK-NEXT: %[[P:.*]] = mla.linear %arg0, %arg1 addend(%arg2 : tensor<8x32xbf16>)
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[P]], %arg3
// CHECK-NEXT: return %[[S]]
func.func @already_fused(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>, %r: tensor<8x32xbf16>,
                         %r2: tensor<8x32xbf16>) -> tensor<8x32xbf16> {
  %p = mla.linear %x, %w addend(%r : tensor<8x32xbf16>) : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  %s = arith.addf %p, %r2 : tensor<8x32xbf16>
  return %s : tensor<8x32xbf16>
}

// -----

// Negative: neither operand is a linear.
// CHECK-LABEL: func.func @no_linear
// CHECK-NEXT: %[[N:.*]] = mla.rms_norm
// CHECK-NEXT: arith.addf %[[N]], %arg0
// CHECK-NOT: mla.linear
func.func @no_linear(%a: tensor<8x32xbf16>, %g: tensor<32xbf16>) -> tensor<8x32xbf16> {
  %n = mla.rms_norm %a, %g : tensor<8x32xbf16>, tensor<32xbf16>
  %s = arith.addf %n, %a : tensor<8x32xbf16>
  return %s : tensor<8x32xbf16>
}

// -----

// Negative: the add is in a loop body, the linear outside it; fusing would
// run the GEMM every iteration.
// CHECK-LABEL: func.func @other_block
// CHECK: %[[P:.*]] = mla.linear %arg0, %arg1 : tensor<8x64xbf16>
// CHECK: scf.for
// CHECK-NEXT: arith.addf %{{.*}}, %[[P]]
// CHECK-NOT: addend(
func.func @other_block(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>, %r: tensor<8x32xbf16>,
                       %n: index) -> tensor<8x32xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = mla.linear %x, %w : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  %out = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %r) -> tensor<8x32xbf16> {
    %s = arith.addf %acc, %p : tensor<8x32xbf16>
    scf.yield %s : tensor<8x32xbf16>
  }
  return %out : tensor<8x32xbf16>
}

// -----

// Negative: scalar and vector adds are not tensor residuals.
// CHECK-LABEL: func.func @scalar
// CHECK-NEXT: arith.addf %arg0, %arg1 : f32
func.func @scalar(%a: f32, %b: f32) -> f32 {
  %s = arith.addf %a, %b : f32
  return %s : f32
}
