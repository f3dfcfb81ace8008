// RUN: mla-opt %s -split-input-file -allow-unregistered-dialect -mla-fuse-rope-kv-update | FileCheck %s
// RUN: mla-opt %s -split-input-file -allow-unregistered-dialect -mla-fuse-rope-kv-update=allow-k-pe-result=false | FileCheck %s --check-prefix=NOK
// RUN: mla-opt %s -split-input-file -allow-unregistered-dialect -mla-fuse-rope-kv-update=fuse-q=false | FileCheck %s --check-prefix=NOQ

// The k rope disappears into the update, which now takes the unrotated k_pe.
// CHECK-LABEL: func.func @k_only
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[POS:[^:]*]]: tensor<4xi64>, %[[CS:[^:]*]]: tensor<4096x64xf32>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x64xbf16>)
// CHECK-NEXT: mla.rope_kv_cache_update neox %[[C]], %[[P]], %[[S]] into %[[CACHE]] positions(%[[POS]], %[[CS]]) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>{{$}}
// CHECK-NEXT: return
// CHECK-NOT: mla.rope
// CHECK-NOT: mla.kv_cache_update
// NOK-LABEL: func.func @k_only
// NOK-NEXT: mla.rope_kv_cache_update
func.func @k_only(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %pos: tensor<4xi64>,
                  %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>) {
  %k = mla.rope neox %k_pe, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  mla.kv_cache_update %kv_c, %k, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  return
}

// -----

// A q rope before the update with the same positions, table and style is
// folded in; its users read q_pe_out. The fused op sits where the update was:
// after the attention that reads the cache before the write.
// CHECK-LABEL: func.func @q_before
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[QP:[^:]*]]: tensor<4x16x64xbf16>, %[[POS:[^:]*]]: tensor<4xi64>, %[[CS:[^:]*]]: tensor<4096x64xf32>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x64xbf16>, %[[QL:[^:]*]]: tensor<4x16x576xbf16>, %[[BT:[^:]*]]: tensor<4x8xi32>, %[[SL:[^:]*]]: tensor<4xi32>)
// CHECK-NEXT: %[[A:.*]] = mla.decode_attention %[[QL]], %[[CACHE]]
// CHECK-NEXT: %[[QR:.*]] = mla.rope_kv_cache_update gptj %[[C]], %[[P]], %[[S]] into %[[CACHE]] positions(%[[POS]], %[[CS]]) rotate_q(%[[QP]] : tensor<4x16x64xbf16>) : {{.*}} rotated_q tensor<4x16x64xbf16>{{$}}
// CHECK-NEXT: return %[[A]], %[[QR]]
// CHECK-NOT: mla.rope
// NOQ-LABEL: func.func @q_before
// NOQ: mla.rope gptj %{{.*}} : tensor<4x16x64xbf16>
// NOQ: mla.rope_kv_cache_update gptj %{{.*}} positions(%{{.*}}) : {{.*}}, tensor<4096x64xf32>{{$}}
func.func @q_before(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %q_pe: tensor<4x16x64xbf16>,
                    %pos: tensor<4xi64>, %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>,
                    %cache: !mla.kv_cache<?x64xbf16>, %ql: tensor<4x16x576xbf16>, %bt: tensor<4x8xi32>,
                    %sl: tensor<4xi32>) -> (tensor<4x16x512xbf16>, tensor<4x16x64xbf16>) {
  %q = mla.rope gptj %q_pe, %pos, %cs : tensor<4x16x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  %k = mla.rope gptj %k_pe, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  %a = mla.decode_attention %ql, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  mla.kv_cache_update %kv_c, %k, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  return %a, %q : tensor<4x16x512xbf16>, tensor<4x16x64xbf16>
}

// -----

