//===- NpyIO.h - Minimal NumPy .npy reader and writer for mla-run ---------===//
//
// Reads the .npy files mla-run binds to buffers (--input NAME=FILE.npy) and
// writes its outputs (--dump-output). Supported: format versions 1.0, 2.0
// and 3.0, C order, little-endian '<f4', '<f2', '<f8', '<i4', '<i8', and
// bf16 stored as 2-byte raw values ('<u2', '<V2' or '|V2'). Anything else,
// and any truncated or malformed file, is an error Status, never a crash.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_RUN_NPYIO_H
#define MLA_RUN_NPYIO_H

#include "mlart/DType.h"
#include "mlart/StatusOr.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlarun {

/// A decoded .npy file.
struct NpyArray {
  std::string descr;           ///< e.g. "<f4"
  std::vector<int64_t> shape;  ///< C order
  std::vector<uint8_t> data;   ///< exactly product(shape) * itemsize bytes
};

/// Parses the bytes of a .npy file.
mlart::StatusOr<NpyArray> parseNpy(const uint8_t *bytes, size_t size);
/// The most a .npy header may add to its data (format 1.0 headers are at
/// most 64 KiB).
constexpr uint64_t kMaxNpyHeaderBytes = uint64_t(1) << 16;
/// Reads and parses `path`, a regular file of at most `maxBytes` bytes
/// (mla-run passes the bound buffer's size plus kMaxNpyHeaderBytes).
mlart::StatusOr<NpyArray> readNpy(const std::string &path, uint64_t maxBytes);

/// Checks that `array` holds exactly `dtype` elements of shape `sizes`
/// (bf16 accepts '<u2' / '<V2' / '|V2'); the message names both sides.
mlart::Status checkNpyMatches(const NpyArray &array, mlart::DType dtype,
                              const int64_t *sizes, int rank);

/// Writes `values` as a float32 C-order .npy (format 1.0) of `shape`.
mlart::Status writeNpyF32(const std::string &path,
                          const std::vector<int64_t> &shape,
                          const std::vector<float> &values);

} // namespace mlarun

#endif // MLA_RUN_NPYIO_H
