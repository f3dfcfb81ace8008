// RUN: mla-opt %s -split-input-file -allow-unregistered-dialect -verify-diagnostics -mla-verify-kv-order | FileCheck %s

// Cases with errors print nothing; valid ones must come out unchanged.

//===----------------------------------------------------------------------===//
// Stale reads
//===----------------------------------------------------------------------===//

func.func @stale_read(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                      %cache: !mla.kv_cache<?x16xbf16>, %q: tensor<4x16x576xbf16>,
                      %bt: tensor<4x8xi32>, %sl: tensor<4xi32>) -> tensor<4x16x512xbf16> {
  // expected-error @+1 {{attention reads cache before the update that writes this step's rows}}
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  // expected-note @+1 {{the cache is written here}}
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// The fused rope + update writes the rows just as well.
func.func @stale_read_fused_update(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                   %cache: !mla.kv_cache<?x16xbf16>, %q: tensor<4x16x576xbf16>,
                                   %bt: tensor<4x8xi32>, %sl: tensor<4xi32>, %pos: tensor<4xi64>,
                                   %cs: tensor<4096x64xf32>) -> tensor<4x16x512xbf16> {
  // expected-error @+1 {{attention reads cache before the update}}
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  "test.unrelated"() : () -> ()
  // expected-note @+1 {{the cache is written here}}
  mla.rope_kv_cache_update neox %kv_c, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  return %o : tensor<4x16x512xbf16>
}

// -----

// A read nested in an scf.if precedes the update after it.
func.func @stale_read_nested_reader(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                    %cache: !mla.kv_cache<?x16xbf16>, %q: tensor<4x16x576xbf16>,
                                    %bt: tensor<4x8xi32>, %sl: tensor<4xi32>, %cond: i1) {
  scf.if %cond {
    // expected-error @+1 {{attention reads cache before the update}}
    %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
        : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
    "test.use"(%o) : (tensor<4x16x512xbf16>) -> ()
  }
  // expected-note @+1 {{the cache is written here}}
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

// An update nested in a later scf.if.
func.func @stale_read_nested_update(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                    %cache: !mla.kv_cache<?x16xbf16>, %q: tensor<4x16x576xbf16>,
                                    %bt: tensor<4x8xi32>, %sl: tensor<4xi32>, %cond: i1) -> tensor<4x16x512xbf16> {
  // expected-error @+1 {{attention reads cache before the update}}
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  scf.if %cond {
    // expected-note @+1 {{the cache is written here}}
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  }
  return %o : tensor<4x16x512xbf16>
}

// -----

// Update then attention: this step's rows are in the cache when read.
// CHECK-LABEL: func.func @valid_order
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x16xbf16>, %[[Q:[^:]*]]: tensor<4x16x576xbf16>, %[[BT:[^:]*]]: tensor<4x8xi32>, %[[SL:[^:]*]]: tensor<4xi32>)
// CHECK-NEXT: mla.kv_cache_update %[[C]], %[[P]], %[[S]] into %[[CACHE]] :
// CHECK-NEXT: %[[O:.*]] = mla.decode_attention %[[Q]], %[[CACHE]][%[[BT]], %[[SL]]] softmax_scale
// CHECK-NEXT: return %[[O]]
func.func @valid_order(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                       %cache: !mla.kv_cache<?x16xbf16>, %q: tensor<4x16x576xbf16>,
                       %bt: tensor<4x8xi32>, %sl: tensor<4xi32>) -> tensor<4x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// Two layers: reading one cache before writing another is fine. Distinct
// arguments only *may* alias, and a verifier reports certain bugs only.
// CHECK-LABEL: func.func @other_cache
// CHECK-NEXT: mla.decode_attention %{{.*}}, %arg3
// CHECK-NEXT: mla.kv_cache_update %{{.*}}, %{{.*}}, %{{.*}} into %arg4
// CHECK-NEXT: return
func.func @other_cache(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                       %layer0: !mla.kv_cache<?x16xbf16>, %layer1: !mla.kv_cache<?x16xbf16>,
                       %q: tensor<4x16x576xbf16>, %bt: tensor<4x8xi32>, %sl: tensor<4xi32>) -> tensor<4x16x512xbf16> {
  %o = mla.decode_attention %q, %layer0[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %layer1 : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// Prefill attention reads only earlier context from the cache (the step's
// own tokens come from k and v), so it may precede the update.
// CHECK-LABEL: func.func @prefill_context_before_update
// CHECK-NEXT: %[[O:.*]] = mla.prefill_attention {{.*}} context(
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: return %[[O]]
func.func @prefill_context_before_update(%q: tensor<10x16x192xbf16>, %k: tensor<10x16x192xbf16>, %v: tensor<10x16x128xbf16>,
                                         %qsl: tensor<3xi32>, %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x8xi32>,
                                         %sl: tensor<2xi32>, %w_uk: tensor<16x128x512xbf16>, %w_uv: tensor<16x512x128xbf16>,
                                         %kv_c: tensor<10x512xbf16>, %k_pe: tensor<10x64xbf16>,
                                         %slots: tensor<10xi64>) -> tensor<10x16x128xbf16> {
  %o = mla.prefill_attention %q, %k, %v, %qsl context(%cache[%bt, %sl], %w_uk, %w_uv
      : !mla.kv_cache<?x16xbf16>, tensor<2x8xi32>, tensor<2xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16>) softmax_scale = 0.1
      : tensor<10x16x192xbf16>, tensor<10x16x192xbf16>, tensor<10x16x128xbf16>, tensor<3xi32> -> tensor<10x16x128xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<10x512xbf16>, tensor<10x64xbf16>, tensor<10xi64> into !mla.kv_cache<?x16xbf16>
  return %o : tensor<10x16x128xbf16>
}

// -----

// A loop over steps: each iteration updates, then attends. The read at the
// end of one iteration and the write at the start of the next belong to
// different steps.
// CHECK-LABEL: func.func @steps_in_loop
// CHECK: scf.for
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: mla.decode_attention
// CHECK-NEXT: scf.yield
func.func @steps_in_loop(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                         %cache: !mla.kv_cache<?x16xbf16>, %q: tensor<4x16x576xbf16>,
                         %bt: tensor<4x8xi32>, %sl: tensor<4xi32>, %init: tensor<4x16x512xbf16>,
                         %n: index) -> tensor<4x16x512xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %init) -> (tensor<4x16x512xbf16>) {
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
    %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
        : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
    scf.yield %o : tensor<4x16x512xbf16>
  }
  return %r : tensor<4x16x512xbf16>
}

//===----------------------------------------------------------------------===//
// Racing writes
//===----------------------------------------------------------------------===//

// -----

func.func @race_forall(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                       %cache: !mla.kv_cache<?x16xbf16>) {
  // expected-note @+1 {{iterations of this loop run in parallel}}
  scf.forall (%i) in (2) {
    // expected-error @+1 {{updates of one cache race across parallel iterations}}
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  }
  return
}

// -----

// Nested deeper, in an scf.parallel.
func.func @race_parallel(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                         %cache: !mla.kv_cache<?x16xbf16>, %cond: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  // expected-note @+1 {{iterations of this loop run in parallel}}
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    scf.if %cond {
      // expected-error @+1 {{updates of one cache race across parallel iterations}}
      mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
    }
    scf.reduce
  }
  return
}

