//===- InitAll.h - One registration hook for tools and embedders ----------===//
//
// mla-opt, mla-translate, the C API and embedding projects register the same
// dialects, extensions and passes through these functions.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_INITALL_H
#define MLA_INITALL_H

namespace mlir {
class DialectRegistry;
namespace mla {

/// The mla dialect plus the upstream dialects the pipelines lower through
/// (func, arith, math, tensor, memref, scf, linalg, bufferization, gpu, nvvm,
/// llvm) and their interface extensions.
void registerAllDialects(DialectRegistry &registry);

/// Every mla pass and pipeline, plus the upstream passes.
void registerAllPasses();

} // namespace mla
} // namespace mlir

#endif // MLA_INITALL_H
