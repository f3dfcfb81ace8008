//===- NpyIO.cpp - Minimal NumPy .npy reader and writer for mla-run -------===//
#include "NpyIO.h"

#include "mlart/FileRead.h"

#include <cstdio>
#include <cstring>

using namespace mlart;

namespace mlarun {

namespace {

size_t descrItemSize(const std::string &descr) {
  if (descr == "<f4" || descr == "<i4")
    return 4;
  if (descr == "<f2" || descr == "<u2" || descr == "<V2" || descr == "|V2")
    return 2;
  if (descr == "<f8" || descr == "<i8")
    return 8;
  return 0;
}

bool descrMatches(const std::string &descr, DType dtype) {
  switch (dtype) {
  case DType::F32:
    return descr == "<f4";
  case DType::F16:
    return descr == "<f2";
  case DType::BF16:
    return descr == "<u2" || descr == "<V2" || descr == "|V2";
  case DType::I32:
    return descr == "<i4";
  case DType::I64:
    return descr == "<i8";
  case DType::F64:
    return descr == "<f8";
  default:
    return false;
  }
}

std::string shapeString(const int64_t *sizes, size_t rank) {
  std::string s = "(";
  for (size_t i = 0; i < rank; ++i)
    s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + (rank == 1 ? ",)" : ")");
}

/// Finds `'key'` in the header dict and returns the position after its ':'.
bool findKey(const std::string &h, const char *key, size_t &pos) {
  for (const char *quote : {"'", "\""}) {
    std::string k = std::string(quote) + key + quote;
    size_t at = h.find(k);
    if (at == std::string::npos)
      continue;
    at += k.size();
    while (at < h.size() && h[at] == ' ')
      ++at;
    if (at >= h.size() || h[at] != ':')
      return false;
    pos = at + 1;
    while (pos < h.size() && h[pos] == ' ')
      ++pos;
    return true;
  }
  return false;
}

} // namespace

StatusOr<NpyArray> parseNpy(const uint8_t *bytes, size_t size) {
  static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size < 10 || std::memcmp(bytes, magic, 6) != 0)
    return dataLoss("not a .npy file (bad magic)");
  uint8_t major = bytes[6];
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = size_t(bytes[8]) | size_t(bytes[9]) << 8;
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12)
      return dataLoss(".npy header truncated");
    headerLen = size_t(bytes[8]) | size_t(bytes[9]) << 8 |
                size_t(bytes[10]) << 16 | size_t(bytes[11]) << 24;
    headerStart = 12;
  } else {
    return invalidArgument("unsupported .npy format version " +
                           std::to_string(major));
  }
  if (headerLen > size - headerStart)
    return dataLoss(".npy header truncated");
  std::string h(reinterpret_cast<const char *>(bytes + headerStart),
                headerLen);

  NpyArray array;
  size_t pos;
  // descr
  if (!findKey(h, "descr", pos) || pos >= h.size() ||
      (h[pos] != '\'' && h[pos] != '"'))
    return invalidArgument(".npy header has no 'descr' string");
  size_t end = h.find(h[pos], pos + 1);
  if (end == std::string::npos)
    return invalidArgument(".npy header: unterminated 'descr'");
  array.descr = h.substr(pos + 1, end - pos - 1);
  size_t itemSize = descrItemSize(array.descr);
  if (itemSize == 0)
    return invalidArgument("unsupported .npy dtype '" + array.descr +
                           "' (supported: <f4 <f2 <f8 <i4 <i8, bf16 as <u2 "
                           "or <V2; little-endian only)");
  // fortran_order
  if (!findKey(h, "fortran_order", pos))
    return invalidArgument(".npy header has no 'fortran_order'");
  if (h.compare(pos, 4, "True") == 0)
    return invalidArgument("Fortran-order .npy arrays are not supported "
                           "(save a C-contiguous array)");
  if (h.compare(pos, 5, "False") != 0)
    return invalidArgument(".npy header: bad 'fortran_order'");
  // shape
  if (!findKey(h, "shape", pos) || pos >= h.size() || h[pos] != '(')
    return invalidArgument(".npy header has no 'shape' tuple");
  end = h.find(')', pos);
  if (end == std::string::npos)
    return invalidArgument(".npy header: unterminated 'shape'");
  uint64_t elements = 1;
  const uint64_t limit = uint64_t(1) << 48;
  size_t i = pos + 1;
  while (i < end) {
    while (i < end && (h[i] == ' ' || h[i] == ','))
      ++i;
    if (i >= end)
      break;
    if (h[i] < '0' || h[i] > '9')
      return invalidArgument(".npy header: bad 'shape' entry");
    uint64_t v = 0;
    while (i < end && h[i] >= '0' && h[i] <= '9') {
      v = v * 10 + uint64_t(h[i] - '0');
      if (v > limit)
        return invalidArgument(".npy header: 'shape' entry too large");
      ++i;
    }
    if (i < end && h[i] == 'L') // Python 2 longs
      ++i;
    if (i < end && h[i] != ',' && h[i] != ' ')
      return invalidArgument(".npy header: bad 'shape' entry");
    array.shape.push_back(int64_t(v));
    if (v != 0 && elements > limit / v)
      return invalidArgument(".npy array too large");
    elements *= v;
    if (array.shape.size() > 8)
      return invalidArgument(".npy array has too many dimensions");
  }
  uint64_t expected = elements * itemSize;
  size_t dataStart = headerStart + headerLen;
  if (size - dataStart < expected)
    return dataLoss(".npy data truncated: shape " +
                    shapeString(array.shape.data(), array.shape.size()) +
                    " needs " + std::to_string(expected) + " bytes, the file has " +
                    std::to_string(size - dataStart));
  if (size - dataStart > expected)
    return dataLoss(".npy file has " + std::to_string(size - dataStart - expected) +
                    " trailing bytes after the data");
  array.data.assign(bytes + dataStart, bytes + dataStart + expected);
  return array;
}

