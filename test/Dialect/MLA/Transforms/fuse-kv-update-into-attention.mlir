// RUN: mla-opt %s -split-input-file -allow-unregistered-dialect -mla-fuse-kv-update-into-attention="target=cuda-sm90 cost-model=false" | FileCheck %s
// RUN: mla-opt %s -split-input-file -allow-unregistered-dialect -mla-fuse-kv-update-into-attention | FileCheck %s
// RUN: mla-opt %s -split-input-file -allow-unregistered-dialect -mla-fuse-kv-update-into-attention=target=cpu | FileCheck %s
// RUN: not mla-opt %s -split-input-file -allow-unregistered-dialect -mla-fuse-kv-update-into-attention=target=tpu 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: mla-fuse-kv-update-into-attention: unknown target 'tpu' (expected 'cpu' or 'cuda-sm90')

// The update moves into the attention that reads its rows.
// CHECK-LABEL: func.func @fuse
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<4x16x576xbf16>, %[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x64xbf16>, %[[BT:[^:]*]]: tensor<4x8xi32>, %[[SL:[^:]*]]: tensor<4xi32>, %[[X:[^:]*]]: tensor<4x64xbf16>, %[[Y:[^:]*]]: tensor<4x64xbf16>)
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[X]], %[[Y]]
// CHECK-NEXT: %[[O:.*]] = mla.decode_attention_with_update %[[Q]], %[[CACHE]][%[[BT]], %[[SL]]] update(%[[C]], %[[P]], %[[S]] : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64>) softmax_scale = 1.000000e-01 : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>{{$}}
// CHECK-NEXT: return %[[O]], %[[SUM]]
// CHECK-NOT: mla.kv_cache_update
func.func @fuse(%q: tensor<4x16x576xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %bt: tensor<4x8xi32>, %sl: tensor<4xi32>,
                %x: tensor<4x64xbf16>, %y: tensor<4x64xbf16>) -> (tensor<4x16x512xbf16>, tensor<4x64xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %sum = arith.addf %x, %y : tensor<4x64xbf16>
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o, %sum : tensor<4x16x512xbf16>, tensor<4x64xbf16>
}

// -----

// The log-sum-exp result is kept; a write to a cache marked noalias and an
// scf.if of pure ops in between do not touch this cache.
// CHECK-LABEL: func.func @lse_and_unrelated_between
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<4x16x576xbf16>, %[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x64xbf16> {mla.noalias}, %[[OTHER:[^:]*]]: !mla.kv_cache<?x64xbf16>, %[[BT:[^:]*]]: tensor<4x8xi32>, %[[SL:[^:]*]]: tensor<4xi32>, %{{.*}}: i1)
// CHECK-NEXT: mla.kv_cache_update %[[C]], %[[P]], %[[S]] into %[[OTHER]]
// CHECK-NEXT: %[[R:.*]] = scf.if
// CHECK: %[[O:.*]], %[[LSE:.*]] = mla.decode_attention_with_update %[[Q]], %[[CACHE]][%[[BT]], %[[SL]]] update(%[[C]], %[[P]], %[[S]] : {{.*}}) softmax_scale = {{.*}} -> tensor<4x16x512xbf16>, tensor<4x16xf32>
// CHECK-NEXT: return %[[O]], %[[LSE]], %[[R]]
func.func @lse_and_unrelated_between(%q: tensor<4x16x576xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                                     %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16> {mla.noalias},
                                     %other: !mla.kv_cache<?x64xbf16>, %bt: tensor<4x8xi32>, %sl: tensor<4xi32>, %cond: i1)
    -> (tensor<4x16x512xbf16>, tensor<4x16xf32>, tensor<4x64xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %other
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %r = scf.if %cond -> tensor<4x64xbf16> {
    %n = arith.negf %k_pe : tensor<4x64xbf16>
    scf.yield %n : tensor<4x64xbf16>
  } else {
    scf.yield %k_pe : tensor<4x64xbf16>
  }
  %o, %lse = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>, tensor<4x16xf32>
  return %o, %lse, %r : tensor<4x16x512xbf16>, tensor<4x16xf32>, tensor<4x64xbf16>
}

// -----

// Per-tensor fp8: quantising write and read with one scale value fuse; the
// fused op's kv_scale serves both.
// CHECK-LABEL: func.func @fp8_same_scale
// CHECK-SAME: %[[SC:[^:]*]]: tensor<f32>)
// CHECK-NEXT: mla.decode_attention_with_update {{.*}} update({{.*}}) kv_scale %[[SC]] softmax_scale
// CHECK-NOT: mla.kv_cache_update
func.func @fp8_same_scale(%q: tensor<4x16x576xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                          %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>,
                          %bt: tensor<4x8xi32>, %sl: tensor<4xi32>, %s: tensor<f32>) -> tensor<4x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache scale %s
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>
  %o = mla.decode_attention %q, %cache[%bt, %sl] kv_scale %s softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// Already-quantised fp8 inputs: the write takes no scale, the read keeps its.