// A q rope after the update whose operands exist at the update is folded too.
// CHECK-LABEL: func.func @q_after
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[QP:[^:]*]]: tensor<4x16x64xbf16>, %[[POS:[^:]*]]: tensor<4xi64>, %[[CS:[^:]*]]: tensor<4096x64xf32>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x64xbf16>)
// CHECK-NEXT: %[[QR:.*]] = mla.rope_kv_cache_update neox %[[C]], %[[P]], %[[S]] into %[[CACHE]] positions(%[[POS]], %[[CS]]) rotate_q(%[[QP]] : tensor<4x16x64xbf16>) :
// CHECK-NEXT: return %[[QR]]
func.func @q_after(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %q_pe: tensor<4x16x64xbf16>,
                   %pos: tensor<4xi64>, %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>,
                   %cache: !mla.kv_cache<?x64xbf16>) -> tensor<4x16x64xbf16> {
  %k = mla.rope neox %k_pe, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  mla.kv_cache_update %kv_c, %k, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %q = mla.rope neox %q_pe, %pos, %cs : tensor<4x16x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  return %q : tensor<4x16x64xbf16>
}

// -----

// A q rope after the update whose input is computed after it (here from a
// cache read that must stay after the write) cannot be folded.
// CHECK-LABEL: func.func @q_after_input_later
// CHECK: mla.rope_kv_cache_update neox %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}} positions(%{{.*}}, %{{.*}}) : {{.*}}, tensor<4096x64xf32>{{$}}
// CHECK-NEXT: %[[A:.*]] = mla.decode_attention
// CHECK-NEXT: %[[SL:.*]] = tensor.extract_slice %[[A]]
// CHECK-NEXT: %[[QR:.*]] = mla.rope neox %[[SL]]
// CHECK-NEXT: return %[[QR]]
func.func @q_after_input_later(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %pos: tensor<4xi64>,
                               %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>,
                               %ql: tensor<4x16x576xbf16>, %bt: tensor<4x8xi32>, %sl: tensor<4xi32>)
    -> tensor<4x16x64xbf16> {
  %k = mla.rope neox %k_pe, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  mla.kv_cache_update %kv_c, %k, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %a = mla.decode_attention %ql, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  %x = tensor.extract_slice %a[0, 0, 0] [4, 16, 64] [1, 1, 1] : tensor<4x16x512xbf16> to tensor<4x16x64xbf16>
  %q = mla.rope neox %x, %pos, %cs : tensor<4x16x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  return %q : tensor<4x16x64xbf16>
}

// -----

// A q rope before the update with a user before the update cannot be replaced
// by a result of the fused op; the k rope is still fused.
// CHECK-LABEL: func.func @q_used_before_update
// CHECK: %[[QR:.*]] = mla.rope neox
// CHECK-NEXT: %[[A:.*]] = "test.use"(%[[QR]])
// CHECK-NEXT: mla.rope_kv_cache_update neox %{{.*}} positions(%{{.*}}, %{{.*}}) : {{.*}}, tensor<4096x64xf32>{{$}}
// CHECK-NEXT: return %[[A]], %[[QR]]
func.func @q_used_before_update(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %q_pe: tensor<4x16x64xbf16>,
                                %pos: tensor<4xi64>, %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>,
                                %cache: !mla.kv_cache<?x64xbf16> {mla.noalias})
    -> (i1, tensor<4x16x64xbf16>) {
  %k = mla.rope neox %k_pe, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  %q = mla.rope neox %q_pe, %pos, %cs : tensor<4x16x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  %a = "test.use"(%q) : (tensor<4x16x64xbf16>) -> i1
  mla.kv_cache_update %kv_c, %k, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  return %a, %q : i1, tensor<4x16x64xbf16>
}

// -----

