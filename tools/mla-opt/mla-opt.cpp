//===- mla-opt.cpp - The mla optimizer driver -----------------------------===//
#include "mla/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::mla::registerAllDialects(registry);
  mlir::mla::registerAllPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "MLA optimizer driver\n", registry));
}
