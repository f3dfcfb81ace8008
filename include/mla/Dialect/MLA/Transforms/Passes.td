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
    Splits every `mla.attention` (the monolithic op that writes this step's
    rows into the paged cache and then attends, as serving engines had it)
    into an explicit `mla.kv_cache_update` followed by the attention that
    reads the cache. This is vLLM PR #34627 without the dummy tensor vLLM
    needed to keep the order: here the order follows from the declared
    effects (`MemWrite`, then `MemRead`, on the same `!mla.kv_cache` value).
    Every later mla pass expects the update as its own op, so the pipelines
    run this pass first.

    - `decode`: an `mla.kv_cache_update` of the same `kv_c`, `k_pe`, slot
      mapping and cache (with the attention's `kv_scale` as its `scale` when
      it quantises float inputs into a `per_tensor` cache), then the
      absorbing `mla.decode_attention` (`absorb(%w_uk)`), which reads every
      row up to `seq_lens[b]`, the new rows included, and `mla.v_up` with
      `w_uv`.
    - `prefill`: the same update, `mla.decompress_kv` for the new tokens' MHA
      keys and values, then `mla.prefill_attention` with `context(...)`,
      which reads only earlier context from the cache and takes this step's
      tokens from the fresh keys and values.

    ```mlir
    %o = mla.attention decode %q, %kv_c, %k_pe, %slots into %cache[%bt, %sl]
        weights(%w_uk, %w_uv) softmax_scale = 0.1 : ...
    // becomes
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : ...
    %lat = mla.decode_attention %q, %cache[%bt, %sl] absorb(%w_uk : ...)
        softmax_scale = 0.1 : ...
    %o = mla.v_up %lat, %w_uv : ...
    ```

    A `prefill` attention whose new latents are not float (already-quantised
    fp8 inputs) is left unchanged: `mla.decompress_kv` cannot read quantised
    values, so the op stays monolithic. Only the matched ops change; the pass
    does not fold unrelated IR.

    Implemented in `lib/Dialect/MLA/Transforms/ExtractKVUpdate.cpp`.
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
    Deletes cache writes that no later op and no caller can observe:
    `mla.kv_cache_update`, and the write of the fused
    `mla.rope_kv_cache_update`. There are four rules, each with a boolean
    option (all on by default) and a statistic:

    - `dummy-runs`: every update in a function marked `mla.dummy_run`,
      nested ones (in `scf.if`, `scf.for`, ...) included. A warm-up or
      profile run must leave the cache as it found it (vLLM #36282 and
      #39444 corrupted prefix-cache pages this way). Ops that read *and*
      write the cache in one kernel (`mla.attention`,
      `mla.decode_attention_with_update`) and calls that receive the cache
      cannot lose their write here; each gets the warning "dummy/profile run
      still writes the KV cache through this op; only separate cache updates
      are removed", and `mla-verify-kv-order` rejects the function. Run
      `mla-extract-kv-update` first to split `mla.attention`.
    - `static-empty`: updates that write no row whatever the runtime values:
      `kv_c` has a static dim 0 of 0, the slot mapping has a static dim 0 of
      0, or the slot mapping is a constant (splat or not) whose entries are
      all negative. A constant with one non-negative entry, or a slot
      mapping that is not a constant, keeps the update.
    - `duplicates`: an update identical to an earlier update of the same
      block (same operands, the cache included, attributes and result types)
      when no op in between may *write* that cache or one that may alias it.
      Rewriting identical rows with identical values changes nothing, and a
      reader in between sees the first write either way, so a reader does
      not keep the duplicate. The later update is deleted; a fused
      duplicate's rotated results are replaced by the earlier op's.
    - `overwritten`: an update followed in its block by an update of the same
      cache value with the same slot-mapping SSA value, when no op in between
      may read or write that cache or one that may alias it. The rows an
      update writes are determined by its slot mapping alone (tokens past its
      end and negative slots write nothing), so the later update rewrites
      every row of the earlier one before anyone can see it, and the earlier
      one is deleted.

    Within a block, deleting one update may expose another pair; the pass
    repeats until no pair is left.

    "May access" is decided by `mla/Dialect/MLA/Analysis/CacheAccess.h`, on
    declared memory effects, never on op names: an op accesses a cache if it
    or an op nested in it declares an effect on a cache value that may alias
    it; a `func.call`, an unregistered op or any other op without
    `MemoryEffectOpInterface` may access every cache. Two distinct cache
    values may alias unless both are arguments of one function and one of
    them carries `mla.noalias`.

    Never deleted:

    - An update in another block than the one it would be compared with: an
      update nested in an `scf.if` or `scf.for` may not run, or run many
      times, so it neither makes an outer update redundant nor is made
      redundant by one. Pairs inside one nested block are handled like any
      other block.
    - An update followed by one with a different slot-mapping value, even if
      the two are equal at run time.
    - The last write of a cache outside a dummy run: a write followed only by
      the return of a function whose cache is an argument is the caller's to
      see.

    Deleting the write of an `mla.rope_kv_cache_update` keeps its pure part:
    each used rotated result (`rotated_q`, `rotated_k`) becomes an `mla.rope`
    with the same style, positions and table.

    ```mlir
    func.func @step(%kv_c: tensor<4x512xbf16>, %kv_c2: tensor<4x512xbf16>,
                    %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>,
                    %cache: !mla.kv_cache<?x16xbf16>) {
      %none = arith.constant dense<-1> : tensor<4xi64>
      mla.kv_cache_update %kv_c, %k_pe, %none into %cache : ...   // static-empty
      mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : ...  // overwritten
      mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : ...  // duplicate
      mla.kv_cache_update %kv_c2, %k_pe, %slots into %cache : ... // stays
      return
    }
    // becomes
    func.func @step(...) {
      %none = arith.constant dense<-1> : tensor<4xi64>
      mla.kv_cache_update %kv_c2, %k_pe, %slots into %cache : ...
      return
    }
    ```

    In a dummy run:

    ```mlir
    func.func @warmup(...) -> tensor<4x16x64xbf16> attributes {mla.dummy_run} {
      %q = mla.rope_kv_cache_update gptj %kv_c, %k_pe, %slots into %cache
          positions(%pos, %cs) rotate_q(%q_pe : tensor<4x16x64xbf16>) : ...
      mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : ...
      return %q : tensor<4x16x64xbf16>
    }
    // becomes
    func.func @warmup(...) -> tensor<4x16x64xbf16> attributes {mla.dummy_run} {
      %q = mla.rope gptj %q_pe, %pos, %cs : ...
      return %q : tensor<4x16x64xbf16>
    }
    ```

    Implemented in `lib/Dialect/MLA/Transforms/EliminateKVUpdates.cpp`.
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
    An analysis: it changes nothing (all analyses are preserved) and fails
    with located errors when cache reads and writes are in an order that
    loses data. Run it after passes that move, fuse or delete cache updates
    (the pipelines run it after their mla rewrites), or on hand-written IR;
    valid IR passes through unchanged. It reports three kinds of error.

    Stale read: "attention reads cache before the update that writes this
    step's rows", with the note "the cache is written here". Within one step
    the update that writes the step's rows must precede the attention that
    reads them. The error is reported at an op that declares a read of a
    cache operand (and no write of it) when a later op in its block, or
    after an op it is nested in (such as an `scf.if`), declares a write of
    the same cache value. The note points at that write (an
    `mla.kv_cache_update`, an `mla.rope_kv_cache_update`, or a fused
    attention that writes). Not reported:

    - `mla.prefill_attention` before the update: it reads only earlier
      context from the cache and takes the step's own tokens from its `k`/`v`
      operands, so its order against the step's update does not matter.
      Declared effects cannot say which rows an op reads, so this is the one
      op the pass names.
    - Ops that read and write the cache themselves
      (`mla.decode_attention_with_update`, `mla.attention`): they write the
      step's rows before reading.
    - A read of one cache value before a write of another, even if the two
      may alias (for example two layers' cache arguments without
      `mla.noalias`): a verifier reports certain bugs, and distinct values
      only *may* alias.
    - A read at the end of a loop body before the write at the start of the
      next iteration (a loop over steps).

    ```mlir
    func.func @bad(...) -> tensor<4x16x512xbf16> {
      // error: attention reads cache before the update that writes this step's rows
      %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1 : ...
      // note: the cache is written here
      mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : ...
      return %o : tensor<4x16x512xbf16>
    }
    ```

    The fix is the other order: update first, then attention.

    Racing writes: "updates of one cache race across parallel iterations",
    with the note "iterations of this loop run in parallel", at an op that
    declares a write of a cache defined outside an enclosing `scf.parallel`
    or `scf.forall` body: the iterations run unordered and the IR cannot
    show that their slot mappings are disjoint. `LoopLikeOpInterface` does
    not say whether a loop is parallel, so these two ops (the parallel loops
    of the dialects `mla-opt` registers) are named. Writes in sequential
    loops (`scf.for`) are ordered and accepted; writes in two different
    regions of other region ops are not checked.

    Dummy-run writes: "dummy/profile run writes the KV cache", at any op in
    a function marked `mla.dummy_run` that may write a cache operand
    (declared writes, and calls or unregistered ops that receive a cache, as
    `CacheAccess` decides). There the invariant is that nothing is written,
    so a possible write is already an error. `mla-eliminate-kv-updates`
    removes separate updates from dummy runs; an `mla.attention` must be
    split by `mla-extract-kv-update` first.

    Implemented in `lib/Dialect/MLA/Transforms/VerifyKVOrder.cpp`.
  }];
  let dependentDialects = ["::mlir::mla::MLADialect"];
}

