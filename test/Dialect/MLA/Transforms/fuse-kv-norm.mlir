// RUN: mla-opt %s -split-input-file -allow-unregistered-dialect -mla-fuse-kv-norm | FileCheck %s
// RUN: mla-opt %s -split-input-file -allow-unregistered-dialect -mla-fuse-kv-norm -mla-fuse-kv-norm | FileCheck %s

// The norm whose only reader is the update goes into it: the update reads
// the unnormalised latent and carries the weight and epsilon.
// CHECK-LABEL: func.func @fused
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x512xbf16>, %[[W:[^:]*]]: tensor<512xbf16>, %[[P:[^:]*]]: tensor<4x64xbf16>, %[[POS:[^:]*]]: tensor<4xi64>, %[[CS:[^:]*]]: tensor<4096x64xf32>, %[[S:[^:]*]]: tensor<4xi64>, %[[CACHE:[^:]*]]: !mla.kv_cache<?x64xbf16>)
// CHECK-NEXT: mla.rope_kv_cache_update neox %[[X]], %[[P]], %[[S]] into %[[CACHE]] positions(%[[POS]], %[[CS]]) latent_norm(%[[W]] : tensor<512xbf16>, epsilon = 9.99999997E-7) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>{{$}}
// CHECK-NEXT: return
// CHECK-NOT: mla.rms_norm
func.func @fused(%x: tensor<4x512xbf16>, %w: tensor<512xbf16>, %k_pe: tensor<4x64xbf16>, %pos: tensor<4xi64>,
                 %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>) {
  %n = mla.rms_norm %x, %w {epsilon = 1.0e-06 : f32} : tensor<4x512xbf16>, tensor<512xbf16>
  mla.rope_kv_cache_update neox %n, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  return
}

// -----

// The decode shape: the latent is a strided slice of the kv_a projection;
// the rotated q result, the q rope operand and the other epsilon are kept.
// CHECK-LABEL: func.func @slice_with_q
// CHECK: %[[LAT:.*]] = tensor.extract_slice %{{.*}}[0, 0] [4, 512] [1, 1]
// CHECK-NEXT: %[[Q:.*]] = mla.rope_kv_cache_update gptj %[[LAT]], %{{.*}} rotate_q(%{{.*}} : tensor<4x16x64xbf16>) latent_norm(%{{.*}} : tensor<512xf32>, epsilon = 9.99999974E-6) : {{.*}} rotated_q tensor<4x16x64xbf16>{{$}}
// CHECK-NEXT: return %[[Q]]
// CHECK-NOT: mla.rms_norm
func.func @slice_with_q(%kv_a: tensor<4x576xbf16>, %w: tensor<512xf32>, %k_pe: tensor<4x64xbf16>, %q_pe: tensor<4x16x64xbf16>,
                        %pos: tensor<4xi64>, %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>,
                        %cache: !mla.kv_cache<?x64xbf16>) -> tensor<4x16x64xbf16> {
  %lat = tensor.extract_slice %kv_a[0, 0] [4, 512] [1, 1] : tensor<4x576xbf16> to tensor<4x512xbf16>
  %n = mla.rms_norm %lat, %w {epsilon = 1.0e-05 : f32} : tensor<4x512xbf16>, tensor<512xf32>
  %q = mla.rope_kv_cache_update gptj %n, %k_pe, %slots into %cache positions(%pos, %cs)
      rotate_q(%q_pe : tensor<4x16x64xbf16>)
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
        rotated_q tensor<4x16x64xbf16>
  return %q : tensor<4x16x64xbf16>
}

// -----

