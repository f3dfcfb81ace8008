// RUN: mla-opt %s -split-input-file | mla-opt -split-input-file | FileCheck %s
// RUN: mla-opt %s -split-input-file -mlir-print-op-generic | mla-opt -split-input-file | FileCheck %s

// Every op in its custom form, including each optional operand and result,
// round-trips through the custom and the generic printer.

// CHECK-LABEL: func.func @rope
// CHECK-SAME: (%[[X:.*]]: tensor<4x16x64xbf16>, %[[P:.*]]: tensor<4xi64>, %[[CS:.*]]: tensor<8192x64xf32>)
func.func @rope(%x: tensor<4x16x64xbf16>, %pos: tensor<4xi64>, %cs: tensor<8192x64xf32>)
    -> (tensor<4x16x64xbf16>, tensor<4x16x64xbf16>) {
  // CHECK: mla.rope neox %[[X]], %[[P]], %[[CS]] : tensor<4x16x64xbf16>, tensor<4xi64>, tensor<8192x64xf32>
  %0 = mla.rope neox %x, %pos, %cs : tensor<4x16x64xbf16>, tensor<4xi64>, tensor<8192x64xf32>
  // CHECK: mla.rope gptj %[[X]], %[[P]], %[[CS]]
  %1 = mla.rope gptj %x, %pos, %cs : tensor<4x16x64xbf16>, tensor<4xi64>, tensor<8192x64xf32>
  return %0, %1 : tensor<4x16x64xbf16>, tensor<4x16x64xbf16>
}

// -----

// CHECK-LABEL: func.func @q_prep
func.func @q_prep(%q_nope: tensor<?x16x128xbf16>, %w_uk: tensor<16x128x512xbf16>,
                  %q_pe: tensor<?x16x64xbf16>, %s: tensor<f32>)
    -> tensor<?x16x576xf8E4M3FN> {
  // CHECK: %[[A:.*]] = mla.q_absorb %{{.*}}, %{{.*}} : tensor<?x16x128xbf16>, tensor<16x128x512xbf16> -> tensor<?x16x512xbf16>
  %a = mla.q_absorb %q_nope, %w_uk : tensor<?x16x128xbf16>, tensor<16x128x512xbf16> -> tensor<?x16x512xbf16>
  // CHECK: %[[C:.*]] = mla.q_concat %[[A]], %{{.*}} : tensor<?x16x512xbf16>, tensor<?x16x64xbf16> -> tensor<?x16x576xbf16>
  %c = mla.q_concat %a, %q_pe : tensor<?x16x512xbf16>, tensor<?x16x64xbf16> -> tensor<?x16x576xbf16>
  // CHECK: mla.quantize %[[C]], %{{.*}} : tensor<?x16x576xbf16> -> tensor<?x16x576xf8E4M3FN>
  %f = mla.quantize %c, %s : tensor<?x16x576xbf16> -> tensor<?x16x576xf8E4M3FN>
  return %f : tensor<?x16x576xf8E4M3FN>
}

// -----

// CHECK-LABEL: func.func @v_up_and_decompress
func.func @v_up_and_decompress(%o: tensor<2x16x512xf32>, %w_uv: tensor<16x512x128xf32>,
                               %kv_c: tensor<7x512xf32>, %k_pe: tensor<7x64xf32>,
                               %w_uk: tensor<16x128x512xf32>)
    -> (tensor<2x16x128xf32>, tensor<7x16x192xf32>, tensor<7x16x128xf32>) {
  // CHECK: mla.v_up %{{.*}}, %{{.*}} : tensor<2x16x512xf32>, tensor<16x512x128xf32> -> tensor<2x16x128xf32>
  %v = mla.v_up %o, %w_uv : tensor<2x16x512xf32>, tensor<16x512x128xf32> -> tensor<2x16x128xf32>
  // CHECK: mla.decompress_kv %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<7x512xf32>, tensor<7x64xf32>, tensor<16x128x512xf32>, tensor<16x512x128xf32> -> tensor<7x16x192xf32>, tensor<7x16x128xf32>
  %k, %vv = mla.decompress_kv %kv_c, %k_pe, %w_uk, %w_uv : tensor<7x512xf32>, tensor<7x64xf32>, tensor<16x128x512xf32>, tensor<16x512x128xf32> -> tensor<7x16x192xf32>, tensor<7x16x128xf32>
  return %v, %k, %vv : tensor<2x16x128xf32>, tensor<7x16x192xf32>, tensor<7x16x128xf32>
}

