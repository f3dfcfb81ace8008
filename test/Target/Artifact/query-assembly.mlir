// The decode query concat(q_absorb(q_nope), rotated q_pe) is assembled by its
// producers: q_absorb writes the first L columns of the query, the fused
// rope update reads q_pe where it lies and writes its rotation into the last
// P (its q_pe_in operand, after the absent k_pe_out "-"), and no q_concat
// instruction runs. Anything else keeps the q_concat instruction.
// Views print their strides when they are not row-major ({...}).
//
// RUN: mla-translate %s -split-input-file --mla-to-artifact-listing | FileCheck %s

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// q_absorb is the first writer of the query (2x4x144 f32 = 4608 bytes): the
// norm live between it and the rope update must not share the query's
// bytes. No copy of q_pe.
// CHECK-LABEL: artifact @assembled arena 6656 bytes
// CHECK: 0: q_absorb buffer0+0[2x4x32] buffer10+0[4x32x128] arena+0[2x4x128]{576,144,1}
// CHECK-NEXT: 1: rms_norm buffer2+0[2x128] buffer4+0[128] arena+4608[2x128]
// CHECK-NEXT: 2: rms_norm arena+4608[2x128] buffer4+0[128] arena+[[N:[0-9]+]][2x128]
// CHECK-NEXT: 3: copy buffer3+0[2x16] arena+[[K:[0-9]+]][2x16]
// CHECK-NEXT: 4: rope_cache_update cache0 arena+[[N]][2x128] arena+[[K]][2x16] buffer5+0[2] buffer6+0[2] buffer7+0[16x16] arena+512[2x4x16]{576,144,1} - buffer1+0[2x4x16]
// CHECK-NEXT: 5: decode_attention cache0 arena+0[2x4x144] buffer8+0[2x8] buffer9+0[2] buffer11+0[2x4x128]
// CHECK-NOT: {{q_concat|copy buffer1}}
func.func @assembled(%q_nope: tensor<2x4x32xf32>, %q_pe: tensor<2x4x16xf32>,
                     %kv: tensor<2x128xf32>, %k_pe: tensor<2x16xf32>,
                     %w: tensor<128xf32>, %slots: tensor<2xi64>,
                     %pos: tensor<2xi64>, %cs: tensor<16x16xf32>,
                     %bt: tensor<2x8xi32>, %sl: tensor<2xi32>, %cache: !cache,
                     %w_uk: tensor<4x32x128xf32>) -> tensor<2x4x128xf32> {
  %lat = mla.q_absorb %q_nope, %w_uk : tensor<2x4x32xf32>, tensor<4x32x128xf32> -> tensor<2x4x128xf32>
  %n1 = mla.rms_norm %kv, %w : tensor<2x128xf32>, tensor<128xf32>
  %n2 = mla.rms_norm %n1, %w : tensor<2x128xf32>, tensor<128xf32>
  %qr = mla.rope_kv_cache_update gptj %n2, %k_pe, %slots into %cache positions(%pos, %cs) rotate_q(%q_pe : tensor<2x4x16xf32>)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32> rotated_q tensor<2x4x16xf32>
  %q = mla.q_concat %lat, %qr : tensor<2x4x128xf32>, tensor<2x4x16xf32> -> tensor<2x4x144xf32>
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<2x4x144xf32>, !cache, tensor<2x8xi32>, tensor<2xi32> -> tensor<2x4x128xf32>
  return %o : tensor<2x4x128xf32>
}

