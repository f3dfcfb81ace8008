//===- InitAll.cpp - Registration of dialects, extensions and passes ------===//
#include "mla/InitAll.h"

#include "mla/Conversion/Passes.h"
#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Pipelines/Pipelines.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

void mlir::mla::registerAllDialects(DialectRegistry &registry) {
  registry.insert<mla::MLADialect, arith::ArithDialect,
                  bufferization::BufferizationDialect,
                  cf::ControlFlowDialect, func::FuncDialect,
                  gpu::GPUDialect, LLVM::LLVMDialect, NVVM::NVVMDialect,
                  linalg::LinalgDialect, math::MathDialect,
                  memref::MemRefDialect, scf::SCFDialect,
                  tensor::TensorDialect, vector::VectorDialect>();
  // Bufferization, inlining and LLVM-translation interfaces of upstream
  // dialects; without them conversions leave unrealized casts behind.
  mlir::registerAllExtensions(registry);
  // Without it gpu-module-to-binary cannot serialize NVVM targets.
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  // gpu-module-to-binary translates gpu.module + NVVM ops to LLVM IR.
  registerAllGPUToLLVMIRTranslations(registry);
}

void mlir::mla::registerAllPasses() {
  mlir::registerAllPasses();
  mla::registerMLAPasses();
  mla::registerMLAConversionPasses();
  mla::registerPipelines();
}
