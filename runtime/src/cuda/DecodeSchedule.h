//===- DecodeSchedule.h - The balanced (stream-K) decode schedule ---------===//
//
// The per-sequence split of the 16-head decode (DecodeKernels.cu) gives
// every sequence the same number of CTAs, chosen on the host from the block
// table's width: the host never sees the lengths, which are device data
// (a captured graph replays with new ones). With mixed lengths the CTAs of
// the longest sequence set the time while the others idle.
//
// The balanced schedule cuts the work itself evenly instead. A work item is
// one (16-head group, sequence) pair, item s = group * B + b, holding
// n_s = ceil(len_b / 64) KV tiles; the items' tiles are laid end to end
// (item s starts at tile off_s = n_0 + ... + n_{s-1}) and CTA c of C takes
// the tiles [begin(c), begin(c + 1)) with begin(c) = floor(c * T / C), T
// the total. Each CTA computes T and its first item from the lengths.
//
// Where a CTA's range cuts an item, each piece ("segment") is a partial
// result in f32 with its LSE, in one of two workspace slots of the CTA
// (`partialSlot`); the CTA holding the item's last tile owns the item's
// merge and says so in its `BalancedMerge` record, and a combine kernel
// merges the pieces in CTA order. Items inside one CTA are written
// directly, as are the (zero) outputs of empty sequences, each by exactly
// one CTA (`zeroItemWriter`).
//
// Pure arithmetic, host and device: the CPU test (DecodeScheduleTest.cpp)
// walks the same functions over random lengths and checks that every tile
// is taken once and every merge finds its pieces.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_DECODESCHEDULE_H
#define MLART_CUDA_DECODESCHEDULE_H

#include <cstdint>

#if defined(__CUDACC__)
#define MLART_SCHED_FN __host__ __device__ __forceinline__
#else
#define MLART_SCHED_FN inline
#endif

namespace mlart::cuda {

/// First tile of CTA c of `ctas` over `tiles` tiles (c may be `ctas`: the
/// end). CTAs hold floor or ceil of tiles / ctas tiles; some hold none when
/// there are fewer tiles than CTAs.
MLART_SCHED_FN int64_t balancedBegin(int64_t c, int64_t ctas, int64_t tiles) {
  return c * tiles / ctas;
}

/// The CTA whose range holds tile t < tiles: the largest c with
/// balancedBegin(c) <= t (the non-empty one among CTAs of equal begin).
MLART_SCHED_FN int64_t balancedCtaOfTile(int64_t t, int64_t ctas,
                                         int64_t tiles) {
  return ((t + 1) * ctas - 1) / tiles;
}

/// The CTA that writes the output of an empty item starting at tile `off`:
/// the one holding tile `off`, or the last CTA for items after the last
/// tile (and for every item when no sequence has a token).
MLART_SCHED_FN int64_t zeroItemWriter(int64_t off, int64_t ctas,
                                      int64_t tiles) {
  return off >= tiles ? ctas - 1 : balancedCtaOfTile(off, ctas, tiles);
}

/// Whether the walk of a CTA starts at an item that ends at `itemEnd`
/// (off + max(n, 1): empty items count as one tile wide, so one that starts
/// at `begin` is visited): the first item with itemEnd > begin.
MLART_SCHED_FN bool walkStartsAt(int64_t itemEnd, int64_t begin) {
  return itemEnd > begin;
}

/// The workspace slot of CTA c's piece of an item that starts at tile
/// `itemOff`: 2c for a piece that continues an item begun in an earlier
/// CTA (only a CTA's first piece can), 2c + 1 for one that starts in c and
/// continues into a later CTA (only its last piece can).
MLART_SCHED_FN int64_t partialSlot(int64_t c, int64_t itemOff,
                                   int64_t begin) {
  return 2 * c + (itemOff >= begin ? 1 : 0);
}

/// What the owner of a cut item (the CTA holding its last tile) records for
/// the combine kernel. `item` < 0: this CTA owns no merge.
struct BalancedMerge {
  int64_t item;       ///< group * B + b
  int64_t firstCta;   ///< the CTA holding the item's first tile
  int64_t totalTiles; ///< T, for balancedBegin
};

/// The slot of CTA c's piece of the item merged by `owner` (firstCta <= c
/// <= owner); -1 when CTA c holds no tile at all (fewer tiles than CTAs).
MLART_SCHED_FN int64_t mergePieceSlot(const BalancedMerge &m, int64_t c,
                                      int64_t ctas) {
  if (balancedBegin(c, ctas, m.totalTiles) ==
      balancedBegin(c + 1, ctas, m.totalTiles))
    return -1;
  return c == m.firstCta ? 2 * c + 1 : 2 * c;
}

/// A piece of CTA c's range: tiles [a, z) of item `item`, whose tiles are
/// [itemOff, itemOff + n).
struct BalancedPiece {
  int64_t item, itemOff, n, a, z;
};

/// CTA c's walk over the items, one piece at a time, from item s0 (the
/// first with walkStartsAt(off + max(n, 1), begin(c))) at tile off0. The
/// kernel and the CPU test both walk here.
struct BalancedWalk {
  int64_t c, ctas, tiles, items, begin, end, s, off;

  MLART_SCHED_FN BalancedWalk(int64_t c, int64_t ctas, int64_t tiles,
                              int64_t items, int64_t s0, int64_t off0)
      : c(c), ctas(ctas), tiles(tiles), items(items),
        begin(balancedBegin(c, ctas, tiles)),
        end(balancedBegin(c + 1, ctas, tiles)), s(s0), off(off0) {}

  /// The next piece into `piece`, or false at the end. Empty items on the
  /// way that this CTA writes are handed to `empty(s, off)`; tilesOf(s) is
  /// n_s.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
  template <class TilesOf, class Empty>
  MLART_SCHED_FN bool next(TilesOf &&tilesOf, Empty &&empty,
                           BalancedPiece &piece) {
    for (; s < items; ++s) {
      const int64_t n = tilesOf(s);
      if (n == 0) {
        // Empty items at or past `end` belong to a later CTA, except after
        // the last tile, where the last CTA takes them all.
        if (off >= end && c != ctas - 1)
          break;
        if (zeroItemWriter(off, ctas, tiles) == c)
          empty(s, off);
        continue;
      }
      if (off >= end || begin == end) // (a CTA of no tile holds no piece)
        break;
      piece = BalancedPiece{s, off, n, off > begin ? off : begin,
                            off + n < end ? off + n : end};
      off += n;
      ++s;
      return true;
    }
    s = items;
    return false;
  }
};

} // namespace mlart::cuda

#undef MLART_SCHED_FN

#endif // MLART_CUDA_DECODESCHEDULE_H
