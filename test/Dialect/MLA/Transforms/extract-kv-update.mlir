// RUN: mla-opt %s -split-input-file -mla-extract-kv-update | FileCheck %s

// Decode: update first, then absorbed attention reading the cache, then V-up.
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%[[Q:.*]]: tensor<4x16x192xbf16>, %[[C:.*]]: tensor<4x512xbf16>, %[[P:.*]]: tensor<4x64xbf16>, %[[S:.*]]: tensor<4xi64>, %[[CACHE:.*]]: !mla.kv_cache<?x64xbf16>, %[[BT:.*]]: tensor<4x8xi32>, %[[SL:.*]]: tensor<4xi32>, %[[WUK:.*]]: tensor<16x128x512xbf16>, %[[WUV:.*]]: tensor<16x512x128xbf16>)
// CHECK-NEXT: mla.kv_cache_update %[[C]], %[[P]], %[[S]] into %[[CACHE]] :
// CHECK-NEXT: %[[LAT:.*]] = mla.decode_attention %[[Q]], %[[CACHE]][%[[BT]], %[[SL]]] absorb(%[[WUK]] : tensor<16x128x512xbf16>) softmax_scale = 1.000000e-01 : {{.*}} -> tensor<4x16x512xbf16>
// CHECK-NEXT: %[[OUT:.*]] = mla.v_up %[[LAT]], %[[WUV]] : tensor<4x16x512xbf16>, tensor<16x512x128xbf16> -> tensor<4x16x128xbf16>
// CHECK-NEXT: return %[[OUT]]
// CHECK-NOT: mla.attention
func.func @decode(%q: tensor<4x16x192xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                  %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %bt: tensor<4x8xi32>,
                  %sl: tensor<4xi32>, %w_uk: tensor<16x128x512xbf16>, %w_uv: tensor<16x512x128xbf16>)
    -> tensor<4x16x128xbf16> {
  %o = mla.attention decode %q, %kv_c, %k_pe, %slots into %cache[%bt, %sl] weights(%w_uk, %w_uv) softmax_scale = 0.1
      : tensor<4x16x192xbf16>, tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>,
        tensor<4x8xi32>, tensor<4xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16> -> tensor<4x16x128xbf16>
  return %o : tensor<4x16x128xbf16>
}

// -----

// Prefill: update, decompressed K/V of the new tokens, attention over context.
// CHECK-LABEL: func.func @prefill
// CHECK-SAME: (%[[Q:.*]]: tensor<10x16x192xbf16>, %[[C:.*]]: tensor<10x512xbf16>, %[[P:.*]]: tensor<10x64xbf16>, %[[S:.*]]: tensor<10xi64>, %[[CACHE:.*]]: !mla.kv_cache<?x64xbf16>, %[[BT:.*]]: tensor<2x8xi32>, %[[SL:.*]]: tensor<2xi32>, %[[WUK:.*]]: tensor<16x128x512xbf16>, %[[WUV:.*]]: tensor<16x512x128xbf16>, %[[QSL:.*]]: tensor<3xi32>)
// CHECK-NEXT: mla.kv_cache_update %[[C]], %[[P]], %[[S]] into %[[CACHE]] :
// CHECK-NEXT: %[[K:.*]], %[[V:.*]] = mla.decompress_kv %[[C]], %[[P]], %[[WUK]], %[[WUV]] : {{.*}} -> tensor<10x16x192xbf16>, tensor<10x16x128xbf16>
// CHECK-NEXT: %[[OUT:.*]] = mla.prefill_attention %[[Q]], %[[K]], %[[V]], %[[QSL]] context(%[[CACHE]][%[[BT]], %[[SL]]], %[[WUK]], %[[WUV]] :
// CHECK-NEXT: return %[[OUT]]
func.func @prefill(%q: tensor<10x16x192xbf16>, %kv_c: tensor<10x512xbf16>, %k_pe: tensor<10x64xbf16>,
                   %slots: tensor<10xi64>, %cache: !mla.kv_cache<?x64xbf16>, %bt: tensor<2x8xi32>,
                   %sl: tensor<2xi32>, %w_uk: tensor<16x128x512xbf16>, %w_uv: tensor<16x512x128xbf16>,
                   %qsl: tensor<3xi32>) -> tensor<10x16x128xbf16> {
  %o = mla.attention prefill %q, %kv_c, %k_pe, %slots into %cache[%bt, %sl] weights(%w_uk, %w_uv) query_start_loc(%qsl : tensor<3xi32>) softmax_scale = 0.1
      : tensor<10x16x192xbf16>, tensor<10x512xbf16>, tensor<10x64xbf16>, tensor<10xi64> into !mla.kv_cache<?x64xbf16>,
        tensor<2x8xi32>, tensor<2xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16> -> tensor<10x16x128xbf16>
  return %o : tensor<10x16x128xbf16>
}

// -----

// A per-tensor fp8 cache: the update quantises with the cache scale and the
// attention reads with it.
// CHECK-LABEL: func.func @fp8_scale
// CHECK: mla.kv_cache_update %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}} scale %[[SC:[^ ]*]] :
// CHECK-NEXT: mla.decode_attention {{.*}} kv_scale %[[SC]] absorb
func.func @fp8_scale(%q: tensor<4x16x192xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                     %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %bt: tensor<4x8xi32>,
                     %sl: tensor<4xi32>, %w_uk: tensor<16x128x512xbf16>, %w_uv: tensor<16x512x128xbf16>,
                     %s: tensor<f32>) -> tensor<4x16x128xbf16> {
  %o = mla.attention decode %q, %kv_c, %k_pe, %slots into %cache[%bt, %sl] weights(%w_uk, %w_uv) kv_scale %s softmax_scale = 0.1
      : tensor<4x16x192xbf16>, tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>,
        tensor<4x8xi32>, tensor<4xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16> -> tensor<4x16x128xbf16>
  return %o : tensor<4x16x128xbf16>
}

// -----

// Negative: already-quantised fp8 prefill inputs cannot be decompressed; the
// monolithic op stays.
// CHECK-LABEL: func.func @fp8_prefill_inputs_stay
// CHECK-NOT: mla.kv_cache_update
// CHECK: mla.attention prefill
func.func @fp8_prefill_inputs_stay(%q: tensor<2x16x192xbf16>, %kv_c: tensor<2x512xf8E4M3FN>, %k_pe: tensor<2x64xf8E4M3FN>,
                                   %slots: tensor<2xi64>, %cache: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %bt: tensor<1x8xi32>,
                                   %sl: tensor<1xi32>, %w_uk: tensor<16x128x512xbf16>, %w_uv: tensor<16x512x128xbf16>,
                                   %qsl: tensor<2xi32>, %s: tensor<f32>) -> tensor<2x16x128xbf16> {
  %o = mla.attention prefill %q, %kv_c, %k_pe, %slots into %cache[%bt, %sl] weights(%w_uk, %w_uv) query_start_loc(%qsl : tensor<2xi32>) kv_scale %s softmax_scale = 0.1
      : tensor<2x16x192xbf16>, tensor<2x512xf8E4M3FN>, tensor<2x64xf8E4M3FN>, tensor<2xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>,
        tensor<1x8xi32>, tensor<1xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16> -> tensor<2x16x128xbf16>
  return %o : tensor<2x16x128xbf16>
}