// -----

// CHECK-LABEL: func.func @updates
func.func @updates(%kv_c: tensor<8x512xbf16>, %k_pe: tensor<8x64xbf16>, %slots: tensor<6xi64>,
                   %cache: !mla.kv_cache<?x16xbf16>, %fp8: !mla.kv_cache<32x16xf8E4M3FN, per_tensor>,
                   %ds: !mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla>, %s: tensor<f32>,
                   %qkv_c: tensor<8x512xf8E4M3FN>, %qk_pe: tensor<8x64xf8E4M3FN>, %slots32: tensor<8xi32>) {
  // A slot mapping shorter than the padded inputs.
  // CHECK: mla.kv_cache_update %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}} : tensor<8x512xbf16>, tensor<8x64xbf16>, tensor<6xi64> into !mla.kv_cache<?x16xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<8x512xbf16>, tensor<8x64xbf16>, tensor<6xi64> into !mla.kv_cache<?x16xbf16>
  // CHECK: mla.kv_cache_update %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}} scale %{{.*}} : {{.*}} into !mla.kv_cache<32x16xf8E4M3FN, per_tensor>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %fp8 scale %s : tensor<8x512xbf16>, tensor<8x64xbf16>, tensor<6xi64> into !mla.kv_cache<32x16xf8E4M3FN, per_tensor>
  // Already-quantised inputs are copied.
  // CHECK: mla.kv_cache_update {{.*}} : tensor<8x512xf8E4M3FN>, tensor<8x64xf8E4M3FN>, tensor<8xi32> into !mla.kv_cache<32x16xf8E4M3FN, per_tensor>
  mla.kv_cache_update %qkv_c, %qk_pe, %slots32 into %fp8 : tensor<8x512xf8E4M3FN>, tensor<8x64xf8E4M3FN>, tensor<8xi32> into !mla.kv_cache<32x16xf8E4M3FN, per_tensor>
  // CHECK: mla.kv_cache_update {{.*}} into !mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %ds : tensor<8x512xbf16>, tensor<8x64xbf16>, tensor<6xi64> into !mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla>
  return
}

// -----

// CHECK-LABEL: func.func @fused_rope_update
func.func @fused_rope_update(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                             %cache: !mla.kv_cache<?x64xbf16>, %pos: tensor<4xi64>, %cs: tensor<4096x64xf32>,
                             %q_pe: tensor<4x16x64xbf16>, %fp8: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>,
                             %s: tensor<f32>) -> (tensor<4x16x64xbf16>, tensor<4x64xbf16>) {
  // Neither rotated value returned.
  // CHECK: mla.rope_kv_cache_update neox %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}} positions(%{{.*}}, %{{.*}}) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>{{$}}
  mla.rope_kv_cache_update neox %kv_c, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  // Rotated q only, into a per-tensor fp8 cache.
  // CHECK: %{{.*}} = mla.rope_kv_cache_update gptj {{.*}} rotate_q(%{{.*}} : tensor<4x16x64xbf16>) scale %{{.*}} : {{.*}} rotated_q tensor<4x16x64xbf16>{{$}}
  %q1 = mla.rope_kv_cache_update gptj %kv_c, %k_pe, %slots into %fp8 positions(%pos, %cs) rotate_q(%q_pe : tensor<4x16x64xbf16>) scale %s
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, tensor<4xi64>, tensor<4096x64xf32> rotated_q tensor<4x16x64xbf16>
  // Rotated k only.
  // CHECK: %{{.*}} = mla.rope_kv_cache_update neox {{.*}} rotated_k tensor<4x64xbf16>{{$}}
  %k1 = mla.rope_kv_cache_update neox %kv_c, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<4096x64xf32> rotated_k tensor<4x64xbf16>
  // Both.
  // CHECK: %{{.*}}, %{{.*}} = mla.rope_kv_cache_update neox {{.*}} rotated_q tensor<4x16x64xbf16> rotated_k tensor<4x64xbf16>
  %q2, %k2 = mla.rope_kv_cache_update neox %kv_c, %k_pe, %slots into %cache positions(%pos, %cs) rotate_q(%q_pe : tensor<4x16x64xbf16>)
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<4096x64xf32> rotated_q tensor<4x16x64xbf16> rotated_k tensor<4x64xbf16>
  return %q2, %k1 : tensor<4x16x64xbf16>, tensor<4x64xbf16>
}

