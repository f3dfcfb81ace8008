// RUN: mla-opt %s -split-input-file -canonicalize -cse | FileCheck %s
// RUN: mla-opt %s -split-input-file -loop-invariant-code-motion | FileCheck %s --check-prefix=LICM

// The declared effects are what upstream passes see: writes are never
// deleted or merged, reads never move above writes, pure ops are CSE'd and
// dropped when dead, and loop-invariant code motion leaves writes in loops.

// Two identical updates are both kept (a write is not redundant to CSE), and
// an unused update is not dead code.
// CHECK-LABEL: func.func @updates_survive
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: return
func.func @updates_survive(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>,
                           %cache: !mla.kv_cache<?x16xbf16>) {
  mla.kv_cache_update %c, %p, %s into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  mla.kv_cache_update %c, %p, %s into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

// Identical reads separated by a write are not merged, and the second stays
// after the write; the identical ropes are merged; the dead rope vanishes.
// CHECK-LABEL: func.func @reads_stay_after_writes
// CHECK-NEXT: %[[R:.*]] = mla.rope neox
// CHECK-NOT: mla.rope
// CHECK-NEXT: %[[A:.*]] = mla.decode_attention
// CHECK-NEXT: mla.kv_cache_update %{{.*}}, %[[R]], %{{.*}} into
// CHECK-NEXT: %[[B:.*]] = mla.decode_attention
// CHECK-NEXT: return %[[A]], %[[B]], %[[R]]
func.func @reads_stay_after_writes(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>,
                                   %cache: !mla.kv_cache<?x16xbf16>, %pos: tensor<4xi64>, %cs: tensor<64x64xf32>,
                                   %q: tensor<4x16x576xbf16>, %bt: tensor<4x4xi32>, %sl: tensor<4xi32>)
    -> (tensor<4x16x512xbf16>, tensor<4x16x512xbf16>, tensor<4x64xbf16>) {
  %r1 = mla.rope neox %p, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<64x64xf32>
  %a = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1 : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x4xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  %r2 = mla.rope neox %p, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<64x64xf32>
  %dead = mla.rope gptj %p, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<64x64xf32>
  mla.kv_cache_update %c, %r2, %s into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  %b = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1 : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x4xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %a, %b, %r1 : tensor<4x16x512xbf16>, tensor<4x16x512xbf16>, tensor<4x64xbf16>
}

// -----

// Two reads with no write in between are merged by CSE; an unused read is
// removed (reading has no observable effect).
// CHECK-LABEL: func.func @reads_merge
// CHECK-NEXT: %[[A:.*]] = mla.decode_attention
// CHECK-NEXT: return %[[A]], %[[A]]
func.func @reads_merge(%cache: !mla.kv_cache<?x16xbf16>, %q: tensor<4x16x576xbf16>, %bt: tensor<4x4xi32>, %sl: tensor<4xi32>)
    -> (tensor<4x16x512xbf16>, tensor<4x16x512xbf16>) {
  %a = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1 : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x4xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  %b = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1 : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x4xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  %unused = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.2 : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x4xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %a, %b : tensor<4x16x512xbf16>, tensor<4x16x512xbf16>
}

// -----

// The fused and monolithic forms write too: unused, they stay.
// CHECK-LABEL: func.func @fused_forms_survive
// CHECK-NEXT: mla.rope_kv_cache_update
// CHECK-NEXT: mla.decode_attention_with_update
// CHECK-NEXT: mla.attention decode
// CHECK-NEXT: return
func.func @fused_forms_survive(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>,
                               %cache: !mla.kv_cache<?x16xbf16>, %pos: tensor<4xi64>, %cs: tensor<64x64xf32>,
                               %q: tensor<4x16x576xbf16>, %qh: tensor<4x16x192xbf16>, %bt: tensor<4x4xi32>, %sl: tensor<4xi32>,
                               %wk: tensor<16x128x512xbf16>, %wv: tensor<16x512x128xbf16>) {
  %k = mla.rope_kv_cache_update neox %c, %p, %s into %cache positions(%pos, %cs) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>, tensor<4xi64>, tensor<64x64xf32> rotated_k tensor<4x64xbf16>
  %o = mla.decode_attention_with_update %q, %cache[%bt, %sl] update(%c, %p, %s : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64>) softmax_scale = 0.1 : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x4xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  %a = mla.attention decode %qh, %c, %p, %s into %cache[%bt, %sl] weights(%wk, %wv) softmax_scale = 0.1
      : tensor<4x16x192xbf16>, tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>, tensor<4x4xi32>, tensor<4xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16> -> tensor<4x16x128xbf16>
  return
}

// -----

// LICM hoists the loop-invariant rope but keeps the invariant update (a
// write) and the read that follows it inside the loop.
// LICM-LABEL: func.func @loop
// LICM: %[[R:.*]] = mla.rope neox
// LICM-NEXT: scf.for
// LICM-NEXT: mla.kv_cache_update %{{.*}}, %[[R]]
// LICM-NEXT: mla.decode_attention
func.func @loop(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>,
                %cache: !mla.kv_cache<?x16xbf16>, %pos: tensor<4xi64>, %cs: tensor<64x64xf32>,
                %q: tensor<4x16x576xbf16>, %bt: tensor<4x4xi32>, %sl: tensor<4xi32>, %init: tensor<4x16x512xbf16>) -> tensor<4x16x512xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %res = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %init) -> (tensor<4x16x512xbf16>) {
    %r = mla.rope neox %p, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<64x64xf32>
    mla.kv_cache_update %c, %r, %s into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
    %a = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1 : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x4xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
    scf.yield %a : tensor<4x16x512xbf16>
  }
  return %res : tensor<4x16x512xbf16>
}

