// RUN: mla-opt %s -split-input-file -allow-unregistered-dialect -verify-diagnostics -mla-eliminate-kv-updates | FileCheck %s
// RUN: mla-opt %s -split-input-file -allow-unregistered-dialect -mla-eliminate-kv-updates=dummy-runs=false | FileCheck %s --check-prefix=NODUMMY
// RUN: mla-opt %s -split-input-file -allow-unregistered-dialect -mla-eliminate-kv-updates=static-empty=false | FileCheck %s --check-prefix=NOEMPTY
// RUN: mla-opt %s -split-input-file -allow-unregistered-dialect -mla-eliminate-kv-updates=duplicates=false | FileCheck %s --check-prefix=NODUP
// RUN: mla-opt %s -split-input-file -allow-unregistered-dialect -mla-eliminate-kv-updates=overwritten=false | FileCheck %s --check-prefix=NOOVER

//===----------------------------------------------------------------------===//
// Dummy / profile runs
//===----------------------------------------------------------------------===//

// Every update of a dummy run goes, nested ones too; the fused op's rotated
// q_pe stays as a pure mla.rope; readers stay.
// CHECK-LABEL: func.func @dummy_run
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x16xbf16>, %[[POS:[^:]*]]: tensor<4xi64>, %[[CS:[^:]*]]: tensor<4096x64xf32>, %[[QPE:[^:]*]]: tensor<4x16x64xbf16>, %[[Q:[^:]*]]: tensor<4x16x576xbf16>, %[[BT:[^:]*]]: tensor<4x8xi32>, %[[SL:[^:]*]]: tensor<4xi32>, %[[COND:[^:]*]]: i1)
// CHECK-NEXT: %[[ROT:.*]] = mla.rope gptj %[[QPE]], %[[POS]], %[[CS]] : tensor<4x16x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
// CHECK-NEXT: scf.if %[[COND]] {
// CHECK-NEXT: }
// CHECK-NEXT: %[[O:.*]] = mla.decode_attention %[[Q]], %[[CACHE]][%[[BT]], %[[SL]]]
// CHECK-NEXT: return %[[ROT]], %[[O]]
// CHECK-NOT: kv_cache_update
// NODUMMY-LABEL: func.func @dummy_run
// NODUMMY: mla.rope_kv_cache_update
// NODUMMY: mla.kv_cache_update
// NODUMMY: mla.kv_cache_update
func.func @dummy_run(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                     %cache: !mla.kv_cache<?x16xbf16>, %pos: tensor<4xi64>, %cs: tensor<4096x64xf32>,
                     %q_pe: tensor<4x16x64xbf16>, %q: tensor<4x16x576xbf16>, %bt: tensor<4x8xi32>,
                     %sl: tensor<4xi32>, %cond: i1)
    -> (tensor<4x16x64xbf16>, tensor<4x16x512xbf16>) attributes {mla.dummy_run} {
  %rq = mla.rope_kv_cache_update gptj %kv_c, %k_pe, %slots into %cache positions(%pos, %cs) rotate_q(%q_pe : tensor<4x16x64xbf16>)
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>, tensor<4xi64>, tensor<4096x64xf32> rotated_q tensor<4x16x64xbf16>
  scf.if %cond {
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  }
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %rq, %o : tensor<4x16x64xbf16>, tensor<4x16x512xbf16>
}

// -----

// Ops that read and write in one kernel keep their write: a warning each (the
// call has unknown effects on its cache operand).
// CHECK-LABEL: func.func @dummy_run_fused_writers_stay
// CHECK-NEXT: mla.decode_attention_with_update
// CHECK-NEXT: call @opaque
// CHECK-NEXT: return
func.func private @opaque(!mla.kv_cache<?x16xbf16>)
func.func @dummy_run_fused_writers_stay(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                        %cache: !mla.kv_cache<?x16xbf16>, %q: tensor<4x16x576xbf16>,
                                        %bt: tensor<4x8xi32>, %sl: tensor<4xi32>)
    -> tensor<4x16x512xbf16> attributes {mla.dummy_run} {
  // expected-warning @+1 {{dummy/profile run still writes the KV cache through this op}}
  %o = mla.decode_attention_with_update %q, %cache[%bt, %sl] update(%kv_c, %k_pe, %slots : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64>) softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  // expected-warning @+1 {{dummy/profile run still writes the KV cache through this op}}
  func.call @opaque(%cache) : (!mla.kv_cache<?x16xbf16>) -> ()
  return %o : tensor<4x16x512xbf16>
}

