// The decode pipeline on realistic DeepSeek-V2-Lite steps (hidden 2048, 16
// heads, latent 512 + rope 64): the final op sequence of one and two layers.
//
// RUN: mla-opt %mla_src_root/examples/deepseek-v2-lite-decode-layer.mlir -mla-decode-pipeline='fuse-kv-norm=true' | FileCheck %s --check-prefix=ONE
// RUN: mla-opt %mla_src_root/examples/deepseek-v2-lite-decode-2layers.mlir -mla-decode-pipeline | FileCheck %s --check-prefix=TWO
// RUN: mla-opt %mla_src_root/examples/deepseek-v2-lite-decode-layer.mlir -mla-decode-pipeline='target=cuda-sm90 fuse-into-attention=true fuse-rope=false' | FileCheck %s --check-prefix=FUSED
// RUN: mla-opt %mla_src_root/examples/deepseek-v2-lite-decode-layer.mlir -mla-decode-pipeline='fuse-into-attention=true fuse-rope=false' | FileCheck %s --check-prefix=FUSED
// RUN: mla-opt %mla_src_root/examples/deepseek-v2-lite-decode-layer.mlir -mla-decode-pipeline='fuse-rope=false lift-q-prep=false schedule=none' | FileCheck %s --check-prefix=MIN
// RUN: mla-opt %mla_src_root/examples/deepseek-v2-lite-decode-2layers.mlir -mla-decode-pipeline='fuse-linear-addend=false' | FileCheck %s --check-prefix=NOADDEND
// RUN: mla-opt %mla_src_root/examples/deepseek-v2-lite-decode-layer.mlir -mla-decode-pipeline | FileCheck %s --check-prefix=NOKVNORM
// RUN: mla-opt %mla_src_root/examples/deepseek-v2-lite-decode-layer.mlir -mla-decode-pipeline='fuse-projections=false' | FileCheck %s --check-prefix=NOFUSEPROJ
// RUN: not mla-opt %mla_src_root/examples/deepseek-v2-lite-decode-layer.mlir -mla-decode-pipeline='target=tpu' 2>&1 | FileCheck %s --check-prefix=BADTARGET
// RUN: not mla-opt %mla_src_root/examples/deepseek-v2-lite-decode-layer.mlir -mla-decode-pipeline='schedule=sideways' 2>&1 | FileCheck %s --check-prefix=BADSCHEDULE

// By default (fuse-kv-norm=false: no gain measured on the H200, see
// docs/Passes/MLAPasses.md, -mla-fuse-kv-norm) the latent norm stays its
// own op, read by the update.
// NOKVNORM-LABEL: func.func @decode_layer
// NOKVNORM: %[[N:.*]] = mla.rms_norm %extracted_slice{{.*}}, %arg10
// NOKVNORM-NEXT: mla.rope_kv_cache_update gptj %[[N]], {{.*}} rotate_q({{.*}} : tensor<8x16x64xbf16>) : {{.*}} rotated_q tensor<8x16x64xbf16>{{$}}
// NOKVNORM-NOT: latent_norm

// fuse-projections=false keeps q_proj and kv_a_proj as two GEMMs.
// NOFUSEPROJ-LABEL: func.func @decode_layer
// NOFUSEPROJ-NOT: tensor.concat
// NOFUSEPROJ: mla.linear %{{.*}}, %arg8 : tensor<8x2048xbf16>, tensor<3072x2048xbf16> -> tensor<8x3072xbf16>
// NOFUSEPROJ: mla.linear %{{.*}}, %arg9 : tensor<8x2048xbf16>, tensor<576x2048xbf16> -> tensor<8x576xbf16>
// NOFUSEPROJ-NOT: tensor.concat

