// RUN: mla-opt %s -mla-outline-cache-kernels -split-input-file 2>/dev/null | FileCheck %s --enable-var-scope
// RUN: mla-opt %s -mla-outline-cache-kernels -split-input-file -verify-diagnostics -o /dev/null

// Plain bf16 update: 16-byte vectors, 72 threads a token (64 latent + 8
// rope chunks), 8 tokens a block; negative slots skipped, slots past the
// cache skipped and recorded.
// CHECK: module attributes {gpu.container_module}
// CHECK-LABEL: func.func @plain
// CHECK: mla.kv_cache_update {{.*}} {mla.kernel = {block_threads = 576 : i32, symbol = @mla_kernels::@[[K:mla_cache_update_plain_bf16_l512_p64_in_bf16_slot_i64]], tokens_per_block = 8 : i32}}
// CHECK: gpu.module @mla_kernels
// CHECK: gpu.func @[[K]](%{{.*}}: memref<?xbf16, 1>, %{{.*}}: memref<?xbf16, 1>, %{{.*}}: memref<?xi64, 1>, %{{.*}}: memref<?xi8, 1>, {{.*}}: i64) kernel attributes {known_block_size = array<i32: 576, 1, 1>}
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[SLOT:.*]] = scf.if
// CHECK: memref.load
// CHECK: %[[NONNEG:.*]] = arith.cmpi sge, %[[SLOT]], %c0
// CHECK: %[[INCACHE:.*]] = arith.cmpi slt, %[[SLOT]]
// CHECK: memref.atomic_rmw mins
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<?xbf16, 1>, vector<8xbf16>
// CHECK: vector.bitcast %{{.*}} : vector<8xbf16> to vector<16xi8>
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<?xi8, 1>, vector<16xi8>
// CHECK: gpu.return
func.func @plain(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  // A second update with the same specialisation shares the kernel.
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  return
}
// CHECK-NOT: gpu.func @mla_cache_update_plain

// -----

// Fused rope + update with q_pe (GPT-J): the k_pe rope items rotate 8 pairs
// in f32 and round to bf16 once; q_pe is rotated by a loop over the block's
// tokens x heads.
// CHECK-LABEL: func.func @rope
// CHECK: mla.rope_kv_cache_update gptj {{.*}}symbol = @mla_kernels::@mla_rope_cache_update_plain_bf16_l512_p64_in_bf16_slot_i32_gptj_pos_i64_q
// CHECK: gpu.func @mla_rope_cache_update_plain_bf16_l512_p64_in_bf16_slot_i32_gptj_pos_i64_q
// CHECK-SAME: known_block_size = array<i32: 544, 1, 1>
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 2, 4, 6, 8, 10, 12, 14] : vector<8xbf16>, vector<8xbf16>
// CHECK: arith.mulf
// CHECK: arith.subf
// CHECK: arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// CHECK: scf.for
func.func @rope(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi32>, %pos: tensor<4xi64>, %cs: tensor<128x64xf32>, %q: tensor<4x16x64xbf16>, %cache: !mla.kv_cache<?x64xbf16>) -> tensor<4x16x64xbf16> {
  %qo = mla.rope_kv_cache_update gptj %kv_c, %k_pe, %slots into %cache positions(%pos, %cs) rotate_q(%q : tensor<4x16x64xbf16>) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi32> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<128x64xf32> rotated_q tensor<4x16x64xbf16>
  return %qo : tensor<4x16x64xbf16>
}

// -----

// fp8_ds_mla: tile amax over 16 lanes with shuffles, saturating RNE
// conversion of value pairs, the f32 tile scale stored by the first lane.
// CHECK-LABEL: func.func @ds_mla
// CHECK: gpu.func @mla_cache_update_fp8_ds_mla_f8e4m3fn_l512_p64_in_bf16_slot_i64
// CHECK-SAME: known_block_size = array<i32: 640, 1, 1>
// CHECK: gpu.shuffle xor %{{.*}}, %c8_i32, %c32_i32 : f32
// CHECK: gpu.shuffle xor
// CHECK: gpu.shuffle xor
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32
// CHECK: arith.divf
// CHECK: nvvm.convert.f32x2.to.f8x2 {{.*}} {rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>} : i16(f8E4M3FN)
// CHECK: vector.store %{{.*}} {alignment = 8 : i64} : memref<?xi8, 1>, vector<8xi8>
// CHECK: vector.store %{{.*}} {alignment = 4 : i64} : memref<?xi8, 1>, vector<4xi8>
func.func @ds_mla(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla>
  return
}

// -----

// Ops without a generated kernel stay on the library path, with a remark,
// and nothing is generated for them.
// CHECK-LABEL: func.func @library_only
// CHECK-NOT: mla.kernel
// CHECK-NOT: gpu.module
func.func @library_only(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                        %s: tensor<f32>, %c8: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>,
                        %kv32: tensor<4x512xf32>, %kp32: tensor<4x64xf32>, %c32: !mla.kv_cache<?x64xf32>,
                        %pos: tensor<4xi64>, %cs: tensor<128x64xf32>, %kp16: tensor<4x64xf16>, %kv16: tensor<4x512xf16>,
                        %c16: !mla.kv_cache<?x64xf16>) {
  // expected-remark @below {{kept on the library kernel: per-tensor fp8 caches have no generated kernel}}
  mla.kv_cache_update %kv_c, %k_pe, %slots into %c8 scale %s : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>
  // expected-remark @below {{kept on the library kernel: a row needs 144 threads: too wide for blocks of 8 tokens}}
  mla.kv_cache_update %kv32, %kp32, %slots into %c32 : tensor<4x512xf32>, tensor<4x64xf32>, tensor<4xi64> into !mla.kv_cache<?x64xf32>
  // expected-remark @below {{kept on the library kernel: quantising or rotating kernels take bf16 inputs only}}
  mla.rope_kv_cache_update neox %kv16, %kp16, %slots into %c16 positions(%pos, %cs) : tensor<4x512xf16>, tensor<4x64xf16>, tensor<4xi64> into !mla.kv_cache<?x64xf16>, tensor<4xi64>, tensor<128x64xf32>
  return
}