// -----

// CHECK-LABEL: func.func @decode
func.func @decode(%q: tensor<?x16x576xbf16>, %cache: !mla.kv_cache<?x64xbf16>, %bt: tensor<?x32xi32>,
                  %sl: tensor<?xi32>, %qh: tensor<?x16x192xbf16>, %w_uk: tensor<16x128x512xbf16>,
                  %fp8: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %s: tensor<f32>, %qs: tensor<f32>)
    -> (tensor<?x16x512xbf16>, tensor<?x16xf32>, tensor<?x16x512xbf16>, tensor<?x16x512xbf16>) {
  // CHECK: %{{.*}} = mla.decode_attention %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] softmax_scale = 1.250000e-01 : tensor<?x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<?x32xi32>, tensor<?xi32> -> tensor<?x16x512xbf16>{{$}}
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.125
      : tensor<?x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<?x32xi32>, tensor<?xi32> -> tensor<?x16x512xbf16>
  // CHECK: %{{.*}}, %{{.*}} = mla.decode_attention {{.*}} absorb(%{{.*}} : tensor<16x128x512xbf16>) softmax_scale = {{.*}} -> tensor<?x16x512xbf16>, tensor<?x16xf32>
  %o2, %lse = mla.decode_attention %qh, %cache[%bt, %sl] absorb(%w_uk : tensor<16x128x512xbf16>) softmax_scale = 0.125
      : tensor<?x16x192xbf16>, !mla.kv_cache<?x64xbf16>, tensor<?x32xi32>, tensor<?xi32> -> tensor<?x16x512xbf16>, tensor<?x16xf32>
  // CHECK: mla.decode_attention %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] kv_scale %{{.*}} absorb(%{{.*}} : tensor<16x128x512xbf16>) q_scale %{{.*}} softmax_scale
  %o3 = mla.decode_attention %qh, %fp8[%bt, %sl] kv_scale %s absorb(%w_uk : tensor<16x128x512xbf16>) q_scale %qs softmax_scale = 0.125
      : tensor<?x16x192xbf16>, !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, tensor<?x32xi32>, tensor<?xi32> -> tensor<?x16x512xbf16>
  return %o, %lse, %o2, %o3 : tensor<?x16x512xbf16>, tensor<?x16xf32>, tensor<?x16x512xbf16>, tensor<?x16x512xbf16>
}

// -----

// CHECK-LABEL: func.func @prefill
func.func @prefill(%q: tensor<10x16x192xbf16>, %k: tensor<10x16x192xbf16>, %v: tensor<10x16x128xbf16>,
                   %qsl: tensor<3xi32>, %cache: !mla.kv_cache<?x64xbf16>, %bt: tensor<2x8xi32>,
                   %sl: tensor<2xi32>, %w_uk: tensor<16x128x512xbf16>, %w_uv: tensor<16x512x128xbf16>)
    -> (tensor<10x16x128xbf16>, tensor<10x16x128xbf16>, tensor<10x16xf32>) {
  // CHECK: mla.prefill_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} softmax_scale = {{.*}} : tensor<10x16x192xbf16>, tensor<10x16x192xbf16>, tensor<10x16x128xbf16>, tensor<3xi32> -> tensor<10x16x128xbf16>{{$}}
  %o = mla.prefill_attention %q, %k, %v, %qsl softmax_scale = 0.1
      : tensor<10x16x192xbf16>, tensor<10x16x192xbf16>, tensor<10x16x128xbf16>, tensor<3xi32> -> tensor<10x16x128xbf16>
  // CHECK: mla.prefill_attention {{.*}} context(%{{.*}}[%{{.*}}, %{{.*}}], %{{.*}}, %{{.*}} : !mla.kv_cache<?x64xbf16>, tensor<2x8xi32>, tensor<2xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16>) softmax_scale = {{.*}} -> tensor<10x16x128xbf16>, tensor<10x16xf32>
  %o2, %lse = mla.prefill_attention %q, %k, %v, %qsl context(%cache[%bt, %sl], %w_uk, %w_uv
      : !mla.kv_cache<?x64xbf16>, tensor<2x8xi32>, tensor<2xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16>) softmax_scale = 0.1
      : tensor<10x16x192xbf16>, tensor<10x16x192xbf16>, tensor<10x16x128xbf16>, tensor<3xi32> -> tensor<10x16x128xbf16>, tensor<10x16xf32>
  return %o, %o2, %lse : tensor<10x16x128xbf16>, tensor<10x16x128xbf16>, tensor<10x16xf32>
}

