// kernels=codegen with the latent norm folded into the fused update
// (mla-fuse-kv-norm): one generated kernel, 288 threads = 4 tokens x 72
// (64 latent + 4 rope threads, padded to a multiple of 8), no rms_norm
// instruction for the latent.
//
// RUN: mla-opt %s -mla-decode-pipeline='target=cuda-sm90 kernels=codegen fuse-kv-norm=true' | mla-translate --mla-to-artifact-listing | FileCheck %s --check-prefix=ART
// RUN: mla-opt %s -mla-decode-pipeline='target=cuda-sm90 kernels=codegen fuse-kv-norm=true' | FileCheck %s --check-prefix=PTX
// RUN: mla-opt %s -mla-decode-pipeline='target=cuda-sm90 kernels=codegen fuse-kv-norm=false' | mla-translate --mla-to-artifact-listing | FileCheck %s --check-prefix=UNFUSED

// ART: kernel 0 @mla_rope_cache_update_plain_bf16_l512_p64_in_bf16_slot_i64_neox_pos_i64_norm_bf16 rope_cache_update module 0 block 288 tokens 4
// ART-NOT: rms_norm
// ART: 1: rope_cache_update codegen(kernel0) cache0 buffer0+0[4x512] {{.*}} buffer5+0[512] epsilon 1e-06{{$}}
// ART-NOT: rms_norm
// UNFUSED: kernel 0 @mla_rope_cache_update_plain_bf16_l512_p64_in_bf16_slot_i64_neox_pos_i64 rope_cache_update
// UNFUSED: rms_norm buffer0+0[4x512] buffer5+0[512] arena+[[#N:]][4x512]
// UNFUSED: rope_cache_update codegen(kernel0) cache0 arena+[[#N]][4x512]
// UNFUSED-NOT: epsilon

// The PTX (one line): the programmatic-dependent-launch wait before any
// global access, loads, the vote, then the reduction: 8-lane shuffles, the
// group sums through shared memory and one barrier, sqrt.rn and rcp.rn
// (correctly rounded, no libdevice call), one bf16 rounding, the stores.
// PTX: .visible .entry mla_rope_cache_update_plain_bf16_l512_p64_in_bf16_slot_i64_neox_pos_i64_norm_bf16(
// PTX-NOT: {{(ld|st|atom|red)}}.global
// PTX-SAME: griddepcontrol.wait;
// PTX-NOT: st.global
// PTX-SAME: bar.red.or.pred
// PTX-NOT: st.global
// PTX-SAME: shfl.sync.bfly.b32 {{.*}}, 4, 31, -1;
// PTX-NOT: st.global
// PTX-SAME: st.shared.b32
// PTX-NOT: st.global
// PTX-SAME: bar.sync
// PTX-NOT: st.global
// PTX-SAME: ld.shared
// PTX-NOT: st.global
// PTX-SAME: sqrt.rn.f32
// PTX-NOT: st.global
// PTX-SAME: rcp.rn.f32
// PTX-SAME: cvt.rn.bf16x2.f32
// PTX-SAME: st.global.v4.b32
// PTX-NOT: {{call|__nv_|fma.rn.f32}}

func.func @step(%kv_c: tensor<4x512xbf16> {mla.name = "kv_c"}, %k_pe: tensor<4x64xbf16> {mla.name = "k_pe"},
                %slots: tensor<4xi64> {mla.name = "slots"}, %pos: tensor<4xi64> {mla.name = "pos"},
                %cs: tensor<128x64xf32> {mla.name = "cos_sin"}, %w: tensor<512xbf16> {mla.name = "kv_norm_w"},
                %cache: !mla.kv_cache<?x64xbf16> {mla.name = "cache"}) {
  %n = mla.rms_norm %kv_c, %w {epsilon = 1.0e-06 : f32} : tensor<4x512xbf16>, tensor<512xbf16>
  %k = mla.rope neox %k_pe, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<128x64xf32>
  mla.kv_cache_update %n, %k, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  return
}
