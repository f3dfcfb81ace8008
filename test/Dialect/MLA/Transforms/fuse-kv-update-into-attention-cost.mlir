// RUN: mla-opt %s -split-input-file -mla-fuse-kv-update-into-attention=target=cuda-sm90 | FileCheck %s
// RUN: mla-opt %s -split-input-file -mla-fuse-kv-update-into-attention=target=cpu | FileCheck %s --check-prefix=CPU
// RUN: mla-opt %s -split-input-file -mla-fuse-kv-update-into-attention="target=cuda-sm90 cost-model=false" | FileCheck %s --check-prefix=CPU

// The CUDA cost model folds only where the 16-head decode stores the rows
// in its own launch and the sequences are short enough for it to pay; the
// CPU always folds, and so does CUDA without the cost model.

// 16 heads, a plain cache, 65 pages of 64 = 4160 tokens: folds.
// CHECK-LABEL: func.func @pays
// CHECK: mla.decode_attention_with_update
// CHECK-NOT: mla.kv_cache_update
// CPU-LABEL: func.func @pays
// CPU: mla.decode_attention_with_update
func.func @pays(%q: tensor<64x16x576xbf16>, %kv_c: tensor<64x512xbf16>, %k_pe: tensor<64x64xbf16>,
                %slots: tensor<64xi64>, %cache: !mla.kv_cache<?x64xbf16>, %bt: tensor<64x65xi32>,
                %sl: tensor<64xi32>) -> tensor<64x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
      : tensor<64x512xbf16>, tensor<64x64xbf16>, tensor<64xi64> into !mla.kv_cache<?x64xbf16>
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<64x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<64x65xi32>, tensor<64xi32> -> tensor<64x16x512xbf16>
  return %o : tensor<64x16x512xbf16>
}

// -----

// 66 pages: past the measured break-even.
// CHECK-LABEL: func.func @too_long
// CHECK: mla.kv_cache_update
// CHECK: mla.decode_attention %
// CPU-LABEL: func.func @too_long
// CPU: mla.decode_attention_with_update
func.func @too_long(%q: tensor<64x16x576xbf16>, %kv_c: tensor<64x512xbf16>, %k_pe: tensor<64x64xbf16>,
                    %slots: tensor<64xi64>, %cache: !mla.kv_cache<?x64xbf16>, %bt: tensor<64x66xi32>,
                    %sl: tensor<64xi32>) -> tensor<64x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
      : tensor<64x512xbf16>, tensor<64x64xbf16>, tensor<64xi64> into !mla.kv_cache<?x64xbf16>
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<64x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<64x66xi32>, tensor<64xi32> -> tensor<64x16x512xbf16>
  return %o : tensor<64x16x512xbf16>
}

// -----

// 128 heads: the many-heads decode, which stores no rows itself.
// CHECK-LABEL: func.func @many_heads
// CHECK: mla.kv_cache_update
// CHECK: mla.decode_attention %
// CPU-LABEL: func.func @many_heads
// CPU: mla.decode_attention_with_update
func.func @many_heads(%q: tensor<4x128x576xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                      %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %bt: tensor<4x8xi32>,
                      %sl: tensor<4xi32>) -> tensor<4x128x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
      : tensor<4x128x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x128x512xbf16>
  return %o : tensor<4x128x512xbf16>
}

// -----

// A per-tensor fp8 cache: its rows are stored by their own launch.
// CHECK-LABEL: func.func @fp8_cache
// CHECK: mla.kv_cache_update
// CHECK: mla.decode_attention %
// CPU-LABEL: func.func @fp8_cache
// CPU: mla.decode_attention_with_update
func.func @fp8_cache(%q: tensor<4x16x576xbf16>, %kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>,
                     %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xf8E4M3FN, per_tensor>,
                     %bt: tensor<4x8xi32>, %sl: tensor<4xi32>, %scale: tensor<f32>) -> tensor<4x16x512xbf16> {
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache scale %scale
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>
  %o = mla.decode_attention %q, %cache[%bt, %sl] kv_scale %scale softmax_scale = 0.1
      : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xf8E4M3FN, per_tensor>, tensor<4x8xi32>, tensor<4xi32> -> tensor<4x16x512xbf16>
  return %o : tensor<4x16x512xbf16>
}
