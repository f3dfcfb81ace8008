//===- Passes.td - Passes over the mla dialect ----------------------------===//
//
// Each pass is one file in lib/Dialect/MLA/Transforms named after the pass. Decisions
// about moving, deleting or fusing cache updates rest on declared memory
// effects (mla/Dialect/MLA/Analysis/CacheAccess.h) and SSA use-def facts.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_DIALECT_MLA_TRANSFORMS_PASSES_TD
#define MLA_DIALECT_MLA_TRANSFORMS_PASSES_TD

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

def MLAEliminateKVUpdates : Pass<"mla-eliminate-kv-updates"> {
  let summary = "Delete cache updates whose writes cannot be observed";
  let description = [{
    Deletes `mla.kv_cache_update` and the write of `mla.rope_kv_cache_update`
    where no later op and no caller can observe it. Each rule has an option:

    - `dummy-runs`: every update in a function marked `mla.dummy_run` (a
      warm-up or profile run must leave the cache untouched, vLLM #36282 and
      #39444). Ops that read *and* write the cache in one kernel
      (`mla.attention`, `mla.decode_attention_with_update`, or a call with a
      cache operand) cannot lose their write here; they get a warning, and
      `mla-verify-kv-order` rejects the function.
    - `static-empty`: updates that write no row: an empty slot mapping or
      empty token inputs (static dim 0 == 0), or a slot mapping that is a
      constant whose entries are all negative.
    - `duplicates`: an update identical to an earlier one in the same block
      (same operands, attributes and result types) with no possible write of
      the cache, or of a cache that may alias it, in between. The later one is
      deleted; its rotated results, if any, are the earlier op's.
    - `overwritten`: an update followed in its block by an update of the same
      cache value with the same slot-mapping value, with no possible read or
      write of the cache (or an alias) in between: the later write covers
      every row of the earlier one, so the earlier one is deleted.

    "Possible access" comes from declared effects (mla/Dialect/MLA/Analysis/CacheAccess.h):
    calls, unregistered ops and region ops containing accesses count; caches
    that may alias count. Updates nested in `scf.if` or `scf.for` are compared
    only with updates of their own block. No rule deletes the last write of a
    cache outside a dummy run, so a write the caller can see always stays.

    When a fused `mla.rope_kv_cache_update` whose rotated results are used
    loses its write, the rotation stays as `mla.rope`:

    ```mlir
    func.func @warmup(...) attributes {mla.dummy_run} {
      %q = mla.rope_kv_cache_update neox %kv_c, %k_pe, %slots into %cache
          positions(%pos, %cs) rotate_q(%q_pe : tensor<4x16x64xbf16>) : ...
      mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : ...
      ...
    // becomes
    func.func @warmup(...) attributes {mla.dummy_run} {
      %q = mla.rope neox %q_pe, %pos, %cs : ...
      ...
    ```
  }];
  let dependentDialects = ["::mlir::mla::MLADialect"];
  let options = [
    Option<"dummyRuns", "dummy-runs", "bool", /*default=*/"true",
           "Delete every cache update in functions marked mla.dummy_run">,
    Option<"staticEmpty", "static-empty", "bool", /*default=*/"true",
           "Delete updates whose slot mapping or tokens are statically empty "
           "or whose constant slots are all negative">,
    Option<"duplicates", "duplicates", "bool", /*default=*/"true",
           "Delete an update that repeats an earlier identical one">,
    Option<"overwritten", "overwritten", "bool", /*default=*/"true",
           "Delete an update whose rows a later update with the same slot "
           "mapping rewrites before any access">
  ];
  let statistics = [
    Statistic<"numDummyRun", "dummy-run-erased",
              "Number of updates deleted in dummy/profile runs">,
    Statistic<"numStaticEmpty", "static-empty-erased",
              "Number of updates deleted that write no row">,
    Statistic<"numDuplicates", "duplicates-erased",
              "Number of duplicate updates deleted">,
    Statistic<"numOverwritten", "overwritten-erased",
              "Number of updates deleted because a later one rewrites them">
  ];
}

def MLAVerifyKVOrder : Pass<"mla-verify-kv-order"> {
  let summary = "Diagnose cache reads and writes in the wrong order";
  let description = [{
    An analysis: it changes nothing and fails with located errors when

    - an op that reads this step's rows from a cache (`mla.decode_attention`
      or any op declaring a read of the cache, except `mla.prefill_attention`,
      which takes this step's rows from its fresh inputs) is followed in its
      block, or after the region op it is nested in, by an op that declares a
      write of the same cache value: "attention reads cache before the
      update that writes this step's rows", with a note at the write;
    - an op inside an `scf.parallel` or `scf.forall` body declares a write of
      a cache defined outside the loop: the iterations' writes race;
    - a function marked `mla.dummy_run` may write a cache (declared write, or
      an op with unknown effects taking a cache operand).

    ```mlir
    %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1 : ...
    // error: attention reads cache before the update that writes this step's rows
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : ...
    ```

    Reads and writes are the declared ones on the very same cache value: a
    verifier reports certain bugs, and distinct cache arguments merely *may*
    alias (for example two layers' caches without `mla.noalias`).
  }];
  let dependentDialects = ["::mlir::mla::MLADialect"];
}

def MLAFuseRopeKVUpdate : Pass<"mla-fuse-rope-kv-update"> {
  let summary = "Fuse the k_pe rope (and a matching q_pe rope) into the cache update";
  let description = [{
    An `mla.rope` whose result is the `k_pe` operand of an
    `mla.kv_cache_update` becomes part of one `mla.rope_kv_cache_update` that
    takes the unrotated `k_pe` (vLLM #40392, without a graph split: the
    write's order is carried by its declared effect). The fused op sits
    exactly where the update was, so the cache write never moves.

    ```mlir
    %k = mla.rope neox %k_pe, %pos, %cs : ...
    %q = mla.rope neox %q_pe, %pos, %cs : ...   // [T, Hq, P]
    mla.kv_cache_update %kv_c, %k, %slots into %cache : ...
    // becomes
    %q = mla.rope_kv_cache_update neox %kv_c, %k_pe, %slots into %cache
        positions(%pos, %cs) rotate_q(%q_pe : ...) : ... rotated_q ...
    ```

    Fires only when the k rope is in the update's block. If the rotated k_pe
    has other users, the fused op also returns it (`rotated_k`) and they use
    that; they must all come after the update (otherwise, or with
    `allow-k-pe-result=false`, nothing is fused). With `fuse-q`, one rope of
    a rank-3 q_pe in the same block with the same positions, table and style
    is folded in (the earliest one that qualifies): its operands must
    dominate the update and all its users must come after it. q_pe is
    rotated for every token whatever its slot, as in the unfused program.
  }];
  let options = [
    Option<"allowKPeResult", "allow-k-pe-result", "bool", /*default=*/"true",
           "Fuse even if the rotated k_pe has other users (the fused op then "
           "returns it); when false such ropes are left alone">,
    Option<"fuseQ", "fuse-q", "bool", /*default=*/"true",
           "Fold a q_pe rope with the same positions, table and style into "
           "the fused op">
  ];
  let dependentDialects = ["::mlir::mla::MLADialect"];
  let statistics = [
    Statistic<"numFused", "fused", "Number of rope + update pairs fused">,
    Statistic<"numQFolded", "q-folded", "Number of q_pe ropes folded in">
  ];
}

def MLAFuseKVUpdateQuant : Pass<"mla-fuse-kv-update-quant"> {
  let summary = "Fold fp8 quantisation of kv_c and k_pe into the cache update";
  let description = [{
    When both `kv_c` and `k_pe` of an `mla.kv_cache_update` into a
    `per_tensor` fp8 cache are `mla.quantize` results with the same scale
    value, the update takes the float inputs and quantises them itself with
    that `scale` (one kernel reads the float rows once).

    ```mlir
    %c8 = mla.quantize %kv_c, %s : tensor<4x512xbf16> -> tensor<4x512xf8E4M3FN>
    %p8 = mla.quantize %k_pe, %s : tensor<4x64xbf16> -> tensor<4x64xf8E4M3FN>
    mla.kv_cache_update %c8, %p8, %slots into %cache : ...
    // becomes
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache scale %s : ...
    ```

    The quantize ops stay while they have other users. It refuses when the
    two scales are different values, when only one input is quantised, when
    the two float inputs have different element types, and for any cache
    layout other than `per_tensor`. `mla.rope_kv_cache_update` never takes
    fp8 inputs (its k_pe is rotated, so it is float), so there is nothing to
    fold there: run this pass before `mla-fuse-rope-kv-update`, which then
    carries the scale into the fused op.
  }];
  let dependentDialects = ["::mlir::mla::MLADialect"];
  let statistics = [
    Statistic<"numFused", "fused", "Number of updates that now quantise">
  ];
}

def MLAFuseKVUpdateIntoAttention : Pass<"mla-fuse-kv-update-into-attention"> {
  let summary = "Fold a cache update into the decode attention that reads it";
  let description = [{
    For targets whose decode attention kernel can write the step's rows
    itself, an `mla.kv_cache_update` and the latent-form
    `mla.decode_attention` (no `absorb`, no `q_scale`) that reads the same
    cache value become one `mla.decode_attention_with_update` at the
    attention's position; the update is erased.

    ```mlir
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : ...
    %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1 : ...
    // becomes (with target=cuda-sm90)
    %o = mla.decode_attention_with_update %q, %cache[%bt, %sl]
        update(%kv_c, %k_pe, %slots : ...) softmax_scale = 0.1 : ...
    ```

    Moving the write down to the attention is legal only if no op in between
    may read or write that cache or one that may alias it (declared effects;
    calls and unknown ops may access every cache), both ops are in one block,
    and a per-tensor fp8 write and read use the same scale value.

    `target` is the target's declaration of its kernel's ability: `cuda-sm90`
    can write the rows inside attention; `cpu` (the default) cannot, and then
    the pass changes nothing. Other names are an error.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "Target whose decode attention kernel may write the cache: "
           "'cuda-sm90' (fuses) or 'cpu' (does not)">
  ];
  let dependentDialects = ["::mlir::mla::MLADialect"];
  let statistics = [
    Statistic<"numFused", "fused", "Number of updates folded into attention">
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

def MLAFuseKVNorm : Pass<"mla-fuse-kv-norm"> {
  let summary = "Fold the latent RMSNorm into the fused rope + cache update";
  let description = [{
    An `mla.rms_norm` whose result is the `kv_c` operand of an
    `mla.rope_kv_cache_update` (DeepSeek's `kv_a_layernorm` on the first
    `L` columns of the `kv_a` projection) becomes the update's
    `latent_norm`: the cache-write kernel normalises each token's latent
    before storing it, and the separate norm kernel (a launch on the decode
    step's critical path) goes away.

    ```mlir
    %n = mla.rms_norm %lat, %w {epsilon = 1.0e-06 : f32}
        : tensor<64x512xbf16>, tensor<512xbf16>
    mla.rope_kv_cache_update neox %n, %k_pe, %slots into %cache
        positions(%pos, %cs) : ...
    // becomes
    mla.rope_kv_cache_update neox %lat, %k_pe, %slots into %cache
        positions(%pos, %cs)
        latent_norm(%w : tensor<512xbf16>, epsilon = 1.000000e-06) : ...
    ```

    It fires only when the normalised latent has no other reader (prefill's
    decompression through `kv_b`, a function result or any other op keeps
    the norm) and the norm is in the update's block. The fused op replaces
    the update where it is, so the cache write never moves. Rounding is
    unchanged: the kernel rounds the normalised latent once to kv_c's
    element type, as the norm did, before encoding the row.
  }];
  let dependentDialects = ["::mlir::mla::MLADialect"];
  let statistics = [
    Statistic<"numFused", "fused", "Number of latent norms folded into an update">
  ];
}

def MLAFuseLinearAddend : Pass<"mla-fuse-linear-addend"> {
  let summary = "Fold a residual add into the preceding linear's epilogue";
  let description = [{
    `arith.addf(mla.linear(x, w), r)` (either operand order) becomes
    `mla.linear x, w addend(r)`: one GEMM whose epilogue adds `r`
    (cuBLASLt's `D = A B + C` on CUDA) instead of a GEMM and a separate
    add kernel.

    ```mlir
    %y = mla.linear %x, %w : tensor<64x2048xbf16>, tensor<2048x2048xbf16> -> tensor<64x2048xbf16>
    %h = arith.addf %y, %r : tensor<64x2048xbf16>
    // becomes
    %h = mla.linear %x, %w addend(%r : tensor<64x2048xbf16>)
        : tensor<64x2048xbf16>, tensor<2048x2048xbf16> -> tensor<64x2048xbf16>
    ```

    The fused op replaces the add, at the add's position (so `r` may be
    defined after the linear), with the linear's location. It applies only
    when the linear result has no other use (otherwise the product must be
    materialised anyway), the linear has no addend yet, and the add is in the
    linear's block (a GEMM is never moved into a loop body or a branch).

    Rounding: the sum is rounded once to the result type instead of twice
    (product, then sum), like a contraction; the difference is within the
    step check's tolerance (docs/lowering.md).
  }];
  let dependentDialects = ["::mlir::mla::MLADialect"];
  let statistics = [
    Statistic<"numFused", "fused", "Number of adds folded into a linear">
  ];
}

def MLAFuseProjections : Pass<"mla-fuse-projections"> {
  let summary = "Compute the projections of one input as one GEMM over concatenated weights";
  let description = [{
    In a decode step at batch 64 each projection GEMM is latency-bound (a
    serial loop over K with few CTAs), so two GEMMs that read the same
    activation cost nearly twice one GEMM as wide as both. DeepSeek's
    `q_proj` (or `q_a_proj`) and `kv_a_proj_with_mqa` both read the
    normalised hidden state; inference engines (vLLM, SGLang) fuse exactly
    these two when they load the weights. This pass does the same in the IR:
    `mla.linear` ops of one block that

    - have no addend,
    - read the same `input` value,
    - take a weight that is an argument of the function's entry block,
    - agree on the weight's and the result's element types,
    - have statically shaped input, weight and result,

    become one `mla.linear` over `tensor.concat dim(0)` of their weights (in
    block order) and one `tensor.extract_slice` of columns per original:

    ```mlir
    %q = mla.linear %h, %w_q : tensor<64x2048xbf16>, tensor<3072x2048xbf16> -> tensor<64x3072xbf16>
    %kv = mla.linear %h, %w_kv_a : tensor<64x2048xbf16>, tensor<576x2048xbf16> -> tensor<64x576xbf16>
    // becomes
    %w = tensor.concat dim(0) %w_q, %w_kv_a
        : (tensor<3072x2048xbf16>, tensor<576x2048xbf16>) -> tensor<3648x2048xbf16>
    %y = mla.linear %h, %w : tensor<64x2048xbf16>, tensor<3648x2048xbf16> -> tensor<64x3648xbf16>
    %q = tensor.extract_slice %y[0, 0] [64, 3072] [1, 1] : tensor<64x3648xbf16> to tensor<64x3072xbf16>
    %kv = tensor.extract_slice %y[0, 3072] [64, 576] [1, 1] : tensor<64x3648xbf16> to tensor<64x576xbf16>
    ```

    Why only weights that are function arguments: they are bound by the
    caller and constant across steps, so the artifact lowering computes
    their concat once per weight binding (a "prepare" program,
    docs/lowering.md), not every step. A weight computed in the function
    would need a copy every step, which costs more than the fusion saves.

    The new ops are built before the group's first linear (the input
    dominates it; the weights dominate everything); the fused linear's
    location fuses the originals', each slice keeps its original's. Each
    output column is the same f32-accumulated dot product as before, though
    a GEMM library may sum it in another order for the wider shape (e.g.
    split-K). Linears in different blocks (e.g. one in an `scf.if`) are
    never grouped. A second run finds nothing: the fused weight is a
    concat, not an argument.
  }];
  let dependentDialects = ["::mlir::mla::MLADialect",
                           "::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numGroups", "groups", "Number of fused linears created">,
    Statistic<"numFused", "linears", "Number of linears replaced by a slice of a fused one">
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

    May-access and aliasing come from `mla/Dialect/MLA/Analysis/CacheAccess.h`: two cache
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

#endif // MLA_DIALECT_MLA_TRANSFORMS_PASSES_TD
