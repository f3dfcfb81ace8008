//===- CApiTestUtil.h - Shared helpers of the C API tests -------*- C++ -*-===//
#ifndef MLART_TEST_CAPITESTUTIL_H
#define MLART_TEST_CAPITESTUTIL_H

#include "mlart/ArtifactWriter.h"
#include "mlart/mlart.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mlart::capitest {

/// Frees a status at scope exit and exposes its code and message.
struct CStatus {
  mlart_status s;
  explicit CStatus(mlart_status s) : s(s) {}
  ~CStatus() { mlart_status_free(s); }
  CStatus(const CStatus &) = delete;
  CStatus &operator=(const CStatus &) = delete;
  mlart_status_code code() const { return mlart_status_get_code(s); }
  std::string message() const { return mlart_status_message(s); }
  bool mentions(const char *text) const {
    return message().find(text) != std::string::npos;
  }
};

/// The executor tests' program: f32 inputs a and b of [tokens, latent +
/// rope]; out = a + b; then out's rows become the rows of "cache" (2 blocks
/// of 4, f32) at "slots".
inline std::vector<uint8_t> addAndCacheProgram(const char *name,
                                               int64_t tokens, int64_t latent,
                                               int64_t rope) {
  const int64_t row = latent + rope;
  ArtifactWriter w(name);
  const uint32_t a =
      w.addBuffer("a", BufferRole::Input, DType::F32, {tokens, row});
  const uint32_t b =
      w.addBuffer("b", BufferRole::Input, DType::F32, {tokens, row});
  const uint32_t out =
      w.addBuffer("out", BufferRole::Output, DType::F32, {tokens, row});
  const uint32_t slots =
      w.addBuffer("slots", BufferRole::StepMetadata, DType::I64, {tokens});
  KVCacheDesc d;
  d.numBlocks = 2;
  d.blockSize = 4;
  d.latentRank = latent;
  d.ropeDim = rope;
  d.dtype = DType::F32;
  const uint32_t cache = w.addCache("cache", d);
  w.add(w.bufferView(a), w.bufferView(b), w.bufferView(out), "sum");
  const uint32_t kvC =
      w.bufferView(out, 0, DType::F32, {tokens, latent}, {row, 1});
  const uint32_t kPe =
      w.bufferView(out, latent * 4, DType::F32, {tokens, rope}, {row, 1});
  w.cacheUpdate(cache, kvC, kPe, w.bufferView(slots), "write");
  StatusOr<std::vector<uint8_t>> bytes = w.finish();
  EXPECT_TRUE(bytes.ok()) << bytes.status().toString();
  return bytes.ok() ? *bytes : std::vector<uint8_t>();
}

} // namespace mlart::capitest

#endif // MLART_TEST_CAPITESTUTIL_H
