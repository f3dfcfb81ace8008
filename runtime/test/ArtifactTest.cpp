//===- ArtifactTest.cpp - MLAA writer/loader round trip and robustness ----===//
#include "mlart/Artifact.h"
#include "ArtifactFormat.h"
#include "mlart/ArtifactWriter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

namespace mlart {
namespace {

KVCacheDesc smallCacheDesc() {
  KVCacheDesc d;
  d.numBlocks = 4;
  d.blockSize = 4;
  d.latentRank = 8;
  d.ropeDim = 4;
  return d;
}

/// A small but complete program: every section non-empty, optional operands
/// both present and absent, a location string, both attribute kinds.
ArtifactWriter smallProgram() {
  ArtifactWriter w("small");
  const uint32_t x = w.addBuffer("x", BufferRole::Input, DType::BF16, {2, 12});
  const uint32_t wt = w.addBuffer("w", BufferRole::Weight, DType::BF16, {12});
  const uint32_t slots =
      w.addBuffer("slots", BufferRole::StepMetadata, DType::I64, {2});
  const uint32_t out =
      w.addBuffer("out", BufferRole::Output, DType::BF16, {2, 12});
  const uint32_t cache = w.addCache("cache", smallCacheDesc());
  const int64_t off = w.allocateArena(2 * 12 * 2);
  // Views 0..6, created in this order (tests refer to them by index).
  const uint32_t xv = w.bufferView(x);
  const uint32_t tmp = w.arenaView(off, DType::BF16, {2, 12});
  const uint32_t wv = w.bufferView(wt);
  const uint32_t kvC = w.arenaView(off, DType::BF16, {2, 8}, {12, 1});
  const uint32_t kPe = w.arenaView(off + 16, DType::BF16, {2, 4}, {12, 1});
  const uint32_t slotsV = w.bufferView(slots);
  const uint32_t outV = w.bufferView(out);
  w.rmsNorm(xv, wv, tmp, 1e-5f, "norm");
  w.cacheUpdate(cache, kvC, kPe, slotsV, "update");
  w.add(xv, tmp, outV);
  return w;
}

std::vector<uint8_t> smallBytes() {
  StatusOr<std::vector<uint8_t>> b = smallProgram().finish();
  EXPECT_TRUE(b.ok()) << b.status().toString();
  return b.ok() ? *b : std::vector<uint8_t>();
}

/// Recomputes the checksum after a test patched the bytes on purpose.
void rechecksum(std::vector<uint8_t> &b) {
  if (b.size() < mlaa::kHeaderBytes)
    return;
  const uint64_t h =
      fnv1a64(b.data() + mlaa::kChecksumStart, b.size() - mlaa::kChecksumStart);
  for (int i = 0; i < 8; ++i)
    b[mlaa::kOffChecksum + size_t(i)] = uint8_t(h >> (8 * i));
}

/// Offset of the payload of the section of `kind` (test artifacts only).
size_t payloadOffset(const std::vector<uint8_t> &b, uint32_t kind) {
  size_t pos = mlaa::kHeaderBytes;
  while (pos + mlaa::kSectionHeaderBytes <= b.size()) {
    uint32_t k;
    uint64_t bytes;
    std::memcpy(&k, &b[pos], 4);
    std::memcpy(&bytes, &b[pos + 8], 8);
    if (k == kind)
      return pos + mlaa::kSectionHeaderBytes;
    pos += mlaa::kSectionHeaderBytes + ((bytes + 7) & ~uint64_t(7));
  }
  ADD_FAILURE() << "no section " << kind;
  return 0;
}

void putU32(std::vector<uint8_t> &b, size_t at, uint32_t v) {
  std::memcpy(&b[at], &v, 4);
}

Status loadStatus(const std::vector<uint8_t> &b) {
  StatusOr<Artifact> a = Artifact::load(b.data(), b.size());
  return a.ok() ? Status::success() : a.status();
}

/// Serializes without validation and expects the loader to refuse with a
/// message containing `fragment`.
void expectInvalid(const ArtifactWriter &w, const std::string &fragment) {
  std::vector<uint8_t> b = w.serialize();
  Status s = loadStatus(b);
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument) << s.toString();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << s.toString();
  // finish() reports the same error to the compiler.
  StatusOr<std::vector<uint8_t>> f = w.finish();
  EXPECT_FALSE(f.ok());
}

TEST(Artifact, RoundTripPreservesEverything) {
  ArtifactWriter w("roundtrip");
  const uint32_t q =
      w.addBuffer("q", BufferRole::Input, DType::BF16, {2, 3, 24});
  const uint32_t bt =
      w.addBuffer("bt", BufferRole::StepMetadata, DType::I32, {2, 4});
  const uint32_t sl =
      w.addBuffer("sl", BufferRole::StepMetadata, DType::I32, {2});
  const uint32_t o =
      w.addBuffer("o", BufferRole::Output, DType::F32, {2, 3, 16});
  KVCacheDesc desc = smallCacheDesc();
  desc.latentRank = 16;
  desc.ropeDim = 8;
  desc.dtype = DType::F32;
  const uint32_t c = w.addCache("kv", desc);
  const int64_t lseOff = w.allocateArena(2 * 3 * 4);
  const uint32_t lse = w.arenaView(lseOff, DType::F32, {2, 3});
  w.decodeAttention(c, w.bufferView(q), w.bufferView(bt), w.bufferView(sl),
                    w.bufferView(o), 0.125f, lse, 3, "layer0.attn");
  w.copy(w.bufferView(q, 2 * 16, DType::BF16, {2, 3, 8}, {72, 24, 1}),
         w.bufferView(q, 0, DType::BF16, {2, 3, 8}, {72, 24, 1}));
  StatusOr<std::vector<uint8_t>> bytes = w.finish();
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  EXPECT_EQ(bytes->size() % 8, 0u);

  StatusOr<Artifact> a = Artifact::load(bytes->data(), bytes->size());
  ASSERT_TRUE(a.ok()) << a.status().toString();
  EXPECT_EQ(a->functionName(), "roundtrip");
  EXPECT_EQ(a->arenaBytes(), w.arenaBytes());
  ASSERT_EQ(a->buffers().size(), 4u);
  EXPECT_EQ(a->buffers()[0].name, "q");
  EXPECT_EQ(a->buffers()[0].rank, 3);
  EXPECT_EQ(a->buffers()[0].sizes[2], 24);
  EXPECT_EQ(a->buffers()[1].role, BufferRole::StepMetadata);
  EXPECT_EQ(a->buffers()[3].dtype, DType::F32);
  EXPECT_EQ(a->buffers()[3].sizeBytes(), 2 * 3 * 16 * 4);
  ASSERT_EQ(a->caches().size(), 1u);
  EXPECT_EQ(a->caches()[0].name, "kv");
  EXPECT_EQ(a->caches()[0].desc.latentRank, 16);
  EXPECT_EQ(a->caches()[0].desc.dtype, DType::F32);
  EXPECT_EQ(a->findCache("kv"), 0);
  EXPECT_EQ(a->findBuffer("sl"), 2);
  EXPECT_EQ(a->findBuffer("nope"), -1);
  ASSERT_EQ(a->views().size(), w.views().size());
  for (size_t i = 0; i < a->views().size(); ++i) {
    const ViewDecl &x = a->views()[i], &y = w.views()[i];
    EXPECT_EQ(x.base, y.base);
    EXPECT_EQ(x.baseIndex, y.baseIndex);
    EXPECT_EQ(x.byteOffset, y.byteOffset);
    EXPECT_EQ(x.dtype, y.dtype);
    EXPECT_EQ(x.rank, y.rank);
    for (int d = 0; d < kMaxRank; ++d) {
      EXPECT_EQ(x.sizes[d], y.sizes[d]);
      EXPECT_EQ(x.strides[d], y.strides[d]);
    }
  }
  ASSERT_EQ(a->instructions().size(), 2u);
  const Instruction &da = a->instructions()[0];
  EXPECT_EQ(da.opcode, Opcode::DecodeAttention);
  EXPECT_EQ(da.cache, 0u);
  EXPECT_EQ(da.floatAttr, 0.125f);
  EXPECT_EQ(da.intAttr, 3);
  EXPECT_EQ(da.location, "layer0.attn");
  EXPECT_EQ(da.operands[4], lse);
  EXPECT_EQ(da.operands[5], kNoIndex);
  EXPECT_EQ(a->instructions()[1].opcode, Opcode::Copy);
  EXPECT_EQ(a->instructions()[1].location, "");
  EXPECT_EQ(a->describeInstruction(0), "#0 decode_attention (layer0.attn)");
  EXPECT_EQ(a->describeInstruction(1), "#1 copy");

  // Serialization is deterministic.
  EXPECT_EQ(*bytes, w.serialize());
}

// The fused opcode carries both halves' operands in one instruction; the
// loader checks each slot against its table row.
TEST(Artifact, FusedDecodeAttentionWithUpdateRoundTripsAndIsChecked) {
  auto build = [](DType slotDType, bool withCache) {
    ArtifactWriter w("fused");
    KVCacheDesc desc = smallCacheDesc();
    const int64_t rowWidth = desc.latentRank + desc.ropeDim;
    const uint32_t kv =
        w.addBuffer("kv_in", BufferRole::Input, DType::BF16, {2, rowWidth});
    const uint32_t slots =
        w.addBuffer("slots", BufferRole::StepMetadata, slotDType, {2});
    const uint32_t q =
        w.addBuffer("q", BufferRole::Input, DType::BF16, {2, 3, rowWidth});
    const uint32_t bt =
        w.addBuffer("bt", BufferRole::StepMetadata, DType::I32, {2, 4});
    const uint32_t sl =
        w.addBuffer("sl", BufferRole::StepMetadata, DType::I32, {2});
    const uint32_t o = w.addBuffer("o", BufferRole::Output, DType::BF16,
                                   {2, 3, desc.latentRank});
    const uint32_t c = withCache ? w.addCache("cache", desc) : kNoIndex;
    const uint32_t kvC =
        w.bufferView(kv, 0, DType::BF16, {2, desc.latentRank}, {rowWidth, 1});
    const uint32_t kPe = w.bufferView(kv, desc.latentRank * 2, DType::BF16,
                                      {2, desc.ropeDim}, {rowWidth, 1});
    w.decodeAttentionWithUpdate(
        c, kvC, kPe, w.bufferView(slots), w.bufferView(q), w.bufferView(bt),
        w.bufferView(sl), w.bufferView(o), 0.25f, kNoIndex, 2, "layer0.attn");
    return w;
  };
  {
    ArtifactWriter w = build(DType::I64, true);
    StatusOr<std::vector<uint8_t>> bytes = w.finish();
    ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
    StatusOr<Artifact> a = Artifact::load(bytes->data(), bytes->size());
    ASSERT_TRUE(a.ok()) << a.status().toString();
    ASSERT_EQ(a->instructions().size(), 1u);
    const Instruction &inst = a->instructions()[0];
    EXPECT_EQ(inst.opcode, Opcode::DecodeAttentionWithUpdate);
    EXPECT_EQ(inst.cache, 0u);
    EXPECT_EQ(inst.floatAttr, 0.25f);
    EXPECT_EQ(inst.intAttr, 2);
    EXPECT_EQ(inst.operands[7], kNoIndex); // no lse
    EXPECT_EQ(a->describeInstruction(0),
              "#0 decode_attention_with_update (layer0.attn)");
  }
  expectInvalid(build(DType::F32, true),
                "operand 'slot_mapping' has dtype f32");
  expectInvalid(build(DType::I64, false), "needs a cache");
}

// Scratch arena bytes and output buffers start undefined: an instruction
// may read them only after an earlier one wrote them (or, for the prepared
// arena, the prepare program).
TEST(Artifact, RejectsReadsOfBytesNothingWrote) {
  // Views of the small program: 0 x[2,12], 1 tmp (arena 0..48), 2 w[12],
  // 3 kv_c, 4 k_pe, 5 slots, 6 out. It writes tmp, then reads it.
  {
    ArtifactWriter w = smallProgram();
    // Past what rms_norm wrote: a new allocation.
    const int64_t off = w.allocateArena(48);
    w.add(0, w.arenaView(off, DType::BF16, {2, 12}), 6, "late");
    expectInvalid(w, "instruction #3 add (late): operand 'b' reads byte " +
                         std::to_string(off) +
                         " of the arena, which no earlier instruction writes");
  }
  {
    // Partly defined: the view starts inside tmp and runs past it.
    ArtifactWriter w = smallProgram();
    w.allocateArena(48);
    w.add(0, w.arenaView(24, DType::BF16, {2, 12}), 6);
    expectInvalid(w, "reads byte 48 of the arena");
  }
  {
    // An output buffer before anything wrote it (the executor poisons
    // outputs; their old contents are not the program's).
    ArtifactWriter w("out-first");
    const uint32_t x = w.addBuffer("x", BufferRole::Input, DType::F32, {1, 4});
    const uint32_t o = w.addBuffer("o", BufferRole::Output, DType::F32, {1, 4});
    w.add(w.bufferView(x), w.bufferView(o), w.bufferView(o));
    expectInvalid(w, "operand 'b' reads byte 0 of output buffer 'o'");
  }
  {
    // rope rotates in place: its InOut operand is read first.
    ArtifactWriter w("rope-first");
    const uint32_t pos =
        w.addBuffer("pos", BufferRole::StepMetadata, DType::I64, {2});
    const uint32_t cs =
        w.addBuffer("cs", BufferRole::Weight, DType::F32, {4, 4});
    const int64_t off = w.allocateArena(2 * 8 * 2);
    w.rope(w.arenaView(off, DType::BF16, {2, 8}), w.bufferView(pos),
           w.bufferView(cs), RopeStyle::NeoX);
    expectInvalid(w, "operand 'x' reads byte 0 of the arena");
  }
  {
    // Writes define exactly their extent: reading what two writes cover
    // together loads.
    ArtifactWriter w("pieces");
    const uint32_t x = w.addBuffer("x", BufferRole::Input, DType::F32, {2, 4});
    const uint32_t o = w.addBuffer("o", BufferRole::Output, DType::F32, {2, 8});
    const int64_t off = w.allocateArena(2 * 8 * 4);
    w.copy(w.bufferView(x), w.arenaView(off, DType::F32, {2, 4}, {8, 1}));
    w.copy(w.bufferView(x), w.arenaView(off + 16, DType::F32, {2, 4}, {8, 1}));
    w.copy(w.arenaView(off, DType::F32, {2, 8}), w.bufferView(o));
    EXPECT_TRUE(w.finish().ok()) << w.finish().status().toString();
  }
}

TEST(Artifact, LoadsFromFile) {
  std::vector<uint8_t> b = smallBytes();
  const std::string path = ::testing::TempDir() + "mlart_artifact_test.mlaa";
  ASSERT_TRUE(writeArtifactFile(path, b).ok());
  StatusOr<Artifact> a = Artifact::loadFile(path);
  ASSERT_TRUE(a.ok()) << a.status().toString();
  EXPECT_EQ(a->functionName(), "small");
  EXPECT_EQ(a->instructions().size(), 3u);
  std::remove(path.c_str());

  StatusOr<Artifact> missing = Artifact::loadFile(path + ".missing");
  EXPECT_EQ(missing.status().code(), StatusCode::Unavailable);

  // A truncated file names the path.
  b.resize(b.size() / 2);
  ASSERT_TRUE(writeArtifactFile(path, b).ok());
  StatusOr<Artifact> cut = Artifact::loadFile(path);
  EXPECT_EQ(cut.status().code(), StatusCode::DataLoss);
  EXPECT_NE(cut.status().message().find(path), std::string::npos);
  std::remove(path.c_str());
}

TEST(Artifact, TruncationAtEveryLengthIsDataLoss) {
  const std::vector<uint8_t> b = smallBytes();
  ASSERT_GT(b.size(), 100u);
  for (size_t n = 0; n < b.size(); ++n) {
    std::vector<uint8_t> cut(b.begin(), b.begin() + long(n));
    Status s = loadStatus(cut);
    ASSERT_EQ(s.code(), StatusCode::DataLoss)
        << "length " << n << ": " << s.toString();
  }
  EXPECT_EQ(Artifact::load(nullptr, 0).status().code(), StatusCode::DataLoss);
  EXPECT_FALSE(Artifact::load(nullptr, 10).ok());
}

TEST(Artifact, EveryByteFlipIsDetected) {
  const std::vector<uint8_t> b = smallBytes();
  for (size_t i = 0; i < b.size(); ++i)
    for (uint8_t mask : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xFF)}) {
      std::vector<uint8_t> c = b;
      c[i] ^= mask;
      Status s = loadStatus(c);
      ASSERT_FALSE(s.ok()) << "byte " << i << " ^ " << int(mask);
      // Header fields outside the checksum give their own errors; the
      // version is InvalidArgument, everything else DataLoss.
      if (i < mlaa::kOffVersion || i >= mlaa::kOffTotalLength)
        ASSERT_EQ(s.code(), StatusCode::DataLoss)
            << "byte " << i << ": " << s.toString();
    }
}

