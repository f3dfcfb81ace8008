//===- PreparedTestUtil.h - A fused projection artifact for tests --------===//
//
// What mla-fuse-projections' lowering produces, written by hand: y = x @
// [w1; w2]^T as one linear over the prepare program's concatenation of the
// two weights. Shared by the C API and the GPU tests of the prepare program.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_TEST_PREPAREDTESTUTIL_H
#define MLART_TEST_PREPAREDTESTUTIL_H

#include "mlart/ArtifactWriter.h"

#include <string>
#include <vector>

namespace mlart::test {

/// The serialized program: buffers "x" [t, k] (input), `w1` [n1, k] and `w2`
/// [n2, k] (weights), "y" [t, n1 + n2] (output), all of `dt`.
inline StatusOr<std::vector<uint8_t>>
fusedProjectionBytes(DType dt, int64_t t, int64_t k, int64_t n1, int64_t n2,
                     const std::string &w1 = "w1",
                     const std::string &w2 = "w2") {
  const int64_t n = n1 + n2, es = int64_t(dtypeSize(dt));
  ArtifactWriter w("fused_projection");
  const uint32_t x = w.addBuffer("x", BufferRole::Input, dt, {t, k});
  const uint32_t a = w.addBuffer(w1, BufferRole::Weight, dt, {n1, k});
  const uint32_t b = w.addBuffer(w2, BufferRole::Weight, dt, {n2, k});
  const uint32_t y = w.addBuffer("y", BufferRole::Output, dt, {t, n});
  const int64_t p = w.allocatePrepared(n * k * es);
  w.prepareCopy(w.bufferView(a), w.preparedView(p, dt, {n1, k}));
  w.prepareCopy(w.bufferView(b), w.preparedView(p + n1 * k * es, dt, {n2, k}));
  w.linear(w.bufferView(x), w.preparedView(p, dt, {n, k}), w.bufferView(y));
  return w.finish();
}

} // namespace mlart::test

#endif // MLART_TEST_PREPAREDTESTUTIL_H
