//===- ExecutorPrefillTest.cpp - Prefill attention run from an artifact ---===//
//
// One prefill-attention instruction with cached context and total lengths
// (as the compiler emits it), run by the Executor: the host-side context
// bound (Executor::setPrefillContextBound) reaches the kernel, changes
// nothing while it holds, and turns a longer context into an error that
// names the instruction and writes nothing.
//
//===----------------------------------------------------------------------===//
#include "mlart/Executor.h"
#include "TestUtil.h"
#include "mlart/ArtifactWriter.h"
#include "mlart/KVCache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>

namespace mlart {
namespace {

using test::HostTensor;

constexpr int64_t R = 2, NEW = 3, T = R * NEW, H = 2, NOPE = 16, ROPE = 8,
                  QK = NOPE + ROPE, LATENT = 32, VDIM = 12, BLOCK = 4,
                  MAX_BLOCKS = 4;
constexpr int32_t kContext[R] = {5, 9};

KVCacheDesc cacheDesc() {
  KVCacheDesc d;
  d.numBlocks = R * MAX_BLOCKS;
  d.blockSize = BLOCK;
  d.latentRank = LATENT;
  d.ropeDim = ROPE;
  d.dtype = DType::F32;
  return d;
}

std::vector<uint8_t> prefillProgram() {
  ArtifactWriter w("prefill");
  auto buf = [&](const char *name, BufferRole role, DType dt,
                 std::initializer_list<int64_t> sizes) {
    return w.bufferView(w.addBuffer(name, role, dt, sizes));
  };
  const uint32_t q = buf("q", BufferRole::Input, DType::F32, {T, H, QK});
  const uint32_t k = buf("k", BufferRole::Input, DType::F32, {T, H, QK});
  const uint32_t v = buf("v", BufferRole::Input, DType::F32, {T, H, VDIM});
  const uint32_t out = buf("out", BufferRole::Output, DType::F32, {T, H, VDIM});
  const uint32_t qsl =
      buf("query_start_loc", BufferRole::StepMetadata, DType::I32, {R + 1});
  const uint32_t table = buf("block_table", BufferRole::StepMetadata,
                             DType::I32, {R, MAX_BLOCKS});
  const uint32_t seqLens =
      buf("seq_lens", BufferRole::StepMetadata, DType::I32, {R});
  const uint32_t wUK =
      buf("w_uk", BufferRole::Weight, DType::F32, {H, NOPE, LATENT});
  const uint32_t wUV =
      buf("w_uv", BufferRole::Weight, DType::F32, {H, LATENT, VDIM});
  const uint32_t cache = w.addCache("kv_cache", cacheDesc());
  w.prefillAttentionTotalLens(q, k, v, qsl, out, 0.2f, kNoIndex, cache, table,
                              seqLens, wUK, wUV, "layer0.prefill_attention");
  StatusOr<std::vector<uint8_t>> bytes = w.finish();
  EXPECT_TRUE(bytes.ok()) << bytes.status().toString();
  return bytes.ok() ? *bytes : std::vector<uint8_t>();
}

class ExecutorPrefill : public ::testing::Test {
protected:
  void SetUp() override {
    device = createCpuDevice();
    const std::vector<uint8_t> bytes = prefillProgram();
    StatusOr<Artifact> a = Artifact::load(bytes.data(), bytes.size());
    ASSERT_TRUE(a.ok()) << a.status().toString();
    StatusOr<Executor> e = Executor::create(*a, *device);
    ASSERT_TRUE(e.ok()) << e.status().toString();
    exec.emplace(std::move(*e));
    StatusOr<KVCache> c = KVCache::create(*device, cacheDesc());
    ASSERT_TRUE(c.ok());
    cache.emplace(std::move(*c));
    std::mt19937 rng(std::random_device{}());
    HostTensor rows(DType::F32, {cacheDesc().numSlots(), LATENT + ROPE});
    for (HostTensor *t : {&q, &k, &v, &wUK, &wUV, &rows})
      test::fillRandom(*t, rng, 0.5f);
    ASSERT_TRUE(cache->writeBytes(0, rows.bytes.data(),
                                  rows.bytes.size() - 1).ok());
    qsl = test::indexTensor({0, NEW, 2 * NEW}, DType::I32);
    std::vector<int64_t> tab;
    for (int64_t i = 0; i < R * MAX_BLOCKS; ++i)
      tab.push_back(R * MAX_BLOCKS - 1 - i);
    table = test::indexTensor(tab, DType::I32);
    table.ref.rank = 2;
    table.ref.sizes[0] = R;
    table.ref.sizes[1] = MAX_BLOCKS;
    table.ref.strides[0] = MAX_BLOCKS;
    table.ref.strides[1] = 1;
    seqLens = test::indexTensor({kContext[0] + NEW, kContext[1] + NEW},
                                DType::I32);
    for (auto [name, t] : {std::pair{"q", &q}, {"k", &k}, {"v", &v},
                           {"out", &out}, {"query_start_loc", &qsl},
                           {"block_table", &table}, {"seq_lens", &seqLens},
                           {"w_uk", &wUK}, {"w_uv", &wUV}})
      ASSERT_TRUE(exec->bind(name, t->ref).ok()) << name;
    ASSERT_TRUE(exec->bindCache("kv_cache", *cache).ok());
  }

