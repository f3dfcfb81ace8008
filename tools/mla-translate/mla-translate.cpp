//===- mla-translate.cpp - Serialize optimized mla IR as an artifact ------===//
#include "mla/Target/ArtifactTranslation.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  mlir::mla::registerToArtifactTranslations();
  return mlir::failed(
             mlir::mlirTranslateMain(argc, argv, "MLA translation driver\n"))
             ? 1
             : 0;
}
