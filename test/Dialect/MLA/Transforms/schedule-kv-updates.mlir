// RUN: mla-opt %s -split-input-file -allow-unregistered-dialect -mla-schedule-kv-updates | FileCheck %s --check-prefixes=CHECK,EARLY
// RUN: mla-opt %s -split-input-file -allow-unregistered-dialect -mla-schedule-kv-updates=strategy=early | FileCheck %s --check-prefixes=CHECK,EARLY
// RUN: mla-opt %s -split-input-file -allow-unregistered-dialect -mla-schedule-kv-updates=strategy=late | FileCheck %s --check-prefixes=CHECK,LATE
// RUN: not mla-opt %s -split-input-file -allow-unregistered-dialect -mla-schedule-kv-updates=strategy=sideways 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: for the --strategy option: Cannot find option named 'sideways'

// Early: the update hoists above RoPE of q and the q projection (pure) to
// the top. Late: it is already just before its reader.
// CHECK-LABEL: func.func @pure_ops
// CHECK-SAME: %[[C:arg[0-9]+]]: !mla.kv_cache<?x64xbf16>
// EARLY-NEXT: mla.kv_cache_update %{{.*}}, %{{.*}}, %{{.*}} into %[[C]]
// EARLY-NEXT: %[[QR:.*]] = mla.rope neox
// EARLY-NEXT: %[[QA:.*]] = mla.q_absorb
// EARLY-NEXT: %[[O:.*]] = mla.decode_attention %{{.*}}, %[[C]]
// LATE-NEXT: %[[QR:.*]] = mla.rope neox
// LATE-NEXT: %[[QA:.*]] = mla.q_absorb
// LATE-NEXT: mla.kv_cache_update %{{.*}}, %{{.*}}, %{{.*}} into %[[C]]
// LATE-NEXT: %[[O:.*]] = mla.decode_attention %{{.*}}, %[[C]]
// CHECK-NEXT: return %[[QR]], %[[QA]], %[[O]]
func.func @pure_ops(%q_pe: tensor<4x16x64xbf16>, %pos: tensor<4xi64>, %cs: tensor<8192x64xf32>,
                    %q_nope: tensor<4x16x128xbf16>, %w_uk: tensor<16x128x512xbf16>,
                    %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                    %cache: !mla.kv_cache<?x64xbf16>, %ql: tensor<4x16x576xbf16>, %bt: tensor<4x8xi32>, %sl: tensor<4xi32>)
    -> (tensor<4x16x64xbf16>, tensor<4x16x512xbf16>, tensor<4x16x512xbf16>) {
  %qr = mla.rope neox %q_pe, %pos, %cs : tensor<4x16x64xbf16>, tensor<4xi64>, tensor<8192x64xf32>
  %qa = mla.q_absorb %q_nope, %w_uk : tensor<4x16x128xbf16>, tensor<16x128x512xbf16> -> tensor<4x16x512xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %o = mla.decode_attention %ql, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %qr, %qa, %o : tensor<4x16x64xbf16>, tensor<4x16x512xbf16>, tensor<4x16x512xbf16>
}

// -----

