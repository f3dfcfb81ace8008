// kernels=codegen: the cache writes get generated kernels, lowered by
// MLIR's own NVVM path to sm_90a PTX that the artifact embeds.
//
// RUN: mla-opt %s -mla-decode-pipeline='target=cuda-sm90 kernels=codegen' | FileCheck %s --check-prefix=PTX
// RUN: mla-opt %s -mla-decode-pipeline='target=cuda-sm90 kernels=codegen' | mla-translate --mla-to-artifact-listing | FileCheck %s --check-prefix=ART
// RUN: mla-opt %s -mla-decode-pipeline='target=cuda-sm90 kernels=library' | FileCheck %s --check-prefix=LIB
// RUN: mla-opt %s -mla-decode-pipeline | FileCheck %s --check-prefix=LIB
// The default (kernels=auto) generates kernels for the CUDA target.
// RUN: mla-opt %s -mla-decode-pipeline='target=cuda-sm90' | FileCheck %s --check-prefix=AUTO
// AUTO: mla.kernel
// AUTO: gpu.binary @mla_kernels
// RUN: not mla-opt %s -mla-decode-pipeline='kernels=fast' 2>&1 | FileCheck %s --check-prefix=BADOPT
// RUN: mla-opt %s -mla-decode-pipeline='target=cuda-sm90 kernels=codegen' | FileCheck %s --check-prefix=VOTE
// RUN: mla-opt %s -mla-decode-pipeline='target=cuda-sm90 kernels=codegen' | FileCheck %s --check-prefix=PDL

// The PTX text: 16-byte global loads and stores, no FMA contraction in the rope,
// IEEE division and saturating RNE fp8 conversion for fp8_ds_mla.
// PTX: gpu.binary @mla_kernels [#gpu.object<#nvvm.target<chip = "sm_90a", features = "+ptx80">
// PTX-SAME: .target sm_90a
// PTX-DAG: .visible .entry mla_rope_cache_update_plain_bf16_l512_p64_in_bf16_slot_i64_neox_pos_i64_q(
// PTX-DAG: ld.global.v4.b32
// PTX-DAG: mul.rn.f32
// PTX-DAG: sub.rn.f32
// PTX-DAG: st.global.v4.b32
// PTX-DAG: atom.global.min.s32
// PTX-DAG: .visible .entry mla_cache_update_fp8_ds_mla_f8e4m3fn_l512_p64_in_bf16_slot_i64(
// PTX-DAG: shfl.sync.bfly.b32
// PTX-DAG: div.rn.f32
// PTX-DAG: cvt.rn.satfinite.e4m3x2.f32
// PTX-NOT: fma.rn.f32
// PTX-NOT: gpu.module

// All-or-nothing in the PTX (the text is one line): in each kernel the
// error records' atomics and one barrier reduction (the vote) come before
// the first global store; the sm_90 pipeline asks for at least two blocks
// of four tokens an SM (the geometry measured fastest on the H200).
// VOTE: .visible .entry mla_rope_cache_update_plain_bf16_l512_p64_in_bf16_slot_i64_neox_pos_i64_q(
// VOTE-SAME: .minnctapersm 2
// VOTE-NOT: st.global
// VOTE-SAME: atom.global.min.s32
// VOTE-NOT: st.global
// VOTE-SAME: bar.red.or.pred
// VOTE-SAME: st.global.v4.b32
// VOTE-SAME: .visible .entry mla_cache_update_fp8_ds_mla_f8e4m3fn_l512_p64_in_bf16_slot_i64(
// VOTE-NOT: st.global
// VOTE-SAME: atom.global.min.s32
// VOTE-NOT: st.global
// VOTE-SAME: bar.red.or.pred
// VOTE-SAME: st.global
// VOTE-NOT: bar.red

// Programmatic dependent launch (docs/cuda.md): in each kernel
// griddepcontrol.wait comes before the first global load, store or atomic
// (only parameter loads precede it), launch_dependents right after it; the
// runtime launches a generated kernel with PDL only when its PTX shows this.
// PDL: .visible .entry mla_rope_cache_update_plain_bf16_l512_p64_in_bf16_slot_i64_neox_pos_i64_q(
// PDL-NOT: {{(ld|st|atom|red)}}.global
// PDL-SAME: griddepcontrol.wait;
// PDL-NOT: .global
// PDL-SAME: griddepcontrol.launch_dependents;
// PDL-SAME: ld.global
// PDL-SAME: .visible .entry mla_cache_update_fp8_ds_mla_f8e4m3fn_l512_p64_in_bf16_slot_i64(
// PDL-NOT: {{(ld|st|atom|red)}}.global
// PDL-SAME: griddepcontrol.wait;
// PDL-NOT: .global
// PDL-SAME: griddepcontrol.launch_dependents;
// PDL-SAME: ld.global

// ART: module 0 ptx {{[0-9]+}} bytes
// ART-NEXT: kernel 0 @mla_rope_cache_update_plain_bf16_l512_p64_in_bf16_slot_i64_neox_pos_i64_q rope_cache_update module 0 block 288 tokens 4
// ART-NEXT: kernel 1 @mla_cache_update_fp8_ds_mla_f8e4m3fn_l512_p64_in_bf16_slot_i64 cache_update module 0 block 320 tokens 4
// ART: rope_cache_update codegen(kernel0) cache0
// ART: cache_update codegen(kernel1) cache1

// LIB-NOT: mla.kernel
// LIB-NOT: gpu.binary
// BADOPT: Cannot find option named 'fast'

func.func @step(%kv_c: tensor<4x512xbf16> {mla.name = "kv_c"}, %k_pe: tensor<4x64xbf16> {mla.name = "k_pe"},
                %slots: tensor<4xi64> {mla.name = "slots"}, %pos: tensor<4xi64> {mla.name = "pos"},
                %cs: tensor<128x64xf32> {mla.name = "cos_sin"}, %q: tensor<4x16x64xbf16> {mla.name = "q_pe"},
                %cache: !mla.kv_cache<?x64xbf16> {mla.name = "cache"},
                %cache8: !mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla> {mla.name = "cache8"}) -> tensor<4x16x64xbf16> {
  %k = mla.rope neox %k_pe, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<128x64xf32>
  %qr = mla.rope neox %q, %pos, %cs : tensor<4x16x64xbf16>, tensor<4xi64>, tensor<128x64xf32>
  mla.kv_cache_update %kv_c, %k, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache8 : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla>
  return %qr : tensor<4x16x64xbf16>
}
