//===- MLAOps.td - Ops of the mla dialect ---------------------------------===//
//
// Shapes use these names: T tokens, B batch (decode: one token a request),
// H heads, R requests, L = latent rank (512), P = rope dim (64),
// N = nope head dim (128), V = value head dim (128).
//
//===----------------------------------------------------------------------===//
#ifndef MLA_OPS_TD
#define MLA_OPS_TD

include "mla/Dialect/MLA/IR/MLABase.td"
include "mla/Dialect/MLA/IR/MLAAttrs.td"
include "mla/Dialect/MLA/IR/MLATypes.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def MLA_FloatTensor : RankedTensorOf<[BF16, F16, F32]>;
def MLA_AnyFloatTensor : RankedTensorOf<[BF16, F16, F32, F8E4M3FN]>;
def MLA_Fp8Tensor : RankedTensorOf<[F8E4M3FN]>;
def MLA_Float2D : 2DTensorOf<[BF16, F16, F32, F8E4M3FN]>;
def MLA_Float3D : 3DTensorOf<[BF16, F16, F32, F8E4M3FN]>;
def MLA_WeightTensor : 3DTensorOf<[BF16, F16, F32]>;
def MLA_SlotMapping : 1DTensorOf<[I64, I32]>;
def MLA_Positions : 1DTensorOf<[I64, I32]>;
def MLA_I32Vector : 1DTensorOf<[I32]>;
def MLA_BlockTable : 2DTensorOf<[I32]>;
def MLA_CosSinTable : 2DTensorOf<[BF16, F16, F32]>;
def MLA_Lse : RankedTensorOf<[F32]>;

/// A runtime scale: `tensor<f32>`.
def MLA_ScaleTensor : Type<
    And<[IsTensorTypePred, HasAnyRankOfPred<[0]>,
         SubstLeaves<"$_self", "::llvm::cast<::mlir::ShapedType>($_self).getElementType()", F32.predicate>]>,
    "0-d f32 tensor (a scale)", "::mlir::RankedTensorType">,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;

//===----------------------------------------------------------------------===//
// Pure tensor ops
//===----------------------------------------------------------------------===//

def MLA_RopeOp : MLA_Op<"rope", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "rotary position embedding of the last dimension";
  let description = [{
    Rotates the last dimension (P values) of `input` (`[T, ..., P]`) by the
    angle of `positions[t]`. `cos_sin` is `[max_position, P]`: the first P/2
    columns hold cos, the last P/2 hold sin (vLLM's `cos_sin_cache`).
    `gptj` rotates interleaved pairs (2i, 2i+1); `neox` rotates halves
    (i, i + P/2).

    ```mlir
    %r = mla.rope neox %k_pe, %pos, %cos_sin
        : tensor<4x64xbf16>, tensor<4xi64>, tensor<8192x64xf32>
    ```
  }];
  let arguments = (ins MLA_RopeStyle:$style, MLA_FloatTensor:$input,
                       MLA_Positions:$positions, MLA_CosSinTable:$cos_sin);
  let results = (outs MLA_FloatTensor:$result);
  let assemblyFormat = [{
    $style $input `,` $positions `,` $cos_sin attr-dict
    `:` type($input) `,` type($positions) `,` type($cos_sin)
  }];
  let hasVerifier = 1;
}