TEST(Artifact, ByteChangesWithAValidChecksumNeverCrash) {
  // The checksum stops accidental corruption; the structural checks must
  // stop everything else. Rewrite each byte to several values, fix the
  // checksum, and require a clean Status (the loader may accept harmless
  // changes such as a character of a location string).
  const std::vector<uint8_t> b = smallBytes();
  int accepted = 0, rejected = 0;
  for (size_t i = 0; i < b.size(); ++i)
    for (uint8_t v :
         {uint8_t(0x00), uint8_t(0x01), uint8_t(0x07), uint8_t(0x7F),
          uint8_t(0x80), uint8_t(0xFF), uint8_t(b[i] + 1), uint8_t(b[i] - 1)}) {
      std::vector<uint8_t> c = b;
      c[i] = v;
      rechecksum(c);
      StatusOr<Artifact> a = Artifact::load(c.data(), c.size());
      if (a.ok()) {
        ++accepted;
        // Whatever loads is consistent: every view index is in range.
        for (const Instruction &inst : a->instructions())
          for (uint32_t o : inst.operands)
            ASSERT_TRUE(o == kNoIndex || o < a->views().size());
      } else {
        ++rejected;
      }
    }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(accepted, 0);
}

TEST(Artifact, RandomMutationsWithAValidChecksumNeverCrash) {
  const std::vector<uint8_t> b = smallBytes();
  std::mt19937 rng(1234);
  std::uniform_int_distribution<size_t> pos(0, b.size() - 1);
  std::uniform_int_distribution<int> byte(0, 255), count(1, 8);
  for (int iter = 0; iter < 5000; ++iter) {
    std::vector<uint8_t> c = b;
    const int n = count(rng);
    for (int k = 0; k < n; ++k)
      c[pos(rng)] = uint8_t(byte(rng));
    if (iter % 3 == 0)
      c.resize(pos(rng)); // and sometimes cut, with a fixed length field
    if (c.size() >= 16) {
      const uint64_t len = c.size();
      std::memcpy(&c[mlaa::kOffTotalLength], &len, 8);
    }
    rechecksum(c);
    (void)Artifact::load(c.data(), c.size());
  }
}

