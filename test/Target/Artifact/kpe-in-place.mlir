// The fused rope update rotates k_pe in place. When k_pe is a view of a
// temporary P (here the kv_a projection) that nothing reads after the update,
// it rotates P's bytes directly; anything the rotation could be observed
// through (an argument, a returned P, a later reader of P or of a view of it,
// a k_pe_out result, a second reader of k_pe) keeps the copy.
// Views print their strides when they are not row-major ({...}).
//
// RUN: mla-translate %s -split-input-file --mla-to-artifact-listing | FileCheck %s

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// The DeepSeek-V2-Lite pattern: kv_c's norm reads the first 128 columns of
// P before the update, which rotates the last 16 (byte 128 * 4 of each row
// of 144) where they lie. P (2x144 f32) is live through the update, so the
// norm's output does not share its bytes.
// CHECK-LABEL: artifact @in_place arena 2304 bytes
// CHECK: 0: linear buffer0+0[2x64] buffer1+0[144x64] arena+[[#P:]][2x144]
// CHECK-NEXT: 1: rms_norm arena+[[#P]][2x128]{144,1} buffer2+0[128] arena+[[#N:]][2x128]
// CHECK-NEXT: 2: rope_cache_update cache0 arena+[[#N]][2x128] arena+[[#P+512]][2x16]{144,1} buffer4+0[2] buffer5+0[2] buffer6+0[16x16] buffer7+0[2x4x16] - buffer3+0[2x4x16]
// CHECK-NOT: copy arena
func.func @in_place(%x: tensor<2x64xf32>, %w_a: tensor<144x64xf32>,
                    %w: tensor<128xf32>, %q_pe: tensor<2x4x16xf32>,
                    %slots: tensor<2xi64>, %pos: tensor<2xi64>,
                    %cs: tensor<16x16xf32>, %cache: !cache) -> tensor<2x4x16xf32> {
  %p = mla.linear %x, %w_a : tensor<2x64xf32>, tensor<144x64xf32> -> tensor<2x144xf32>
  %kv = tensor.extract_slice %p[0, 0] [2, 128] [1, 1] : tensor<2x144xf32> to tensor<2x128xf32>
  %k_pe = tensor.extract_slice %p[0, 128] [2, 16] [1, 1] : tensor<2x144xf32> to tensor<2x16xf32>
  %n = mla.rms_norm %kv, %w : tensor<2x128xf32>, tensor<128xf32>
  %qr = mla.rope_kv_cache_update gptj %n, %k_pe, %slots into %cache positions(%pos, %cs) rotate_q(%q_pe : tensor<2x4x16xf32>)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32> rotated_q tensor<2x4x16xf32>
  return %qr : tensor<2x4x16xf32>
}

// -----

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// k_pe is P itself (no view) and the update is its only reader.
// CHECK-LABEL: artifact @whole_temporary
// CHECK: 0: linear buffer1+0[2x64] buffer2+0[16x64] arena+[[#K:]][2x16]
// CHECK-NEXT: 1: rope_cache_update cache0 buffer0+0[2x128] arena+[[#K]][2x16] buffer3+0[2]
// CHECK-NOT: copy arena
func.func @whole_temporary(%kv: tensor<2x128xf32>, %x: tensor<2x64xf32>,
                           %w_k: tensor<16x64xf32>, %slots: tensor<2xi64>,
                           %pos: tensor<2xi64>, %cs: tensor<16x16xf32>,
                           %cache: !cache) -> tensor<2x128xf32> {
  %k_pe = mla.linear %x, %w_k : tensor<2x64xf32>, tensor<16x64xf32> -> tensor<2x16xf32>
  mla.rope_kv_cache_update gptj %kv, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32>
  return %kv : tensor<2x128xf32>
}

// -----

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// k_pe is a view of an argument: the caller's bytes are not the step's to
// rotate.
// CHECK-LABEL: artifact @argument
// CHECK: 0: rms_norm buffer0+0[2x128]{144,1} buffer1+0[128] arena+[[#N:]][2x128]
// CHECK-NEXT: 1: copy buffer0+512[2x16]{144,1} arena+[[#K:]][2x16]
// CHECK-NEXT: 2: rope_cache_update cache0 arena+[[#N]][2x128] arena+[[#K]][2x16] buffer2+0[2]
func.func @argument(%p: tensor<2x144xf32>, %w: tensor<128xf32>,
                    %slots: tensor<2xi64>, %pos: tensor<2xi64>,
                    %cs: tensor<16x16xf32>, %cache: !cache) -> tensor<2x128xf32> {
  %kv = tensor.extract_slice %p[0, 0] [2, 128] [1, 1] : tensor<2x144xf32> to tensor<2x128xf32>
  %k_pe = tensor.extract_slice %p[0, 128] [2, 16] [1, 1] : tensor<2x144xf32> to tensor<2x16xf32>
  %n = mla.rms_norm %kv, %w : tensor<2x128xf32>, tensor<128xf32>
  mla.rope_kv_cache_update gptj %n, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32>
  return %n : tensor<2x128xf32>
}

