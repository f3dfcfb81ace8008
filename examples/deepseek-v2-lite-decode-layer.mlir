// One DeepSeek-V2-Lite attention layer, decode step, batch 8, written the way
// serving engines had it: monolithic mla.attention that writes and reads the
// cache. Hidden 2048, 16 heads, q_proj without LoRA, kv_lora_rank 512,
// qk_nope 128, rope 64 (GPT-J style), v_head 128, block size 64.
// softmax_scale = 192^-0.5 * mscale^2 (YaRN, mscale = 0.0707 * ln(40) + 1).
//
//   mla-opt examples/deepseek-v2-lite-decode-layer.mlir -mla-decode-pipeline

func.func @decode_layer(
    %x: tensor<8x2048xbf16> {mla.name = "hidden_states"},            // hidden states, one token a request
    %positions: tensor<8xi64> {mla.name = "positions"},
    %slot_mapping: tensor<8xi64> {mla.name = "slot_mapping"},
    %block_table: tensor<8x64xi32> {mla.name = "block_table"},
    %seq_lens: tensor<8xi32> {mla.name = "seq_lens"},           // lengths after this step
    %cache: !mla.kv_cache<?x64xbf16> {mla.name = "model.layers.0.kv_cache", mla.noalias},
    %cos_sin: tensor<8192x64xf32> {mla.name = "cos_sin_cache"},
    %w_input_norm: tensor<2048xbf16> {mla.name = "model.layers.0.input_layernorm.weight"},
    %w_q: tensor<3072x2048xbf16> {mla.name = "model.layers.0.self_attn.q_proj.weight"},
    %w_kv_a: tensor<576x2048xbf16> {mla.name = "model.layers.0.self_attn.kv_a_proj_with_mqa.weight"},
    %w_kv_norm: tensor<512xbf16> {mla.name = "model.layers.0.self_attn.kv_a_layernorm.weight"},
    %w_uk: tensor<16x128x512xbf16> {mla.name = "model.layers.0.self_attn.w_uk"},
    %w_uv: tensor<16x512x128xbf16> {mla.name = "model.layers.0.self_attn.w_uv"},
    %w_o: tensor<2048x2048xbf16> {mla.name = "model.layers.0.self_attn.o_proj.weight"}) -> (tensor<8x2048xbf16> {mla.name = "hidden_states_out"}) {
  %h = mla.rms_norm %x, %w_input_norm : tensor<8x2048xbf16>, tensor<2048xbf16>

  // Query: project, split into nope and rope parts, rotate the rope part.
  %q_flat = mla.linear %h, %w_q : tensor<8x2048xbf16>, tensor<3072x2048xbf16> -> tensor<8x3072xbf16>
  %q = tensor.expand_shape %q_flat [[0], [1, 2]] output_shape [8, 16, 192]
      : tensor<8x3072xbf16> into tensor<8x16x192xbf16>
  %q_nope = tensor.extract_slice %q[0, 0, 0] [8, 16, 128] [1, 1, 1]
      : tensor<8x16x192xbf16> to tensor<8x16x128xbf16>
  %q_pe = tensor.extract_slice %q[0, 0, 128] [8, 16, 64] [1, 1, 1]
      : tensor<8x16x192xbf16> to tensor<8x16x64xbf16>
  %q_pe_rot = mla.rope gptj %q_pe, %positions, %cos_sin
      : tensor<8x16x64xbf16>, tensor<8xi64>, tensor<8192x64xf32>
  %q_rot = tensor.concat dim(2) %q_nope, %q_pe_rot
      : (tensor<8x16x128xbf16>, tensor<8x16x64xbf16>) -> tensor<8x16x192xbf16>

  // Latent KV: project, split, normalise the latent, rotate k_pe.
  %kv = mla.linear %h, %w_kv_a : tensor<8x2048xbf16>, tensor<576x2048xbf16> -> tensor<8x576xbf16>
  %kv_c = tensor.extract_slice %kv[0, 0] [8, 512] [1, 1] : tensor<8x576xbf16> to tensor<8x512xbf16>
  %k_pe = tensor.extract_slice %kv[0, 512] [8, 64] [1, 1] : tensor<8x576xbf16> to tensor<8x64xbf16>
  %kv_c_norm = mla.rms_norm %kv_c, %w_kv_norm : tensor<8x512xbf16>, tensor<512xbf16>
  %k_pe_rot = mla.rope gptj %k_pe, %positions, %cos_sin
      : tensor<8x64xbf16>, tensor<8xi64>, tensor<8192x64xf32>

  // The side effect engines hide inside the attention call.
  %attn = mla.attention decode %q_rot, %kv_c_norm, %k_pe_rot, %slot_mapping into %cache[%block_table, %seq_lens]
      weights(%w_uk, %w_uv) softmax_scale = 0.114721403
      : tensor<8x16x192xbf16>, tensor<8x512xbf16>, tensor<8x64xbf16>, tensor<8xi64>
        into !mla.kv_cache<?x64xbf16>, tensor<8x64xi32>, tensor<8xi32>,
        tensor<16x128x512xbf16>, tensor<16x512x128xbf16> -> tensor<8x16x128xbf16>

  %attn_flat = tensor.collapse_shape %attn [[0], [1, 2]] : tensor<8x16x128xbf16> into tensor<8x2048xbf16>
  %out = mla.linear %attn_flat, %w_o : tensor<8x2048xbf16>, tensor<2048x2048xbf16> -> tensor<8x2048xbf16>
  return %out : tensor<8x2048xbf16>
}