// q ropes with other positions, another table or the other style are not
// folded; only the matching one is (and the k rope, of rank 2, is never
// taken for a q rope).
// CHECK-LABEL: func.func @q_mismatch
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[QP:[^:]*]]: tensor<4x16x64xbf16>, %[[POS:[^:]*]]: tensor<4xi64>, %[[POS2:[^:]*]]: tensor<4xi64>, %[[CS:[^:]*]]: tensor<4096x64xf32>, %[[CS2:[^:]*]]: tensor<4096x64xf32>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x64xbf16>)
// CHECK-NEXT: %[[Q1:.*]] = mla.rope neox %[[QP]], %[[POS2]], %[[CS]]
// CHECK-NEXT: %[[Q2:.*]] = mla.rope neox %[[QP]], %[[POS]], %[[CS2]]
// CHECK-NEXT: %[[Q3:.*]] = mla.rope gptj %[[QP]], %[[POS]], %[[CS]]
// CHECK-NEXT: %[[Q4:.*]] = mla.rope_kv_cache_update neox %[[C]], %[[P]], %[[S]] into %[[CACHE]] positions(%[[POS]], %[[CS]]) rotate_q(%[[QP]] : tensor<4x16x64xbf16>)
// CHECK-NEXT: return %[[Q1]], %[[Q2]], %[[Q3]], %[[Q4]]
func.func @q_mismatch(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %q_pe: tensor<4x16x64xbf16>,
                      %pos: tensor<4xi64>, %pos2: tensor<4xi64>, %cs: tensor<4096x64xf32>, %cs2: tensor<4096x64xf32>,
                      %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>)
    -> (tensor<4x16x64xbf16>, tensor<4x16x64xbf16>, tensor<4x16x64xbf16>, tensor<4x16x64xbf16>) {
  %q1 = mla.rope neox %q_pe, %pos2, %cs : tensor<4x16x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  %q2 = mla.rope neox %q_pe, %pos, %cs2 : tensor<4x16x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  %q3 = mla.rope gptj %q_pe, %pos, %cs : tensor<4x16x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  %k = mla.rope neox %k_pe, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  mla.kv_cache_update %kv_c, %k, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %q4 = mla.rope neox %q_pe, %pos, %cs : tensor<4x16x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  return %q1, %q2, %q3, %q4 : tensor<4x16x64xbf16>, tensor<4x16x64xbf16>, tensor<4x16x64xbf16>, tensor<4x16x64xbf16>
}

// -----

// Two updates into two caches, each k rope with the same positions: each is
// fused on its own and neither takes the other's rope for a q rope. Updates
// are visited in block order, so the first one takes the (single) q rope.
// CHECK-LABEL: func.func @two_updates
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P1:[^:]*]]: tensor<4x64xbf16>, %[[P2:[^:]*]]: tensor<4x64xbf16>, %[[QP:[^:]*]]: tensor<4x16x64xbf16>, %[[POS:[^:]*]]: tensor<4xi64>, %[[CS:[^:]*]]: tensor<4096x64xf32>, %[[S:[^:]*]]: tensor<4xi64>, %[[C1:[^:]*]]: !mla.kv_cache<?x64xbf16>, %[[C2:[^:]*]]: !mla.kv_cache<?x64xbf16>)
// CHECK-NEXT: %[[QR:.*]] = mla.rope_kv_cache_update neox %[[C]], %[[P1]], %[[S]] into %[[C1]] positions(%[[POS]], %[[CS]]) rotate_q(%[[QP]] : tensor<4x16x64xbf16>)
// CHECK-NEXT: mla.rope_kv_cache_update neox %[[C]], %[[P2]], %[[S]] into %[[C2]] positions(%[[POS]], %[[CS]]) : {{.*}}, tensor<4096x64xf32>{{$}}
// CHECK-NEXT: return %[[QR]]
func.func @two_updates(%kv_c: tensor<4x512xbf16>, %k_pe1: tensor<4x64xbf16>, %k_pe2: tensor<4x64xbf16>,
                       %q_pe: tensor<4x16x64xbf16>, %pos: tensor<4xi64>, %cs: tensor<4096x64xf32>,
                       %slots: tensor<4xi64>, %c1: !mla.kv_cache<?x64xbf16>, %c2: !mla.kv_cache<?x64xbf16>)
    -> tensor<4x16x64xbf16> {
  %k1 = mla.rope neox %k_pe1, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  %k2 = mla.rope neox %k_pe2, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  %q = mla.rope neox %q_pe, %pos, %cs : tensor<4x16x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  mla.kv_cache_update %kv_c, %k1, %slots into %c1
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  mla.kv_cache_update %kv_c, %k2, %slots into %c2
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  return %q : tensor<4x16x64xbf16>
}