def MLA_QAbsorbOp : MLA_Op<"q_absorb", [Pure]> {
  let summary = "absorb W_UK into the query: q_nope @ W_UK";
  let description = [{
    `result[b, h, :] = q_nope[b, h, :] @ w_uk[h]` with `q_nope` `[B, H, N]`,
    `w_uk` `[H, N, L]` and a `[B, H, L]` result: the query in latent space.
  }];
  let arguments = (ins MLA_FloatTensor:$q_nope, MLA_WeightTensor:$w_uk);
  let results = (outs MLA_FloatTensor:$result);
  let assemblyFormat = [{
    $q_nope `,` $w_uk attr-dict `:` type($q_nope) `,` type($w_uk) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MLA_QConcatOp : MLA_Op<"q_concat", [Pure]> {
  let summary = "assemble the decode query: concat(q_latent, q_pe)";
  let description = [{
    `[B, H, L]` and `[B, H, P]` become the `[B, H, L + P]` query of
    `mla.decode_attention`.
  }];
  let arguments = (ins MLA_FloatTensor:$q_latent, MLA_FloatTensor:$q_pe);
  let results = (outs MLA_FloatTensor:$result);
  let assemblyFormat = [{
    $q_latent `,` $q_pe attr-dict `:` type($q_latent) `,` type($q_pe) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MLA_QuantizeOp : MLA_Op<"quantize", [Pure]> {
  let summary = "per-tensor fp8 quantisation: saturate(x / scale)";
  let description = [{
    Converts a float tensor to `f8E4M3FN` with a runtime per-tensor scale,
    rounding to nearest even and saturating to +-448. The result has the
    input's shape.
  }];
  let arguments = (ins MLA_FloatTensor:$input, MLA_ScaleTensor:$scale);
  let results = (outs MLA_Fp8Tensor:$result);
  let assemblyFormat = [{
    $input `,` $scale attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MLA_VUpOp : MLA_Op<"v_up", [Pure]> {
  let summary = "V up-projection of the latent attention output";
  let description = [{
    `result[b, h, :] = o_latent[b, h, :] @ w_uv[h]` with `o_latent`
    `[B, H, L]`, `w_uv` `[H, L, V]` and a `[B, H, V]` result.
  }];
  let arguments = (ins MLA_FloatTensor:$o_latent, MLA_WeightTensor:$w_uv);
  let results = (outs MLA_FloatTensor:$result);
  let assemblyFormat = [{
    $o_latent `,` $w_uv attr-dict `:` type($o_latent) `,` type($w_uv) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MLA_DecompressKVOp : MLA_Op<"decompress_kv", [Pure]> {
  let summary = "MHA keys and values of new tokens from their latents";
  let description = [{
    For prefill: `k[t, h] = concat(kv_c[t] @ w_uk[h]^T, k_pe[t])` (`[T, H, N + P]`)
    and `v[t, h] = kv_c[t] @ w_uv[h]` (`[T, H, V]`), with `kv_c` `[T, L]`,
    `k_pe` `[T, P]` (already rotated), `w_uk` `[H, N, L]`, `w_uv` `[H, L, V]`.
  }];
  let arguments = (ins MLA_FloatTensor:$kv_c, MLA_FloatTensor:$k_pe,
                       MLA_WeightTensor:$w_uk, MLA_WeightTensor:$w_uv);
  let results = (outs MLA_FloatTensor:$k, MLA_FloatTensor:$v);
  let assemblyFormat = [{
    $kv_c `,` $k_pe `,` $w_uk `,` $w_uv attr-dict `:` type($kv_c) `,`
    type($k_pe) `,` type($w_uk) `,` type($w_uv) `->` type($k) `,` type($v)
  }];
  let hasVerifier = 1;
}

def MLA_LinearOp : MLA_Op<"linear", [Pure]> {
  let summary = "dense projection: x @ weight^T, optionally + addend";
  let description = [{
    `result [T, N] = input [T, K] @ weight^T` with `weight` `[N, K]` (the
    PyTorch `Linear` layout of checkpoints). Accumulates in f32.

    With `addend(%r)` (`[T, N]`, the result's type) the op computes
    `input @ weight^T + r` and rounds once to the result type: the residual
    connection in the GEMM's epilogue (`mla-fuse-linear-addend`). The addend
    is only read; the result is a new value.

    ```mlir
    %h = mla.linear %attn, %w_o addend(%hidden : tensor<64x2048xbf16>)
        : tensor<64x2048xbf16>, tensor<2048x2048xbf16> -> tensor<64x2048xbf16>
    ```
  }];
  let arguments = (ins 2DTensorOf<[BF16, F16, F32]>:$input,
                       2DTensorOf<[BF16, F16, F32]>:$weight,
                       Optional<2DTensorOf<[BF16, F16, F32]>>:$addend);
  let results = (outs 2DTensorOf<[BF16, F16, F32]>:$result);
  let assemblyFormat = [{
    $input `,` $weight (`addend` `(` $addend^ `:` type($addend) `)`)? attr-dict
    `:` type($input) `,` type($weight) `->` type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$input,
                   "::mlir::Value":$weight), [{
      build($_builder, $_state, result, input, weight, ::mlir::Value());
    }]>
  ];
  let hasVerifier = 1;
}

def MLA_RmsNormOp : MLA_Op<"rms_norm", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "RMSNorm over the last dimension";
  let description = [{
    `result[t] = input[t] / sqrt(mean(input[t]^2) + epsilon) * weight` with
    `input` `[T, D]` and `weight` `[D]`.
  }];
  let arguments = (ins 2DTensorOf<[BF16, F16, F32]>:$input,
                       1DTensorOf<[BF16, F16, F32]>:$weight,
                       DefaultValuedAttr<F32Attr, "1.0e-6">:$epsilon);
  let results = (outs 2DTensorOf<[BF16, F16, F32]>:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Cache writers
//===----------------------------------------------------------------------===//

def MLA_KVCacheUpdateOp : MLA_Op<"kv_cache_update", []> {
  let summary = "write this step's latent rows into the paged cache";
  let description = [{
    For every token `t < dim(slot_mapping, 0)` with `slot_mapping[t] >= 0`,
    writes `concat(kv_c[t], k_pe[t])` into cache row `slot_mapping[t]`.
    Negative slots and tokens past the end of `slot_mapping` write nothing.
    `kv_c` is `[T, L]`, `k_pe` is `[T, P]`.

    Encoding: if the inputs already have the cache's element type the rows
    are copied bit for bit. Into a `per_tensor` fp8 cache, float inputs are
    quantised with the runtime `scale` operand (required then). Into an
    `fp8_ds_mla` cache, float inputs are quantised with per-tile scales the
    op computes (no scale operand).

    The cache is written in place: `MemWrite` on `mla::KVCache`.

    ```mlir
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
        : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64>
        into !mla.kv_cache<?x64xbf16>
    ```
  }];
  let arguments = (ins MLA_Float2D:$kv_c, MLA_Float2D:$k_pe,
                       MLA_SlotMapping:$slot_mapping,
                       Arg<MLA_KVCacheType, "the paged cache",
                           [MemWrite<MLA_KVCacheResource>]>:$cache,
                       Optional<MLA_ScaleTensor>:$scale);
  let assemblyFormat = [{
    $kv_c `,` $k_pe `,` $slot_mapping `into` $cache (`scale` $scale^)? attr-dict
    `:` type($kv_c) `,` type($k_pe) `,` type($slot_mapping) `into` qualified(type($cache))
  }];
  let hasVerifier = 1;
}

def MLA_RopeKVCacheUpdateOp : MLA_Op<"rope_kv_cache_update",
                                     [AttrSizedOperandSegments,
                                      AttrSizedResultSegments]> {
  let summary = "fused rotary embedding of k_pe (and q_pe) + cache update";
  let description = [{
    Rotates `k_pe` (`[T, P]`) by `positions` like `mla.rope`, then writes
    `concat(kv_c[t], rotated k_pe[t])` like `mla.kv_cache_update`. When
    `q_pe` (`[T, Hq, P]`) is given it is rotated with the same table and
    returned as `q_pe_out` (one kernel instead of three). When `k_pe_out` is
    requested, the rotated k_pe is returned too.

    Every token's q_pe is rotated, whatever its slot: a negative or missing
    slot only suppresses the cache write, exactly as in the unfused program.

    With `latent_norm(%w : tensor<Lx..>, epsilon = e)` the latent is
    RMS-normalised before it is written, exactly as `mla.rms_norm %kv_c, %w
    {epsilon = e}` followed by this op would: `kv_c[t] / sqrt(mean(kv_c[t]^2)
    + e) * w` in f32, rounded once to kv_c's element type, then encoded into
    the cache like any row (`mla-fuse-kv-norm`). `kv_c` itself is only read.
  }];
  let arguments = (ins MLA_RopeStyle:$style,
                       MLA_Float2D:$kv_c, MLA_FloatTensor:$k_pe,
                       MLA_Positions:$positions, MLA_CosSinTable:$cos_sin,
                       MLA_SlotMapping:$slot_mapping,
                       Arg<MLA_KVCacheType, "the paged cache",
                           [MemWrite<MLA_KVCacheResource>]>:$cache,
                       Optional<MLA_FloatTensor>:$q_pe,
                       Optional<MLA_ScaleTensor>:$scale,
                       Optional<1DTensorOf<[BF16, F16, F32]>>:$latent_norm_weight,
                       OptionalAttr<F32Attr>:$latent_norm_epsilon);
  let results = (outs Optional<MLA_FloatTensor>:$q_pe_out,
                      Optional<MLA_FloatTensor>:$k_pe_out);
  let assemblyFormat = [{
    $style $kv_c `,` $k_pe `,` $slot_mapping `into` $cache
    `positions` `(` $positions `,` $cos_sin `)`
    (`rotate_q` `(` $q_pe^ `:` type($q_pe) `)`)? (`scale` $scale^)?
    (`latent_norm` `(` $latent_norm_weight^ `:` type($latent_norm_weight)
      `,` `epsilon` `=` $latent_norm_epsilon `)`)? attr-dict
    `:` type($kv_c) `,` type($k_pe) `,` type($slot_mapping) `into` qualified(type($cache))
    `,` type($positions) `,` type($cos_sin) (`rotated_q` type($q_pe_out)^)?
    (`rotated_k` type($k_pe_out)^)?
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def MLA_DecodeAttentionOp : MLA_Op<"decode_attention",
                                   [AttrSizedOperandSegments]> {
  let summary = "absorbed (latent) MLA decode attention over the paged cache";
  let description = [{
    Each request `b` attends with its `H` heads over the first `seq_lens[b]`
    cache rows reached through `block_table[b]`. With the latent query `q`
    (`[B, H, L + P]`): `score = softmax_scale * q . row`, `out = softmax(score)
    @ row[:L]`, giving `[B, H, L]`, and optionally the natural-log
    log-sum-exp `[B, H]` of the scaled scores.

    Absorbing form: with `absorb(%w_uk)` (`[H, N, L]`), `q` is the head query
    `[B, H, N + P]` and the op computes `concat(q[..., :N] @ w_uk, q[..., N:])`
    itself; `mla-lift-q-prep` makes those steps explicit. With `q_scale` the
    assembled query is quantised to fp8 before the dot products.
    A `per_tensor` fp8 cache needs `kv_scale`.

    Reads the cache: `MemRead` on `mla::KVCache`.
  }];
  let arguments = (ins MLA_Float3D:$q,
                       Arg<MLA_KVCacheType, "the paged cache",
                           [MemRead<MLA_KVCacheResource>]>:$cache,
                       MLA_BlockTable:$block_table, MLA_I32Vector:$seq_lens,
                       Optional<MLA_ScaleTensor>:$kv_scale,
                       Optional<MLA_WeightTensor>:$w_uk,
                       Optional<MLA_ScaleTensor>:$q_scale,
                       F32Attr:$softmax_scale);
  let results = (outs MLA_FloatTensor:$out, Optional<MLA_Lse>:$lse);
  let assemblyFormat = [{
    $q `,` $cache `[` $block_table `,` $seq_lens `]`
    (`kv_scale` $kv_scale^)? (`absorb` `(` $w_uk^ `:` type($w_uk) `)`)?
    (`q_scale` $q_scale^)? `softmax_scale` `=` $softmax_scale attr-dict
    `:` type($q) `,` qualified(type($cache)) `,` type($block_table) `,`
    type($seq_lens) `->` type($out) (`,` type($lse)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// True if the op absorbs W_UK itself (q is the [B, H, N + P] head query).
    bool isAbsorbing() { return static_cast<bool>(getWUk()); }
  }];
}

def MLA_PrefillAttentionOp : MLA_Op<"prefill_attention",
                                    [AttrSizedOperandSegments]> {
  let summary = "causal MHA-form prefill attention, optionally over cached context";
  let description = [{
    Requests are packed along T: request `r` owns tokens
    `query_start_loc[r] .. query_start_loc[r+1]`. New tokens attend causally
    to each other with `q`, `k` (`[T, H, N + P]`) and `v` (`[T, H, V]`).

    With `context(...)` (chunked prefill), request `r` first attends to its
    `seq_lens[r] - (new tokens of r)` earlier tokens read from the cache
    through `block_table`; their keys and values are decompressed with `w_uk`
    (`[H, N, L]`) and `w_uv` (`[H, L, V]`), and the two partial results are
    merged by their log-sum-exp. The rows of this step are not read from the
    cache: fresh values are used. Output `[T, H, V]`, optional LSE `[T, H]`.
  }];
  let arguments = (ins MLA_Float3D:$q, MLA_Float3D:$k, MLA_Float3D:$v,
                       MLA_I32Vector:$query_start_loc,
                       Arg<Optional<MLA_KVCacheType>, "the paged cache (context)",
                           [MemRead<MLA_KVCacheResource>]>:$cache,
                       Optional<MLA_BlockTable>:$block_table,
                       Optional<MLA_I32Vector>:$seq_lens,
                       Optional<MLA_WeightTensor>:$w_uk,
                       Optional<MLA_WeightTensor>:$w_uv,
                       Optional<MLA_ScaleTensor>:$kv_scale,
                       F32Attr:$softmax_scale);
  let results = (outs MLA_FloatTensor:$out, Optional<MLA_Lse>:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $query_start_loc
    (`context` `(` $cache^ `[` $block_table `,` $seq_lens `]` `,` $w_uk `,` $w_uv
      `:` qualified(type($cache)) `,` type($block_table) `,` type($seq_lens)
      `,` type($w_uk) `,` type($w_uv) `)`)?
    (`kv_scale` $kv_scale^)? `softmax_scale` `=` $softmax_scale attr-dict
    `:` type($q) `,` type($k) `,` type($v) `,` type($query_start_loc)
    `->` type($out) (`,` type($lse)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    bool hasContext() { return static_cast<bool>(getCache()); }
  }];
}

def MLA_DecodeAttentionWithUpdateOp
    : MLA_Op<"decode_attention_with_update", []> {
  let summary = "cache update and latent decode attention in one kernel";
  let description = [{
    Writes this step's rows exactly like `mla.kv_cache_update` (`kv_c`
    `[T, L]`, `k_pe` `[T, P]`, `slot_mapping`), then computes
    `mla.decode_attention` with the latent query `q` (`[B, H, L + P]`), which
    therefore sees the new rows. Produced by
    `mla-fuse-kv-update-into-attention` for targets whose kernel writes the
    new rows itself. Reads and writes the cache.
  }];
  let arguments = (ins MLA_Float3D:$q, MLA_Float2D:$kv_c, MLA_Float2D:$k_pe,
                       MLA_SlotMapping:$slot_mapping,
                       Arg<MLA_KVCacheType, "the paged cache",
                           [MemRead<MLA_KVCacheResource>,
                            MemWrite<MLA_KVCacheResource>]>:$cache,
                       MLA_BlockTable:$block_table, MLA_I32Vector:$seq_lens,
                       Optional<MLA_ScaleTensor>:$kv_scale,
                       F32Attr:$softmax_scale);
  let results = (outs MLA_FloatTensor:$out, Optional<MLA_Lse>:$lse);
  let assemblyFormat = [{
    $q `,` $cache `[` $block_table `,` $seq_lens `]`
    `update` `(` $kv_c `,` $k_pe `,` $slot_mapping `:` type($kv_c) `,`
      type($k_pe) `,` type($slot_mapping) `)`
    (`kv_scale` $kv_scale^)? `softmax_scale` `=` $softmax_scale attr-dict
    `:` type($q) `,` qualified(type($cache)) `,` type($block_table) `,`
    type($seq_lens) `->` type($out) (`,` type($lse)^)?
  }];
  let hasVerifier = 1;
}

def MLA_AttentionOp : MLA_Op<"attention", [AttrSizedOperandSegments]> {
  let summary = "monolithic MLA attention that writes and reads the cache";
  let description = [{
    What serving engines had before the update was split out: one op that
    writes this step's rows (`kv_c` `[T, L]`, rotated `k_pe` `[T, P]`,
    `slot_mapping`) and then attends. `q` is the rotated head query
    `[T, H, N + P]`; the result is `[T, H, V]` after the V up-projection.

    `decode`: one token a request (T = B); the absorbed path reads all
    `seq_lens[b]` rows, the new one included.
    `prefill`: packed requests (`query_start_loc`, required); new tokens use
    the fresh values and earlier context is read from the cache.

    `mla-extract-kv-update` splits it into `mla.kv_cache_update` and the
    attention ops. Reads and writes the cache.
  }];
  let arguments = (ins MLA_AttentionMode:$mode,
                       MLA_Float3D:$q, MLA_Float2D:$kv_c, MLA_Float2D:$k_pe,
                       MLA_SlotMapping:$slot_mapping,
                       Arg<MLA_KVCacheType, "the paged cache",
                           [MemRead<MLA_KVCacheResource>,
                            MemWrite<MLA_KVCacheResource>]>:$cache,
                       MLA_BlockTable:$block_table, MLA_I32Vector:$seq_lens,
                       MLA_WeightTensor:$w_uk, MLA_WeightTensor:$w_uv,
                       Optional<MLA_I32Vector>:$query_start_loc,
                       Optional<MLA_ScaleTensor>:$kv_scale,
                       F32Attr:$softmax_scale);
  let results = (outs MLA_FloatTensor:$out);
  let assemblyFormat = [{
    $mode $q `,` $kv_c `,` $k_pe `,` $slot_mapping `into` $cache
    `[` $block_table `,` $seq_lens `]` `weights` `(` $w_uk `,` $w_uv `)`
    (`query_start_loc` `(` $query_start_loc^ `:` type($query_start_loc) `)`)? (`kv_scale` $kv_scale^)?
    `softmax_scale` `=` $softmax_scale attr-dict
    `:` type($q) `,` type($kv_c) `,` type($k_pe) `,` type($slot_mapping)
    `into` qualified(type($cache)) `,` type($block_table) `,` type($seq_lens)
    `,` type($w_uk) `,` type($w_uv) `->` type($out)
  }];
  let hasVerifier = 1;
}

#endif // MLA_OPS_TD
