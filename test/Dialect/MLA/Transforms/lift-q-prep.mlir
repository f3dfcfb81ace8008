// RUN: mla-opt %s -split-input-file -mla-lift-q-prep | FileCheck %s
// The rewritten IR prints, parses and verifies again.
// RUN: mla-opt %s -split-input-file -mla-lift-q-prep | mla-opt -split-input-file | FileCheck %s --check-prefix=ROUNDTRIP
// Identical preparations of two attentions merge after canonicalize + cse.
// RUN: mla-opt %s -split-input-file -mla-lift-q-prep -canonicalize -cse | FileCheck %s --check-prefix=CSE

// Static batch, no q_scale: slice q into nope/pe, absorb, concat, then the
// latent-form attention on the assembled bf16 query.
// CHECK-LABEL: func.func @static_batch
// CHECK-SAME: (%[[Q:.*]]: tensor<4x16x192xbf16>, %[[CACHE:.*]]: !mla.kv_cache<?x64xbf16>, %[[BT:.*]]: tensor<4x8xi32>, %[[SL:.*]]: tensor<4xi32>, %[[WUK:.*]]: tensor<16x128x512xbf16>)
// CHECK-NEXT: %[[NOPE:.*]] = tensor.extract_slice %[[Q]][0, 0, 0] [4, 16, 128] [1, 1, 1] : tensor<4x16x192xbf16> to tensor<4x16x128xbf16>
// CHECK-NEXT: %[[PE:.*]] = tensor.extract_slice %[[Q]][0, 0, 128] [4, 16, 64] [1, 1, 1] : tensor<4x16x192xbf16> to tensor<4x16x64xbf16>
// CHECK-NEXT: %[[LAT:.*]] = mla.q_absorb %[[NOPE]], %[[WUK]] : tensor<4x16x128xbf16>, tensor<16x128x512xbf16> -> tensor<4x16x512xbf16>
// CHECK-NEXT: %[[QL:.*]] = mla.q_concat %[[LAT]], %[[PE]] : tensor<4x16x512xbf16>, tensor<4x16x64xbf16> -> tensor<4x16x576xbf16>
// CHECK-NEXT: %[[OUT:.*]] = mla.decode_attention %[[QL]], %[[CACHE]][%[[BT]], %[[SL]]] softmax_scale = 1.250000e-01 : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>{{$}}
// CHECK-NEXT: return %[[OUT]]
// ROUNDTRIP-LABEL: func.func @static_batch
// ROUNDTRIP: mla.q_concat
// ROUNDTRIP: mla.decode_attention {{.*}} : tensor<4x16x576xbf16>,
func.func @static_batch(%q: tensor<4x16x192xbf16>, %cache: !mla.kv_cache<?x64xbf16>, %bt: tensor<4x8xi32>,
                        %sl: tensor<4xi32>, %w_uk: tensor<16x128x512xbf16>) -> tensor<4x16x512xbf16> {
  %o = mla.decode_attention %q, %cache[%bt, %sl] absorb(%w_uk : tensor<16x128x512xbf16>) softmax_scale = 0.125
      : tensor<4x16x192xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// Dynamic batch with q_scale and the log-sum-exp: the slices take the batch
// from tensor.dim, the query is quantised to fp8, the lse result survives and
// discardable attributes are kept.
// CHECK-LABEL: func.func @dynamic_batch_q_scale_lse
// CHECK-SAME: (%[[Q:.*]]: tensor<?x16x192xbf16>, %[[CACHE:.*]]: !mla.kv_cache<?x64xbf16>, %[[BT:.*]]: tensor<?x8xi32>, %[[SL:.*]]: tensor<?xi32>, %[[WUK:.*]]: tensor<16x128x512xbf16>, %[[QS:.*]]: tensor<f32>)
// CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[B:.*]] = tensor.dim %[[Q]], %[[C0]] : tensor<?x16x192xbf16>
// CHECK-NEXT: %[[NOPE:.*]] = tensor.extract_slice %[[Q]][0, 0, 0] [%[[B]], 16, 128] [1, 1, 1] : tensor<?x16x192xbf16> to tensor<?x16x128xbf16>
// CHECK-NEXT: %[[PE:.*]] = tensor.extract_slice %[[Q]][0, 0, 128] [%[[B]], 16, 64] [1, 1, 1] : tensor<?x16x192xbf16> to tensor<?x16x64xbf16>
// CHECK-NEXT: %[[LAT:.*]] = mla.q_absorb %[[NOPE]], %[[WUK]] : tensor<?x16x128xbf16>, tensor<16x128x512xbf16> -> tensor<?x16x512xbf16>
// CHECK-NEXT: %[[QL:.*]] = mla.q_concat %[[LAT]], %[[PE]] : tensor<?x16x512xbf16>, tensor<?x16x64xbf16> -> tensor<?x16x576xbf16>
// CHECK-NEXT: %[[Q8:.*]] = mla.quantize %[[QL]], %[[QS]] : tensor<?x16x576xbf16> -> tensor<?x16x576xf8E4M3FN>
// CHECK-NEXT: %[[OUT:.*]], %[[LSE:.*]] = mla.decode_attention %[[Q8]], %[[CACHE]][%[[BT]], %[[SL]]] softmax_scale = 1.250000e-01 {tag} : tensor<?x16x576xf8E4M3FN>, !mla.kv_cache<?x64xbf16>, tensor<?x8xi32>, tensor<?xi32> -> tensor<?x16x512xbf16>, tensor<?x16xf32>{{$}}
// CHECK-NEXT: return %[[OUT]], %[[LSE]]
// ROUNDTRIP-LABEL: func.func @dynamic_batch_q_scale_lse
// ROUNDTRIP: mla.quantize
// ROUNDTRIP: mla.decode_attention {{.*}} : tensor<?x16x576xf8E4M3FN>,
func.func @dynamic_batch_q_scale_lse(%q: tensor<?x16x192xbf16>, %cache: !mla.kv_cache<?x64xbf16>, %bt: tensor<?x8xi32>,
                                     %sl: tensor<?xi32>, %w_uk: tensor<16x128x512xbf16>, %qs: tensor<f32>)
    -> (tensor<?x16x512xbf16>, tensor<?x16xf32>) {
  %o, %lse = mla.decode_attention %q, %cache[%bt, %sl] absorb(%w_uk : tensor<16x128x512xbf16>) q_scale %qs softmax_scale = 0.125 {tag}
      : tensor<?x16x192xbf16>, !mla.kv_cache<?x64xbf16>, tensor<?x8xi32>, tensor<?xi32> -> tensor<?x16x512xbf16>, tensor<?x16xf32>
  return %o, %lse : tensor<?x16x512xbf16>, tensor<?x16xf32>
}

// -----

// Static batch with q_scale over a per-tensor fp8 cache: kv_scale stays on
// the attention, q_scale becomes the quantize op; f32 queries stay f32 until
// quantised.
// CHECK-LABEL: func.func @static_fp8_cache
// CHECK-SAME: (%[[Q:.*]]: tensor<2x16x192xf32>, %[[CACHE:.*]]: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %[[BT:.*]]: tensor<2x8xi32>, %[[SL:.*]]: tensor<2xi32>, %[[WUK:.*]]: tensor<16x128x512xbf16>, %[[KS:.*]]: tensor<f32>, %[[QS:.*]]: tensor<f32>)
// CHECK-NEXT: %[[NOPE:.*]] = tensor.extract_slice %[[Q]][0, 0, 0] [2, 16, 128] [1, 1, 1]
// CHECK-NEXT: %[[PE:.*]] = tensor.extract_slice %[[Q]][0, 0, 128] [2, 16, 64] [1, 1, 1]
// CHECK-NEXT: %[[LAT:.*]] = mla.q_absorb %[[NOPE]], %[[WUK]] : tensor<2x16x128xf32>, tensor<16x128x512xbf16> -> tensor<2x16x512xf32>
// CHECK-NEXT: %[[QL:.*]] = mla.q_concat %[[LAT]], %[[PE]] : tensor<2x16x512xf32>, tensor<2x16x64xf32> -> tensor<2x16x576xf32>
// CHECK-NEXT: %[[Q8:.*]] = mla.quantize %[[QL]], %[[QS]] : tensor<2x16x576xf32> -> tensor<2x16x576xf8E4M3FN>
// CHECK-NEXT: %[[OUT:.*]] = mla.decode_attention %[[Q8]], %[[CACHE]][%[[BT]], %[[SL]]] kv_scale %[[KS]] softmax_scale = 1.250000e-01 : tensor<2x16x576xf8E4M3FN>,
// CHECK-NEXT: return %[[OUT]]
func.func @static_fp8_cache(%q: tensor<2x16x192xf32>, %cache: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, %bt: tensor<2x8xi32>,
                            %sl: tensor<2xi32>, %w_uk: tensor<16x128x512xbf16>, %ks: tensor<f32>, %qs: tensor<f32>)
    -> tensor<2x16x512xf32> {
  %o = mla.decode_attention %q, %cache[%bt, %sl] kv_scale %ks absorb(%w_uk : tensor<16x128x512xbf16>) q_scale %qs softmax_scale = 0.125
      : tensor<2x16x192xf32>, !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, tensor<2x8xi32>, tensor<2xi32> -> tensor<2x16x512xf32>
  return %o : tensor<2x16x512xf32>
}

// -----

// The nope width is known only at run time: it is read from w_uk and is both
// the size of q_nope and the offset of q_pe.
// CHECK-LABEL: func.func @dynamic_nope_width
// CHECK-SAME: (%[[Q:.*]]: tensor<4x16x?xbf16>, %{{.*}}: !mla.kv_cache<?x64xbf16>, %{{.*}}: tensor<4x8xi32>, %{{.*}}: tensor<4xi32>, %[[WUK:.*]]: tensor<16x?x512xbf16>)
// CHECK-NEXT: %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT: %[[N:.*]] = tensor.dim %[[WUK]], %[[C1]]
// CHECK-NEXT: %[[NOPE:.*]] = tensor.extract_slice %[[Q]][0, 0, 0] [4, 16, %[[N]]] [1, 1, 1] : tensor<4x16x?xbf16> to tensor<4x16x?xbf16>
// CHECK-NEXT: %[[PE:.*]] = tensor.extract_slice %[[Q]][0, 0, %[[N]]] [4, 16, 64] [1, 1, 1] : tensor<4x16x?xbf16> to tensor<4x16x64xbf16>
// CHECK-NEXT: %[[LAT:.*]] = mla.q_absorb %[[NOPE]], %[[WUK]] : {{.*}} -> tensor<4x16x512xbf16>
// CHECK-NEXT: %[[QL:.*]] = mla.q_concat %[[LAT]], %[[PE]] : {{.*}} -> tensor<4x16x576xbf16>
// CHECK-NEXT: mla.decode_attention %[[QL]],
func.func @dynamic_nope_width(%q: tensor<4x16x?xbf16>, %cache: !mla.kv_cache<?x64xbf16>, %bt: tensor<4x8xi32>,
                              %sl: tensor<4xi32>, %w_uk: tensor<16x?x512xbf16>) -> tensor<4x16x512xbf16> {
  %o = mla.decode_attention %q, %cache[%bt, %sl] absorb(%w_uk : tensor<16x?x512xbf16>) softmax_scale = 0.125
      : tensor<4x16x?xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// Negative: an attention already in latent form is left unchanged.
// CHECK-LABEL: func.func @latent_form_unchanged
// CHECK-SAME: (%[[Q:.*]]: tensor<4x16x576xbf16>, %[[CACHE:.*]]: !mla.kv_cache<?x64xbf16>, %[[BT:.*]]: tensor<4x8xi32>, %[[SL:.*]]: tensor<4xi32>)
// CHECK-NOT: tensor.extract_slice
// CHECK-NOT: mla.q_absorb
// CHECK-NOT: mla.q_concat
// CHECK-NEXT: %[[OUT:.*]] = mla.decode_attention %[[Q]], %[[CACHE]][%[[BT]], %[[SL]]] softmax_scale = 1.250000e-01 :
// CHECK-NEXT: return %[[OUT]]
func.func @latent_form_unchanged(%q: tensor<4x16x576xbf16>, %cache: !mla.kv_cache<?x64xbf16>, %bt: tensor<4x8xi32>,
                                 %sl: tensor<4xi32>) -> tensor<4x16x512xbf16> {
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.125
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// Negative: an fp8 head query cannot feed mla.q_absorb; the absorbing op stays.
// CHECK-LABEL: func.func @fp8_head_query_unchanged
// CHECK-NOT: mla.q_absorb
// CHECK: mla.decode_attention %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] absorb(
func.func @fp8_head_query_unchanged(%q: tensor<4x16x192xf8E4M3FN>, %cache: !mla.kv_cache<?x64xbf16>, %bt: tensor<4x8xi32>,
                                    %sl: tensor<4xi32>, %w_uk: tensor<16x128x512xbf16>) -> tensor<4x16x512xbf16> {
  %o = mla.decode_attention %q, %cache[%bt, %sl] absorb(%w_uk : tensor<16x128x512xbf16>) softmax_scale = 0.125
      : tensor<4x16x192xf8E4M3FN>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}

// -----

// Two absorbing attentions on the same q and w_uk over different caches: the
// pass prepares the query twice, canonicalize + cse leave one preparation
// that both latent attentions read.
// CHECK-LABEL: func.func @shared_q_prep
// CHECK-COUNT-2: mla.q_absorb
// CHECK-NOT: mla.q_absorb
// CSE-LABEL: func.func @shared_q_prep
// CSE-SAME: (%[[Q:.*]]: tensor<?x16x192xbf16>, %[[C0:.*]]: !mla.kv_cache<?x64xbf16>, %[[C1:.*]]: !mla.kv_cache<?x64xbf16>, %[[BT:.*]]: tensor<?x8xi32>, %[[SL:.*]]: tensor<?xi32>, %[[WUK:.*]]: tensor<16x128x512xbf16>)
// CSE: %[[NOPE:.*]] = tensor.extract_slice %[[Q]][0, 0, 0]
// CSE: %[[PE:.*]] = tensor.extract_slice %[[Q]][0, 0, 128]
// CSE-NEXT: %[[LAT:.*]] = mla.q_absorb %[[NOPE]], %[[WUK]]
// CSE-NEXT: %[[QL:.*]] = mla.q_concat %[[LAT]], %[[PE]]
// CSE-NEXT: %[[O0:.*]] = mla.decode_attention %[[QL]], %[[C0]][%[[BT]], %[[SL]]]
// CSE-NEXT: %[[O1:.*]] = mla.decode_attention %[[QL]], %[[C1]][%[[BT]], %[[SL]]]
// CSE-NEXT: return %[[O0]], %[[O1]]
// CSE-NOT: mla.q_absorb
func.func @shared_q_prep(%q: tensor<?x16x192xbf16>, %c0: !mla.kv_cache<?x64xbf16>, %c1: !mla.kv_cache<?x64xbf16>,
                         %bt: tensor<?x8xi32>, %sl: tensor<?xi32>, %w_uk: tensor<16x128x512xbf16>)
    -> (tensor<?x16x512xbf16>, tensor<?x16x512xbf16>) {
  %o0 = mla.decode_attention %q, %c0[%bt, %sl] absorb(%w_uk : tensor<16x128x512xbf16>) softmax_scale = 0.125
      : tensor<?x16x192xbf16>, !mla.kv_cache<?x64xbf16>, tensor<?x8xi32>, tensor<?xi32> -> tensor<?x16x512xbf16>
  %o1 = mla.decode_attention %q, %c1[%bt, %sl] absorb(%w_uk : tensor<16x128x512xbf16>) softmax_scale = 0.125
      : tensor<?x16x192xbf16>, !mla.kv_cache<?x64xbf16>, tensor<?x8xi32>, tensor<?xi32> -> tensor<?x16x512xbf16>
  return %o0, %o1 : tensor<?x16x512xbf16>, tensor<?x16x512xbf16>
}

// -----

// A query assembled by tensor.concat of (nope, rotated pe) is split back into
// its parts instead of being sliced, so the q rope feeds q_concat directly.
// CHECK-LABEL: func.func @concat_query_parts
// CSE-LABEL: func.func @concat_query_parts
// ROUNDTRIP-LABEL: func.func @concat_query_parts
// CHECK-SAME: (%[[NOPE:[^:]*]]: tensor<2x16x128xbf16>, %[[PE:[^:]*]]: tensor<2x16x64xbf16>
// CHECK-NOT: tensor.extract_slice
// CHECK: %[[LAT:.*]] = mla.q_absorb %[[NOPE]], %{{.*}} :
// CHECK-NEXT: %[[Q:.*]] = mla.q_concat %[[LAT]], %[[PE]] :
// CHECK-NEXT: mla.decode_attention %[[Q]], %{{.*}}[%{{.*}}, %{{.*}}] softmax_scale
func.func @concat_query_parts(%nope: tensor<2x16x128xbf16>, %pe: tensor<2x16x64xbf16>,
                              %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x4xi32>, %sl: tensor<2xi32>,
                              %w_uk: tensor<16x128x512xbf16>) -> tensor<2x16x512xbf16> {
  %q = tensor.concat dim(2) %nope, %pe : (tensor<2x16x128xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x192xbf16>
  %o = mla.decode_attention %q, %cache[%bt, %sl] absorb(%w_uk : tensor<16x128x512xbf16>) softmax_scale = 0.1
      : tensor<2x16x192xbf16>, !mla.kv_cache<?x16xbf16>, tensor<2x4xi32>, tensor<2xi32> -> tensor<2x16x512xbf16>
  return %o : tensor<2x16x512xbf16>
}