TEST(Artifact, RejectsWrongMagicVersionAndLength) {
  std::vector<uint8_t> b = smallBytes();
  {
    std::vector<uint8_t> c = b;
    c[0] = 'X';
    Status s = loadStatus(c);
    EXPECT_EQ(s.code(), StatusCode::DataLoss);
    EXPECT_NE(s.message().find("magic"), std::string::npos);
  }
  {
    std::vector<uint8_t> c = b;
    putU32(c, mlaa::kOffVersion, 1); // version 1 had no kernel field
    Status s = loadStatus(c);
    EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
    EXPECT_NE(s.message().find("version 1"), std::string::npos);
  }
  {
    std::vector<uint8_t> c = b;
    c.push_back(0); // a trailing byte the length does not announce
    EXPECT_EQ(loadStatus(c).code(), StatusCode::DataLoss);
    const uint64_t len = c.size();
    std::memcpy(&c[mlaa::kOffTotalLength], &len, 8);
    rechecksum(c);
    Status s = loadStatus(c); // announced, but no section holds it
    EXPECT_EQ(s.code(), StatusCode::DataLoss);
    EXPECT_NE(s.message().find("trailing"), std::string::npos) << s.toString();
  }
  {
    std::vector<uint8_t> c = b;
    c[mlaa::kOffChecksum] ^= 1;
    Status s = loadStatus(c);
    EXPECT_EQ(s.code(), StatusCode::DataLoss);
    EXPECT_NE(s.message().find("checksum"), std::string::npos);
  }
  {
    std::vector<uint8_t> c = b;
    putU32(c, mlaa::kOffFlags, 1);
    rechecksum(c);
    EXPECT_EQ(loadStatus(c).code(), StatusCode::InvalidArgument);
  }
}

