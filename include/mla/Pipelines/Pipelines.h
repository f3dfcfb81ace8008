//===- Pipelines.h - The decode and prefill pass pipelines ----------------===//
//
// `mla-decode-pipeline` and `mla-prefill-pipeline` run the mla passes in a
// documented order (docs/Passes/pipelines.md). Embedders build the same
// pipelines with these functions.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_PIPELINES_PIPELINES_H
#define MLA_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace mlir::mla {

/// Where the compiled step runs; decides which fusions the kernels support.
enum class PipelineTarget { Cpu, CudaSm90 };

/// Where the cache-write kernels come from (docs/codegen.md).
enum class KernelSource { Auto, Library, Codegen };

/// How mla-schedule-kv-updates moves updates, or not at all.
enum class ScheduleChoice { Early, Late, None };

/// Options shared by both pipelines.
struct PipelineOptions : public PassPipelineOptions<PipelineOptions> {
  Option<PipelineTarget> target{
      *this, "target", llvm::cl::desc("Kernel target"),
      llvm::cl::init(PipelineTarget::Cpu),
      llvm::cl::values(
          clEnumValN(PipelineTarget::Cpu, "cpu", "CPU reference kernels"),
          clEnumValN(PipelineTarget::CudaSm90, "cuda-sm90",
                     "CUDA kernels for Hopper (sm_90a)"))};
  Option<bool> eliminate{*this, "eliminate",
                         llvm::cl::desc("Delete unobservable cache updates"),
                         llvm::cl::init(true)};
  Option<bool> fuseQuant{*this, "fuse-quant",
                         llvm::cl::desc("Fold fp8 quantisation into updates"),
                         llvm::cl::init(true)};
  Option<bool> fuseRope{*this, "fuse-rope",
                        llvm::cl::desc("Fuse rope of k_pe (and q_pe) into "
                                       "the update"),
                        llvm::cl::init(true)};
  // Off by default: on the H200 the V2-Lite step measured no gain with
  // generated kernels (the latent branch is off the critical path) and a
  // loss with library kernels, whose norm takes the generic per-token path
  // (docs/cuda.md, "The general kernel").
  Option<bool> fuseKVNorm{*this, "fuse-kv-norm",
                          llvm::cl::desc("Fold the latent RMSNorm into the "
                                         "fused rope + cache update"),
                          llvm::cl::init(false)};
  Option<bool> liftQPrep{*this, "lift-q-prep",
                         llvm::cl::desc("Make decode query preparation "
                                        "explicit (decode only)"),
                         llvm::cl::init(true)};
  Option<bool> fuseLinearAddend{
      *this, "fuse-linear-addend",
      llvm::cl::desc("Fold residual adds into the preceding linear's "
                     "epilogue"),
      llvm::cl::init(true)};
  Option<bool> fuseProjections{
      *this, "fuse-projections",
      llvm::cl::desc("Compute projections of one input (q and kv_a) as one "
                     "GEMM over weights the artifact concatenates once"),
      llvm::cl::init(true)};
  Option<bool> fuseIntoAttention{
      *this, "fuse-into-attention",
      llvm::cl::desc("Fold updates into the attention that reads them, where "
                     "the target's kernel can (decode only)"),
      llvm::cl::init(false)};
  Option<ScheduleChoice> schedule{
      *this, "schedule", llvm::cl::desc("How to move cache updates"),
      llvm::cl::init(ScheduleChoice::Early),
      llvm::cl::values(
          clEnumValN(ScheduleChoice::Early, "early",
                     "as early as operands and effects allow"),
          clEnumValN(ScheduleChoice::Late, "late",
                     "just before the next access to the cache"),
          clEnumValN(ScheduleChoice::None, "none", "leave them in place"))};
  Option<KernelSource> kernels{
      *this, "kernels",
      llvm::cl::desc("Kernels of the cache writes (docs/codegen.md)"),
      llvm::cl::init(KernelSource::Auto),
      llvm::cl::values(
          clEnumValN(KernelSource::Auto, "auto",
                     "codegen for target=cuda-sm90 (faster or equal on the "
                     "H200, docs/codegen.md), library for cpu"),
          clEnumValN(KernelSource::Library, "library",
                     "the runtime's hand-written kernels"),
          clEnumValN(KernelSource::Codegen, "codegen",
                     "kernels generated here (mla-outline-cache-kernels), "
                     "lowered to sm_90a PTX and embedded in the artifact"))};
  Option<bool> verify{*this, "verify",
                      llvm::cl::desc("Run mla-verify-kv-order at the end"),
                      llvm::cl::init(true)};
};

/// Adds the decode pipeline to `pm` (anchored on the module).
void buildDecodePipeline(OpPassManager &pm, const PipelineOptions &options);
/// Adds the prefill pipeline to `pm`.
void buildPrefillPipeline(OpPassManager &pm, const PipelineOptions &options);

/// The target's name as the passes' `target` options spell it.
llvm::StringRef stringifyTarget(PipelineTarget target);

/// Registers both pipelines with the pass registry (mla-opt, C API).
void registerPipelines();

} // namespace mlir::mla

#endif // MLA_PIPELINES_PIPELINES_H
