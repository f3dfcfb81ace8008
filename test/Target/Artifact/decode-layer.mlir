// The optimized DeepSeek-V2-Lite decode layer as the runtime loads it: named
// buffers and the cache from the arguments, views instead of copies for the
// slices and reshapes, one instruction per kernel, and a planned arena.
//
// RUN: mla-opt %mla_src_root/examples/deepseek-v2-lite-decode-layer.mlir -mla-decode-pipeline='fuse-kv-norm=true' | mla-translate --mla-to-artifact-listing | FileCheck %s

// The arena holds the widest point of the step, not the sum of temporaries
// (q 8x3072 + kv 8x576 + latent query 8x16x576 + ... would be ~0.5 MB):
// here the assembled query and the attention output, 147456 + 131072.
// CHECK: artifact @decode_layer arena 278528 bytes
// CHECK-NEXT: buffer 0 "hidden_states" input bf16 [8, 2048]
// CHECK-NEXT: buffer 1 "positions" step_metadata i64 [8]
// CHECK-NEXT: buffer 2 "slot_mapping" step_metadata i64 [8]
// CHECK-NEXT: buffer 3 "block_table" step_metadata i32 [8, 64]
// CHECK-NEXT: buffer 4 "seq_lens" step_metadata i32 [8]
// CHECK-NEXT: buffer 5 "cos_sin_cache" weight f32 [8192, 64]
// CHECK: buffer 13 "hidden_states_out" output bf16 [8, 2048]
// CHECK-NEXT: cache 0 "model.layers.0.kv_cache" plain bf16 block 64 latent 512 rope 64
// CHECK-NEXT: 0: rms_norm buffer0+0[8x2048] buffer6+0[2048] arena+[[H:[0-9]+]][8x2048]
// CHECK-NEXT: 1: linear arena+[[H]][8x2048] buffer7+0[3072x2048] arena+[[#Q:]][8x3072]
// CHECK-NEXT: 2: linear arena+[[H]][8x2048] buffer8+0[576x2048] arena+[[#KV:]][8x576]
// The fused kernel normalises the latent (mla-fuse-kv-norm: kv_c is the
// first 512 columns of the projection, read in place; the norm weight in
// slot 8, epsilon last) and rotates k_pe where it lies, in the last 64
// columns of the projection (byte 512 * 2 of each row of 576): nothing else
// reads the projection after it, and the latent's columns are disjoint
// from k_pe's. It reads q_pe where it lies too (the last 64 of each head's
// 192 columns of the q projection) and writes the rotation straight into
// the last 64 columns of the assembled query: no copy before it. And
// q_absorb writes its first 512: no q_concat, no rms_norm of the latent.
// CHECK-NEXT: 3: rope_cache_update cache0 arena+[[#KV]][8x512]{576,1} arena+[[#KV+1024]][8x64]{576,1} buffer2+0[8] buffer1+0[8] buffer5+0[8192x64] arena+[[#QROT:]][8x16x64]{9216,576,1} - arena+[[#Q+256]][8x16x64]{3072,192,1} buffer9+0[512] epsilon 1e-06{{$}}
// CHECK-NEXT: 4: q_absorb arena+[[#Q]][8x16x128]{3072,192,1} buffer10+0[16x128x512] arena+[[#QROT-1024]][8x16x512]{9216,576,1}
// CHECK-NEXT: 5: decode_attention cache0 arena+[[#QROT-1024]][8x16x576] buffer3+0[8x64] buffer4+0[8] arena+[[O:[0-9]+]][8x16x512]
// CHECK-NEXT: 6: v_up arena+[[O]][8x16x512] buffer11+0[16x512x128] arena+[[V:[0-9]+]][8x16x128]
// The last projection writes the output buffer directly: no final copy.
// CHECK-NEXT: 7: linear arena+[[V]][8x2048] buffer12+0[2048x2048] buffer13+0[8x2048]
// CHECK-NOT: copy
// CHECK-NOT: q_concat
// CHECK-NOT: rms_norm
