//===- FileRead.cpp - Bounded reads of whole regular files ----------------===//
#include "mlart/FileRead.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mlart {

namespace {
/// Closes the descriptor on every return path.
struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0)
      ::close(fd);
  }
};
} // namespace

StatusOr<std::vector<uint8_t>> readRegularFile(const std::string &path,
                                               uint64_t maxBytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the fstat below
  // then refuses it.
  FileDescriptor file{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (file.fd < 0)
    return unavailable("cannot open '" + path + "': " + std::strerror(errno));
  struct stat info;
  if (::fstat(file.fd, &info) != 0)
    return unavailable("cannot stat '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(info.st_mode))
    return invalidArgument("'" + path + "' is not a regular file");
  const uint64_t size = uint64_t(info.st_size);
  if (size > maxBytes)
    return resourceExhausted("'" + path + "' has " + std::to_string(size) +
                             " bytes, more than the " +
                             std::to_string(maxBytes) + " accepted");
  std::vector<uint8_t> bytes(size);
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(file.fd, bytes.data() + done, size - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return dataLoss("error reading '" + path + "': " + std::strerror(errno));
    if (n == 0)
      return dataLoss("'" + path + "' became shorter while it was read");
    done += uint64_t(n);
  }
  uint8_t extra;
  if (::read(file.fd, &extra, 1) > 0)
    return dataLoss("'" + path + "' grew while it was read");
  return bytes;
}

} // namespace mlart
