//===- FileReadTest.cpp - readRegularFile refuses what is not a file ------===//
#include "mlart/FileRead.h"
#include "mlart/Artifact.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

using namespace mlart;

namespace {

std::string tempPath(const char *name) {
  return ::testing::TempDir() + "/mlart-fileread-" + std::to_string(getpid()) +
         "-" + name;
}

TEST(FileRead, ReadsARegularFileWhole) {
  const std::string path = tempPath("data");
  {
    std::ofstream out(path, std::ios::binary);
    out << "0123456789";
  }
  StatusOr<std::vector<uint8_t>> bytes = readRegularFile(path, 10);
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  EXPECT_EQ(std::string(bytes->begin(), bytes->end()), "0123456789");
  // One byte over the bound is refused before it is read.
  StatusOr<std::vector<uint8_t>> big = readRegularFile(path, 9);
  EXPECT_EQ(big.status().code(), StatusCode::ResourceExhausted);
  EXPECT_NE(big.status().message().find("10 bytes"), std::string::npos);
  std::remove(path.c_str());
}

TEST(FileRead, RefusesDirectoriesDevicesAndFifos) {
  EXPECT_EQ(readRegularFile(::testing::TempDir(), 1 << 20).status().code(),
            StatusCode::InvalidArgument);
  // /dev/zero never ends: refused before a byte is read.
  StatusOr<std::vector<uint8_t>> zero = readRegularFile("/dev/zero", 1 << 20);
  EXPECT_EQ(zero.status().code(), StatusCode::InvalidArgument);
  EXPECT_NE(zero.status().message().find("not a regular file"),
            std::string::npos);
  // A FIFO without a writer: opening must not block.
  const std::string fifo = tempPath("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(readRegularFile(fifo, 1 << 20).status().code(),
            StatusCode::InvalidArgument);
  std::remove(fifo.c_str());
  EXPECT_EQ(readRegularFile(tempPath("missing"), 1).status().code(),
            StatusCode::Unavailable);
}

TEST(FileRead, ArtifactLoadFileUsesTheBound) {
  StatusOr<Artifact> a = Artifact::loadFile("/dev/zero");
  EXPECT_EQ(a.status().code(), StatusCode::InvalidArgument);
  const std::string path = tempPath("artifact");
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string(64, 'x');
  }
  EXPECT_EQ(Artifact::loadFile(path, 63).status().code(),
            StatusCode::ResourceExhausted);
  // Within the bound it is read and then fails as a bad artifact.
  EXPECT_EQ(Artifact::loadFile(path, 64).status().code(), StatusCode::DataLoss);
  std::remove(path.c_str());
}

} // namespace