// CHECK-LABEL: func.func @fp8_inputs
// CHECK-SAME: %[[SC:[^:]*]]: tensor<f32>)
// CHECK-NEXT: mla.decode_attention_with_update {{.*}} update({{.*}} : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>, tensor<4xi64>) kv_scale %[[SC]] softmax_scale
// CHECK-NOT: mla.kv_cache_update
func.func @fp8_inputs(%q: tensor<4x16x576xbf16>, %kv_c: tensor<4x512xf8E4M3FN>, %k_pe: tensor<4x64xf8E4M3FN>,
                      %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>,
                      %bt: tensor<4x8xi32>, %sl: tensor<4xi32>, %s: tensor<f32>) -> tensor<4x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
      : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>
  %o = mla.decode_attention %q, %cache[%bt, %sl] kv_scale %s softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// Write and read scales are different values: one kv_scale cannot serve
// both. Unchanged.
// CHECK-LABEL: func.func @fp8_different_scales
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: mla.decode_attention %
// CHECK-NOT: mla.decode_attention_with_update
func.func @fp8_different_scales(%q: tensor<4x16x576xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                                %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>,
                                %bt: tensor<4x8xi32>, %sl: tensor<4xi32>, %s: tensor<f32>, %s2: tensor<f32>)
    -> tensor<4x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache scale %s
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>
  %o = mla.decode_attention %q, %cache[%bt, %sl] kv_scale %s2 softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// Another reader of the cache in between (a chunked prefill reading context)
// would see the rows too early if the write moved down: unchanged.
// CHECK-LABEL: func.func @reader_between
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: mla.prefill_attention
// CHECK-NEXT: mla.decode_attention %
// CHECK-NOT: mla.decode_attention_with_update
func.func @reader_between(%q: tensor<4x16x576xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                          %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %bt: tensor<4x8xi32>, %sl: tensor<4xi32>,
                          %pq: tensor<10x16x192xbf16>, %pv: tensor<10x16x128xbf16>, %qsl: tensor<3xi32>,
                          %bt2: tensor<2x8xi32>, %sl2: tensor<2xi32>, %w_uk: tensor<16x128x512xbf16>,
                          %w_uv: tensor<16x512x128xbf16>) -> (tensor<4x16x512xbf16>, tensor<10x16x128xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %p = mla.prefill_attention %pq, %pq, %pv, %qsl context(%cache[%bt2, %sl2], %w_uk, %w_uv
      : !mla.kv_cache<?x64xbf16>, tensor<2x8xi32>, tensor<2xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16>) softmax_scale = 0.1
      : tensor<10x16x192xbf16>, tensor<10x16x192xbf16>, tensor<10x16x128xbf16>, tensor<3xi32> -> tensor<10x16x128xbf16>
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o, %p : tensor<4x16x512xbf16>, tensor<10x16x128xbf16>
}

// -----

