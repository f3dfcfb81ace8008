// Lowerings that need more than one instruction, checked on small shapes.
//
// RUN: mla-translate %s -split-input-file --mla-to-artifact-listing | FileCheck %s

// Views print their strides when they are not row-major ({...} after the
// sizes).

// A pure rope copies, then rotates the copy (here the output buffer, since
// the result is only returned): the input stays intact.
// CHECK-LABEL: artifact @rope arena 0 bytes
// CHECK: 0: copy buffer0+0[4x64] buffer3+0[4x64]
// CHECK-NEXT: 1: rope buffer3+0[4x64] buffer1+0[4] buffer2+0[16x64]
// CHECK-NOT: copy
func.func @rope(%x: tensor<4x64xf32>, %p: tensor<4xi64>, %cs: tensor<16x64xf32>) -> tensor<4x64xf32> {
  %r = mla.rope neox %x, %p, %cs : tensor<4x64xf32>, tensor<4xi64>, tensor<16x64xf32>
  return %r : tensor<4x64xf32>
}

// -----

// Absorbing decode attention assembles the latent query itself.
// CHECK-LABEL: artifact @absorbing
// CHECK: 0: q_absorb buffer0+0[2x4x32]{192,48,1} buffer3+0[4x32x128] arena+0[2x4x128]{576,144,1}
// CHECK-NEXT: 1: copy buffer0+128[2x4x16]{192,48,1} arena+512[2x4x16]{576,144,1}
// CHECK-NEXT: 2: decode_attention cache0 arena+0[2x4x144] buffer1+0[2x8] buffer2+0[2] buffer4+0[2x4x128]
func.func @absorbing(%q: tensor<2x4x48xf32>, %bt: tensor<2x8xi32>, %sl: tensor<2xi32>,
                     %cache: !mla.kv_cache<?x16xf32, latent = 128, rope = 16>,
                     %w_uk: tensor<4x32x128xf32>) -> tensor<2x4x128xf32> {
  %o = mla.decode_attention %q, %cache[%bt, %sl] absorb(%w_uk : tensor<4x32x128xf32>) softmax_scale = 0.1
      : tensor<2x4x48xf32>, !mla.kv_cache<?x16xf32, latent = 128, rope = 16>, tensor<2x8xi32>, tensor<2xi32> -> tensor<2x4x128xf32>
  return %o : tensor<2x4x128xf32>
}

// -----

// Decompressing new tokens' K and V: one V up-projection of the broadcast
// latent, one projection per head for K's nope part, one broadcast copy of
// k_pe into K's rope part.
// CHECK-LABEL: artifact @decompress
// CHECK: 0: v_up buffer0+0[3x2x128]{128,0,1} buffer3+0[2x128x16] buffer5+0[3x2x16]
// CHECK-NEXT: 1: linear buffer0+0[3x128] buffer2+0[32x128] buffer4+0[3x32]{96,1}
// CHECK-NEXT: 2: linear buffer0+0[3x128] buffer2+8192[32x128] buffer4+96[3x32]{96,1}
// CHECK-NEXT: 3: copy buffer1+0[3x2x16]{16,0,1} buffer4+64[3x2x16]{96,48,1}
func.func @decompress(%c: tensor<3x128xbf16>, %p: tensor<3x16xbf16>, %wk: tensor<2x32x128xbf16>, %wv: tensor<2x128x16xbf16>)
    -> (tensor<3x2x48xbf16>, tensor<3x2x16xbf16>) {
  %k, %v = mla.decompress_kv %c, %p, %wk, %wv : tensor<3x128xbf16>, tensor<3x16xbf16>, tensor<2x32x128xbf16>, tensor<2x128x16xbf16> -> tensor<3x2x48xbf16>, tensor<3x2x16xbf16>
  return %k, %v : tensor<3x2x48xbf16>, tensor<3x2x16xbf16>
}

// -----

// Temporaries whose lives do not overlap share arena bytes: a chain of five
// norms needs two buffers, not four.
// CHECK-LABEL: artifact @chain arena 512 bytes
// CHECK: 0: rms_norm buffer0+0[2x32] buffer1+0[32] arena+[[A:[0-9]+]][2x32]
// CHECK-NEXT: 1: rms_norm arena+[[A]][2x32] buffer1+0[32] arena+[[B:[0-9]+]][2x32]
// CHECK-NEXT: 2: rms_norm arena+[[B]][2x32] buffer1+0[32] arena+[[A]][2x32]
// CHECK-NEXT: 3: rms_norm arena+[[A]][2x32] buffer1+0[32] arena+[[B]][2x32]
// CHECK-NEXT: 4: rms_norm arena+[[B]][2x32] buffer1+0[32] buffer2+0[2x32]
func.func @chain(%x: tensor<2x32xf32>, %w: tensor<32xf32>) -> tensor<2x32xf32> {
  %a = mla.rms_norm %x, %w : tensor<2x32xf32>, tensor<32xf32>
  %b = mla.rms_norm %a, %w : tensor<2x32xf32>, tensor<32xf32>
  %c = mla.rms_norm %b, %w : tensor<2x32xf32>, tensor<32xf32>
  %d = mla.rms_norm %c, %w : tensor<2x32xf32>, tensor<32xf32>
  %e = mla.rms_norm %d, %w : tensor<2x32xf32>, tensor<32xf32>
  return %e : tensor<2x32xf32>
}
