// Lowering of mla-fuse-projections' output: a tensor.concat of weight
// arguments becomes the prepare program (copies into the prepared arena,
// run once per weight binding), and the step reads the fused weight from
// there. The fused GEMM's output P holds the q heads and kv_a's columns
// side by side; each consumer reads its columns of P in place: the update
// rotates k_pe where it lies (the q heads and the latent columns are
// column-disjoint from it) and reads q_pe where it lies. No copy remains.
//
// RUN: mla-translate %s -split-input-file --mla-to-artifact-listing | FileCheck %s

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// CHECK-LABEL: artifact @fused arena {{[0-9]+}} bytes prepared 53248 bytes
// CHECK: prepare 0: copy buffer1+0[64x64] prepared+0[64x64]
// CHECK-NEXT: prepare 1: copy buffer2+0[144x64] prepared+16384[144x64]
// CHECK-NEXT: 0: linear buffer0+0[2x64] prepared+0[208x64] arena+[[#P:]][2x208]
// CHECK-NEXT: 1: rms_norm arena+[[#P+256]][2x128]{208,1} buffer3+0[128] arena+[[#N:]][2x128]
// CHECK-NEXT: 2: rope_cache_update cache0 arena+[[#N]][2x128] arena+[[#P+768]][2x16]{208,1}
// CHECK-SAME: buffer8+512[2x2x16]{288,144,1} - arena+[[#P+64]][2x2x16]{208,32,1}
// CHECK-NEXT: 3: q_absorb arena+[[#P]][2x2x16]{208,32,1} buffer4+0[2x16x128] buffer8+0[2x2x128]{288,144,1}
// CHECK-NOT: copy
func.func @fused(%x: tensor<2x64xf32>, %w_q: tensor<64x64xf32>,
                 %w_kv: tensor<144x64xf32>, %w_n: tensor<128xf32>,
                 %w_uk: tensor<2x16x128xf32>, %slots: tensor<2xi64>,
                 %pos: tensor<2xi64>, %cs: tensor<16x16xf32>,
                 %cache: !cache) -> tensor<2x2x144xf32> {
  %w = tensor.concat dim(0) %w_q, %w_kv : (tensor<64x64xf32>, tensor<144x64xf32>) -> tensor<208x64xf32>
  %p = mla.linear %x, %w : tensor<2x64xf32>, tensor<208x64xf32> -> tensor<2x208xf32>
  %q = tensor.extract_slice %p[0, 0] [2, 64] [1, 1] : tensor<2x208xf32> to tensor<2x64xf32>
  %kv = tensor.extract_slice %p[0, 64] [2, 144] [1, 1] : tensor<2x208xf32> to tensor<2x144xf32>
  %qe = tensor.expand_shape %q [[0], [1, 2]] output_shape [2, 2, 32] : tensor<2x64xf32> into tensor<2x2x32xf32>
  %q_nope = tensor.extract_slice %qe[0, 0, 0] [2, 2, 16] [1, 1, 1] : tensor<2x2x32xf32> to tensor<2x2x16xf32>
  %q_pe = tensor.extract_slice %qe[0, 0, 16] [2, 2, 16] [1, 1, 1] : tensor<2x2x32xf32> to tensor<2x2x16xf32>
  %kv_c = tensor.extract_slice %kv[0, 0] [2, 128] [1, 1] : tensor<2x144xf32> to tensor<2x128xf32>
  %k_pe = tensor.extract_slice %kv[0, 128] [2, 16] [1, 1] : tensor<2x144xf32> to tensor<2x16xf32>
  %n = mla.rms_norm %kv_c, %w_n : tensor<2x128xf32>, tensor<128xf32>
  %q_pe_out = mla.rope_kv_cache_update gptj %n, %k_pe, %slots into %cache positions(%pos, %cs) rotate_q(%q_pe : tensor<2x2x16xf32>)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32> rotated_q tensor<2x2x16xf32>
  %a = mla.q_absorb %q_nope, %w_uk : tensor<2x2x16xf32>, tensor<2x16x128xf32> -> tensor<2x2x128xf32>
  %qq = mla.q_concat %a, %q_pe_out : tensor<2x2x128xf32>, tensor<2x2x16xf32> -> tensor<2x2x144xf32>
  return %qq : tensor<2x2x144xf32>
}

