// The prefill pipeline on a DeepSeek-V2-Lite prefill step (3 requests, 24
// packed tokens): the fused rope write, MHA keys and values for the new
// tokens, and chunked-context attention reading the cache.
//
// RUN: mla-opt %mla_src_root/examples/deepseek-v2-lite-prefill-layer.mlir -mla-prefill-pipeline | FileCheck %s
// RUN: mla-opt %mla_src_root/examples/deepseek-v2-lite-prefill-layer.mlir -mla-prefill-pipeline | FileCheck %s --check-prefix=NONORM

// The normalised latent is also decompressed (kv_b): mla-fuse-kv-norm must
// leave the norm alone.
// NONORM-NOT: latent_norm
// NONORM: mla.rms_norm %extracted_slice
// NONORM-NOT: latent_norm

// CHECK-LABEL: func.func @prefill_step
// CHECK-SAME: %[[SLOTS:arg2]]: tensor<24xi64>, %[[BT:arg3]]: tensor<3x64xi32>, %[[SL:arg4]]: tensor<3xi32>, %{{.*}}, %[[QSL:arg6]]: tensor<4xi32>, %[[CACHE:arg7]]: !mla.kv_cache<?x64xbf16> {mla.noalias}
// CHECK: %[[Q:.*]] = tensor.concat dim(2)
// CHECK: %[[NORM:.*]] = mla.rms_norm
// CHECK-NEXT: %[[KROT:.*]] = mla.rope_kv_cache_update gptj %[[NORM]], %{{.*}}, %[[SLOTS]] into %[[CACHE]] positions({{.*}}) : {{.*}} rotated_k tensor<24x64xbf16>
// CHECK-NEXT: %[[K:.*]], %[[V:.*]] = mla.decompress_kv %[[NORM]], %[[KROT]], %arg12, %arg13
// CHECK-NEXT: %[[O:.*]] = mla.prefill_attention %[[Q]], %[[K]], %[[V]], %[[QSL]] context(%[[CACHE]][%[[BT]], %[[SL]]], %arg12, %arg13
// CHECK-NOT: mla.attention
// CHECK-NOT: mla.q_absorb

// The residual add is the o_proj linear's addend.
// CHECK: %[[F:.*]] = tensor.collapse_shape %[[O]]
// CHECK-NEXT: %[[OUT:.*]] = mla.linear %[[F]], %{{.*}} addend(%arg0 : tensor<24x2048xbf16>)
// CHECK-NEXT: return %[[OUT]]
// CHECK-NOT: arith.addf