// -----

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// A returned query is assembled in the output buffer itself.
// CHECK-LABEL: artifact @returned arena 256 bytes
// CHECK: 0: copy buffer3+0[2x16] arena+0[2x16]
// CHECK-NEXT: 1: rope_cache_update cache0 buffer2+0[2x128] arena+0[2x16] buffer4+0[2] buffer5+0[2] buffer6+0[16x16] buffer8+512[2x4x16]{576,144,1} - buffer1+0[2x4x16]
// CHECK-NEXT: 2: q_absorb buffer0+0[2x4x32] buffer7+0[4x32x128] buffer8+0[2x4x128]{576,144,1}
// CHECK-NOT: {{q_concat|copy}}
func.func @returned(%q_nope: tensor<2x4x32xf32>, %q_pe: tensor<2x4x16xf32>,
                    %kv: tensor<2x128xf32>, %k_pe: tensor<2x16xf32>,
                    %slots: tensor<2xi64>, %pos: tensor<2xi64>,
                    %cs: tensor<16x16xf32>, %cache: !cache,
                    %w_uk: tensor<4x32x128xf32>) -> tensor<2x4x144xf32> {
  %qr = mla.rope_kv_cache_update gptj %kv, %k_pe, %slots into %cache positions(%pos, %cs) rotate_q(%q_pe : tensor<2x4x16xf32>)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32> rotated_q tensor<2x4x16xf32>
  %lat = mla.q_absorb %q_nope, %w_uk : tensor<2x4x32xf32>, tensor<4x32x128xf32> -> tensor<2x4x128xf32>
  %q = mla.q_concat %lat, %qr : tensor<2x4x128xf32>, tensor<2x4x16xf32> -> tensor<2x4x144xf32>
  return %q : tensor<2x4x144xf32>
}

// -----

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// A quantised query: the f32 query is assembled in place as above and
// mla.quantize reads all of it (q_concat itself does not change the type).
// CHECK-LABEL: artifact @quantized
// CHECK: 1: rope_cache_update {{.*}} arena+512[2x4x16]{576,144,1} - buffer1+0[2x4x16]
// CHECK-NEXT: 2: q_absorb buffer0+0[2x4x32] buffer7+0[4x32x128] arena+0[2x4x128]{576,144,1}
// CHECK-NEXT: 3: quantize arena+0[2x4x144] buffer8+0[] buffer9+0[2x4x144]
// CHECK-NOT: q_concat
func.func @quantized(%q_nope: tensor<2x4x32xf32>, %q_pe: tensor<2x4x16xf32>,
                     %kv: tensor<2x128xf32>, %k_pe: tensor<2x16xf32>,
                     %slots: tensor<2xi64>, %pos: tensor<2xi64>,
                     %cs: tensor<16x16xf32>, %cache: !cache,
                     %w_uk: tensor<4x32x128xf32>, %scale: tensor<f32>) -> tensor<2x4x144xf8E4M3FN> {
  %qr = mla.rope_kv_cache_update gptj %kv, %k_pe, %slots into %cache positions(%pos, %cs) rotate_q(%q_pe : tensor<2x4x16xf32>)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32> rotated_q tensor<2x4x16xf32>
  %lat = mla.q_absorb %q_nope, %w_uk : tensor<2x4x32xf32>, tensor<4x32x128xf32> -> tensor<2x4x128xf32>
  %q = mla.q_concat %lat, %qr : tensor<2x4x128xf32>, tensor<2x4x16xf32> -> tensor<2x4x144xf32>
  %q8 = mla.quantize %q, %scale : tensor<2x4x144xf32> -> tensor<2x4x144xf8E4M3FN>
  return %q8 : tensor<2x4x144xf8E4M3FN>
}

