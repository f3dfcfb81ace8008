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

#endif // MLA_TRANSFORMS_PASSES_TD