// -----

// A linear with an addend stays pure: identical ones are merged, a dead one
// vanishes, one with a different addend is kept, and LICM hoists it out of
// a loop.
// CHECK-LABEL: func.func @linear_addend_is_pure
// CHECK-NEXT: %[[A:.*]] = mla.linear %arg0, %arg1 addend(%arg2 : tensor<4x32xbf16>)
// CHECK-NEXT: %[[B:.*]] = mla.linear %arg0, %arg1 addend(%arg3 : tensor<4x32xbf16>)
// CHECK-NEXT: return %[[A]], %[[A]], %[[B]]
// LICM-LABEL: func.func @linear_addend_is_pure
// LICM: mla.linear %arg0, %arg1 addend(%arg2
// LICM: scf.for
// LICM-NOT: mla.linear
// LICM: scf.yield
func.func @linear_addend_is_pure(%x: tensor<4x64xbf16>, %w: tensor<32x64xbf16>, %r: tensor<4x32xbf16>,
                                 %r2: tensor<4x32xbf16>)
    -> (tensor<4x32xbf16>, tensor<4x32xbf16>, tensor<4x32xbf16>) {
  %a = mla.linear %x, %w addend(%r : tensor<4x32xbf16>) : tensor<4x64xbf16>, tensor<32x64xbf16> -> tensor<4x32xbf16>
  %b = mla.linear %x, %w addend(%r : tensor<4x32xbf16>) : tensor<4x64xbf16>, tensor<32x64xbf16> -> tensor<4x32xbf16>
  %dead = mla.linear %x, %w addend(%r2 : tensor<4x32xbf16>) : tensor<4x64xbf16>, tensor<32x64xbf16> -> tensor<4x32xbf16>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %l = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %r2) -> tensor<4x32xbf16> {
    %in = mla.linear %x, %w addend(%r : tensor<4x32xbf16>) : tensor<4x64xbf16>, tensor<32x64xbf16> -> tensor<4x32xbf16>
    scf.yield %in : tensor<4x32xbf16>
  }
  %c = mla.linear %x, %w addend(%r2 : tensor<4x32xbf16>) : tensor<4x64xbf16>, tensor<32x64xbf16> -> tensor<4x32xbf16>
  return %a, %b, %c : tensor<4x32xbf16>, tensor<4x32xbf16>, tensor<4x32xbf16>
}