TEST(Artifact, RejectsBadSectionFraming) {
  const std::vector<uint8_t> b = smallBytes();
  {
    // Fewer sections announced than present: trailing bytes.
    std::vector<uint8_t> c = b;
    putU32(c, mlaa::kOffSectionCount, 5);
    rechecksum(c);
    EXPECT_FALSE(loadStatus(c).ok());
  }
  {
    // More announced than present.
    std::vector<uint8_t> c = b;
    putU32(c, mlaa::kOffSectionCount, 7);
    rechecksum(c);
    EXPECT_EQ(loadStatus(c).code(), StatusCode::DataLoss);
  }
  {
    // The views section relabelled as a second caches section.
    std::vector<uint8_t> c = b;
    putU32(c, payloadOffset(c, mlaa::kSectionViews) - 16, mlaa::kSectionCaches);
    rechecksum(c);
    Status s = loadStatus(c);
    EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
    EXPECT_NE(s.message().find("out of order"), std::string::npos);
  }
  {
    // An unknown non-extension kind.
    std::vector<uint8_t> c = b;
    putU32(c, payloadOffset(c, mlaa::kSectionViews) - 16, 77);
    rechecksum(c);
    EXPECT_NE(loadStatus(c).message().find("unknown section"),
              std::string::npos);
  }
  {
    // A section's byte size that disagrees with its record count.
    std::vector<uint8_t> c = b;
    putU32(c, payloadOffset(c, mlaa::kSectionBuffers) - 12, 3);
    rechecksum(c);
    EXPECT_EQ(loadStatus(c).code(), StatusCode::InvalidArgument);
  }
  {
    // A section size past the end.
    std::vector<uint8_t> c = b;
    putU32(c, payloadOffset(c, mlaa::kSectionInstructions) - 8, 1u << 30);
    rechecksum(c);
    EXPECT_EQ(loadStatus(c).code(), StatusCode::DataLoss);
  }
  {
    // An extension section this reader does not know (kind >= 0x100; 0x100
    // itself is the rope tables) is skipped.
    std::vector<uint8_t> c = b;
    const uint8_t ext[24] = {0xFF, 0x01, 0, 0, 1, 0,   0,   0,   5,   0,  0,
                             0,    0,    0, 0, 0, 'h', 'e', 'l', 'l', 'o'};
    c.insert(c.end(), ext, ext + 24);
    putU32(c, mlaa::kOffSectionCount, 7);
    const uint64_t len = c.size();
    std::memcpy(&c[mlaa::kOffTotalLength], &len, 8);
    rechecksum(c);
    EXPECT_TRUE(loadStatus(c).ok()) << loadStatus(c).toString();
    c[c.size() - 1] = 1; // but its padding must be zero
    rechecksum(c);
    EXPECT_FALSE(loadStatus(c).ok());
  }
}

// --- Compiler-generated kernels (format version 2, section kind 7) -------

const char *kTinyPtx = "//\n.version 8.0\n.target sm_90a\n"
                       ".visible .entry k_update(\n)\n{\n\tret;\n}\n"
                       ".visible .entry k_rope(\n)\n{\n\tret;\n}\n";

/// smallProgram with its cache_update run by a generated kernel, plus a
/// second kernel of the same module that no instruction uses.
ArtifactWriter codegenProgram() {
  ArtifactWriter w = smallProgram();
  const uint32_t k =
      w.addCodegenKernel("k_update", kTinyPtx, Opcode::CacheUpdate, 576, 8);
  w.addCodegenKernel("k_rope", kTinyPtx, Opcode::RopeCacheUpdate, 544, 8);
  w.setInstructionKernel(1, k);
  return w;
}

std::vector<uint8_t> codegenBytes() {
  StatusOr<std::vector<uint8_t>> b = codegenProgram().finish();
  EXPECT_TRUE(b.ok()) << b.status().toString();
  return b.ok() ? *b : std::vector<uint8_t>();
}

TEST(ArtifactCodegen, RoundTripSharesTheModule) {
  const std::vector<uint8_t> b = codegenBytes();
  StatusOr<Artifact> a = Artifact::load(b.data(), b.size());
  ASSERT_TRUE(a.ok()) << a.status().toString();
  ASSERT_EQ(a->kernels().size(), 2u);
  ASSERT_EQ(a->modules().size(), 1u); // one PTX text, stored once
  EXPECT_EQ(a->modules()[0].ptx, kTinyPtx);
  EXPECT_EQ(a->modules()[0].hash, fnv1a64(kTinyPtx, std::strlen(kTinyPtx)));
  const CodegenKernel &k = a->kernels()[0];
  EXPECT_EQ(k.name, "k_update");
  EXPECT_EQ(k.op, Opcode::CacheUpdate);
  EXPECT_EQ(k.blockThreads, 576u);
  EXPECT_EQ(k.tokensPerBlock, 8u);
  EXPECT_EQ(a->kernels()[1].module, 0u);
  EXPECT_EQ(a->instructions()[1].kernel, 0u);
  EXPECT_EQ(a->instructions()[0].kernel, kNoIndex);
  EXPECT_EQ(a->instructions()[2].kernel, kNoIndex);
  // A library-only program has no kernels section at all.
  const std::vector<uint8_t> plain = smallBytes();
  uint32_t sections;
  std::memcpy(&sections, &plain[mlaa::kOffSectionCount], 4);
  EXPECT_EQ(sections, 6u);
  std::memcpy(&sections, &b[mlaa::kOffSectionCount], 4);
  EXPECT_EQ(sections, 7u);
}

TEST(ArtifactCodegen, TruncationAndFlipsAreDetected) {
  const std::vector<uint8_t> b = codegenBytes();
  for (size_t n = 0; n < b.size(); ++n) {
    std::vector<uint8_t> cut(b.begin(), b.begin() + long(n));
    ASSERT_EQ(loadStatus(cut).code(), StatusCode::DataLoss) << "length " << n;
  }
  for (size_t i = 0; i < b.size(); ++i)
    for (uint8_t mask : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xFF)}) {
      std::vector<uint8_t> c = b;
      c[i] ^= mask;
      ASSERT_FALSE(loadStatus(c).ok()) << "byte " << i << " ^ " << int(mask);
    }
}

TEST(ArtifactCodegen, ByteChangesWithAValidChecksumNeverCrash) {
  const std::vector<uint8_t> b = codegenBytes();
  int rejected = 0;
  for (size_t i = 0; i < b.size(); ++i)
    for (uint8_t v : {uint8_t(0x00), uint8_t(0x01), uint8_t(0x7F),
                      uint8_t(0xFF), uint8_t(b[i] + 1)}) {
      std::vector<uint8_t> c = b;
      c[i] = v;
      rechecksum(c);
      StatusOr<Artifact> a = Artifact::load(c.data(), c.size());
      if (!a.ok()) {
        ++rejected;
        continue;
      }
      for (const Instruction &inst : a->instructions())
        ASSERT_TRUE(inst.kernel == kNoIndex ||
                    (inst.kernel < a->kernels().size() &&
                     a->kernels()[inst.kernel].op == inst.opcode));
      for (const CodegenKernel &k : a->kernels())
        ASSERT_LT(k.module, a->modules().size());
    }
  EXPECT_GT(rejected, 0);
}

