//===- Artifact.cpp - Strict decoder and validator of MLAA artifacts ------===//
//
// Every read goes through Cursor, which checks its range against the input
// size first, and every count is bounded by the bytes that hold its records,
// so no input can make the loader read out of bounds or allocate more than
// a small multiple of the input size.
//
//===----------------------------------------------------------------------===//
#include "mlart/Artifact.h"
#include "mlart/FileRead.h"

#include "ArtifactFormat.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <map>
#include <unordered_set>

namespace mlart {

const char *bufferRoleName(BufferRole role) {
  switch (role) {
  case BufferRole::Input:
    return "input";
  case BufferRole::Output:
    return "output";
  case BufferRole::Weight:
    return "weight";
  case BufferRole::StepMetadata:
    return "step_metadata";
  }
  return "unknown";
}

int64_t BufferDecl::numElements() const {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d)
    n *= sizes[d];
  return n;
}

int64_t BufferDecl::sizeBytes() const {
  return numElements() * int64_t(dtypeSize(dtype));
}

TensorRef BufferDecl::view(void *data) const {
  TensorRef t;
  t.data = data;
  t.dtype = dtype;
  t.rank = rank;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    t.sizes[d] = sizes[d];
    t.strides[d] = stride;
    stride *= sizes[d];
  }
  return t;
}

TensorRef ViewDecl::resolve(void *baseAddress) const {
  TensorRef t;
  t.data = static_cast<uint8_t *>(baseAddress) + byteOffset;
  t.dtype = dtype;
  t.rank = rank;
  for (int d = 0; d < rank; ++d) {
    t.sizes[d] = sizes[d];
    t.strides[d] = strides[d];
  }
  return t;
}

std::pair<int64_t, int64_t> ViewDecl::byteExtent() const {
  int64_t last = 0;
  for (int d = 0; d < rank; ++d) {
    if (sizes[d] == 0)
      return {byteOffset, byteOffset};
    last += (sizes[d] - 1) * strides[d];
  }
  return {byteOffset, byteOffset + (last + 1) * int64_t(dtypeSize(dtype))};
}

int Artifact::findBuffer(const std::string &name) const {
  for (size_t i = 0; i < buffers_.size(); ++i)
    if (buffers_[i].name == name)
      return int(i);
  return -1;
}

const RopeTableParams *Artifact::ropeTableOf(uint32_t buffer) const {
  for (const RopeTableDecl &t : ropeTables_)
    if (t.buffer == buffer)
      return &t.params;
  return nullptr;
}

int Artifact::findCache(const std::string &name) const {
  for (size_t i = 0; i < caches_.size(); ++i)
    if (caches_[i].name == name)
      return int(i);
  return -1;
}

std::string Artifact::describeInstruction(size_t i) const {
  if (i >= instructions_.size())
    return "#" + std::to_string(i) + " (out of range)";
  const Instruction &inst = instructions_[i];
  std::string s = "#" + std::to_string(i) + " " + opcodeName(inst.opcode);
  if (!inst.location.empty())
    s += " (" + inst.location + ")";
  return s;
}