// -----

// Other users of the rotated k_pe after the update read k_pe_out. With
// allow-k-pe-result=false nothing changes.
// CHECK-LABEL: func.func @k_other_users
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4x512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[POS:[^:]*]]: tensor<4xi64>, %[[CS:[^:]*]]: tensor<4096x64xf32>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x64xbf16>, %[[WUK:[^:]*]]: tensor<16x128x512xbf16>, %[[WUV:[^:]*]]: tensor<16x512x128xbf16>)
// CHECK-NEXT: %[[KR:.*]] = mla.rope_kv_cache_update neox %[[C]], %[[P]], %[[S]] into %[[CACHE]] positions(%[[POS]], %[[CS]]) : {{.*}} rotated_k tensor<4x64xbf16>{{$}}
// CHECK-NEXT: %{{.*}}, %[[V:.*]] = mla.decompress_kv %[[C]], %[[KR]], %[[WUK]], %[[WUV]]
// CHECK-NEXT: return %[[V]], %[[KR]]
// CHECK-NOT: mla.rope
// NOK-LABEL: func.func @k_other_users
// NOK-NEXT: %[[KR:.*]] = mla.rope neox
// NOK-NEXT: mla.kv_cache_update %{{.*}}, %[[KR]], %{{.*}} into
// NOK-NEXT: mla.decompress_kv %{{.*}}, %[[KR]]
// NOK-NOT: mla.rope_kv_cache_update
func.func @k_other_users(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %pos: tensor<4xi64>,
                         %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>,
                         %w_uk: tensor<16x128x512xbf16>, %w_uv: tensor<16x512x128xbf16>)
    -> (tensor<4x16x128xbf16>, tensor<4x64xbf16>) {
  %k = mla.rope neox %k_pe, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  mla.kv_cache_update %kv_c, %k, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %kk, %v = mla.decompress_kv %kv_c, %k, %w_uk, %w_uv
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16>
      -> tensor<4x16x192xbf16>, tensor<4x16x128xbf16>
  return %v, %k : tensor<4x16x128xbf16>, tensor<4x64xbf16>
}

// -----

// A user of the rotated k_pe before the update cannot read a result of the
// fused op, which sits at the update: not fused.
// CHECK-LABEL: func.func @k_used_before_update
// CHECK-NEXT: %[[KR:.*]] = mla.rope neox
// CHECK-NEXT: mla.decompress_kv %{{.*}}, %[[KR]]
// CHECK-NEXT: mla.kv_cache_update %{{.*}}, %[[KR]], %{{.*}} into
// CHECK-NOT: mla.rope_kv_cache_update
// NOK-LABEL: func.func @k_used_before_update
// NOK-NEXT: mla.rope neox
// NOK-NEXT: mla.decompress_kv
// NOK-NEXT: mla.kv_cache_update
func.func @k_used_before_update(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %pos: tensor<4xi64>,
                                %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>,
                                %w_uk: tensor<16x128x512xbf16>, %w_uv: tensor<16x512x128xbf16>)
    -> tensor<4x16x128xbf16> {
  %k = mla.rope neox %k_pe, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  %kk, %v = mla.decompress_kv %kv_c, %k, %w_uk, %w_uv
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16>
      -> tensor<4x16x192xbf16>, tensor<4x16x128xbf16>
  mla.kv_cache_update %kv_c, %k, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  return %v : tensor<4x16x128xbf16>
}

// -----

// A quantising update into a per-tensor fp8 cache keeps its scale.
// CHECK-LABEL: func.func @fp8_scale
// CHECK-SAME: %[[SC:[^:]*]]: tensor<f32>)
// CHECK-NEXT: mla.rope_kv_cache_update neox {{.*}} positions(%{{.*}}, %{{.*}}) scale %[[SC]] : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>
func.func @fp8_scale(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %pos: tensor<4xi64>,
                     %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>,
                     %cache: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %s: tensor<f32>) {
  %k = mla.rope neox %k_pe, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  mla.kv_cache_update %kv_c, %k, %slots into %cache scale %s
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>
  return
}

// -----

