//===- ArtifactWriter.cpp - Serializes a program as MLAA version 4 --------===//
#include "mlart/ArtifactWriter.h"

#include "ArtifactFormat.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <unordered_map>

namespace mlart {

namespace {

/// Little-endian append-only byte sink.
class Bytes {
public:
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void i32(int32_t v) { put(uint32_t(v), 4); }
  void i64(int64_t v) { put(uint64_t(v), 8); }
  void u64(uint64_t v) { put(v, 8); }
  void f32(float v) { u32(floatBits(v)); }
  void f64(double v) {
    uint64_t bits = 0;
    std::memcpy(&bits, &v, 8);
    u64(bits);
  }
  void raw(const void *p, size_t n) {
    const uint8_t *b = static_cast<const uint8_t *>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void padTo8() {
    while (out_.size() % 8)
      out_.push_back(0);
  }
  size_t size() const { return out_.size(); }
  void patchU64(size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i)
      out_[at + size_t(i)] = uint8_t(v >> (8 * i));
  }
  std::vector<uint8_t> take() { return std::move(out_); }
  const std::vector<uint8_t> &view() const { return out_; }

private:
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i)
      out_.push_back(uint8_t(v >> (8 * i)));
  }
  std::vector<uint8_t> out_;
};

/// Interns strings; index order is first-use order.
class StringTable {
public:
  uint32_t intern(const std::string &s) {
    auto it = index_.find(s);
    if (it != index_.end())
      return it->second;
    const uint32_t i = uint32_t(strings_.size());
    strings_.push_back(s);
    index_.emplace(s, i);
    return i;
  }
  uint32_t internOptional(const std::string &s) {
    return s.empty() ? kNoIndex : intern(s);
  }
  const std::vector<std::string> &strings() const { return strings_; }

private:
  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint32_t> index_;
};

void rowMajor(int rank, const int64_t *sizes, int64_t *strides) {
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= sizes[d];
  }
}

/// Section writer: header with a placeholder size, payload, padding.
class SectionScope {
public:
  SectionScope(Bytes &b, uint32_t kind, uint32_t count) : b_(b) {
    b_.u32(kind);
    b_.u32(count);
    sizeAt_ = b_.size();
    b_.u64(0);
    start_ = b_.size();
  }
  ~SectionScope() {
    b_.patchU64(sizeAt_, uint64_t(b_.size() - start_));
    b_.padTo8();
  }

private:
  Bytes &b_;
  size_t sizeAt_, start_;
};

} // namespace

uint32_t ArtifactWriter::addBuffer(const std::string &name, BufferRole role,
                                   DType dtype,
                                   std::initializer_list<int64_t> sizes) {
  BufferDecl b;
  b.name = name;
  b.role = role;
  b.dtype = dtype;
  b.rank = int(sizes.size());
  int d = 0;
  for (int64_t s : sizes)
    if (d < kMaxRank)
      b.sizes[d++] = s;
  return addBuffer(b);
}

uint32_t ArtifactWriter::addBuffer(const BufferDecl &decl) {
  buffers_.push_back(decl);
  return uint32_t(buffers_.size() - 1);
}

void ArtifactWriter::setRopeTable(uint32_t buffer,
                                  const RopeTableParams &params) {
  for (RopeTableDecl &t : ropeTables_)
    if (t.buffer == buffer) {
      t.params = params;
      return;
    }
  ropeTables_.push_back({buffer, params});
}

uint32_t ArtifactWriter::addCache(const std::string &name,
                                  const KVCacheDesc &desc) {
  caches_.push_back(CacheDecl{name, desc});
  return uint32_t(caches_.size() - 1);
}

int64_t ArtifactWriter::allocateArena(int64_t bytes, int64_t alignment) {
  if (alignment < 1)
    alignment = 1;
  const int64_t offset = (arenaBytes_ + alignment - 1) / alignment * alignment;
  arenaBytes_ = offset + bytes;
  return offset;
}

int64_t ArtifactWriter::allocatePrepared(int64_t bytes, int64_t alignment) {
  if (alignment < 1)
    alignment = 1;
  const int64_t offset =
      (preparedBytes_ + alignment - 1) / alignment * alignment;
  preparedBytes_ = offset + bytes;
  return offset;
}

