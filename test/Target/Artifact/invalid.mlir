// What the artifact lowering refuses, with a located error.
//
// RUN: mla-translate %s -split-input-file -verify-diagnostics --mla-to-artifact -o /dev/null

func.func @monolithic(%q: tensor<2x16x192xbf16>, %c: tensor<2x512xbf16>, %p: tensor<2x64xbf16>, %s: tensor<2xi64>,
                      %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x4xi32>, %sl: tensor<2xi32>,
                      %wk: tensor<16x128x512xbf16>, %wv: tensor<16x512x128xbf16>) -> tensor<2x16x128xbf16> {
  // expected-error @+1 {{monolithic mla.attention must be split first (run mla-decode-pipeline or mla-prefill-pipeline)}}
  %o = mla.attention decode %q, %c, %p, %s into %cache[%bt, %sl] weights(%wk, %wv) softmax_scale = 0.1
      : tensor<2x16x192xbf16>, tensor<2x512xbf16>, tensor<2x64xbf16>, tensor<2xi64> into !mla.kv_cache<?x16xbf16>,
        tensor<2x4xi32>, tensor<2xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16> -> tensor<2x16x128xbf16>
  return %o : tensor<2x16x128xbf16>
}

// -----

// expected-error @+1 {{argument #0 must be a statically shaped tensor of rank <= 4 or a cache, got 'tensor<?x32xf32>'}}
func.func @dynamic(%x: tensor<?x32xf32>, %w: tensor<32xf32>) -> tensor<?x32xf32> {
  %a = mla.rms_norm %x, %w : tensor<?x32xf32>, tensor<32xf32>
  return %a : tensor<?x32xf32>
}

// -----

func.func @unsupported(%x: tensor<2x32xf32>) -> tensor<2x32xf32> {
  // expected-error @+1 {{'arith.mulf' has no lowering to the runtime's kernels}}
  %a = arith.mulf %x, %x : tensor<2x32xf32>
  return %a : tensor<2x32xf32>
}

// -----

// A per-tensor fp8 cache has one scale: its bytes mean one thing to every
// reader and writer.
func.func @fp8_two_scales(%c: tensor<2x512xbf16>, %p: tensor<2x64xbf16>, %s: tensor<2xi64>,
                          %cache: !mla.kv_cache<?x16xf8E5M2, per_tensor>, %sc: tensor<f32>, %sc2: tensor<f32>) {
  mla.kv_cache_update %c, %p, %s into %cache scale %sc : tensor<2x512xbf16>, tensor<2x64xbf16>, tensor<2xi64> into !mla.kv_cache<?x16xf8E5M2, per_tensor>
  // expected-error @+1 {{every op on a per-tensor fp8 cache must use the same scale argument; this one uses argument #5, an earlier one argument #4}}
  mla.kv_cache_update %c, %p, %s into %cache scale %sc2 : tensor<2x512xbf16>, tensor<2x64xbf16>, tensor<2xi64> into !mla.kv_cache<?x16xf8E5M2, per_tensor>
  return
}

// -----

// A view of an argument is not a buffer of its own.
func.func @fp8_scale_view(%c: tensor<2x512xbf16>, %p: tensor<2x64xbf16>, %s: tensor<2xi64>,
                          %cache: !mla.kv_cache<?x16xf8E4M3FN, per_tensor>, %scales: tensor<4xf32>) {
  %sc = tensor.extract_slice %scales[1] [1] [1] : tensor<4xf32> to tensor<f32>
  // expected-error @+1 {{the scale of a per-tensor fp8 cache must be a function argument (the runtime binds it as a buffer)}}
  mla.kv_cache_update %c, %p, %s into %cache scale %sc : tensor<2x512xbf16>, tensor<2x64xbf16>, tensor<2xi64> into !mla.kv_cache<?x16xf8E4M3FN, per_tensor>
  return
}

// -----

// expected-error @+1 {{no step function to translate}}
module {
  func.func private @only_a_declaration(tensor<2xf32>)
}

// -----

// Intermediate views are bounded like arguments: the runtime's views have
// at most four dimensions (the verifier accepts any rank).
func.func @rank_too_high(%x: tensor<2x128xf32>) -> tensor<2x128xf32> {
  // expected-error @+1 {{result #0 has rank 8; the runtime's views have at most 4 dimensions}}
  %h = tensor.expand_shape %x [[0, 1, 2, 3, 4, 5], [6, 7]] output_shape [1, 1, 1, 1, 1, 2, 2, 64] : tensor<2x128xf32> into tensor<1x1x1x1x1x2x2x64xf32>
  %c = tensor.collapse_shape %h [[0, 1, 2, 3, 4, 5], [6, 7]] : tensor<1x1x1x1x1x2x2x64xf32> into tensor<2x128xf32>
  return %c : tensor<2x128xf32>
}

// -----

func.func @negative_step(%x: tensor<2x128xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{only static, non-negative offsets and positive strides lower to a view}}
  %h = tensor.extract_slice %x[0, 0] [2, 8] [1, -3] : tensor<2x128xf32> to tensor<2x8xf32>
  return %h : tensor<2x8xf32>
}

// -----

// Sizes whose byte count overflows int64 are refused before any offset is
// computed from them.
// expected-error @+1 {{argument #0 of type 'tensor<1099511627776x1099511627776xf32>' is larger than the runtime accepts (2^46 bytes)}}
func.func @too_large(%x: tensor<1099511627776x1099511627776xf32>) -> tensor<1099511627776x1099511627776xf32> {
  return %x : tensor<1099511627776x1099511627776xf32>
}

// -----

func.func @result_too_large(%x: tensor<2x128xf32>) -> tensor<2x128xf32> {
  // expected-error @+1 {{result #0 of type 'tensor<2x128x1099511627776x1099511627776xf32>' is larger than the runtime accepts}}
  %e = tensor.empty() : tensor<2x128x1099511627776x1099511627776xf32>
  return %x : tensor<2x128xf32>
}

// -----

// The runtime binds buffers by name.
// expected-error @+1 {{argument #1 is named 'x', as is argument #0; buffer and cache names must be unique}}
func.func @duplicate_argument_names(%x: tensor<2x32xf32> {mla.name = "x"}, %w: tensor<32xf32> {mla.name = "x"}) -> tensor<2x32xf32> {
  %0 = mla.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : tensor<2x32xf32>, tensor<32xf32>
  return %0 : tensor<2x32xf32>
}

// -----

// An explicit name may collide with the default name of another argument.
// expected-error @+1 {{argument #1 is named 'arg1', as is argument #0}}
func.func @collides_with_default_name(%x: tensor<2x32xf32> {mla.name = "arg1"}, %w: tensor<32xf32>) -> tensor<2x32xf32> {
  %0 = mla.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : tensor<2x32xf32>, tensor<32xf32>
  return %0 : tensor<2x32xf32>
}

// -----

// expected-error @+1 {{result #0 is named 'w', as is argument #1}}
func.func @result_named_like_an_argument(%x: tensor<2x32xf32>, %w: tensor<32xf32> {mla.name = "w"}) -> (tensor<2x32xf32> {mla.name = "w"}) {
  %0 = mla.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : tensor<2x32xf32>, tensor<32xf32>
  return %0 : tensor<2x32xf32>
}
