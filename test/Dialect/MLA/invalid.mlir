// RUN: mla-opt %s -split-input-file -verify-diagnostics

// Every verifier error of the dialect at least once.

//===----------------------------------------------------------------------===//
// !mla.kv_cache
//===----------------------------------------------------------------------===//

// expected-error @+1 {{expected a positive number of blocks or '?', got 0}}
func.func private @zero_blocks(!mla.kv_cache<0x16xbf16>)

// -----

// expected-error @+1 {{expected a positive static block size, got 0}}
func.func private @zero_block_size(!mla.kv_cache<4x0xbf16>)

// -----

// expected-error @+1 {{the block size must be static}}
func.func private @dynamic_block_size(!mla.kv_cache<4x?xbf16>)

// -----

// expected-error @+1 {{expected 'num_blocks x block_size x type', got 1 dimensions}}
func.func private @one_dim(!mla.kv_cache<16xbf16>)

// -----

// expected-error @+1 {{expected a positive latent rank, got 0}}
func.func private @zero_latent(!mla.kv_cache<?x16xbf16, latent = 0>)

// -----

// expected-error @+1 {{expected a positive even rope dim, got 63}}
func.func private @odd_rope(!mla.kv_cache<?x16xbf16, rope = 63>)

// -----

// expected-error @+1 {{a plain cache holds bf16, f16 or f32 values, got 'f8E4M3FN'}}
func.func private @plain_fp8(!mla.kv_cache<?x16xf8E4M3FN>)

// -----

// expected-error @+1 {{the 'per_tensor' layout stores f8E4M3FN or f8E5M2 values, got 'bf16'}}
func.func private @per_tensor_bf16(!mla.kv_cache<?x16xbf16, per_tensor>)

// -----

// expected-error @+1 {{the 'fp8_ds_mla' layout stores f8E4M3FN values, got 'f8E5M2'}}
func.func private @ds_mla_e5m2(!mla.kv_cache<?x64xf8E5M2, fp8_ds_mla>)

// -----

// expected-error @+1 {{the 'fp8_ds_mla' layout needs a latent rank divisible by 128, got 200}}
func.func private @ds_mla_tiles(!mla.kv_cache<?x64xf8E4M3FN, latent = 200, fp8_ds_mla>)

// -----

// expected-error @+1 {{expected 'latent', 'rope' or a layout (plain, per_tensor, fp8_ds_mla), got 'fp8'}}
func.func private @bad_keyword(!mla.kv_cache<?x64xf8E4M3FN, fp8>)

//===----------------------------------------------------------------------===//
// Discardable attributes
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{'mla.dummy_run' must be a unit attribute}}
func.func private @dummy_not_unit() attributes {mla.dummy_run = 1 : i32}

// -----

// expected-error @+1 {{'mla.dummy_run' is only valid on a function}}
module attributes {mla.dummy_run} {}

// -----

// expected-error @+1 {{'mla.noalias' is only valid on a !mla.kv_cache argument, argument #0 is 'tensor<4xi64>'}}
func.func private @noalias_tensor(tensor<4xi64> {mla.noalias})

// -----

// expected-error @+1 {{'mla.noalias' must be a unit attribute}}
func.func private @noalias_not_unit(!mla.kv_cache<?x16xbf16> {mla.noalias = 0 : i32})

// -----

