//===- DecodeLayerFixture.h - A small decode layer built by hand -*- C++
//-*-===//
//
// The program the compiler emits for one DeepSeek decode layer, written by
// hand with ArtifactWriter at small dimensions, and the caller-side data one
// step binds to it. Shared by the executor and concurrency tests.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_TEST_DECODELAYERFIXTURE_H
#define MLART_TEST_DECODELAYERFIXTURE_H

#include "TestUtil.h"
#include "mlart/ArtifactWriter.h"
#include "mlart/Executor.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace mlart {
namespace test {
namespace decode_layer {
// Layer dimensions: small, but every axis distinct so a swapped stride shows.
constexpr int64_t T = 2;       // decode batch, one token per request
constexpr int64_t D = 48;      // hidden
constexpr int64_t H = 3;       // heads
constexpr int64_t NOPE = 16;   // qk_nope_head_dim
constexpr int64_t ROPE = 8;    // qk_rope_head_dim
constexpr int64_t LATENT = 32; // kv_lora_rank
constexpr int64_t VDIM = 12;   // v_head_dim
constexpr int64_t QK = NOPE + ROPE;
constexpr int64_t ROW = LATENT + ROPE;
constexpr int64_t BLOCK = 4, BLOCKS = 8, MAX_BLOCKS = 4, MAX_POS = 64;
constexpr float kEps = 1e-6f;
inline const float kScale = 1.0f / std::sqrt(float(QK));

inline KVCacheDesc cacheDesc() {
  KVCacheDesc d;
  d.numBlocks = BLOCKS;
  d.blockSize = BLOCK;
  d.latentRank = LATENT;
  d.ropeDim = ROPE;
  d.dtype = DType::BF16;
  return d;
}

/// Arena layout shared by the artifact and the direct reference.
struct Arena {
  int64_t xn, qp, kv, kvn, qfull, olat, o, attn, qlat;
};

/// Builds the decode layer. With `useQConcat` the absorbed query goes to a
/// temporary and q_concat assembles the query; otherwise q_absorb writes
/// straight into a strided view of the assembled query and a copy writes
/// q_pe next to it.
inline ArtifactWriter decodeLayer(bool useQConcat, Arena &ar) {
  ArtifactWriter w("decode_layer");
  const uint32_t hidden =
      w.addBuffer("hidden", BufferRole::Input, DType::BF16, {T, D});
  const uint32_t out =
      w.addBuffer("out", BufferRole::Output, DType::BF16, {T, D});
  const uint32_t wNorm =
      w.addBuffer("w_norm", BufferRole::Weight, DType::BF16, {D});
  const uint32_t wQ =
      w.addBuffer("w_q", BufferRole::Weight, DType::BF16, {H * QK, D});
  const uint32_t wKva =
      w.addBuffer("w_kv_a", BufferRole::Weight, DType::BF16, {ROW, D});
  const uint32_t wKvNorm =
      w.addBuffer("w_kv_norm", BufferRole::Weight, DType::BF16, {LATENT});
  const uint32_t wUK =
      w.addBuffer("w_uk", BufferRole::Weight, DType::BF16, {H, NOPE, LATENT});
  const uint32_t wUV =
      w.addBuffer("w_uv", BufferRole::Weight, DType::BF16, {H, LATENT, VDIM});
  const uint32_t wO =
      w.addBuffer("w_o", BufferRole::Weight, DType::BF16, {D, H * VDIM});
  const uint32_t cosSin =
      w.addBuffer("cos_sin", BufferRole::Weight, DType::F32, {MAX_POS, ROPE});
  const uint32_t positions =
      w.addBuffer("positions", BufferRole::StepMetadata, DType::I64, {T});
  const uint32_t slots =
      w.addBuffer("slot_mapping", BufferRole::StepMetadata, DType::I64, {T});
  const uint32_t blockTable = w.addBuffer(
      "block_table", BufferRole::StepMetadata, DType::I32, {T, MAX_BLOCKS});
  const uint32_t seqLens =
      w.addBuffer("seq_lens", BufferRole::StepMetadata, DType::I32, {T});
  const uint32_t cache = w.addCache("kv_cache", cacheDesc());

  ar.xn = w.allocateArena(T * D * 2);
  ar.qp = w.allocateArena(T * H * QK * 2);
  ar.kv = w.allocateArena(T * ROW * 2);
  ar.kvn = w.allocateArena(T * LATENT * 2);
  ar.qfull = w.allocateArena(T * H * ROW * 2);
  ar.olat = w.allocateArena(T * H * LATENT * 2);
  ar.o = w.allocateArena(T * H * VDIM * 2);
  ar.attn = w.allocateArena(T * D * 2);
  ar.qlat = useQConcat ? w.allocateArena(T * H * LATENT * 2) : -1;

  const uint32_t hiddenV = w.bufferView(hidden);
  const uint32_t xn = w.arenaView(ar.xn, DType::BF16, {T, D});
  const uint32_t qp = w.arenaView(ar.qp, DType::BF16, {T, H * QK});
  const uint32_t qNope =
      w.arenaView(ar.qp, DType::BF16, {T, H, NOPE}, {H * QK, QK, 1});
  const uint32_t qPe =
      w.arenaView(ar.qp + NOPE * 2, DType::BF16, {T, H, ROPE}, {H * QK, QK, 1});
  const uint32_t kv = w.arenaView(ar.kv, DType::BF16, {T, ROW});
  const uint32_t kvC = w.arenaView(ar.kv, DType::BF16, {T, LATENT}, {ROW, 1});
  const uint32_t kPe =
      w.arenaView(ar.kv + LATENT * 2, DType::BF16, {T, ROPE}, {ROW, 1});
  const uint32_t kvn = w.arenaView(ar.kvn, DType::BF16, {T, LATENT});
  const uint32_t qFull = w.arenaView(ar.qfull, DType::BF16, {T, H, ROW});
  const uint32_t qFullLatent =
      w.arenaView(ar.qfull, DType::BF16, {T, H, LATENT}, {H * ROW, ROW, 1});
  const uint32_t qFullPe = w.arenaView(ar.qfull + LATENT * 2, DType::BF16,
                                       {T, H, ROPE}, {H * ROW, ROW, 1});
  const uint32_t oLat = w.arenaView(ar.olat, DType::BF16, {T, H, LATENT});
  const uint32_t o3 = w.arenaView(ar.o, DType::BF16, {T, H, VDIM});
  const uint32_t o2 = w.arenaView(ar.o, DType::BF16, {T, H * VDIM});
  const uint32_t attn = w.arenaView(ar.attn, DType::BF16, {T, D});

  w.rmsNorm(hiddenV, w.bufferView(wNorm), xn, kEps, "layer0.input_norm");
  w.linear(xn, w.bufferView(wQ), qp, "layer0.q_proj");
  w.linear(xn, w.bufferView(wKva), kv, "layer0.kv_a_proj");
  w.rmsNorm(kvC, w.bufferView(wKvNorm), kvn, kEps, "layer0.kv_a_norm");
  const uint32_t posV = w.bufferView(positions);
  const uint32_t csV = w.bufferView(cosSin);
  w.rope(qPe, posV, csV, RopeStyle::GptJ, "layer0.q_rope");
  w.rope(kPe, posV, csV, RopeStyle::GptJ, "layer0.k_rope");
  w.cacheUpdate(cache, kvn, kPe, w.bufferView(slots), "layer0.kv_cache_update");
  if (useQConcat) {
    const uint32_t qLat = w.arenaView(ar.qlat, DType::BF16, {T, H, LATENT});
    w.qAbsorb(qNope, w.bufferView(wUK), qLat, "layer0.q_absorb");
    w.qConcat(qLat, qPe, qFull, "layer0.q_concat");
  } else {
    w.qAbsorb(qNope, w.bufferView(wUK), qFullLatent, "layer0.q_absorb");
    w.copy(qPe, qFullPe, "layer0.q_pe_copy");
  }
  w.decodeAttention(cache, qFull, w.bufferView(blockTable),
                    w.bufferView(seqLens), oLat, kScale, kNoIndex, 2,
                    "layer0.decode_attention");
  w.vUp(oLat, w.bufferView(wUV), o3, "layer0.v_up");
  w.linear(o2, w.bufferView(wO), attn, "layer0.o_proj");
  w.add(hiddenV, attn, w.bufferView(out), "layer0.residual");
  return w;
}

/// Caller-side data of the layer: weights, one step's inputs and metadata.
struct LayerData {
  HostTensor hidden{DType::BF16, {T, D}}, out{DType::BF16, {T, D}};
  HostTensor wNorm{DType::BF16, {D}}, wQ{DType::BF16, {H * QK, D}};
  HostTensor wKva{DType::BF16, {ROW, D}}, wKvNorm{DType::BF16, {LATENT}};
  HostTensor wUK{DType::BF16, {H, NOPE, LATENT}};
  HostTensor wUV{DType::BF16, {H, LATENT, VDIM}};
  HostTensor wO{DType::BF16, {D, H * VDIM}};
  HostTensor cosSin;
  HostTensor positions{DType::I64, {T}}, slots{DType::I64, {T}};
  HostTensor blockTable{DType::I32, {T, MAX_BLOCKS}}, seqLens{DType::I32, {T}};
  std::vector<int64_t> contextLens = {5, 9};

