// RUN: mla-opt %s -split-input-file -verify-diagnostics -mla-fuse-kv-update-quant

// mla-fuse-kv-update-quant folds quantisation only into per-tensor fp8
// caches. Quantised inputs into the other layouts are malformed, so they
// never reach the pass: the verifier rejects them first.

func.func @fp8_ds_mla(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                      %cache: !mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla>, %s: tensor<f32>) {
  %c8 = mla.quantize %kv_c, %s : tensor<4x512xbf16> -> tensor<4x512xf8E4M3FN>
  %p8 = mla.quantize %k_pe, %s : tensor<4x64xbf16> -> tensor<4x64xf8E4M3FN>
  // expected-error @+1 {{an 'fp8_ds_mla' cache computes its own tile scales and needs float inputs}}
  mla.kv_cache_update %c8, %p8, %slots into %cache
      : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla>
  return
}

// -----

func.func @plain(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                 %cache: !mla.kv_cache<?x64xbf16>, %s: tensor<f32>) {
  %c8 = mla.quantize %kv_c, %s : tensor<4x512xbf16> -> tensor<4x512xf8E4M3FN>
  %p8 = mla.quantize %k_pe, %s : tensor<4x64xbf16> -> tensor<4x64xf8E4M3FN>
  // expected-error @+1 {{writes 'f8E4M3FN' values into a cache of 'bf16'}}
  mla.kv_cache_update %c8, %p8, %slots into %cache
      : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  return
}