// -----

// A sequential loop orders its iterations' writes.
// CHECK-LABEL: func.func @sequential_loop_writes
// CHECK: scf.for
// CHECK-NEXT: mla.kv_cache_update
func.func @sequential_loop_writes(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                                  %cache: !mla.kv_cache<?x16xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  scf.for %i = %c0 to %c2 step %c1 {
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  }
  return
}

//===----------------------------------------------------------------------===//
// Dummy / profile runs
//===----------------------------------------------------------------------===//

// -----

func.func private @opaque(!mla.kv_cache<?x16xbf16>)
func.func @dummy_run_writes(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                            %cache: !mla.kv_cache<?x16xbf16>, %q: tensor<4x16x576xbf16>,
                            %bt: tensor<4x8xi32>, %sl: tensor<4xi32>) -> tensor<4x16x512xbf16>
    attributes {mla.dummy_run} {
  // expected-error @+1 {{dummy/profile run writes the KV cache}}
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  // expected-error @+1 {{dummy/profile run writes the KV cache}}
  %o = mla.decode_attention_with_update %q, %cache[%bt, %sl] update(%kv_c, %k_pe, %slots : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64>) softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  // A call may write the cache it is given.
  // expected-error @+1 {{dummy/profile run writes the KV cache}}
  func.call @opaque(%cache) : (!mla.kv_cache<?x16xbf16>) -> ()
  return %o : tensor<4x16x512xbf16>
}

// -----

// A dummy run may read.
// CHECK-LABEL: func.func @dummy_run_reads
// CHECK-SAME: attributes {mla.dummy_run}
// CHECK-NEXT: mla.decode_attention
// CHECK-NEXT: return
func.func @dummy_run_reads(%cache: !mla.kv_cache<?x16xbf16>, %q: tensor<4x16x576xbf16>,
                           %bt: tensor<4x8xi32>, %sl: tensor<4xi32>) -> tensor<4x16x512xbf16>
    attributes {mla.dummy_run} {
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}
