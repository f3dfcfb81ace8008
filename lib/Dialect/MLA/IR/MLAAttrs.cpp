//===- MLAAttrs.cpp - The mla dialect's attributes ------------------------===//
#include "mla/Dialect/MLA/IR/MLAAttrs.h"
#include "mla/Dialect/MLA/IR/MLADialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::mla;

FailureOr<llvm::APFloat> mlir::mla::parseF64Field(AsmParser &parser) {
  double value = 0.0;
  if (failed(parser.parseFloat(value)))
    return failure();
  return llvm::APFloat(value);
}

#define GET_ATTRDEF_CLASSES
#include "mla/Dialect/MLA/IR/MLAAttrs.cpp.inc"

void MLADialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "mla/Dialect/MLA/IR/MLAAttrs.cpp.inc"
      >();
}

// The signature is ODS's: APFloats by value, the syntax's field names.
// NOLINTBEGIN(performance-unnecessary-value-param,readability-identifier-naming)
LogicalResult
RopeTableAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      llvm::APFloat theta, llvm::APFloat factor,
                      int64_t original_max_position, llvm::APFloat beta_fast,
                      llvm::APFloat beta_slow, llvm::APFloat mscale,
                      llvm::APFloat mscale_all_dim) {
  const double base = theta.convertToDouble();
  const double scaling = factor.convertToDouble();
  const int64_t originalMaxPosition = original_max_position;
  const double betaFast = beta_fast.convertToDouble();
  const double betaSlow = beta_slow.convertToDouble();
  const double amplitude = mscale.convertToDouble();
  const double mscaleAllDim = mscale_all_dim.convertToDouble();
  auto finite = [](double v) { return std::isfinite(v); };
  if (!finite(base) || base <= 1.0)
    return emitError() << "rope_table: theta must be a finite number > 1, got "
                       << base;
  if (!finite(scaling) || scaling < 1.0)
    return emitError() << "rope_table: factor must be a finite number >= 1, "
                          "got "
                       << scaling;
  if (!finite(amplitude) || !finite(mscaleAllDim))
    return emitError() << "rope_table: mscale and mscale_all_dim must be "
                          "finite";
  if (scaling == 1.0)
    return success();
  // YaRN's correction range needs the original context and two rotation
  // counts, fast above slow.
  if (originalMaxPosition <= 0)
    return emitError() << "rope_table: factor > 1 (YaRN) needs "
                          "original_max_position > 0";
  if (!finite(betaFast) || !finite(betaSlow) || betaSlow <= 0.0 ||
      betaFast <= betaSlow)
    return emitError() << "rope_table: YaRN needs beta_fast > beta_slow > 0, "
                          "got "
                       << betaFast << " and " << betaSlow;
  // The table is divided by yarn_get_mscale(factor, mscale_all_dim).
  if (std::abs(0.1 * mscaleAllDim * std::log(scaling) + 1.0) <= 1e-6)
    return emitError() << "rope_table: mscale_all_dim makes YaRN's amplitude "
                          "divide by zero";
  return success();
}
// NOLINTEND(performance-unnecessary-value-param,readability-identifier-naming)
