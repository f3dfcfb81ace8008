// RUN: mla-opt %s -mla-outline-cache-kernels -split-input-file 2>/dev/null | FileCheck %s --enable-var-scope
// RUN: mla-opt %s -mla-outline-cache-kernels -split-input-file -verify-diagnostics -o /dev/null
// RUN: mla-opt %s -mla-outline-cache-kernels=min-blocks-per-sm=2 -split-input-file 2>/dev/null | FileCheck %s --check-prefix=MINB
// MINB-COUNT-3: nvvm.minctasm = 2 : i32
// MINB-NOT: nvvm.minctasm = 3

// Plain bf16 update: 16-byte vectors, 72 threads a token (64 latent + 8
// rope chunks), 8 tokens a block, as many blocks per SM as threads allow.
// All-or-nothing: the token's slot and row chunk are loaded first, then the
// vote (the separate validation's call_failed flag when prevalidated, else
// the block scans every slot and block 0 records the first one past the
// cache), one barrier reduction, and a failed call returns before its
// first store; negative slots are skipped. Every kernel begins with the
// programmatic-dependent-launch prologue (docs/cuda.md): wait for the
// previous grid, then let the next one launch.
// CHECK: module attributes {gpu.container_module}
// CHECK-LABEL: func.func @plain
// CHECK: mla.kv_cache_update {{.*}} {mla.kernel = {block_threads = 576 : i32, symbol = @mla_kernels::@[[K:mla_cache_update_plain_bf16_l512_p64_in_bf16_slot_i64]], tokens_per_block = 8 : i32}}
// CHECK: gpu.module @mla_kernels
// CHECK: gpu.func @[[K]](%{{.*}}: memref<?xbf16, 1>, %{{.*}}: memref<?xbf16, 1>, %[[SLOTS:arg[0-9]+]]: memref<?xi64, 1>, %[[CACHE:arg[0-9]+]]: memref<?xi8, 1>, %{{.*}}: memref<?xi64, 1>, %{{.*}}: memref<?xf32, 1>, %{{.*}}: memref<?xbf16, 1>, %[[BADSLOT:arg[0-9]+]]: memref<?xi32, 1>, %{{.*}}: memref<?xi32, 1>, %[[FAILED:arg[0-9]+]]: memref<?xi32, 1>, %{{.*}}: memref<?xbf16, 1>, %{{.*}}: i64, {{.*}}, %[[PRE:arg[0-9]+]]: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: memref<?xbf16, 1>, %{{.*}}: f32) kernel attributes {known_block_size = array<i32: 576, 1, 1>, nvvm.minctasm = 3 : i32}
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// CHECK: %[[PREV:.*]] = arith.cmpi ne, %[[PRE]], %c0_i64 : i64
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK-NOT: store
// CHECK: %[[SLOT:.*]] = scf.if
// CHECK-NEXT: memref.load %[[SLOTS]]
// CHECK-NOT: store
// CHECK: %[[NONNEG:.*]] = arith.cmpi sge, %[[SLOT]], %c0
// CHECK: %[[INCACHE:.*]] = arith.cmpi slt, %[[SLOT]]
// CHECK-NOT: store
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<?xbf16, 1>, vector<8xbf16>
// CHECK-NOT: store
// CHECK: %[[BAD:.*]] = scf.if %[[PREV]] -> (i1) {
// CHECK: %[[F:.*]] = memref.load %[[FAILED]][%{{.*}}] : memref<?xi32, 1>
// CHECK: %[[FB:.*]] = arith.cmpi ne, %[[F]], %c0_i32 : i32
// CHECK-NEXT: scf.yield %[[FB]] : i1
// CHECK-NEXT: } else {
// CHECK: %[[B0:.*]] = arith.cmpi eq, %block_id_x, %c0
// CHECK: %[[SCAN:.*]] = scf.for %[[I:.*]] = %[[TID]] to %{{.*}} step %c576{{.*}} iter_args(%[[ACC:.*]] = %false) -> (i1) {
// CHECK: %[[S:.*]] = memref.load %[[SLOTS]]
// CHECK: %[[BADS:.*]] = arith.cmpi sge, %{{.*}}, %{{.*}} : index
// CHECK: %[[REC:.*]] = arith.andi %[[BADS]], %[[B0]] : i1
// CHECK-NEXT: scf.if %[[REC]] {
// CHECK: memref.atomic_rmw mins %{{.*}}, %[[BADSLOT]][
// CHECK: %[[ACC2:.*]] = arith.ori %[[ACC]], %[[BADS]] : i1
// CHECK-NEXT: scf.yield %[[ACC2]] : i1
// CHECK: %[[P:.*]] = arith.extui %[[SCAN]] : i1 to i32
// CHECK-NEXT: %[[VOTE:.*]] = nvvm.barrier #nvvm.reduction<or> %[[P]] -> i32
// CHECK: arith.cmpi ne, %[[VOTE]]
// CHECK: cf.cond_br %[[BAD]], ^[[EXIT:bb[0-9]+]], ^[[WRITE:bb[0-9]+]]
// CHECK-NEXT: ^[[EXIT]]:
// CHECK-NEXT: gpu.return
// CHECK-NEXT: ^[[WRITE]]:
// CHECK: vector.bitcast %{{.*}} : vector<8xbf16> to vector<16xi8>
// CHECK: vector.store %{{.*}}, %[[CACHE]][%{{.*}}] {alignment = 16 : i64} : memref<?xi8, 1>, vector<16xi8>
// CHECK: vector.store %{{.*}}, %[[CACHE]][%{{.*}}] {alignment = 16 : i64} : memref<?xi8, 1>, vector<16xi8>
// CHECK-NEXT: }
// CHECK-NEXT: gpu.return
func.func @plain(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  // A second update with the same specialisation shares the kernel.
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  return
}
// CHECK-NOT: gpu.func @mla_cache_update_plain

