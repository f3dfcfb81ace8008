//===- RuntimeTypes.h - MLIR element types as the runtime's DType ---------===//
//
// The one mapping from MLIR element types to mlart::DType, shared by the
// artifact translation and the cache-kernel outlining (both speak the
// runtime's format).
//
//===----------------------------------------------------------------------===//
#ifndef MLA_TARGET_RUNTIMETYPES_H
#define MLA_TARGET_RUNTIMETYPES_H

#include "mlart/DType.h"
#include "mlir/IR/BuiltinTypes.h"

#include <optional>

namespace mlir::mla {

/// The runtime's DType of element type `type`, or nullopt when the runtime
/// has none.
inline std::optional<mlart::DType> toRuntimeDType(Type type) {
  if (type.isBF16())
    return mlart::DType::BF16;
  if (type.isF16())
    return mlart::DType::F16;
  if (type.isF32())
    return mlart::DType::F32;
  if (type.isF64())
    return mlart::DType::F64;
  if (isa<Float8E4M3FNType>(type))
    return mlart::DType::F8E4M3FN;
  if (isa<Float8E5M2Type>(type))
    return mlart::DType::F8E5M2;
  if (type.isSignlessInteger(32))
    return mlart::DType::I32;
  if (type.isSignlessInteger(64))
    return mlart::DType::I64;
  return std::nullopt;
}

} // namespace mlir::mla

#endif // MLA_TARGET_RUNTIMETYPES_H