TEST(ArtifactCodegen, RejectsInconsistentKernels) {
  auto expectBad = [](ArtifactWriter w, const std::string &needle) {
    StatusOr<std::vector<uint8_t>> r = w.finish();
    ASSERT_FALSE(r.ok()) << "expected: " << needle;
    EXPECT_EQ(r.status().code(), StatusCode::InvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos)
        << r.status().toString();
  };
  {
    ArtifactWriter w = smallProgram();
    w.setInstructionKernel(1, 0); // no kernels declared
    expectBad(std::move(w), "kernel index 0 out of range");
  }
  {
    ArtifactWriter w = smallProgram();
    w.addCodegenKernel("k_rope", kTinyPtx, Opcode::RopeCacheUpdate, 544, 8);
    w.setInstructionKernel(1, 0); // a cache_update run by a rope kernel
    expectBad(std::move(w), "implements rope_cache_update, not cache_update");
  }
  {
    ArtifactWriter w = smallProgram();
    w.addCodegenKernel("k_missing", kTinyPtx, Opcode::CacheUpdate, 576, 8);
    expectBad(std::move(w), "defines no such .entry");
  }
  {
    ArtifactWriter w = smallProgram();
    w.addCodegenKernel("k_update", kTinyPtx, Opcode::Add, 576, 8);
    expectBad(std::move(w), "has no generated kernels");
  }
  for (auto [threads, tokens] : {std::pair<uint32_t, uint32_t>{0, 1},
                                 {33, 1}, {2048, 8}, {576, 0}, {64, 65}}) {
    ArtifactWriter w = smallProgram();
    w.addCodegenKernel("k_update", kTinyPtx, Opcode::CacheUpdate, threads,
                       tokens);
    expectBad(std::move(w), "bad launch geometry");
  }
  {
    ArtifactWriter w = smallProgram();
    w.addCodegenKernel("", kTinyPtx, Opcode::CacheUpdate, 576, 8);
    expectBad(std::move(w), "empty name");
  }
  {
    ArtifactWriter w = smallProgram();
    w.addCodegenKernel("k_update", kTinyPtx, Opcode::CacheUpdate, 576, 8);
    w.addCodegenKernel("k_update", kTinyPtx, Opcode::CacheUpdate, 576, 8);
    expectBad(std::move(w), "duplicate kernel");
  }
  {
    // Reserved fields of the kernel record must be zero.
    std::vector<uint8_t> c = codegenBytes();
    c[payloadOffset(c, mlaa::kSectionKernels) + 10] = 1;
    rechecksum(c);
    Status s = loadStatus(c);
    EXPECT_NE(s.message().find("reserved"), std::string::npos) << s.toString();
  }
  {
    // The kernels section relabelled as a second instructions section.
    std::vector<uint8_t> c = codegenBytes();
    putU32(c, payloadOffset(c, mlaa::kSectionKernels) - 16,
           mlaa::kSectionInstructions);
    rechecksum(c);
    EXPECT_NE(loadStatus(c).message().find("out of order"), std::string::npos);
  }
}

TEST(Artifact, RejectsOutOfRangeIndices) {
  {
    ArtifactWriter w = smallProgram();
    ViewDecl v;
    v.base = ViewBase::Buffer;
    v.baseIndex = 4; // 4 buffers: 0..3
    w.addView(v);
    expectInvalid(w, "buffer index 4 out of range");
  }
  {
    ArtifactWriter w = smallProgram();
    w.copy(0, uint32_t(w.views().size()));
    expectInvalid(w, "view index");
  }
  {
    ArtifactWriter w = smallProgram();
    w.cacheUpdate(1, 3, 4, 5);
    expectInvalid(w, "cache index 1 out of range");
  }
  {
    ArtifactWriter w = smallProgram();
    ViewDecl v;
    v.base = ViewBase::Arena;
    v.baseIndex = 3;
    w.addView(v);
    expectInvalid(w, "arena view with base index 3");
  }
  {
    // A string index past the table: patch buffer 0's name.
    std::vector<uint8_t> c = smallBytes();
    putU32(c, payloadOffset(c, mlaa::kSectionBuffers), 1000);
    rechecksum(c);
    Status s = loadStatus(c);
    EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
    EXPECT_NE(s.message().find("string index 1000"), std::string::npos)
        << s.toString();
  }
  {
    // A string entry past the string data.
    std::vector<uint8_t> c = smallBytes();
    putU32(c, payloadOffset(c, mlaa::kSectionStrings), 5000);
    rechecksum(c);
    EXPECT_NE(loadStatus(c).message().find("outside the string data"),
              std::string::npos);
  }
  {
    // Unknown opcode, dtype, role, rank.
    ArtifactWriter w = smallProgram();
    Instruction inst;
    inst.opcode = Opcode(99);
    w.addInstruction(inst);
    expectInvalid(w, "unknown opcode 99");
    ArtifactWriter w2 = smallProgram();
    BufferDecl b;
    b.name = "bad";
    b.dtype = DType(9);
    w2.addBuffer(b);
    expectInvalid(w2, "unknown dtype 9");
    ArtifactWriter w3 = smallProgram();
    b.dtype = DType::F32;
    b.role = BufferRole(7);
    w3.addBuffer(b);
    expectInvalid(w3, "unknown role 7");
    ArtifactWriter w4 = smallProgram();
    w4.addBuffer("r5", BufferRole::Input, DType::F32, {1, 1, 1, 1, 1});
    expectInvalid(w4, "rank 5");
  }
}

TEST(Artifact, RejectsViewsOutsideTheirBase) {
  {
    ArtifactWriter w = smallProgram(); // x is [2, 12] bf16 = 48 bytes
    w.bufferView(0, 2, DType::BF16, {2, 12});
    expectInvalid(w, "lies outside buffer 'x' of 48 bytes");
  }
  {
    ArtifactWriter w = smallProgram();
    w.bufferView(0, 0, DType::BF16, {2, 12}, {13, 1}); // one element too far
    expectInvalid(w, "lies outside buffer 'x'");
  }
  {
    ArtifactWriter w = smallProgram();
    w.bufferView(0, 0, DType::F32, {2, 12}); // reinterpreting doubles bytes
    expectInvalid(w, "lies outside");
  }
  {
    ArtifactWriter w = smallProgram();
    w.arenaView(w.arenaBytes() - 2, DType::BF16, {2});
    expectInvalid(w, "lies outside the arena");
  }
  {
    ArtifactWriter w = smallProgram();
    w.bufferView(0, 1, DType::BF16, {1});
    expectInvalid(w, "not a multiple of the element size");
  }
  {
    ArtifactWriter w = smallProgram();
    w.bufferView(0, -2, DType::BF16, {1});
    expectInvalid(w, "negative");
  }
  {
    ArtifactWriter w = smallProgram();
    w.bufferView(0, 0, DType::BF16, {2, 2}, {-1, 1});
    expectInvalid(w, "stride -1");
  }
  {
    // Sizes and strides whose product would overflow 64 bits.
    ArtifactWriter w = smallProgram();
    w.bufferView(0, 0, DType::BF16, {int64_t(1) << 40, 2},
                 {int64_t(1) << 40, 1});
    expectInvalid(w, "overflow");
  }
  {
    ArtifactWriter w = smallProgram();
    w.bufferView(0, 0, DType::BF16, {int64_t(1) << 62});
    expectInvalid(w, "out of range");
  }
  {
    // Empty views may sit at the very end; views of size 0 read nothing.
    ArtifactWriter w = smallProgram();
    w.bufferView(0, 48, DType::BF16, {0, 12});
    EXPECT_TRUE(w.finish().ok());
  }
}