// Must not fire: the normalised latent is also decompressed (prefill's kv_b).
// CHECK-LABEL: func.func @other_reader
// CHECK-NEXT: %[[N:.*]] = mla.rms_norm
// CHECK-NEXT: mla.rope_kv_cache_update neox %[[N]], {{.*}}tensor<4096x64xf32>{{$}}
// CHECK-NEXT: mla.linear %[[N]]
// CHECK-NOT: latent_norm
func.func @other_reader(%x: tensor<4x512xbf16>, %w: tensor<512xbf16>, %k_pe: tensor<4x64xbf16>, %pos: tensor<4xi64>,
                        %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>,
                        %w_kv_b: tensor<4096x512xbf16>) -> tensor<4x4096xbf16> {
  %n = mla.rms_norm %x, %w : tensor<4x512xbf16>, tensor<512xbf16>
  mla.rope_kv_cache_update neox %n, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  %kv = mla.linear %n, %w_kv_b : tensor<4x512xbf16>, tensor<4096x512xbf16> -> tensor<4x4096xbf16>
  return %kv : tensor<4x4096xbf16>
}

// -----

// Must not fire: the normalised latent is a function result.
// CHECK-LABEL: func.func @returned
// CHECK-NEXT: %[[N:.*]] = mla.rms_norm
// CHECK-NEXT: mla.rope_kv_cache_update neox %[[N]], {{.*}}tensor<4096x64xf32>{{$}}
// CHECK-NEXT: return %[[N]]
func.func @returned(%x: tensor<4x512xbf16>, %w: tensor<512xbf16>, %k_pe: tensor<4x64xbf16>, %pos: tensor<4xi64>,
                    %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>) -> tensor<4x512xbf16> {
  %n = mla.rms_norm %x, %w : tensor<4x512xbf16>, tensor<512xbf16>
  mla.rope_kv_cache_update neox %n, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  return %n : tensor<4x512xbf16>
}

// -----

// Must not fire: any other reader, even one that comes before the update,
// and the norm in another block (a loop body is not the update's block).
// CHECK-LABEL: func.func @unknown_reader
// CHECK-NEXT: %[[N:.*]] = mla.rms_norm
// CHECK-NEXT: "test.use"(%[[N]])
// CHECK-NEXT: mla.rope_kv_cache_update neox %[[N]], {{.*}}tensor<4096x64xf32>{{$}}
// CHECK-LABEL: func.func @other_block
// CHECK: mla.rms_norm
// CHECK: scf.if
// CHECK-NEXT: mla.rope_kv_cache_update neox %{{.*}}tensor<4096x64xf32>{{$}}
// CHECK-NOT: latent_norm
func.func @unknown_reader(%x: tensor<4x512xbf16>, %w: tensor<512xbf16>, %k_pe: tensor<4x64xbf16>, %pos: tensor<4xi64>,
                          %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>) {
  %n = mla.rms_norm %x, %w : tensor<4x512xbf16>, tensor<512xbf16>
  "test.use"(%n) : (tensor<4x512xbf16>) -> ()
  mla.rope_kv_cache_update neox %n, %k_pe, %slots into %cache positions(%pos, %cs)
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  return
}
func.func @other_block(%x: tensor<4x512xbf16>, %w: tensor<512xbf16>, %k_pe: tensor<4x64xbf16>, %pos: tensor<4xi64>,
                       %cs: tensor<4096x64xf32>, %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %c: i1) {
  %n = mla.rms_norm %x, %w : tensor<4x512xbf16>, tensor<512xbf16>
  scf.if %c {
    mla.rope_kv_cache_update neox %n, %k_pe, %slots into %cache positions(%pos, %cs)
        : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
  }
  return
}

// -----

// Must not fire: the latent is not a norm result, and plain
// kv_cache_update (no fused kernel) is left alone.
// CHECK-LABEL: func.func @plain_update
// CHECK-NEXT: %[[N:.*]] = mla.rms_norm
// CHECK-NEXT: mla.kv_cache_update %[[N]]
func.func @plain_update(%x: tensor<4x512xbf16>, %w: tensor<512xbf16>, %k_pe: tensor<4x64xbf16>,
                        %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>) {
  %n = mla.rms_norm %x, %w : tensor<4x512xbf16>, tensor<512xbf16>
  mla.kv_cache_update %n, %k_pe, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  return
}