// -----

// Fused rope + update with q_pe (GPT-J): the k_pe rope items rotate 8 pairs
// in f32 and round to bf16 once; q_pe items are strided over the grid. The
// token's slot and position and the position of the thread's first q item
// are loaded before the vote; the scan checks slots and positions (both
// loaded before either is compared) and records bad positions too; k_pe
// and q_pe are loaded with their cos/sin and stored after the vote. q_pe
// items are loaded from q_pe_in (the last memref; q_pe itself when the
// rotation is in place) and stored to q_pe.
// CHECK-LABEL: func.func @rope
// CHECK: mla.rope_kv_cache_update gptj {{.*}}symbol = @mla_kernels::@mla_rope_cache_update_plain_bf16_l512_p64_in_bf16_slot_i32_gptj_pos_i64_q
// CHECK: gpu.func @mla_rope_cache_update_plain_bf16_l512_p64_in_bf16_slot_i32_gptj_pos_i64_q(%{{.*}}: memref<?xbf16, 1>, %[[KPE:arg[0-9]+]]: memref<?xbf16, 1>, %[[SLOTS:arg[0-9]+]]: memref<?xi32, 1>, %{{.*}}: memref<?xi8, 1>, %[[POS:arg[0-9]+]]: memref<?xi64, 1>, %[[CS:arg[0-9]+]]: memref<?xf32, 1>, %[[Q:arg[0-9]+]]: memref<?xbf16, 1>, %[[BADSLOT:arg[0-9]+]]: memref<?xi32, 1>, %[[BADPOS:arg[0-9]+]]: memref<?xi32, 1>, %{{.*}}: memref<?xi32, 1>, %[[QIN:arg[0-9]+]]: memref<?xbf16, 1>,
// CHECK-SAME: known_block_size = array<i32: 544, 1, 1>, nvvm.minctasm = 3 : i32
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// CHECK-NOT: store
// CHECK: memref.load %[[SLOTS]]
// CHECK-NOT: store
// CHECK: memref.load %[[POS]]
// CHECK-NOT: store
// CHECK: gpu.grid_dim x
// CHECK-NOT: store
// CHECK: memref.load %[[POS]]
// CHECK-NOT: store
// CHECK: scf.for {{.*}} iter_args
// CHECK: memref.load %[[SLOTS]]
// CHECK-NOT: arith.cmpi
// CHECK: memref.load %[[POS]]
// CHECK: memref.atomic_rmw mins %{{.*}}, %[[BADSLOT]][
// CHECK: memref.atomic_rmw mins %{{.*}}, %[[BADPOS]][
// CHECK-NOT: store
// CHECK: nvvm.barrier #nvvm.reduction<or>
// CHECK-NOT: store
// CHECK: cf.cond_br
// CHECK-NEXT: ^bb1:
// CHECK-NEXT: gpu.return
// CHECK: vector.load %[[KPE]]
// CHECK: vector.load %[[CS]]
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 2, 4, 6, 8, 10, 12, 14] : vector<8xbf16>, vector<8xbf16>
// CHECK: arith.mulf
// CHECK: arith.subf
// CHECK: arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// CHECK: vector.store %{{.*}}, %[[KPE]]
// CHECK-NOT: vector.load %[[Q]]
// CHECK: vector.load %[[QIN]]
// CHECK-NOT: vector.load %[[Q]]
// CHECK: vector.store %{{.*}}, %[[Q]]
// CHECK: scf.for
// CHECK: memref.load %[[POS]]
// CHECK-NOT: vector.load %[[Q]]
// CHECK: vector.load %[[QIN]]
// CHECK-NOT: vector.load %[[Q]]
// CHECK: vector.store %{{.*}}, %[[Q]]
func.func @rope(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi32>, %pos: tensor<4xi64>, %cs: tensor<128x64xf32>, %q: tensor<4x16x64xbf16>, %cache: !mla.kv_cache<?x64xbf16>) -> tensor<4x16x64xbf16> {
  %qo = mla.rope_kv_cache_update gptj %kv_c, %k_pe, %slots into %cache positions(%pos, %cs) rotate_q(%q : tensor<4x16x64xbf16>) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi32> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<128x64xf32> rotated_q tensor<4x16x64xbf16>
  return %qo : tensor<4x16x64xbf16>
}