// k_pe that is not a rope result: nothing to fuse.
// CHECK-LABEL: func.func @no_rope
// CHECK-NEXT: mla.kv_cache_update
// CHECK-NEXT: return
func.func @no_rope(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                   %cache: !mla.kv_cache<?x64xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  return
}

// -----

// A rope feeding something else (here its quantisation) is not the update's
// k_pe: nothing to fuse.
// CHECK-LABEL: func.func @rope_feeds_quantize
// CHECK-NEXT: %[[KR:.*]] = mla.rope neox
// CHECK-NEXT: %[[K8:.*]] = mla.quantize %[[KR]]
// CHECK-NEXT: %[[C8:.*]] = mla.quantize
// CHECK-NEXT: mla.kv_cache_update %[[C8]], %[[K8]], %{{.*}} into
// CHECK-NOT: mla.rope_kv_cache_update
func.func @rope_feeds_quantize(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %pos: tensor<4xi64>,
                               %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>,
                               %cache: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %s: tensor<f32>) {
  %k = mla.rope neox %k_pe, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  %k8 = mla.quantize %k, %s : tensor<4x64xbf16> -> tensor<4x64xf8E4M3FN>
  %c8 = mla.quantize %kv_c, %s : tensor<4x512xbf16> -> tensor<4x512xf8E4M3FN>
  mla.kv_cache_update %c8, %k8, %slots into %cache
      : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>
  return
}

// -----

// The rope outside an scf.if whose region holds the update: another block,
// not fused.
// CHECK-LABEL: func.func @rope_outside_if
// CHECK-NEXT: %[[KR:.*]] = mla.rope neox
// CHECK-NEXT: scf.if
// CHECK-NEXT: mla.kv_cache_update %{{.*}}, %[[KR]], %{{.*}} into
// CHECK-NOT: mla.rope_kv_cache_update
func.func @rope_outside_if(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %pos: tensor<4xi64>,
                           %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>,
                           %cond: i1) {
  %k = mla.rope neox %k_pe, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  scf.if %cond {
    mla.kv_cache_update %kv_c, %k, %slots into %cache
        : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  }
  return
}

// -----

// The rope inside an scf.if, its result yielded: k_pe is the scf.if result,
// not a rope.
// CHECK-LABEL: func.func @rope_inside_if
// CHECK: %[[R:.*]] = scf.if
// CHECK: mla.rope neox
// CHECK: mla.kv_cache_update %{{.*}}, %[[R]], %{{.*}} into
// CHECK-NOT: mla.rope_kv_cache_update
func.func @rope_inside_if(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %pos: tensor<4xi64>,
                          %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>,
                          %cond: i1) {
  %r = scf.if %cond -> tensor<4x64xbf16> {
    %k = mla.rope neox %k_pe, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
    scf.yield %k : tensor<4x64xbf16>
  } else {
    scf.yield %k_pe : tensor<4x64xbf16>
  }
  mla.kv_cache_update %kv_c, %r, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  return
}

// -----

// Rope and update both inside one scf.for body: same block, fused there; the
// q rope outside the loop is in another block and stays.
// CHECK-LABEL: func.func @inside_loop
// CHECK: %[[QR:.*]] = mla.rope neox
// CHECK: scf.for
// CHECK-NEXT: mla.rope_kv_cache_update neox %{{.*}} positions(%{{.*}}, %{{.*}}) : {{.*}}, tensor<4096x64xf32>{{$}}
// CHECK-NEXT: }
// CHECK-NEXT: return %[[QR]]
func.func @inside_loop(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %q_pe: tensor<4x16x64xbf16>,
                       %pos: tensor<4xi64>, %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>,
                       %cache: !mla.kv_cache<?x64xbf16>, %n: index) -> tensor<4x16x64xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %q = mla.rope neox %q_pe, %pos, %cs : tensor<4x16x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  scf.for %i = %c0 to %n step %c1 {
    %k = mla.rope neox %k_pe, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
    mla.kv_cache_update %kv_c, %k, %slots into %cache
        : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  }
  return %q : tensor<4x16x64xbf16>
}
