// RUN: mla-opt %s -mla-fuse-projections -split-input-file | FileCheck %s
// RUN: mla-opt %s -mla-fuse-projections -mla-fuse-projections -split-input-file | FileCheck %s
// RUN: mla-opt %s -mla-fuse-projections -split-input-file -mlir-print-debuginfo -mlir-print-local-scope | FileCheck %s --check-prefix=LOC

// DeepSeek-V2-Lite's q_proj and kv_a_proj_with_mqa read the same normalised
// hidden state: one GEMM over [w_q; w_kv_a], then a column slice each. The
// fused ops carry the originals' locations.
// CHECK-LABEL: func.func @q_and_kv_a
// CHECK-SAME: (%[[H:[^:]*]]: tensor<64x2048xbf16>, %[[WQ:[^:]*]]: tensor<3072x2048xbf16>, %[[WKV:[^:]*]]: tensor<576x2048xbf16>)
// CHECK-NEXT: %[[W:.*]] = tensor.concat dim(0) %[[WQ]], %[[WKV]] : (tensor<3072x2048xbf16>, tensor<576x2048xbf16>) -> tensor<3648x2048xbf16>
// CHECK-NEXT: %[[Y:.*]] = mla.linear %[[H]], %[[W]] : tensor<64x2048xbf16>, tensor<3648x2048xbf16> -> tensor<64x3648xbf16>
// CHECK-NEXT: %[[Q:.*]] = tensor.extract_slice %[[Y]][0, 0] [64, 3072] [1, 1] : tensor<64x3648xbf16> to tensor<64x3072xbf16>
// CHECK-NEXT: %[[KV:.*]] = tensor.extract_slice %[[Y]][0, 3072] [64, 576] [1, 1] : tensor<64x3648xbf16> to tensor<64x576xbf16>
// CHECK-NEXT: return %[[Q]], %[[KV]]
// CHECK-NOT: mla.linear
// LOC-LABEL: func.func @q_and_kv_a
// LOC: tensor.concat {{.*}} loc(fused["q_proj", "kv_a_proj"])
// LOC-NEXT: mla.linear {{.*}} loc(fused["q_proj", "kv_a_proj"])
// LOC-NEXT: tensor.extract_slice {{.*}} loc("q_proj")
// LOC-NEXT: tensor.extract_slice {{.*}} loc("kv_a_proj")
func.func @q_and_kv_a(%h: tensor<64x2048xbf16>, %w_q: tensor<3072x2048xbf16>, %w_kv_a: tensor<576x2048xbf16>)
    -> (tensor<64x3072xbf16>, tensor<64x576xbf16>) {
  %q = mla.linear %h, %w_q : tensor<64x2048xbf16>, tensor<3072x2048xbf16> -> tensor<64x3072xbf16> loc("q_proj")
  %kv = mla.linear %h, %w_kv_a : tensor<64x2048xbf16>, tensor<576x2048xbf16> -> tensor<64x576xbf16> loc("kv_a_proj")
  return %q, %kv : tensor<64x3072xbf16>, tensor<64x576xbf16>
}

// -----

// Three projections: the concat and the slice offsets follow block order,
// not argument order.
// CHECK-LABEL: func.func @three
// CHECK-SAME: (%[[X:[^:]*]]: tensor<8x64xf32>, %[[WA:[^:]*]]: tensor<32x64xf32>, %[[WB:[^:]*]]: tensor<16x64xf32>, %[[WC:[^:]*]]: tensor<8x64xf32>)
// CHECK-NEXT: %[[W:.*]] = tensor.concat dim(0) %[[WC]], %[[WA]], %[[WB]] : (tensor<8x64xf32>, tensor<32x64xf32>, tensor<16x64xf32>) -> tensor<56x64xf32>
// CHECK-NEXT: %[[Y:.*]] = mla.linear %[[X]], %[[W]] : tensor<8x64xf32>, tensor<56x64xf32> -> tensor<8x56xf32>
// CHECK-NEXT: %[[C:.*]] = tensor.extract_slice %[[Y]][0, 0] [8, 8] [1, 1] : tensor<8x56xf32> to tensor<8x8xf32>
// CHECK-NEXT: %[[A:.*]] = tensor.extract_slice %[[Y]][0, 8] [8, 32] [1, 1] : tensor<8x56xf32> to tensor<8x32xf32>
// CHECK-NEXT: %[[B:.*]] = tensor.extract_slice %[[Y]][0, 40] [8, 16] [1, 1] : tensor<8x56xf32> to tensor<8x16xf32>
// CHECK-NEXT: return %[[A]], %[[B]], %[[C]]
// CHECK-NOT: mla.linear
func.func @three(%x: tensor<8x64xf32>, %wa: tensor<32x64xf32>, %wb: tensor<16x64xf32>, %wc: tensor<8x64xf32>)
    -> (tensor<8x32xf32>, tensor<8x16xf32>, tensor<8x8xf32>) {
  %c = mla.linear %x, %wc : tensor<8x64xf32>, tensor<8x64xf32> -> tensor<8x8xf32>
  %a = mla.linear %x, %wa : tensor<8x64xf32>, tensor<32x64xf32> -> tensor<8x32xf32>
  %b = mla.linear %x, %wb : tensor<8x64xf32>, tensor<16x64xf32> -> tensor<8x16xf32>
  return %a, %b, %c : tensor<8x32xf32>, tensor<8x16xf32>, tensor<8x8xf32>
}

