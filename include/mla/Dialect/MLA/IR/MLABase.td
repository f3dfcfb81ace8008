//===- MLABase.td - The mla dialect, its base op class and resource -------===//
//
// Multi-head Latent Attention (MLA) as DeepSeek-V2/V3 use it: attention and
// the paged KV-cache update are separate ops whose effects on the cache are
// declared, so that ordinary MLIR machinery can reason about them.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_BASE_TD
#define MLA_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def MLA_Dialect : Dialect {
  let name = "mla";
  let cppNamespace = "::mlir::mla";
  let summary = "Multi-head Latent Attention with an explicit paged KV cache";
  let description = [{
    Values are tensors (pure, freely CSE'd and moved). State is the paged KV
    cache, a buffer-like value of type `!mla.kv_cache` that is updated in
    place. Ops that write the cache declare `MemWrite` on it and ops that read
    it declare `MemRead`, on the `mla::KVCache` resource. Nothing relies on
    dummy values for ordering.

    Conventions shared by every op:
    - A slot mapping is a 1-D integer tensor; token `t` is written to cache row
      `slot_mapping[t]`. A negative slot writes nothing. The slot mapping may
      be shorter than the (padded) token inputs: tokens past its end write
      nothing either.
    - A function carrying the unit attribute `mla.dummy_run` is a warm-up or
      profile run: its cache writes must not be observable, and
      `mla-eliminate-kv-updates` deletes them.
    - A function argument of cache type carrying `mla.noalias` does not share
      storage with any other cache argument of the same function.
    - `mla.name = "..."` on a function argument or result names the buffer
      the runtime binds to it (weights, caches, step metadata).
    - `mla.rope_table = #mla.rope_table<...>` on a `[max_position, rope]`
      f32 function argument says how its cos/sin table is computed (plain
      or YaRN-scaled rope), so that a runner can fill it when the caller
      does not.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Registers the types of MLATypes.td (where their storage is complete).
    void registerTypes();
    /// Registers the attributes of MLAAttrs.td.
    void registerAttributes();

    /// Unit attribute on a function: a dummy / profile run.
    static constexpr ::llvm::StringLiteral getDummyRunAttrName() {
      return ::llvm::StringLiteral("mla.dummy_run");
    }
    /// Unit attribute on a cache argument: no other cache argument aliases it.
    static constexpr ::llvm::StringLiteral getNoAliasAttrName() {
      return ::llvm::StringLiteral("mla.noalias");
    }
    /// String attribute on a function argument or result: the name the
    /// runtime binds a caller buffer by (weights, caches, step data).
    static constexpr ::llvm::StringLiteral getNameAttrName() {
      return ::llvm::StringLiteral("mla.name");
    }
    /// `#mla.rope_table` on a 2-D f32 function argument: how its cos/sin
    /// table is computed, recorded in the artifact for runners that fill it.
    static constexpr ::llvm::StringLiteral getRopeTableAttrName() {
      return ::llvm::StringLiteral("mla.rope_table");
    }
    /// Dictionary attribute on a cache-write op: the compiler-generated
    /// kernel that implements it (`symbol`, `block_threads`,
    /// `tokens_per_block`); set by mla-outline-cache-kernels.
    static constexpr ::llvm::StringLiteral getKernelAttrName() {
      return ::llvm::StringLiteral("mla.kernel");
    }
  }];
}

/// The paged KV cache as a side-effect resource, so that cache effects never
/// conflict with unrelated memory (memref, LLVM) and vice versa.
def MLA_KVCacheResource : Resource<"::mlir::mla::KVCacheResource">;

/// The base of every mla op.
class MLA_Op<string mnemonic, list<Trait> traits = []>
    : Op<MLA_Dialect, mnemonic, traits>;

class MLA_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<MLA_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def MLA_RopeStyle : I32EnumAttr<"RopeStyle", "rotary embedding style", [
    I32EnumAttrCase<"gptj", 0>, // interleaved pairs (2i, 2i+1)
    I32EnumAttrCase<"neox", 1>  // halves (i, i + d/2)
  ]> {
  let cppNamespace = "::mlir::mla";
}

def MLA_CacheLayout : I32EnumAttr<"CacheLayout", "KV-cache row encoding", [
    I32EnumAttrCase<"plain", 0>,        // latent + rope values of the element type
    I32EnumAttrCase<"per_tensor", 1>,   // fp8, one runtime scale for the cache
    I32EnumAttrCase<"fp8_ds_mla", 2>    // fp8 latent, f32 tile scales, bf16 rope
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::mla";
}

def MLA_AttentionMode : I32EnumAttr<"AttentionMode", "attention phase", [
    I32EnumAttrCase<"decode", 0>,
    I32EnumAttrCase<"prefill", 1>
  ]> {
  let cppNamespace = "::mlir::mla";
}

#endif // MLA_BASE_TD