// expected-error @+1 {{'mla.rope_table' is only valid on a [max_position, rope] f32 argument with an even rope dim, argument #0 is 'tensor<64x63xf32>'}}
func.func private @rope_table_odd(tensor<64x63xf32> {mla.rope_table = #mla.rope_table<>})

// -----

// expected-error @+1 {{'mla.rope_table' must be a #mla.rope_table attribute}}
func.func private @rope_table_not_attr(tensor<64x64xf32> {mla.rope_table = 1 : i32})

// -----

// expected-error @+1 {{rope_table: factor > 1 (YaRN) needs original_max_position > 0}}
func.func private @rope_table_yarn_no_context(tensor<64x64xf32> {mla.rope_table = #mla.rope_table<factor = 4.0>})

// -----

// expected-error @+1 {{rope_table: theta must be a finite number > 1, got 0}}
func.func private @rope_table_theta(tensor<64x64xf32> {mla.rope_table = #mla.rope_table<theta = 0.0>})

// -----

// expected-error @+1 {{rope_table: YaRN needs beta_fast > beta_slow > 0, got 1}}
func.func private @rope_table_beta(tensor<64x64xf32> {mla.rope_table = #mla.rope_table<factor = 4.0, original_max_position = 64, beta_fast = 1.0, beta_slow = 2.0>})

// -----

// expected-error @+1 {{unknown mla attribute 'mla.bogus'}}
func.func private @unknown_attr() attributes {mla.bogus}

//===----------------------------------------------------------------------===//
// Pure tensor ops
//===----------------------------------------------------------------------===//

// -----

func.func @rope_rank(%x: tensor<64xbf16>, %p: tensor<1xi64>, %cs: tensor<16x64xf32>) {
  // expected-error @+1 {{expected an input of rank >= 2 ([T, ..., P]), got 'tensor<64xbf16>'}}
  %0 = mla.rope neox %x, %p, %cs : tensor<64xbf16>, tensor<1xi64>, tensor<16x64xf32>
  return
}

// -----

func.func @rope_odd(%x: tensor<4x63xbf16>, %p: tensor<4xi64>, %cs: tensor<16x63xf32>) {
  // expected-error @+1 {{expected an even rotary dimension, got 63}}
  %0 = mla.rope neox %x, %p, %cs : tensor<4x63xbf16>, tensor<4xi64>, tensor<16x63xf32>
  return
}

// -----

func.func @rope_positions(%x: tensor<4x64xbf16>, %p: tensor<5xi64>, %cs: tensor<16x64xf32>) {
  // expected-error @+1 {{expected dimension 0 of 'positions' (tokens of the input) to be 4, got 5}}
  %0 = mla.rope neox %x, %p, %cs : tensor<4x64xbf16>, tensor<5xi64>, tensor<16x64xf32>
  return
}

// -----

func.func @rope_table(%x: tensor<4x64xbf16>, %p: tensor<4xi64>, %cs: tensor<16x32xf32>) {
  // expected-error @+1 {{expected dimension 1 of 'cos_sin' (the rotary dim) to be 64, got 32}}
  %0 = mla.rope neox %x, %p, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<16x32xf32>
  return
}

// -----

func.func @rope_dtype(%x: tensor<4x64xi32>, %p: tensor<4xi64>, %cs: tensor<16x64xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of bfloat16 type or 16-bit float or 32-bit float values}}
  %0 = "mla.rope"(%x, %p, %cs) <{style = 1 : i32}> : (tensor<4x64xi32>, tensor<4xi64>, tensor<16x64xf32>) -> tensor<4x64xi32>
  return
}

// -----

func.func @absorb_rank(%q: tensor<4x128xbf16>, %w: tensor<16x128x512xbf16>) {
  // expected-error @+1 {{expected 'q_nope' and the result to have rank 3}}
  %0 = mla.q_absorb %q, %w : tensor<4x128xbf16>, tensor<16x128x512xbf16> -> tensor<4x512xbf16>
  return
}

// -----

func.func @absorb_heads(%q: tensor<4x8x128xbf16>, %w: tensor<16x128x512xbf16>) {
  // expected-error @+1 {{expected dimension 0 of 'w_uk' (heads) to be 8, got 16}}
  %0 = mla.q_absorb %q, %w : tensor<4x8x128xbf16>, tensor<16x128x512xbf16> -> tensor<4x8x512xbf16>
  return
}

// -----

func.func @absorb_result(%q: tensor<4x16x128xbf16>, %w: tensor<16x128x512xbf16>) {
  // expected-error @+1 {{expected dimension 2 of 'result' (the latent rank of 'w_uk') to be 512, got 256}}
  %0 = mla.q_absorb %q, %w : tensor<4x16x128xbf16>, tensor<16x128x512xbf16> -> tensor<4x16x256xbf16>
  return
}

// -----

func.func @concat_width(%a: tensor<4x16x512xbf16>, %b: tensor<4x16x64xbf16>) {
  // expected-error @+1 {{expected dimension 2 of 'result' (latent + rope) to be 576, got 512}}
  %0 = mla.q_concat %a, %b : tensor<4x16x512xbf16>, tensor<4x16x64xbf16> -> tensor<4x16x512xbf16>
  return
}

// -----

func.func @concat_types(%a: tensor<4x16x512xbf16>, %b: tensor<4x16x64xf32>) {
  // expected-error @+1 {{expected one element type, got 'bf16', 'f32' and 'bf16'}}
  %0 = mla.q_concat %a, %b : tensor<4x16x512xbf16>, tensor<4x16x64xf32> -> tensor<4x16x576xbf16>
  return
}

// -----

func.func @concat_heads(%a: tensor<4x16x512xbf16>, %b: tensor<4x8x64xbf16>) {
  // expected-error @+1 {{expected dimension 1 of 'q_pe' (as in 'q_latent') to be 16, got 8}}
  %0 = mla.q_concat %a, %b : tensor<4x16x512xbf16>, tensor<4x8x64xbf16> -> tensor<4x16x576xbf16>
  return
}

// -----

func.func @quantize_shape(%x: tensor<4x576xbf16>, %s: tensor<f32>) {
  // expected-error @+1 {{expected the result to have the input's shape, got 'tensor<4x576xbf16>' and 'tensor<4x512xf8E4M3FN>'}}
  %0 = mla.quantize %x, %s : tensor<4x576xbf16> -> tensor<4x512xf8E4M3FN>
  return
}

// -----

func.func @quantize_scale(%x: tensor<4x576xbf16>, %s: tensor<1xf32>) {
  // expected-error @+1 {{operand #1 must be 0-d f32 tensor (a scale)}}
  %0 = "mla.quantize"(%x, %s) : (tensor<4x576xbf16>, tensor<1xf32>) -> tensor<4x576xf8E4M3FN>
  return
}

// -----

func.func @v_up_latent(%o: tensor<4x16x256xbf16>, %w: tensor<16x512x128xbf16>) {
  // expected-error @+1 {{expected dimension 1 of 'w_uv' (the latent rank of 'o_latent') to be 256, got 512}}
  %0 = mla.v_up %o, %w : tensor<4x16x256xbf16>, tensor<16x512x128xbf16> -> tensor<4x16x128xbf16>
  return
}

// -----

func.func @decompress_k(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %wk: tensor<16x128x512xbf16>, %wv: tensor<16x512x128xbf16>) {
  // expected-error @+1 {{expected dimension 2 of 'k' (nope + rope) to be 192, got 128}}
  %k, %v = mla.decompress_kv %c, %p, %wk, %wv : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16> -> tensor<4x16x128xbf16>, tensor<4x16x128xbf16>
  return
}

//===----------------------------------------------------------------------===//
// Cache writers
//===----------------------------------------------------------------------===//

// -----

func.func @update_latent(%c: tensor<4x256xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x16xbf16>) {
  // expected-error @+1 {{expected dimension 1 of 'kv_c' (the cache's latent rank) to be 512, got 256}}
  mla.kv_cache_update %c, %p, %s into %cache : tensor<4x256xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

func.func @update_rope(%c: tensor<4x512xbf16>, %p: tensor<4x32xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x16xbf16>) {
  // expected-error @+1 {{expected dimension 1 of 'k_pe' (the cache's rope dim) to be 64, got 32}}
  mla.kv_cache_update %c, %p, %s into %cache : tensor<4x512xbf16>, tensor<4x32xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

func.func @update_tokens(%c: tensor<4x512xbf16>, %p: tensor<3x64xbf16>, %s: tensor<3xi64>, %cache: !mla.kv_cache<?x16xbf16>) {
  // expected-error @+1 {{expected dimension 0 of 'k_pe' (tokens of 'kv_c') to be 4, got 3}}
  mla.kv_cache_update %c, %p, %s into %cache : tensor<4x512xbf16>, tensor<3x64xbf16>, tensor<3xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

func.func @update_long_slots(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<5xi64>, %cache: !mla.kv_cache<?x16xbf16>) {
  // expected-error @+1 {{slot mapping has 5 entries but only 4 tokens are given (it may be shorter, never longer)}}
  mla.kv_cache_update %c, %p, %s into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<5xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

func.func @update_slot_type(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xf32>, %cache: !mla.kv_cache<?x16xbf16>) {
  // expected-error @+1 {{operand #2 must be 1D tensor of 64-bit signless integer or 32-bit signless integer values}}
  "mla.kv_cache_update"(%c, %p, %s, %cache) : (tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xf32>, !mla.kv_cache<?x16xbf16>) -> ()
  return
}

// -----

func.func @update_kpe_rank(%c: tensor<4x512xbf16>, %p: tensor<4x1x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x16xbf16>) {
  // expected-error @+1 {{operand #1 must be 2D tensor}}
  "mla.kv_cache_update"(%c, %p, %s, %cache) : (tensor<4x512xbf16>, tensor<4x1x64xbf16>, tensor<4xi64>, !mla.kv_cache<?x16xbf16>) -> ()
  return
}

// -----

func.func @update_mixed_types(%c: tensor<4x512xbf16>, %p: tensor<4x64xf32>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x16xbf16>) {
  // expected-error @+1 {{expected 'kv_c' and 'k_pe' to share an element type, got 'bf16' and 'f32'}}
  mla.kv_cache_update %c, %p, %s into %cache : tensor<4x512xbf16>, tensor<4x64xf32>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

func.func @update_plain_convert(%c: tensor<4x512xf32>, %p: tensor<4x64xf32>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x16xbf16>) {
  // expected-error @+1 {{writes 'f32' values into a cache of 'bf16' (a plain cache stores its inputs unconverted)}}
  mla.kv_cache_update %c, %p, %s into %cache : tensor<4x512xf32>, tensor<4x64xf32>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

func.func @update_plain_scale(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x16xbf16>, %sc: tensor<f32>) {
  // expected-error @+1 {{has a 'scale' but the cache is not a per-tensor fp8 cache}}
  mla.kv_cache_update %c, %p, %s into %cache scale %sc : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>
  return
}

// -----

func.func @update_fp8_needs_scale(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x16xf8E4M3FN, per_tensor>) {
  // expected-error @+1 {{quantises 'bf16' inputs into a per-tensor fp8 cache and needs a 'scale'}}
  mla.kv_cache_update %c, %p, %s into %cache : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xf8E4M3FN, per_tensor>
  return
}

// -----

func.func @update_other_fp8_encoding(%c: tensor<4x512xf8E4M3FN>, %p: tensor<4x64xf8E4M3FN>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x16xf8E5M2, per_tensor>) {
  // expected-error @+1 {{stores already-quantised 'f8E4M3FN' values as they are into a cache of 'f8E5M2'; the encodings must match}}
  mla.kv_cache_update %c, %p, %s into %cache : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>, tensor<4xi64> into !mla.kv_cache<?x16xf8E5M2, per_tensor>
  return
}

// -----

func.func @update_fp8_inputs_scale(%c: tensor<4x512xf8E4M3FN>, %p: tensor<4x64xf8E4M3FN>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x16xf8E4M3FN, per_tensor>, %sc: tensor<f32>) {
  // expected-error @+1 {{takes already-quantised fp8 inputs, so it must not have a 'scale'}}
  mla.kv_cache_update %c, %p, %s into %cache scale %sc : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>, tensor<4xi64> into !mla.kv_cache<?x16xf8E4M3FN, per_tensor>
  return
}

// -----

func.func @update_ds_mla_fp8(%c: tensor<4x512xf8E4M3FN>, %p: tensor<4x64xf8E4M3FN>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla>) {
  // expected-error @+1 {{an 'fp8_ds_mla' cache computes its own tile scales and needs float inputs, got 'f8E4M3FN'}}
  mla.kv_cache_update %c, %p, %s into %cache : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla>
  return
}

// -----

func.func @update_ds_mla_scale(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla>, %sc: tensor<f32>) {
  // expected-error @+1 {{an 'fp8_ds_mla' cache takes no 'scale'}}
  mla.kv_cache_update %c, %p, %s into %cache scale %sc : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla>
  return
}

// -----

func.func @rope_update_positions(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x16xbf16>, %pos: tensor<2xi64>, %cs: tensor<64x64xf32>) {
  // expected-error @+1 {{expected dimension 0 of 'positions' (tokens) to be 4, got 2}}
  mla.rope_kv_cache_update neox %c, %p, %s into %cache positions(%pos, %cs) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>, tensor<2xi64>, tensor<64x64xf32>
  return
}

// -----

func.func @rope_update_q_result(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x16xbf16>, %pos: tensor<4xi64>, %cs: tensor<64x64xf32>) {
  // expected-error @+1 {{returns a rotated 'q_pe' exactly when it is given one}}
  %0 = "mla.rope_kv_cache_update"(%c, %p, %pos, %cs, %s, %cache) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0>, style = 1 : i32}>
      : (tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64>, tensor<64x64xf32>, tensor<4xi64>, !mla.kv_cache<?x16xbf16>) -> tensor<4x16x64xbf16>
  return
}

// -----

func.func @rope_update_q_type(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x16xbf16>, %pos: tensor<4xi64>, %cs: tensor<64x64xf32>, %q: tensor<4x16x64xbf16>) {
  // expected-error @+1 {{expected the rotated q_pe to have type 'tensor<4x16x64xbf16>', got 'tensor<4x16x64xf32>'}}
  %0 = mla.rope_kv_cache_update neox %c, %p, %s into %cache positions(%pos, %cs) rotate_q(%q : tensor<4x16x64xbf16>) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>, tensor<4xi64>, tensor<64x64xf32> rotated_q tensor<4x16x64xf32>
  return
}

// -----

func.func @rope_update_q_rank(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x16xbf16>, %pos: tensor<4xi64>, %cs: tensor<64x64xf32>, %q: tensor<4x64xbf16>) {
  // expected-error @+1 {{expected 'q_pe' of rank 3 ([T, Hq, P]), got 'tensor<4x64xbf16>'}}
  %0 = mla.rope_kv_cache_update neox %c, %p, %s into %cache positions(%pos, %cs) rotate_q(%q : tensor<4x64xbf16>) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>, tensor<4xi64>, tensor<64x64xf32> rotated_q tensor<4x64xbf16>
  return
}

// -----

func.func @rope_update_k_type(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x16xbf16>, %pos: tensor<4xi64>, %cs: tensor<64x64xf32>) {
  // expected-error @+1 {{expected the rotated k_pe to have type 'tensor<4x64xbf16>', got 'tensor<4x64xf32>'}}
  %0 = mla.rope_kv_cache_update neox %c, %p, %s into %cache positions(%pos, %cs) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x16xbf16>, tensor<4xi64>, tensor<64x64xf32> rotated_k tensor<4x64xf32>
  return
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

// -----

func.func @decode_width(%q: tensor<2x16x512xbf16>, %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x4xi32>, %sl: tensor<2xi32>) {
  // expected-error @+1 {{expected dimension 2 of 'q' (latent + rope of the cache) to be 576, got 512}}
  %0 = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1 : tensor<2x16x512xbf16>, !mla.kv_cache<?x16xbf16>, tensor<2x4xi32>, tensor<2xi32> -> tensor<2x16x512xbf16>
  return
}

// -----

func.func @decode_absorb_width(%q: tensor<2x16x576xbf16>, %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x4xi32>, %sl: tensor<2xi32>, %w: tensor<16x128x512xbf16>) {
  // expected-error @+1 {{expected dimension 2 of 'q' (nope dim of 'w_uk' + rope of the cache) to be 192, got 576}}
  %0 = mla.decode_attention %q, %cache[%bt, %sl] absorb(%w : tensor<16x128x512xbf16>) softmax_scale = 0.1 : tensor<2x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<2x4xi32>, tensor<2xi32> -> tensor<2x16x512xbf16>
  return
}

// -----

func.func @decode_absorb_latent(%q: tensor<2x16x192xbf16>, %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x4xi32>, %sl: tensor<2xi32>, %w: tensor<16x128x256xbf16>) {
  // expected-error @+1 {{expected dimension 2 of 'w_uk' (the latent rank) to be 512, got 256}}
  %0 = mla.decode_attention %q, %cache[%bt, %sl] absorb(%w : tensor<16x128x256xbf16>) softmax_scale = 0.1 : tensor<2x16x192xbf16>, !mla.kv_cache<?x16xbf16>, tensor<2x4xi32>, tensor<2xi32> -> tensor<2x16x512xbf16>
  return
}

// -----

func.func @decode_batch(%q: tensor<2x16x576xbf16>, %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<3x4xi32>, %sl: tensor<2xi32>) {
  // expected-error @+1 {{expected dimension 0 of 'block_table' (batch of 'q') to be 2, got 3}}
  %0 = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1 : tensor<2x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<3x4xi32>, tensor<2xi32> -> tensor<2x16x512xbf16>
  return
}

// -----

func.func @decode_seq_lens(%q: tensor<2x16x576xbf16>, %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x4xi32>, %sl: tensor<3xi32>) {
  // expected-error @+1 {{expected dimension 0 of 'seq_lens' (batch of 'q') to be 2, got 3}}
  %0 = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1 : tensor<2x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<2x4xi32>, tensor<3xi32> -> tensor<2x16x512xbf16>
  return
}

// -----

func.func @decode_needs_kv_scale(%q: tensor<2x16x576xbf16>, %cache: !mla.kv_cache<?x16xf8E4M3FN, per_tensor>, %bt: tensor<2x4xi32>, %sl: tensor<2xi32>) {
  // expected-error @+1 {{reads a per-tensor fp8 cache and needs a 'kv_scale'}}
  %0 = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1 : tensor<2x16x576xbf16>, !mla.kv_cache<?x16xf8E4M3FN, per_tensor>, tensor<2x4xi32>, tensor<2xi32> -> tensor<2x16x512xbf16>
  return
}

// -----

func.func @decode_extra_kv_scale(%q: tensor<2x16x576xbf16>, %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x4xi32>, %sl: tensor<2xi32>, %s: tensor<f32>) {
  // expected-error @+1 {{has a 'kv_scale' but the cache is not a per-tensor fp8 cache}}
  %0 = mla.decode_attention %q, %cache[%bt, %sl] kv_scale %s softmax_scale = 0.1 : tensor<2x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<2x4xi32>, tensor<2xi32> -> tensor<2x16x512xbf16>
  return
}

// -----

func.func @decode_softmax_scale(%q: tensor<2x16x576xbf16>, %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x4xi32>, %sl: tensor<2xi32>) {
  // expected-error @+1 {{expected a positive finite softmax_scale, got 0}}
  %0 = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.0 : tensor<2x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<2x4xi32>, tensor<2xi32> -> tensor<2x16x512xbf16>
  return
}

// -----

func.func @decode_out(%q: tensor<2x16x576xbf16>, %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x4xi32>, %sl: tensor<2xi32>) {
  // expected-error @+1 {{expected dimension 2 of 'out' (the cache's latent rank) to be 512, got 576}}
  %0 = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1 : tensor<2x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<2x4xi32>, tensor<2xi32> -> tensor<2x16x576xbf16>
  return
}

// -----

func.func @decode_out_rank(%q: tensor<2x16x576xbf16>, %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x4xi32>, %sl: tensor<2xi32>) {
  // expected-error @+1 {{expected 'out' to have rank 3, got 'tensor<2x8192xbf16>'}}
  %0 = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1 : tensor<2x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<2x4xi32>, tensor<2xi32> -> tensor<2x8192xbf16>
  return
}

// -----

func.func @decode_lse(%q: tensor<2x16x576xbf16>, %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x4xi32>, %sl: tensor<2xi32>) {
  // expected-error @+1 {{expected dimension 1 of 'lse' (heads of the query) to be 16, got 8}}
  %0, %1 = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1 : tensor<2x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<2x4xi32>, tensor<2xi32> -> tensor<2x16x512xbf16>, tensor<2x8xf32>
  return
}

// -----

func.func @decode_lse_rank(%q: tensor<2x16x576xbf16>, %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x4xi32>, %sl: tensor<2xi32>) {
  // expected-error @+1 {{expected 'lse' to have rank 2 ([rows, H]), got 'tensor<2x16x1xf32>'}}
  %0, %1 = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1 : tensor<2x16x576xbf16>, !mla.kv_cache<?x16xbf16>, tensor<2x4xi32>, tensor<2xi32> -> tensor<2x16x512xbf16>, tensor<2x16x1xf32>
  return
}

// -----

func.func @prefill_k(%q: tensor<4x16x192xbf16>, %k: tensor<4x8x192xbf16>, %v: tensor<4x16x128xbf16>, %qsl: tensor<2xi32>) {
  // expected-error @+1 {{expected dimension 1 of 'k' (heads of 'q') to be 16, got 8}}
  %0 = mla.prefill_attention %q, %k, %v, %qsl softmax_scale = 0.1 : tensor<4x16x192xbf16>, tensor<4x8x192xbf16>, tensor<4x16x128xbf16>, tensor<2xi32> -> tensor<4x16x128xbf16>
  return
}

// -----

func.func @prefill_qsl(%q: tensor<4x16x192xbf16>, %k: tensor<4x16x192xbf16>, %v: tensor<4x16x128xbf16>, %qsl: tensor<0xi32>) {
  // expected-error @+1 {{expected 'query_start_loc' to hold R + 1 >= 1 offsets}}
  %0 = mla.prefill_attention %q, %k, %v, %qsl softmax_scale = 0.1 : tensor<4x16x192xbf16>, tensor<4x16x192xbf16>, tensor<4x16x128xbf16>, tensor<0xi32> -> tensor<4x16x128xbf16>
  return
}

// -----

func.func @prefill_partial_context(%q: tensor<4x16x192xbf16>, %k: tensor<4x16x192xbf16>, %v: tensor<4x16x128xbf16>, %qsl: tensor<2xi32>, %cache: !mla.kv_cache<?x16xbf16>) {
  // expected-error @+1 {{expected the context operands (cache, block_table, seq_lens, w_uk, w_uv) all present or all absent}}
  %0 = "mla.prefill_attention"(%q, %k, %v, %qsl, %cache) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 0, 0, 0>, softmax_scale = 1.0 : f32}>
      : (tensor<4x16x192xbf16>, tensor<4x16x192xbf16>, tensor<4x16x128xbf16>, tensor<2xi32>, !mla.kv_cache<?x16xbf16>) -> tensor<4x16x128xbf16>
  return
}

// -----

func.func @prefill_scale_without_cache(%q: tensor<4x16x192xbf16>, %k: tensor<4x16x192xbf16>, %v: tensor<4x16x128xbf16>, %qsl: tensor<2xi32>, %s: tensor<f32>) {
  // expected-error @+1 {{has a 'kv_scale' but reads no cache}}
  %0 = mla.prefill_attention %q, %k, %v, %qsl kv_scale %s softmax_scale = 0.1 : tensor<4x16x192xbf16>, tensor<4x16x192xbf16>, tensor<4x16x128xbf16>, tensor<2xi32> -> tensor<4x16x128xbf16>
  return
}

// -----

func.func @prefill_context_requests(%q: tensor<4x16x192xbf16>, %k: tensor<4x16x192xbf16>, %v: tensor<4x16x128xbf16>, %qsl: tensor<3xi32>,
                                    %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<3x4xi32>, %sl: tensor<3xi32>, %wk: tensor<16x128x512xbf16>, %wv: tensor<16x512x128xbf16>) {
  // expected-error @+1 {{expected dimension 0 of 'block_table' (requests of 'query_start_loc') to be 2, got 3}}
  %0 = mla.prefill_attention %q, %k, %v, %qsl context(%cache[%bt, %sl], %wk, %wv : !mla.kv_cache<?x16xbf16>, tensor<3x4xi32>, tensor<3xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16>) softmax_scale = 0.1
      : tensor<4x16x192xbf16>, tensor<4x16x192xbf16>, tensor<4x16x128xbf16>, tensor<3xi32> -> tensor<4x16x128xbf16>
  return
}

// -----

func.func @with_update_width(%q: tensor<2x16x192xbf16>, %c: tensor<2x512xbf16>, %p: tensor<2x64xbf16>, %s: tensor<2xi64>, %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x4xi32>, %sl: tensor<2xi32>) {
  // expected-error @+1 {{expected dimension 2 of 'q' (latent + rope of the cache) to be 576, got 192}}
  %0 = mla.decode_attention_with_update %q, %cache[%bt, %sl] update(%c, %p, %s : tensor<2x512xbf16>, tensor<2x64xbf16>, tensor<2xi64>) softmax_scale = 0.1 : tensor<2x16x192xbf16>, !mla.kv_cache<?x16xbf16>, tensor<2x4xi32>, tensor<2xi32> -> tensor<2x16x512xbf16>
  return
}

// -----

func.func @with_update_needs_scale(%q: tensor<2x16x576xbf16>, %c: tensor<2x512xf8E4M3FN>, %p: tensor<2x64xf8E4M3FN>, %s: tensor<2xi64>, %cache: !mla.kv_cache<?x16xf8E4M3FN, per_tensor>, %bt: tensor<2x4xi32>, %sl: tensor<2xi32>) {
  // expected-error @+1 {{reads a per-tensor fp8 cache and needs a 'kv_scale'}}
  %0 = mla.decode_attention_with_update %q, %cache[%bt, %sl] update(%c, %p, %s : tensor<2x512xf8E4M3FN>, tensor<2x64xf8E4M3FN>, tensor<2xi64>) softmax_scale = 0.1 : tensor<2x16x576xbf16>, !mla.kv_cache<?x16xf8E4M3FN, per_tensor>, tensor<2x4xi32>, tensor<2xi32> -> tensor<2x16x512xbf16>
  return
}

// -----

func.func @attention_decode_qsl(%q: tensor<2x16x192xbf16>, %c: tensor<2x512xbf16>, %p: tensor<2x64xbf16>, %s: tensor<2xi64>, %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x4xi32>, %sl: tensor<2xi32>,
                                %wk: tensor<16x128x512xbf16>, %wv: tensor<16x512x128xbf16>, %qsl: tensor<3xi32>) {
  // expected-error @+1 {{decode attention takes no 'query_start_loc' (one token a request)}}
  %0 = mla.attention decode %q, %c, %p, %s into %cache[%bt, %sl] weights(%wk, %wv) query_start_loc(%qsl : tensor<3xi32>) softmax_scale = 0.1
      : tensor<2x16x192xbf16>, tensor<2x512xbf16>, tensor<2x64xbf16>, tensor<2xi64> into !mla.kv_cache<?x16xbf16>, tensor<2x4xi32>, tensor<2xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16> -> tensor<2x16x128xbf16>
  return
}

// -----

func.func @attention_prefill_no_qsl(%q: tensor<2x16x192xbf16>, %c: tensor<2x512xbf16>, %p: tensor<2x64xbf16>, %s: tensor<2xi64>, %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x4xi32>, %sl: tensor<2xi32>,
                                    %wk: tensor<16x128x512xbf16>, %wv: tensor<16x512x128xbf16>) {
  // expected-error @+1 {{prefill attention needs 'query_start_loc'}}
  %0 = mla.attention prefill %q, %c, %p, %s into %cache[%bt, %sl] weights(%wk, %wv) softmax_scale = 0.1
      : tensor<2x16x192xbf16>, tensor<2x512xbf16>, tensor<2x64xbf16>, tensor<2xi64> into !mla.kv_cache<?x16xbf16>, tensor<2x4xi32>, tensor<2xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16> -> tensor<2x16x128xbf16>
  return
}

// -----

func.func @attention_out(%q: tensor<2x16x192xbf16>, %c: tensor<2x512xbf16>, %p: tensor<2x64xbf16>, %s: tensor<2xi64>, %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x4xi32>, %sl: tensor<2xi32>,
                         %wk: tensor<16x128x512xbf16>, %wv: tensor<16x512x128xbf16>) {
  // expected-error @+1 {{expected dimension 2 of 'out' (the value dim of 'w_uv') to be 128, got 512}}
  %0 = mla.attention decode %q, %c, %p, %s into %cache[%bt, %sl] weights(%wk, %wv) softmax_scale = 0.1
      : tensor<2x16x192xbf16>, tensor<2x512xbf16>, tensor<2x64xbf16>, tensor<2xi64> into !mla.kv_cache<?x16xbf16>, tensor<2x4xi32>, tensor<2xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16> -> tensor<2x16x512xbf16>
  return
}

// -----

func.func @attention_tokens(%q: tensor<2x16x192xbf16>, %c: tensor<3x512xbf16>, %p: tensor<3x64xbf16>, %s: tensor<3xi64>, %cache: !mla.kv_cache<?x16xbf16>, %bt: tensor<2x4xi32>, %sl: tensor<2xi32>,
                            %wk: tensor<16x128x512xbf16>, %wv: tensor<16x512x128xbf16>) {
  // expected-error @+1 {{expected dimension 0 of 'kv_c' (tokens of 'q') to be 2, got 3}}
  %0 = mla.attention decode %q, %c, %p, %s into %cache[%bt, %sl] weights(%wk, %wv) softmax_scale = 0.1
      : tensor<2x16x192xbf16>, tensor<3x512xbf16>, tensor<3x64xbf16>, tensor<3xi64> into !mla.kv_cache<?x16xbf16>, tensor<2x4xi32>, tensor<2xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16> -> tensor<2x16x128xbf16>
  return
}

// -----

func.func @linear_features(%x: tensor<4x2048xbf16>, %w: tensor<576x1024xbf16>) {
  // expected-error @+1 {{expected dimension 1 of 'weight' (input features of 'input') to be 2048, got 1024}}
  %0 = mla.linear %x, %w : tensor<4x2048xbf16>, tensor<576x1024xbf16> -> tensor<4x576xbf16>
  return
}

// -----

func.func @linear_out(%x: tensor<4x2048xbf16>, %w: tensor<576x2048xbf16>) {
  // expected-error @+1 {{expected dimension 1 of 'result' (output features of 'weight') to be 576, got 512}}
  %0 = mla.linear %x, %w : tensor<4x2048xbf16>, tensor<576x2048xbf16> -> tensor<4x512xbf16>
  return
}

// -----

func.func @linear_addend_dtype(%x: tensor<4x2048xbf16>, %w: tensor<576x2048xbf16>, %r: tensor<4x576xf32>) {
  // expected-error @+1 {{expected 'addend' to have the result's element type 'bf16', got 'f32'}}
  %0 = mla.linear %x, %w addend(%r : tensor<4x576xf32>) : tensor<4x2048xbf16>, tensor<576x2048xbf16> -> tensor<4x576xbf16>
  return
}

// -----

func.func @linear_addend_features(%x: tensor<4x2048xbf16>, %w: tensor<576x2048xbf16>, %r: tensor<4x512xbf16>) {
  // expected-error @+1 {{expected dimension 1 of 'addend' (output features of the result) to be 576, got 512}}
  %0 = mla.linear %x, %w addend(%r : tensor<4x512xbf16>) : tensor<4x2048xbf16>, tensor<576x2048xbf16> -> tensor<4x576xbf16>
  return
}

// -----

func.func @linear_addend_tokens(%x: tensor<4x2048xbf16>, %w: tensor<576x2048xbf16>, %r: tensor<8x576xbf16>) {
  // expected-error @+1 {{expected dimension 0 of 'addend' (tokens of the result) to be 4, got 8}}
  %0 = mla.linear %x, %w addend(%r : tensor<8x576xbf16>) : tensor<4x2048xbf16>, tensor<576x2048xbf16> -> tensor<4x576xbf16>
  return
}

// -----

func.func @linear_addend_rank(%x: tensor<4x2048xbf16>, %w: tensor<576x2048xbf16>, %r: tensor<576xbf16>) {
  // expected-error @+1 {{operand #2 must be 2D tensor of bfloat16 type or 16-bit float or 32-bit float values}}
  %0 = mla.linear %x, %w addend(%r : tensor<576xbf16>) : tensor<4x2048xbf16>, tensor<576x2048xbf16> -> tensor<4x576xbf16>
  return
}

// -----

func.func @rms_norm_weight(%x: tensor<4x512xbf16>, %g: tensor<256xbf16>) {
  // expected-error @+1 {{expected dimension 0 of 'weight' (features) to be 512, got 256}}
  %0 = mla.rms_norm %x, %g : tensor<4x512xbf16>, tensor<256xbf16>
  return
}

// -----

func.func @rms_norm_eps(%x: tensor<4x512xbf16>, %g: tensor<512xbf16>) {
  // expected-error @+1 {{expected a positive epsilon}}
  %0 = mla.rms_norm %x, %g {epsilon = 0.0 : f32} : tensor<4x512xbf16>, tensor<512xbf16>
  return
}

// -----

// expected-error @+1 {{'mla.name' must be a non-empty string}}
func.func private @empty_name(tensor<4xi64> {mla.name = ""})

// -----

// expected-error @+1 {{'mla.name' must be a non-empty string}}
func.func private @name_not_string() -> (tensor<4xi64> {mla.name = 3 : i32})

// -----

// A runtime buffer name is a C string.
// expected-error @+1 {{'mla.name' must be a non-empty string without NUL bytes}}
func.func private @name_with_nul(tensor<4xi64> {mla.name = "slot\00_mapping"})

// -----

// expected-error @+1 {{unknown mla result attribute 'mla.noalias'}}
func.func private @result_noalias() -> (tensor<4xi64> {mla.noalias})

// -----

func.func @rope_update_norm_weight_shape(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %pos: tensor<4xi64>, %cs: tensor<64x64xf32>, %w: tensor<576xbf16>) {
  // expected-error @+1 {{expected dimension 0 of 'latent_norm weight' (the cache's latent rank) to be 512, got 576}}
  mla.rope_kv_cache_update neox %c, %p, %s into %cache positions(%pos, %cs) latent_norm(%w : tensor<576xbf16>, epsilon = 1.0e-6) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<64x64xf32>
  return
}

// -----

func.func @rope_update_norm_weight_rank(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %pos: tensor<4xi64>, %cs: tensor<64x64xf32>, %w: tensor<1x512xbf16>) {
  // expected-error @+1 {{operand #6 must be 1D tensor of bfloat16 type or 16-bit float or 32-bit float values}}
  mla.rope_kv_cache_update neox %c, %p, %s into %cache positions(%pos, %cs) latent_norm(%w : tensor<1x512xbf16>, epsilon = 1.0e-6) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<64x64xf32>
  return
}

// -----

func.func @rope_update_norm_weight_type(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %pos: tensor<4xi64>, %cs: tensor<64x64xf32>, %w: tensor<512xi8>) {
  // expected-error @+1 {{operand #6 must be 1D tensor of bfloat16 type or 16-bit float or 32-bit float values}}
  mla.rope_kv_cache_update neox %c, %p, %s into %cache positions(%pos, %cs) latent_norm(%w : tensor<512xi8>, epsilon = 1.0e-6) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<64x64xf32>
  return
}

// -----

func.func @rope_update_norm_epsilon(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %pos: tensor<4xi64>, %cs: tensor<64x64xf32>, %w: tensor<512xbf16>) {
  // expected-error @+1 {{expected a positive latent norm epsilon}}
  mla.rope_kv_cache_update neox %c, %p, %s into %cache positions(%pos, %cs) latent_norm(%w : tensor<512xbf16>, epsilon = 0.0) : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>, tensor<4xi64>, tensor<64x64xf32>
  return
}

// -----

func.func @rope_update_norm_no_epsilon(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %pos: tensor<4xi64>, %cs: tensor<64x64xf32>, %w: tensor<512xbf16>) {
  // expected-error @+1 {{expected a latent norm weight and epsilon together}}
  "mla.rope_kv_cache_update"(%c, %p, %pos, %cs, %s, %cache, %w) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 1>, resultSegmentSizes = array<i32: 0, 0>, style = 1 : i32}>
      : (tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64>, tensor<64x64xf32>, tensor<4xi64>, !mla.kv_cache<?x64xbf16>, tensor<512xbf16>) -> ()
  return
}

// -----

func.func @rope_update_norm_no_weight(%c: tensor<4x512xbf16>, %p: tensor<4x64xbf16>, %s: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>, %pos: tensor<4xi64>, %cs: tensor<64x64xf32>) {
  // expected-error @+1 {{expected a latent norm weight and epsilon together}}
  "mla.rope_kv_cache_update"(%c, %p, %pos, %cs, %s, %cache) <{latent_norm_epsilon = 1.0e-6 : f32, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0>, resultSegmentSizes = array<i32: 0, 0>, style = 1 : i32}>
      : (tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64>, tensor<64x64xf32>, tensor<4xi64>, !mla.kv_cache<?x64xbf16>) -> ()
  return
}
