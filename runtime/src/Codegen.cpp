//===- Codegen.cpp - Names of compiler-generated cache-write kernels ------===//
#include "mlart/Codegen.h"

namespace mlart {

std::string codegenKernelName(const CodegenSignature &sig) {
  const bool rope = sig.op == Opcode::RopeCacheUpdate;
  std::string name = rope ? "mla_rope_cache_update_" : "mla_cache_update_";
  name += cacheLayoutName(sig.layout);
  name += "_";
  name += dtypeName(sig.cacheDType);
  name += "_l" + std::to_string(sig.latentRank) + "_p" +
          std::to_string(sig.ropeDim) + "_in_" + dtypeName(sig.input) +
          "_slot_" + dtypeName(sig.slots);
  if (rope) {
    name += sig.style == RopeStyle::NeoX ? "_neox" : "_gptj";
    name += "_pos_";
    name += dtypeName(sig.positions);
    if (sig.rotatesQ)
      name += "_q";
  }
  return name;
}

} // namespace mlart