// -----

// The input is computed in the block and the linears are interleaved with
// other ops, including a use of the first result before the second linear:
// the fused ops go right after the input's definition, before that use, so
// every slice dominates every use. A linear of another input stays where it
// is.
// CHECK-LABEL: func.func @interleaved
// CHECK-SAME: (%[[A:[^:]*]]: tensor<8x64xbf16>, %[[G:[^:]*]]: tensor<64xbf16>, %[[W1:[^:]*]]: tensor<32x64xbf16>, %[[W2:[^:]*]]: tensor<16x64xbf16>, %[[WO:[^:]*]]: tensor<16x64xbf16>)
// CHECK-NEXT: %[[N:.*]] = mla.rms_norm %[[A]], %[[G]]
// CHECK-NEXT: %[[W:.*]] = tensor.concat dim(0) %[[W1]], %[[W2]] : (tensor<32x64xbf16>, tensor<16x64xbf16>) -> tensor<48x64xbf16>
// CHECK-NEXT: %[[Y:.*]] = mla.linear %[[N]], %[[W]] : tensor<8x64xbf16>, tensor<48x64xbf16> -> tensor<8x48xbf16>
// CHECK-NEXT: %[[P1:.*]] = tensor.extract_slice %[[Y]][0, 0] [8, 32] [1, 1]
// CHECK-NEXT: %[[P2:.*]] = tensor.extract_slice %[[Y]][0, 32] [8, 16] [1, 1]
// CHECK-NEXT: %[[U:.*]] = arith.addf %[[P1]], %[[P1]] : tensor<8x32xbf16>
// CHECK-NEXT: %[[O:.*]] = mla.linear %[[A]], %[[WO]] : tensor<8x64xbf16>, tensor<16x64xbf16> -> tensor<8x16xbf16>
// CHECK-NEXT: %[[V:.*]] = arith.mulf %[[P2]], %[[O]] : tensor<8x16xbf16>
// CHECK-NEXT: return %[[U]], %[[V]]
// CHECK-NOT: mla.linear
func.func @interleaved(%a: tensor<8x64xbf16>, %g: tensor<64xbf16>, %w1: tensor<32x64xbf16>,
                       %w2: tensor<16x64xbf16>, %wo: tensor<16x64xbf16>)
    -> (tensor<8x32xbf16>, tensor<8x16xbf16>) {
  %n = mla.rms_norm %a, %g : tensor<8x64xbf16>, tensor<64xbf16>
  %p1 = mla.linear %n, %w1 : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  %u = arith.addf %p1, %p1 : tensor<8x32xbf16>
  %o = mla.linear %a, %wo : tensor<8x64xbf16>, tensor<16x64xbf16> -> tensor<8x16xbf16>
  %p2 = mla.linear %n, %w2 : tensor<8x64xbf16>, tensor<16x64xbf16> -> tensor<8x16xbf16>
  %v = arith.mulf %p2, %o : tensor<8x16xbf16>
  return %u, %v : tensor<8x32xbf16>, tensor<8x16xbf16>
}

// -----