// -----

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// The absorbed latent has a second reader: it stays a tensor of its own and
// q_concat assembles the query.
// CHECK-LABEL: artifact @latent_reused
// CHECK: 1: rope_cache_update {{.*}} arena+[[QR:[0-9]+]][2x4x16] - buffer1+0[2x4x16]
// CHECK-NEXT: 2: q_absorb buffer0+0[2x4x32] buffer7+0[4x32x128] arena+[[L:[0-9]+]][2x4x128]
// CHECK-NEXT: 3: q_concat arena+[[L]][2x4x128] arena+[[QR]][2x4x16] buffer8+0[2x4x144]
// CHECK-NEXT: 4: copy arena+[[L]][2x4x128] buffer9+0[2x4x128]
// CHECK-NOT: {576,144,1}
func.func @latent_reused(%q_nope: tensor<2x4x32xf32>, %q_pe: tensor<2x4x16xf32>,
                         %kv: tensor<2x128xf32>, %k_pe: tensor<2x16xf32>,
                         %slots: tensor<2xi64>, %pos: tensor<2xi64>,
                         %cs: tensor<16x16xf32>, %cache: !cache,
                         %w_uk: tensor<4x32x128xf32>) -> (tensor<2x4x144xf32>, tensor<2x4x128xf32>) {
  %qr = mla.rope_kv_cache_update gptj %kv, %k_pe, %slots into %cache positions(%pos, %cs) rotate_q(%q_pe : tensor<2x4x16xf32>)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32> rotated_q tensor<2x4x16xf32>
  %lat = mla.q_absorb %q_nope, %w_uk : tensor<2x4x32xf32>, tensor<4x32x128xf32> -> tensor<2x4x128xf32>
  %q = mla.q_concat %lat, %qr : tensor<2x4x128xf32>, tensor<2x4x16xf32> -> tensor<2x4x144xf32>
  return %q, %lat : tensor<2x4x144xf32>, tensor<2x4x128xf32>
}

// -----

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// The rotated q_pe has a second reader.
// CHECK-LABEL: artifact @rotated_reused
// CHECK: 1: rope_cache_update {{.*}} arena+[[QR:[0-9]+]][2x4x16] - buffer1+0[2x4x16]
// CHECK-NEXT: 2: q_absorb buffer0+0[2x4x32] buffer7+0[4x32x128] arena+[[L:[0-9]+]][2x4x128]
// CHECK-NEXT: 3: q_concat arena+[[L]][2x4x128] arena+[[QR]][2x4x16] buffer8+0[2x4x144]
// CHECK-NEXT: 4: copy arena+[[QR]][2x4x16] buffer9+0[2x4x16]
// CHECK-NOT: {576,144,1}
func.func @rotated_reused(%q_nope: tensor<2x4x32xf32>, %q_pe: tensor<2x4x16xf32>,
                          %kv: tensor<2x128xf32>, %k_pe: tensor<2x16xf32>,
                          %slots: tensor<2xi64>, %pos: tensor<2xi64>,
                          %cs: tensor<16x16xf32>, %cache: !cache,
                          %w_uk: tensor<4x32x128xf32>) -> (tensor<2x4x144xf32>, tensor<2x4x16xf32>) {
  %qr = mla.rope_kv_cache_update gptj %kv, %k_pe, %slots into %cache positions(%pos, %cs) rotate_q(%q_pe : tensor<2x4x16xf32>)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32> rotated_q tensor<2x4x16xf32>
  %lat = mla.q_absorb %q_nope, %w_uk : tensor<2x4x32xf32>, tensor<4x32x128xf32> -> tensor<2x4x128xf32>
  %q = mla.q_concat %lat, %qr : tensor<2x4x128xf32>, tensor<2x4x16xf32> -> tensor<2x4x144xf32>
  return %q, %qr : tensor<2x4x144xf32>, tensor<2x4x16xf32>
}

// -----

// q_pe rotated by a plain mla.rope (not the fused update): q_concat stays.
// CHECK-LABEL: artifact @plain_rope
// CHECK: 0: copy buffer1+0[2x4x16] arena+[[R:[0-9]+]][2x4x16]
// CHECK-NEXT: 1: rope arena+[[R]][2x4x16]
// CHECK-NEXT: 2: q_absorb buffer0+0[2x4x32] buffer4+0[4x32x128] arena+[[L:[0-9]+]][2x4x128]
// CHECK-NEXT: 3: q_concat arena+[[L]][2x4x128] arena+[[R]][2x4x16] buffer5+0[2x4x144]
// CHECK-NOT: {576,144,1}
func.func @plain_rope(%q_nope: tensor<2x4x32xf32>, %q_pe: tensor<2x4x16xf32>,
                      %pos: tensor<2xi64>, %cs: tensor<16x16xf32>,
                      %w_uk: tensor<4x32x128xf32>) -> tensor<2x4x144xf32> {
  %qr = mla.rope gptj %q_pe, %pos, %cs : tensor<2x4x16xf32>, tensor<2xi64>, tensor<16x16xf32>
  %lat = mla.q_absorb %q_nope, %w_uk : tensor<2x4x32xf32>, tensor<4x32x128xf32> -> tensor<2x4x128xf32>
  %q = mla.q_concat %lat, %qr : tensor<2x4x128xf32>, tensor<2x4x16xf32> -> tensor<2x4x144xf32>
  return %q : tensor<2x4x144xf32>
}