// One layer: a single fused kernel rotates q_pe and k_pe and writes the cache;
// the explicit query preparation consumes the rotated q_pe after it, then the
// latent attention reads the cache.
// ONE-LABEL: func.func @decode_layer
// ONE-SAME: %[[POS:arg1]]: tensor<8xi64> {{.*}}, %[[SLOTS:arg2]]: tensor<8xi64> {{.*}}, %[[BT:arg3]]: tensor<8x64xi32> {{.*}}, %[[SL:arg4]]: tensor<8xi32> {{.*}}, %[[CACHE:arg5]]: !mla.kv_cache<?x64xbf16> {{.*}}mla.noalias}, %[[CS:arg6]]
// q_proj and kv_a_proj read the same normalised input: one GEMM over their
// concatenated weights (mla-fuse-projections), sliced back into q and kv.
// ONE: %[[H:.*]] = mla.rms_norm %arg0
// ONE-NEXT: %[[W:.*]] = tensor.concat dim(0) %arg8, %arg9 : (tensor<3072x2048xbf16>, tensor<576x2048xbf16>) -> tensor<3648x2048xbf16>
// ONE-NEXT: %[[P:.*]] = mla.linear %[[H]], %[[W]] : tensor<8x2048xbf16>, tensor<3648x2048xbf16> -> tensor<8x3648xbf16>
// ONE-NEXT: %[[QF:.*]] = tensor.extract_slice %[[P]][0, 0] [8, 3072] [1, 1]
// ONE-NEXT: %[[KV:.*]] = tensor.extract_slice %[[P]][0, 3072] [8, 576] [1, 1]
// ONE-NEXT: %[[Q:.*]] = tensor.expand_shape %[[QF]]
// ONE-NEXT: %[[QNOPE:.*]] = tensor.extract_slice %[[Q]][0, 0, 0] [8, 16, 128]
// ONE-NEXT: %[[QPE:.*]] = tensor.extract_slice %[[Q]][0, 0, 128] [8, 16, 64]
// ONE-NEXT: %[[KVC:.*]] = tensor.extract_slice %[[KV]][0, 0] [8, 512]
// ONE-NEXT: %[[KPE:.*]] = tensor.extract_slice %[[KV]][0, 512] [8, 64]
// ONE-NEXT: %[[QROT:.*]] = mla.rope_kv_cache_update gptj %[[KVC]], %[[KPE]], %[[SLOTS]] into %[[CACHE]] positions(%[[POS]], %[[CS]]) rotate_q(%[[QPE]] : tensor<8x16x64xbf16>) latent_norm(%arg10 : tensor<512xbf16>, epsilon = 9.99999997E-7)
// ONE-NEXT: %[[LAT:.*]] = mla.q_absorb %[[QNOPE]], %arg11
// ONE-NEXT: %[[QL:.*]] = mla.q_concat %[[LAT]], %[[QROT]]
// ONE-NEXT: %[[O:.*]] = mla.decode_attention %[[QL]], %[[CACHE]][%[[BT]], %[[SL]]] softmax_scale = 0.114721403
// ONE-NEXT: %[[V:.*]] = mla.v_up %[[O]], %arg12
// ONE-NEXT: %[[F:.*]] = tensor.collapse_shape %[[V]]
// ONE-NEXT: %[[OUT:.*]] = mla.linear %[[F]], %arg13
// ONE-NEXT: return %[[OUT]]
// ONE-NOT: mla.attention
// ONE-NOT: mla.rope

// Two layers: each layer's fused write goes to its own cache, each attention
// reads its own cache after that write, and layer 2 consumes layer 1's sum.
// Each residual add is folded into its o_proj linear (the add had the
// residual on the left, the product on the right).
// TWO-LABEL: func.func @decode_step
// TWO-NOT: mla.attention
// TWO: mla.rope_kv_cache_update gptj %{{.*}} into %[[C0:arg6]] positions
// TWO: mla.decode_attention %{{.*}}, %[[C0]][
// TWO: %[[F0:.*]] = tensor.collapse_shape
// TWO-NEXT: %[[SUM0:.*]] = mla.linear %[[F0]], %arg13 addend(%arg0 : tensor<8x2048xbf16>) : tensor<8x2048xbf16>, tensor<2048x2048xbf16> -> tensor<8x2048xbf16>
// TWO-NEXT: %{{.*}} = mla.rms_norm %[[SUM0]]
// TWO: mla.rope_kv_cache_update gptj %{{.*}} into %[[C1:arg14]] positions
// TWO: mla.decode_attention %{{.*}}, %[[C1]][
// TWO: %[[F1:.*]] = tensor.collapse_shape
// TWO-NEXT: %[[SUM1:.*]] = mla.linear %[[F1]], %arg21 addend(%[[SUM0]] : tensor<8x2048xbf16>)
// TWO-NEXT: return %[[SUM1]]
// TWO-NOT: mla.rope gptj
// TWO-NOT: arith.addf

// With the fusion off, the adds stay and the linears have no addend.
// NOADDEND-LABEL: func.func @decode_step
// NOADDEND-NOT: addend(
// NOADDEND: %[[O0:.*]] = mla.linear %{{.*}}, %arg13 : tensor<8x2048xbf16>, tensor<2048x2048xbf16> -> tensor<8x2048xbf16>
// NOADDEND-NEXT: %[[SUM0:.*]] = arith.addf %arg0, %[[O0]]
// NOADDEND-NOT: addend(
// NOADDEND: %[[O1:.*]] = mla.linear %{{.*}}, %arg21 :
// NOADDEND-NEXT: arith.addf %[[SUM0]], %[[O1]]
// NOADDEND-NOT: addend(

// With the attention fusion (both targets have the kernel): one op writes
// the rows and attends.
// FUSED-LABEL: func.func @decode_layer
// FUSED-NOT: mla.kv_cache_update
// FUSED: %[[QL:.*]] = mla.q_concat
// FUSED-NEXT: mla.decode_attention_with_update %[[QL]], %arg5[%arg3, %arg4] update(
// FUSED-NOT: mla.decode_attention %

// Fusions off: extraction alone, absorbing attention, V-up.
// MIN-LABEL: func.func @decode_layer
// MIN: mla.kv_cache_update
// MIN-NEXT: %[[O:.*]] = mla.decode_attention %{{.*}} absorb(
// MIN-NEXT: mla.v_up %[[O]]
// MIN-NOT: mla.q_absorb

// BADTARGET: Cannot find option named 'tpu'
// BADSCHEDULE: Cannot find option named 'sideways'