uint64_t fnv1a64(const void *data, size_t size) {
  const uint8_t *p = static_cast<const uint8_t *>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

namespace {

/// Little-endian reads inside [begin, end) of the input; the caller checks
/// `fits` (or uses a Cursor) before reading.
uint64_t readLE(const uint8_t *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

/// Sequential reader over one record; the record's size was checked against
/// the input when its section was framed, so reads inside it are in bounds.
class Cursor {
public:
  Cursor(const uint8_t *p, uint64_t size) : p_(p), size_(size) {}
  uint8_t u8() { return uint8_t(take(1)); }
  uint16_t u16() { return uint16_t(take(2)); }
  uint32_t u32() { return uint32_t(take(4)); }
  int32_t i32() { return int32_t(uint32_t(take(4))); }
  int64_t i64() { return int64_t(take(8)); }
  float f32() {
    uint32_t bits = u32();
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  double f64() {
    uint64_t bits = take(8);
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  /// Set when a read ran past the record (a framing bug, never input).
  bool overrun() const { return overrun_; }

private:
  uint64_t take(int bytes) {
    if (pos_ + uint64_t(bytes) > size_) {
      overrun_ = true;
      return 0;
    }
    uint64_t v = readLE(p_ + pos_, bytes);
    pos_ += uint64_t(bytes);
    return v;
  }
  const uint8_t *p_;
  uint64_t size_;
  uint64_t pos_ = 0;
  bool overrun_ = false;
};

struct Section {
  uint32_t kind = 0;
  uint32_t count = 0;
  const uint8_t *payload = nullptr;
  uint64_t bytes = 0;
  bool present = false;
};

/// a * b into out; false on overflow of int64_t.
bool mulChecked(int64_t a, int64_t b, int64_t &out) {
  return !__builtin_mul_overflow(a, b, &out);
}
bool addChecked(int64_t a, int64_t b, int64_t &out) {
  return !__builtin_add_overflow(a, b, &out);
}

bool validDType(uint8_t v) { return isValidDType(v); }

/// Largest size of one dimension we accept; keeps every product below 2^63.
constexpr int64_t kMaxDim = int64_t(1) << 40;

} // namespace

/// Decodes the sections into an Artifact and checks the program.
class ArtifactParser {
public:
  ArtifactParser(const uint8_t *data, uint64_t size)
      : data_(data), size_(size) {}

  StatusOr<Artifact> parse() {
    MLART_RETURN_IF_ERROR(parseHeader());
    MLART_RETURN_IF_ERROR(parseStrings());
    MLART_RETURN_IF_ERROR(parseMeta());
    MLART_RETURN_IF_ERROR(parsePrepareHeader());
    MLART_RETURN_IF_ERROR(parseBuffers());
    MLART_RETURN_IF_ERROR(parseCaches());
    MLART_RETURN_IF_ERROR(parseViews());
    MLART_RETURN_IF_ERROR(parseKernels());
    MLART_RETURN_IF_ERROR(parseInstructions());
    MLART_RETURN_IF_ERROR(parsePrepareInstructions());
    MLART_RETURN_IF_ERROR(parseRopeTables());
    MLART_RETURN_IF_ERROR(checkReadsAreDefined());
    return std::move(a_);
  }

private:
  static Status invalid(const std::string &msg) {
    return invalidArgument("artifact: " + msg);
  }
  static Status corrupt(const std::string &msg) {
    return dataLoss("artifact: " + msg);
  }

  Status parseHeader() {
    if (size_ < mlaa::kHeaderBytes)
      return corrupt("truncated: " + std::to_string(size_) +
                     " bytes is shorter than the 32-byte header");
    if (std::memcmp(data_ + mlaa::kOffMagic, mlaa::kMagic, 4) != 0)
      return corrupt("bad magic (not an MLAA artifact)");
    const uint32_t version = uint32_t(readLE(data_ + mlaa::kOffVersion, 4));
    if (version != kArtifactVersion)
      return invalid("unsupported format version " + std::to_string(version) +
                     " (this runtime reads version " +
                     std::to_string(kArtifactVersion) + ")");
    const uint64_t total = readLE(data_ + mlaa::kOffTotalLength, 8);
    if (total != size_)
      return corrupt("length mismatch: header says " + std::to_string(total) +
                     " bytes, got " + std::to_string(size_) +
                     (total > size_ ? " (truncated)" : ""));
    const uint64_t stored = readLE(data_ + mlaa::kOffChecksum, 8);
    const uint64_t actual = fnv1a64(data_ + mlaa::kChecksumStart,
                                    size_t(size_ - mlaa::kChecksumStart));
    if (stored != actual)
      return corrupt("checksum mismatch (corrupted artifact)");
    if (readLE(data_ + mlaa::kOffFlags, 4) != 0)
      return invalid("unknown header flags");

    const uint32_t sectionCount =
        uint32_t(readLE(data_ + mlaa::kOffSectionCount, 4));
    uint64_t pos = mlaa::kHeaderBytes;
    uint32_t lastKnown = 0;
    for (uint32_t s = 0; s < sectionCount; ++s) {
      if (size_ - pos < mlaa::kSectionHeaderBytes)
        return corrupt("section " + std::to_string(s) +
                       " header runs past the end");
      Section sec;
      sec.kind = uint32_t(readLE(data_ + pos, 4));
      sec.count = uint32_t(readLE(data_ + pos + 4, 4));
      sec.bytes = readLE(data_ + pos + 8, 8);
      pos += mlaa::kSectionHeaderBytes;
      const uint64_t padded = (sec.bytes + 7) & ~uint64_t(7);
      if (sec.bytes > size_ - pos || padded > size_ - pos)
        return corrupt("section " + std::to_string(s) + " (kind " +
                       std::to_string(sec.kind) + ") runs past the end");
      sec.payload = data_ + pos;
      for (uint64_t i = sec.bytes; i < padded; ++i)
        if (data_[pos + i] != 0)
          return invalid("non-zero padding after section kind " +
                         std::to_string(sec.kind));
      pos += padded;
      if (sec.kind == mlaa::kSectionRopeTables) {
        if (ropeTables_.present)
          return invalid("rope table section is duplicated");
        ropeTables_ = sec;
        ropeTables_.present = true;
        continue;
      }
      if (sec.kind >= mlaa::kFirstExtensionSection)
        continue; // An extension this reader does not know: skip it.
      if (sec.kind < 1 || sec.kind > mlaa::kLastKnownSection)
        return invalid("unknown section kind " + std::to_string(sec.kind));
      if (sec.kind <= lastKnown)
        return invalid("section kind " + std::to_string(sec.kind) +
                       " is duplicated or out of order");
      lastKnown = sec.kind;
      sec.present = true;
      sections_[sec.kind] = sec;
    }
    if (pos != size_)
      return corrupt(std::to_string(size_ - pos) +
                     " trailing bytes after the last section");
    for (uint32_t k = 1; k <= mlaa::kNumRequiredSections; ++k)
      if (!sections_[k].present)
        return invalid("missing section kind " + std::to_string(k));
    return Status::success();
  }

  /// Checks that a fixed-record section holds exactly count records.
  Status framed(uint32_t kind, uint64_t recordBytes, const char *what) {
    const Section &s = sections_[kind];
    if (s.bytes != uint64_t(s.count) * recordBytes)
      return invalid(std::string(what) + " section holds " +
                     std::to_string(s.bytes) + " bytes, expected " +
                     std::to_string(s.count) + " records of " +
                     std::to_string(recordBytes));
    return Status::success();
  }

  Status parseStrings() {
    const Section &s = sections_[mlaa::kSectionStrings];
    const uint64_t table = uint64_t(s.count) * mlaa::kStringEntryBytes;
    if (table > s.bytes)
      return invalid("string table of " + std::to_string(s.count) +
                     " entries does not fit its section");
    const uint8_t *chars = s.payload + table;
    const uint64_t charBytes = s.bytes - table;
    strings_.reserve(s.count);
    for (uint32_t i = 0; i < s.count; ++i) {
      Cursor c(s.payload + uint64_t(i) * mlaa::kStringEntryBytes,
               mlaa::kStringEntryBytes);
      const uint64_t off = c.u32(), len = c.u32();
      if (off > charBytes || len > charBytes - off)
        return invalid("string " + std::to_string(i) +
                       " lies outside the string data");
      if (std::memchr(chars + off, 0, size_t(len)) != nullptr)
        return invalid("string " + std::to_string(i) + " contains a NUL byte");
      strings_.emplace_back(reinterpret_cast<const char *>(chars + off),
                            size_t(len));
    }
    return Status::success();
  }

  /// Resolves a string index; kNoIndex gives "" when `optional`.
  Status string(uint32_t index, bool optional, const std::string &what,
                std::string &out) {
    if (index == kNoIndex && optional) {
      out.clear();
      return Status::success();
    }
    if (index >= strings_.size())
      return invalid(what + ": string index " + std::to_string(index) +
                     " out of range (" + std::to_string(strings_.size()) +
                     " strings)");
    out = strings_[index];
    return Status::success();
  }

  Status parseMeta() {
    const Section &s = sections_[mlaa::kSectionMeta];
    if (s.count != 1)
      return invalid("meta section must hold exactly one record");
    MLART_RETURN_IF_ERROR(framed(mlaa::kSectionMeta, mlaa::kMetaBytes, "meta"));
    Cursor c(s.payload, s.bytes);
    const uint32_t name = c.u32();
    if (c.u32() != 0)
      return invalid("meta: reserved field is not zero");
    a_.arenaBytes_ = c.i64();
    MLART_RETURN_IF_ERROR(
        string(name, true, "function name", a_.functionName_));
    if (a_.arenaBytes_ < 0 || a_.arenaBytes_ > (int64_t(1) << 50))
      return invalid("arena size " + std::to_string(a_.arenaBytes_) +
                     " is out of range");
    return Status::success();
  }

  /// The optional prepare section's header: the prepared arena's size. Its
  /// instruction records are decoded after the step's.
  Status parsePrepareHeader() {
    const Section &s = sections_[mlaa::kSectionPrepare];
    if (!s.present)
      return Status::success();
    if (s.bytes < mlaa::kPrepareHeaderBytes ||
        s.bytes - mlaa::kPrepareHeaderBytes !=
            uint64_t(s.count) * mlaa::kInstructionBytes)
      return invalid("prepare section holds " + std::to_string(s.bytes) +
                     " bytes, expected a 16-byte header and " +
                     std::to_string(s.count) + " instruction records");
    Cursor c(s.payload, mlaa::kPrepareHeaderBytes);
    a_.preparedBytes_ = c.i64();
    if (c.i64() != 0)
      return invalid("prepare: reserved field is not zero");
    if (a_.preparedBytes_ < 0 || a_.preparedBytes_ > (int64_t(1) << 50))
      return invalid("prepared arena size " +
                     std::to_string(a_.preparedBytes_) + " is out of range");
    return Status::success();
  }

  Status checkShape(const std::string &what, int rank, const int64_t *sizes) {
    if (rank < 0 || rank > kMaxRank)
      return invalid(what + ": rank " + std::to_string(rank) +
                     " is not in [0, 4]");
    for (int d = 0; d < kMaxRank; ++d) {
      if (d >= rank && sizes[d] != 0)
        return invalid(what + ": size of unused dimension " +
                       std::to_string(d) + " is not zero");
      if (d < rank && (sizes[d] < 0 || sizes[d] > kMaxDim))
        return invalid(what + ": size " + std::to_string(sizes[d]) +
                       " of dimension " + std::to_string(d) +
                       " is out of range");
    }
    return Status::success();
  }

  Status parseBuffers() {
    const Section &s = sections_[mlaa::kSectionBuffers];
    MLART_RETURN_IF_ERROR(
        framed(mlaa::kSectionBuffers, mlaa::kBufferBytes, "buffer"));
    std::unordered_set<std::string> names;
    a_.buffers_.reserve(s.count);
    for (uint32_t i = 0; i < s.count; ++i) {
      const std::string what = "buffer " + std::to_string(i);
      Cursor c(s.payload + uint64_t(i) * mlaa::kBufferBytes,
               mlaa::kBufferBytes);
      BufferDecl b;
      const uint32_t name = c.u32();
      const uint8_t role = c.u8(), dtype = c.u8(), rank = c.u8(),
                    reserved = c.u8();
      for (int64_t &sz : b.sizes)
        sz = c.i64();
      MLART_RETURN_IF_ERROR(string(name, false, what, b.name));
      if (b.name.empty() || !names.insert(b.name).second)
        return invalid(what + ": name '" + b.name + "' is empty or not unique");
      if (role > uint8_t(BufferRole::StepMetadata))
        return invalid(what + " '" + b.name + "': unknown role " +
                       std::to_string(role));
      if (!validDType(dtype))
        return invalid(what + " '" + b.name + "': unknown dtype " +
                       std::to_string(dtype));
      if (reserved != 0)
        return invalid(what + ": reserved field is not zero");
      b.role = BufferRole(role);
      b.dtype = DType(dtype);
      b.rank = rank;
      MLART_RETURN_IF_ERROR(
          checkShape(what + " '" + b.name + "'", rank, b.sizes));
      int64_t bytes = int64_t(dtypeSize(b.dtype));
      for (int d = 0; d < b.rank; ++d)
        if (!mulChecked(bytes, b.sizes[d], bytes) || bytes > (int64_t(1) << 50))
          return invalid(what + " '" + b.name + "' is too large");
      a_.buffers_.push_back(std::move(b));
    }
    return Status::success();
  }

  /// A cache's scale buffer: only for a per-tensor fp8 cache, and a 0-d f32
  /// buffer that the step reads and nobody writes (a weight or an input).
  Status checkCacheScale(const std::string &what, const CacheDecl &cd) {
    if (cd.scaleBuffer == kNoIndex)
      return Status::success();
    const std::string where = what + " '" + cd.name + "': scale buffer ";
    if (cd.desc.layout != CacheLayout::Fp8PerTensor)
      return invalid(where + "on a cache that is not fp8_per_tensor");
    if (cd.scaleBuffer >= a_.buffers_.size())
      return invalid(where + std::to_string(cd.scaleBuffer) +
                     " is out of range");
    const BufferDecl &b = a_.buffers_[cd.scaleBuffer];
    if (b.dtype != DType::F32 || b.rank != 0 ||
        (b.role != BufferRole::Weight && b.role != BufferRole::Input))
      return invalid(where + "'" + b.name +
                     "' must be a 0-d f32 weight or input");
    return Status::success();
  }

  Status parseCaches() {
    const Section &s = sections_[mlaa::kSectionCaches];
    MLART_RETURN_IF_ERROR(
        framed(mlaa::kSectionCaches, mlaa::kCacheBytes, "cache"));
    std::unordered_set<std::string> names;
    for (const BufferDecl &b : a_.buffers_)
      names.insert(b.name);
    a_.caches_.reserve(s.count);
    for (uint32_t i = 0; i < s.count; ++i) {
      const std::string what = "cache " + std::to_string(i);
      Cursor c(s.payload + uint64_t(i) * mlaa::kCacheBytes, mlaa::kCacheBytes);
      CacheDecl cd;
      const uint32_t name = c.u32();
      const uint8_t dtype = c.u8(), layout = c.u8();
      const uint16_t reserved = c.u16();
      cd.desc.numBlocks = c.i64();
      cd.desc.blockSize = c.i64();
      cd.desc.latentRank = c.i64();
      cd.desc.ropeDim = c.i64();
      cd.scaleBuffer = c.u32();
      const uint32_t reserved2 = c.u32();
      MLART_RETURN_IF_ERROR(string(name, false, what, cd.name));
      if (cd.name.empty() || !names.insert(cd.name).second)
        return invalid(what + ": name '" + cd.name +
                       "' is empty or not unique among buffers and caches");
      if (!validDType(dtype) || layout > uint8_t(CacheLayout::Fp8DsMla) ||
          reserved != 0 || reserved2 != 0)
        return invalid(what + " '" + cd.name +
                       "': bad dtype, layout or reserved field");
      cd.desc.dtype = DType(dtype);
      cd.desc.layout = CacheLayout(layout);
      const KVCacheDesc &d = cd.desc;
      if (d.numBlocks > kMaxDim || d.blockSize > kMaxDim ||
          d.latentRank > kMaxDim || d.ropeDim > kMaxDim)
        return invalid(what + " '" + cd.name + "': dimensions out of range");
      // num_blocks 0 declares a cache whose block count is fixed by the
      // cache bound at run time (the compiler's `?`); validate the rest.
      KVCacheDesc check = d;
      if (check.numBlocks == 0)
        check.numBlocks = 1;
      Status valid = check.validate();
      if (!valid.ok())
        return invalid(what + " '" + cd.name + "': " + valid.message());
      int64_t slots, total;
      if (!mulChecked(d.numBlocks, d.blockSize, slots) ||
          !mulChecked(slots, d.rowBytes(), total))
        return invalid(what + " '" + cd.name + "' is too large");
      MLART_RETURN_IF_ERROR(checkCacheScale(what, cd));
      a_.caches_.push_back(std::move(cd));
    }
    return Status::success();
  }

  Status parseViews() {
    const Section &s = sections_[mlaa::kSectionViews];
    MLART_RETURN_IF_ERROR(
        framed(mlaa::kSectionViews, mlaa::kViewBytes, "view"));
    a_.views_.reserve(s.count);
    for (uint32_t i = 0; i < s.count; ++i) {
      const std::string what = "view " + std::to_string(i);
      Cursor c(s.payload + uint64_t(i) * mlaa::kViewBytes, mlaa::kViewBytes);
      ViewDecl v;
      const uint8_t base = c.u8(), dtype = c.u8(), rank = c.u8(),
                    reserved = c.u8();
      v.baseIndex = c.u32();
      v.byteOffset = c.i64();
      for (int64_t &sz : v.sizes)
        sz = c.i64();
      for (int64_t &st : v.strides)
        st = c.i64();
      if (base > uint8_t(ViewBase::Prepared) || reserved != 0)
        return invalid(what + ": bad base kind or reserved field");
      if (!validDType(dtype))
        return invalid(what + ": unknown dtype " + std::to_string(dtype));
      v.base = ViewBase(base);
      v.dtype = DType(dtype);
      v.rank = rank;
      MLART_RETURN_IF_ERROR(checkShape(what, rank, v.sizes));
      for (int d = 0; d < kMaxRank; ++d) {
        if (d >= v.rank && v.strides[d] != 0)
          return invalid(what + ": stride of unused dimension " +
                         std::to_string(d) + " is not zero");
        if (d < v.rank && (v.strides[d] < 0 || v.strides[d] > kMaxDim))
          return invalid(what + ": stride " + std::to_string(v.strides[d]) +
                         " is out of range");
      }
      int64_t baseBytes = 0;
      std::string baseName;
      if (v.base == ViewBase::Buffer) {
        if (v.baseIndex >= a_.buffers_.size())
          return invalid(what + ": buffer index " +
                         std::to_string(v.baseIndex) + " out of range (" +
                         std::to_string(a_.buffers_.size()) + " buffers)");
        baseBytes = a_.buffers_[v.baseIndex].sizeBytes();
        baseName = "buffer '" + a_.buffers_[v.baseIndex].name + "'";
      } else {
        const bool prepared = v.base == ViewBase::Prepared;
        if (v.baseIndex != 0)
          return invalid(what + (prepared ? ": prepared" : ": arena") +
                         " view with base index " +
                         std::to_string(v.baseIndex));
        baseBytes = prepared ? a_.preparedBytes_ : a_.arenaBytes_;
        baseName = prepared ? "the prepared arena" : "the arena";
      }
      const int64_t elem = int64_t(dtypeSize(v.dtype));
      if (v.byteOffset < 0 || v.byteOffset % elem != 0)
        return invalid(what + ": byte offset " + std::to_string(v.byteOffset) +
                       " is negative or not a multiple of the element size");
      // The view touches elements [0, span) from its offset: span is the
      // largest element offset + 1, or 0 when some size is 0.
      int64_t span = 1;
      bool empty = false;
      for (int d = 0; d < v.rank; ++d) {
        if (v.sizes[d] == 0)
          empty = true;
        int64_t reach;
        if (!mulChecked(v.sizes[d] > 0 ? v.sizes[d] - 1 : 0, v.strides[d],
                        reach) ||
            !addChecked(span, reach, span))
          return invalid(what + ": extent overflows");
      }
      int64_t end;
      if (empty)
        span = 0;
      if (!mulChecked(span, elem, end) || !addChecked(end, v.byteOffset, end) ||
          end > baseBytes)
        return invalid(what + " [offset " + std::to_string(v.byteOffset) +
                       ", " + std::to_string(span) + " elements of " +
                       dtypeName(v.dtype) + "] lies outside " + baseName +
                       " of " + std::to_string(baseBytes) + " bytes");
      a_.views_.push_back(v);
    }
    return Status::success();
  }

  /// The optional rope-table extension: how each [max_position, rope] f32
  /// table buffer is computed, at most once per buffer, with parameters
  /// ropeCosSinTable accepts.
  Status parseRopeTables() {
    const Section &s = ropeTables_;
    if (!s.present)
      return Status::success();
    if (s.bytes != uint64_t(s.count) * mlaa::kRopeTableBytes)
      return invalid("rope table section holds " + std::to_string(s.bytes) +
                     " bytes, expected " + std::to_string(s.count) +
                     " records of " + std::to_string(mlaa::kRopeTableBytes));
    for (uint32_t i = 0; i < s.count; ++i) {
      Cursor c(s.payload + uint64_t(i) * mlaa::kRopeTableBytes,
               mlaa::kRopeTableBytes);
      RopeTableDecl t;
      t.buffer = c.u32();
      const uint32_t reserved = c.u32();
      t.params.theta = c.f64();
      t.params.factor = c.f64();
      t.params.originalMaxPosition = c.i64();
      t.params.betaFast = c.f64();
      t.params.betaSlow = c.f64();
      t.params.mscale = c.f64();
      t.params.mscaleAllDim = c.f64();
      const std::string what = "rope table #" + std::to_string(i);
      if (reserved != 0)
        return invalid(what + ": reserved field is not zero");
      if (t.buffer >= a_.buffers_.size())
        return invalid(what + ": buffer " + std::to_string(t.buffer) +
                       " is out of range");
      const BufferDecl &b = a_.buffers_[t.buffer];
      if (b.dtype != DType::F32 || b.rank != 2 || b.sizes[1] % 2 != 0 ||
          b.sizes[1] == 0 ||
          (b.role != BufferRole::Input && b.role != BufferRole::Weight))
        return invalid(what + ": buffer '" + b.name +
                       "' must be a [max_position, rope] f32 input or "
                       "weight with an even rope dim");
      if (a_.ropeTableOf(t.buffer))
        return invalid(what + ": buffer '" + b.name +
                       "' already has a rope table");
      if (Status st = validateRopeTableParams(t.params); !st.ok())
        return invalid(what + " of '" + b.name + "': " + st.message());
      a_.ropeTables_.push_back(t);
    }
    return Status::success();
  }

  /// The optional kernels section: each record names a compiler-generated
  /// kernel, the PTX text (a string) that defines it, the opcode it
  /// implements and its launch geometry.
  Status parseKernels() {
    const Section &s = sections_[mlaa::kSectionKernels];
    if (!s.present)
      return Status::success();
    MLART_RETURN_IF_ERROR(
        framed(mlaa::kSectionKernels, mlaa::kKernelBytes, "kernel"));
    std::vector<uint32_t> moduleOfString(strings_.size(), kNoIndex);
    a_.kernels_.reserve(s.count);
    for (uint32_t i = 0; i < s.count; ++i) {
      Cursor c(s.payload + uint64_t(i) * mlaa::kKernelBytes, mlaa::kKernelBytes);
      CodegenKernel k;
      const uint32_t name = c.u32(), ptx = c.u32();
      const uint16_t op = c.u16(), reserved = c.u16();
      k.blockThreads = c.u32();
      k.tokensPerBlock = c.u32();
      const uint32_t reserved2 = c.u32();
      if (c.overrun())
        return internalError("artifact: kernel record overrun");
      const std::string what = "kernel #" + std::to_string(i);
      if (reserved != 0 || reserved2 != 0)
        return invalid(what + ": reserved field is not zero");
      MLART_RETURN_IF_ERROR(string(name, false, what + " name", k.name));
      std::string text;
      MLART_RETURN_IF_ERROR(string(ptx, false, what + " ptx", text));
      if (k.name.empty())
        return invalid(what + ": empty name");
      k.op = Opcode(op);
      if (k.op != Opcode::CacheUpdate && k.op != Opcode::RopeCacheUpdate)
        return invalid(what + " '" + k.name + "': opcode " +
                       std::to_string(op) +
                       " has no generated kernels (only cache_update and "
                       "rope_cache_update)");
      if (k.blockThreads < 32 || k.blockThreads > 1024 ||
          k.blockThreads % 32 != 0 || k.tokensPerBlock < 1 ||
          k.tokensPerBlock > k.blockThreads)
        return invalid(what + " '" + k.name + "': bad launch geometry (" +
                       std::to_string(k.blockThreads) + " threads, " +
                       std::to_string(k.tokensPerBlock) +
                       " tokens per block)");
      // The module must define the entry: a cheap consistency check before
      // the driver ever sees the text.
      if (text.find(".entry " + k.name + "(") == std::string::npos)
        return invalid(what + " '" + k.name +
                       "': its PTX module defines no such .entry");
      if (moduleOfString[ptx] == kNoIndex) {
        moduleOfString[ptx] = uint32_t(a_.modules_.size());
        CodegenModule m;
        m.hash = fnv1a64(text.data(), text.size());
        m.ptx = std::move(text);
        a_.modules_.push_back(std::move(m));
      }
      k.module = moduleOfString[ptx];
      for (const CodegenKernel &other : a_.kernels_)
        if (other.name == k.name && other.module == k.module)
          return invalid(what + ": duplicate kernel '" + k.name + "'");
      a_.kernels_.push_back(std::move(k));
    }
    return Status::success();
  }

  Status parseInstructions() {
    const Section &s = sections_[mlaa::kSectionInstructions];
    MLART_RETURN_IF_ERROR(framed(mlaa::kSectionInstructions,
                                 mlaa::kInstructionBytes, "instruction"));
    a_.instructions_.reserve(s.count);
    for (uint32_t i = 0; i < s.count; ++i) {
      Instruction inst;
      std::string what = "instruction #" + std::to_string(i);
      MLART_RETURN_IF_ERROR(decodeInstruction(
          s.payload + uint64_t(i) * mlaa::kInstructionBytes, what, inst));
      MLART_RETURN_IF_ERROR(checkInstruction(inst, what));
      a_.instructions_.push_back(std::move(inst));
    }
    return Status::success();
  }

  /// The prepare program may only copy weight bytes (a weight buffer or
  /// the prepared arena) into the prepared arena: whatever it computes
  /// must depend on the weights alone, or running it once per binding
  /// would be wrong. The step may read the prepared arena but not write it.
  Status parsePrepareInstructions() {
    const Section &s = sections_[mlaa::kSectionPrepare];
    if (!s.present)
      return Status::success();
    a_.prepareInstructions_.reserve(s.count);
    for (uint32_t i = 0; i < s.count; ++i) {
      Instruction inst;
      std::string what = "prepare instruction #" + std::to_string(i);
      MLART_RETURN_IF_ERROR(decodeInstruction(
          s.payload + mlaa::kPrepareHeaderBytes +
              uint64_t(i) * mlaa::kInstructionBytes,
          what, inst));
      if (inst.opcode != Opcode::Copy || inst.kernel != kNoIndex)
        return invalid(what + ": the prepare program may only copy (got " +
                       opcodeName(inst.opcode) +
                       (inst.kernel != kNoIndex ? " with a generated kernel"
                                                : "") +
                       ")");
      MLART_RETURN_IF_ERROR(checkInstruction(inst, what, /*prepare=*/true));
      const ViewDecl &src = a_.views_[inst.operands[0]];
      const ViewDecl &dst = a_.views_[inst.operands[1]];
      const bool fromWeight =
          src.base == ViewBase::Prepared ||
          (src.base == ViewBase::Buffer &&
           a_.buffers_[src.baseIndex].role == BufferRole::Weight);
      if (!fromWeight)
        return invalid(what + ": copies from " +
                       (src.base == ViewBase::Arena
                            ? std::string("the arena")
                            : "non-weight buffer '" +
                                  a_.buffers_[src.baseIndex].name + "'") +
                       "; the prepare program reads weights only");
      if (dst.base != ViewBase::Prepared)
        return invalid(what +
                       ": writes outside the prepared arena; the prepare "
                       "program writes the prepared arena only");
      a_.prepareInstructions_.push_back(std::move(inst));
    }
    return Status::success();
  }

  /// Byte ranges of one base (the arena, the prepared arena, or an output
  /// buffer) that an earlier instruction wrote, as disjoint intervals.
  class DefinedBytes {
  public:
    void define(int64_t begin, int64_t end) {
      if (begin >= end)
        return;
      // Merge with every interval that touches [begin, end).
      auto it = intervals_.upper_bound(begin);
      if (it != intervals_.begin() && std::prev(it)->second >= begin)
        --it;
      while (it != intervals_.end() && it->first <= end) {
        begin = std::min(begin, it->first);
        end = std::max(end, it->second);
        it = intervals_.erase(it);
      }
      intervals_.emplace(begin, end);
    }
    /// The first byte of [begin, end) nobody defined, or -1.
    int64_t firstUndefined(int64_t begin, int64_t end) const {
      if (begin >= end)
        return -1;
      auto it = intervals_.upper_bound(begin);
      if (it == intervals_.begin())
        return begin;
      --it;
      return it->second >= end ? -1 : std::max(begin, it->second);
    }

  private:
    std::map<int64_t, int64_t> intervals_; ///< begin -> end
  };

  /// Rejects an instruction that reads bytes which no earlier instruction
  /// (or the prepare program) wrote and which the caller does not bind:
  /// scratch arena bytes and output buffers start undefined; inputs,
  /// weights and step metadata are the caller's. A strided write defines
  /// its whole byte extent, so the check never refuses what the compiler
  /// emits (a column window of rows the other windows fill), at the price
  /// of missing a read of a gap between a strided write's rows.
  Status checkReadsAreDefined() {
    DefinedBytes arena, prepared;
    std::vector<DefinedBytes> outputs(a_.buffers_.size());
    auto bytesOf = [&](const ViewDecl &v) -> DefinedBytes * {
      switch (v.base) {
      case ViewBase::Arena:
        return &arena;
      case ViewBase::Prepared:
        return &prepared;
      case ViewBase::Buffer:
        return a_.buffers_[v.baseIndex].role == BufferRole::Output
                   ? &outputs[v.baseIndex]
                   : nullptr; // bound by the caller
      }
      return nullptr;
    };
    auto run = [&](const std::vector<Instruction> &program,
                   const char *kind) -> Status {
      for (size_t i = 0; i < program.size(); ++i) {
        const Instruction &inst = program[i];
        const OpcodeInfo *info = opcodeInfo(inst.opcode);
        for (int k = 0; k < info->numOperands; ++k) {
          const uint32_t v = inst.operands[size_t(k)];
          if (v == kNoIndex || !info->operands[k].read)
            continue;
          // With q_pe_in, rope_cache_update rotates it into q_pe: q_pe is
          // then only written.
          namespace rcu = operand::RopeCacheUpdate;
          if (inst.opcode == Opcode::RopeCacheUpdate && k == rcu::q_pe &&
              inst.operands[rcu::q_pe_in] != kNoIndex)
            continue;
          const ViewDecl &view = a_.views_[v];
          DefinedBytes *bytes = bytesOf(view);
          const auto [begin, end] = view.byteExtent();
          const int64_t hole = bytes ? bytes->firstUndefined(begin, end) : -1;
          if (hole < 0)
            continue;
          std::string where = std::string(kind) + " #" + std::to_string(i) +
                              " " + opcodeName(inst.opcode);
          if (!inst.location.empty())
            where += " (" + inst.location + ")";
          const std::string base =
              view.base == ViewBase::Arena ? std::string("the arena")
              : view.base == ViewBase::Prepared
                  ? std::string("the prepared arena")
                  : "output buffer '" + a_.buffers_[view.baseIndex].name + "'";
          return invalid(where + ": operand '" + info->operands[k].name +
                         "' reads byte " + std::to_string(hole) + " of " +
                         base + ", which no earlier instruction writes");
        }
        for (int k = 0; k < info->numOperands; ++k) {
          const uint32_t v = inst.operands[size_t(k)];
          if (v == kNoIndex || !info->operands[k].written)
            continue;
          const ViewDecl &view = a_.views_[v];
          if (DefinedBytes *bytes = bytesOf(view)) {
            const auto [begin, end] = view.byteExtent();
            bytes->define(begin, end);
          }
        }
      }
      return Status::success();
    };
    MLART_RETURN_IF_ERROR(run(a_.prepareInstructions_, "prepare instruction"));
    return run(a_.instructions_, "instruction");
  }

  /// Decodes one instruction record; `what` gains its location.
  Status decodeInstruction(const uint8_t *record, std::string &what,
                           Instruction &inst) {
    Cursor c(record, mlaa::kInstructionBytes);
    const uint16_t op = c.u16(), reserved = c.u16();
    const uint32_t loc = c.u32();
    inst.cache = c.u32();
    inst.intAttr = c.i32();
    inst.floatAttr = c.f32();
    inst.kernel = c.u32();
    for (uint32_t &o : inst.operands)
      o = c.u32();
    if (c.overrun())
      return internalError("artifact: instruction record overrun");
    inst.opcode = Opcode(op);
    MLART_RETURN_IF_ERROR(string(loc, true, what, inst.location));
    if (!inst.location.empty())
      what += " (" + inst.location + ")";
    if (reserved != 0)
      return invalid(what + ": reserved field is not zero");
    if (inst.kernel != kNoIndex) {
      if (inst.kernel >= a_.kernels_.size())
        return invalid(what + ": kernel index " + std::to_string(inst.kernel) +
                       " out of range (" + std::to_string(a_.kernels_.size()) +
                       " kernels)");
      if (a_.kernels_[inst.kernel].op != inst.opcode)
        return invalid(what + ": kernel '" + a_.kernels_[inst.kernel].name +
                       "' implements " +
                       opcodeName(a_.kernels_[inst.kernel].op) + ", not " +
                       opcodeName(inst.opcode));
    }
    return Status::success();
  }

  /// `prepare`: a prepare-program instruction, the only kind that may write
  /// the prepared arena.
  Status checkInstruction(const Instruction &inst, const std::string &where,
                          bool prepare = false) {
    const OpcodeInfo *info = opcodeInfo(inst.opcode);
    if (!info)
      return invalid(where + ": unknown opcode " +
                     std::to_string(unsigned(inst.opcode)));
    const int count = info->numOperands;
    const OperandSpec *spec = info->operands;
    const std::string what = where + " " + opcodeName(inst.opcode);
    for (int k = 0; k < kMaxOperands; ++k) {
      const uint32_t v = inst.operands[size_t(k)];
      if (k >= count) {
        if (v != kNoIndex)
          return invalid(what + ": operand slot " + std::to_string(k) +
                         " must be empty");
        continue;
      }
      const OperandSpec &o = spec[k];
      if (v == kNoIndex) {
        if (!o.optional)
          return invalid(what + ": required operand '" + o.name +
                         "' is missing");
        continue;
      }
      if (v >= a_.views_.size())
        return invalid(what + ": operand '" + o.name + "' view index " +
                       std::to_string(v) + " out of range (" +
                       std::to_string(a_.views_.size()) + " views)");
      const ViewDecl &view = a_.views_[v];
      if (!(o.rankMask & (1u << view.rank)))
        return invalid(what + ": operand '" + o.name + "' has rank " +
                       std::to_string(view.rank) +
                       ", which the kernel does "
                       "not accept");
      if (!(o.dtypeMask & (1u << int(view.dtype))))
        return invalid(what + ": operand '" + o.name + "' has dtype " +
                       dtypeName(view.dtype) +
                       ", which the kernel does not accept");
      if (o.written && view.base == ViewBase::Buffer &&
          a_.buffers_[view.baseIndex].role == BufferRole::Weight)
        return invalid(what + ": operand '" + o.name +
                       "' would write weight buffer '" +
                       a_.buffers_[view.baseIndex].name + "'");
      // Only the prepare program fills the prepared arena; the step reads
      // it as it reads weights.
      if (o.written && view.base == ViewBase::Prepared && !prepare)
        return invalid(what + ": operand '" + o.name +
                       "' would write the prepared arena");
    }

    // The cache operand and the scalar attributes (Opcodes.def).
    const bool allowsCache = info->cache != CacheUse::None;
    const bool needsCache =
        info->cache == CacheUse::Read || info->cache == CacheUse::Write;
    if (inst.cache != kNoIndex) {
      if (!allowsCache)
        return invalid(what + ": takes no cache");
      if (inst.cache >= a_.caches_.size())
        return invalid(what + ": cache index " + std::to_string(inst.cache) +
                       " out of range (" + std::to_string(a_.caches_.size()) +
                       " caches)");
    } else if (needsCache) {
      return invalid(what + ": needs a cache");
    }
    if (inst.opcode == Opcode::PrefillAttention) {
      // The cached-context operands come all together with the cache.
      const bool withCache = inst.cache != kNoIndex;
      for (int k = operand::PrefillAttention::block_table;
           k <= operand::PrefillAttention::w_uv; ++k)
        if ((inst.operands[size_t(k)] != kNoIndex) != withCache)
          return invalid(what + ": operand '" + spec[k].name + "' must be " +
                         (withCache ? "present with" : "absent without") +
                         " a cache");
    }
    namespace rcu = operand::RopeCacheUpdate;
    if (inst.opcode == Opcode::RopeCacheUpdate &&
        inst.operands[rcu::q_pe_in] != kNoIndex) {
      // The q_pe source: the destination's shape and dtype (the kernels
      // check the overlap, which depends on the bound buffers).
      if (inst.operands[rcu::q_pe] == kNoIndex)
        return invalid(what + ": operand 'q_pe_in' needs 'q_pe'");
      const ViewDecl &a = a_.views_[inst.operands[rcu::q_pe_in]];
      const ViewDecl &b = a_.views_[inst.operands[rcu::q_pe]];
      bool same = a.rank == b.rank && a.dtype == b.dtype;
      for (int d = 0; same && d < a.rank; ++d)
        same = a.sizes[d] == b.sizes[d];
      if (!same)
        return invalid(what + ": operands 'q_pe_in' and 'q_pe' differ in "
                              "shape or dtype");
    }
    if (inst.opcode == Opcode::RopeCacheUpdate &&
        inst.operands[rcu::latent_norm_weight] != kNoIndex &&
        a_.views_[inst.operands[rcu::latent_norm_weight]].sizes[0] !=
            a_.caches_[inst.cache].desc.latentRank)
      return invalid(what +
                     ": operand 'latent_norm_weight' must have the "
                     "cache's latent rank " +
                     std::to_string(a_.caches_[inst.cache].desc.latentRank));
    if (inst.opcode == Opcode::Linear &&
        inst.operands[operand::Linear::addend] != kNoIndex) {
      // The addend is summed into out before rounding: out's shape and dtype.
      const ViewDecl &a = a_.views_[inst.operands[operand::Linear::addend]];
      const ViewDecl &b = a_.views_[inst.operands[operand::Linear::out]];
      bool same = a.rank == b.rank && a.dtype == b.dtype;
      for (int d = 0; same && d < a.rank; ++d)
        same = a.sizes[d] == b.sizes[d];
      if (!same)
        return invalid(what + ": operands 'addend' and 'out' differ in "
                              "shape or dtype");
    }
    bool hasFloat = info->floatAttr != FloatAttrCheck::None;
    if (info->floatAttr == FloatAttrCheck::PositiveWithOperand)
      hasFloat = inst.operands[size_t(count - 1)] != kNoIndex;
    if (hasFloat) {
      const float f = inst.floatAttr;
      const bool valid =
          std::isfinite(f) &&
          (info->floatAttr != FloatAttrCheck::NonNegative || f >= 0.0f) &&
          (info->floatAttr != FloatAttrCheck::PositiveWithOperand || f > 0.0f);
      if (!valid)
        return invalid(what + ": scalar attribute " +
                       std::string(info->floatAttrName) + " = " +
                       std::to_string(f) + " is not valid");
    } else if (floatBits(inst.floatAttr) != 0) {
      return invalid(what + ": unused float attribute is not zero");
    }
    const int32_t n = inst.intAttr;
    switch (info->intAttr) {
    case IntAttrCheck::None:
      if (n != 0)
        return invalid(what + ": unused integer attribute is not zero");
      break;
    case IntAttrCheck::RopeStyle:
      if (n != int32_t(RopeStyle::GptJ) && n != int32_t(RopeStyle::NeoX))
        return invalid(what + ": unknown rope style " + std::to_string(n));
      break;
    case IntAttrCheck::NonNegative:
      if (n < 0)
        return invalid(what + ": " + info->intAttrName + " " +
                       std::to_string(n) + " is negative");
      break;
    case IntAttrCheck::Flag:
      if (n != 0 && n != 1)
        return invalid(what + ": " + info->intAttrName + " " +
                       std::to_string(n) + " is not 0 or 1");
      break;
    }

    // copy is a byte copy and quantize elementwise: in and out agree.
    if (inst.opcode == Opcode::Copy || inst.opcode == Opcode::Quantize) {
      const size_t out = inst.opcode == Opcode::Copy
                             ? size_t(operand::Copy::dst)
                             : size_t(operand::Quantize::out);
      const ViewDecl &a = a_.views_[inst.operands[0]];
      const ViewDecl &b = a_.views_[inst.operands[out]];
      bool same = a.rank == b.rank;
      for (int d = 0; same && d < a.rank; ++d)
        same = a.sizes[d] == b.sizes[d];
      if (!same || (inst.opcode == Opcode::Copy && a.dtype != b.dtype))
        return invalid(what + ": source and destination views differ in " +
                       "shape or dtype");
    }
    return Status::success();
  }

  const uint8_t *data_;
  uint64_t size_;
  Section sections_[mlaa::kLastKnownSection + 1];
  /// The rope-table extension (kind kSectionRopeTables), if present.
  Section ropeTables_;
  std::vector<std::string> strings_;
  Artifact a_;
};

StatusOr<Artifact> Artifact::load(const void *data, size_t size) {
  if (!data && size != 0)
    return invalidArgument("artifact: null data");
  static const uint8_t kEmpty = 0;
  ArtifactParser parser(data ? static_cast<const uint8_t *>(data) : &kEmpty,
                        uint64_t(size));
  return parser.parse();
}

StatusOr<Artifact> Artifact::loadFile(const std::string &path,
                                      uint64_t maxBytes) {
  StatusOr<std::vector<uint8_t>> bytes = readRegularFile(path, maxBytes);
  if (!bytes.ok())
    return Status(bytes.status().code(),
                  "artifact: " + bytes.status().message());
  StatusOr<Artifact> a = load(bytes->data(), bytes->size());
  if (!a.ok())
    return Status(a.status().code(),
                  a.status().message() + " ('" + path + "')");
  return a;
}

} // namespace mlart
