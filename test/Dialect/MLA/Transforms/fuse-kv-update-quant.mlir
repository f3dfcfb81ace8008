// RUN: mla-opt %s -split-input-file -mla-fuse-kv-update-quant | FileCheck %s
// RUN: mla-opt %s -split-input-file -mla-fuse-kv-update-quant -mla-fuse-rope-kv-update | FileCheck %s --check-prefix=ROPE

// Both inputs quantised with one scale: the update quantises the float
// inputs itself; the dead quantize ops go.
// CHECK-LABEL: func.func @fuse
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %[[SC:[^:]*]]: tensor<f32>)
// CHECK-NEXT: mla.kv_cache_update %[[C]], %[[P]], %[[S]] into %[[CACHE]] scale %[[SC]] : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>
// CHECK-NEXT: return
// CHECK-NOT: mla.quantize
func.func @fuse(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                %cache: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %s: tensor<f32>) {
  %c8 = mla.quantize %kv_c, %s : tensor<4x512xbf16> -> tensor<4x512xf8E4M3FN>
  %p8 = mla.quantize %k_pe, %s : tensor<4x64xbf16> -> tensor<4x64xf8E4M3FN>
  mla.kv_cache_update %c8, %p8, %slots into %cache
      : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>
  return
}

// -----

// A quantize result with another user stays for that user.
// CHECK-LABEL: func.func @other_user
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %[[SC:[^:]*]]: tensor<f32>)
// CHECK-NEXT: %[[C8:.*]] = mla.quantize %[[C]], %[[SC]]
// CHECK-NEXT: mla.kv_cache_update %[[C]], %[[P]], %[[S]] into %[[CACHE]] scale %[[SC]] :
// CHECK-NEXT: return %[[C8]]
// CHECK-NOT: mla.quantize
func.func @other_user(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                      %cache: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %s: tensor<f32>) -> tensor<4x512xf8E4M3FN> {
  %c8 = mla.quantize %kv_c, %s : tensor<4x512xbf16> -> tensor<4x512xf8E4M3FN>
  %p8 = mla.quantize %k_pe, %s : tensor<4x64xbf16> -> tensor<4x64xf8E4M3FN>
  mla.kv_cache_update %c8, %p8, %slots into %cache
      : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>
  return %c8 : tensor<4x512xf8E4M3FN>
}

// -----

// Quantize ops defined outside the loop that holds the update: pure, so the
// update inside may quantise itself.
// CHECK-LABEL: func.func @quantize_outside_loop
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %[[SC:[^:]*]]: tensor<f32>, %{{.*}}: index)
// CHECK: scf.for
// CHECK-NEXT: mla.kv_cache_update %[[C]], %[[P]], %[[S]] into %[[CACHE]] scale %[[SC]] :
// CHECK-NOT: mla.quantize
func.func @quantize_outside_loop(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                 %cache: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %s: tensor<f32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = mla.quantize %kv_c, %s : tensor<4x512xbf16> -> tensor<4x512xf8E4M3FN>
  %p8 = mla.quantize %k_pe, %s : tensor<4x64xbf16> -> tensor<4x64xf8E4M3FN>
  scf.for %i = %c0 to %n step %c1 {
    mla.kv_cache_update %c8, %p8, %slots into %cache
        : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>
  }
  return
}

// -----

// Two scale values (even if equal at run time) cannot become one: unchanged.
// CHECK-LABEL: func.func @different_scales
// CHECK-NEXT: %[[C8:.*]] = mla.quantize
// CHECK-NEXT: %[[P8:.*]] = mla.quantize
// CHECK-NEXT: mla.kv_cache_update %[[C8]], %[[P8]], %{{.*}} into %{{.*}} : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>
func.func @different_scales(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                            %cache: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %s: tensor<f32>, %s2: tensor<f32>) {
  %c8 = mla.quantize %kv_c, %s : tensor<4x512xbf16> -> tensor<4x512xf8E4M3FN>
  %p8 = mla.quantize %k_pe, %s2 : tensor<4x64xbf16> -> tensor<4x64xf8E4M3FN>
  mla.kv_cache_update %c8, %p8, %slots into %cache
      : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>
  return
}

// -----

// Only kv_c quantised here; k_pe arrives already in fp8: unchanged.
// CHECK-LABEL: func.func @one_input_quantized
// CHECK-SAME: %[[P8:[^:]*]]: tensor<4x64xf8E4M3FN>
// CHECK-NEXT: %[[C8:.*]] = mla.quantize
// CHECK-NEXT: mla.kv_cache_update %[[C8]], %[[P8]], %{{.*}} into %{{.*}} : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>
func.func @one_input_quantized(%kv_c: tensor<4x512xbf16>, %p8: tensor<4x64xf8E4M3FN>, %slots: tensor<4xi64>,
                               %cache: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %s: tensor<f32>) {
  %c8 = mla.quantize %kv_c, %s : tensor<4x512xbf16> -> tensor<4x512xf8E4M3FN>
  mla.kv_cache_update %c8, %p8, %slots into %cache
      : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>
  return
}

// -----

// The float inputs have different element types, which one update cannot
// take: unchanged.
// CHECK-LABEL: func.func @mixed_float_types
// CHECK-NEXT: %[[C8:.*]] = mla.quantize
// CHECK-NEXT: %[[P8:.*]] = mla.quantize
// CHECK-NEXT: mla.kv_cache_update %[[C8]], %[[P8]], %{{.*}} into %{{.*}} : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>
func.func @mixed_float_types(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xf32>, %slots: tensor<4xi64>,
                             %cache: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %s: tensor<f32>) {
  %c8 = mla.quantize %kv_c, %s : tensor<4x512xbf16> -> tensor<4x512xf8E4M3FN>
  %p8 = mla.quantize %k_pe, %s : tensor<4x64xf32> -> tensor<4x64xf8E4M3FN>
  mla.kv_cache_update %c8, %p8, %slots into %cache
      : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>
  return
}

// -----

// Quantize, rope and update compose: this pass first, then the rope fusion
// carries the scale into the fused op.
// CHECK-LABEL: func.func @then_rope
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[POS:[^:]*]]: tensor<4xi64>, %[[CS:[^:]*]]: tensor<4096x64xf32>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %[[SC:[^:]*]]: tensor<f32>)
// CHECK-NEXT: %[[KR:.*]] = mla.rope neox %[[P]]
// CHECK-NEXT: mla.kv_cache_update %[[C]], %[[KR]], %[[S]] into %[[CACHE]] scale %[[SC]] :
// ROPE-LABEL: func.func @then_rope
// ROPE-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[POS:[^:]*]]: tensor<4xi64>, %[[CS:[^:]*]]: tensor<4096x64xf32>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %[[SC:[^:]*]]: tensor<f32>)
// ROPE-NEXT: mla.rope_kv_cache_update neox %[[C]], %[[P]], %[[S]] into %[[CACHE]] positions(%[[POS]], %[[CS]]) scale %[[SC]] :
// ROPE-NEXT: return
func.func @then_rope(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %pos: tensor<4xi64>,
                     %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>,
                     %cache: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %s: tensor<f32>) {
  %k = mla.rope neox %k_pe, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  %c8 = mla.quantize %kv_c, %s : tensor<4x512xbf16> -> tensor<4x512xf8E4M3FN>
  %p8 = mla.quantize %k, %s : tensor<4x64xbf16> -> tensor<4x64xf8E4M3FN>
  mla.kv_cache_update %c8, %p8, %slots into %cache
      : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>
  return
}