// Late: the update sinks past pure ops and past a reader of a noalias cache,
// and stops just before the first reader of its own cache. Early: it stays
// at the top.
// CHECK-LABEL: func.func @first_reader
// CHECK-SAME: %[[OTHER:arg[0-9]+]]: !mla.kv_cache<?x64xbf16> {mla.noalias}, %[[C:arg[0-9]+]]: !mla.kv_cache<?x64xbf16>
// EARLY-NEXT: mla.kv_cache_update %{{.*}}, %{{.*}}, %{{.*}} into %[[C]]
// CHECK-NEXT: %[[QA:.*]] = arith.negf
// CHECK-NEXT: %[[O0:.*]] = mla.decode_attention %{{.*}}, %[[OTHER]]
// CHECK-NEXT: %[[QB:.*]] = arith.negf %[[QA]]
// LATE-NEXT: mla.kv_cache_update %{{.*}}, %{{.*}}, %{{.*}} into %[[C]]
// CHECK-NEXT: %[[O1:.*]] = mla.decode_attention %{{.*}}, %[[C]]
// CHECK-NEXT: %[[QC:.*]] = arith.negf %[[QB]]
// CHECK-NEXT: return
func.func @first_reader(%q: tensor<4x16x64xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                        %other: !mla.kv_cache<?x64xbf16> {mla.noalias}, %cache: !mla.kv_cache<?x64xbf16>,
                        %ql: tensor<4x16x576xbf16>, %bt: tensor<4x8xi32>, %sl: tensor<4xi32>)
    -> (tensor<4x16x64xbf16>, tensor<4x16x512xbf16>, tensor<4x16x512xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %qa = arith.negf %q : tensor<4x16x64xbf16>
  %o0 = mla.decode_attention %ql, %other[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  %qb = arith.negf %qa : tensor<4x16x64xbf16>
  %o1 = mla.decode_attention %ql, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  %qc = arith.negf %qb : tensor<4x16x64xbf16>
  return %qc, %o0, %o1 : tensor<4x16x64xbf16>, tensor<4x16x512xbf16>, tensor<4x16x512xbf16>
}

// -----

// Early: the first update is held by its operand definition; the second, on
// a cache that provably differs (mla.noalias), hoists above it to the top.
// CHECK-LABEL: func.func @above_noalias_update
// CHECK-SAME: %[[KV:arg[0-9]+]]: tensor<4x512xbf16>, %{{.*}}: tensor<4x64xbf16>, %{{.*}}: tensor<4xi64>, %[[C0:arg[0-9]+]]: !mla.kv_cache<?x64xbf16> {mla.noalias}, %[[C1:arg[0-9]+]]: !mla.kv_cache<?x64xbf16>
// EARLY-NEXT: mla.kv_cache_update %[[KV]], %{{.*}}, %{{.*}} into %[[C1]]
// EARLY-NEXT: %[[X:.*]] = arith.negf %[[KV]]
// EARLY-NEXT: mla.kv_cache_update %[[X]], %{{.*}}, %{{.*}} into %[[C0]]
// EARLY-NEXT: %[[QA:.*]] = arith.negf
// LATE-NEXT: %[[X:.*]] = arith.negf %[[KV]]
// LATE-NEXT: %[[QA:.*]] = arith.negf
// LATE-NEXT: mla.kv_cache_update %[[X]], %{{.*}}, %{{.*}} into %[[C0]]
// LATE-NEXT: mla.kv_cache_update %[[KV]], %{{.*}}, %{{.*}} into %[[C1]]
// CHECK-NEXT: return %[[QA]]
func.func @above_noalias_update(%q: tensor<4x16x64xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                %c0: !mla.kv_cache<?x64xbf16> {mla.noalias}, %c1: !mla.kv_cache<?x64xbf16>)
    -> tensor<4x16x64xbf16> {
  %x = arith.negf %kv_c : tensor<4x512xbf16>
  %qa = arith.negf %q : tensor<4x16x64xbf16>
  mla.kv_cache_update %x, %k_pe, %slots into %c0 : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %c1 : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  return %qa : tensor<4x16x64xbf16>
}

// -----

// Updates of disjoint caches that move to the same spot keep their original
// order: both to the top (early), both before the terminator (late).
// CHECK-LABEL: func.func @same_spot_order
// CHECK-SAME: %[[C0:arg[0-9]+]]: !mla.kv_cache<?x64xbf16> {mla.noalias}, %[[C1:arg[0-9]+]]: !mla.kv_cache<?x64xbf16>
// EARLY-NEXT: mla.kv_cache_update {{.*}} into %[[C0]]
// EARLY-NEXT: mla.kv_cache_update {{.*}} into %[[C1]]
// CHECK-NEXT: %[[QA:.*]] = arith.negf
// CHECK-NEXT: %[[QB:.*]] = arith.negf %[[QA]]
// CHECK-NEXT: %[[QC:.*]] = arith.negf %[[QB]]
// LATE-NEXT: mla.kv_cache_update {{.*}} into %[[C0]]
// LATE-NEXT: mla.kv_cache_update {{.*}} into %[[C1]]
// CHECK-NEXT: return %[[QC]]
func.func @same_spot_order(%q: tensor<4x16x64xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                           %c0: !mla.kv_cache<?x64xbf16> {mla.noalias}, %c1: !mla.kv_cache<?x64xbf16>)
    -> tensor<4x16x64xbf16> {
  %qa = arith.negf %q : tensor<4x16x64xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %c0 : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %qb = arith.negf %qa : tensor<4x16x64xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %c1 : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %qc = arith.negf %qb : tensor<4x16x64xbf16>
  return %qc : tensor<4x16x64xbf16>
}

// -----

// Two distinct cache arguments without mla.noalias may alias: the update of
// %c1 stops at the readers of %c0 on both sides.
// CHECK-LABEL: func.func @aliasing_reader
// CHECK-SAME: %[[C0:arg[0-9]+]]: !mla.kv_cache<?x64xbf16>, %[[C1:arg[0-9]+]]: !mla.kv_cache<?x64xbf16>,
// CHECK-NEXT: %[[O0:.*]] = mla.decode_attention %{{.*}}, %[[C0]]
// EARLY-NEXT: mla.kv_cache_update {{.*}} into %[[C1]]
// CHECK-NEXT: %[[QA:.*]] = arith.negf
// CHECK-NEXT: %[[QB:.*]] = arith.negf %[[QA]]
// LATE-NEXT: mla.kv_cache_update {{.*}} into %[[C1]]
// CHECK-NEXT: %[[O1:.*]] = mla.decode_attention %{{.*}}, %[[C0]]
// CHECK-NEXT: return
func.func @aliasing_reader(%q: tensor<4x16x64xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                           %c0: !mla.kv_cache<?x64xbf16>, %c1: !mla.kv_cache<?x64xbf16>,
                           %ql: tensor<4x16x576xbf16>, %bt: tensor<4x8xi32>, %sl: tensor<4xi32>)
    -> (tensor<4x16x64xbf16>, tensor<4x16x512xbf16>, tensor<4x16x512xbf16>) {
  %o0 = mla.decode_attention %ql, %c0[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  %qa = arith.negf %q : tensor<4x16x64xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %c1 : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %qb = arith.negf %qa : tensor<4x16x64xbf16>
  %o1 = mla.decode_attention %ql, %c0[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %qb, %o0, %o1 : tensor<4x16x64xbf16>, tensor<4x16x512xbf16>, tensor<4x16x512xbf16>
}

// -----

// The same with mla.noalias on %c0: the readers of %c0 are no barrier, the
// update goes to the top (early) or just before the terminator (late).
// CHECK-LABEL: func.func @noalias_reader
// CHECK-SAME: %[[C0:arg[0-9]+]]: !mla.kv_cache<?x64xbf16> {mla.noalias}, %[[C1:arg[0-9]+]]: !mla.kv_cache<?x64xbf16>,
// EARLY-NEXT: mla.kv_cache_update {{.*}} into %[[C1]]
// CHECK-NEXT: %[[O0:.*]] = mla.decode_attention %{{.*}}, %[[C0]]
// CHECK-NEXT: %[[QA:.*]] = arith.negf
// CHECK-NEXT: %[[QB:.*]] = arith.negf %[[QA]]
// CHECK-NEXT: %[[O1:.*]] = mla.decode_attention %{{.*}}, %[[C0]]
// LATE-NEXT: mla.kv_cache_update {{.*}} into %[[C1]]
// CHECK-NEXT: return
func.func @noalias_reader(%q: tensor<4x16x64xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                          %c0: !mla.kv_cache<?x64xbf16> {mla.noalias}, %c1: !mla.kv_cache<?x64xbf16>,
                          %ql: tensor<4x16x576xbf16>, %bt: tensor<4x8xi32>, %sl: tensor<4xi32>)
    -> (tensor<4x16x64xbf16>, tensor<4x16x512xbf16>, tensor<4x16x512xbf16>) {
  %o0 = mla.decode_attention %ql, %c0[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  %qa = arith.negf %q : tensor<4x16x64xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %c1 : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %qb = arith.negf %qa : tensor<4x16x64xbf16>
  %o1 = mla.decode_attention %ql, %c0[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %qb, %o0, %o1 : tensor<4x16x64xbf16>, tensor<4x16x512xbf16>, tensor<4x16x512xbf16>
}

// -----

// A call may read or write every cache: the update stops at calls on both
// sides.
func.func private @step_hook()

// CHECK-LABEL: func.func @call_barrier
// CHECK-SAME: %[[C:arg[0-9]+]]: !mla.kv_cache<?x64xbf16> {mla.noalias}
// CHECK-NEXT: call @step_hook()
// EARLY-NEXT: mla.kv_cache_update {{.*}} into %[[C]]
// CHECK-NEXT: %[[QA:.*]] = arith.negf
// CHECK-NEXT: %[[QB:.*]] = arith.negf %[[QA]]
// LATE-NEXT: mla.kv_cache_update {{.*}} into %[[C]]
// CHECK-NEXT: call @step_hook()
// CHECK-NEXT: return %[[QB]]
func.func @call_barrier(%q: tensor<4x16x64xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                        %cache: !mla.kv_cache<?x64xbf16> {mla.noalias}) -> tensor<4x16x64xbf16> {
  func.call @step_hook() : () -> ()
  %qa = arith.negf %q : tensor<4x16x64xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %qb = arith.negf %qa : tensor<4x16x64xbf16>
  func.call @step_hook() : () -> ()
  return %qb : tensor<4x16x64xbf16>
}

// -----

// An unregistered op has unknown effects: a barrier on both sides.
// CHECK-LABEL: func.func @unknown_op_barrier
// CHECK-SAME: %[[C:arg[0-9]+]]: !mla.kv_cache<?x64xbf16> {mla.noalias}
// CHECK-NEXT: "test.opaque"() {before}
// EARLY-NEXT: mla.kv_cache_update {{.*}} into %[[C]]
// CHECK-NEXT: %[[QA:.*]] = arith.negf
// CHECK-NEXT: %[[QB:.*]] = arith.negf %[[QA]]
// LATE-NEXT: mla.kv_cache_update {{.*}} into %[[C]]
// CHECK-NEXT: "test.opaque"() {after}
// CHECK-NEXT: return %[[QB]]
func.func @unknown_op_barrier(%q: tensor<4x16x64xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                              %cache: !mla.kv_cache<?x64xbf16> {mla.noalias}) -> tensor<4x16x64xbf16> {
  "test.opaque"() {before} : () -> ()
  %qa = arith.negf %q : tensor<4x16x64xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %qb = arith.negf %qa : tensor<4x16x64xbf16>
  "test.opaque"() {after} : () -> ()
  return %qb : tensor<4x16x64xbf16>
}

// -----

// Region ops: an scf.if that reads the cache inside is a barrier (above), an
// scf.for that reads it is one too (below); an scf.if with only pure ops
// inside is not.
// CHECK-LABEL: func.func @region_ops
// CHECK-SAME: %[[C:arg[0-9]+]]: !mla.kv_cache<?x64xbf16>,
// CHECK: %[[R0:.*]] = scf.if
// CHECK-NEXT: mla.decode_attention %{{.*}}, %[[C]]
// CHECK: } else {
// CHECK-NEXT: scf.yield
// CHECK-NEXT: }
// EARLY-NEXT: mla.kv_cache_update {{.*}} into %[[C]]
// CHECK-NEXT: %[[QA:.*]] = arith.negf
// CHECK-NEXT: %[[R1:.*]] = scf.if
// CHECK-NEXT: arith.negf
// CHECK-NEXT: scf.yield
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield
// CHECK-NEXT: }
// LATE-NEXT: mla.kv_cache_update {{.*}} into %[[C]]
// CHECK-NEXT: %[[R2:.*]] = scf.for
// CHECK-NEXT: mla.decode_attention %{{.*}}, %[[C]]
func.func @region_ops(%cond: i1, %q: tensor<4x16x64xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                      %cache: !mla.kv_cache<?x64xbf16>, %ql: tensor<4x16x576xbf16>, %bt: tensor<4x8xi32>, %sl: tensor<4xi32>,
                      %zero: tensor<4x16x512xbf16>) -> (tensor<4x16x512xbf16>, tensor<4x16x64xbf16>, tensor<4x16x512xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %r0 = scf.if %cond -> (tensor<4x16x512xbf16>) {
    %o = mla.decode_attention %ql, %cache[%bt, %sl] softmax_scale = 0.1
        : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
    scf.yield %o : tensor<4x16x512xbf16>
  } else {
    scf.yield %zero : tensor<4x16x512xbf16>
  }
  %qa = arith.negf %q : tensor<4x16x64xbf16>
  %r1 = scf.if %cond -> (tensor<4x16x64xbf16>) {
    %n = arith.negf %qa : tensor<4x16x64xbf16>
    scf.yield %n : tensor<4x16x64xbf16>
  } else {
    scf.yield %qa : tensor<4x16x64xbf16>
  }
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %r2 = scf.for %i = %c0 to %c2 step %c1 iter_args(%acc = %zero) -> (tensor<4x16x512xbf16>) {
    %o = mla.decode_attention %ql, %cache[%bt, %sl] softmax_scale = 0.1
        : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
    scf.yield %o : tensor<4x16x512xbf16>
  }
  return %r0, %r1, %r2 : tensor<4x16x512xbf16>, tensor<4x16x64xbf16>, tensor<4x16x512xbf16>
}

// -----

// Early: the update stops just after the last definition of its operands.
// CHECK-LABEL: func.func @operand_defs
// CHECK-SAME: %[[KV:arg[0-9]+]]: tensor<4x512xbf16>, %[[KP:arg[0-9]+]]: tensor<4x64xbf16>, %[[S:arg[0-9]+]]: tensor<4xi64>, %[[C:arg[0-9]+]]: !mla.kv_cache<?x64xbf16>
// CHECK-NEXT: %[[QA:.*]] = arith.negf
// CHECK-NEXT: %[[X:.*]] = arith.negf %[[KV]]
// CHECK-NEXT: %[[QB:.*]] = arith.negf %[[QA]]
// CHECK-NEXT: %[[Y:.*]] = arith.negf %[[KP]]
// EARLY-NEXT: mla.kv_cache_update %[[X]], %[[Y]], %[[S]] into %[[C]]
// CHECK-NEXT: %[[QC:.*]] = arith.negf %[[QB]]
// LATE-NEXT: mla.kv_cache_update %[[X]], %[[Y]], %[[S]] into %[[C]]
// CHECK-NEXT: return %[[QC]]
func.func @operand_defs(%q: tensor<4x16x64xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                        %cache: !mla.kv_cache<?x64xbf16>) -> tensor<4x16x64xbf16> {
  %qa = arith.negf %q : tensor<4x16x64xbf16>
  %x = arith.negf %kv_c : tensor<4x512xbf16>
  %qb = arith.negf %qa : tensor<4x16x64xbf16>
  %y = arith.negf %k_pe : tensor<4x64xbf16>
  %qc = arith.negf %qb : tensor<4x16x64xbf16>
  mla.kv_cache_update %x, %y, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  return %qc : tensor<4x16x64xbf16>
}

// -----

// The fused rope + update returns the rotated q_pe: late scheduling stops
// before its first user (q_concat), even though the cache reader is later.
// CHECK-LABEL: func.func @rope_update_results
// CHECK-SAME: %[[C:arg[0-9]+]]: !mla.kv_cache<?x64xbf16>,
// EARLY-NEXT: %[[QR:.*]] = mla.rope_kv_cache_update neox {{.*}} into %[[C]]
// CHECK-NEXT: %[[QA:.*]] = mla.q_absorb
// CHECK-NEXT: %[[QB:.*]] = arith.negf %[[QA]]
// LATE-NEXT: %[[QR:.*]] = mla.rope_kv_cache_update neox {{.*}} into %[[C]]
// CHECK-NEXT: %[[QL:.*]] = mla.q_concat %[[QB]], %[[QR]]
// CHECK-NEXT: %[[O:.*]] = mla.decode_attention %[[QL]], %[[C]]
// CHECK-NEXT: return %[[O]]
func.func @rope_update_results(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                               %cache: !mla.kv_cache<?x64xbf16>, %pos: tensor<4xi64>, %cs: tensor<8192x64xf32>,
                               %q_pe: tensor<4x16x64xbf16>, %q_nope: tensor<4x16x128xbf16>, %w_uk: tensor<16x128x512xbf16>,
                               %bt: tensor<4x8xi32>, %sl: tensor<4xi32>) -> tensor<4x16x512xbf16> {
  %qa = mla.q_absorb %q_nope, %w_uk : tensor<4x16x128xbf16>, tensor<16x128x512xbf16> -> tensor<4x16x512xbf16>
  %qr = mla.rope_kv_cache_update neox %kv_c, %k_pe, %slots into %cache positions(%pos, %cs) rotate_q(%q_pe : tensor<4x16x64xbf16>)
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<8192x64xf32> rotated_q tensor<4x16x64xbf16>
  %qb = arith.negf %qa : tensor<4x16x512xbf16>
  %ql = mla.q_concat %qb, %qr : tensor<4x16x512xbf16>, tensor<4x16x64xbf16> -> tensor<4x16x576xbf16>
  %o = mla.decode_attention %ql, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// Two updates of one cache keep their relative order (write-write): early,
// the second would go to the top but stops right after the first, which is
// held by its operand; late, the first stops right before the second.
// CHECK-LABEL: func.func @one_cache_order
// CHECK-SAME: %[[KV:arg[0-9]+]]: tensor<4x512xbf16>, %{{.*}}: tensor<4x64xbf16>, %{{.*}}: tensor<4xi64>, %[[C:arg[0-9]+]]: !mla.kv_cache<?x64xbf16>
// CHECK-NEXT: %[[X:.*]] = arith.negf %[[KV]]
// EARLY-NEXT: mla.kv_cache_update %[[X]], {{.*}} into %[[C]]
// EARLY-NEXT: mla.kv_cache_update %[[KV]], {{.*}} into %[[C]]
// CHECK-NEXT: %[[QA:.*]] = arith.negf
// CHECK-NEXT: %[[QB:.*]] = arith.negf %[[QA]]
// CHECK-NEXT: %[[QC:.*]] = arith.negf %[[QB]]
// LATE-NEXT: mla.kv_cache_update %[[X]], {{.*}} into %[[C]]
// LATE-NEXT: mla.kv_cache_update %[[KV]], {{.*}} into %[[C]]
// CHECK-NEXT: return %[[QC]]
func.func @one_cache_order(%q: tensor<4x16x64xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                           %cache: !mla.kv_cache<?x64xbf16>) -> tensor<4x16x64xbf16> {
  %x = arith.negf %kv_c : tensor<4x512xbf16>
  %qa = arith.negf %q : tensor<4x16x64xbf16>
  mla.kv_cache_update %x, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %qb = arith.negf %qa : tensor<4x16x64xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %qc = arith.negf %qb : tensor<4x16x64xbf16>
  return %qc : tensor<4x16x64xbf16>
}

// -----

// The same with two cache arguments that may alias (no mla.noalias).
// CHECK-LABEL: func.func @aliasing_caches_order
// CHECK-SAME: %[[KV:arg[0-9]+]]: tensor<4x512xbf16>, %{{.*}}: tensor<4x64xbf16>, %{{.*}}: tensor<4xi64>, %[[C0:arg[0-9]+]]: !mla.kv_cache<?x64xbf16>, %[[C1:arg[0-9]+]]: !mla.kv_cache<?x64xbf16>
// CHECK-NEXT: %[[X:.*]] = arith.negf %[[KV]]
// EARLY-NEXT: mla.kv_cache_update %[[X]], {{.*}} into %[[C0]]
// EARLY-NEXT: mla.kv_cache_update %[[KV]], {{.*}} into %[[C1]]
// CHECK-NEXT: %[[QA:.*]] = arith.negf
// CHECK-NEXT: %[[QB:.*]] = arith.negf %[[QA]]
// CHECK-NEXT: %[[QC:.*]] = arith.negf %[[QB]]
// LATE-NEXT: mla.kv_cache_update %[[X]], {{.*}} into %[[C0]]
// LATE-NEXT: mla.kv_cache_update %[[KV]], {{.*}} into %[[C1]]
// CHECK-NEXT: return %[[QC]]
func.func @aliasing_caches_order(%q: tensor<4x16x64xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                 %c0: !mla.kv_cache<?x64xbf16>, %c1: !mla.kv_cache<?x64xbf16>) -> tensor<4x16x64xbf16> {
  %x = arith.negf %kv_c : tensor<4x512xbf16>
  %qa = arith.negf %q : tensor<4x16x64xbf16>
  mla.kv_cache_update %x, %k_pe, %slots into %c0 : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %qb = arith.negf %qa : tensor<4x16x64xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %c1 : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %qc = arith.negf %qb : tensor<4x16x64xbf16>
  return %qc : tensor<4x16x64xbf16>
}

// -----

// An update inside a loop body moves within the body only.
// CHECK-LABEL: func.func @nested_block
// CHECK-SAME: %[[C:arg[0-9]+]]: !mla.kv_cache<?x64xbf16>
// CHECK: %[[QA:.*]] = arith.negf
// CHECK-NEXT: scf.for
// EARLY-NEXT: mla.kv_cache_update {{.*}} into %[[C]]
// CHECK-NEXT: %[[N:.*]] = arith.negf
// LATE-NEXT: mla.kv_cache_update {{.*}} into %[[C]]
// CHECK-NEXT: scf.yield %[[N]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[QB:.*]] = arith.negf
// CHECK-NEXT: return
func.func @nested_block(%q: tensor<4x16x64xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                        %cache: !mla.kv_cache<?x64xbf16>) -> tensor<4x16x64xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %qa = arith.negf %q : tensor<4x16x64xbf16>
  %r = scf.for %i = %c0 to %c2 step %c1 iter_args(%acc = %qa) -> (tensor<4x16x64xbf16>) {
    %n = arith.negf %acc : tensor<4x16x64xbf16>
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
    scf.yield %n : tensor<4x16x64xbf16>
  }
  %qb = arith.negf %r : tensor<4x16x64xbf16>
  return %qb : tensor<4x16x64xbf16>
}

// -----

// A use of the rotated q_pe nested in a region op also holds the fused update
// (late): it stays above the scf.if although nothing there touches the cache.
// Early, it hoists above the pure op as usual.
// CHECK-LABEL: func.func @rope_update_nested_user
// CHECK-SAME: %[[C:arg[0-9]+]]: !mla.kv_cache<?x64xbf16>,
// EARLY-NEXT: %[[QR:.*]] = mla.rope_kv_cache_update neox {{.*}} into %[[C]]
// CHECK-NEXT: %[[QA:.*]] = arith.negf
// LATE-NEXT: %[[QR:.*]] = mla.rope_kv_cache_update neox {{.*}} into %[[C]]
// CHECK-NEXT: %[[R:.*]] = scf.if
// CHECK-NEXT: arith.negf %[[QR]]
func.func @rope_update_nested_user(%cond: i1, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                   %cache: !mla.kv_cache<?x64xbf16>, %pos: tensor<4xi64>, %cs: tensor<8192x64xf32>,
                                   %q_pe: tensor<4x16x64xbf16>) -> (tensor<4x16x64xbf16>, tensor<4x16x64xbf16>) {
  %qa = arith.negf %q_pe : tensor<4x16x64xbf16>
  %qr = mla.rope_kv_cache_update neox %kv_c, %k_pe, %slots into %cache positions(%pos, %cs) rotate_q(%q_pe : tensor<4x16x64xbf16>)
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<8192x64xf32> rotated_q tensor<4x16x64xbf16>
  %r = scf.if %cond -> (tensor<4x16x64xbf16>) {
    %n = arith.negf %qr : tensor<4x16x64xbf16>
    scf.yield %n : tensor<4x16x64xbf16>
  } else {
    scf.yield %q_pe : tensor<4x16x64xbf16>
  }
  return %qa, %r : tensor<4x16x64xbf16>, tensor<4x16x64xbf16>
}
