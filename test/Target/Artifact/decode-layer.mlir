// The optimized DeepSeek-V2-Lite decode layer as the runtime loads it: named
// buffers and the cache from the arguments, views instead of copies for the
// slices and reshapes, one instruction per kernel, and a planned arena.
//
// RUN: mla-opt %mla_src_root/examples/deepseek-v2-lite-decode-layer.mlir -mla-decode-pipeline='fuse-kv-norm=true' | mla-translate --mla-to-artifact-listing | FileCheck %s

// The arena holds the widest point of the step, not the sum of temporaries
// (q 8x3072 + kv 8x576 + latent query 8x16x576 + ... would be ~0.5 MB):
// here the assembled query and the attention output, 147456 + 131072.
// CHECK: artifact @decode_layer arena 278528 bytes prepared 14942208 bytes
// CHECK-NEXT: buffer 0 "hidden_states" input bf16 [8, 2048]
// CHECK-NEXT: buffer 1 "positions" step_metadata i64 [8]
// CHECK-NEXT: buffer 2 "slot_mapping" step_metadata i64 [8]
// CHECK-NEXT: buffer 3 "block_table" step_metadata i32 [8, 64]
// CHECK-NEXT: buffer 4 "seq_lens" step_metadata i32 [8]
// CHECK-NEXT: buffer 5 "cos_sin_cache" weight f32 [8192, 64]
// CHECK: buffer 13 "hidden_states_out" output bf16 [8, 2048]
// CHECK-NEXT: cache 0 "model.layers.0.kv_cache" plain bf16 block 64 latent 512 rope 64
// The q and kv_a projections are one GEMM (mla-fuse-projections): the
// prepare program concatenates their weights once per binding.
// CHECK-NEXT: prepare 0: copy buffer7+0[3072x2048] prepared+0[3072x2048]
// CHECK-NEXT: prepare 1: copy buffer8+0[576x2048] prepared+12582912[576x2048]
// CHECK-NEXT: 0: rms_norm buffer0+0[8x2048] buffer6+0[2048] arena+[[H:[0-9]+]][8x2048]
// CHECK-NEXT: 1: linear arena+[[H]][8x2048] prepared+0[3648x2048] arena+[[#P:]][8x3648]
// The fused kernel normalises the latent (mla-fuse-kv-norm: kv_c is
// columns [3072, 3584) of the projection, read in place; the norm weight
// in slot 8, epsilon last) and rotates k_pe where it lies, in the last 64
// columns (byte 3584 * 2 of each row of 3648): what else reads the
// projection after it (q_absorb's q heads) and the latent are
// column-disjoint from k_pe. It reads q_pe where it lies too (the last 64
// of each head's 192 columns) and writes the rotation straight into the
// last 64 columns of the assembled query: no copy before it. And q_absorb
// writes its first 512: no q_concat, no rms_norm of the latent.
// CHECK-NEXT: 2: rope_cache_update cache0 arena+[[#P+6144]][8x512]{3648,1} arena+[[#P+7168]][8x64]{3648,1} buffer2+0[8] buffer1+0[8] buffer5+0[8192x64]
// CHECK-SAME: arena+[[#QROT:]][8x16x64]{9216,576,1} - arena+[[#P+256]][8x16x64]{3648,192,1} buffer9+0[512] epsilon 1e-06{{$}}
// CHECK-NEXT: 3: q_absorb arena+[[#P]][8x16x128]{3648,192,1} buffer10+0[16x128x512] arena+[[#QROT-1024]][8x16x512]{9216,576,1}
// CHECK-NEXT: 4: decode_attention cache0 arena+[[#QROT-1024]][8x16x576] buffer3+0[8x64] buffer4+0[8] arena+[[O:[0-9]+]][8x16x512]
// CHECK-NEXT: 5: v_up arena+[[O]][8x16x512] buffer11+0[16x512x128] arena+[[V:[0-9]+]][8x16x128]
// The last projection writes the output buffer directly: no final copy.
// CHECK-NEXT: 6: linear arena+[[V]][8x2048] buffer12+0[2048x2048] buffer13+0[8x2048]
// CHECK-NOT: copy
// CHECK-NOT: q_concat
// CHECK-NOT: rms_norm
