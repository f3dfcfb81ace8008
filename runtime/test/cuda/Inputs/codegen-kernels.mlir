// The generated kernels the CUDA tests and mla-bench compare with the
// library kernels (docs/codegen.md). The top-level build compiles it into
// codegen-kernels.mlaa; test/Target/Artifact/codegen-fixture.test checks
// that it still compiles to the expected kernels.
func.func @fixture(%kv_c: tensor<4x512xbf16> {mla.name = "kv_c"}, %k_pe: tensor<4x64xbf16> {mla.name = "k_pe"},
                   %s64: tensor<4xi64> {mla.name = "s64"}, %s32: tensor<4xi32> {mla.name = "s32"},
                   %p64: tensor<4xi64> {mla.name = "p64"}, %p32: tensor<4xi32> {mla.name = "p32"},
                   %cs: tensor<512x64xf32> {mla.name = "cos_sin"}, %q: tensor<4x16x64xbf16> {mla.name = "q_pe"},
                   %plain: !mla.kv_cache<?x16xbf16> {mla.name = "plain"},
                   %ds: !mla.kv_cache<?x16xf8E4M3FN, fp8_ds_mla> {mla.name = "ds"},
                   %norm_w: tensor<512xbf16> {mla.name = "norm_w"})
    -> (tensor<4x16x64xbf16>, tensor<4x16x64xbf16>, tensor<4x16x64xbf16>) {
  mla.kv_cache_update %kv_c, %k_pe, %s64 into %plain : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  mla.rope_kv_cache_update gptj %kv_c, %k_pe, %s32 into %plain positions(%p64, %cs) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi32> into !mla.kv_cache<?x16xbf16>, tensor<4xi64>, tensor<512x64xf32>
  %q1 = mla.rope_kv_cache_update neox %kv_c, %k_pe, %s64 into %plain positions(%p32, %cs) rotate_q(%q : tensor<4x16x64xbf16>) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>, tensor<4xi32>, tensor<512x64xf32> rotated_q tensor<4x16x64xbf16>
  mla.kv_cache_update %kv_c, %k_pe, %s64 into %ds : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xf8E4M3FN, fp8_ds_mla>
  %q2 = mla.rope_kv_cache_update gptj %kv_c, %k_pe, %s64 into %ds positions(%p64, %cs) rotate_q(%q : tensor<4x16x64xbf16>) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xf8E4M3FN, fp8_ds_mla>, tensor<4xi64>, tensor<512x64xf32> rotated_q tensor<4x16x64xbf16>
  // The latent norm (mla-fuse-kv-norm), without and with q.
  mla.rope_kv_cache_update neox %kv_c, %k_pe, %s64 into %plain positions(%p64, %cs) latent_norm(%norm_w : tensor<512xbf16>, epsilon = 1.0e-6) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>, tensor<4xi64>, tensor<512x64xf32>
  %q3 = mla.rope_kv_cache_update gptj %kv_c, %k_pe, %s32 into %plain positions(%p32, %cs) rotate_q(%q : tensor<4x16x64xbf16>) latent_norm(%norm_w : tensor<512xbf16>, epsilon = 1.0e-6) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi32> into !mla.kv_cache<?x16xbf16>, tensor<4xi32>, tensor<512x64xf32> rotated_q tensor<4x16x64xbf16>
  return %q1, %q2, %q3 : tensor<4x16x64xbf16>, tensor<4x16x64xbf16>, tensor<4x16x64xbf16>
}