// -----

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// P is also returned: the caller must see the unrotated projection.
// CHECK-LABEL: artifact @returned
// CHECK: 0: linear buffer0+0[2x64] buffer1+0[144x64] arena+[[#P:]][2x144]
// CHECK-NEXT: 1: rms_norm arena+[[#P]][2x128]{144,1} buffer2+0[128] arena+[[#N:]][2x128]
// CHECK-NEXT: 2: copy arena+[[#P+512]][2x16]{144,1} arena+[[#K:]][2x16]
// CHECK-NEXT: 3: rope_cache_update cache0 arena+[[#N]][2x128] arena+[[#K]][2x16] buffer3+0[2]
// CHECK-NEXT: 4: copy arena+[[#P]][2x144] buffer6+0[2x144]
func.func @returned(%x: tensor<2x64xf32>, %w_a: tensor<144x64xf32>,
                    %w: tensor<128xf32>, %slots: tensor<2xi64>,
                    %pos: tensor<2xi64>, %cs: tensor<16x16xf32>,
                    %cache: !cache) -> tensor<2x144xf32> {
  %p = mla.linear %x, %w_a : tensor<2x64xf32>, tensor<144x64xf32> -> tensor<2x144xf32>
  %kv = tensor.extract_slice %p[0, 0] [2, 128] [1, 1] : tensor<2x144xf32> to tensor<2x128xf32>
  %k_pe = tensor.extract_slice %p[0, 128] [2, 16] [1, 1] : tensor<2x144xf32> to tensor<2x16xf32>
  %n = mla.rms_norm %kv, %w : tensor<2x128xf32>, tensor<128xf32>
  mla.rope_kv_cache_update gptj %n, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32>
  return %p : tensor<2x144xf32>
}

// -----

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// A view of P (other columns than k_pe's, through a reshape) is returned:
// the update must not touch P either.
// CHECK-LABEL: artifact @view_returned
// CHECK: 2: copy arena+[[#KPE:]][2x16]{144,1} arena+[[#K:]][2x16]
// CHECK-NEXT: 3: rope_cache_update cache0 arena+{{[0-9]+}}[2x128] arena+[[#K]][2x16] buffer3+0[2]
// CHECK-NEXT: 4: copy arena+[[#KPE-512]][2x2x64]{144,64,1} buffer6+0[2x2x64]
func.func @view_returned(%x: tensor<2x64xf32>, %w_a: tensor<144x64xf32>,
                         %w: tensor<128xf32>, %slots: tensor<2xi64>,
                         %pos: tensor<2xi64>, %cs: tensor<16x16xf32>,
                         %cache: !cache) -> tensor<2x2x64xf32> {
  %p = mla.linear %x, %w_a : tensor<2x64xf32>, tensor<144x64xf32> -> tensor<2x144xf32>
  %kv = tensor.extract_slice %p[0, 0] [2, 128] [1, 1] : tensor<2x144xf32> to tensor<2x128xf32>
  %k_pe = tensor.extract_slice %p[0, 128] [2, 16] [1, 1] : tensor<2x144xf32> to tensor<2x16xf32>
  %n = mla.rms_norm %kv, %w : tensor<2x128xf32>, tensor<128xf32>
  mla.rope_kv_cache_update gptj %n, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32>
  %heads = tensor.expand_shape %kv [[0], [1, 2]] output_shape [2, 2, 64] : tensor<2x128xf32> into tensor<2x2x64xf32>
  return %heads : tensor<2x2x64xf32>
}