// A decode attention on a cache that may alias reads in between: unchanged.
// CHECK-LABEL: func.func @aliasing_reader_between
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: mla.decode_attention %
// CHECK-NEXT: mla.decode_attention %
// CHECK-NOT: mla.decode_attention_with_update
func.func @aliasing_reader_between(%q: tensor<4x16x576xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                                   %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %other: !mla.kv_cache<?x64xbf16>,
                                   %bt: tensor<4x8xi32>, %sl: tensor<4xi32>) -> (tensor<4x16x512xbf16>, tensor<4x16x512xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %a = mla.decode_attention %q, %other[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o, %a : tensor<4x16x512xbf16>, tensor<4x16x512xbf16>
}

// -----

// A write to a cache that may alias in between: unchanged.
// CHECK-LABEL: func.func @aliasing_write_between
// CHECK-NEXT: mla.kv_cache_update %{{.*}}, %{{.*}}, %{{.*}} into %[[CACHE:[^ ]*]] :
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: mla.decode_attention %{{.*}}, %[[CACHE]]
// CHECK-NOT: mla.decode_attention_with_update
func.func @aliasing_write_between(%q: tensor<4x16x576xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                                  %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %other: !mla.kv_cache<?x64xbf16>,
                                  %bt: tensor<4x8xi32>, %sl: tensor<4xi32>) -> tensor<4x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots into %other
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// Two updates of one cache: the second is folded into the attention; the
// first would move across it and stays.
// CHECK-LABEL: func.func @two_updates
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<4x16x576xbf16>, %[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[S:[^:]*]]: tensor<4xi64>, %[[S2:[^:]*]]: tensor<4xi64>,
// CHECK-NEXT: mla.kv_cache_update %[[C]], %[[P]], %[[S]] into
// CHECK-NEXT: mla.decode_attention_with_update %[[Q]], %{{.*}} update(%[[C]], %[[P]], %[[S2]] :
// CHECK-NOT: mla.kv_cache_update
func.func @two_updates(%q: tensor<4x16x576xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                       %slots: tensor<4xi64>, %slots2: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>,
                       %bt: tensor<4x8xi32>, %sl: tensor<4xi32>) -> tensor<4x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %slots2 into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// A call in between has unknown effects: unchanged.
// CHECK-LABEL: func.func @call_between
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: call @opaque
// CHECK-NEXT: mla.decode_attention %
// CHECK-NOT: mla.decode_attention_with_update
func.func private @opaque()
func.func @call_between(%q: tensor<4x16x576xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                        %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16> {mla.noalias},
                        %bt: tensor<4x8xi32>, %sl: tensor<4xi32>) -> tensor<4x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  func.call @opaque() : () -> ()
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// An unregistered op in between may access any cache: unchanged.
// CHECK-LABEL: func.func @unknown_op_between
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: "test.opaque"
// CHECK-NEXT: mla.decode_attention %
// CHECK-NOT: mla.decode_attention_with_update
func.func @unknown_op_between(%q: tensor<4x16x576xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                              %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16> {mla.noalias},
                              %bt: tensor<4x8xi32>, %sl: tensor<4xi32>) -> tensor<4x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  "test.opaque"() : () -> ()
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// A loop in between whose body writes the cache: unchanged.
// CHECK-LABEL: func.func @loop_writes_between
// CHECK-NEXT: arith.constant
// CHECK-NEXT: arith.constant
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: scf.for
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: }
// CHECK-NEXT: mla.decode_attention %
// CHECK-NOT: mla.decode_attention_with_update
func.func @loop_writes_between(%q: tensor<4x16x576xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                               %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>,
                               %bt: tensor<4x8xi32>, %sl: tensor<4xi32>, %n: index) -> tensor<4x16x512xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  scf.for %i = %c0 to %n step %c1 {
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
        : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  }
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// The absorbing form (head query, W_UK inside) is not what the fused kernel
// computes: unchanged.
// CHECK-LABEL: func.func @absorb
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: mla.decode_attention {{.*}} absorb(
// CHECK-NOT: mla.decode_attention_with_update
func.func @absorb(%q: tensor<4x16x192xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                  %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %bt: tensor<4x8xi32>, %sl: tensor<4xi32>,
                  %w_uk: tensor<16x128x512xbf16>) -> tensor<4x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %o = mla.decode_attention %q, %cache[%bt, %sl] absorb(%w_uk : tensor<16x128x512xbf16>) softmax_scale = 0.1
      : tensor<4x16x192xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// A quantised query (q_scale) is not what the fused kernel computes either.
// CHECK-LABEL: func.func @q_scale
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: mla.decode_attention {{.*}} q_scale
// CHECK-NOT: mla.decode_attention_with_update
func.func @q_scale(%q: tensor<4x16x576xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                   %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %bt: tensor<4x8xi32>, %sl: tensor<4xi32>,
                   %qs: tensor<f32>) -> tensor<4x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %o = mla.decode_attention %q, %cache[%bt, %sl] q_scale %qs softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// The attention reads another cache (disjoint by noalias): nothing reads this
// update's rows, nothing to fold.
// CHECK-LABEL: func.func @different_caches
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: mla.decode_attention %
// CHECK-NOT: mla.decode_attention_with_update
func.func @different_caches(%q: tensor<4x16x576xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                            %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16> {mla.noalias},
                            %other: !mla.kv_cache<?x64xbf16>, %bt: tensor<4x8xi32>, %sl: tensor<4xi32>)
    -> tensor<4x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %o = mla.decode_attention %q, %other[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// The update inside an scf.if, the attention after it: different blocks.
// CHECK-LABEL: func.func @update_in_other_block
// CHECK-NEXT: scf.if
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: }
// CHECK-NEXT: mla.decode_attention %
// CHECK-NOT: mla.decode_attention_with_update
func.func @update_in_other_block(%q: tensor<4x16x576xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                                 %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>,
                                 %bt: tensor<4x8xi32>, %sl: tensor<4xi32>, %cond: i1) -> tensor<4x16x512xbf16> {
  scf.if %cond {
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
        : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  }
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// The attention inside an scf.if after the update: different blocks.
// CHECK-LABEL: func.func @attention_in_other_block
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: scf.if
// CHECK-NEXT: mla.decode_attention %
// CHECK-NOT: mla.decode_attention_with_update
func.func @attention_in_other_block(%q: tensor<4x16x576xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                                    %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>,
                                    %bt: tensor<4x8xi32>, %sl: tensor<4xi32>, %cond: i1) -> tensor<4x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %r = scf.if %cond -> tensor<4x16x512xbf16> {
    %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
        : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
    scf.yield %o : tensor<4x16x512xbf16>
  } else {
    %z = tensor.empty() : tensor<4x16x512xbf16>
    scf.yield %z : tensor<4x16x512xbf16>
  }
  return %r : tensor<4x16x512xbf16>
}