  explicit LayerData(std::mt19937 &rng) {
    for (HostTensor *t :
         {&hidden, &wNorm, &wQ, &wKva, &wKvNorm, &wUK, &wUV, &wO})
      test::fillRandom(*t, rng, 0.5f);
    cosSin = test::cosSinTable(MAX_POS, ROPE, 10000.0);
    const int32_t table[T][MAX_BLOCKS] = {{1, 2, 0, 0}, {3, 4, 5, 0}};
    std::memcpy(blockTable.bytes.data(), table, sizeof(table));
    setStep();
  }

  /// Positions, slots and lengths for the next token of each request.
  void setStep() {
    auto *pos = reinterpret_cast<int64_t *>(positions.bytes.data());
    auto *slot = reinterpret_cast<int64_t *>(slots.bytes.data());
    auto *lens = reinterpret_cast<int32_t *>(seqLens.bytes.data());
    auto *table = reinterpret_cast<const int32_t *>(blockTable.bytes.data());
    for (int64_t b = 0; b < T; ++b) {
      const int64_t p = contextLens[size_t(b)];
      pos[b] = p;
      slot[b] = table[b * MAX_BLOCKS + p / BLOCK] * BLOCK + p % BLOCK;
      lens[b] = int32_t(p + 1);
    }
  }

  Status bindAll(Executor &e) {
    const std::pair<const char *, HostTensor *> all[] = {
        {"hidden", &hidden},
        {"out", &out},
        {"w_norm", &wNorm},
        {"w_q", &wQ},
        {"w_kv_a", &wKva},
        {"w_kv_norm", &wKvNorm},
        {"w_uk", &wUK},
        {"w_uv", &wUV},
        {"w_o", &wO},
        {"cos_sin", &cosSin},
        {"positions", &positions},
        {"slot_mapping", &slots},
        {"block_table", &blockTable},
        {"seq_lens", &seqLens}};
    for (const auto &[name, t] : all)
      MLART_RETURN_IF_ERROR(e.bind(name, t->ref));
    return Status::success();
  }
};

} // namespace decode_layer
} // namespace test
} // namespace mlart

#endif // MLART_TEST_DECODELAYERFIXTURE_H