// -----

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// Another op reads the projection after the update.
// CHECK-LABEL: artifact @read_after
// CHECK: 0: linear buffer0+0[2x64] buffer1+0[144x64] arena+[[#P:]][2x144]
// CHECK-NEXT: 1: rms_norm arena+[[#P]][2x128]{144,1} buffer2+0[128] arena+[[#N:]][2x128]
// CHECK-NEXT: 2: copy arena+[[#P+512]][2x16]{144,1} arena+[[#K:]][2x16]
// CHECK-NEXT: 3: rope_cache_update cache0 arena+[[#N]][2x128] arena+[[#K]][2x16] buffer4+0[2]
// CHECK-NEXT: 4: linear arena+[[#P]][2x144] buffer3+0[8x144] buffer7+0[2x8]
func.func @read_after(%x: tensor<2x64xf32>, %w_a: tensor<144x64xf32>,
                      %w: tensor<128xf32>, %w_b: tensor<8x144xf32>,
                      %slots: tensor<2xi64>, %pos: tensor<2xi64>,
                      %cs: tensor<16x16xf32>, %cache: !cache) -> tensor<2x8xf32> {
  %p = mla.linear %x, %w_a : tensor<2x64xf32>, tensor<144x64xf32> -> tensor<2x144xf32>
  %kv = tensor.extract_slice %p[0, 0] [2, 128] [1, 1] : tensor<2x144xf32> to tensor<2x128xf32>
  %k_pe = tensor.extract_slice %p[0, 128] [2, 16] [1, 1] : tensor<2x144xf32> to tensor<2x16xf32>
  %n = mla.rms_norm %kv, %w : tensor<2x128xf32>, tensor<128xf32>
  mla.rope_kv_cache_update gptj %n, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32>
  %y = mla.linear %p, %w_b : tensor<2x144xf32>, tensor<8x144xf32> -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// kv_c's norm reads its view of P after the update (kv_c itself, not the
// norm, feeds the update). Its columns are disjoint from k_pe's, so it
// cannot see the rotation: k_pe is rotated where it lies, no copy.
// CHECK-LABEL: artifact @view_read_after
// CHECK-NOT: copy
// CHECK: 1: rope_cache_update cache0 arena+[[#P:]][2x128]{144,1}
// CHECK-SAME: arena+[[#P+512]][2x16]{144,1} buffer3+0[2]
// CHECK-NEXT: 2: rms_norm arena+[[#P]][2x128]{144,1} buffer2+0[128] buffer6+0[2x128]
func.func @view_read_after(%x: tensor<2x64xf32>, %w_a: tensor<144x64xf32>,
                           %w: tensor<128xf32>, %slots: tensor<2xi64>,
                           %pos: tensor<2xi64>, %cs: tensor<16x16xf32>,
                           %cache: !cache) -> tensor<2x128xf32> {
  %p = mla.linear %x, %w_a : tensor<2x64xf32>, tensor<144x64xf32> -> tensor<2x144xf32>
  %kv = tensor.extract_slice %p[0, 0] [2, 128] [1, 1] : tensor<2x144xf32> to tensor<2x128xf32>
  %k_pe = tensor.extract_slice %p[0, 128] [2, 16] [1, 1] : tensor<2x144xf32> to tensor<2x16xf32>
  mla.rope_kv_cache_update gptj %kv, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32>
  %n = mla.rms_norm %kv, %w : tensor<2x128xf32>, tensor<128xf32>
  return %n : tensor<2x128xf32>
}

// -----

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// The update returns the rotated k_pe (k_pe_out): it rotates a copy into it.
// CHECK-LABEL: artifact @k_pe_out
// CHECK: 0: linear buffer0+0[2x64] buffer1+0[144x64] arena+[[#P:]][2x144]
// CHECK-NEXT: 1: rms_norm arena+[[#P]][2x128]{144,1} buffer2+0[128] arena+[[#N:]][2x128]
// CHECK-NEXT: 2: copy arena+[[#P+512]][2x16]{144,1} buffer6+0[2x16]
// CHECK-NEXT: 3: rope_cache_update cache0 arena+[[#N]][2x128] buffer6+0[2x16] buffer3+0[2]
func.func @k_pe_out(%x: tensor<2x64xf32>, %w_a: tensor<144x64xf32>,
                    %w: tensor<128xf32>, %slots: tensor<2xi64>,
                    %pos: tensor<2xi64>, %cs: tensor<16x16xf32>,
                    %cache: !cache) -> tensor<2x16xf32> {
  %p = mla.linear %x, %w_a : tensor<2x64xf32>, tensor<144x64xf32> -> tensor<2x144xf32>
  %kv = tensor.extract_slice %p[0, 0] [2, 128] [1, 1] : tensor<2x144xf32> to tensor<2x128xf32>
  %k_pe = tensor.extract_slice %p[0, 128] [2, 16] [1, 1] : tensor<2x144xf32> to tensor<2x16xf32>
  %n = mla.rms_norm %kv, %w : tensor<2x128xf32>, tensor<128xf32>
  %kr = mla.rope_kv_cache_update gptj %n, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32> rotated_k tensor<2x16xf32>
  return %kr : tensor<2x16xf32>
}

// -----

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// k_pe has a second reader (before the update): only single-use k_pe is
// rotated in place.
// CHECK-LABEL: artifact @k_pe_reused
// CHECK: 1: rms_norm arena+[[#KPE:]][2x16]{144,1}
// CHECK-NEXT: 2: copy arena+[[#KPE]][2x16]{144,1} arena+[[#K:]][2x16]
// CHECK-NEXT: 3: rope_cache_update cache0 buffer0+0[2x128] arena+[[#K]][2x16] buffer4+0[2]
func.func @k_pe_reused(%kv: tensor<2x128xf32>, %x: tensor<2x64xf32>,
                       %w_a: tensor<144x64xf32>, %w: tensor<16xf32>,
                       %slots: tensor<2xi64>, %pos: tensor<2xi64>,
                       %cs: tensor<16x16xf32>, %cache: !cache) -> tensor<2x16xf32> {
  %p = mla.linear %x, %w_a : tensor<2x64xf32>, tensor<144x64xf32> -> tensor<2x144xf32>
  %k_pe = tensor.extract_slice %p[0, 128] [2, 16] [1, 1] : tensor<2x144xf32> to tensor<2x16xf32>
  %n = mla.rms_norm %k_pe, %w : tensor<2x16xf32>, tensor<16xf32>
  mla.rope_kv_cache_update gptj %kv, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32>
  return %n : tensor<2x16xf32>
}

// -----

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// kv_c is also a view of P (the latent norm's kv_a projection): the update
// reads it while rotating k_pe, whose columns are disjoint in every row,
// so k_pe is still rotated where it lies.
// CHECK-LABEL: artifact @kv_c_view
// CHECK: 0: linear
// CHECK-NEXT: 1: rope_cache_update cache0 arena+0[2x128]{144,1} arena+512[2x16]{144,1} buffer2+0[2]
// CHECK-NOT: copy arena
func.func @kv_c_view(%x: tensor<2x64xf32>, %w_a: tensor<144x64xf32>,
                     %slots: tensor<2xi64>, %pos: tensor<2xi64>,
                     %cs: tensor<16x16xf32>, %cache: !cache) -> tensor<2x64xf32> {
  %p = mla.linear %x, %w_a : tensor<2x64xf32>, tensor<144x64xf32> -> tensor<2x144xf32>
  %kv = tensor.extract_slice %p[0, 0] [2, 128] [1, 1] : tensor<2x144xf32> to tensor<2x128xf32>
  %k_pe = tensor.extract_slice %p[0, 128] [2, 16] [1, 1] : tensor<2x144xf32> to tensor<2x16xf32>
  mla.rope_kv_cache_update gptj %kv, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32>
  return %x : tensor<2x64xf32>
}

// -----

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// kv_c's columns overlap k_pe's (120..127): rotating in place would change
// what the update reads as kv_c, so it rotates a copy.
// CHECK-LABEL: artifact @kv_c_overlaps
// CHECK: 1: copy arena+[[#KPE:]][2x16]{144,1} arena+[[#K:]][2x16]
// CHECK-NEXT: 2: rope_cache_update cache0 arena+[[#KPE-480]][2x128]{144,1} arena+[[#K]][2x16] buffer2+0[2]
func.func @kv_c_overlaps(%x: tensor<2x64xf32>, %w_a: tensor<144x64xf32>,
                         %slots: tensor<2xi64>, %pos: tensor<2xi64>,
                         %cs: tensor<16x16xf32>, %cache: !cache) -> tensor<2x64xf32> {
  %p = mla.linear %x, %w_a : tensor<2x64xf32>, tensor<144x64xf32> -> tensor<2x144xf32>
  %kv = tensor.extract_slice %p[0, 0] [2, 128] [1, 1] : tensor<2x144xf32> to tensor<2x128xf32>
  %k_pe = tensor.extract_slice %p[0, 120] [2, 16] [1, 1] : tensor<2x144xf32> to tensor<2x16xf32>
  mla.rope_kv_cache_update gptj %kv, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32>
  return %x : tensor<2x64xf32>
}

// -----

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// Every other column of P: the kernels need unit inner stride, so the update
// rotates a packed copy.
// CHECK-LABEL: artifact @strided_columns
// CHECK: 2: copy arena+{{[0-9]+}}[2x16]{144,2} arena+[[#K:]][2x16]
// CHECK-NEXT: 3: rope_cache_update cache0 arena+{{[0-9]+}}[2x128] arena+[[#K]][2x16] buffer3+0[2]
func.func @strided_columns(%x: tensor<2x64xf32>, %w_a: tensor<144x64xf32>,
                           %w: tensor<128xf32>, %slots: tensor<2xi64>,
                           %pos: tensor<2xi64>, %cs: tensor<16x16xf32>,
                           %cache: !cache) -> tensor<2x128xf32> {
  %p = mla.linear %x, %w_a : tensor<2x64xf32>, tensor<144x64xf32> -> tensor<2x144xf32>
  %kv = tensor.extract_slice %p[0, 0] [2, 128] [1, 1] : tensor<2x144xf32> to tensor<2x128xf32>
  %k_pe = tensor.extract_slice %p[0, 96] [2, 16] [1, 2] : tensor<2x144xf32> to tensor<2x16xf32>
  %n = mla.rms_norm %kv, %w : tensor<2x128xf32>, tensor<128xf32>
  mla.rope_kv_cache_update gptj %n, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32>
  return %n : tensor<2x128xf32>
}