// Two linears inside one branch fuse there: grouping is per block, whatever
// the block.
// CHECK-LABEL: func.func @in_branch
// CHECK-SAME: (%{{[^:]*}}: i1, %[[X:[^:]*]]: tensor<8x64xbf16>, %[[W1:[^:]*]]: tensor<32x64xbf16>, %[[W2:[^:]*]]: tensor<16x64xbf16>)
// CHECK: scf.if
// CHECK-NEXT: %[[W:.*]] = tensor.concat dim(0) %[[W1]], %[[W2]]
// CHECK-NEXT: %[[Y:.*]] = mla.linear %[[X]], %[[W]] : tensor<8x64xbf16>, tensor<48x64xbf16> -> tensor<8x48xbf16>
// CHECK-NEXT: %[[P1:.*]] = tensor.extract_slice %[[Y]][0, 0] [8, 32] [1, 1]
// CHECK-NEXT: %[[P2:.*]] = tensor.extract_slice %[[Y]][0, 32] [8, 16] [1, 1]
// CHECK-NEXT: scf.yield %[[P1]], %[[P2]]
// CHECK: else
// CHECK-NOT: mla.linear
func.func @in_branch(%c: i1, %x: tensor<8x64xbf16>, %w1: tensor<32x64xbf16>, %w2: tensor<16x64xbf16>)
    -> (tensor<8x32xbf16>, tensor<8x16xbf16>) {
  %r:2 = scf.if %c -> (tensor<8x32xbf16>, tensor<8x16xbf16>) {
    %p1 = mla.linear %x, %w1 : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
    %p2 = mla.linear %x, %w2 : tensor<8x64xbf16>, tensor<16x64xbf16> -> tensor<8x16xbf16>
    scf.yield %p1, %p2 : tensor<8x32xbf16>, tensor<8x16xbf16>
  } else {
    %e1 = tensor.empty() : tensor<8x32xbf16>
    %e2 = tensor.empty() : tensor<8x16xbf16>
    scf.yield %e1, %e2 : tensor<8x32xbf16>, tensor<8x16xbf16>
  }
  return %r#0, %r#1 : tensor<8x32xbf16>, tensor<8x16xbf16>
}

// -----

// One linear has an addend (its epilogue is its own): the other two fuse,
// the one with the addend stays.
// CHECK-LABEL: func.func @addend_excluded
// CHECK-SAME: (%[[X:[^:]*]]: tensor<8x64xbf16>, %[[W1:[^:]*]]: tensor<32x64xbf16>, %[[W2:[^:]*]]: tensor<32x64xbf16>, %[[W3:[^:]*]]: tensor<16x64xbf16>, %[[R:[^:]*]]: tensor<8x32xbf16>)
// CHECK-NEXT: %[[P1:.*]] = mla.linear %[[X]], %[[W1]] addend(%[[R]] : tensor<8x32xbf16>)
// CHECK-NEXT: %[[W:.*]] = tensor.concat dim(0) %[[W2]], %[[W3]] : (tensor<32x64xbf16>, tensor<16x64xbf16>) -> tensor<48x64xbf16>
// CHECK-NEXT: %[[Y:.*]] = mla.linear %[[X]], %[[W]] : tensor<8x64xbf16>, tensor<48x64xbf16> -> tensor<8x48xbf16>
// CHECK-NEXT: %[[P2:.*]] = tensor.extract_slice %[[Y]][0, 0] [8, 32] [1, 1]
// CHECK-NEXT: %[[P3:.*]] = tensor.extract_slice %[[Y]][0, 32] [8, 16] [1, 1]
// CHECK-NEXT: return %[[P1]], %[[P2]], %[[P3]]
func.func @addend_excluded(%x: tensor<8x64xbf16>, %w1: tensor<32x64xbf16>, %w2: tensor<32x64xbf16>,
                           %w3: tensor<16x64xbf16>, %r: tensor<8x32xbf16>)
    -> (tensor<8x32xbf16>, tensor<8x32xbf16>, tensor<8x16xbf16>) {
  %p1 = mla.linear %x, %w1 addend(%r : tensor<8x32xbf16>) : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  %p2 = mla.linear %x, %w2 : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  %p3 = mla.linear %x, %w3 : tensor<8x64xbf16>, tensor<16x64xbf16> -> tensor<8x16xbf16>
  return %p1, %p2, %p3 : tensor<8x32xbf16>, tensor<8x32xbf16>, tensor<8x16xbf16>
}

// -----

// Negative: with an addend on one of two linears only one is left.
// CHECK-LABEL: func.func @addend_pair
// CHECK-NEXT: mla.linear %arg0, %arg1 addend(%arg3 : tensor<8x32xbf16>)
// CHECK-NEXT: mla.linear %arg0, %arg2 :
// CHECK-NEXT: return
// CHECK-NOT: tensor.concat
func.func @addend_pair(%x: tensor<8x64xbf16>, %w1: tensor<32x64xbf16>, %w2: tensor<16x64xbf16>,
                       %r: tensor<8x32xbf16>) -> (tensor<8x32xbf16>, tensor<8x16xbf16>) {
  %p1 = mla.linear %x, %w1 addend(%r : tensor<8x32xbf16>) : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  %p2 = mla.linear %x, %w2 : tensor<8x64xbf16>, tensor<16x64xbf16> -> tensor<8x16xbf16>
  return %p1, %p2 : tensor<8x32xbf16>, tensor<8x16xbf16>
}