uint32_t ArtifactWriter::addView(const ViewDecl &view) {
  views_.push_back(view);
  return uint32_t(views_.size() - 1);
}

namespace {
ViewDecl makeView(ViewBase base, uint32_t index, int64_t byteOffset,
                  DType dtype, std::initializer_list<int64_t> sizes,
                  std::initializer_list<int64_t> strides) {
  ViewDecl v;
  v.base = base;
  v.baseIndex = index;
  v.byteOffset = byteOffset;
  v.dtype = dtype;
  v.rank = int(sizes.size());
  int d = 0;
  for (int64_t s : sizes)
    if (d < kMaxRank)
      v.sizes[d++] = s;
  if (strides.size() == 0) {
    rowMajor(std::min(v.rank, kMaxRank), v.sizes, v.strides);
  } else {
    d = 0;
    for (int64_t s : strides)
      if (d < kMaxRank)
        v.strides[d++] = s;
  }
  return v;
}
} // namespace

uint32_t ArtifactWriter::bufferView(uint32_t buffer, int64_t byteOffset,
                                    DType dtype,
                                    std::initializer_list<int64_t> sizes,
                                    std::initializer_list<int64_t> strides) {
  return addView(
      makeView(ViewBase::Buffer, buffer, byteOffset, dtype, sizes, strides));
}

uint32_t ArtifactWriter::bufferView(uint32_t buffer) {
  ViewDecl v;
  v.base = ViewBase::Buffer;
  v.baseIndex = buffer;
  if (buffer < buffers_.size()) {
    const BufferDecl &b = buffers_[buffer];
    v.dtype = b.dtype;
    v.rank = b.rank;
    for (int d = 0; d < b.rank && d < kMaxRank; ++d)
      v.sizes[d] = b.sizes[d];
    rowMajor(std::min(v.rank, kMaxRank), v.sizes, v.strides);
  }
  return addView(v);
}

uint32_t ArtifactWriter::arenaView(int64_t byteOffset, DType dtype,
                                   std::initializer_list<int64_t> sizes,
                                   std::initializer_list<int64_t> strides) {
  return addView(
      makeView(ViewBase::Arena, 0, byteOffset, dtype, sizes, strides));
}

uint32_t ArtifactWriter::preparedView(int64_t byteOffset, DType dtype,
                                      std::initializer_list<int64_t> sizes,
                                      std::initializer_list<int64_t> strides) {
  return addView(
      makeView(ViewBase::Prepared, 0, byteOffset, dtype, sizes, strides));
}

uint32_t ArtifactWriter::addInstruction(const Instruction &inst) {
  instructions_.push_back(inst);
  return uint32_t(instructions_.size() - 1);
}

uint32_t ArtifactWriter::addPrepareInstruction(const Instruction &inst) {
  prepareInstructions_.push_back(inst);
  return uint32_t(prepareInstructions_.size() - 1);
}

namespace {
Instruction make(Opcode op, std::initializer_list<uint32_t> operands,
                 const std::string &loc, uint32_t cache = kNoIndex,
                 float f = 0.0f, int32_t i = 0) {
  Instruction inst;
  inst.opcode = op;
  size_t k = 0;
  for (uint32_t o : operands)
    inst.operands[k++] = o;
  inst.cache = cache;
  inst.floatAttr = f;
  inst.intAttr = i;
  inst.location = loc;
  return inst;
}
} // namespace