TEST(Artifact, RejectsInstructionsTheirKernelCannotRun) {
  auto base = [] { return smallProgram(); };
  // Views of the small program: 0 x[2,12], 1 tmp, 2 w[12], 3 kv_c, 4 k_pe,
  // 5 slots, 6 out.
  {
    ArtifactWriter w = base();
    w.linear(0, kNoIndex, 6);
    expectInvalid(w, "required operand 'weight' is missing");
  }
  {
    ArtifactWriter w = base();
    w.linear(0, 2, 6); // weight rank 1
    expectInvalid(w, "operand 'weight' has rank 1");
  }
  {
    ArtifactWriter w = base();
    w.add(0, w.bufferView(2, 0, DType::I64, {1, 2}), 6); // i64 slots
    expectInvalid(w, "operand 'b' has dtype i64");
  }
  {
    ArtifactWriter w = base();
    Instruction inst;
    inst.opcode = Opcode::Add;
    inst.operands = {0,        1,        6,        0,        kNoIndex,
                     kNoIndex, kNoIndex, kNoIndex, kNoIndex, kNoIndex};
    w.addInstruction(inst);
    expectInvalid(w, "operand slot 3 must be empty");
  }
  {
    ArtifactWriter w = base();
    w.add(0, 1, 0);
    EXPECT_TRUE(w.finish().ok()); // writing an input is allowed
    w.rmsNorm(0, 2, w.bufferView(1, 0, DType::BF16, {1, 12}), 1e-6f);
    expectInvalid(w, "would write weight buffer 'w'");
  }
  {
    ArtifactWriter w = base();
    w.cacheUpdate(kNoIndex, 3, 4, 5);
    expectInvalid(w, "needs a cache");
    ArtifactWriter w2 = base();
    Instruction inst;
    inst.opcode = Opcode::Add;
    inst.operands[0] = 0;
    inst.operands[1] = 1;
    inst.operands[2] = 6;
    inst.cache = 0;
    w2.addInstruction(inst);
    expectInvalid(w2, "takes no cache");
  }
  {
    ArtifactWriter w = base();
    const uint32_t q = w.arenaView(0, DType::BF16, {1, 1, 12});
    w.prefillAttention(q, q, q, 5, q, 1.0f, kNoIndex, 0);
    expectInvalid(w, "operand 'query_start_loc' has dtype i64");
  }
  {
    ArtifactWriter w = base();
    const uint32_t q = w.arenaView(0, DType::BF16, {1, 1, 12});
    const uint32_t qsl = w.bufferView(
        w.addBuffer("qsl", BufferRole::StepMetadata, DType::I32, {2}));
    w.prefillAttention(q, q, q, qsl, q, 1.0f, kNoIndex, 0);
    expectInvalid(w, "operand 'block_table' must be present with a cache");
  }
  {
    ArtifactWriter w = base();
    w.copy(0, w.arenaView(0, DType::BF16, {12, 2}));
    expectInvalid(w, "differ in shape or dtype");
  }
  {
    ArtifactWriter w = base();
    w.rope(w.arenaView(0, DType::BF16, {2, 4}), 5,
           w.arenaView(0, DType::F32, {1, 4}), RopeStyle(3));
    expectInvalid(w, "unknown rope style 3");
  }
  {
    ArtifactWriter w = base();
    w.rmsNorm(0, 2, 1, std::nanf(""));
    expectInvalid(w, "is not valid");
    ArtifactWriter w2 = base();
    w2.rmsNorm(0, 2, 1, -1.0f);
    expectInvalid(w2, "is not valid");
  }
  {
    ArtifactWriter w = base();
    Instruction inst;
    inst.opcode = Opcode::Linear;
    inst.operands[0] = 0;
    inst.operands[1] = 1;
    inst.operands[2] = 1;
    inst.floatAttr = 2.0f;
    w.addInstruction(inst);
    expectInvalid(w, "unused float attribute");
  }
}

/// rope_cache_update's optional q_pe source (slot 7): absent in older
/// artifacts (q_pe rotated in place), else q_pe's shape and dtype and only
/// with q_pe; slot 8 stays unused.
TEST(Artifact, RopeCacheUpdateQPeSource) {
  // Views of the small program: 0 x[2,12], 1 tmp, 2 w[12], 3 kv_c, 4 k_pe,
  // 5 slots, 6 out.
  auto program = [](bool withSource, ArtifactWriter &w, uint32_t &qIn,
                    uint32_t &qOut) {
    qIn = w.bufferView(0, 0, DType::BF16, {2, 2, 4}, {12, 6, 1});
    qOut = w.arenaView(0, DType::BF16, {2, 2, 4});
    const uint32_t cs = w.bufferView(
        w.addBuffer("cos_sin", BufferRole::Weight, DType::F32, {4, 4}));
    w.ropeCacheUpdate(0, 3, 4, 5, 5, cs, RopeStyle::NeoX, qOut, kNoIndex,
                      "rope", withSource ? qIn : kNoIndex);
  };
  for (bool withSource : {false, true}) {
    ArtifactWriter w = smallProgram();
    w.allocateArena(128);
    uint32_t qIn, qOut;
    program(withSource, w, qIn, qOut);
    StatusOr<std::vector<uint8_t>> b = w.finish();
    ASSERT_TRUE(b.ok()) << b.status().toString();
    StatusOr<Artifact> a = Artifact::load(b->data(), b->size());
    ASSERT_TRUE(a.ok()) << a.status().toString();
    const Instruction &inst = a->instructions().back();
    EXPECT_EQ(inst.opcode, Opcode::RopeCacheUpdate);
    EXPECT_EQ(inst.operands[5], qOut);
    EXPECT_EQ(inst.operands[6], kNoIndex);
    EXPECT_EQ(inst.operands[7], withSource ? qIn : kNoIndex);
    EXPECT_EQ(inst.operands[8], kNoIndex);
  }
  {
    ArtifactWriter w = smallProgram();
    w.allocateArena(128);
    const uint32_t qIn = w.bufferView(0, 0, DType::BF16, {2, 2, 4}, {12, 6, 1});
    const uint32_t cs = w.bufferView(
        w.addBuffer("cos_sin", BufferRole::Weight, DType::F32, {4, 4}));
    w.ropeCacheUpdate(0, 3, 4, 5, 5, cs, RopeStyle::NeoX, kNoIndex, kNoIndex,
                      "", qIn);
    expectInvalid(w, "operand 'q_pe_in' needs 'q_pe'");
  }
  {
    ArtifactWriter w = smallProgram();
    w.allocateArena(128);
    const uint32_t qIn = w.bufferView(0, 0, DType::BF16, {2, 1, 4}, {12, 6, 1});
    const uint32_t qOut = w.arenaView(0, DType::BF16, {2, 2, 4});
    const uint32_t cs = w.bufferView(
        w.addBuffer("cos_sin", BufferRole::Weight, DType::F32, {4, 4}));
    w.ropeCacheUpdate(0, 3, 4, 5, 5, cs, RopeStyle::NeoX, qOut, kNoIndex, "",
                      qIn);
    expectInvalid(w, "'q_pe_in' and 'q_pe' differ in shape or dtype");
  }
  {
    ArtifactWriter w = smallProgram();
    w.allocateArena(128);
    const uint32_t qIn = w.arenaView(32, DType::F32, {2, 2, 4});
    const uint32_t qOut = w.arenaView(0, DType::BF16, {2, 2, 4});
    const uint32_t cs = w.bufferView(
        w.addBuffer("cos_sin", BufferRole::Weight, DType::F32, {4, 4}));
    w.ropeCacheUpdate(0, 3, 4, 5, 5, cs, RopeStyle::NeoX, qOut, kNoIndex, "",
                      qIn);
    expectInvalid(w, "'q_pe_in' and 'q_pe' differ in shape or dtype");
  }
  {
    ArtifactWriter w = smallProgram();
    w.allocateArena(128);
    const uint32_t qIn = w.bufferView(0, 0, DType::I64, {2, 2, 1}, {3, 1, 1});
    const uint32_t qOut = w.arenaView(0, DType::BF16, {2, 2, 4});
    const uint32_t cs = w.bufferView(
        w.addBuffer("cos_sin", BufferRole::Weight, DType::F32, {4, 4}));
    w.ropeCacheUpdate(0, 3, 4, 5, 5, cs, RopeStyle::NeoX, qOut, kNoIndex, "",
                      qIn);
    expectInvalid(w, "operand 'q_pe_in' has dtype i64");
  }
  {
    ArtifactWriter w = smallProgram();
    w.allocateArena(128);
    const uint32_t qIn = w.bufferView(0, 0, DType::BF16, {2, 2, 4}, {12, 6, 1});
    const uint32_t qOut = w.arenaView(0, DType::BF16, {2, 2, 4});
    const uint32_t cs = w.bufferView(
        w.addBuffer("cos_sin", BufferRole::Weight, DType::F32, {4, 4}));
    Instruction inst;
    inst.opcode = Opcode::RopeCacheUpdate;
    inst.cache = 0;
    inst.intAttr = int32_t(RopeStyle::NeoX);
    inst.operands = {3, 4, 5, 5, cs, qOut, kNoIndex, qIn, kNoIndex, qIn};
    w.addInstruction(inst);
    expectInvalid(w, "operand slot 9 must be empty");
  }
}

