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

int codegenEntryParams(const std::string &ptx, const std::string &name) {
  const std::string head = ".entry " + name + "(";
  const size_t open = ptx.find(head);
  if (open == std::string::npos)
    return -1;
  const size_t first = open + head.size();
  const size_t close = ptx.find(')', first);
  if (close == std::string::npos)
    return -1;
  // Every parameter is declared `.param <type> [qualifiers] <name>`; names
  // (`<entry>_param_<i>`) never contain ".param".
  int n = 0;
  for (size_t at = ptx.find(".param", first); at < close;
       at = ptx.find(".param", at + 6))
    ++n;
  return n;
}

} // namespace mlart
