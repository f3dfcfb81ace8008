//===- MLADialect.h - The mla dialect and its cache resource --------------===//
#ifndef MLA_DIALECT_MLA_IR_MLADIALECT_H
#define MLA_DIALECT_MLA_IR_MLADIALECT_H

#include "mlir/IR/Dialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::mla {

/// The paged KV cache as a side-effect resource: cache effects conflict only
/// with other cache effects (and with unknown effects).
struct KVCacheResource
    : public SideEffects::Resource::Base<KVCacheResource> {
  StringRef getName() override { return "mla::KVCache"; }
};

} // namespace mlir::mla

#include "mla/Dialect/MLA/IR/MLADialect.h.inc"

#endif // MLA_DIALECT_MLA_IR_MLADIALECT_H