// -----

// Negative: different inputs.
// CHECK-LABEL: func.func @different_inputs
// CHECK-NEXT: mla.linear %arg0, %arg2 :
// CHECK-NEXT: mla.linear %arg1, %arg3 :
// CHECK-NEXT: return
// CHECK-NOT: tensor.concat
func.func @different_inputs(%x: tensor<8x64xbf16>, %z: tensor<8x64xbf16>, %w1: tensor<32x64xbf16>,
                            %w2: tensor<16x64xbf16>) -> (tensor<8x32xbf16>, tensor<8x16xbf16>) {
  %p1 = mla.linear %x, %w1 : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  %p2 = mla.linear %z, %w2 : tensor<8x64xbf16>, tensor<16x64xbf16> -> tensor<8x16xbf16>
  return %p1, %p2 : tensor<8x32xbf16>, tensor<8x16xbf16>
}

// -----

// Negative: weights computed in the function (an arith op, tensor.empty)
// would be concatenated every step; with one argument weight left there is
// nothing to fuse.
// CHECK-LABEL: func.func @computed_weights
// CHECK-NEXT: %[[NEG:.*]] = arith.negf %arg1
// CHECK-NEXT: %[[E:.*]] = tensor.empty() : tensor<16x64xbf16>
// CHECK-NEXT: mla.linear %arg0, %[[NEG]] :
// CHECK-NEXT: mla.linear %arg0, %[[E]] :
// CHECK-NEXT: mla.linear %arg0, %arg2 :
// CHECK-NEXT: return
// CHECK-NOT: tensor.concat
func.func @computed_weights(%x: tensor<8x64xbf16>, %w1: tensor<32x64xbf16>, %w3: tensor<8x64xbf16>)
    -> (tensor<8x32xbf16>, tensor<8x16xbf16>, tensor<8x8xbf16>) {
  %neg = arith.negf %w1 : tensor<32x64xbf16>
  %e = tensor.empty() : tensor<16x64xbf16>
  %p1 = mla.linear %x, %neg : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  %p2 = mla.linear %x, %e : tensor<8x64xbf16>, tensor<16x64xbf16> -> tensor<8x16xbf16>
  %p3 = mla.linear %x, %w3 : tensor<8x64xbf16>, tensor<8x64xbf16> -> tensor<8x8xbf16>
  return %p1, %p2, %p3 : tensor<8x32xbf16>, tensor<8x16xbf16>, tensor<8x8xbf16>
}

// -----

// Negative: weights that are arguments of a loop body, not of the function,
// change between iterations.
// CHECK-LABEL: func.func @loop_carried_weights
// CHECK: scf.for
// CHECK-NEXT: mla.linear %arg0, %{{.*}} :
// CHECK-NEXT: mla.linear %arg0, %{{.*}} :
// CHECK-NOT: tensor.concat
func.func @loop_carried_weights(%x: tensor<8x64xbf16>, %w1: tensor<16x64xbf16>, %w2: tensor<16x64xbf16>,
                                %n: index) -> tensor<8x16xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %acc0 = tensor.empty() : tensor<8x16xbf16>
  %r:3 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %w1, %b = %w2, %acc = %acc0)
      -> (tensor<16x64xbf16>, tensor<16x64xbf16>, tensor<8x16xbf16>) {
    %p1 = mla.linear %x, %a : tensor<8x64xbf16>, tensor<16x64xbf16> -> tensor<8x16xbf16>
    %p2 = mla.linear %x, %b : tensor<8x64xbf16>, tensor<16x64xbf16> -> tensor<8x16xbf16>
    %s = arith.addf %p1, %p2 : tensor<8x16xbf16>
    scf.yield %b, %a, %s : tensor<16x64xbf16>, tensor<16x64xbf16>, tensor<8x16xbf16>
  }
  return %r#2 : tensor<8x16xbf16>
}

// -----

