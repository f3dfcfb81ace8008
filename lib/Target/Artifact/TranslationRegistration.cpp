//===- TranslationRegistration.cpp - mla-translate entry points -----------===//
#include "mla/InitAll.h"
#include "mla/Target/ArtifactTranslation.h"

#include "mlart/Artifact.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <sstream>

using namespace mlir;

namespace {

void registerDialects(DialectRegistry &registry) {
  mla::registerAllDialects(registry);
}

/// A readable listing of an artifact as the runtime loads it: what lit
/// tests check and what a developer reads to see the lowered program.
void printListing(const mlart::Artifact &artifact, raw_ostream &os) {
  os << "artifact @" << artifact.functionName() << " arena "
     << artifact.arenaBytes() << " bytes";
  if (artifact.preparedBytes() > 0)
    os << " prepared " << artifact.preparedBytes() << " bytes";
  os << "\n";
  for (auto [i, buffer] : llvm::enumerate(artifact.buffers())) {
    os << "buffer " << i << " \"" << buffer.name << "\" "
       << mlart::bufferRoleName(buffer.role) << " "
       << mlart::dtypeName(buffer.dtype) << " [";
    for (int d = 0; d < buffer.rank; ++d)
      os << (d ? ", " : "") << buffer.sizes[d];
    os << "]\n";
  }
  for (auto [i, cache] : llvm::enumerate(artifact.caches())) {
    os << "cache " << i << " \"" << cache.name << "\" "
       << mlart::cacheLayoutName(cache.desc.layout) << " "
       << mlart::dtypeName(cache.desc.dtype) << " block "
       << cache.desc.blockSize << " latent " << cache.desc.latentRank
       << " rope " << cache.desc.ropeDim;
    if (cache.scaleBuffer != mlart::kNoIndex)
      os << " scale buffer" << cache.scaleBuffer;
    os << "\n";
  }
  for (const mlart::RopeTableDecl &table : artifact.ropeTables()) {
    const mlart::RopeTableParams &p = table.params;
    os << "rope_table buffer" << table.buffer << " theta "
       << llvm::format("%g", p.theta);
    if (p.isYarn())
      os << llvm::format(" yarn factor %g original_max_position %lld "
                         "beta_fast %g beta_slow %g mscale %g "
                         "mscale_all_dim %g",
                         p.factor, (long long)p.originalMaxPosition, p.betaFast,
                         p.betaSlow, p.mscale, p.mscaleAllDim);
    os << "\n";
  }
  auto printView = [&](uint32_t index) {
    const mlart::ViewDecl &view = artifact.views()[index];
    if (view.base == mlart::ViewBase::Buffer)
      os << "buffer" << view.baseIndex;
    else if (view.base == mlart::ViewBase::Prepared)
      os << "prepared";
    else
      os << "arena";
    os << "+" << view.byteOffset << "[";
    for (int d = 0; d < view.rank; ++d)
      os << (d ? "x" : "") << view.sizes[d];
    os << "]";
    // Strides only where they are not the sizes' row-major ones: the
    // slices and assembled-query parts that a reader must see are views.
    bool rowMajor = true;
    int64_t expect = 1;
    for (int d = view.rank - 1; d >= 0; --d) {
      rowMajor = rowMajor && view.strides[d] == expect;
      expect *= view.sizes[d];
    }
    if (!rowMajor) {
      os << "{";
      for (int d = 0; d < view.rank; ++d)
        os << (d ? "," : "") << view.strides[d];
      os << "}";
    }
  };
  for (auto [i, module] : llvm::enumerate(artifact.modules()))
    os << "module " << i << " ptx " << module.ptx.size() << " bytes\n";
  for (auto [i, kernel] : llvm::enumerate(artifact.kernels()))
    os << "kernel " << i << " @" << kernel.name << " "
       << mlart::opcodeName(kernel.op) << " module " << kernel.module
       << " block " << kernel.blockThreads << " tokens "
       << kernel.tokensPerBlock << "\n";
  auto printInstruction = [&](const mlart::Instruction &inst) {
    os << mlart::opcodeName(inst.opcode);
    if (inst.kernel != mlart::kNoIndex)
      os << " codegen(kernel" << inst.kernel << ")";
    if (inst.cache != mlart::kNoIndex)
      os << " cache" << inst.cache;
    // Absent operands print as "-" up to the last present one, so a slot's
    // position stays readable (rope_cache_update's q_pe_in follows the
    // often absent k_pe_out).
    int last = -1;
    for (int k = 0; k < mlart::kMaxOperands; ++k)
      if (inst.operands[size_t(k)] != mlart::kNoIndex)
        last = k;
    for (int k = 0; k <= last; ++k) {
      os << " ";
      if (inst.operands[size_t(k)] == mlart::kNoIndex)
        os << "-";
      else
        printView(inst.operands[size_t(k)]);
    }
    // The latent norm's epsilon (slot 8 is its weight).
    if (inst.opcode == mlart::Opcode::RopeCacheUpdate &&
        inst.operands[8] != mlart::kNoIndex)
      os << " epsilon " << llvm::format("%g", double(inst.floatAttr));
    os << "\n";
  };
  // The prepare program (run once per weight binding), then the step.
  for (auto [i, inst] : llvm::enumerate(artifact.prepareInstructions())) {
    os << "prepare " << i << ": ";
    printInstruction(inst);
  }
  for (auto [i, inst] : llvm::enumerate(artifact.instructions())) {
    os << i << ": ";
    printInstruction(inst);
  }
}

} // namespace

void mlir::mla::registerToArtifactTranslations() {
  TranslateFromMLIRRegistration binary(
      "mla-to-artifact", "serialize a step function as an MLAA artifact",
      [](ModuleOp module, raw_ostream &os) -> LogicalResult {
        FailureOr<std::vector<uint8_t>> bytes = translateToArtifact(module);
        if (failed(bytes))
          return failure();
        os.write(reinterpret_cast<const char *>(bytes->data()), bytes->size());
        return success();
      },
      registerDialects);
  TranslateFromMLIRRegistration listing(
      "mla-to-artifact-listing",
      "serialize a step function, load it back and print it as text",
      [](ModuleOp module, raw_ostream &os) -> LogicalResult {
        FailureOr<std::vector<uint8_t>> bytes = translateToArtifact(module);
        if (failed(bytes))
          return failure();
        mlart::StatusOr<mlart::Artifact> artifact =
            mlart::Artifact::load(bytes->data(), bytes->size());
        if (!artifact.ok())
          return module.emitError() << "the artifact does not load: "
                                    << artifact.status().toString();
        printListing(artifact.value(), os);
        return success();
      },
      registerDialects);
}
