// RUN: mla-opt %s -split-input-file -verify-diagnostics -mla-fuse-kv-norm

// A malformed latent norm never reaches the pass: the verifier rejects it
// with a located diagnostic first. And a norm whose weight does not fit the
// cache cannot be fused into a verified op, so it is rejected where it is.

func.func @weight_size(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %pos: tensor<4xi64>, %cs: tensor<64x64xf32>, %w: tensor<256xbf16>) {
  // expected-error @+1 {{expected dimension 0 of 'latent_norm weight' (the cache's latent rank) to be 512, got 256}}
  mla.rope_kv_cache_update neox %c, %p, %s into %cache positions(%pos, %cs) latent_norm(%w : tensor<256xbf16>, epsilon = 1.0e-6) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<64x64xf32>
  return
}

// -----

func.func @negative_epsilon(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %pos: tensor<4xi64>, %cs: tensor<64x64xf32>, %w: tensor<512xbf16>) {
  // expected-error @+1 {{expected a positive latent norm epsilon}}
  mla.rope_kv_cache_update neox %c, %p, %s into %cache positions(%pos, %cs) latent_norm(%w : tensor<512xbf16>, epsilon = -1.0e-6) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<64x64xf32>
  return
}

// -----

func.func @norm_weight_mismatch(%x: tensor<4x512xbf16>, %w: tensor<256xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %pos: tensor<4xi64>, %cs: tensor<64x64xf32>) {
  // expected-error @+1 {{expected dimension 0 of 'weight' (features) to be 512, got 256}}
  %n = mla.rms_norm %x, %w : tensor<4x512xbf16>, tensor<256xbf16>
  mla.rope_kv_cache_update neox %n, %p, %s into %cache positions(%pos, %cs) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<64x64xf32>
  return
}
