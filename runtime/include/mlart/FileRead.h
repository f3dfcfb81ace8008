//===- FileRead.h - Bounded reads of whole regular files --------*- C++ -*-===//
//
// Every file the runtime and its tools read (artifacts, .npy inputs) comes
// through readRegularFile: a path that names a directory, a FIFO or a device
// (/dev/zero) is refused before anything is read, and a file larger than
// the caller's bound is refused before anything is allocated, so a wrong
// path can neither block nor exhaust memory.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_FILEREAD_H
#define MLART_FILEREAD_H

#include "mlart/StatusOr.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlart {

/// Reads all of `path`, a regular file of at most `maxBytes` bytes.
/// Unavailable when it cannot be opened, InvalidArgument when it is not a
/// regular file, ResourceExhausted when it is larger than `maxBytes`,
/// DataLoss on a read error or when the file changes size while read.
StatusOr<std::vector<uint8_t>> readRegularFile(const std::string &path,
                                               uint64_t maxBytes);

} // namespace mlart

#endif // MLART_FILEREAD_H