uint32_t ArtifactWriter::copy(uint32_t src, uint32_t dst,
                              const std::string &loc) {
  return addInstruction(make(Opcode::Copy, {src, dst}, loc));
}
uint32_t ArtifactWriter::prepareCopy(uint32_t src, uint32_t dst,
                                     const std::string &loc) {
  return addPrepareInstruction(make(Opcode::Copy, {src, dst}, loc));
}
uint32_t ArtifactWriter::cacheUpdate(uint32_t cache, uint32_t kvC, uint32_t kPe,
                                     uint32_t slotMapping,
                                     const std::string &loc) {
  return addInstruction(
      make(Opcode::CacheUpdate, {kvC, kPe, slotMapping}, loc, cache));
}
uint32_t ArtifactWriter::rope(uint32_t x, uint32_t positions, uint32_t cosSin,
                              RopeStyle style, const std::string &loc) {
  return addInstruction(make(Opcode::Rope, {x, positions, cosSin}, loc,
                             kNoIndex, 0.0f, int32_t(style)));
}
uint32_t ArtifactWriter::ropeCacheUpdate(
    uint32_t cache, uint32_t kvC, uint32_t kPe, uint32_t slotMapping,
    uint32_t positions, uint32_t cosSin, RopeStyle style, uint32_t qPe,
    uint32_t kPeOut, const std::string &loc, uint32_t qPeIn,
    uint32_t latentNormWeight, float latentNormEpsilon) {
  return addInstruction(make(Opcode::RopeCacheUpdate,
                             {kvC, kPe, slotMapping, positions, cosSin, qPe,
                              kPeOut, qPeIn, latentNormWeight},
                             loc, cache, latentNormEpsilon, int32_t(style)));
}
uint32_t ArtifactWriter::decodeAttention(uint32_t cache, uint32_t q,
                                         uint32_t blockTable, uint32_t seqLens,
                                         uint32_t out, float softmaxScale,
                                         uint32_t lse, int numSplits,
                                         const std::string &loc) {
  return addInstruction(make(Opcode::DecodeAttention,
                             {q, blockTable, seqLens, out, lse}, loc, cache,
                             softmaxScale, numSplits));
}
uint32_t ArtifactWriter::decodeAttentionWithUpdate(
    uint32_t cache, uint32_t kvC, uint32_t kPe, uint32_t slotMapping,
    uint32_t q, uint32_t blockTable, uint32_t seqLens, uint32_t out,
    float softmaxScale, uint32_t lse, int numSplits, const std::string &loc) {
  return addInstruction(
      make(Opcode::DecodeAttentionWithUpdate,
           {kvC, kPe, slotMapping, q, blockTable, seqLens, out, lse}, loc,
           cache, softmaxScale, numSplits));
}
uint32_t ArtifactWriter::prefillAttention(
    uint32_t q, uint32_t k, uint32_t v, uint32_t queryStartLoc, uint32_t out,
    float softmaxScale, uint32_t lse, uint32_t cache, uint32_t blockTable,
    uint32_t contextLens, uint32_t wUK, uint32_t wUV, const std::string &loc) {
  return addInstruction(make(
      Opcode::PrefillAttention,
      {q, k, v, queryStartLoc, out, lse, blockTable, contextLens, wUK, wUV},
      loc, cache, softmaxScale));
}
uint32_t ArtifactWriter::prefillAttentionTotalLens(
    uint32_t q, uint32_t k, uint32_t v, uint32_t queryStartLoc, uint32_t out,
    float softmaxScale, uint32_t lse, uint32_t cache, uint32_t blockTable,
    uint32_t seqLens, uint32_t wUK, uint32_t wUV, const std::string &loc) {
  Instruction inst = make(Opcode::PrefillAttention,
                          {q, k, v, queryStartLoc, out, lse, blockTable,
                           seqLens, wUK, wUV},
                          loc, cache, softmaxScale);
  inst.intAttr = 1;
  return addInstruction(inst);
}
uint32_t ArtifactWriter::qAbsorb(uint32_t qNope, uint32_t wUK, uint32_t out,
                                 const std::string &loc) {
  return addInstruction(make(Opcode::QAbsorb, {qNope, wUK, out}, loc));
}
uint32_t ArtifactWriter::vUp(uint32_t oLatent, uint32_t wUV, uint32_t out,
                             const std::string &loc) {
  return addInstruction(make(Opcode::VUp, {oLatent, wUV, out}, loc));
}
uint32_t ArtifactWriter::qConcat(uint32_t qLatent, uint32_t qPe, uint32_t out,
                                 const std::string &loc) {
  return addInstruction(make(Opcode::QConcat, {qLatent, qPe, out}, loc));
}
uint32_t ArtifactWriter::quantize(uint32_t x, uint32_t scale, uint32_t out,
                                  const std::string &loc) {
  return addInstruction(make(Opcode::Quantize, {x, scale, out}, loc));
}
uint32_t ArtifactWriter::rmsNorm(uint32_t x, uint32_t weight, uint32_t out,
                                 float epsilon, const std::string &loc) {
  return addInstruction(
      make(Opcode::RmsNorm, {x, weight, out}, loc, kNoIndex, epsilon));
}
uint32_t ArtifactWriter::linear(uint32_t x, uint32_t weight, uint32_t out,
                                const std::string &loc) {
  return addInstruction(make(Opcode::Linear, {x, weight, out}, loc));
}
uint32_t ArtifactWriter::linear(uint32_t x, uint32_t weight, uint32_t out,
                                uint32_t addend, const std::string &loc) {
  return addInstruction(make(Opcode::Linear, {x, weight, out, addend}, loc));
}
uint32_t ArtifactWriter::add(uint32_t a, uint32_t b, uint32_t out,
                             const std::string &loc) {
  return addInstruction(make(Opcode::Add, {a, b, out}, loc));
}

