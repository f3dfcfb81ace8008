//===- Passes.td - Conversions out of the mla dialect ---------*- tablegen -*-===//
//
// Passes that turn mla ops into another dialect's code: the cache-write
// kernel generator (lib/Conversion/MLAToGPU).
//
//===----------------------------------------------------------------------===//
#ifndef MLA_CONVERSION_PASSES_TD
#define MLA_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def MLAOutlineCacheKernels : Pass<"mla-outline-cache-kernels",
                                  "::mlir::ModuleOp"> {
  let summary = "Generate GPU kernels for cache writes and mark the ops that use them";
  let description = [{
    For every `mla.kv_cache_update` and `mla.rope_kv_cache_update` that a
    generated kernel can implement, builds a `gpu.func` kernel (one per
    distinct specialisation: layout, element types, latent and rope sizes,
    slot and position types, rope style, q_pe or not, latent norm or not)
    in a `gpu.module @mla_kernels`, and marks the op with the kernel it uses
    (`mla.kernel`; ops already marked are skipped). The kernel's name comes
    from the runtime's `codegenKernelName`, so the runtime can check that a
    kernel runs only on operands it was generated for. The op stays: it
    still carries the effects passes reason about, and the artifact lowering
    turns the mark into "run this generated kernel".

    ```mlir
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache : ...
    // becomes
    mla.kv_cache_update %kv_c, %k_pe, %slots into %cache {mla.kernel = {
        block_threads = 576 : i32, tokens_per_block = 8 : i32,
        symbol = @mla_kernels::@mla_cache_update_plain_bf16_l512_p64_in_bf16_slot_i64}} : ...
    gpu.module @mla_kernels {
      gpu.func @mla_cache_update_plain_bf16_l512_p64_in_bf16_slot_i64(...) kernel
    }
    ```

    Kernels: a block of `tokens-per-block` tokens, a fixed group of
    threads per token. Plain rows move as 16-byte vectors
    (`vector<8xbf16>`); `fp8_ds_mla` rows quantise 8 values per thread with
    the tile amax reduced by `gpu.shuffle xor` and `cvt.rn.satfinite`
    (round to nearest even, saturating, as the library); rope rotates 8
    pairs per thread in f32 without FMA contraction and rounds to bf16
    once; q_pe items are strided over the latent threads of the whole
    grid; a latent norm is computed in f32 by the token's latent threads
    (partial sums combined over 8-lane groups) before the row is encoded.
    Negative slots are skipped. A call is all-or-nothing, like the library
    kernels: each kernel loads its slots, positions and row data, then
    votes (a call the runtime validated first reads the verdict,
    `call_failed`; a small call scans every slot and position in every
    block, block 0 records the smallest bad index with an atomic min, and
    one `nvvm.barrier #nvvm.reduction<or>` combines the block), and returns
    before any store if a slot is `>= num_slots` or a position is outside
    the table. Every kernel begins with `nvvm.griddepcontrol wait` and
    `launch_dependents`: the runtime launches it with programmatic
    dependent launch, so it waits for the previous grid before its first
    load or store (docs/cuda.md). The argument binding is the runtime's
    contract (docs/codegen.md).

    Not converted (left on the library kernel, with a remark "kept on the
    library kernel: ..." that names the reason): per-tensor fp8 caches,
    inputs that are not bf16 where a conversion or rotation is needed,
    `fp8_ds_mla` rows whose latent is not a multiple of 128 or whose rope is
    not a multiple of 8, other rows that are not a whole number of 16-byte
    chunks, rope dims that are not a multiple of 16, a `q_pe` that is not
    `[T, Hq, rope]` of the input type, a latent norm into an `fp8_ds_mla`
    cache, with a weight of another type than `kv_c` or over a latent that
    is not a multiple of 8 chunks, and rows too wide for one block (more
    than 1024 threads).

    `tokens-per-block` must be in [1, 32] and `min-blocks-per-sm` in
    [0, 32]; other values are an error. The pipelines' `kernels=codegen`
    runs this pass with `tokens-per-block=4 min-blocks-per-sm=2`.

    Lower the GPU module with `nvvm-attach-target{chip=sm_90a
    features=+ptx80 module=mla_kernels}`,
    `gpu.module(convert-scf-to-cf, convert-gpu-to-nvvm)`,
    `reconcile-unrealized-casts` and `gpu-module-to-binary{format=isa}`
    (what the pipelines do with `kernels=codegen`).

    Implemented in `lib/Conversion/MLAToGPU/OutlineCacheKernels.cpp`.
  }];
  let options = [
    Option<"tokensPerBlock", "tokens-per-block", "unsigned", /*default=*/"8",
           "Tokens one thread block writes (1 to 32)">,
    Option<"minBlocksPerSM", "min-blocks-per-sm", "unsigned", /*default=*/"0",
           "Blocks an SM must hold (nvvm.minctasm, caps registers); 0: as "
           "many as 2048 threads allow">
  ];
  let dependentDialects = ["::mlir::mla::MLADialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::cf::ControlFlowDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect",
                           "::mlir::NVVM::NVVMDialect"];
  let statistics = [
    Statistic<"numOutlined", "outlined", "Number of cache writes that use a generated kernel">,
    Statistic<"numKernels", "kernels", "Number of kernels generated">
  ];
}

#endif // MLA_CONVERSION_PASSES_TD
