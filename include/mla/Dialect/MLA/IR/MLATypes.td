//===- MLATypes.td - The paged KV-cache type ------------------------------===//
#ifndef MLA_TYPES_TD
#define MLA_TYPES_TD

include "mla/Dialect/MLA/IR/MLABase.td"
include "mlir/IR/BuiltinTypeInterfaces.td"

def MLA_KVCacheType : MLA_Type<"KVCache", "kv_cache"> {
  let summary = "a layer's paged MLA KV cache";
  let description = [{
    The cache of one layer: `num_blocks` blocks of `block_size` token rows.
    A row holds the compressed latent `kv_c` (`latent` values, 512 in
    DeepSeek) followed by the rotary key `k_pe` (`rope` values, 64).

    Layouts:
    - `plain` (default): each row is `latent + rope` values of the element
      type, which is `bf16`, `f16` or `f32`.
    - `per_tensor`: `f8E4M3FN` or `f8E5M2` values; one runtime scale (an
      operand of the ops that read or write, the same function argument for
      all of them in an artifact) converts them: `value = stored * scale`.
    - `fp8_ds_mla`: DeepSeek's 656-byte row for 512 + 64: `latent` fp8 values,
      one f32 scale per 128-value tile, then `rope` bf16 values. The element
      type is `f8E4M3FN`; scales are computed by the writer.

    Syntax: `!mla.kv_cache<?x64xbf16>`,
    `!mla.kv_cache<128x16xf32, latent = 256>`,
    `!mla.kv_cache<?x64xf8E4M3FN, fp8_ds_mla>`. `latent` and `rope` are
    printed only when they differ from 512 and 64; `num_blocks` may be `?`.
  }];
  let parameters = (ins
    "int64_t":$numBlocks,
    "int64_t":$blockSize,
    "int64_t":$latentRank,
    "int64_t":$ropeDim,
    "::mlir::Type":$elementType,
    "::mlir::mla::CacheLayout":$layout
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    TypeBuilderWithInferredContext<(ins
        "int64_t":$numBlocks, "int64_t":$blockSize, "::mlir::Type":$elementType,
        CArg<"::mlir::mla::CacheLayout", "::mlir::mla::CacheLayout::plain">:$layout,
        CArg<"int64_t", "512">:$latentRank, CArg<"int64_t", "64">:$ropeDim), [{
      return $_get(elementType.getContext(), numBlocks, blockSize, latentRank,
                   ropeDim, elementType, layout);
    }]>
  ];
  let extraClassDeclaration = [{
    static constexpr int64_t kDefaultLatentRank = 512;
    static constexpr int64_t kDefaultRopeDim = 64;
    /// Values per fp8_ds_mla scale tile.
    static constexpr int64_t kDsMlaTile = 128;

    bool hasStaticNumBlocks() const {
      return !::mlir::ShapedType::isDynamic(getNumBlocks());
    }
    /// Values in one token row: latent + rope.
    int64_t getRowValues() const { return getLatentRank() + getRopeDim(); }
    /// Bytes of one token row in this layout.
    int64_t getRowBytes() const;
    /// True for both fp8 layouts.
    bool isFp8() const { return getLayout() != ::mlir::mla::CacheLayout::plain; }
    /// True if readers and writers take a runtime per-tensor scale operand.
    bool needsScaleOperand() const {
      return getLayout() == ::mlir::mla::CacheLayout::per_tensor;
    }
  }];
}

#endif // MLA_TYPES_TD
