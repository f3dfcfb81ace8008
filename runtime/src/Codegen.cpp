//===- Codegen.cpp - Names and PTX checks of generated kernels -----------===//
#include "mlart/Codegen.h"

#include <string>
#include <utility>

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
    if (sig.latentNorm) {
      name += "_norm_";
      name += dtypeName(sig.normWeight);
    }
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

namespace {

/// The text between the braces of `.entry name`'s body, or npos / npos.
std::pair<size_t, size_t> entryBody(const std::string &ptx,
                                    const std::string &name) {
  const size_t none = std::string::npos;
  const size_t open = ptx.find(".entry " + name + "(");
  if (open == none)
    return {none, none};
  const size_t close = ptx.find(')', open);
  const size_t begin = close == none ? none : ptx.find('{', close);
  if (begin == none)
    return {none, none};
  int depth = 0;
  for (size_t i = begin; i < ptx.size(); ++i) {
    if (ptx[i] == '{')
      ++depth;
    else if (ptx[i] == '}' && --depth == 0)
      return {begin + 1, i};
  }
  return {none, none};
}

bool startsWith(const std::string &s, size_t at, const char *prefix) {
  return s.compare(at, std::char_traits<char>::length(prefix), prefix) == 0;
}

/// Whether the instruction at `at` may access global memory: the memory
/// opcodes (anything not in the param, shared or local state space; a
/// generic address may be global).
bool mayTouchGlobal(const std::string &s, size_t at) {
  for (const char *op : {"ld.", "st.", "atom.", "red."})
    if (startsWith(s, at, op)) {
      const size_t space = at + std::char_traits<char>::length(op);
      return !startsWith(s, space, "param") &&
             !startsWith(s, space, "shared") && !startsWith(s, space, "local");
    }
  return startsWith(s, at, "cp.") || startsWith(s, at, "prefetch") ||
         startsWith(s, at, "multimem.");
}

} // namespace

bool codegenEntryWaitsForGrids(const std::string &ptx,
                               const std::string &name) {
  const auto [begin, end] = entryBody(ptx, name);
  if (begin == std::string::npos)
    return false;
  // Instructions start after white space, a brace, a semicolon or a label's
  // colon (a predicate "@%p1 " ends with a space).
  for (size_t i = begin; i < end; ++i) {
    if (startsWith(ptx, i, "//")) { // a comment, to the end of its line
      i = ptx.find('\n', i);
      if (i == std::string::npos || i >= end)
        return false;
      continue;
    }
    const char prev = ptx[i - 1];
    if (!(prev == ' ' || prev == '\t' || prev == '\n' || prev == '{' ||
          prev == ';' || prev == ':'))
      continue;
    if (startsWith(ptx, i, "griddepcontrol.wait"))
      return true;
    if (mayTouchGlobal(ptx, i))
      return false;
  }
  return false;
}

} // namespace mlart