/// rope_cache_update's optional latent norm: the weight in slot 8 (absent
/// in older artifacts), its epsilon in the float attribute, which must be
/// zero without a weight and positive and finite with one.
TEST(Artifact, RopeCacheUpdateLatentNorm) {
  // Views of the small program: 0 x[2,12], 1 tmp, 2 w[12], 3 kv_c [2, 8],
  // 4 k_pe, 5 slots, 6 out. The cache's latent rank is 8.
  auto program = [](ArtifactWriter &w, int64_t weightSize, DType weightType,
                    float eps) {
    w.allocateArena(128);
    const uint32_t cs = w.bufferView(
        w.addBuffer("cos_sin", BufferRole::Weight, DType::F32, {4, 4}));
    const uint32_t weight =
        weightSize < 0 ? kNoIndex
                       : w.bufferView(0, 0, weightType, {weightSize}, {1});
    w.ropeCacheUpdate(0, 3, 4, 5, 5, cs, RopeStyle::NeoX, kNoIndex, kNoIndex,
                      "rope", kNoIndex, weight, eps);
    return weight;
  };
  for (bool withNorm : {false, true}) {
    ArtifactWriter w = smallProgram();
    const uint32_t weight =
        program(w, withNorm ? 8 : -1, DType::BF16, withNorm ? 1e-6f : 0.0f);
    StatusOr<std::vector<uint8_t>> b = w.finish();
    ASSERT_TRUE(b.ok()) << b.status().toString();
    StatusOr<Artifact> a = Artifact::load(b->data(), b->size());
    ASSERT_TRUE(a.ok()) << a.status().toString();
    const Instruction &inst = a->instructions().back();
    EXPECT_EQ(inst.opcode, Opcode::RopeCacheUpdate);
    EXPECT_EQ(inst.operands[8], weight);
    EXPECT_EQ(inst.floatAttr, withNorm ? 1e-6f : 0.0f);
  }
  struct Bad {
    int64_t size;
    DType type;
    float eps;
    const char *error;
  } cases[] = {
      {12, DType::BF16, 1e-6f,
       "operand 'latent_norm_weight' must have the cache's latent rank 8"},
      {8, DType::I32, 1e-6f, "operand 'latent_norm_weight' has dtype i32"},
      {8, DType::BF16, 0.0f, "is not valid"},
      {8, DType::BF16, -1.0f, "is not valid"},
      {8, DType::BF16, INFINITY, "is not valid"},
      {-1, DType::BF16, 1e-6f, "unused float attribute is not zero"}};
  for (const Bad &c : cases) {
    SCOPED_TRACE(c.error);
    ArtifactWriter w = smallProgram();
    program(w, c.size, c.type, c.eps);
    expectInvalid(w, c.error);
  }
}

TEST(Artifact, LinearAddendSlot) {
  // Views of the small program: 0 x[2,12] bf16, 1 tmp[2,12] bf16 (arena),
  // 2 w[12], 6 out[2,12] bf16; a [12, 12] weight of its own.
  auto withLinear = [](uint32_t addend, ArtifactWriter &w) {
    const uint32_t wt = w.bufferView(
        w.addBuffer("proj", BufferRole::Weight, DType::BF16, {12, 12}));
    if (addend == kNoIndex)
      w.linear(0, wt, 1, "proj");
    else
      w.linear(0, wt, 1, addend, "proj");
  };
  // Without the slot (an artifact written before it existed holds kNoIndex
  // there) and with it: both load, and the slot is kept.
  for (uint32_t addend : {kNoIndex, 6u}) {
    ArtifactWriter w = smallProgram();
    withLinear(addend, w);
    StatusOr<std::vector<uint8_t>> b = w.finish();
    ASSERT_TRUE(b.ok()) << b.status().toString();
    StatusOr<Artifact> a = Artifact::load(b->data(), b->size());
    ASSERT_TRUE(a.ok()) << a.status().toString();
    const Instruction &inst = a->instructions().back();
    EXPECT_EQ(inst.opcode, Opcode::Linear);
    EXPECT_EQ(inst.operands[2], 1u);
    EXPECT_EQ(inst.operands[3], addend);
    EXPECT_EQ(inst.operands[4], kNoIndex);
  }
  {
    // Wrong shape: [2, 8] against out [2, 12].
    ArtifactWriter w = smallProgram();
    const uint32_t r = w.arenaView(0, DType::BF16, {2, 8});
    withLinear(r, w);
    expectInvalid(w, "operands 'addend' and 'out' differ in shape or dtype");
  }
  {
    // Wrong dtype: f32 against bf16 out.
    ArtifactWriter w = smallProgram();
    w.allocateArena(2 * 12 * 4);
    const uint32_t r = w.arenaView(0, DType::F32, {2, 12});
    withLinear(r, w);
    expectInvalid(w, "operands 'addend' and 'out' differ in shape or dtype");
  }
  {
    // Wrong rank and a non-float dtype fail the operand spec.
    ArtifactWriter w = smallProgram();
    const uint32_t r = w.arenaView(0, DType::BF16, {24});
    withLinear(r, w);
    expectInvalid(w, "operand 'addend' has rank 1");
  }
  {
    ArtifactWriter w = smallProgram();
    const uint32_t r = w.bufferView(2, 0, DType::I64, {2, 1}, {1, 1});
    withLinear(r, w);
    expectInvalid(w, "operand 'addend' has dtype i64");
  }
  {
    // Past the addend, slots stay empty.
    ArtifactWriter w = smallProgram();
    const uint32_t wt = w.bufferView(
        w.addBuffer("proj", BufferRole::Weight, DType::BF16, {12, 12}));
    Instruction inst;
    inst.opcode = Opcode::Linear;
    inst.operands = {0, wt, 1, 6, 6, kNoIndex, kNoIndex, kNoIndex, kNoIndex,
                     kNoIndex};
    w.addInstruction(inst);
    expectInvalid(w, "operand slot 4 must be empty");
  }
}

