//===- Passes.td - Passes over the mla dialect ----------------------------===//
//
// Each pass is one file in this directory named after the pass. Decisions
// about moving, deleting or fusing cache updates rest on declared memory
// effects (mla/Analysis/CacheAccess.h) and SSA use-def facts.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_TRANSFORMS_PASSES_TD
#define MLA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MLAExtractKVUpdate : Pass<"mla-extract-kv-update"> {
  let summary = "Split monolithic mla.attention into a cache update and attention";
  let description = [{
    Rewrites every `mla.attention` into an explicit `mla.kv_cache_update`
    followed by the attention that reads the cache (vLLM PR #34627, without
    the dummy tensor): the order is carried by the declared effects.

    Decode: the update, then absorbed `mla.decode_attention` (which reads the
    step's own rows back from the cache) and `mla.v_up`:

    ```mlir
    %o = mla.attention decode %q, %kv_c, %k_pe, %slots into %cache[%bt, %sl]
        weights(%w_uk, %w_uv) softmax_scale = 0.1 : ...
    // becomes
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : ...
    %lat = mla.decode_attention %q, %cache[%bt, %sl] absorb(%w_uk : ...) ...
    %o = mla.v_up %lat, %w_uv : ...
    ```

    Prefill: the update, `mla.decompress_kv` for the new tokens' MHA keys and
    values, and `mla.prefill_attention` that reads only earlier context from
    the cache.

    It refuses (and leaves the op unchanged) when the split form cannot
    express the op, e.g. already-quantised fp8 inputs in prefill mode, which
    `mla.decompress_kv` cannot read.
  }];
  let dependentDialects = ["::mlir::mla::MLADialect"];
  let statistics = [
    Statistic<"numDecodeExtracted", "decode-extracted",
              "Number of decode attentions split">,
    Statistic<"numPrefillExtracted", "prefill-extracted",
              "Number of prefill attentions split">
  ];
}

def MLALiftQPrep : Pass<"mla-lift-q-prep"> {
  let summary = "Make the query preparation of absorbing decode attention explicit";
  let description = [{
    An `mla.decode_attention` in absorbing form (`absorb(%w_uk)`, head query
    `[B, H, N + P]`, optional `q_scale`) prepares its latent query itself.
    This pass lifts that preparation out as explicit ops (vLLM #41568), so it
    can fuse with its neighbours (the q projection, RoPE of q_pe) and so that
    identical preparations shared by several attentions are CSE'd:

    ```mlir
    %o = mla.decode_attention %q, %cache[%bt, %sl] absorb(%w_uk : tensor<16x128x512xbf16>)
        q_scale %qs softmax_scale = 0.1
        : tensor<?x16x192xbf16>, !mla.kv_cache<?x64xbf16>, tensor<?x8xi32>, tensor<?xi32>
        -> tensor<?x16x512xbf16>
    // becomes
    %c0 = arith.constant 0 : index
    %b = tensor.dim %q, %c0 : tensor<?x16x192xbf16>
    %nope = tensor.extract_slice %q[0, 0, 0] [%b, 16, 128] [1, 1, 1] : ... to tensor<?x16x128xbf16>
    %pe = tensor.extract_slice %q[0, 0, 128] [%b, 16, 64] [1, 1, 1] : ... to tensor<?x16x64xbf16>
    %lat = mla.q_absorb %nope, %w_uk : ... -> tensor<?x16x512xbf16>
    %ql = mla.q_concat %lat, %pe : ... -> tensor<?x16x576xbf16>
    %q8 = mla.quantize %ql, %qs : tensor<?x16x576xbf16> -> tensor<?x16x576xf8E4M3FN>
    %o = mla.decode_attention %q8, %cache[%bt, %sl] softmax_scale = 0.1 : ...
    ```

    The absorbed and concatenated queries keep the element type of `q`; the
    quantised query is `f8E4M3FN`. The latent-form attention keeps the
    cache, paging operands, `kv_scale`, `softmax_scale` and the optional
    log-sum-exp result. Attentions already in latent form are left alone, as
    are absorbing ones whose head query is not bf16/f16/f32 (`mla.q_absorb`
    takes float queries only).
  }];
  let dependentDialects = ["::mlir::mla::MLADialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numLifted", "lifted",
              "Number of absorbing decode attentions rewritten to latent form">
  ];
}

def MLAScheduleKVUpdates : Pass<"mla-schedule-kv-updates"> {
  let summary = "Move cache updates as early or as late as their effects allow";
  let description = [{
    Moves every `mla.kv_cache_update` and `mla.rope_kv_cache_update` within
    its block. Nothing else moves and no op crosses a block boundary.

    `strategy=early` (the default) places an update just after the last op
    of its block that defines one of its operands, but never above an op
    that may access (read or write) the same or an aliasing cache: a
    conflicting read or write, a call, an op with unknown effects, or a
    region op (`scf.if`, `scf.for`) with such an access inside. Early writes
    let the update overlap with the query projection and RoPE.

    `strategy=late` places an update just before the first op that may
    access its cache (its first reader, a writer of an aliasing cache, a
    call, ...) or the block terminator, and never past an op that uses its
    results (the rotated `q_pe`/`k_pe` of `mla.rope_kv_cache_update`).

    May-access and aliasing come from `mla/Analysis/CacheAccess.h`: two cache
    values are disjoint only when both are arguments of one function and at
    least one carries `mla.noalias`. Updates of disjoint caches reorder
    freely; two updates of possibly-aliasing caches keep their order.
    Updates that move to the same spot keep their original order.

    ```mlir
    %qr = mla.rope neox %q_pe, %pos, %cs : ...
    %qn = arith.mulf %q_nope, %q_nope : ...
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : ...
    %o = mla.decode_attention %ql, %cache[%bt, %sl] softmax_scale = 0.1 : ...
    // early:
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : ...
    %qr = mla.rope neox %q_pe, %pos, %cs : ...
    %qn = arith.mulf %q_nope, %q_nope : ...
    %o = mla.decode_attention %ql, %cache[%bt, %sl] softmax_scale = 0.1 : ...
    ```
  }];
  let dependentDialects = ["::mlir::mla::MLADialect"];
  let options = [
    Option<"strategy", "strategy", "::mlir::mla::KVUpdateSchedule",
           /*default=*/"::mlir::mla::KVUpdateSchedule::Early",
           "Where to place each update",
           [{::llvm::cl::values(
             clEnumValN(::mlir::mla::KVUpdateSchedule::Early, "early",
                        "as early as its operands and the cache allow"),
             clEnumValN(::mlir::mla::KVUpdateSchedule::Late, "late",
                        "just before the next access to its cache"))}]>
  ];
  let statistics = [
    Statistic<"numMoved", "moved", "Number of cache updates moved">
  ];
}

#endif // MLA_TRANSFORMS_PASSES_TD