// -----

// Outside a dummy run, the last write before the return is the caller's to
// see: it stays.
// CHECK-LABEL: func.func @last_write_kept
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x16xbf16>)
// CHECK-NEXT: mla.kv_cache_update %[[C]], %[[P]], %[[S]] into %[[CACHE]] :
// CHECK-NEXT: return
func.func @last_write_kept(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                           %cache: !mla.kv_cache<?x16xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

//===----------------------------------------------------------------------===//
// Statically empty writes
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @empty_slot_mapping
// CHECK-NEXT: return
// NOEMPTY-LABEL: func.func @empty_slot_mapping
// NOEMPTY-NEXT: mla.kv_cache_update
func.func @empty_slot_mapping(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<0xi64>,
                              %cache: !mla.kv_cache<?x16xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<0xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

// No tokens: whatever the (dynamic) slot mapping holds, nothing is written.
// CHECK-LABEL: func.func @empty_tokens
// CHECK-NEXT: return
func.func @empty_tokens(%kv_c: tensor<0x512xbf16>, %k_pe: tensor<0x64xbf16>, %slots: tensor<?xi64>,
                        %cache: !mla.kv_cache<?x16xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<0x512xbf16>, tensor<0x64xbf16>, tensor<?xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

// Constant slots, all negative (splat and elements): nothing is written.
// CHECK-LABEL: func.func @all_negative_slots
// CHECK-NEXT: arith.constant
// CHECK-NEXT: arith.constant
// CHECK-NEXT: return
func.func @all_negative_slots(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                              %cache: !mla.kv_cache<?x16xbf16>) {
  %splat = arith.constant dense<-1> : tensor<4xi64>
  %elems = arith.constant dense<[-1, -7, -2, -1]> : tensor<4xi32>
  mla.kv_cache_update %kv_c, %k_pe, %splat into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %elems into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi32> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

// One non-negative slot writes a row: kept.
// CHECK-LABEL: func.func @mixed_slots_kept
// CHECK-NEXT: %[[S:.*]] = arith.constant dense<[-1, 3, -1, -1]>
// CHECK-NEXT: mla.kv_cache_update %{{.*}}, %{{.*}}, %[[S]] into
// CHECK-NEXT: return
func.func @mixed_slots_kept(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                            %cache: !mla.kv_cache<?x16xbf16>) {
  %slots = arith.constant dense<[-1, 3, -1, -1]> : tensor<4xi64>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

// A fused update that writes nothing still rotates: its used k_pe result
// becomes an mla.rope.
// CHECK-LABEL: func.func @fused_empty_keeps_rotation
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x16xbf16>, %[[POS:[^:]*]]: tensor<4xi64>, %[[CS:[^:]*]]: tensor<4096x64xf32>)
// CHECK-NEXT: arith.constant
// CHECK-NEXT: %[[K:.*]] = mla.rope neox %[[P]], %[[POS]], %[[CS]] : tensor<4x64xbf16>
// CHECK-NEXT: return %[[K]]
func.func @fused_empty_keeps_rotation(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                                      %cache: !mla.kv_cache<?x16xbf16>, %pos: tensor<4xi64>,
                                      %cs: tensor<4096x64xf32>) -> tensor<4x64xbf16> {
  %slots = arith.constant dense<-1> : tensor<4xi64>
  %k = mla.rope_kv_cache_update neox %kv_c, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>, tensor<4xi64>, tensor<4096x64xf32> rotated_k tensor<4x64xbf16>
  return %k : tensor<4x64xbf16>
}

//===----------------------------------------------------------------------===//
// Duplicates
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @duplicate
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x16xbf16>)
// CHECK-NEXT: mla.kv_cache_update %[[C]], %[[P]], %[[S]] into %[[CACHE]] :
// CHECK-NEXT: return
// NODUP-LABEL: func.func @duplicate
// NODUP-NEXT: mla.kv_cache_update
// NODUP-NEXT: return
func.func @duplicate(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                     %cache: !mla.kv_cache<?x16xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

// A read in between sees the first write; rewriting the same values after
// it changes nothing, so the duplicate still goes (the overwrite rule alone
// would have to keep both).
// CHECK-LABEL: func.func @duplicate_reader_between
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: %[[O:.*]] = mla.decode_attention
// CHECK-NEXT: return %[[O]]
// NODUP-LABEL: func.func @duplicate_reader_between
// NODUP-NEXT: mla.kv_cache_update
// NODUP-NEXT: mla.decode_attention
// NODUP-NEXT: mla.kv_cache_update
func.func @duplicate_reader_between(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                    %cache: !mla.kv_cache<?x16xbf16>, %q: tensor<4x16x576xbf16>,
                                    %bt: tensor<4x8xi32>, %sl: tensor<4xi32>) -> tensor<4x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// A write in between (other slots, same cache) may change rows the first
// update wrote: the repeated update is not redundant.
// CHECK-LABEL: func.func @duplicate_write_between_kept
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[S2:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x16xbf16>)
// CHECK-NEXT: mla.kv_cache_update %[[C]], %[[P]], %[[S]] into %[[CACHE]] :
// CHECK-NEXT: mla.kv_cache_update %[[C]], %[[P]], %[[S2]] into %[[CACHE]] :
// CHECK-NEXT: mla.kv_cache_update %[[C]], %[[P]], %[[S]] into %[[CACHE]] :
// CHECK-NEXT: return
func.func @duplicate_write_between_kept(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                        %slots2: tensor<4xi64>, %cache: !mla.kv_cache<?x16xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots2 into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

// A write to another cache argument that may alias this one (no mla.noalias)
// counts as a write in between.
// CHECK-LABEL: func.func @duplicate_aliasing_write_kept
// CHECK-COUNT-3: mla.kv_cache_update
// CHECK-NEXT: return
func.func @duplicate_aliasing_write_kept(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                         %cache: !mla.kv_cache<?x16xbf16>, %other: !mla.kv_cache<?x16xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %other : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

// Identical fused updates: the second goes and its rotated q_pe is the
// first one's.
// CHECK-LABEL: func.func @duplicate_fused
// CHECK-NEXT: %[[Q1:.*]] = mla.rope_kv_cache_update
// CHECK-NEXT: return %[[Q1]], %[[Q1]]
func.func @duplicate_fused(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                           %cache: !mla.kv_cache<?x16xbf16>, %pos: tensor<4xi64>, %cs: tensor<4096x64xf32>,
                           %q_pe: tensor<4x16x64xbf16>) -> (tensor<4x16x64xbf16>, tensor<4x16x64xbf16>) {
  %q1 = mla.rope_kv_cache_update neox %kv_c, %k_pe, %slots into %cache positions(%pos, %cs) rotate_q(%q_pe : tensor<4x16x64xbf16>)
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>, tensor<4xi64>, tensor<4096x64xf32> rotated_q tensor<4x16x64xbf16>
  %q2 = mla.rope_kv_cache_update neox %kv_c, %k_pe, %slots into %cache positions(%pos, %cs) rotate_q(%q_pe : tensor<4x16x64xbf16>)
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>, tensor<4xi64>, tensor<4096x64xf32> rotated_q tensor<4x16x64xbf16>
  return %q1, %q2 : tensor<4x16x64xbf16>, tensor<4x16x64xbf16>
}

// -----

// A duplicate goes, and then the first update is overwritten by the third
// (same slot mapping): only the last write is left.
// CHECK-LABEL: func.func @duplicate_then_overwritten
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x16xbf16>, %[[C2:[^:]*]]: tensor<4x512xbf16>)
// CHECK-NEXT: mla.kv_cache_update %[[C2]], %[[P]], %[[S]] into %[[CACHE]] :
// CHECK-NEXT: return
func.func @duplicate_then_overwritten(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                      %cache: !mla.kv_cache<?x16xbf16>, %kv_c2: tensor<4x512xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  mla.kv_cache_update %kv_c2, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

//===----------------------------------------------------------------------===//
// Overwritten writes
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @overwritten
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x16xbf16>, %[[C2:[^:]*]]: tensor<4x512xbf16>, %[[P2:[^:]*]]: tensor<4x64xbf16>)
// CHECK-NEXT: mla.kv_cache_update %[[C2]], %[[P2]], %[[S]] into %[[CACHE]] :
// CHECK-NEXT: return
// NOOVER-LABEL: func.func @overwritten
// NOOVER-NEXT: mla.kv_cache_update
// NOOVER-NEXT: mla.kv_cache_update
func.func @overwritten(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                       %cache: !mla.kv_cache<?x16xbf16>, %kv_c2: tensor<4x512xbf16>, %k_pe2: tensor<4x64xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  mla.kv_cache_update %kv_c2, %k_pe2, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

// The overwritten op is fused and its rotated k_pe is used: the rotation
// stays as an mla.rope, the write goes.
// CHECK-LABEL: func.func @overwritten_fused_keeps_rotation
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x16xbf16>, %[[POS:[^:]*]]: tensor<4xi64>, %[[CS:[^:]*]]: tensor<4096x64xf32>, %[[C2:[^:]*]]: tensor<4x512xbf16>)
// CHECK-NEXT: %[[K:.*]] = mla.rope neox %[[P]], %[[POS]], %[[CS]]
// CHECK-NEXT: mla.kv_cache_update %[[C2]], %[[K]], %[[S]] into %[[CACHE]] :
// CHECK-NEXT: return
func.func @overwritten_fused_keeps_rotation(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                            %cache: !mla.kv_cache<?x16xbf16>, %pos: tensor<4xi64>, %cs: tensor<4096x64xf32>,
                                            %kv_c2: tensor<4x512xbf16>) {
  %k = mla.rope_kv_cache_update neox %kv_c, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>, tensor<4xi64>, tensor<4096x64xf32> rotated_k tensor<4x64xbf16>
  mla.kv_cache_update %kv_c2, %k, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

// A reader in between sees the first write.
// CHECK-LABEL: func.func @overwritten_reader_between_kept
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x16xbf16>, %[[C2:[^:]*]]: tensor<4x512xbf16>
// CHECK-NEXT: mla.kv_cache_update %[[C]], %[[P]], %[[S]] into %[[CACHE]] :
// CHECK-NEXT: mla.decode_attention
// CHECK-NEXT: mla.kv_cache_update %[[C2]], %[[P]], %[[S]] into %[[CACHE]] :
func.func @overwritten_reader_between_kept(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                           %cache: !mla.kv_cache<?x16xbf16>, %kv_c2: tensor<4x512xbf16>,
                                           %q: tensor<4x16x576xbf16>, %bt: tensor<4x8xi32>,
                                           %sl: tensor<4xi32>) -> tensor<4x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  mla.kv_cache_update %kv_c2, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// Different slot-mapping values may name different rows.
// CHECK-LABEL: func.func @overwritten_other_slots_kept
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[S2:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x16xbf16>, %[[C2:[^:]*]]: tensor<4x512xbf16>)
// CHECK-NEXT: mla.kv_cache_update %[[C]], %[[P]], %[[S]] into %[[CACHE]] :
// CHECK-NEXT: mla.kv_cache_update %[[C2]], %[[P]], %[[S2]] into %[[CACHE]] :
// CHECK-NEXT: return
func.func @overwritten_other_slots_kept(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                        %slots2: tensor<4xi64>, %cache: !mla.kv_cache<?x16xbf16>,
                                        %kv_c2: tensor<4x512xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  mla.kv_cache_update %kv_c2, %k_pe, %slots2 into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

// A reader of another cache argument that may alias this one.
// CHECK-LABEL: func.func @overwritten_aliasing_reader_kept
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: mla.decode_attention
// CHECK-NEXT: mla.kv_cache_update
func.func @overwritten_aliasing_reader_kept(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                            %cache: !mla.kv_cache<?x16xbf16>, %other: !mla.kv_cache<?x16xbf16>,
                                            %kv_c2: tensor<4x512xbf16>, %q: tensor<4x16x576xbf16>,
                                            %bt: tensor<4x8xi32>, %sl: tensor<4xi32>) -> tensor<4x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  %o = mla.decode_attention %q, %other[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  mla.kv_cache_update %kv_c2, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// With mla.noalias the other cache is distinct storage: its reader does not
// see the first write, which goes.
// CHECK-LABEL: func.func @overwritten_noalias_reader
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x16xbf16> {mla.noalias}, %[[OTHER:[^:]*]]: !mla.kv_cache<?x16xbf16>, %[[C2:[^:]*]]: tensor<4x512xbf16>
// CHECK-NEXT: mla.decode_attention %{{.*}}, %[[OTHER]]
// CHECK-NEXT: mla.kv_cache_update %[[C2]], %[[P]], %[[S]] into %[[CACHE]] :
// CHECK-NEXT: return
func.func @overwritten_noalias_reader(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                      %cache: !mla.kv_cache<?x16xbf16> {mla.noalias}, %other: !mla.kv_cache<?x16xbf16>,
                                      %kv_c2: tensor<4x512xbf16>, %q: tensor<4x16x576xbf16>,
                                      %bt: tensor<4x8xi32>, %sl: tensor<4xi32>) -> tensor<4x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  %o = mla.decode_attention %q, %other[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  mla.kv_cache_update %kv_c2, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// A call may read every cache.
// CHECK-LABEL: func.func @overwritten_call_between_kept
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: call @unknown()
// CHECK-NEXT: mla.kv_cache_update
func.func private @unknown()
func.func @overwritten_call_between_kept(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                         %cache: !mla.kv_cache<?x16xbf16>, %kv_c2: tensor<4x512xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  func.call @unknown() : () -> ()
  mla.kv_cache_update %kv_c2, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

// An unregistered op has unknown effects.
// CHECK-LABEL: func.func @overwritten_unknown_op_kept
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: "test.opaque"()
// CHECK-NEXT: mla.kv_cache_update
func.func @overwritten_unknown_op_kept(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                       %cache: !mla.kv_cache<?x16xbf16>, %kv_c2: tensor<4x512xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  "test.opaque"() : () -> ()
  mla.kv_cache_update %kv_c2, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

// An scf.if that may read the cache is a reader.
// CHECK-LABEL: func.func @overwritten_if_reader_kept
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: scf.if
// CHECK-NEXT: mla.decode_attention
// CHECK: mla.kv_cache_update
func.func @overwritten_if_reader_kept(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                      %cache: !mla.kv_cache<?x16xbf16>, %kv_c2: tensor<4x512xbf16>,
                                      %q: tensor<4x16x576xbf16>, %bt: tensor<4x8xi32>, %sl: tensor<4xi32>,
                                      %cond: i1) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  scf.if %cond {
    %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
        : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
    "test.use"(%o) : (tensor<4x16x512xbf16>) -> ()
  }
  mla.kv_cache_update %kv_c2, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

// An scf.for that reads the cache is a reader.
// CHECK-LABEL: func.func @overwritten_for_reader_kept
// CHECK-NEXT: arith.constant
// CHECK-NEXT: arith.constant
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: scf.for
// CHECK-NEXT: mla.decode_attention
// CHECK: mla.kv_cache_update
func.func @overwritten_for_reader_kept(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                       %cache: !mla.kv_cache<?x16xbf16>, %kv_c2: tensor<4x512xbf16>,
                                       %q: tensor<4x16x576xbf16>, %bt: tensor<4x8xi32>, %sl: tensor<4xi32>,
                                       %init: tensor<4x16x512xbf16>) -> tensor<4x16x512xbf16> {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  %r = scf.for %i = %c0 to %c2 step %c2 iter_args(%acc = %init) -> (tensor<4x16x512xbf16>) {
    %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
        : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
    scf.yield %o : tensor<4x16x512xbf16>
  }
  mla.kv_cache_update %kv_c2, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return %r : tensor<4x16x512xbf16>
}

// -----

// A region op without cache accesses is no obstacle.
// CHECK-LABEL: func.func @overwritten_across_pure_if
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x16xbf16>, %[[C2:[^:]*]]: tensor<4x512xbf16>
// CHECK-NEXT: scf.if
// CHECK: mla.kv_cache_update %[[C2]], %[[P]], %[[S]] into %[[CACHE]] :
// CHECK-NEXT: return
// CHECK-NOT: mla.kv_cache_update
func.func @overwritten_across_pure_if(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                      %cache: !mla.kv_cache<?x16xbf16>, %kv_c2: tensor<4x512xbf16>,
                                      %pos: tensor<4xi64>, %cs: tensor<4096x64xf32>, %cond: i1) -> tensor<4x64xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  %k = scf.if %cond -> tensor<4x64xbf16> {
    %r = mla.rope neox %k_pe, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
    scf.yield %r : tensor<4x64xbf16>
  } else {
    scf.yield %k_pe : tensor<4x64xbf16>
  }
  mla.kv_cache_update %kv_c2, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return %k : tensor<4x64xbf16>
}

// -----

// Updates are compared within their own block only: the nested update may
// not run, so the outer one stays; inside the scf.if, the first of two
// updates with one slot mapping goes.
// CHECK-LABEL: func.func @nested_updates
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x16xbf16>, %[[C2:[^:]*]]: tensor<4x512xbf16>, %[[COND:[^:]*]]: i1)
// CHECK-NEXT: mla.kv_cache_update %[[C]], %[[P]], %[[S]] into %[[CACHE]] :
// CHECK-NEXT: scf.if %[[COND]] {
// CHECK-NEXT: mla.kv_cache_update %[[C2]], %[[P]], %[[S]] into %[[CACHE]] :
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @nested_updates(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                          %cache: !mla.kv_cache<?x16xbf16>, %kv_c2: tensor<4x512xbf16>, %cond: i1) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  scf.if %cond {
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
    mla.kv_cache_update %kv_c2, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  }
  return
}
