//===- ArtifactFormat.h - Byte layout constants of MLAA version 4 ---------===//
//
// Shared by the reader and the writer; docs/artifact.md is the prose form.
// All integers are little-endian; every section starts 8-byte aligned.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_SRC_ARTIFACTFORMAT_H
#define MLART_SRC_ARTIFACTFORMAT_H

#include <cstdint>

namespace mlart::mlaa {

constexpr char kMagic[4] = {'M', 'L', 'A', 'A'};

// File header (32 bytes).
constexpr uint64_t kHeaderBytes = 32;
constexpr uint64_t kOffMagic = 0;         // 4 bytes "MLAA"
constexpr uint64_t kOffVersion = 4;       // u32
constexpr uint64_t kOffTotalLength = 8;   // u64, whole artifact
constexpr uint64_t kOffChecksum = 16;     // u64, FNV-1a 64 of [24, total)
constexpr uint64_t kOffSectionCount = 24; // u32
constexpr uint64_t kOffFlags = 28;        // u32, must be 0
/// The checksum covers everything after the checksum field.
constexpr uint64_t kChecksumStart = 24;

// Section header (16 bytes): u32 kind, u32 count, u64 payload bytes; the
// payload follows, padded with zero bytes to a multiple of 8.
constexpr uint64_t kSectionHeaderBytes = 16;

enum SectionKind : uint32_t {
  kSectionMeta = 1,
  kSectionStrings = 2,
  kSectionBuffers = 3,
  kSectionCaches = 4,
  kSectionViews = 5,
  kSectionInstructions = 6,
  kNumRequiredSections = 6,
  /// Optional (version 2): compiler-generated kernels (docs/codegen.md).
  kSectionKernels = 7,
  /// Optional (version 3): the prepare program and its arena
  /// (docs/artifact.md, "Prepared weights"). Payload: kPrepareHeaderBytes,
  /// then `count` instruction records.
  kSectionPrepare = 8,
  kLastKnownSection = 8,
  /// Kinds at or above this are extensions a reader skips unless it knows
  /// them.
  kFirstExtensionSection = 0x100,
  /// Extension: how each rope table argument is computed
  /// (docs/artifact.md, "Rope tables"). An older reader ignores it and
  /// runs the same program; only a runner's default table differs.
  kSectionRopeTables = 0x100,
};

// Record sizes of the fixed-record sections.
constexpr uint64_t kMetaBytes = 16;       // u32 name, u32 0, i64 arena
constexpr uint64_t kStringEntryBytes = 8; // u32 offset, u32 length
constexpr uint64_t kBufferBytes =
    40; // u32 name, u8 role, dtype, rank, 0, i64 sizes[4]
constexpr uint64_t kCacheBytes =
    48; // u32 name, u8 dtype, layout, u16 0, i64 x4, u32 scale buffer, u32 0
constexpr uint64_t kViewBytes =
    80; // u8 base, dtype, rank, 0, u32 index, i64 off, sizes[4], strides[4]
constexpr uint64_t kInstructionBytes =
    64; // u16 op, u16 0, u32 loc, u32 cache, i32 iattr, f32 fattr, u32 kernel,
        // u32 operands[10]
constexpr uint64_t kPrepareHeaderBytes = 16; // i64 prepared bytes, i64 0
constexpr uint64_t kRopeTableBytes =
    64; // u32 buffer, u32 0, f64 theta, f64 factor, i64 original max
        // position, f64 beta_fast, f64 beta_slow, f64 mscale,
        // f64 mscale_all_dim
constexpr uint64_t kKernelBytes =
    24; // u32 name, u32 ptx (strings), u16 op, u16 0, u32 block_threads,
        // u32 tokens_per_block, u32 0

} // namespace mlart::mlaa

#endif // MLART_SRC_ARTIFACTFORMAT_H
