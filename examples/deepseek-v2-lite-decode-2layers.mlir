// Generated shape of a DeepSeek-V2-Lite step (hidden 2048, 16 heads, kv_lora_rank 512,
// nope 128, rope 64, v 128, block size 64) with monolithic mla.attention and a
// residual per layer. Used by the pipeline tests.

func.func @decode_step(
    %x: tensor<8x2048xbf16>,
    %positions: tensor<8xi64>,
    %slot_mapping: tensor<8xi64>,
    %block_table: tensor<8x64xi32>,
    %seq_lens: tensor<8xi32>,
    %cos_sin: tensor<8192x64xf32>,
    %l0_cache: !mla.kv_cache<?x64xbf16> {mla.noalias},
    %l0_w_in_norm: tensor<2048xbf16>,
    %l0_w_q: tensor<3072x2048xbf16>,
    %l0_w_kv_a: tensor<576x2048xbf16>,
    %l0_w_kv_norm: tensor<512xbf16>,
    %l0_w_uk: tensor<16x128x512xbf16>,
    %l0_w_uv: tensor<16x512x128xbf16>,
    %l0_w_o: tensor<2048x2048xbf16>,
    %l1_cache: !mla.kv_cache<?x64xbf16> {mla.noalias},
    %l1_w_in_norm: tensor<2048xbf16>,
    %l1_w_q: tensor<3072x2048xbf16>,
    %l1_w_kv_a: tensor<576x2048xbf16>,
    %l1_w_kv_norm: tensor<512xbf16>,
    %l1_w_uk: tensor<16x128x512xbf16>,
    %l1_w_uv: tensor<16x512x128xbf16>,
    %l1_w_o: tensor<2048x2048xbf16>)
    -> tensor<8x2048xbf16> {
  %l0_h = mla.rms_norm %x, %l0_w_in_norm : tensor<8x2048xbf16>, tensor<2048xbf16>
  %l0_qf = mla.linear %l0_h, %l0_w_q : tensor<8x2048xbf16>, tensor<3072x2048xbf16> -> tensor<8x3072xbf16>
  %l0_q = tensor.expand_shape %l0_qf [[0], [1, 2]] output_shape [8, 16, 192] : tensor<8x3072xbf16> into tensor<8x16x192xbf16>
  %l0_q_nope = tensor.extract_slice %l0_q[0, 0, 0] [8, 16, 128] [1, 1, 1] : tensor<8x16x192xbf16> to tensor<8x16x128xbf16>
  %l0_q_pe = tensor.extract_slice %l0_q[0, 0, 128] [8, 16, 64] [1, 1, 1] : tensor<8x16x192xbf16> to tensor<8x16x64xbf16>
  %l0_q_pe_rot = mla.rope gptj %l0_q_pe, %positions, %cos_sin : tensor<8x16x64xbf16>, tensor<8xi64>, tensor<8192x64xf32>
  %l0_q_rot = tensor.concat dim(2) %l0_q_nope, %l0_q_pe_rot : (tensor<8x16x128xbf16>, tensor<8x16x64xbf16>) -> tensor<8x16x192xbf16>
  %l0_kv = mla.linear %l0_h, %l0_w_kv_a : tensor<8x2048xbf16>, tensor<576x2048xbf16> -> tensor<8x576xbf16>
  %l0_kv_c = tensor.extract_slice %l0_kv[0, 0] [8, 512] [1, 1] : tensor<8x576xbf16> to tensor<8x512xbf16>
  %l0_k_pe = tensor.extract_slice %l0_kv[0, 512] [8, 64] [1, 1] : tensor<8x576xbf16> to tensor<8x64xbf16>
  %l0_kv_c_norm = mla.rms_norm %l0_kv_c, %l0_w_kv_norm : tensor<8x512xbf16>, tensor<512xbf16>
  %l0_k_pe_rot = mla.rope gptj %l0_k_pe, %positions, %cos_sin : tensor<8x64xbf16>, tensor<8xi64>, tensor<8192x64xf32>
  %l0_attn = mla.attention decode %l0_q_rot, %l0_kv_c_norm, %l0_k_pe_rot, %slot_mapping into %l0_cache[%block_table, %seq_lens] weights(%l0_w_uk, %l0_w_uv) softmax_scale = 0.114721403
      : tensor<8x16x192xbf16>, tensor<8x512xbf16>, tensor<8x64xbf16>, tensor<8xi64> into !mla.kv_cache<?x64xbf16>, tensor<8x64xi32>, tensor<8xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16> -> tensor<8x16x128xbf16>
  %l0_attn_flat = tensor.collapse_shape %l0_attn [[0], [1, 2]] : tensor<8x16x128xbf16> into tensor<8x2048xbf16>
  %l0_o = mla.linear %l0_attn_flat, %l0_w_o : tensor<8x2048xbf16>, tensor<2048x2048xbf16> -> tensor<8x2048xbf16>
  %l0_out = arith.addf %x, %l0_o : tensor<8x2048xbf16>
  %l1_h = mla.rms_norm %l0_out, %l1_w_in_norm : tensor<8x2048xbf16>, tensor<2048xbf16>
  %l1_qf = mla.linear %l1_h, %l1_w_q : tensor<8x2048xbf16>, tensor<3072x2048xbf16> -> tensor<8x3072xbf16>
  %l1_q = tensor.expand_shape %l1_qf [[0], [1, 2]] output_shape [8, 16, 192] : tensor<8x3072xbf16> into tensor<8x16x192xbf16>
  %l1_q_nope = tensor.extract_slice %l1_q[0, 0, 0] [8, 16, 128] [1, 1, 1] : tensor<8x16x192xbf16> to tensor<8x16x128xbf16>
  %l1_q_pe = tensor.extract_slice %l1_q[0, 0, 128] [8, 16, 64] [1, 1, 1] : tensor<8x16x192xbf16> to tensor<8x16x64xbf16>
  %l1_q_pe_rot = mla.rope gptj %l1_q_pe, %positions, %cos_sin : tensor<8x16x64xbf16>, tensor<8xi64>, tensor<8192x64xf32>
  %l1_q_rot = tensor.concat dim(2) %l1_q_nope, %l1_q_pe_rot : (tensor<8x16x128xbf16>, tensor<8x16x64xbf16>) -> tensor<8x16x192xbf16>
  %l1_kv = mla.linear %l1_h, %l1_w_kv_a : tensor<8x2048xbf16>, tensor<576x2048xbf16> -> tensor<8x576xbf16>
  %l1_kv_c = tensor.extract_slice %l1_kv[0, 0] [8, 512] [1, 1] : tensor<8x576xbf16> to tensor<8x512xbf16>
  %l1_k_pe = tensor.extract_slice %l1_kv[0, 512] [8, 64] [1, 1] : tensor<8x576xbf16> to tensor<8x64xbf16>
  %l1_kv_c_norm = mla.rms_norm %l1_kv_c, %l1_w_kv_norm : tensor<8x512xbf16>, tensor<512xbf16>
  %l1_k_pe_rot = mla.rope gptj %l1_k_pe, %positions, %cos_sin : tensor<8x64xbf16>, tensor<8xi64>, tensor<8192x64xf32>
  %l1_attn = mla.attention decode %l1_q_rot, %l1_kv_c_norm, %l1_k_pe_rot, %slot_mapping into %l1_cache[%block_table, %seq_lens] weights(%l1_w_uk, %l1_w_uv) softmax_scale = 0.114721403
      : tensor<8x16x192xbf16>, tensor<8x512xbf16>, tensor<8x64xbf16>, tensor<8xi64> into !mla.kv_cache<?x64xbf16>, tensor<8x64xi32>, tensor<8xi32>, tensor<16x128x512xbf16>, tensor<16x512x128xbf16> -> tensor<8x16x128xbf16>
  %l1_attn_flat = tensor.collapse_shape %l1_attn [[0], [1, 2]] : tensor<8x16x128xbf16> into tensor<8x2048xbf16>
  %l1_o = mla.linear %l1_attn_flat, %l1_w_o : tensor<8x2048xbf16>, tensor<2048x2048xbf16> -> tensor<8x2048xbf16>
  %l1_out = arith.addf %l0_out, %l1_o : tensor<8x2048xbf16>
  return %l1_out : tensor<8x2048xbf16>
}