std::vector<uint8_t> ArtifactWriter::serialize() const {
  // Intern every string first so the string section can come before the
  // records that refer to it.
  StringTable strings;
  const uint32_t fnName = strings.internOptional(functionName_);
  std::vector<uint32_t> bufferNames, cacheNames, locations;
  for (const BufferDecl &b : buffers_)
    bufferNames.push_back(strings.intern(b.name));
  for (const CacheDecl &c : caches_)
    cacheNames.push_back(strings.intern(c.name));
  for (const Instruction &i : instructions_)
    locations.push_back(strings.internOptional(i.location));
  std::vector<uint32_t> prepareLocations;
  for (const Instruction &i : prepareInstructions_)
    prepareLocations.push_back(strings.internOptional(i.location));
  std::vector<uint32_t> kernelNames, kernelPtx;
  for (const KernelDecl &k : kernels_) {
    kernelNames.push_back(strings.intern(k.name));
    kernelPtx.push_back(strings.intern(k.ptx));
  }

  Bytes b;
  b.raw(mlaa::kMagic, 4);
  b.u32(kArtifactVersion);
  b.u64(0); // total length, patched below
  b.u64(0); // checksum, patched below
  const bool hasPrepare = preparedBytes_ > 0 || !prepareInstructions_.empty();
  b.u32(mlaa::kNumRequiredSections + (kernels_.empty() ? 0 : 1) +
        (hasPrepare ? 1 : 0) + (ropeTables_.empty() ? 0 : 1));
  b.u32(0); // flags

  {
    SectionScope s(b, mlaa::kSectionMeta, 1);
    b.u32(fnName);
    b.u32(0);
    b.i64(arenaBytes_);
  }
  {
    const auto &all = strings.strings();
    SectionScope s(b, mlaa::kSectionStrings, uint32_t(all.size()));
    uint32_t offset = 0;
    for (const std::string &str : all) {
      b.u32(offset);
      b.u32(uint32_t(str.size()));
      offset += uint32_t(str.size());
    }
    for (const std::string &str : all)
      b.raw(str.data(), str.size());
  }
  {
    SectionScope s(b, mlaa::kSectionBuffers, uint32_t(buffers_.size()));
    for (size_t i = 0; i < buffers_.size(); ++i) {
      const BufferDecl &d = buffers_[i];
      b.u32(bufferNames[i]);
      b.u8(uint8_t(d.role));
      b.u8(uint8_t(d.dtype));
      b.u8(uint8_t(d.rank));
      b.u8(0);
      for (int64_t sz : d.sizes)
        b.i64(sz);
    }
  }
  {
    SectionScope s(b, mlaa::kSectionCaches, uint32_t(caches_.size()));
    for (size_t i = 0; i < caches_.size(); ++i) {
      const KVCacheDesc &d = caches_[i].desc;
      b.u32(cacheNames[i]);
      b.u8(uint8_t(d.dtype));
      b.u8(uint8_t(d.layout));
      b.u16(0);
      b.i64(d.numBlocks);
      b.i64(d.blockSize);
      b.i64(d.latentRank);
      b.i64(d.ropeDim);
      b.u32(caches_[i].scaleBuffer);
      b.u32(0);
    }
  }
  {
    SectionScope s(b, mlaa::kSectionViews, uint32_t(views_.size()));
    for (const ViewDecl &v : views_) {
      b.u8(uint8_t(v.base));
      b.u8(uint8_t(v.dtype));
      b.u8(uint8_t(v.rank));
      b.u8(0);
      b.u32(v.baseIndex);
      b.i64(v.byteOffset);
      for (int64_t sz : v.sizes)
        b.i64(sz);
      for (int64_t st : v.strides)
        b.i64(st);
    }
  }
  auto instruction = [&b](const Instruction &inst, uint32_t location) {
    b.u16(uint16_t(inst.opcode));
    b.u16(0);
    b.u32(location);
    b.u32(inst.cache);
    b.i32(inst.intAttr);
    b.f32(inst.floatAttr);
    b.u32(inst.kernel);
    for (uint32_t o : inst.operands)
      b.u32(o);
  };
  {
    SectionScope s(b, mlaa::kSectionInstructions,
                   uint32_t(instructions_.size()));
    for (size_t i = 0; i < instructions_.size(); ++i)
      instruction(instructions_[i], locations[i]);
  }
  if (!kernels_.empty()) {
    SectionScope s(b, mlaa::kSectionKernels, uint32_t(kernels_.size()));
    for (size_t i = 0; i < kernels_.size(); ++i) {
      const KernelDecl &k = kernels_[i];
      b.u32(kernelNames[i]);
      b.u32(kernelPtx[i]);
      b.u16(uint16_t(k.op));
      b.u16(0);
      b.u32(k.blockThreads);
      b.u32(k.tokensPerBlock);
      b.u32(0);
    }
  }

  if (hasPrepare) {
    SectionScope s(b, mlaa::kSectionPrepare,
                   uint32_t(prepareInstructions_.size()));
    b.i64(preparedBytes_);
    b.i64(0);
    for (size_t i = 0; i < prepareInstructions_.size(); ++i)
      instruction(prepareInstructions_[i], prepareLocations[i]);
  }

  if (!ropeTables_.empty()) {
    SectionScope s(b, mlaa::kSectionRopeTables, uint32_t(ropeTables_.size()));
    for (const RopeTableDecl &t : ropeTables_) {
      b.u32(t.buffer);
      b.u32(0);
      b.f64(t.params.theta);
      b.f64(t.params.factor);
      b.i64(t.params.originalMaxPosition);
      b.f64(t.params.betaFast);
      b.f64(t.params.betaSlow);
      b.f64(t.params.mscale);
      b.f64(t.params.mscaleAllDim);
    }
  }

  b.patchU64(mlaa::kOffTotalLength, uint64_t(b.size()));
  const std::vector<uint8_t> &bytes = b.view();
  b.patchU64(mlaa::kOffChecksum, fnv1a64(bytes.data() + mlaa::kChecksumStart,
                                         bytes.size() - mlaa::kChecksumStart));
  return b.take();
}

uint32_t ArtifactWriter::addCodegenKernel(const std::string &name,
                                          const std::string &ptx, Opcode op,
                                          uint32_t blockThreads,
                                          uint32_t tokensPerBlock) {
  kernels_.push_back({name, ptx, op, blockThreads, tokensPerBlock});
  return uint32_t(kernels_.size() - 1);
}

StatusOr<std::vector<uint8_t>> ArtifactWriter::finish() const {
  std::vector<uint8_t> bytes = serialize();
  StatusOr<Artifact> check = Artifact::load(bytes.data(), bytes.size());
  if (!check.ok())
    return check.status();
  return bytes;
}

Status writeArtifactFile(const std::string &path,
                         const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    return unavailable("cannot open '" + path + "' for writing");
  out.write(reinterpret_cast<const char *>(bytes.data()),
            std::streamsize(bytes.size()));
  out.close();
  if (!out)
    return dataLoss("error writing '" + path + "'");
  return Status::success();
}

} // namespace mlart