// -----

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// A latent query that q_absorb did not produce (here an argument).
// CHECK-LABEL: artifact @latent_argument
// CHECK: 1: rope_cache_update {{.*}} arena+[[QR:[0-9]+]][2x4x16] - buffer1+0[2x4x16]
// CHECK-NEXT: 2: q_concat buffer0+0[2x4x128] arena+[[QR]][2x4x16] buffer7+0[2x4x144]
// CHECK-NOT: {576,144,1}
func.func @latent_argument(%lat: tensor<2x4x128xf32>, %q_pe: tensor<2x4x16xf32>,
                           %kv: tensor<2x128xf32>, %k_pe: tensor<2x16xf32>,
                           %slots: tensor<2xi64>, %pos: tensor<2xi64>,
                           %cs: tensor<16x16xf32>, %cache: !cache) -> tensor<2x4x144xf32> {
  %qr = mla.rope_kv_cache_update gptj %kv, %k_pe, %slots into %cache positions(%pos, %cs) rotate_q(%q_pe : tensor<2x4x16xf32>)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32> rotated_q tensor<2x4x16xf32>
  %q = mla.q_concat %lat, %qr : tensor<2x4x128xf32>, tensor<2x4x16xf32> -> tensor<2x4x144xf32>
  return %q : tensor<2x4x144xf32>
}

// -----

!cache = !mla.kv_cache<?x16xf32, latent = 128, rope = 16>

// A q_pe view the kernel cannot read (every other column: inner stride 2)
// keeps the copy into the query, and the update rotates it in place there.
// CHECK-LABEL: artifact @strided_source
// CHECK: 1: copy buffer1+0[2x4x16]{128,32,2} buffer8+512[2x4x16]{576,144,1}
// CHECK-NEXT: 2: rope_cache_update cache0 buffer2+0[2x128] arena+0[2x16] buffer4+0[2] buffer5+0[2] buffer6+0[16x16] buffer8+512[2x4x16]{576,144,1}{{$}}
// CHECK-NEXT: 3: q_absorb
func.func @strided_source(%q_nope: tensor<2x4x32xf32>, %q_wide: tensor<2x4x32xf32>,
                          %kv: tensor<2x128xf32>, %k_pe: tensor<2x16xf32>,
                          %slots: tensor<2xi64>, %pos: tensor<2xi64>,
                          %cs: tensor<16x16xf32>, %cache: !cache,
                          %w_uk: tensor<4x32x128xf32>) -> tensor<2x4x144xf32> {
  %q_pe = tensor.extract_slice %q_wide[0, 0, 0] [2, 4, 16] [1, 1, 2] : tensor<2x4x32xf32> to tensor<2x4x16xf32>
  %qr = mla.rope_kv_cache_update gptj %kv, %k_pe, %slots into %cache positions(%pos, %cs) rotate_q(%q_pe : tensor<2x4x16xf32>)
      : tensor<2x128xf32>, tensor<2x16xf32>, tensor<2xi64> into !cache, tensor<2xi64>, tensor<16x16xf32> rotated_q tensor<2x4x16xf32>
  %lat = mla.q_absorb %q_nope, %w_uk : tensor<2x4x32xf32>, tensor<4x32x128xf32> -> tensor<2x4x128xf32>
  %q = mla.q_concat %lat, %qr : tensor<2x4x128xf32>, tensor<2x4x16xf32> -> tensor<2x4x144xf32>
  return %q : tensor<2x4x144xf32>
}
