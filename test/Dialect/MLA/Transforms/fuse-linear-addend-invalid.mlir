// RUN: mla-opt %s -split-input-file -verify-diagnostics -mla-fuse-linear-addend

// A malformed addend never reaches the pass: the verifier rejects it with a
// located diagnostic first.

func.func @addend_dtype(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>, %r: tensor<8x32xf16>) -> tensor<8x32xbf16> {
  // expected-error @+1 {{expected 'addend' to have the result's element type 'bf16', got 'f16'}}
  %p = mla.linear %x, %w addend(%r : tensor<8x32xf16>) : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  return %p : tensor<8x32xbf16>
}

// -----

func.func @addend_shape(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>, %r: tensor<8x64xbf16>) -> tensor<8x32xbf16> {
  // expected-error @+1 {{expected dimension 1 of 'addend' (output features of the result) to be 32, got 64}}
  %p = mla.linear %x, %w addend(%r : tensor<8x64xbf16>) : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  return %p : tensor<8x32xbf16>
}

// -----

func.func @addend_missing_type(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>, %r: tensor<8x32xbf16>) -> tensor<8x32xbf16> {
  // expected-error @+1 {{expected ':'}}
  %p = mla.linear %x, %w addend(%r) : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  return %p : tensor<8x32xbf16>
}
