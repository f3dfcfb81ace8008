//===- PreparedAliases.cpp - Prepared bytes the caller's weights already hold --===//
#include "PreparedAliases.h"

#include <algorithm>
#include <cstdint>

namespace mlart {

namespace {

/// Bytes of a row-major, gap-free view; -1 for any other view.
int64_t contiguousBytes(const ViewDecl &v) {
  int64_t expect = 1;
  for (int d = v.rank - 1; d >= 0; --d) {
    if (v.sizes[d] != 1 && v.strides[d] != expect)
      return -1;
    expect *= v.sizes[d];
  }
  return expect * int64_t(dtypeSize(v.dtype));
}

/// A prepare copy of a whole weight buffer into consecutive prepared bytes.
struct WholeCopy {
  size_t instruction;
  int64_t begin, end; ///< prepared-arena bytes it writes
  uintptr_t source;   ///< the bound buffer's address
};

struct Run {
  int64_t begin, end;
  uintptr_t source; ///< where byte `begin` lives in caller memory
  std::vector<size_t> copies;
  bool aliased = true;
};

bool intersects(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  return a0 < b1 && b0 < a1;
}

} // namespace

PreparedAliases planPreparedAliases(const Artifact &artifact,
                                    const std::vector<void *> &bufferData) {
  const std::vector<Instruction> &program = artifact.prepareInstructions();
  const std::vector<ViewDecl> &views = artifact.views();
  PreparedAliases out;
  out.viewBase.assign(views.size(), nullptr);
  out.copyNeeded.assign(program.size(), true);

  std::vector<WholeCopy> whole;
  for (size_t i = 0; i < program.size(); ++i) {
    const ViewDecl &src = views[program[i].operands[0]];
    const ViewDecl &dst = views[program[i].operands[1]];
    if (src.base != ViewBase::Buffer || src.byteOffset != 0 ||
        !bufferData[src.baseIndex])
      continue;
    const int64_t bytes = contiguousBytes(src);
    if (bytes <= 0 || bytes != artifact.buffers()[src.baseIndex].sizeBytes() ||
        contiguousBytes(dst) != bytes)
      continue;
    whole.push_back({i, dst.byteOffset, dst.byteOffset + bytes,
                     reinterpret_cast<uintptr_t>(bufferData[src.baseIndex])});
  }
  std::sort(whole.begin(), whole.end(),
            [](const WholeCopy &a, const WholeCopy &b) {
              return a.begin < b.begin;
            });

  // Chain copies whose prepared bytes and bound sources are both adjacent.
  std::vector<Run> runs;
  for (const WholeCopy &c : whole) {
    if (!runs.empty() && runs.back().end == c.begin &&
        runs.back().source + uintptr_t(c.begin - runs.back().begin) ==
            c.source) {
      runs.back().end = c.end;
      runs.back().copies.push_back(c.instruction);
      continue;
    }
    runs.push_back({c.begin, c.end, c.source, {c.instruction}});
  }

  // A run stays aliased only if every byte of it comes from its own copies
  // and every prepared view is wholly inside or wholly outside it.
  for (Run &r : runs) {
    for (size_t i = 0; i < program.size() && r.aliased; ++i) {
      if (std::find(r.copies.begin(), r.copies.end(), i) != r.copies.end())
        continue;
      auto [b, e] = views[program[i].operands[1]].byteExtent();
      if (intersects(b, e, r.begin, r.end))
        r.aliased = false;
    }
    for (const ViewDecl &v : views) {
      if (!r.aliased)
        break;
      if (v.base != ViewBase::Prepared)
        continue;
      auto [b, e] = v.byteExtent();
      if (intersects(b, e, r.begin, r.end) && (b < r.begin || e > r.end))
        r.aliased = false;
    }
  }

  for (const Run &r : runs) {
    if (!r.aliased)
      continue;
    for (size_t i : r.copies)
      out.copyNeeded[i] = false;
    for (size_t v = 0; v < views.size(); ++v) {
      if (views[v].base != ViewBase::Prepared)
        continue;
      auto [b, e] = views[v].byteExtent();
      if (b >= r.begin && e <= r.end && b < e)
        out.viewBase[v] =
            reinterpret_cast<void *>(r.source - uintptr_t(r.begin));
    }
  }
  for (size_t v = 0; v < views.size(); ++v)
    if (views[v].base == ViewBase::Prepared && !out.viewBase[v])
      out.needsArena = true;
  return out;
}

} // namespace mlart