// Negative: different result element types (one f32 result, one bf16), and
// different weight element types: the fused op has one of each.
// CHECK-LABEL: func.func @different_element_types
// CHECK-NEXT: mla.linear %arg0, %arg1 : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xf32>
// CHECK-NEXT: mla.linear %arg0, %arg2 : tensor<8x64xbf16>, tensor<16x64xbf16> -> tensor<8x16xbf16>
// CHECK-NEXT: mla.linear %arg0, %arg3 : tensor<8x64xbf16>, tensor<8x64xf16> -> tensor<8x8xbf16>
// CHECK-NEXT: return
// CHECK-NOT: tensor.concat
func.func @different_element_types(%x: tensor<8x64xbf16>, %w1: tensor<32x64xbf16>, %w2: tensor<16x64xbf16>,
                                   %w3: tensor<8x64xf16>)
    -> (tensor<8x32xf32>, tensor<8x16xbf16>, tensor<8x8xbf16>) {
  %p1 = mla.linear %x, %w1 : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xf32>
  %p2 = mla.linear %x, %w2 : tensor<8x64xbf16>, tensor<16x64xbf16> -> tensor<8x16xbf16>
  %p3 = mla.linear %x, %w3 : tensor<8x64xbf16>, tensor<8x64xf16> -> tensor<8x8xbf16>
  return %p1, %p2, %p3 : tensor<8x32xf32>, tensor<8x16xbf16>, tensor<8x8xbf16>
}

// -----

// Negative: a single linear has nothing to fuse with.
// CHECK-LABEL: func.func @single
// CHECK-NEXT: mla.linear %arg0, %arg1 :
// CHECK-NEXT: return
// CHECK-NOT: tensor.concat
func.func @single(%x: tensor<8x64xbf16>, %w: tensor<32x64xbf16>) -> tensor<8x32xbf16> {
  %p = mla.linear %x, %w : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  return %p : tensor<8x32xbf16>
}

// -----

// Negative: one linear outside and one inside an scf.if: a GEMM never moves
// into or out of a region.
// CHECK-LABEL: func.func @different_blocks
// CHECK-NEXT: mla.linear %arg1, %arg2 :
// CHECK-NEXT: scf.if
// CHECK-NEXT: mla.linear %arg1, %arg3 :
// CHECK-NOT: tensor.concat
func.func @different_blocks(%c: i1, %x: tensor<8x64xbf16>, %w1: tensor<32x64xbf16>, %w2: tensor<16x64xbf16>)
    -> (tensor<8x32xbf16>, tensor<8x16xbf16>) {
  %p1 = mla.linear %x, %w1 : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  %r = scf.if %c -> tensor<8x16xbf16> {
    %p2 = mla.linear %x, %w2 : tensor<8x64xbf16>, tensor<16x64xbf16> -> tensor<8x16xbf16>
    scf.yield %p2 : tensor<8x16xbf16>
  } else {
    %e = tensor.empty() : tensor<8x16xbf16>
    scf.yield %e : tensor<8x16xbf16>
  }
  return %p1, %r : tensor<8x32xbf16>, tensor<8x16xbf16>
}

// -----

// Negative: a dynamic token count leaves the fused and sliced shapes unknown.
// CHECK-LABEL: func.func @dynamic
// CHECK-NEXT: mla.linear %arg0, %arg1 : tensor<?x64xbf16>
// CHECK-NEXT: mla.linear %arg0, %arg2 : tensor<?x64xbf16>
// CHECK-NEXT: return
// CHECK-NOT: tensor.concat
func.func @dynamic(%x: tensor<?x64xbf16>, %w1: tensor<32x64xbf16>, %w2: tensor<16x64xbf16>)
    -> (tensor<?x32xbf16>, tensor<?x16xbf16>) {
  %p1 = mla.linear %x, %w1 : tensor<?x64xbf16>, tensor<32x64xbf16> -> tensor<?x32xbf16>
  %p2 = mla.linear %x, %w2 : tensor<?x64xbf16>, tensor<16x64xbf16> -> tensor<?x16xbf16>
  return %p1, %p2 : tensor<?x32xbf16>, tensor<?x16xbf16>
}

// -----

// Negative: a weight with a dynamic row count leaves the slice offsets
// unknown.
// CHECK-LABEL: func.func @dynamic_weight
// CHECK-NEXT: mla.linear %arg0, %arg1 : tensor<8x64xbf16>, tensor<?x64xbf16>
// CHECK-NEXT: mla.linear %arg0, %arg2 : tensor<8x64xbf16>, tensor<16x64xbf16>
// CHECK-NEXT: return
// CHECK-NOT: tensor.concat
func.func @dynamic_weight(%x: tensor<8x64xbf16>, %w1: tensor<?x64xbf16>, %w2: tensor<16x64xbf16>)
    -> (tensor<8x?xbf16>, tensor<8x16xbf16>) {
  %p1 = mla.linear %x, %w1 : tensor<8x64xbf16>, tensor<?x64xbf16> -> tensor<8x?xbf16>
  %p2 = mla.linear %x, %w2 : tensor<8x64xbf16>, tensor<16x64xbf16> -> tensor<8x16xbf16>
  return %p1, %p2 : tensor<8x?xbf16>, tensor<8x16xbf16>
}
