// Generated shape of a DeepSeek-V2-Lite step (hidden 2048, 16 heads, kv_lora_rank 512,
// nope 128, rope 64, v 128, block size 64) with monolithic mla.attention and a
// residual per layer. Used by the pipeline tests.

func.func @prefill_step(
    %x: tensor<24x2048xbf16>,
    %positions: tensor<24xi64>,
    %slot_mapping: tensor<24xi64>,
    %block_table: tensor<3x64xi32>,
    %seq_lens: tensor<3xi32>,
    %cos_sin: tensor<8192x64xf32>,
    %query_start_loc: tensor<4xi32>,
    %l0_cache: !mla.kv_cache<?x64xbf16> {mla.noalias},
    %l0_w_in_norm: tensor<2048xbf16>,
    %l0_w_q: tensor<3072x2048xbf16>,
    %l0_w_kv_a: tensor<576x2048xbf16>,
    %l0_w_kv_norm: tensor<512xbf16>,
    %l0_w_uk: tensor<16x128x512xbf16>,
    %l0_w_uv: tensor<16x512x128xbf16>,
    %l0_w_o: tensor<2048x2048xbf16>)
    -> tensor<24x2048xbf16> {
  %l0_h = mla.rms_norm %x, %l0_w_in_norm : tensor<24x2048xbf16>, tensor<2048xbf16>
  %l0_qf = mla.linear %l0_h, %l0_w_q : tensor<24x2048xbf16>, tensor<3072x2048xbf16> -> tensor<24x3072xbf16>
  %l0_q = tensor.expand_shape %l0_qf [[0], [1, 2]] output_shape [24, 16, 192] : tensor<24x3072xbf16> into tensor<24x16x192xbf16>
  %l0_q_nope = tensor.extract_slice %l0_q[0, 0, 0] [24, 16, 128] [1, 1, 1] : tensor<24x16x192xbf16> to tensor<24x16x128xbf16>
  %l0_q_pe = tensor.extract_slice %l0_q[0, 0, 128] [24, 16, 64] [1, 1, 1] : tensor<24x16x192xbf16> to tensor<24x16x64xbf16>
  %l0_q_pe_rot = mla.rope gptj %l0_q_pe, %positions, %cos_sin : tensor<24x16x64xbf16>, tensor<24xi64>, tensor<8192x64xf32>
  %l0_q_rot = tensor.concat dim(2) %l0_q_nope, %l0_q_pe_rot : (tensor<24x16x128xbf16>, tensor<24x16x64xbf16>) -> tensor<24x16x192xbf16>
  %l0_kv = mla.linear %l0_h, %l0_w_kv_a : tensor<24x2048xbf16>, tensor<576x2048xbf16> -> tensor<24x576xbf16>
  %l0_kv_c = tensor.extract_slice %l0_kv[0, 0] [24, 512] [1, 1] : tensor<24x576xbf16> to tensor<24x512xbf16>
  %l0_k_pe = tensor.extract_slice %l0_kv[0, 512] [24, 64] [1, 1] : tensor<24x576xbf16> to tensor<24x64xbf16>
  %l0_kv_c_norm = mla.rms_norm %l0_kv_c, %l0_w_kv_norm : tensor<24x512xbf16>, tensor<512xbf16>
  %l0_k_pe_rot = mla.rope gptj %l0_k_pe, %positions, %cos_sin : tensor<24x64xbf16>, tensor<24xi64>, tensor<8192x64xf32>
  %l0_attn = mla.attention prefill %l0_q_rot, %l0_kv_c_norm, %l0_k_pe_rot, %slot_mapping into %l0_cache[%block_table, %seq_lens] weights(%l0_w_uk, %l0_w_uv) query_start_loc(%query_start_loc : tensor<4xi32>) softmax_scale = 0.114721403
      : tensor<24x16x192xbf16>, tensor<24x512xbf16>, tensor<24x64xbf16>, tensor<24xi64> into !mla.kv_cache<?x64xbf16>, tensor<3x64xi32>, tensor<3xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16> -> tensor<24x16x128xbf16>
  %l0_attn_flat = tensor.collapse_shape %l0_attn [[0], [1, 2]] : tensor<24x16x128xbf16> into tensor<24x2048xbf16>
  %l0_o = mla.linear %l0_attn_flat, %l0_w_o : tensor<24x2048xbf16>, tensor<2048x2048xbf16> -> tensor<24x2048xbf16>
  %l0_out = arith.addf %x, %l0_o : tensor<24x2048xbf16>
  return %l0_out : tensor<24x2048xbf16>
}