def MLAFuseRopeKVUpdate : Pass<"mla-fuse-rope-kv-update"> {
  let summary = "Fuse the k_pe rope (and a matching q_pe rope) into the cache update";
  let description = [{
    Fuses the rotary embedding of `k_pe` (and optionally of `q_pe`) into the
    cache write: an `mla.rope` whose result is the `k_pe` operand of an
    `mla.kv_cache_update`, and the update, become one
    `mla.rope_kv_cache_update` that takes the unrotated `k_pe`. vLLM keeps
    this single-kernel form off by default because its write is a
    graph-splitting op (#40392, #49142); here the write's order comes from
    its declared `MemWrite` on the cache, so the fused op simply takes the
    update's place. It is created at the update's position: the cache write
    never moves, so no cache access is reordered with it.

    ```mlir
    %q = mla.rope neox %q_pe, %pos, %cs : tensor<4x16x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
    %k = mla.rope neox %k_pe, %pos, %cs : tensor<4x64xbf16>, tensor<4xi64>, tensor<4096x64xf32>
    mla.kv_cache_update %kv_c, %k, %slots into %cache
        : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
    %kk, %v = mla.decompress_kv %kv_c, %k, %w_uk, %w_uv : ...
    // becomes
    %q, %k = mla.rope_kv_cache_update neox %kv_c, %k_pe, %slots into %cache
        positions(%pos, %cs) rotate_q(%q_pe : tensor<4x16x64xbf16>)
        : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>,
          tensor<4xi64>, tensor<4096x64xf32> rotated_q tensor<4x16x64xbf16> rotated_k tensor<4x64xbf16>
    %kk, %v = mla.decompress_kv %kv_c, %k, %w_uk, %w_uv : ...
    ```

    The fused op takes `kv_c`, the rope's input as `k_pe`, `positions`,
    `cos_sin`, the rope style, the slot mapping, the cache and the update's
    `scale` (for a quantising per-tensor fp8 update). The k rope must be in
    the update's block (it is pure and precedes the update, so its operands
    are available there). If the rotated `k_pe` has other users, the fused
    op also returns it (`rotated_k`) and they read that; they must all come
    after the update. Nothing is fused when

    - `k_pe` is not a rope result (a block argument, a quantize result, an
      `scf.if` result, ...);
    - the rope is in another block than the update (e.g. the update sits in
      an `scf.if` region and the rope outside);
    - the rotated `k_pe` has other users and `allow-k-pe-result=false`;
    - the rotated `k_pe` has a user before the update: that user cannot read
      a result produced at the update, and moving the write up is
      `mla-schedule-kv-updates`' business.

    With `fuse-q`, one q rope is folded in as well (`rotate_q`; its result
    is replaced by the fused op's `rotated_q`) if it

    - is an `mla.rope` of a rank-3 `q_pe` (`[T, Hq, P]`) in the update's
      block,
    - uses the same SSA values for positions and table, and the same style,
    - has an input that dominates the update (the rope itself may come
      before or after the update), and
    - has all its users after the update.

    If several q ropes qualify, the earliest in the block is folded; updates
    are visited in block order, so with several updates the first that can
    take a q rope does. A q rope that does not qualify is left alone and the
    k rope is still fused. q_pe is rotated for every token whatever its slot
    (a negative or missing slot only suppresses that token's cache write),
    so every observed value equals the unfused program's.

    Run `mla-fuse-kv-update-quant` first: it turns
    `rope -> quantize -> update` into `rope -> update ... scale %s`, which
    this pass then fuses, carrying the scale into
    `mla.rope_kv_cache_update`. In decode,
    `mla-lift-q-prep` before this pass makes the rotated `q_pe` feed
    `mla.q_concat` after the update, so that the q rope folds in.
    `mla-fuse-kv-norm` works on the fused op this pass creates.

    Implemented in `lib/Dialect/MLA/Transforms/FuseRopeKVUpdate.cpp`.
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
    Folds the fp8 quantisation of the two cache inputs into the write: the
    update reads the float rows once and quantises them itself, instead of a
    separate `mla.quantize` kernel per input writing fp8 tensors that the
    update then reads.

    ```mlir
    %c8 = mla.quantize %kv_c, %s : tensor<4x512xbf16> -> tensor<4x512xf8E4M3FN>
    %p8 = mla.quantize %k_pe, %s : tensor<4x64xbf16> -> tensor<4x64xf8E4M3FN>
    mla.kv_cache_update %c8, %p8, %slots into %cache
        : tensor<4x512xf8E4M3FN>, tensor<4x64xf8E4M3FN>, tensor<4xi64>
          into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>
    // becomes
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache scale %s
        : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64>
          into !mla.kv_cache<?x64xf8E4M3FN, per_tensor>
    ```

    It fires on an `mla.kv_cache_update` into a `per_tensor` fp8 cache
    (inputs already fp8, hence no `scale` operand) whose `kv_c` and `k_pe`
    are both results of `mla.quantize` with the same scale SSA value, and
    whose two float inputs share one element type. The update is rewritten
    in place to take the float inputs and that `scale`; it does not move, so
    no cache access is reordered. Quantize ops in an enclosing block (e.g.
    outside a loop holding the update) are fine: their inputs dominate the
    update. The quantize ops are pure and stay while other users read them;
    otherwise they are erased as dead.

    Equivalence: `mla.quantize` computes `saturate(x / scale)` in
    `f8E4M3FN`, rounding to nearest even, and a quantising per-tensor update
    stores exactly that for every row it writes. Rows with negative or
    missing slots were never observed through the update anyway.

    It refuses when

    - the two scales are different SSA values (even if equal at run time);
    - only one input is a quantize result;
    - the float inputs have different element types (an update takes one);
    - the cache is not `per_tensor`. For `fp8_ds_mla` and `plain` caches the
      verifier rejects quantised inputs, so such IR never reaches the pass;
      it checks the layout all the same.

    `mla.rope_kv_cache_update` is not handled, on purpose: its `k_pe` is
    rotated inside the op and must be a float tensor, and the verifier
    requires `kv_c` to share k_pe's element type, so a fused rope update
    never takes fp8 inputs and there is nothing to fold. The unfused
    `rope -> quantize -> kv_cache_update` chain is handled by running this
    pass before `mla-fuse-rope-kv-update`, which then carries the scale into
    the fused op.

    Implemented in `lib/Dialect/MLA/Transforms/FuseKVUpdateQuant.cpp`.
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
    itself, folds an `mla.kv_cache_update` into the latent-form
    `mla.decode_attention` that reads them, giving one
    `mla.decode_attention_with_update` at the attention's position. The
    attention's results (`out`, optional `lse`) are replaced and the update
    is erased.

    ```mlir
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache
        : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
    %o = mla.decode_attention %q, %cache[%bt, %sl] softmax_scale = 0.1
        : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32>
          -> tensor<4x16x512xbf16>
    // becomes
    %o = mla.decode_attention_with_update %q, %cache[%bt, %sl]
        update(%kv_c, %k_pe, %slots : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64>)
        softmax_scale = 0.1
        : tensor<4x16x576xbf16>, !mla.kv_cache<?x64xbf16>, tensor<4x8xi32>, tensor<4xi32>
          -> tensor<4x16x512xbf16>
    ```

    `target` names the runtime target; the pass fuses only for a target
    whose runtime has the `decode_attention_with_update` kernel. Both
    `cpu` (the default) and `cuda-sm90` have it. Any other name is an error
    ("mla-fuse-kv-update-into-attention: unknown target '...' (expected
    'cpu' or 'cuda-sm90')") and the pass fails. A new target adds one line
    to `attentionWritesCache` in the source, false until its runtime has
    the kernel.

    For each update, the pass takes the first `mla.decode_attention` later in
    the same block that reads the same cache SSA value, and fuses the two
    when

    - no op strictly between them may read or write that cache or one that
      may alias it (`CacheAccess`, on declared effects: a `func.call`, an
      unregistered op, or a region op with a cache access inside counts).
      This makes the attention the update's first reader, and moving the
      write down to it legal;
    - the attention is in latent form: no `absorb(...)` and no `q_scale`
      (the fused op takes the `[B, H, L + P]` latent query;
      `mla-lift-q-prep` produces that form);
    - for a per-tensor fp8 cache, a quantising update uses the same scale
      value as the attention's `kv_scale` (the fused op has one `kv_scale`
      for both). With already-quantised fp8 inputs the update has no scale
      and the attention's `kv_scale` is kept.

    The update's operands dominate the update and hence the later attention
    in the same block. Nothing is fused when another op in between may
    access the cache (a prefill attention reading context, a decode
    attention on a possibly-aliasing cache, another update, a loop writing
    it, a call, an unknown op), when the attention reads another cache value,
    even one that may alias the update's (only the same SSA value is known
    to be the same storage), when update and attention are in different
    blocks (either inside an `scf.if`), or when the write and read scales
    are different values.

    With `cost-model=true` (the default) the pass also folds only where it
    pays on the target. On `cpu` it always does (one pass over the rows,
    no launch). On `cuda-sm90` the one-launch kernel (the 16-head decode
    stores the rows itself) runs only for H not a multiple of 64 and a plain
    cache, and beats the update's launch plus the decode only up to about
    4,160 tokens a sequence (the block table's width times the page): past
    that the per-tile test of the substitution costs more than the launch
    it saves (docs/results/h100.md, the `decode+update` rows). Elsewhere
    the pass declines; `cost-model=false` folds wherever it is legal, and
    the fused op still lowers and runs (the runtime then stores the rows in
    their own launch first).

    Only `mla.kv_cache_update` is folded, not `mla.rope_kv_cache_update`.
    In the pipelines this pass (`fuse-into-attention=true`, decode only)
    runs after `mla-fuse-rope-kv-update`, so it finds an update to fold only
    where the rope fusion left one (for example with `fuse-rope=false`).

    Implemented in `lib/Dialect/MLA/Transforms/FuseKVUpdateIntoAttention.cpp`.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "Target whose decode attention kernel may write the cache: "
           "'cpu' or 'cuda-sm90'">,
    Option<"costModel", "cost-model", "bool", /*default=*/"true",
           "Fold only where the target's measured cost says it pays">
  ];
  let dependentDialects = ["::mlir::mla::MLADialect"];
  let statistics = [
    Statistic<"numFused", "fused", "Number of updates folded into attention">
  ];
}

def MLALiftQPrep : Pass<"mla-lift-q-prep"> {
  let summary = "Make the query preparation of absorbing decode attention explicit";
  let description = [{
    An `mla.decode_attention` in absorbing form takes the head query `q`
    (`[B, H, N + P]`), `absorb(%w_uk)` (`[H, N, L]`) and optionally
    `q_scale`, and assembles its latent query internally. This pass makes
    that preparation explicit (vLLM #41568), so that it can fuse with the
    ops around it (the q projection, RoPE of `q_pe`) and be shared between
    attentions. The attention becomes

    1. `q_nope = q[:, :, 0:N]` (`[B, H, N]`) and `q_pe = q[:, :, N:N+P]`
       (`[B, H, P]`) as `tensor.extract_slice`s, or, when `q` is
       `tensor.concat dim(2) %nope, %pe` with a `P`-wide `%pe` (how models
       assemble the rotated query), those two operands directly, so that the
       rope of `q_pe` feeds `mla.q_concat` and `mla-fuse-rope-kv-update` can
       take it into the cache-update kernel;
    2. `mla.q_absorb %q_nope, %w_uk` (`[B, H, L]`);
    3. `mla.q_concat` of the absorbed query and `q_pe` (`[B, H, L + P]`);
    4. with `q_scale`, `mla.quantize` of that query to `f8E4M3FN`;
    5. the latent-form `mla.decode_attention` (no `absorb`, no `q_scale`) on
       the assembled query.

    ```mlir
    %o, %lse = mla.decode_attention %q, %cache[%bt, %sl]
        absorb(%w_uk : tensor<16x128x512xbf16>) q_scale %qs softmax_scale = 0.125
        : tensor<?x16x192xbf16>, !mla.kv_cache<?x64xbf16>, tensor<?x8xi32>, tensor<?xi32>
        -> tensor<?x16x512xbf16>, tensor<?x16xf32>
    // becomes
    %c0 = arith.constant 0 : index
    %b = tensor.dim %q, %c0 : tensor<?x16x192xbf16>
    %nope = tensor.extract_slice %q[0, 0, 0] [%b, 16, 128] [1, 1, 1]
        : tensor<?x16x192xbf16> to tensor<?x16x128xbf16>
    %pe = tensor.extract_slice %q[0, 0, 128] [%b, 16, 64] [1, 1, 1]
        : tensor<?x16x192xbf16> to tensor<?x16x64xbf16>
    %lat = mla.q_absorb %nope, %w_uk
        : tensor<?x16x128xbf16>, tensor<16x128x512xbf16> -> tensor<?x16x512xbf16>
    %ql = mla.q_concat %lat, %pe
        : tensor<?x16x512xbf16>, tensor<?x16x64xbf16> -> tensor<?x16x576xbf16>
    %q8 = mla.quantize %ql, %qs : tensor<?x16x576xbf16> -> tensor<?x16x576xf8E4M3FN>
    %o, %lse = mla.decode_attention %q8, %cache[%bt, %sl] softmax_scale = 0.125
        : tensor<?x16x576xf8E4M3FN>, !mla.kv_cache<?x64xbf16>, tensor<?x8xi32>, tensor<?xi32>
        -> tensor<?x16x512xbf16>, tensor<?x16xf32>
    ```

    The absorbed and concatenated queries keep `q`'s element type. The new
    attention keeps the cache, block table, sequence lengths, `kv_scale`,
    `softmax_scale`, the optional log-sum-exp result and any discardable
    attributes.

    Sizes: `P` is the cache's rope dim and `L` its latent rank. A dynamic
    batch (or head count) is read with `tensor.dim` on `q`. The nope width
    `N` is taken from `w_uk` or from `q`'s last dimension when either is
    static, otherwise from `tensor.dim %w_uk, 1` (it is then both the size
    of `q_nope` and the offset of `q_pe`).

    Attentions already in latent form are left alone, as are absorbing ones
    whose head query is not `bf16`, `f16` or `f32` (an `f8E4M3FN` head
    query): `mla.q_absorb` takes float queries only. The rewrite is local
    and applied once per op (`walkAndApplyPatterns`), so the pass neither
    folds nor deletes unrelated IR.

    Two absorbing attentions on the same `q` and `w_uk` (for example over
    two caches) get identical, pure preparations; `-canonicalize -cse`
    afterwards leaves one `mla.q_absorb` / `mla.q_concat` that both read.
    The pipelines run this pass in decode only, before
    `mla-fuse-rope-kv-update`.

    Implemented in `lib/Dialect/MLA/Transforms/LiftQPrep.cpp`.
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
    Folds DeepSeek's `kv_a_layernorm` (an `mla.rms_norm` of the first `L`
    columns of the `kv_a` projection) into the fused rope + cache update
    that is its only reader: the norm becomes the update's `latent_norm`,
    and the cache-write kernel, which reads every token's latent row anyway,
    normalises it before storing. The separate norm kernel, a launch on the
    decode step's critical path, and its `[T, L]` temporary go away.

    ```mlir
    %n = mla.rms_norm %lat, %w {epsilon = 1.0e-06 : f32}
        : tensor<64x512xbf16>, tensor<512xbf16>
    mla.rope_kv_cache_update neox %n, %k_pe, %slots into %cache
        positions(%pos, %cs) : ...
    // becomes
    mla.rope_kv_cache_update neox %lat, %k_pe, %slots into %cache
        positions(%pos, %cs)
        latent_norm(%w : tensor<512xbf16>, epsilon = 9.99999997E-7) : ...
    ```

    It fires on an `mla.rope_kv_cache_update` without a latent norm whose
    `kv_c` is the result of an `mla.rms_norm` that

    - has no other reader: prefill's decompression (`mla.decompress_kv`
      through `kv_b`), a function result or any other op keeps the norm,
      since the normalised latent must exist anyway;
    - is in the update's block.

    The update is rebuilt in place, keeping its discardable attributes, with
    the norm's input as `kv_c` and `latent_norm(%weight, epsilon = e)`; the
    norm is erased. The cache write never moves. `mla.kv_cache_update` (no
    fused kernel) is left alone: run `mla-fuse-rope-kv-update` first (the
    pipelines do).

    Rounding is unchanged: the kernels compute the norm in f32 like the
    unfused `mla.rms_norm` and round the normalised latent once to kv_c's
    element type before encoding the row. The CPU reference shares the row
    routine with the norm kernel (bit for bit); the CUDA kernels sum the
    squares in another order (within one rounding of the latent values).

    The pipelines run this pass only with `fuse-kv-norm=true`. It is off by
    default: on the measured DeepSeek-V2-Lite decode step it gained nothing
    with generated kernels (the latent branch is not the critical path once
    it runs beside the query branch) and lost with library kernels, whose
    norm path is the generic per-token one (docs/cuda.md, "The general
    kernel"). It stays for targets and shapes where the latent branch is
    critical.

    Implemented in `lib/Dialect/MLA/Transforms/FuseKVNorm.cpp`.
  }];
  let dependentDialects = ["::mlir::mla::MLADialect"];
  let statistics = [
    Statistic<"numFused", "fused", "Number of latent norms folded into an update">
  ];
}

def MLAFuseLinearAddend : Pass<"mla-fuse-linear-addend"> {
  let summary = "Fold a residual add into the preceding linear's epilogue";
  let description = [{
    Folds a residual add into the GEMM that produces one of its operands:
    `arith.addf(mla.linear(x, w), r)` (either operand order) becomes
    `mla.linear x, w addend(r)`, one GEMM whose epilogue adds `r`
    (cuBLASLt's `D = A B + C` on CUDA) instead of a GEMM and a separate add
    kernel. In a decode step this is `o_proj` plus the residual
    `hidden_states`.

    ```mlir
    %o = mla.linear %attn, %w_o : tensor<64x2048xbf16>, tensor<2048x2048xbf16> -> tensor<64x2048xbf16>
    %h = arith.addf %hidden, %o : tensor<64x2048xbf16>
    // becomes
    %h = mla.linear %attn, %w_o addend(%hidden : tensor<64x2048xbf16>)
        : tensor<64x2048xbf16>, tensor<2048x2048xbf16> -> tensor<64x2048xbf16>
    ```

    It fires on an `arith.addf` of ranked tensors where one operand is the
    result of an `mla.linear` that

    - has no addend yet,
    - has no other use (otherwise the product is materialised anyway and the
      add reads it; fusing would compute the GEMM twice),
    - is in the add's block (a GEMM is never moved into a loop body or a
      branch).

    The fused op is built at the add's position (so `r` may be defined after
    the linear) with the linear's location; the add and the old linear are
    erased. If both operands are such linears, the left one takes the right
    one's result as its addend. Chains (each layer's residual is the next
    layer's addend) fuse layer by layer.

    Rounding: unfused, the product is rounded to the element type and the
    sum rounded again; fused, `x @ w^T + r` is summed in f32 and rounded
    once. Like an FMA contraction, the result differs by at most about one
    ulp of the output type per element and is the closer one to exact
    arithmetic, within the step check's tolerance (docs/lowering.md).
    Artifacts compiled with and without the pass therefore differ slightly
    in their outputs and, in multi-layer steps, in the cache rows of later
    layers (their input is the residual). The pipelines run it by default;
    their `fuse-linear-addend=false` turns it off.

    Implemented in `lib/Dialect/MLA/Transforms/FuseLinearAddend.cpp`.
  }];
  let dependentDialects = ["::mlir::mla::MLADialect"];
  let statistics = [
    Statistic<"numFused", "fused", "Number of adds folded into a linear">
  ];
}

def MLAFuseProjections : Pass<"mla-fuse-projections"> {
  let summary = "Compute the projections of one input as one GEMM over concatenated weights";
  let description = [{
    Computes the projections that read one activation as one GEMM over their
    concatenated weights. In DeepSeek's attention `q_proj` (or `q_a_proj`
    when q is low-rank) and `kv_a_proj_with_mqa` both read the normalised
    hidden state. In a decode step at batch 64 each of these GEMMs is
    latency-bound (a serial loop over K with few CTAs), so the two cost
    nearly twice one GEMM as wide as both. Inference engines (vLLM, SGLang)
    fuse exactly this pair when they load the weights; this pass does it in
    the IR.

    Within each block of a `func.func`, the `mla.linear` ops that

    - have no addend (an addend belongs to one projection's epilogue),
    - read the same `input` SSA value,
    - take a weight that is an argument of the function's entry block,
    - have the same weight element type and the same result element type,
    - have statically shaped input, weight and result (the slice offsets and
      the fused width are numbers),

    form a group. Every group of two or more becomes `tensor.concat dim(0)`
    of the weights (in the block order of the linears), one `mla.linear` of
    the input and the concatenated weight (`[T, sum of N_i]`), and one
    `tensor.extract_slice %y[0, off_i] [T, N_i] [1, 1]` per original, which
    replaces its result:

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

    In the generated models it fuses DeepSeek-V2-Lite's `q_proj` +
    `kv_a_proj_with_mqa` (2048 -> 3072 + 576, as above) and DeepSeek-V3's
    `q_a_proj` + `kv_a_proj_with_mqa` (7168 -> 1536 + 576, vLLM's
    `fused_qkv_a_proj`).

    Why only weights that are function arguments: they are bound by the
    caller and constant across steps, so their concatenation can be
    computed once when the weights are bound. The artifact lowering does
    exactly that: a `tensor.concat` of weight arguments is filled by the
    artifact's prepare program, run once per weight binding, not every step
    (docs/lowering.md). A weight computed in the function (by
    `tensor.empty`, an arith op, a loop iteration argument, ...) would need
    a fresh copy every step, which costs more than the fusion saves, and is
    left alone.

    The new ops are built just before the group's first linear: the input
    dominates it and the weights are function arguments, so they dominate
    every use of every original (including uses between two originals). The
    concat and the fused linear take a fused location of the originals'
    locations; each slice keeps its original's. Linears in different blocks
    (one before an `scf.if`, one inside it) are never grouped: a GEMM never
    moves into or out of a region; two linears inside the same branch block
    do fuse there. Different inputs, different weight or result element
    types, a single eligible linear, or any dynamic dimension change
    nothing. A second run finds nothing new: the fused weight is a
    `tensor.concat`, not an argument.

    Numerics: every output column is the same dot product as before,
    accumulated in f32 and rounded once to the result type. The GEMM library
    may choose another algorithm (for example split-K) for the wider shape
    and so sum in another order; results then differ by rounding only.

    The decode and prefill pipelines run it by default (option
    `fuse-projections`), last among the mla rewrites, so that the passes
    before it match the unfused form (docs/Passes/pipelines.md).

    Implemented in `lib/Dialect/MLA/Transforms/FuseProjections.cpp`.
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
    its block, as early or as late as its operands and its cache effects
    allow. Only the updates move, and never out of their block (an update
    inside an `scf.for` body stays in that body). Every block of an SSA
    region is handled; blocks of graph regions are left alone.

    - `strategy=early` (the default) places an update just after the last op
      of its block that defines one of its operands (or at the block start),
      but never above an op that may access (read or write) the same or an
      aliasing cache. Writing early lets the update overlap with the query
      projection and RoPE, and frees the attention from waiting on it.
    - `strategy=late` places an update just before the first op below it
      that may access the same or an aliasing cache (its first reader, a
      conflicting writer, a call, ...) or just before the block terminator,
      and never past an op that uses its results (the rotated `q_pe` /
      `k_pe` of `mla.rope_kv_cache_update`, also when the use is nested in a
      region op).

    Updates that end up at the same spot keep their original order: early,
    updates are placed top-down and a later one settles after the earlier
    ones already at its spot; late, bottom-up and symmetrically. An update
    does not move when its neighbour is already a barrier: the definition
    of one of its operands (early), a conflicting access, a call or an
    unknown op, or a user of its results or the terminator (late). An
    unknown strategy is rejected when the pass pipeline is parsed.

    May-access comes from `mla/Dialect/MLA/Analysis/CacheAccess.h`, which
    reads declared memory effects, never op names. An op may access a cache
    if

    - it declares a `MemRead`, `MemWrite` or `Free` effect on a cache value
      that may alias it, or a valueless effect on the `mla::KVCache`
      resource or on the default resource;
    - it has no `MemoryEffectOpInterface`: calls, unregistered ops and other
      ops with unknown effects read and write every cache;
    - it is a region op (`scf.if`, `scf.for`, ...) with such an access
      anywhere inside it.

    An update writes its cache, so any such access, read or write, is a
    barrier. Pure ops (`mla.rope`, `mla.q_absorb`, `arith`, region ops with
    pure bodies) and ops touching only other resources are not.

    Aliasing: two distinct SSA values of `!mla.kv_cache` type are disjoint
    only when both are arguments of the entry block of the same function and
    at least one of them carries `mla.noalias`. Anything else (two plain
    arguments, a cache produced by an op, a block argument of a non-entry
    block) may alias. So updates of provably distinct caches reorder freely
    relative to each other, while two updates of one cache or of
    possibly-aliasing caches keep their order (a write-write conflict).

    ```mlir
    %qr = mla.rope neox %q_pe, %pos, %cs : ...
    %qa = mla.q_absorb %q_nope, %w_uk : ...
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : ...
    %o = mla.decode_attention %ql, %cache[%bt, %sl] softmax_scale = 0.1 : ...
    // strategy=early, the update's operands being function arguments:
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : ...
    %qr = mla.rope neox %q_pe, %pos, %cs : ...
    %qa = mla.q_absorb %q_nope, %w_uk : ...
    %o = mla.decode_attention %ql, %cache[%bt, %sl] softmax_scale = 0.1 : ...
    ```

    `strategy=late` leaves this update where it is: the attention right
    after it reads the cache.

    Implemented in `lib/Dialect/MLA/Transforms/ScheduleKVUpdates.cpp`.
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