// -----

// CHECK-LABEL: func.func @monolithic_and_fused
func.func @monolithic_and_fused(%q: tensor<4x16x192xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                                %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %bt: tensor<4x8xi32>,
                                %sl: tensor<4xi32>, %w_uk: tensor<16x128x512xbf16>, %w_uv: tensor<16x512x128xbf16>,
                                %ql: tensor<4x16x576xbf16>, %qsl: tensor<3xi32>, %bt2: tensor<2x8xi32>, %sl2: tensor<2xi32>)
    -> (tensor<4x16x128xbf16>, tensor<4x16x128xbf16>, tensor<4x16x512xbf16>) {
  // CHECK: mla.attention decode %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}}[%{{.*}}, %{{.*}}] weights(%{{.*}}, %{{.*}}) softmax_scale = {{.*}} -> tensor<4x16x128xbf16>
  %a = mla.attention decode %q, %kv_c, %k_pe, %slots into %cache[%bt, %sl] weights(%w_uk, %w_uv) softmax_scale = 0.1
      : tensor<4x16x192xbf16>, tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>,
        tensor<4x8xi32>, tensor<4xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16> -> tensor<4x16x128xbf16>
  // CHECK: mla.attention prefill {{.*}} weights(%{{.*}}, %{{.*}}) query_start_loc(%{{.*}} : tensor<3xi32>) softmax_scale
  %p = mla.attention prefill %q, %kv_c, %k_pe, %slots into %cache[%bt2, %sl2] weights(%w_uk, %w_uv) query_start_loc(%qsl : tensor<3xi32>) softmax_scale = 0.1
      : tensor<4x16x192xbf16>, tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>,
        tensor<2x8xi32>, tensor<2xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16> -> tensor<4x16x128xbf16>
  // CHECK: mla.decode_attention_with_update %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] update(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64>) softmax_scale
  %f = mla.decode_attention_with_update %ql, %cache[%bt, %sl] update(%kv_c, %k_pe, %slots : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64>) softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %a, %p, %f : tensor<4x16x128xbf16>, tensor<4x16x128xbf16>, tensor<4x16x512xbf16>
}

// -----

// CHECK-LABEL: func.func @dense
func.func @dense(%x: tensor<?x2048xbf16>, %w: tensor<576x2048xbf16>, %g: tensor<512xbf16>, %c: tensor<?x512xbf16>)
    -> (tensor<?x576xbf16>, tensor<?x512xbf16>, tensor<?x512xbf16>) {
  // CHECK: mla.linear %{{.*}}, %{{.*}} : tensor<?x2048xbf16>, tensor<576x2048xbf16> -> tensor<?x576xbf16>
  %y = mla.linear %x, %w : tensor<?x2048xbf16>, tensor<576x2048xbf16> -> tensor<?x576xbf16>
  // CHECK: mla.rms_norm %{{.*}}, %{{.*}} : tensor<?x512xbf16>, tensor<512xbf16>
  %n = mla.rms_norm %c, %g : tensor<?x512xbf16>, tensor<512xbf16>
  // CHECK: mla.rms_norm %{{.*}}, %{{.*}} {epsilon = 9.99999974E-6 : f32} : tensor<?x512xbf16>, tensor<512xbf16>
  %m = mla.rms_norm %c, %g {epsilon = 1.0e-5 : f32} : tensor<?x512xbf16>, tensor<512xbf16>
  return %y, %n, %m : tensor<?x576xbf16>, tensor<?x512xbf16>, tensor<?x512xbf16>
}