  /// Runs the step with out poisoned (NaN) first.
  Status run() {
    for (int64_t i = 0; i < out.numel(); ++i)
      out.set(i, NAN);
    return exec->run();
  }

  std::unique_ptr<Device> device;
  std::optional<Executor> exec;
  std::optional<KVCache> cache;
  HostTensor q{DType::F32, {T, H, QK}}, k{DType::F32, {T, H, QK}},
      v{DType::F32, {T, H, VDIM}}, out{DType::F32, {T, H, VDIM}},
      wUK{DType::F32, {H, NOPE, LATENT}}, wUV{DType::F32, {H, LATENT, VDIM}},
      qsl, table, seqLens;
};

TEST_F(ExecutorPrefill, ContextBoundReachesTheKernel) {
  EXPECT_EQ(exec->prefillContextBound(), 0);
  ASSERT_TRUE(run().ok());
  const std::vector<uint8_t> unbounded = out.bytes;
  for (int64_t i = 0; i < out.numel(); ++i)
    ASSERT_TRUE(std::isfinite(out.get(i))) << i;

  // The longest context is 9 tokens: a bound of 9 is the unbounded result.
  ASSERT_TRUE(exec->setPrefillContextBound(kContext[1]).ok());
  ASSERT_TRUE(run().ok());
  EXPECT_EQ(out.bytes, unbounded);

  // One less, and request 1 is refused before anything is written.
  ASSERT_TRUE(exec->setPrefillContextBound(kContext[1] - 1).ok());
  Status s = run();
  EXPECT_EQ(s.code(), StatusCode::OutOfRange) << s.toString();
  EXPECT_EQ(s.message().rfind(
                "instruction #0 prefill_attention (layer0.prefill_attention)",
                0),
            0u)
      << s.toString();
  EXPECT_NE(s.message().find("contextLenBound = 8"), std::string::npos)
      << s.toString();
  for (int64_t i = 0; i < out.numel(); ++i)
    ASSERT_TRUE(std::isnan(out.get(i))) << "out[" << i << "] was written";

  EXPECT_EQ(exec->setPrefillContextBound(-1).code(),
            StatusCode::InvalidArgument);
  EXPECT_EQ(exec->prefillContextBound(), kContext[1] - 1) << "kept";
  ASSERT_TRUE(exec->setPrefillContextBound(0).ok());
  ASSERT_TRUE(run().ok());
  EXPECT_EQ(out.bytes, unbounded);
}

} // namespace
} // namespace mlart