StatusOr<NpyArray> readNpy(const std::string &path, uint64_t maxBytes) {
  MLART_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                         readRegularFile(path, maxBytes));
  StatusOr<NpyArray> array = parseNpy(bytes.data(), bytes.size());
  if (!array.ok())
    return Status(array.status().code(),
                  path + ": " + array.status().message());
  return array;
}

Status checkNpyMatches(const NpyArray &array, DType dtype,
                       const int64_t *sizes, int rank) {
  bool shapeOk = array.shape.size() == size_t(rank);
  for (int d = 0; shapeOk && d < rank; ++d)
    shapeOk = array.shape[size_t(d)] == sizes[d];
  if (descrMatches(array.descr, dtype) && shapeOk)
    return Status::success();
  return invalidArgument(
      "the .npy array is '" + array.descr + "' " +
      shapeString(array.shape.data(), array.shape.size()) +
      ", the artifact declares " + dtypeName(dtype) + " " +
      shapeString(sizes, size_t(rank)) +
      (dtype == DType::BF16 ? " (bf16: store raw bits as '<u2' or '<V2')"
                            : ""));
}

Status writeNpyF32(const std::string &path, const std::vector<int64_t> &shape,
                   const std::vector<float> &values) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " +
                       shapeString(shape.data(), shape.size()) + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return unavailable("cannot create '" + path + "'");
  uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                     uint8_t(header.size() & 0xff),
                     uint8_t(header.size() >> 8)};
  bool ok = std::fwrite(pre, 1, 10, f) == 10 &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size();
  for (float v : values) {
    uint8_t le[4];
    uint32_t u = floatBits(v);
    for (int b = 0; b < 4; ++b)
      le[b] = uint8_t(u >> (8 * b));
    ok = ok && std::fwrite(le, 1, 4, f) == 4;
  }
  ok = std::fclose(f) == 0 && ok;
  return ok ? Status::success() : dataLoss("error writing '" + path + "'");
}

} // namespace mlarun