// -----

// CHECK-LABEL: func.func @dense_addend
func.func @dense_addend(%x: tensor<?x2048xbf16>, %w: tensor<576x2048xbf16>, %r: tensor<4x576xbf16>) -> tensor<4x576xbf16> {
  // CHECK: %[[Y:.*]] = mla.linear %{{.*}}, %{{.*}} addend(%{{.*}} : tensor<4x576xbf16>) : tensor<?x2048xbf16>, tensor<576x2048xbf16> -> tensor<4x576xbf16>
  %y = mla.linear %x, %w addend(%r : tensor<4x576xbf16>) : tensor<?x2048xbf16>, tensor<576x2048xbf16> -> tensor<4x576xbf16>
  // A static addend is accepted against a dynamic result.
  // CHECK: mla.linear %{{.*}}, %{{.*}} addend(%[[Y]] : tensor<4x576xbf16>) : tensor<?x2048xbf16>, tensor<576x2048xbf16> -> tensor<?x576xbf16>
  %z = mla.linear %x, %w addend(%y : tensor<4x576xbf16>) : tensor<?x2048xbf16>, tensor<576x2048xbf16> -> tensor<?x576xbf16>
  return %y : tensor<4x576xbf16>
}

// -----

// The latent norm round-trips, into plain and fp8 caches, with q rotation.
// CHECK-LABEL: func.func @rope_update_latent_norm
// CHECK: mla.rope_kv_cache_update neox %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}} positions(%{{.*}}, %{{.*}}) latent_norm(%{{.*}} : tensor<512xbf16>, epsilon = 9.99999997E-7) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>{{$}}
// CHECK: %{{.*}} = mla.rope_kv_cache_update gptj {{.*}} rotate_q(%{{.*}} : tensor<4x16x64xbf16>) latent_norm(%{{.*}} : tensor<512xf32>, epsilon = 9.99999974E-6) : {{.*}} into !mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla>, {{.*}} rotated_q tensor<4x16x64xbf16>{{$}}
func.func @rope_update_latent_norm(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                   %cache: !mla.kv_cache<?x64xbf16>, %pos: tensor<4xi64>, %cs: tensor<4096x64xf32>,
                                   %w: tensor<512xbf16>, %w32: tensor<512xf32>, %q_pe: tensor<4x16x64xbf16>,
                                   %ds: !mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla>) -> tensor<4x16x64xbf16> {
  mla.rope_kv_cache_update neox %kv_c, %k_pe, %slots into %cache positions(%pos, %cs)
      latent_norm(%w : tensor<512xbf16>, epsilon = 1.0e-6)
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  %q = mla.rope_kv_cache_update gptj %kv_c, %k_pe, %slots into %ds positions(%pos, %cs)
      rotate_q(%q_pe : tensor<4x16x64xbf16>) latent_norm(%w32 : tensor<512xf32>, epsilon = 1.0e-5)
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla>, tensor<4xi64>, tensor<4096x64xf32>
        rotated_q tensor<4x16x64xbf16>
  return %q : tensor<4x16x64xbf16>
}

// -----

// #mla.rope_table prints only the fields that differ from their defaults;
// the fields may come in any order.
// CHECK-LABEL: func.func private @rope_tables
// CHECK-SAME: mla.rope_table = #mla.rope_table<>
// CHECK-SAME: mla.rope_table = #mla.rope_table<theta = 5.000000e+04, factor = 4.000000e+01, original_max_position = 4096, beta_fast = 1.600000e+01, beta_slow = 2.000000e+00, mscale = 7.070000e-01, mscale_all_dim = 5.000000e-01>
func.func private @rope_tables(
    tensor<64x64xf32> {mla.rope_table = #mla.rope_table<theta = 10000.0>},
    tensor<64x64xf32> {mla.rope_table = #mla.rope_table<mscale_all_dim = 0.5, theta = 50000.0, factor = 40.0, original_max_position = 4096, beta_fast = 16.0, beta_slow = 2.0, mscale = 0.707>})