// -----

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// A later reader of kv_a's whole output (k_pe's columns included) could see
// the rotation: k_pe is copied first, as for an unfused projection.
// CHECK-LABEL: artifact @kv_read_after
// CHECK: prepare 1: copy buffer2+0[144x64] prepared+16384[144x64]
// CHECK: 1: copy arena+[[#KPE:]][2x16]{208,1} arena+[[#K:]][2x16]
// CHECK-NEXT: 2: rope_cache_update cache0 arena+[[#KPE-512]][2x128]{208,1} arena+[[#K]][2x16]
// CHECK-NEXT: 3: linear arena+[[#KPE-512]][2x144]{208,1} buffer3+0[8x144]
func.func @kv_read_after(%x: tensor<2x64xf32>, %w_q: tensor<64x64xf32>,
                         %w_kv: tensor<144x64xf32>, %w_b: tensor<8x144xf32>,
                         %slots: tensor<2xi64>, %pos: tensor<2xi64>,
                         %cs: tensor<16x16xf32>, %cache: !cache)
    -> (tensor<2x64xf32>, tensor<2x8xf32>) {
  %w = tensor.concat dim(0) %w_q, %w_kv : (tensor<64x64xf32>, tensor<144x64xf32>) -> tensor<208x64xf32>
  %p = mla.linear %x, %w : tensor<2x64xf32>, tensor<208x64xf32> -> tensor<2x208xf32>
  %q = tensor.extract_slice %p[0, 0] [2, 64] [1, 1] : tensor<2x208xf32> to tensor<2x64xf32>
  %kv = tensor.extract_slice %p[0, 64] [2, 144] [1, 1] : tensor<2x208xf32> to tensor<2x144xf32>
  %kv_c = tensor.extract_slice %kv[0, 0] [2, 128] [1, 1] : tensor<2x144xf32> to tensor<2x128xf32>
  %k_pe = tensor.extract_slice %kv[0, 128] [2, 16] [1, 1] : tensor<2x144xf32> to tensor<2x16xf32>
  mla.rope_kv_cache_update gptj %kv_c, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32>
  %y = mla.linear %kv, %w_b : tensor<2x144xf32>, tensor<8x144xf32> -> tensor<2x8xf32>
  return %q, %y : tensor<2x64xf32>, tensor<2x8xf32>
}

// -----

// Concatenating a weight with an activation depends on the step: it stays
// in the step (copies into the arena), with no prepare program.
// CHECK-LABEL: artifact @activation_concat arena {{[0-9]+}} bytes{{$}}
// CHECK-NOT: prepare
// CHECK: 0: copy buffer1+0[4x64] arena+[[#C:]][4x64]
// CHECK-NEXT: 1: copy buffer0+0[2x64] arena+[[#C+1024]][2x64]
// CHECK-NEXT: 2: linear buffer0+0[2x64] arena+[[#C]][6x64] buffer2+0[2x6]
func.func @activation_concat(%x: tensor<2x64xf32>, %w: tensor<4x64xf32>)
    -> tensor<2x6xf32> {
  %c = tensor.concat dim(0) %w, %x : (tensor<4x64xf32>, tensor<2x64xf32>) -> tensor<6x64xf32>
  %y = mla.linear %x, %c : tensor<2x64xf32>, tensor<6x64xf32> -> tensor<2x6xf32>
  return %y : tensor<2x6xf32>
}

// -----

// A returned concat of weights is still prepared once; the step copies it
// into the output buffer (the prepare program writes the prepared arena only).
// CHECK-LABEL: artifact @returned_weights arena {{[0-9]+}} bytes prepared 1536 bytes
// CHECK: prepare 0: copy buffer0+0[2x64] prepared+0[2x64]
// CHECK-NEXT: prepare 1: copy buffer1+0[4x64] prepared+512[4x64]
// CHECK-NEXT: 0: copy prepared+0[6x64] buffer2+0[6x64]
func.func @returned_weights(%a: tensor<2x64xf32> {mla.name = "w_a"},
                            %b: tensor<4x64xf32> {mla.name = "w_b"})
    -> tensor<6x64xf32> {
  %c = tensor.concat dim(0) %a, %b : (tensor<2x64xf32>, tensor<4x64xf32>) -> tensor<6x64xf32>
  return %c : tensor<6x64xf32>
}
