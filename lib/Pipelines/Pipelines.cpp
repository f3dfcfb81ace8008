//===- Pipelines.cpp - The decode and prefill pass pipelines --------------===//
//
// Order and why:
//  1. extract: split monolithic attention; every later pass sees the update.
//  2. canonicalize + cse: merge duplicated pure producers (ropes, slices).
//  2b. fuse-linear-addend: residual adds into the GEMM epilogue (touches
//     no cache op; after CSE so duplicated adds are merged first).
//  3. eliminate: dummy runs, empty and redundant writes go before fusion so
//     nothing fuses a write that would be deleted.
//  4. fuse-quant before fuse-rope: rope -> quantize -> update composes into a
//     fused rope update with a scale.
//  5. lift-q-prep (decode): explicit q preparation that CSE can share; it
//     runs before fuse-rope so the q rope's user (q_concat) follows the
//     update and the q rope fuses into the same kernel.
//  5b. fuse-kv-norm: the latent RMSNorm whose only reader is the fused
//     update goes into it (its kernel reads the latent rows anyway).
//  6. schedule: move updates early (or late) within their effects.
//  7. fuse-into-attention (decode, targets whose kernel can write rows).
//  8. canonicalize + cse, then verify the cache order of the result.
//  9. kernels=codegen: generate GPU kernels for the cache writes and lower
//     them with MLIR's NVVM pipeline to PTX (sm_90a), kept as a gpu.binary.
//
//===----------------------------------------------------------------------===//
#include "mla/Pipelines/Pipelines.h"

#include "mla/Conversion/Passes.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::mla;

namespace {

enum class Phase { Decode, Prefill };

/// Generated cache-write kernels -> PTX text for sm_90a (TOOLCHAIN.md:
/// MLIR 22's NVVM path as measured on the H200).
void addCodegenPasses(OpPassManager &pm) {
  // Four tokens a block and at least two blocks an SM: the fastest of the
  // geometries timed on the H200 (docs/codegen.md, "Geometry of the sm_90
  // pipeline"): fused rope + update with 16 q heads at T = 1 / 16 / 256 in
  // 1.97 / 2.48 / 2.64 us, against 1.99 / 2.75 / 3.03 us with the pass
  // defaults (8, 0).
  MLAOutlineCacheKernelsOptions outline;
  outline.tokensPerBlock = 4;
  outline.minBlocksPerSM = 2;
  pm.addPass(createMLAOutlineCacheKernels(outline));
  GpuNVVMAttachTargetOptions target;
  target.chip = "sm_90a";
  target.features = "+ptx80";
  target.moduleMatcher = "mla_kernels";
  pm.addPass(createGpuNVVMAttachTarget(target));
  pm.addNestedPass<gpu::GPUModuleOp>(createSCFToControlFlowPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps());
  pm.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void buildPipeline(OpPassManager &pm, const PipelineOptions &options,
                   Phase phase) {
  pm.addPass(createMLAExtractKVUpdate());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (options.fuseLinearAddend)
    pm.addPass(createMLAFuseLinearAddend());
  if (options.eliminate)
    pm.addPass(createMLAEliminateKVUpdates());
  if (options.fuseQuant)
    pm.addPass(createMLAFuseKVUpdateQuant());
  // Lifting first exposes the rotated q_pe to q_concat, after the update,
  // where the rope fusion can take the q rope into the same kernel.
  if (phase == Phase::Decode && options.liftQPrep)
    pm.addPass(createMLALiftQPrep());
  if (options.fuseRope)
    pm.addPass(createMLAFuseRopeKVUpdate());
  // On the fused update only: its kernel already reads each latent row.
  if (options.fuseKVNorm)
    pm.addPass(createMLAFuseKVNorm());
  if (options.schedule != ScheduleChoice::None) {
    MLAScheduleKVUpdatesOptions scheduleOptions;
    scheduleOptions.strategy = options.schedule == ScheduleChoice::Early
                                   ? KVUpdateSchedule::Early
                                   : KVUpdateSchedule::Late;
    pm.addPass(createMLAScheduleKVUpdates(scheduleOptions));
  }
  if (phase == Phase::Decode && options.fuseIntoAttention) {
    MLAFuseKVUpdateIntoAttentionOptions fuseOptions;
    fuseOptions.target = stringifyTarget(options.target).str();
    pm.addPass(createMLAFuseKVUpdateIntoAttention(fuseOptions));
  }
  // Last, on the final op order: the fused GEMM takes the place of the
  // group's first linear, and the passes above match the unfused form.
  if (options.fuseProjections)
    pm.addPass(createMLAFuseProjections());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (options.verify)
    pm.addPass(createMLAVerifyKVOrder());
  // Default (auto): generated kernels where they run, i.e. on CUDA; they
  // measured faster or equal to the library on the H200 (docs/codegen.md).
  const bool codegen =
      options.kernels == KernelSource::Codegen ||
      (options.kernels == KernelSource::Auto &&
       options.target == PipelineTarget::CudaSm90);
  if (codegen)
    addCodegenPasses(pm);
}

} // namespace

llvm::StringRef mlir::mla::stringifyTarget(PipelineTarget target) {
  return target == PipelineTarget::Cpu ? "cpu" : "cuda-sm90";
}

void mlir::mla::buildDecodePipeline(OpPassManager &pm,
                                    const PipelineOptions &options) {
  buildPipeline(pm, options, Phase::Decode);
}

void mlir::mla::buildPrefillPipeline(OpPassManager &pm,
                                     const PipelineOptions &options) {
  buildPipeline(pm, options, Phase::Prefill);
}

void mlir::mla::registerPipelines() {
  PassPipelineRegistration<PipelineOptions>(
      "mla-decode-pipeline",
      "Extract, eliminate, fuse, schedule and verify the cache updates of a "
      "decode step",
      [](OpPassManager &pm, const PipelineOptions &options) {
        buildDecodePipeline(pm, options);
      });
  PassPipelineRegistration<PipelineOptions>(
      "mla-prefill-pipeline",
      "Extract, eliminate, fuse, schedule and verify the cache updates of a "
      "prefill step",
      [](OpPassManager &pm, const PipelineOptions &options) {
        buildPrefillPipeline(pm, options);
      });
}