TEST(Artifact, RejectsBadNamesAndCaches) {
  {
    ArtifactWriter w = smallProgram();
    w.addBuffer("x", BufferRole::Input, DType::F32, {1});
    expectInvalid(w, "name 'x' is empty or not unique");
  }
  {
    ArtifactWriter w = smallProgram();
    w.addBuffer("", BufferRole::Input, DType::F32, {1});
    expectInvalid(w, "empty or not unique");
  }
  {
    ArtifactWriter w = smallProgram();
    w.addCache("out", smallCacheDesc());
    expectInvalid(w, "not unique among buffers and caches");
  }
  {
    ArtifactWriter w = smallProgram();
    KVCacheDesc d = smallCacheDesc();
    d.ropeDim = 3;
    w.addCache("odd", d);
    expectInvalid(w, "even rope_dim");
  }
  {
    ArtifactWriter w = smallProgram();
    KVCacheDesc d = smallCacheDesc();
    d.numBlocks = int64_t(1) << 39;
    d.blockSize = int64_t(1) << 39;
    w.addCache("huge", d);
    expectInvalid(w, "too large");
  }
}

// A per-tensor fp8 cache names the 0-d f32 buffer that holds its scale.
TEST(Artifact, CacheScaleBufferRoundTripsAndIsChecked) {
  KVCacheDesc fp8 = smallCacheDesc();
  fp8.layout = CacheLayout::Fp8PerTensor;
  fp8.dtype = DType::F8E5M2;
  {
    ArtifactWriter w = smallProgram();
    const uint32_t c = w.addCache("fp8", fp8);
    w.setCacheScale(
        c, w.addBuffer("kv_scale", BufferRole::Weight, DType::F32, {}));
    StatusOr<std::vector<uint8_t>> b = w.finish();
    ASSERT_TRUE(b.ok()) << b.status().toString();
    StatusOr<Artifact> a = Artifact::load(b->data(), b->size());
    ASSERT_TRUE(a.ok()) << a.status().toString();
    ASSERT_EQ(a->caches().size(), 2u);
    EXPECT_EQ(a->caches()[0].scaleBuffer, kNoIndex);
    EXPECT_EQ(a->caches()[1].desc.dtype, DType::F8E5M2);
    EXPECT_EQ(int(a->caches()[1].scaleBuffer), a->findBuffer("kv_scale"));
  }
  struct Bad {
    const char *what;
    CacheLayout layout;
    BufferRole role;
    DType dtype;
    bool scalar; ///< 0-d, else [1]
    const char *fragment;
  };
  for (const Bad &bad :
       {Bad{"plain cache", CacheLayout::Plain, BufferRole::Weight, DType::F32,
            true, "not fp8_per_tensor"},
        Bad{"f16 scale", CacheLayout::Fp8PerTensor, BufferRole::Weight,
            DType::F16, true, "0-d f32 weight or input"},
        Bad{"1-d scale", CacheLayout::Fp8PerTensor, BufferRole::Input,
            DType::F32, false, "0-d f32 weight or input"},
        Bad{"output scale", CacheLayout::Fp8PerTensor, BufferRole::Output,
            DType::F32, true, "0-d f32 weight or input"}}) {
    SCOPED_TRACE(bad.what);
    ArtifactWriter w = smallProgram();
    KVCacheDesc d = bad.layout == CacheLayout::Plain ? smallCacheDesc() : fp8;
    const uint32_t c = w.addCache("fp8", d);
    w.setCacheScale(c, bad.scalar
                           ? w.addBuffer("kv_scale", bad.role, bad.dtype, {})
                           : w.addBuffer("kv_scale", bad.role, bad.dtype, {1}));
    expectInvalid(w, bad.fragment);
  }
  {
    ArtifactWriter w = smallProgram();
    w.setCacheScale(w.addCache("fp8", fp8), 99);
    expectInvalid(w, "out of range");
  }
}

// A rope table record (the extension section) round trips field for field
// and is checked: one per buffer, a [max_position, even rope] f32 input or
// weight, parameters ropeCosSinTable accepts.
TEST(Artifact, RopeTableRecordRoundTripsAndIsChecked) {
  RopeTableParams yarn;
  yarn.theta = 50000.0;
  yarn.factor = 40.0;
  yarn.originalMaxPosition = 4096;
  yarn.betaFast = 16.0;
  yarn.betaSlow = 2.0;
  yarn.mscale = 0.707;
  yarn.mscaleAllDim = 0.5;
  {
    ArtifactWriter w = smallProgram();
    const uint32_t table =
        w.addBuffer("cos_sin_cache", BufferRole::Weight, DType::F32, {32, 8});
    w.setRopeTable(table, yarn);
    StatusOr<std::vector<uint8_t>> b = w.finish();
    ASSERT_TRUE(b.ok()) << b.status().toString();
    StatusOr<Artifact> a = Artifact::load(b->data(), b->size());
    ASSERT_TRUE(a.ok()) << a.status().toString();
    ASSERT_EQ(a->ropeTables().size(), 1u);
    EXPECT_EQ(a->ropeTables()[0].buffer, table);
    const RopeTableParams *p = a->ropeTableOf(table);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->theta, yarn.theta);
    EXPECT_EQ(p->factor, yarn.factor);
    EXPECT_EQ(p->originalMaxPosition, yarn.originalMaxPosition);
    EXPECT_EQ(p->betaFast, yarn.betaFast);
    EXPECT_EQ(p->betaSlow, yarn.betaSlow);
    EXPECT_EQ(p->mscale, yarn.mscale);
    EXPECT_EQ(p->mscaleAllDim, yarn.mscaleAllDim);
    EXPECT_EQ(a->ropeTableOf(0), nullptr);
  }
  struct Bad {
    const char *what;
    DType dtype;
    std::initializer_list<int64_t> shape;
    BufferRole role;
    RopeTableParams params;
    const char *fragment;
  };
  RopeTableParams badTheta;
  badTheta.theta = 0.5;
  RopeTableParams noContext = yarn;
  noContext.originalMaxPosition = 0;
  for (const Bad &bad : {Bad{"f16 table",
                             DType::F16,
                             {32, 8},
                             BufferRole::Weight,
                             yarn,
                             "[max_position, rope] f32"},
                         Bad{"odd rope",
                             DType::F32,
                             {32, 7},
                             BufferRole::Weight,
                             yarn,
                             "even rope dim"},
                         Bad{"1-d table",
                             DType::F32,
                             {32},
                             BufferRole::Weight,
                             yarn,
                             "[max_position, rope] f32"},
                         Bad{"output table",
                             DType::F32,
                             {32, 8},
                             BufferRole::Output,
                             yarn,
                             "input or weight"},
                         Bad{"theta",
                             DType::F32,
                             {32, 8},
                             BufferRole::Weight,
                             badTheta,
                             "theta must be"},
                         Bad{"no context",
                             DType::F32,
                             {32, 8},
                             BufferRole::Weight,
                             noContext,
                             "original_max_position > 0"}}) {
    SCOPED_TRACE(bad.what);
    ArtifactWriter w = smallProgram();
    BufferDecl d;
    d.name = "cos_sin_cache";
    d.role = bad.role;
    d.dtype = bad.dtype;
    d.rank = int(bad.shape.size());
    int i = 0;
    for (int64_t size : bad.shape)
      d.sizes[i++] = size;
    w.setRopeTable(w.addBuffer(d), bad.params);
    expectInvalid(w, bad.fragment);
  }
  {
    ArtifactWriter w = smallProgram();
    w.setRopeTable(99, yarn);
    expectInvalid(w, "out of range");
  }
}

} // namespace
} // namespace mlart