// -----

// fp8_ds_mla: 8 values a thread, loaded before the vote; after it, the
// tile amax over 16 lanes with shuffles (the vote is uniform over the
// block, so the warps are full), saturating RNE conversion of value pairs,
// the f32 tile scale stored by the first lane.
// CHECK-LABEL: func.func @ds_mla
// CHECK: gpu.func @mla_cache_update_fp8_ds_mla_f8e4m3fn_l512_p64_in_bf16_slot_i64
// CHECK-SAME: known_block_size = array<i32: 640, 1, 1>, nvvm.minctasm = 3 : i32
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// CHECK-NOT: store
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<?xbf16, 1>, vector<8xbf16>
// CHECK-NOT: store
// CHECK: nvvm.barrier #nvvm.reduction<or>
// CHECK-NOT: store
// CHECK: cf.cond_br
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

// Latent norm (mla-fuse-kv-norm): the token width is padded to a multiple
// of 8 (72 threads, 576 a block of 8 tokens) so that 8-lane groups belong
// to one token. The weight chunk is loaded before the vote with the latent;
// after the vote each thread squares and sums its 8 values, its group adds
// them with xor shuffles (4, 2, 1), group leaders store to workgroup
// memory, one barrier, then the token's 8 group sums give
// 1 / sqrt(mean + eps) (PTX sqrt.rn, the epsilon is the last argument), and
// the scaled values are rounded once to bf16 before the store.
// CHECK-LABEL: func.func @latent_norm
// CHECK: mla.rope_kv_cache_update neox {{.*}}block_threads = 576 : i32, symbol = @mla_kernels::@[[K:mla_rope_cache_update_plain_bf16_l512_p64_in_bf16_slot_i64_neox_pos_i64_norm_bf16]], tokens_per_block = 8 : i32
// CHECK: gpu.func @[[K]](%[[KV:arg[0-9]+]]: memref<?xbf16, 1>, {{.*}}, %[[W:arg[0-9]+]]: memref<?xbf16, 1>, %[[EPS:arg[0-9]+]]: f32) workgroup(%[[SUMS:.*]] : memref<64xf32, #gpu.address_space<workgroup>>) kernel attributes {known_block_size = array<i32: 576, 1, 1>
// CHECK: vector.load %[[KV]]
// CHECK: vector.load %[[W]]
// CHECK: nvvm.barrier #nvvm.reduction<or>
// CHECK: cf.cond_br
// CHECK-NEXT: ^bb1:
// CHECK-NEXT: gpu.return
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32
// CHECK: memref.store %{{.*}}, %[[SUMS]]
// CHECK: gpu.barrier
// CHECK-COUNT-8: memref.load %[[SUMS]]
// CHECK: arith.addf %{{.*}}, %[[EPS]]
// CHECK: llvm.inline_asm "sqrt.rn.f32 $0, $1;", "=f,f"
// CHECK: arith.divf
// CHECK: arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// CHECK: vector.store
func.func @latent_norm(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>, %pos: tensor<4xi64>,
                       %cs: tensor<128x64xf32>, %w: tensor<512xbf16>, %cache: !mla.kv_cache<?x64xbf16>) {
  mla.rope_kv_cache_update neox %kv_c, %k_pe, %slots into %cache positions(%pos, %cs) latent_norm(%w : tensor<512xbf16>, epsilon = 1.0e-6) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<128x64xf32>
  return
}

// -----

// A latent norm with a weight of another type, or into fp8_ds_mla, stays
// on the library kernel.
// CHECK-LABEL: func.func @latent_norm_library
// CHECK-NOT: mla.kernel
// CHECK-NOT: gpu.module
func.func @latent_norm_library(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>, %pos: tensor<4xi64>,
                               %cs: tensor<128x64xf32>, %w32: tensor<512xf32>, %w: tensor<512xbf16>,
                               %cache: !mla.kv_cache<?x64xbf16>, %ds: !mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla>) {
  // expected-remark @below {{kept on the library kernel: a latent norm weight of another type than kv_c}}
  mla.rope_kv_cache_update neox %kv_c, %k_pe, %slots into %cache positions(%pos, %cs) latent_norm(%w32 : tensor<512xf32>, epsilon = 1.0e-6) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<128x64xf32>
  // expected-remark @below {{kept on the library kernel: a latent norm into an fp8_ds_mla cache has no generated kernel}}
  mla.rope_kv_cache_update neox %kv_c, %k_pe, %slots into %ds positions(%pos, %cs) latent_norm(%w : tensor<512xbf16>, epsilon = 1.0e-6) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla>, tensor<4xi64>, tensor<128x64xf32>
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
